/* test_tiers.c - the tier split (lh_tiers.h): worked examples, unit conversion, the errors, and
 * random curves against a per-tier recomputation from the projection rule, under ASan/UBSan. */
#include <stdint.h>

#include "lh_common.h"
#include "lh_project.h"
#include "lh_query.h"
#include "lh_test.h"
#include "lh_tiers.h"

static void test_worked_example(void) {
  /* thresholds 1,2,3 and 6,7 */
  const int64_t segs[] = {1, 3, 6, 2}, offsets[] = {0, 2}, bs[] = {16}, bb[] = {1024};
  const uint64_t value[] = {2, 3, 100, 2, 10, 100};
  const uint8_t kind[] = {LH_SLOT_BLOCKS, LH_SLOT_BLOCKS, LH_SLOT_BLOCKS,
                          LH_SLOT_BLOCKS, LH_SLOT_BLOCKS, LH_SLOT_BLOCKS};
  uint64_t served[6];
  char err[LH_ERR_LEN];
  CHECK(lh_tiers_served(segs, offsets, 1, bs, bb, value, kind, 2, 3, 0, served, err, sizeof err) == LH_OK);
  /* exclusive: cumulative 2, 5, 105 and 2, 12, 112 */
  CHECK(served[0] == 2 && served[1] == 3 && served[2] == 5);
  CHECK(served[3] == 2 && served[4] == 5 && served[5] == 5);
  CHECK(lh_tiers_served(segs, offsets, 1, bs, bb, value, kind, 2, 3, 1, served, err, sizeof err) == LH_OK);
  /* inclusive: 2, 3, 100 and 2, 10, 100 */
  CHECK(served[0] == 2 && served[1] == 3 && served[2] == 5);
  CHECK(served[3] == 2 && served[4] == 5 && served[5] == 5);
}

static void test_units_and_infinity(void) {
  const int64_t segs[] = {1, 4}, offsets[] = {0, 1}, bs[] = {16}, bb[] = {1000};
  /* 2999 bytes = 2 blocks, 32 tokens = 2 blocks, then infinite; and an infinite first tier */
  const uint64_t value[] = {2999, 32, 0, 0, 5};
  const uint8_t kind[] = {LH_SLOT_BYTES, LH_SLOT_TOKENS, LH_SLOT_INFINITE, LH_SLOT_INFINITE, LH_SLOT_BLOCKS};
  uint64_t served[3];
  char err[LH_ERR_LEN];
  CHECK(lh_tiers_served(segs, offsets, 1, bs, bb, value, kind, 1, 3, 0, served, err, sizeof err) == LH_OK);
  CHECK(served[0] == 2 && served[1] == 4 && served[2] == 4);
  CHECK(lh_tiers_served(segs, offsets, 1, bs, bb, value + 3, kind + 3, 1, 2, 0, served, err, sizeof err) == LH_OK);
  CHECK(served[0] == 4 && served[1] == 4); /* saturating: infinite plus 5 stays infinite */
}

static void test_errors(void) {
  const int64_t segs[] = {1, 4}, offsets[] = {0, 1}, bs[] = {16}, bb[] = {1000};
  const uint64_t value[] = {5, 3};
  const uint8_t blocks[] = {LH_SLOT_BLOCKS, LH_SLOT_BLOCKS}, bad[] = {LH_SLOT_BLOCKS, 9};
  uint64_t served[2];
  char err[LH_ERR_LEN];
  CHECK(lh_tiers_served(segs, offsets, 1, bs, bb, value, blocks, 1, 2, 1, served, err, sizeof err) == LH_EINVAL);
  CHECK(strstr(err, "inclusive tier 1") != NULL);
  CHECK(lh_tiers_served(segs, offsets, 1, bs, bb, value, bad, 1, 2, 0, served, err, sizeof err) == LH_EINVAL);
  CHECK(strstr(err, "unknown kind 9") != NULL);
  CHECK(lh_tiers_served(segs, offsets, 1, bs, bb, value, blocks, 1, 0, 0, served, err, sizeof err) == LH_EINVAL);
  int32_t bad_category[] = {3};
  uint64_t sums[2 * 3] = {0};
  CHECK(lh_tiers_sums(segs, offsets, 1, bs, bb, bad_category, 3, value, blocks, 1, 2, 0, sums, sums + 2, sums + 4, NULL,
                      err, sizeof err) == LH_EINVAL);
  CHECK(strstr(err, "category 3") != NULL);
  /* no rows: nothing read or written */
  CHECK(lh_tiers_served(NULL, offsets, 0, bs, bb, value, blocks, 1, 2, 0, NULL, err, sizeof err) == LH_OK);
}

/* Random well-formed curves and capacities: every served value is the projection at the
 * cumulative (exclusive) or own (inclusive) capacity, and it never decreases along the tiers. */
static void test_random(void) {
  enum { ROWS = 200, TIERS = 4, CFG = 3 };
  int64_t segs[ROWS * 8 * 2], offsets[ROWS + 1], bs[ROWS], bb[ROWS];
  size_t n = 0;
  offsets[0] = 0;
  for (size_t r = 0; r < ROWS; r++) {
    int64_t start = 1 + (int64_t)(rnd() % 5);
    size_t k = rnd() % 8;
    for (size_t s = 0; s < k; s++) {
      int64_t run = 1 + (int64_t)(rnd() % 6);
      segs[2 * n] = start;
      segs[2 * n + 1] = run;
      n++;
      start += run + 1 + (int64_t)(rnd() % 9);
    }
    offsets[r + 1] = (int64_t)n;
    bs[r] = 1 + (int64_t)(rnd() % 32);
    bb[r] = 1 + (int64_t)(rnd() % 4096);
  }
  for (int inclusive = 0; inclusive < 2; inclusive++) {
    for (int round = 0; round < 50; round++) {
      uint64_t value[CFG * TIERS], blocks[CFG * TIERS];
      uint8_t kind[CFG * TIERS];
      for (size_t c = 0; c < CFG; c++) {
        uint64_t at = 0;
        for (size_t i = 0; i < TIERS; i++) {
          at += inclusive ? rnd() % 20 : 0;
          value[c * TIERS + i] = inclusive ? at : rnd() % 20;
          kind[c * TIERS + i] = LH_SLOT_BLOCKS;
          blocks[c * TIERS + i] = value[c * TIERS + i];
        }
      }
      uint64_t served[ROWS * CFG * TIERS];
      char err[LH_ERR_LEN];
      CHECK(lh_tiers_served(segs, offsets, ROWS, bs, bb, value, kind, CFG, TIERS, inclusive, served, err, sizeof err) ==
            LH_OK);
      for (size_t r = 0; r < ROWS; r++) {
        const int64_t *curve = segs + 2 * offsets[r];
        size_t k = (size_t)(offsets[r + 1] - offsets[r]);
        for (size_t c = 0; c < CFG; c++) {
          uint64_t sum = 0, prev = 0;
          for (size_t i = 0; i < TIERS; i++) {
            sum += blocks[c * TIERS + i];
            uint64_t want = lh_project_blocks(curve, k, inclusive ? blocks[c * TIERS + i] : sum);
            uint64_t got = served[(r * CFG + c) * TIERS + i];
            CHECK(got == want);
            CHECK(got >= prev);
            prev = got;
          }
        }
      }
      /* the sums: each tier alone, per category (row r is category r % 3), blocks x size / bytes */
      int32_t category[ROWS];
      for (size_t r = 0; r < ROWS; r++) category[r] = (int32_t)(r % 3);
      uint64_t blocks_sum[CFG * 3 * TIERS] = {0}, tokens_sum[CFG * 3 * TIERS] = {0}, bytes_sum[CFG * 3 * TIERS] = {0};
      uint64_t want_blocks[CFG * 3 * TIERS] = {0}, want_tokens[CFG * 3 * TIERS] = {0},
                                     want_bytes[CFG * 3 * TIERS] = {0};
      uint64_t alone[ROWS * CFG * TIERS];
      CHECK(lh_tiers_sums(segs, offsets, ROWS, bs, bb, category, 3, value, kind, CFG, TIERS, inclusive, blocks_sum,
                          tokens_sum, bytes_sum, alone, err, sizeof err) == LH_OK);
      for (size_t r = 0; r < ROWS; r++) {
        for (size_t c = 0; c < CFG; c++) {
          for (size_t i = 0; i < TIERS; i++) {
            size_t at = (r * CFG + c) * TIERS + i;
            uint64_t one = served[at] - (i == 0 ? 0 : served[at - 1]);
            CHECK(alone[at] == one);
            size_t sum_at = (c * 3 + (size_t)category[r]) * TIERS + i;
            want_blocks[sum_at] += one;
            want_tokens[sum_at] += one * (uint64_t)bs[r];
            want_bytes[sum_at] += i == 0 ? 0 : one * (uint64_t)bb[r];
          }
        }
      }
      CHECK(memcmp(blocks_sum, want_blocks, sizeof want_blocks) == 0);
      CHECK(memcmp(tokens_sum, want_tokens, sizeof want_tokens) == 0);
      CHECK(memcmp(bytes_sum, want_bytes, sizeof want_bytes) == 0);
    }
  }
}

int main(void) {
  test_worked_example();
  test_units_and_infinity();
  test_errors();
  test_random();
  return finish("tiers");
}
