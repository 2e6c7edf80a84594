/* test_parsers.c - the trace scanner, its format table and the facts renderer under
 * AddressSanitizer + UBSan: golden rows of every format, every error path we can name, the
 * table's entries against the row rules, and a mutation fuzz loop that must never read out of
 * bounds, leak or trip undefined behaviour. Exit status 0 = all passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_test.h"
#include "lh_trace_row.h" /* internal: the row rules behind the table */
#include "litehit.h"

static int scan(lh_scan *s, int fmt, const char *text, lh_scan_result *res, char *err) {
  return lh_scan_chunk(s, fmt, text, strlen(text), 1, 16, res, err, LH_ERR_LEN);
}

static void test_standard(lh_scan *s) {
  lh_scan_result r;
  char err[LH_ERR_LEN];
  const char *ok =
      "{\"type\":\"get\",\"instance_id\":\"i1\",\"trace_id\":\"a\\u00e9\\ud83d\\ude00\",\"timestamp_ns\":5,"
      "\"keys\":[1,18446744073709551615,-9223372036854775808],\"input_len\":48,\"tokens\":{\"x\":[null]}}\n"
      "   \r\n"
      "{\"type\":\"write\",\"instance_id\":\"i1\",\"timestamp_ns\":6,\"keys\":[9]}\n"
      "{\"type\":\"request\",\"instance_id\":\"i2\",\"trace_id\":\"\",\"timestamp_ns\":7,\"keys\":[],\"input_len\":3,"
      "\"block_mask\":[true,false],\"sw_size\":-1,\"location_spec_names\":[\"a\"],\"ttl_us\":0}";
  CHECK(scan(s, LH_FMT_STANDARD, ok, &r, err) == LH_OK);
  CHECK(r.n_rows == 3 && r.lines == 4 && r.error_line == 0);
  CHECK(r.line[0] == 1 && r.line[1] == 3 && r.line[2] == 4);
  CHECK(r.kind[0] == LH_ROW_READ && r.kind[1] == LH_ROW_WRITE && r.kind[2] == LH_ROW_READ);
  CHECK(r.n_keys == 3 && r.keys[1] == -1 && r.keys[2] == INT64_MIN && r.key_offsets[3] == 3);
  CHECK(r.id_offsets[1] == 7 && memcmp(r.ids, "a\xc3\xa9\xf0\x9f\x98\x80", 7) == 0);
  CHECK(memcmp(r.ids + r.id_offsets[1], "trace_i1_6", 10) == 0);
  CHECK(memcmp(r.ids + r.id_offsets[2], "trace_i2_7", 10) == 0);
  CHECK(r.n_instances == 2 && r.instance[2] == 1);
  const char *bad[][2] = {
      {"{\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":[],\"input_len\":1}", "missing string field: type"},
      {"{\"type\":\"x\",\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":[]}", "unknown trace type: x"},
      {"{\"type\":\"get\",\"instance_id\":\"\",\"timestamp_ns\":1,\"keys\":[]}", "missing non-empty string field"},
      {"{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":1.5,\"keys\":[]}",
       "missing integer field: timestamp_ns"},
      {"{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":3}", "missing array field: keys"},
      {"{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":[]}", "missing integer field: input_len"},
      {"{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":[],\"input_len\":\"4\"}",
       "non-integer field"},
      {"{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":[1e3],\"input_len\":4}",
       "failed to parse get"},
      {"{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":0,\"keys\":[],\"input_len\":4}", "failed to validate"},
      {"{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":[99999999999999999999]}",
       "missing integer"},
      {"{\"type\":\"get\"", "invalid JSON: expected ',' or '}' at column 14"},
      {"{\"type\":\"ge", "invalid JSON: unterminated string"},
      {"[1]", "invalid JSON: expected a JSON object"},
      {"{\"a\":\"\xff\"}", "invalid UTF-8"},
      {"{\"a\":\"\\ud800\"}", "lone high surrogate"},
      {"{\"a\":1} x", "trailing characters"},
      {"{\"a\":01}", "expected ',' or '}'"},
      {"{\"a\":-}", "bad number"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    int st = scan(s, LH_FMT_STANDARD, bad[i][0], &r, err);
    CHECK(st == LH_EPARSE && r.error_line == 1 && r.n_rows == 0);
    if (strstr(err, bad[i][1]) == NULL) {
      fprintf(stderr, "case %zu: message '%s' lacks '%s'\n", i, err, bad[i][1]);
      failures++;
    }
  }
  char deep[20010];
  memset(deep, '[', sizeof deep - 1);
  deep[sizeof deep - 1] = '\0';
  memcpy(deep, "{\"a\":", 5);
  CHECK(scan(s, LH_FMT_STANDARD, deep, &r, err) == LH_EPARSE && strstr(err, "nesting too deep") != NULL);
}

static void test_other_formats(lh_scan *s) {
  lh_scan_result r;
  char err[LH_ERR_LEN];
  CHECK(scan(s, LH_FMT_MOONCAKE, "{\"timestamp\": 7, \"input_length\": 40, \"hash_ids\": [1, 2, 3]}", &r, err) ==
        LH_OK);
  CHECK(r.n_rows == 1 && r.timestamp[0] == 7000000 && r.n_keys == 2 && r.ids[0] == '1' && r.instance[0] == -1);
  CHECK(scan(s, LH_FMT_QWEN,
             "{\"chat_id\":159,\"timestamp\":61.114,\"input_length\":33,\"type\":\"text\",\"turn\":2,\"hash_ids\":[5,6,"
             "7]}",
             &r, err) == LH_OK);
  CHECK(r.timestamp[0] == (int64_t)(61.114 * 1000000000.0) && r.n_keys == 2 && r.turn[0] == 2 && r.n_labels == 1);
  CHECK(memcmp(r.ids, "159", 3) == 0 && memcmp(r.label_names, "text", 4) == 0);
  CHECK(r.chat[0] == 159 && r.parent[0] == 159); /* no parent_chat_id: a root */
  /* session numbers: integers are their value (the string "7" too), -1 and null mark a root,
   * other strings hash (FNV-1a 64 of "a": 0xaf63dc4c8601ec8c) */
  CHECK(scan(s, LH_FMT_QWEN,
             "{\"chat_id\":-5,\"parent_chat_id\":-1,\"timestamp\":1,\"input_length\":16,\"hash_ids\":[1]}\n"
             "{\"chat_id\":\"a\",\"parent_chat_id\":\"7\",\"timestamp\":1,\"input_length\":16,\"hash_ids\":[1]}\n"
             "{\"chat_id\":18446744073709551615,\"parent_chat_id\":\"a\",\"timestamp\":1,\"input_length\":16,"
             "\"hash_ids\":[1]}\n"
             "{\"chat_id\":\"07\",\"parent_chat_id\":null,\"timestamp\":1,\"input_length\":16,\"hash_ids\":[1]}\n",
             &r, err) == LH_OK);
  CHECK(r.n_rows == 4 && r.chat[0] == -5 && r.parent[0] == -5);
  CHECK(r.chat[1] == (int64_t)0xaf63dc4c8601ec8cULL && r.parent[1] == 7);
  CHECK(r.chat[2] == -1 && r.parent[2] == (int64_t)0xaf63dc4c8601ec8cULL);
  CHECK(r.chat[3] != 7 && r.parent[3] == r.chat[3]); /* "07" is not canonical: hashed */
  CHECK(scan(s, LH_FMT_QWEN,
             "{\"chat_id\":1,\"parent_chat_id\":true,\"timestamp\":1,\"input_length\":16,\"hash_ids\":[1]}", &r,
             err) == LH_EPARSE);
  const char *log =
      "{\"id\":\"g1\",\"source\":\"s\",\"type\":\"GetCacheLocation\",\"trigger_time_us\":10,\"keys\":[1,2]}\n"
      "{\"id\":\"w1\",\"source\":\"s\",\"type\":\"StartWriteCache\",\"trigger_time_us\":11,\"keys\":[1,2,3]}\n"
      "{\"id\":\"f1\",\"source\":\"s\",\"type\":\"FinishWriteCache\",\"trigger_time_us\":12}\n"
      "{\"id\":\"x1\",\"source\":\"s\",\"type\":\"Other\",\"trigger_time_us\":13,\"keys\":[]}\n";
  CHECK(scan(s, LH_FMT_PUBLISHER, log, &r, err) == LH_OK);
  CHECK(r.n_rows == 2 && r.timestamp[0] == 10000 && r.input_len[0] == 0 && r.n_keys == 2);
  CHECK(scan(s, LH_FMT_PUBLISHER, "{\"source\":\"s\",\"type\":\"Evict\",\"trigger_time_us\":1,\"keys\":[4]}", &r,
             err) == LH_EPARSE);
  CHECK(strstr(err, "unsupported event type Evict with keys") != NULL);
  CHECK(lh_scan_chunk(s, 99, "{}", 2, 1, 16, &r, err, LH_ERR_LEN) == LH_EINVAL);
  CHECK(lh_scan_chunk(s, LH_FMT_MOONCAKE, "{}", 2, 1, 0, &r, err, LH_ERR_LEN) == LH_EINVAL);
}

/* Whether name is one of the fields the rule reads. */
static int rule_reads(const lh_trace_rule *rule, const char *name, size_t n) {
  for (int i = 0; i < rule->fields.n; i++) {
    if (strlen(rule->fields.names[i]) == n && memcmp(rule->fields.names[i], name, n) == 0) return 1;
  }
  return 0;
}

static void test_format_table(lh_scan *s) {
  /* One golden row per format: a read whose instance tells whether the format has instances. */
  const struct {
    int code;
    const char *name;
    int64_t block;
    int instanceless;
    const char *row;
  } want[] = {
      {LH_FMT_STANDARD, "standard", 256, 0,
       "{\"type\":\"get\",\"instance_id\":\"i\",\"timestamp_ns\":1,\"keys\":[1],\"input_len\":16}"},
      {LH_FMT_MOONCAKE, "mooncake", 512, 1, "{\"timestamp\":1,\"input_length\":16,\"hash_ids\":[1]}"},
      {LH_FMT_QWEN, "qwen_bailian", 16, 1, "{\"chat_id\":1,\"timestamp\":1,\"input_length\":16,\"hash_ids\":[1]}"},
      {LH_FMT_PUBLISHER, "publisher_log", 16, 0,
       "{\"type\":\"GetCacheLocation\",\"source\":\"s\",\"trigger_time_us\":1,\"keys\":[1]}"},
  };
  size_t n = lh_trace_format_count();
  CHECK(n == sizeof want / sizeof want[0]);
  int priorities_seen = 0;
  for (size_t i = 0; i < n && i < sizeof want / sizeof want[0]; i++) {
    lh_trace_format_info info;
    CHECK(lh_trace_format_get(i, &info) == LH_OK);
    CHECK(info.code == want[i].code && strcmp(info.name, want[i].name) == 0);
    CHECK(info.default_trace_block == want[i].block && info.instanceless == want[i].instanceless);
    CHECK(info.detect_priority >= 1 && info.detect_priority <= 30 && !(priorities_seen & (1 << info.detect_priority)));
    priorities_seen |= 1 << info.detect_priority;
    const lh_trace_format *fmt = lh_trace_format_find(info.code);
    CHECK(fmt != NULL && fmt->info.code == info.code && fmt->rule != NULL);
    /* Every detection key is a field the format's rule reads. */
    for (const char *k = info.detect_keys; fmt != NULL && *k;) {
      size_t len = strcspn(k, ",");
      CHECK(len > 0 && rule_reads(fmt->rule, k, len));
      k += len + (k[len] == ',');
    }
    lh_scan_result r;
    char err[LH_ERR_LEN];
    CHECK(scan(s, info.code, want[i].row, &r, err) == LH_OK && r.n_rows == 1 && r.kind[0] == LH_ROW_READ);
    CHECK((r.instance[0] == -1) == (info.instanceless != 0));
  }
  lh_trace_format_info info = {0, NULL, 0, 0, 0, NULL};
  CHECK(lh_trace_format_get(n, &info) == LH_ERANGE && info.name == NULL);
  CHECK(lh_trace_format_find(0) == NULL && lh_trace_format_find(99) == NULL);
}

static void test_render(void) {
  const char ids[] = "r1id,\"q";
  int64_t id_off[] = {0, 2, 7};
  int64_t ts[] = {1000, -5};
  const char lanes[] = "i1";
  int64_t lane_off[] = {0, 2}, bs[] = {4}, bb[] = {16384};
  int64_t src[] = {0, 1}, lens[] = {13, 12}, lo[] = {0, 2}, hi[] = {2, 2};
  int32_t lane[] = {0, 0};
  int64_t segs[] = {1, 2, 4, 1};
  int64_t blocks[] = {3, 3};
  uint8_t cuts[] = {LH_CUT_NONE, LH_CUT_EXPIRED};
  char err[LH_ERR_LEN];
  size_t cap = lh_facts_render_bound(id_off, lane_off, src, lane, lo, hi, 2, 1), n = 0;
  char *buf = malloc(cap);
  CHECK(lh_facts_render(ids, id_off, ts, lanes, lane_off, bs, bb, NULL, src, lane, lens, lo, hi, segs, 1, blocks, cuts,
                        2, buf, cap, &n, err, sizeof err) == LH_OK);
  const char *want = "r1,i1,1000,13,4,16384,\"[[1,2],[4,1]]\",3,none\n\"id,\"\"q\",i1,-5,12,4,16384,\"[]\",3,expired\n";
  CHECK(n == strlen(want) && memcmp(buf, want, n) == 0);
  if (n != strlen(want) || memcmp(buf, want, n) != 0) fprintf(stderr, "got: %.*s", (int)n, buf);
  CHECK(lh_facts_render(ids, id_off, ts, lanes, lane_off, bs, bb, NULL, src, lane, lens, lo, hi, segs, 0, NULL, NULL, 2,
                        buf, 10, &n, err, sizeof err) == LH_ERANGE);
  free(buf);
}

/* Mutates valid rows (truncation, byte flips, insertions) and scans them in exact-size heap
 * buffers, so any read past the end is caught by ASan. */
static void test_fuzz(lh_scan *s) {
  const char *seeds[] = {
      "{\"type\":\"get\",\"instance_id\":\"i1\",\"trace_id\":\"t\\\"x\",\"timestamp_ns\":5,\"keys\":[1,-2,3],"
      "\"input_len\":48,\"block_mask\":[true],\"sw_size\":0}\n{\"type\":\"write\",\"instance_id\":\"i1\",\"timestamp_"
      "ns\":6,"
      "\"keys\":[9]}\n",
      "{\"timestamp\": 7, \"input_length\": 4000, \"output_length\": 1, \"hash_ids\": [1, 2, 3, 4, 5, 6, 7, 8]}\n",
      "{\"chat_id\":\"c\\u0041\",\"timestamp\":6.1e1,\"input_length\":33,\"type\":\"t\",\"turn\":2,\"hash_ids\":[5,6,7]"
      "}\n",
      "{\"id\":\"g1\",\"source\":\"s\",\"type\":\"GetCacheLocation\",\"trigger_time_us\":10,\"keys\":[1,2]}\n",
  };
  const int formats[] = {LH_FMT_STANDARD, LH_FMT_MOONCAKE, LH_FMT_QWEN, LH_FMT_PUBLISHER};
  const char alphabet[] = "{}[]\",:\\-0123456789.eE+ tnuflrsa\xff\xc3\x80\n\r\t";
  int ok = 0, bad = 0;
  for (int iter = 0; iter < 40000; iter++) {
    int which = (int)(rnd() % 4);
    size_t len = 0;
    char *exact = mutated(seeds[which], 4, alphabet, &len);
    CHECK(exact != NULL);
    if (exact == NULL) break;
    lh_scan_result r;
    char err[LH_ERR_LEN];
    int st = lh_scan_chunk(s, formats[which], exact, len, 1, 16, &r, err, sizeof err);
    CHECK(st == LH_OK || st == LH_EPARSE);
    if (st == LH_EPARSE) {
      CHECK(r.error_line >= 1 && err[0] != '\0');
      bad++;
    } else {
      ok++;
    }
    free(exact);
  }
  CHECK(ok > 100 && bad > 100);
}

int main(void) {
  lh_scan *s = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_scan_create(&s, err, sizeof err) == LH_OK);
  test_standard(s);
  test_other_formats(s);
  test_format_table(s);
  test_render();
  test_fuzz(s);
  lh_scan_destroy(s);
  lh_scan_destroy(NULL);
  return finish("parser");
}
