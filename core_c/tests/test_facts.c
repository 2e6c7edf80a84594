/* test_facts.c - the facts CSV reader (lh_facts.h) and the batch query (lh_query.h) under
 * AddressSanitizer + UBSan: a render -> parse round trip, every reader message we can name, the
 * query's JSONL rows and sums on golden rows, %g formatting, and a mutation fuzz loop over
 * exact-size heap buffers, rows whose quoted fields hold line breaks. Exit status 0 = all passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_test.h"
#include "litehit.h"

static int parse(lh_facts_reader *r, const char *text, int extended, lh_facts_table *t, char *err) {
  return lh_facts_parse(r, text, strlen(text), 2, extended, 0, t, err, LH_ERR_LEN);
}

/* Rows rendered by lh_facts_render read back as the same columns. */
static void test_round_trip(lh_facts_reader *r) {
  const char ids[] = "r1id,\"q";
  int64_t id_off[] = {0, 2, 7}, ts[] = {1000, -5};
  const char lanes[] = "i1";
  int64_t lane_off[] = {0, 2}, bs[] = {4}, bb[] = {16384};
  int64_t src[] = {0, 1}, lens[] = {13, 12}, lo[] = {0, 2}, hi[] = {2, 2};
  int32_t lane[] = {0, 0};
  int64_t segs[] = {1, 2, 4, 1}, blocks[] = {3, 3};
  uint8_t cuts[] = {LH_CUT_NONE, LH_CUT_COLD};
  char err[LH_ERR_LEN], buf[512];
  size_t n = 0;
  CHECK(lh_facts_render_bound(id_off, lane_off, src, lane, lo, hi, 2, 1) <= sizeof buf);
  CHECK(lh_facts_render(ids, id_off, ts, lanes, lane_off, bs, bb, NULL, src, lane, lens, lo, hi, segs, 1, blocks, cuts,
                        2, buf, sizeof buf, &n, err, sizeof err) == LH_OK);
  lh_facts_table t;
  CHECK(lh_facts_parse(r, buf, n, 2, 1, 0, &t, err, sizeof err) == LH_OK);
  CHECK(t.n_rows == 2 && t.lines == 2 && t.error_line == 0 && t.line[0] == 2 && t.line[1] == 3);
  CHECK(t.id_offsets[1] == 2 && t.id_offsets[2] == 7 && memcmp(t.ids, "r1id,\"q", 7) == 0);
  CHECK(t.n_instances == 1 && t.instance[0] == 0 && t.instance[1] == 0 && memcmp(t.instance_names, "i1", 2) == 0);
  CHECK(t.timestamp[0] == 1000 && t.timestamp[1] == -5 && t.input_len[0] == 13 && t.input_len[1] == 12);
  CHECK(t.block_size[1] == 4 && t.block_bytes[1] == 16384 && t.blocks[0] == 3 && t.blocks[1] == 3);
  CHECK(t.cut[0] == LH_CUT_NONE && t.cut[1] == LH_CUT_COLD);
  CHECK(t.n_segs == 2 && t.seg_offsets[1] == 2 && t.seg_offsets[2] == 2);
  CHECK(t.segs[0] == 1 && t.segs[1] == 2 && t.segs[2] == 4 && t.segs[3] == 1);
}

/* Hybrid lanes' rows (HYBRID_G5.md 3.3): "bytes:" on write; bytes:, mamba:, rle: and untagged on
 * read; a byte-step row's thresholds may exceed INT64_MAX; the query projects them in bytes and
 * refuses a block capacity naming the line and instance. */
static void test_byte_steps(lh_facts_reader *r) {
  const char ids[] = "r1r2";
  int64_t id_off[] = {0, 2, 4}, ts[] = {1000, 2000};
  const char lanes[] = "m1";
  int64_t lane_off[] = {0, 2}, bs[] = {4}, bb[] = {16384};
  uint8_t steps[] = {LH_FACTS_BYTES};
  int64_t src[] = {0, 1}, lens[] = {17, 17}, lo[] = {0, 0}, hi[] = {0, 2};
  int32_t lane[] = {0, 0};
  int64_t segs[] = {53248, 3, 73728, 4};
  char err[LH_ERR_LEN], buf[512];
  size_t n = 0;
  CHECK(lh_facts_render(ids, id_off, ts, lanes, lane_off, bs, bb, steps, src, lane, lens, lo, hi, segs, 0, NULL, NULL,
                        2, buf, sizeof buf, &n, err, sizeof err) == LH_OK);
  const char *want = "r1,m1,1000,17,4,16384,\"bytes:[]\"\nr2,m1,2000,17,4,16384,\"bytes:[[53248,3],[73728,4]]\"\n";
  CHECK(n == strlen(want) && memcmp(buf, want, n) == 0);
  lh_facts_table t;
  const char *rows =
      "r1,m1,1000,17,4,16384,\"bytes:[]\"\nr2,m1,2000,17,4,16384,\"bytes:[[53248,3],[73728,4]]\"\n"
      "t,i,1,20,4,4,\"mamba:[[4096,1],[18446744073709551615,2]]\"\nt,i,1,20,4,4,\"rle:[[1,2]]\"\n"
      "t,i,1,20,4,4,\"[[1,2]]\"\n";
  CHECK(parse(r, rows, 0, &t, err) == LH_OK && t.n_rows == 5);
  CHECK(t.step[0] == 1 && t.step[1] == 1 && t.step[2] == 1 && t.step[3] == 0 && t.step[4] == 0);
  CHECK(t.seg_offsets[1] == 0 && t.seg_offsets[2] == 2 && t.segs[0] == 53248 && t.segs[3] == 4);
  CHECK((uint64_t)t.segs[6] == UINT64_MAX && t.segs[8] == 1 && t.segs[9] == 2);
  uint64_t value[] = {53248, 0}, blocks[4] = {0}, tokens[4] = {0}, reqs[2] = {0}, input[2] = {0};
  uint8_t kind[] = {LH_SLOT_BYTES, LH_SLOT_INFINITE};
  int32_t group[] = {0, 0, 1, 1, 1};
  size_t done = 0;
  CHECK(lh_query_chunk(&t, 0, value, kind, 2, group, blocks, tokens, reqs, input, NULL, 0, NULL, &done, err,
                       sizeof err) == LH_OK);
  CHECK(blocks[0] == 3 && blocks[1] == 4 && tokens[0] == 12 && input[0] == 34);
  CHECK(blocks[2] == 1 + 2 + 2 && blocks[3] == 2 + 2 + 2); /* 53248 B: mamba row 1; RLE rows at 53248/4 blocks */
  uint8_t unit[] = {LH_SLOT_BLOCKS};
  CHECK(lh_query_chunk(&t, 0, value, unit, 1, group, blocks, tokens, reqs, input, NULL, 0, NULL, &done, err,
                       sizeof err) == LH_EINVAL);
  CHECK(done == 0 && strstr(err, "facts line 2: instance m1 is a hybrid lane") != NULL);
  const char *bad[][2] = {
      {"a,i,1,16,4,100,\"bytes:[[0,1]]\"", "hit_curve point 1 must be above 0"},
      {"a,i,1,16,4,100,\"bytes:[[5,2],[5,3]]\"", "hit_curve point 2 must be above 0 and above the previous"},
      {"a,i,1,16,4,100,\"bytes:[[5,2],[6,2]]\"", "hit_curve point 2 must be above 0 and above the previous"},
      {"a,i,1,16,4,100,\"bytes:[[5,5]]\"", "hit_curve has 5 hit blocks but the request has only 4 complete blocks"},
      {"a,i,1,16,4,100,\"foo:[[1,1]]\"", "hit_curve must start with '['"},
      {"a,i,1,16,4,100,\"bytes:[[18446744073709551616,1]]\"", "hit_curve segment start is not a valid integer"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(parse(r, bad[i][0], 0, &t, err) == LH_EPARSE);
    if (strstr(err, bad[i][1]) == NULL) fprintf(stderr, "byte-step message %zu: got %s\n", i, err);
    CHECK(strstr(err, bad[i][1]) != NULL);
  }
}

/* Every reason the reader gives, verbatim: rows are rejected with their line and message. */
static void test_messages(lh_facts_reader *r) {
  const char *bad[][2] = {
      {"a,i,1,16,4,100", "expected 7 fields, got 6"},
      {"a,i,x,16,4,100,\"[[1,2]]\"", "timestamp_ns is not a valid integer: x"},
      {"a,i,,16,4,100,\"[[1,2]]\"", "timestamp_ns is empty"},
      {"a,i,1,-16,4,100,\"[[1,2]]\"", "input_token_len is not a valid unsigned integer: -16"},
      {"a,i,9223372036854775808,16,4,100,\"[[1,2]]\"", "timestamp_ns is not a valid integer: 9223372036854775808"},
      {"a,i,1,16,4,18446744073709551616,\"[[1,2]]\"", "block_bytes is not a valid unsigned integer"},
      {"a,i,1,16,0,100,\"[[1,2]]\"", "block_bytes/block_size_tokens must be positive"},
      {"a,i,1,16,4,100,\"[[0,2]]\"",
       "hit_curve segment 1 starts at 0; starts must be >= 1 and leave a gap after the previous segment"},
      {"a,i,1,16,4,100,\"[[1,0]]\"", "hit_curve segment 1 has length 0 (must be >= 1)"},
      {"a,i,1,16,4,100,\"[[1,2],[2,1]]\"", "hit_curve segment 2 starts at 2;"},
      {"a,i,1,16,4,100,\"[[1,5]]\"", "hit_curve has 5 hit blocks but the request has only 4 complete blocks"},
      {"a,i,1,16,4,100,\"[[1,2]] x\"", "hit_curve has trailing characters"},
      {"a,i,1,16,4,100,\"[1,2]\"", "hit_curve segment must start with '['"},
      {"a,i,1,16,4,100,\"x\"", "hit_curve must start with '['"},
      {"a,i,1,16,4,100,\"[[1 2]]\"", "hit_curve segment expects ','"},
      {"a,i,1,16,4,100,\"[[1,2\"", "hit_curve segment must end with ']'"},
      {"a,i,1,16,4,100,\"[[1,2]\"", "hit_curve must end with ']'"},
      {"a,i,1,16,4,100,\"[[-1,2]]\"", "hit_curve segment start is not a valid integer"},
      /* 20 digits: rejected, not wrapped around to a wrong 64-bit value */
      {"a,i,1,16,4,100,\"[[20000000000000000000,1]]\"", "hit_curve segment start is not a valid integer"},
      {"a,i,1,16,4,100,\"[[1,20000000000000000000]]\"", "hit_curve segment length is not a valid integer"},
      {"a\"b,i,1,16,4,100,\"[[1,2]]\"", "unexpected quote inside an unquoted field"},
      {"\"a,i,1,16,4,100,\"[[1,2]]\"", "unexpected character after a quoted field"},
      {"a,i,1,16,4,100,\"[[1,2]]", "unterminated quoted field"},
  };
  lh_facts_table t;
  char err[LH_ERR_LEN];
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char text[256];
    snprintf(text, sizeof text, "a,i,1,16,4,100,\"[[1,2]]\"\n%s\n", bad[i][0]);
    int st = parse(r, text, 0, &t, err);
    CHECK(st == LH_EPARSE && t.error_line == 3 && t.n_rows == 1 && t.lines == 2);
    if (strstr(err, bad[i][1]) == NULL) {
      fprintf(stderr, "case %zu: message '%s' lacks '%s'\n", i, err, bad[i][1]);
      failures++;
    }
  }
  const char *bad_ext[][2] = {
      {"a,i,1,16,4,100,\"[[1,2]]\"", "expected 9 fields, got 7"},
      {"a,i,1,16,4,100,\"[[1,2]]\",4,none", "cut_reason none does not match 2 hit blocks of 4"},
      {"a,i,1,16,4,100,\"[[1,4]]\",4,cold", "cut_reason cold/expired does not match 4 hit blocks of 4"},
      {"a,i,1,16,4,100,\"[[1,2]]\",3,cold", "complete_blocks is 3 but input_token_len / block_size_tokens gives 4"},
      {"a,i,1,16,4,100,\"[[1,2]]\",4,warm", "cut_reason must be none, cold or expired: warm"},
  };
  for (size_t i = 0; i < sizeof bad_ext / sizeof bad_ext[0]; i++) {
    CHECK(parse(r, bad_ext[i][0], 1, &t, err) == LH_EPARSE && t.error_line == 2 && t.n_rows == 0);
    if (strstr(err, bad_ext[i][1]) == NULL) {
      fprintf(stderr, "extended case %zu: message '%s' lacks '%s'\n", i, err, bad_ext[i][1]);
      failures++;
    }
  }
  CHECK(parse(r, "a,i, 7,16,4,100,\" [ [ 1 , 2 ] ] \"\r\n\n", 0, &t, err) == LH_OK);
  CHECK(t.n_rows == 1 && t.lines == 2 && t.timestamp[0] == 7 && t.cut[0] == LH_CUT_COLD && t.blocks[0] == 4);
}

/* Two golden rows at four slots (three byte capacities and infinity). */
/* A quoted field may hold line breaks: its row spans lines (numbered by its first); with more,
 * a row still open at the end of the buffer is left for the next call. */
static void test_line_breaks_in_quotes(lh_facts_reader *r) {
  const char text[] = "\"x\ny\",\"i\r\nj\",1,16,4,100,\"[[1,2]]\"\r\nb,i,2,16,4,100,\"[]\"\n\"open\n";
  lh_facts_table t;
  char err[LH_ERR_LEN];
  CHECK(lh_facts_parse(r, text, strlen(text), 2, 0, 1, &t, err, sizeof err) == LH_OK);
  CHECK(t.n_rows == 2 && t.line[0] == 2 && t.line[1] == 5 && t.lines == 4);
  CHECK(t.consumed == (size_t)(strstr(text, "\"open") - text));
  CHECK(t.id_offsets[1] == 3 && memcmp(t.ids, "x\ny", 3) == 0 && memcmp(t.ids + 3, "b", 1) == 0);
  CHECK(t.n_instances == 2 && t.instance_offsets[1] == 4 && memcmp(t.instance_names, "i\r\nj", 4) == 0);
  CHECK(lh_facts_parse(r, text, strlen(text), 2, 0, 0, &t, err, sizeof err) == LH_EPARSE);
  CHECK(t.n_rows == 2 && t.error_line == 6 && strstr(err, "unterminated quoted field") != NULL);
}

static void test_query(lh_facts_reader *r) {
  const char *text = "\"x,\"\"y\",i1,5,16,4,1024,\"[[1,2],[4,1]]\"\n\r\nb,i2,6,10,4,1024,\"[]\"\r\n";
  lh_facts_table t;
  char err[LH_ERR_LEN];
  CHECK(parse(r, text, 0, &t, err) == LH_OK && t.n_rows == 2 && t.line[1] == 4);
  uint64_t slot_bytes[] = {1024, 2048, 4096, 0};
  uint8_t slot_inf[] = {0, 0, 0, 1};
  int32_t group[] = {0, 1};
  uint64_t sum_blocks[8] = {0}, sum_tokens[8] = {0}, requests[2] = {0}, input_tokens[2] = {0};
  char out[1024];
  size_t written = 0, done = 0;
  CHECK(lh_query_row_bound(&t, 0, 4) < sizeof out / 2);
  CHECK(lh_query_chunk(&t, 0, slot_bytes, slot_inf, 4, group, sum_blocks, sum_tokens, requests, input_tokens, out,
                       sizeof out, &written, &done, err, sizeof err) == LH_OK);
  const char *want =
      "{\"trace_id\":\"x,\\\"y\",\"instance_id\":\"i1\",\"timestamp_ns\":5,\"input_token_len\":16,"
      "\"hit_blocks\":[1,2,3,3],\"hit_rates\":[0.25,0.5,0.75,0.75]}\n"
      "{\"trace_id\":\"b\",\"instance_id\":\"i2\",\"timestamp_ns\":6,\"input_token_len\":10,"
      "\"hit_blocks\":[0,0,0,0],\"hit_rates\":[0,0,0,0]}\n";
  CHECK(done == 2 && written == strlen(want) && memcmp(out, want, written) == 0);
  if (written != strlen(want) || memcmp(out, want, written) != 0) fprintf(stderr, "got: %.*s", (int)written, out);
  const uint64_t want_blocks[8] = {1, 2, 3, 3, 0, 0, 0, 0}, want_tokens[8] = {4, 8, 12, 12, 0, 0, 0, 0};
  CHECK(memcmp(sum_blocks, want_blocks, sizeof want_blocks) == 0);
  CHECK(memcmp(sum_tokens, want_tokens, sizeof want_tokens) == 0);
  CHECK(requests[0] == 1 && requests[1] == 1 && input_tokens[0] == 16 && input_tokens[1] == 10);
  /* Without an output buffer every row is summed; a small buffer stops early. */
  CHECK(lh_query_chunk(&t, 0, slot_bytes, slot_inf, 4, group, sum_blocks, sum_tokens, requests, input_tokens, NULL, 0,
                       NULL, &done, err, sizeof err) == LH_OK);
  CHECK(done == 2 && sum_blocks[3] == 6 && requests[1] == 2);
  CHECK(lh_query_chunk(&t, 0, slot_bytes, slot_inf, 4, group, sum_blocks, sum_tokens, requests, input_tokens, out, 10,
                       &written, &done, err, sizeof err) == LH_OK);
  CHECK(done == 0 && written == 0);
}

static void test_format_g(void) {
  const struct {
    double v;
    const char *want;
  } cases[] = {{0.0, "0"},     {1.0, "1"},          {0.5, "0.5"},   {1.0 / 3.0, "0.333333"}, {1e-5, "1e-05"},
               {1e6, "1e+06"}, {2.5e-7, "2.5e-07"}, {0.75, "0.75"}, {123456.5, "123456"},    {1e100, "1e+100"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[32];
    size_t n = lh_format_g(cases[i].v, out);
    CHECK(n == strlen(cases[i].want) && strcmp(out, cases[i].want) == 0);
  }
}

/* Mutates valid rows and parses (and queries) them from exact-size heap buffers, so any read past
 * the end is caught by ASan. */
static void test_fuzz(lh_facts_reader *r) {
  const char *seeds[][2] = {
      {"\"x,\"\"y\",i1,5,16,4,1024,\"[[1,2],[4,1]]\"\n", "0"},
      {"b,i2,6,10,4,1024,\"[]\"\r\n", "0"},
      {"t,lane,99,4096,512,1048576,\"[[1,3],[5,2]]\",8,cold\n", "1"},
      {"t,lane,99,4096,512,1048576,\"[[1,8]]\",8,none\n", "1"},
  };
  const char alphabet[] = "0123456789,\"[]- \r\nnonecoldexpired+x";
  int ok = 0, bad = 0;
  for (int iter = 0; iter < 40000; iter++) {
    int which = (int)(rnd() % 4);
    size_t len = 0;
    char *exact = mutated(seeds[which][0], 3, alphabet, &len);
    CHECK(exact != NULL);
    if (exact == NULL) break;
    lh_facts_table t;
    char err[LH_ERR_LEN];
    int st = lh_facts_parse(r, exact, len, 2, seeds[which][1][0] == '1', 0, &t, err, sizeof err);
    CHECK(st == LH_OK || st == LH_EPARSE);
    if (st == LH_EPARSE) {
      CHECK(t.error_line >= 2 && err[0] != '\0');
      bad++;
    } else {
      ok++;
    }
    CHECK(t.n_rows <= 8);
    if (t.n_rows > 0 && t.n_rows <= 8) {
      uint64_t slot_bytes[] = {0, 4096, UINT64_MAX};
      uint8_t slot_inf[] = {0, 0, 1};
      int32_t group[8] = {0};
      uint64_t sums[2][3] = {{0}}, requests[1] = {0}, input_tokens[1] = {0};
      char out[4096];
      size_t written = 0, done = 0;
      CHECK(lh_query_chunk(&t, 0, slot_bytes, slot_inf, 3, group, sums[0], sums[1], requests, input_tokens, out,
                           sizeof out, &written, &done, err, sizeof err) == LH_OK);
      CHECK(done == t.n_rows && written <= sizeof out);
    }
    free(exact);
  }
  CHECK(ok > 100 && bad > 100);
}

int main(void) {
  lh_facts_reader *r = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_facts_reader_create(&r, err, sizeof err) == LH_OK);
  test_round_trip(r);
  test_byte_steps(r);
  test_messages(r);
  test_line_breaks_in_quotes(r);
  test_query(r);
  test_format_g();
  test_fuzz(r);
  lh_facts_reader_destroy(r);
  lh_facts_reader_destroy(NULL);
  return finish("facts");
}
