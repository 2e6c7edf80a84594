/* test_policy.c - C-level tests of the fixed-capacity policy simulator (lh_policy.h), built and
 * run under AddressSanitizer and UndefinedBehaviorSanitizer by tests/test_core_sanitized.py.
 *
 * Golden hits on small hand-made traces (one per policy, the victim explained), the invariants
 * of every policy after every request of random traces, and the LRU simulator against the lane
 * core's facts projected at the same capacity (two independent implementations of exact LRU). */
#include "lh_test.h"
#include "litehit.h"

static const lh_wa_params WA = {0.0, 20.0, 5.0};

static lh_sim *make(int policy, uint64_t capacity) {
  lh_sim *s = NULL;
  char err[LH_ERR_LEN];
  int st = lh_sim_create(&s, policy, capacity, &WA, 1, err, sizeof err);
  CHECK(st == LH_OK);
  return s;
}

/* Runs single-key requests keys[0..n) at timestamps i seconds, category 0; hits into out. */
static void run_keys(lh_sim *s, const int64_t *keys, size_t n, int64_t *out) {
  for (size_t i = 0; i < n; i++) {
    int64_t offsets[2] = {0, 1}, ts = (int64_t)i * 1000000000LL;
    int32_t cat = 0;
    size_t done = 0;
    char err[LH_ERR_LEN];
    CHECK(lh_sim_process_batch(s, &keys[i], offsets, &ts, &cat, 1, &out[i], &done, err, sizeof err) == LH_OK);
    CHECK(lh_sim_check(s, err, sizeof err) == LH_OK);
  }
}

static void test_golden(void) {
  /* capacity 2. lru: 1 2 1 3 (evicts 2) 2 (miss, evicts 1) 1 (miss) -> hits at 1 only */
  int64_t keys[] = {1, 2, 1, 3, 2, 1};
  int64_t lru[] = {0, 0, 1, 0, 0, 0};
  /* fifo: 1 2 1(hit, nothing) 3 (evicts 1) 2 (hit) 1 (miss, evicts 2) */
  int64_t fifo[] = {0, 0, 1, 0, 1, 0};
  /* lfu: counts 1:2 2:1; 3 evicts 2 (count 1); 2 misses and evicts 3 (count 1, 1 has 2); 1 hits */
  int64_t lfu[] = {0, 0, 1, 0, 0, 1};
  /* gdfs: H(1)=2, H(2)=1; 3 evicts 2 (L=1) -> H(3)=2; 2: victim min H: 1 (H 2, older) vs 3 (H 2):
   * 1 is less recent (accessed at step 3, 3 at step 4) -> evicts 1 (L=2); 1 misses */
  int64_t gdfs[] = {0, 0, 1, 0, 0, 0};
  int64_t out[6];
  const struct {
    int policy;
    const int64_t *want;
  } cases[] = {{LH_POLICY_LRU, lru}, {LH_POLICY_FIFO, fifo}, {LH_POLICY_LFU, lfu}, {LH_POLICY_GDFS, gdfs},
               {LH_POLICY_WA, lru}}; /* wa before its first fit (refit 5 s) is exactly lru */
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    lh_sim *s = make(cases[c].policy, 2);
    run_keys(s, keys, 6, out);
    CHECK(memcmp(out, cases[c].want, sizeof out) == 0);
    lh_sim_stats st;
    lh_sim_get_stats(s, &st);
    CHECK(st.resident == 2 && st.requests == 6);
    lh_sim_destroy(s);
  }
}

static void test_errors(void) {
  lh_sim *s = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_sim_create(&s, 99, 1, NULL, 0, err, sizeof err) == LH_EINVAL && s == NULL);
  CHECK(lh_sim_create(&s, LH_POLICY_WA, 1, NULL, 0, err, sizeof err) == LH_EINVAL);
  lh_wa_params bad = {0.0, 0.0, 1.0};
  CHECK(lh_sim_create(&s, LH_POLICY_WA, 1, &bad, 0, err, sizeof err) == LH_EINVAL);
  s = make(LH_POLICY_LRU, 4);
  int64_t keys[] = {1, 2}, offsets[] = {0, 1, 2}, ts[] = {5, 4}, hits[2];
  int32_t cats[] = {0, 0};
  size_t done = 9;
  CHECK(lh_sim_process_batch(s, keys, offsets, ts, cats, 2, hits, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 1 && strstr(err, "before the previous") != NULL);
  int32_t bad_cat[] = {-1};
  int64_t ts2[] = {6};
  CHECK(lh_sim_process_batch(s, keys, offsets, ts2, bad_cat, 1, hits, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 0);
  lh_sim_stats st;
  lh_sim_get_stats(s, &st);
  CHECK(st.requests == 1 && st.resident == 1);
  lh_sim_destroy(s);
}

/* Random requests: chains of 1..8 keys under the prefix contract (a key names its whole prefix:
 * heads in [2^40, 2^40 + 400), a child is parent * 4 + 1..3) from a skewed pool, 1..3 categories,
 * gaps of 0..3 s. With contract = 0 the chains break it (a child may equal another request's
 * head, and keys repeat inside a request): the lane core then raises thresholds to keep them
 * strictly increasing, so its facts are a lower bound of exact LRU. */
static void test_random(int contract) {
  enum { N = 3000, CAPS = 6 };
  const uint64_t caps[CAPS] = {0, 1, 3, 8, 40, 200};
  int64_t *keys = malloc(8 * N * sizeof *keys), *offsets = malloc((N + 1) * sizeof *offsets);
  int64_t *ts = malloc(N * sizeof *ts), *hits = malloc(N * sizeof *hits);
  int32_t *cats = malloc(N * sizeof *cats);
  offsets[0] = 0;
  int64_t now = 0;
  for (size_t r = 0; r < N; r++) {
    size_t n = 1 + rnd() % 8;
    int64_t k = (int64_t)(rnd() % (rnd() % 2 ? 30 : 400));
    if (contract) k += (int64_t)1 << 40;
    for (size_t j = 0; j < n; j++) {
      keys[offsets[r] + (int64_t)j] = k;
      k = contract ? k * 4 + 1 + (int64_t)(rnd() % 3) : (k * 3 + (int64_t)(rnd() % 3)) % 500;
    }
    offsets[r + 1] = offsets[r] + (int64_t)n;
    now += (int64_t)(rnd() % 4) * 1000000000LL;
    ts[r] = now;
    cats[r] = (int32_t)(rnd() % 3);
  }
  /* the lane core's facts at every capacity */
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, 0, 0, err, sizeof err) == LH_OK);
  int64_t *segs = malloc(2 * (size_t)offsets[N] * sizeof *segs), *seg_offsets = malloc((N + 1) * sizeof *seg_offsets);
  size_t done = 0;
  CHECK(lh_lane_process_batch(lane, keys, offsets, ts, N, segs, seg_offsets, NULL, &done, err, sizeof err) == LH_OK);
  for (int policy = LH_POLICY_LRU; policy <= LH_POLICY_WA; policy++) {
    for (size_t c = 0; c < CAPS; c++) {
      lh_sim *s = make(policy, caps[c]);
      for (size_t r = 0; r < N; r++) { /* one request per call: invariants after each */
        CHECK(lh_sim_process_batch(s, keys, offsets + r, ts + r, cats + r, 1, hits + r, &done, err, sizeof err) ==
              LH_OK);
        if (r % 97 == 0 || caps[c] < 4) CHECK(lh_sim_check(s, err, sizeof err) == LH_OK);
      }
      CHECK(lh_sim_check(s, err, sizeof err) == LH_OK);
      if (policy == LH_POLICY_LRU) {
        for (size_t r = 0; r < N; r++) {
          uint64_t want = lh_project_blocks(segs + 2 * seg_offsets[r], (size_t)(seg_offsets[r + 1] - seg_offsets[r]), caps[c]);
          CHECK(contract ? (uint64_t)hits[r] == want : (uint64_t)hits[r] >= want);
        }
      }
      lh_sim_stats st;
      lh_sim_get_stats(s, &st);
      CHECK(st.resident <= caps[c] && st.inserts - st.evictions == st.resident);
      if (policy == LH_POLICY_WA) CHECK(st.wa_fits > 0 && st.wa_life_s >= 0);
      lh_sim_destroy(s);
    }
  }
  lh_lane_destroy(lane);
  free(keys), free(offsets), free(ts), free(hits), free(cats), free(segs), free(seg_offsets);
}

int main(void) {
  test_golden();
  test_errors();
  test_random(1);
  test_random(0);
  return finish("policy simulator");
}
