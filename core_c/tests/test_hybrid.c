/* test_hybrid.c - the hybrid lane core (lh_hybrid.h): the golden scenarios of HYBRID_G5.md
 * section 5 (1-6, 15, 16, 19, 20 and the derived envelope pop), the error contract, and a long
 * random run that compacts many times with its invariants checked. */
#include <string.h>

#include "lh_common.h"
#include "lh_hybrid.h"
#include "lh_test.h"

static lh_hybrid *make(uint64_t full, uint64_t linear, uint64_t step, int64_t ttl) {
  lh_hybrid_config c = {full, linear, step, ttl};
  lh_hybrid *h = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_hybrid_create(&h, &c, err, sizeof err) == LH_OK);
  return h;
}

/* One request; its points as text "(c,h)(c,h)..." for comparison. */
static const char *run(lh_hybrid *h, const int64_t *keys, size_t n, int64_t now) {
  static char text[512];
  uint64_t points[64];
  int64_t offsets[2] = {0, (int64_t)n}, po[2];
  size_t done = 0;
  char err[LH_ERR_LEN];
  int64_t dummy = 0;
  CHECK(lh_hybrid_process_batch(h, n ? keys : &dummy, n, offsets, &now, 1, points, po, &done, err, sizeof err) ==
        LH_OK);
  size_t w = 0;
  text[0] = '\0';
  for (int64_t k = po[0]; k < po[1]; k++) {
    w += (size_t)snprintf(text + w, sizeof text - w, "(%llu,%llu)", (unsigned long long)points[2 * k],
                          (unsigned long long)points[2 * k + 1]);
  }
  CHECK(lh_hybrid_check(h, err, sizeof err) == LH_OK);
  return text;
}

static lh_hybrid_stats stats(const lh_hybrid *h) {
  lh_hybrid_stats s;
  lh_hybrid_get_stats(h, &s);
  return s;
}

static void test_golden(void) {
  const int64_t k5[] = {10, 20, 30, 40, 50}, k123[] = {1, 2, 3}, k1234[] = {1, 2, 3, 4}, k12[] = {1, 2};
  const int64_t k1[] = {1}, k56[] = {5, 6};
  lh_hybrid *h = make(8, 4, 2, 0); /* #1, #2 */
  CHECK(strcmp(run(h, k5, 0, 0), "") == 0 && stats(h).unique_blocks == 0);
  CHECK(strcmp(run(h, k5, 5, 0), "") == 0 && stats(h).unique_blocks == 5 && stats(h).resident_bytes == 52);
  CHECK(strcmp(run(h, k5, 5, 0), "(20,2)(40,4)(52,5)") == 0);
  lh_hybrid_reset(h); /* #9 */
  CHECK(stats(h).unique_blocks == 0 && stats(h).resident_bytes == 0 && strcmp(run(h, k12, 2, 0), "") == 0);
  lh_hybrid_destroy(h);
  h = make(10, 1, 1, 0); /* #3 */
  run(h, k123, 3, 0);
  CHECK(strcmp(run(h, k123, 3, 0), "(11,1)(22,2)(33,3)") == 0);
  lh_hybrid_destroy(h);
  h = make(10, 1, 3, 0); /* #4: a historic tail state restores a longer request */
  run(h, k12, 2, 0);
  CHECK(strcmp(run(h, k1234, 4, 0), "(21,2)") == 0);
  lh_hybrid_destroy(h);
  h = make(10, 1, 2, 0); /* 5.6: the envelope pop */
  run(h, k1, 1, 0);
  run(h, k56, 2, 0);
  CHECK(strcmp(run(h, k12, 2, 0), "(32,1)") == 0);
  CHECK(strcmp(run(h, k12, 2, 0), "(21,2)") == 0);
  lh_hybrid_destroy(h);
  h = make(10, 2, 2, 100); /* #5: the strict TTL boundary */
  run(h, k12, 2, 0);
  CHECK(strcmp(run(h, k12, 2, 99), "(22,2)") == 0);
  lh_hybrid_advance_time(h, 199);
  CHECK(stats(h).unique_blocks == 0 && stats(h).resident_bytes == 0 && stats(h).expired_blocks == 2);
  CHECK(strcmp(run(h, k12, 2, 199), "") == 0 && stats(h).unique_blocks == 2 && stats(h).resident_bytes == 22);
  lh_hybrid_destroy(h);
  h = make(10, 1, 3, 100); /* #6: a historic state expires on its own */
  run(h, k12, 2, 0);
  CHECK(strcmp(run(h, k1234, 4, 50), "(21,2)") == 0);
  CHECK(strcmp(run(h, k12, 2, 100), "") == 0);
  lh_hybrid_destroy(h);
  h = make(8, 0, 0, 0); /* #15: the Full-only byte mode */
  run(h, k123, 3, 0);
  CHECK(strcmp(run(h, k123, 3, 0), "(8,1)(16,2)(24,3)") == 0);
  lh_hybrid_destroy(h);
  h = make(16384, 4096, 3, 0); /* #19 */
  CHECK(strcmp(run(h, k1234, 4, 1000), "") == 0);
  CHECK(strcmp(run(h, k1234, 4, 2000), "(53248,3)(73728,4)") == 0);
  lh_hybrid_destroy(h);
  h = make(16384, 4096, 3, 1000000000); /* #20 */
  run(h, k1, 1, 1);
  CHECK(strcmp(run(h, k1, 1, 1000000001), "") == 0);
  CHECK(strcmp(run(h, k1, 1, 1000000002), "(20480,1)") == 0);
  lh_hybrid_destroy(h);
  /* #16: no TTL and a zero TTL agree (points, unique, bytes) */
  lh_hybrid *a = make(10, 2, 2, 0), *b = make(10, 2, 2, 0);
  const int64_t *reqs[] = {k123, k12, k123, k56};
  const size_t lens[] = {3, 2, 3, 2};
  const char *want[] = {"", "(22,2)", "(22,2)(34,3)", ""};
  const uint64_t unique[] = {3, 3, 3, 5}, bytes[] = {34, 34, 34, 56};
  for (int i = 0; i < 4; i++) {
    int64_t now = 1000 + i * 1000000;
    CHECK(strcmp(run(a, reqs[i], lens[i], now), want[i]) == 0);
    CHECK(strcmp(run(b, reqs[i], lens[i], now), want[i]) == 0);
    CHECK(stats(a).unique_blocks == unique[i] && stats(a).resident_bytes == bytes[i]);
  }
  lh_hybrid_destroy(a);
  lh_hybrid_destroy(b);
}

static void test_errors(void) {
  char err[LH_ERR_LEN];
  lh_hybrid *h = NULL;
  lh_hybrid_config zero = {0, 4, 2, 0}, negative = {8, 4, 2, -1};
  CHECK(lh_hybrid_create(&h, &zero, err, sizeof err) == LH_EINVAL && h == NULL);
  CHECK(strstr(err, "full_charge_bytes must be positive") != NULL);
  CHECK(lh_hybrid_create(&h, &negative, err, sizeof err) == LH_EINVAL && h == NULL);
  h = make(8, 4, 2, 0);
  const int64_t keys[] = {1, 2, 3};
  const int64_t offsets[] = {0, 2, 1}; /* request 1 has decreasing offsets */
  uint64_t points[6];
  int64_t po[3];
  size_t done = 9;
  CHECK(lh_hybrid_process_batch(h, keys, 3, offsets, NULL, 2, points, po, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 1 && stats(h).unique_blocks == 2 && stats(h).requests == 1);
  lh_hybrid *t = make(8, 4, 2, 5);
  CHECK(lh_hybrid_process_batch(t, keys, 3, offsets, NULL, 1, points, po, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 0 && stats(t).requests == 0);
  lh_hybrid_destroy(t);
  lh_hybrid_destroy(h);
  lh_hybrid_destroy(NULL);
}

/* Many requests over few keys: positions run far ahead of the objects, so the core compacts
 * again and again; every invariant holds throughout, the TTL's too. */
static void test_compaction_stress(void) {
  for (int ttl = 0; ttl < 2; ttl++) {
    lh_hybrid *h = make(48, 16, 3, ttl ? 40 : 0);
    int64_t now = 0;
    for (int r = 0; r < 20000; r++) {
      int64_t keys[12];
      size_t n = (size_t)(rnd() % 13);
      int64_t root = (int64_t)(rnd() % 5);
      for (size_t i = 0; i < n; i++) keys[i] = root * 100 + (int64_t)(i < 3 ? i : rnd() % 9);
      now += (int64_t)(rnd() % 4);
      run(h, keys, n, now);
    }
    CHECK(stats(h).compactions > 0);
    CHECK(stats(h).positions <= 2 * (stats(h).unique_blocks + stats(h).resident_linear) + 4096 + 24);
    lh_hybrid_destroy(h);
  }
}

int main(void) {
  test_golden();
  test_errors();
  test_compaction_stress();
  return finish("hybrid lane core");
}
