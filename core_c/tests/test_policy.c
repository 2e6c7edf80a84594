/* test_policy.c - C-level tests of the fixed-capacity policy simulator (lh_policy.h), built and
 * run under AddressSanitizer and UndefinedBehaviorSanitizer by tests/test_core_sanitized.py.
 *
 * Golden hits on small hand-made traces (one per policy, the victim explained), the invariants
 * of every policy after every request of random traces, and the LRU simulator against the lane
 * core's facts projected at the same capacity (two independent implementations of exact LRU).
 * The miss evidence (lh_sim_process_batch_misses) and the peak eviction second: golden values on
 * a hand-made trace, and every request of random traces against the eviction log. WA's
 * selection of its p90 life (lh_select_i64) against a full sort, its sorting fallback forced. */
#include "lh_policy_ops.h"
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
    CHECK(lh_sim_process_batch(s, &keys[i], 1, offsets, &ts, &cat, 1, &out[i], &done, err, sizeof err) == LH_OK);
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
  } cases[] = {{LH_POLICY_LRU, lru},
               {LH_POLICY_FIFO, fifo},
               {LH_POLICY_LFU, lfu},
               {LH_POLICY_GDFS, gdfs},
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
  CHECK(lh_sim_process_batch(s, keys, 2, offsets, ts, cats, 2, hits, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 1 && strstr(err, "before the previous") != NULL);
  int32_t bad_cat[] = {-1};
  int64_t ts2[] = {6};
  CHECK(lh_sim_process_batch(s, keys, 2, offsets, ts2, bad_cat, 1, hits, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 0);
  /* offsets (lh_batch.h): the second request would read past the two keys, the first one is applied */
  int64_t past[] = {1, 2, 3}, ts3[] = {6, 7};
  CHECK(lh_sim_process_batch(s, keys, 2, past, ts3, cats, 2, hits, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 1 && strstr(err, "request 1: offsets must be non-decreasing and within keys (2 .. 3 of 2)") != NULL);
  lh_sim_stats st;
  lh_sim_get_stats(s, &st);
  CHECK(st.requests == 2 && st.resident == 2);
  lh_sim_destroy(s);
}

/* The lane core's facts of n requests (segments and their offsets, for lh_project_blocks), in
 * arrays the caller frees. */
static void lane_facts(const int64_t *keys, const int64_t *offsets, const int64_t *ts, size_t n, int64_t **segs,
                       int64_t **seg_offsets) {
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  size_t done = 0;
  CHECK(lh_lane_create(&lane, 0, 0, err, sizeof err) == LH_OK);
  *segs = malloc(2 * (size_t)offsets[n] * sizeof **segs);
  *seg_offsets = malloc((n + 1) * sizeof **seg_offsets);
  CHECK(lh_lane_process_batch(lane, keys, (size_t)offsets[n], offsets, ts, n, *segs, *seg_offsets, NULL, NULL, &done,
                              err, sizeof err) == LH_OK);
  lh_lane_destroy(lane);
}

/* Random requests: chains of 1..8 keys under the prefix contract (a key names its whole prefix:
 * heads in [2^40, 2^40 + 400), a child is parent * 4 + 1..3) from a skewed pool, 1..3 categories,
 * gaps of 0..3 s. With contract = 0 the chains break it (a child may equal another request's
 * head, and keys repeat inside a request): the lane core then raises thresholds to keep them
 * strictly increasing, so its facts are a lower bound of exact LRU. In arrays the caller frees:
 * keys (8 N), offsets (N + 1), ts, cats. */
static void random_requests(int contract, size_t N, int64_t **keys_out, int64_t **offsets_out, int64_t **ts_out,
                            int32_t **cats_out) {
  int64_t *keys = malloc(8 * N * sizeof *keys), *offsets = malloc((N + 1) * sizeof *offsets);
  int64_t *ts = malloc(N * sizeof *ts);
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
  *keys_out = keys, *offsets_out = offsets, *ts_out = ts, *cats_out = cats;
}

static void test_random(int contract) {
  enum { N = 3000, CAPS = 6 };
  const uint64_t caps[CAPS] = {0, 1, 3, 8, 40, 200};
  int64_t *keys, *offsets, *ts, *hits = malloc(N * sizeof *hits);
  int32_t *cats;
  random_requests(contract, N, &keys, &offsets, &ts, &cats);
  /* the lane core's facts, projected at every capacity */
  char err[LH_ERR_LEN];
  size_t done = 0;
  int64_t *segs, *seg_offsets;
  lane_facts(keys, offsets, ts, N, &segs, &seg_offsets);
  for (int policy = LH_POLICY_LRU; policy <= LH_POLICY_WA; policy++) {
    for (size_t c = 0; c < CAPS; c++) {
      lh_sim *s = make(policy, caps[c]);
      for (size_t r = 0; r < N; r++) { /* one request per call: invariants after each */
        CHECK(lh_sim_process_batch(s, keys, (size_t)offsets[N], offsets + r, ts + r, cats + r, 1, hits + r, &done, err,
                                   sizeof err) == LH_OK);
        if (r % 97 == 0 || caps[c] < 4) CHECK(lh_sim_check(s, err, sizeof err) == LH_OK);
      }
      CHECK(lh_sim_check(s, err, sizeof err) == LH_OK);
      if (policy == LH_POLICY_LRU) {
        for (size_t r = 0; r < N; r++) {
          uint64_t want =
              lh_project_blocks(segs + 2 * seg_offsets[r], (size_t)(seg_offsets[r + 1] - seg_offsets[r]), caps[c]);
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
  free(keys), free(offsets), free(ts), free(hits), free(cats), free(segs), free(seg_offsets);
}

/* GDFS keeps the priorities near its clock in a ring and the others in a heap, moving them to the
 * ring as the clock rises: rings of 1 .. 64 priorities (most buckets go through the heap and
 * back) give the default ring's hits and evictions, request by request, invariants after each. */
static void test_gdfs_ring_widths(int contract) {
  enum { N = 3000, CAPS = 4, WIDTHS = 5 };
  const uint64_t caps[CAPS] = {1, 3, 8, 40};
  const size_t widths[WIDTHS] = {0, 1, 2, 8, 64}; /* 0: the default */
  int64_t *keys, *offsets, *ts, *hits = malloc(WIDTHS * N * sizeof *hits);
  int32_t *cats;
  random_requests(contract, N, &keys, &offsets, &ts, &cats);
  int64_t *evicted = malloc(WIDTHS * 8 * N * sizeof *evicted);
  size_t n_evicted[WIDTHS];
  char err[LH_ERR_LEN];
  for (size_t c = 0; c < CAPS; c++) {
    for (size_t w = 0; w < WIDTHS; w++) {
      lh_sim *s = make(LH_POLICY_GDFS, caps[c]);
      CHECK(widths[w] == 0 || lh_sim_gdfs_near_width(s, widths[w]) == 0);
      n_evicted[w] = 0;
      for (size_t r = 0; r < N; r++) {
        size_t done = 0;
        CHECK(lh_sim_process_batch(s, keys, (size_t)offsets[N], offsets + r, ts + r, cats + r, 1, hits + w * N + r,
                                   &done, err, sizeof err) == LH_OK);
        CHECK(lh_sim_check(s, err, sizeof err) == LH_OK);
        const int64_t *ev_keys, *ev_reqs;
        size_t n = lh_sim_evictions(s, &ev_keys, &ev_reqs);
        for (size_t i = 0; i < n; i++) evicted[w * 8 * N + n_evicted[w]++] = ev_keys[i];
      }
      CHECK(lh_sim_gdfs_near_width(s, 4) == -1); /* started */
      lh_sim_destroy(s);
      CHECK(memcmp(hits + w * N, hits, N * sizeof *hits) == 0);
      CHECK(n_evicted[w] == n_evicted[0] && memcmp(evicted + w * 8 * N, evicted, n_evicted[0] * sizeof *evicted) == 0);
    }
    CHECK(n_evicted[0] > 0);
  }
  lh_sim *lru = make(LH_POLICY_LRU, 4), *gdfs = make(LH_POLICY_GDFS, 4);
  CHECK(lh_sim_gdfs_near_width(lru, 4) == -1 && lh_sim_gdfs_near_width(gdfs, 3) == -1 &&
        lh_sim_gdfs_near_width(gdfs, 0) == -1 && lh_sim_gdfs_near_width(gdfs, 8) == 0);
  lh_sim_destroy(lru);
  lh_sim_destroy(gdfs);
  free(keys), free(offsets), free(ts), free(hits), free(cats), free(evicted);
}

/* Blocks hit thousands of times: capacity 2 holds two keys of H 4,100 and 6,000 while the clock
 * is 0, so the smallest H is found past the ring's first summary word (positions 0 .. 4,095; 4,100
 * is in the first bitmap word of the next one), and later insertions sit next to the clock while
 * key 2 stays far above it. Rings of 1 .. 8,192 priorities against the default, and the hits as
 * worked out by hand. */
static void test_gdfs_far_minimum(void) {
  enum { ONE = 4100, TWO = 6000, NEW = 40, N = ONE + TWO + NEW, WIDTHS = 5 };
  const size_t widths[WIDTHS] = {0, 1, 64, 4096, 8192};
  int64_t *keys = malloc(N * sizeof *keys), *hits = malloc(WIDTHS * N * sizeof *hits);
  size_t n = 0;
  for (size_t i = 0; i < ONE; i++) keys[n++] = 1; /* H(1) = 4,100 */
  for (size_t i = 0; i < TWO; i++) keys[n++] = 2; /* H(2) = 6,000 */
  for (int64_t k = 3; n < N; k++) keys[n++] = k;  /* new keys: each evicts the smallest H */
  for (size_t w = 0; w < WIDTHS; w++) {
    lh_sim *s = make(LH_POLICY_GDFS, 2);
    CHECK(widths[w] == 0 || lh_sim_gdfs_near_width(s, widths[w]) == 0);
    run_keys(s, keys, N, hits + w * N); /* invariants after every request */
    lh_sim_destroy(s);
    CHECK(memcmp(hits + w * N, hits, N * sizeof *hits) == 0);
  }
  /* key 3 evicts key 1 (H 4,100 < 6,000: L = 4,100) and enters at H 4,101; every later new key
   * evicts the one before it (H L + 1 < 6,000), so key 2 stays: hits are the repeats of 1 and 2 */
  int64_t total = 0;
  for (size_t i = 0; i < N; i++) total += hits[i];
  CHECK(total == (ONE - 1) + (TWO - 1));
  free(keys), free(hits);
}

/* Tables past 4 MiB (the key map and the simulator's slot array grown through many doublings):
 * 240,000 distinct keys, prefix-closed (a key determines the keys before it), so LRU's hits
 * equal the lane core's projection exactly; WA's invariants. */
static void test_large_tables(void) {
  enum { N = 80000, CAPACITY = 100000 };
  int64_t *keys = malloc(8 * N * sizeof *keys), *offsets = malloc((N + 1) * sizeof *offsets);
  int64_t *ts = malloc(N * sizeof *ts), *hits = malloc(N * sizeof *hits);
  int32_t *cats = malloc(N * sizeof *cats);
  offsets[0] = 0;
  for (size_t r = 0; r < N; r++) {
    size_t n = 1 + rnd() % 8;
    int64_t k = ((int64_t)1 << 36) + (int64_t)(rnd() % 30000); /* each position its own range */
    for (size_t j = 0; j < n; j++) keys[offsets[r] + (int64_t)j] = k = k * 8 + 1 + (int64_t)j;
    offsets[r + 1] = offsets[r] + (int64_t)n;
    ts[r] = (int64_t)r * 1000000;
    cats[r] = (int32_t)(rnd() % 3);
  }
  char err[LH_ERR_LEN];
  size_t done = 0;
  int64_t *segs, *seg_offsets;
  lane_facts(keys, offsets, ts, N, &segs, &seg_offsets);
  lh_sim *lru = make(LH_POLICY_LRU, CAPACITY), *wa = make(LH_POLICY_WA, CAPACITY);
  CHECK(lh_sim_process_batch(lru, keys, (size_t)offsets[N], offsets, ts, cats, N, hits, &done, err, sizeof err) ==
        LH_OK);
  for (size_t r = 0; r < N; r++) {
    uint64_t want =
        lh_project_blocks(segs + 2 * seg_offsets[r], (size_t)(seg_offsets[r + 1] - seg_offsets[r]), CAPACITY);
    CHECK((uint64_t)hits[r] == want);
  }
  CHECK(lh_sim_process_batch(wa, keys, (size_t)offsets[N], offsets, ts, cats, N, hits, &done, err, sizeof err) ==
        LH_OK);
  lh_sim_stats st;
  lh_sim_get_stats(lru, &st);
  CHECK(st.resident == CAPACITY && st.memory_bytes > ((size_t)4 << 20));
  CHECK(lh_sim_check(lru, err, sizeof err) == LH_OK);
  CHECK(lh_sim_check(wa, err, sizeof err) == LH_OK);
  lh_sim_destroy(lru);
  lh_sim_destroy(wa);
  free(keys), free(offsets), free(ts), free(hits), free(cats), free(segs), free(seg_offsets);
}

#define S 1000000000LL

static void test_evidence_golden(void) {
  /* capacity 2, LRU, one batch (see tests/test_window.py for the walk-through):
   *   0 s [1,2] no_match 1 | 10 s [3] no_match 3, evicts 2 @10 | 25 s [1,2] hit 1, evicted 2 (@10),
   *   evicts 1 and 3 @25 | 26 s [3] evicted 3 (@25), evicts 2 @26 | 100 s [2] evicted 2 (@26) */
  int64_t keys[] = {1, 2, 3, 1, 2, 3, 2}, offsets[] = {0, 2, 3, 5, 6, 7};
  int64_t ts[] = {0, 10 * S, 25 * S, 26 * S, 100 * S}, hits[5], miss_key[5], at[5];
  int32_t cats[5] = {0}, outcome[5];
  const int32_t want_outcome[] = {LH_SIM_MISS_NO_MATCH, LH_SIM_MISS_NO_MATCH, LH_SIM_MISS_EVICTED, LH_SIM_MISS_EVICTED,
                                  LH_SIM_MISS_EVICTED};
  const int64_t want_hits[] = {0, 0, 1, 0, 0}, want_key[] = {1, 3, 2, 3, 2}, want_at[] = {0, 0, 10 * S, 25 * S, 26 * S};
  lh_sim *s = NULL;
  char err[LH_ERR_LEN];
  size_t done = 0;
  CHECK(lh_sim_create(&s, LH_POLICY_LRU, 2, NULL, LH_SIM_RECORD_EVICTIONS | LH_SIM_MISS_EVIDENCE, err, sizeof err) ==
        LH_OK);
  CHECK(lh_sim_process_batch_misses(s, keys, sizeof keys / sizeof keys[0], offsets, ts, cats, 5, hits, outcome,
                                    miss_key, at, &done, err, sizeof err) == LH_OK);
  CHECK(done == 5 && lh_sim_check(s, err, sizeof err) == LH_OK);
  CHECK(memcmp(hits, want_hits, sizeof hits) == 0 && memcmp(outcome, want_outcome, sizeof outcome) == 0);
  CHECK(memcmp(miss_key, want_key, sizeof miss_key) == 0 && memcmp(at, want_at, sizeof at) == 0);
  lh_sim_stats st;
  lh_sim_get_stats(s, &st);
  CHECK(st.evictions == 5 && st.peak_evictions_per_s == 2 && st.peak_second == 25 && st.evicted_keys == 3);
  /* a full hit: [2] is resident after the last request */
  int64_t again[] = {2}, one[] = {0, 1}, later = 101 * S;
  CHECK(lh_sim_process_batch_misses(s, again, 1, one, &later, cats, 1, hits, outcome, miss_key, at, &done, err,
                                    sizeof err) == LH_OK);
  CHECK(hits[0] == 1 && outcome[0] == LH_SIM_FULL_HIT && miss_key[0] == 0 && at[0] == 0);
  lh_sim_destroy(s);
}

static void test_evidence_errors(void) {
  lh_sim *s = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_sim_create(&s, LH_POLICY_LRU, 1, NULL, 4, err, sizeof err) == LH_EINVAL && s == NULL);
  CHECK(lh_sim_create(&s, LH_POLICY_LRU, 1, NULL, 0, err, sizeof err) == LH_OK);
  int64_t keys[] = {1}, offsets[] = {0, 1}, ts[] = {0}, hits[1], key[1], at[1];
  int32_t cats[] = {0}, outcome[1];
  size_t done = 9;
  CHECK(lh_sim_process_batch_misses(s, keys, 1, offsets, ts, cats, 1, hits, outcome, key, at, &done, err, sizeof err) ==
        LH_EINVAL);
  CHECK(done == 0 && strstr(err, "LH_SIM_MISS_EVIDENCE") != NULL);
  lh_sim_stats st;
  lh_sim_get_stats(s, &st);
  CHECK(st.requests == 0 && st.evicted_keys == 0);
  lh_sim_destroy(s);
}

/* Random requests one per call, times from -20 s on (negative seconds floor down), checked
 * against the eviction log: the latest logged eviction of the first uncached key, and the most
 * evictions in one floor(t / 1e9) second. */
static void test_evidence_random(void) {
  enum { N = 2500 };
  int64_t *log_keys = malloc(8 * N * sizeof *log_keys), *log_ts = malloc(8 * N * sizeof *log_ts);
  for (int policy = LH_POLICY_LRU; policy <= LH_POLICY_WA; policy++) {
    for (uint64_t capacity = 1; capacity <= 16; capacity *= 4) {
      lh_sim *s = NULL;
      char err[LH_ERR_LEN];
      CHECK(lh_sim_create(&s, policy, capacity, &WA, LH_SIM_RECORD_EVICTIONS | LH_SIM_MISS_EVIDENCE, err, sizeof err) ==
            LH_OK);
      size_t n_log = 0, evicted = 0, seen[3] = {0, 0, 0};
      int64_t now = -20 * S - 1, second = 0, peak_second = 0;
      uint64_t in_second = 0, peak = 0;
      for (size_t r = 0; r < N; r++) {
        int64_t keys[8], offsets[2] = {0, (int64_t)(rnd() % 6)}, hits, key, at;
        int32_t cat = (int32_t)(rnd() % 3), outcome;
        for (int64_t j = 0; j < offsets[1]; j++) keys[j] = (int64_t)(rnd() % 40);
        now += (int64_t)(rnd() % 4) * (S / 3);
        size_t done = 0;
        CHECK(lh_sim_process_batch_misses(s, keys, 8, offsets, &now, &cat, 1, &hits, &outcome, &key, &at, &done, err,
                                          sizeof err) == LH_OK);
        int64_t want_at = 0;
        int found = 0;
        for (size_t e = n_log; hits < offsets[1] && e-- > 0;) {
          if (log_keys[e] == keys[hits]) {
            want_at = log_ts[e];
            found = 1;
            break;
          }
        }
        int32_t want = hits == offsets[1] ? LH_SIM_FULL_HIT : found ? LH_SIM_MISS_EVICTED : LH_SIM_MISS_NO_MATCH;
        CHECK(outcome == want && at == want_at && key == (hits < offsets[1] ? keys[hits] : 0));
        seen[want]++;
        const int64_t *ev_keys, *ev_reqs;
        size_t n_ev = lh_sim_evictions(s, &ev_keys, &ev_reqs);
        int64_t sec = now >= 0 ? now / S : -((-now + S - 1) / S);
        if (n_ev > 0 && sec != second) second = sec, in_second = 0;
        for (size_t e = 0; e < n_ev; e++) {
          log_keys[n_log] = ev_keys[e];
          log_ts[n_log++] = now;
          if (++in_second > peak) peak = in_second, peak_second = second;
        }
        evicted += n_ev;
      }
      CHECK(lh_sim_check(s, err, sizeof err) == LH_OK);
      lh_sim_stats st;
      lh_sim_get_stats(s, &st);
      CHECK(st.evictions == evicted && st.peak_evictions_per_s == peak && st.peak_second == peak_second);
      CHECK(seen[LH_SIM_FULL_HIT] > 0 && seen[LH_SIM_MISS_EVICTED] > 0 && seen[LH_SIM_MISS_NO_MATCH] > 0);
      lh_sim_destroy(s);
    }
  }
  free(log_keys), free(log_ts);
}

/* A simulation with evidence of `n` requests over `keys` keys (in runs of consecutive keys, as a
 * Mooncake trace numbers them; a few at random) at `capacity`, each request a second after the
 * last: the evidence changes no hit nor eviction (against a plain simulator), every request's evidence is the latest
 * logged eviction of its first uncached key, the invariants hold along the way, evicted_keys counts the distinct keys
 * ever evicted, and the memory stays as it was at n / 2 (`steady`: a long trace over few keys,
 * whose evicting requests far outnumber its keys, so the ghost times must be dropped as no key
 * holds them any longer). Every policy. */
static void check_evidence_run(size_t keys, uint64_t capacity, size_t n, int steady) {
  int64_t *last = malloc(keys * sizeof *last); /* latest eviction time of each key, or -1 */
  CHECK(last != NULL);
  for (int policy = LH_POLICY_LRU; policy <= LH_POLICY_WA; policy++) {
    lh_sim *plain = NULL, *ev = NULL;
    char err[LH_ERR_LEN];
    CHECK(lh_sim_create(&plain, policy, capacity, &WA, LH_SIM_RECORD_EVICTIONS, err, sizeof err) == LH_OK);
    CHECK(lh_sim_create(&ev, policy, capacity, &WA, LH_SIM_RECORD_EVICTIONS | LH_SIM_MISS_EVIDENCE, err, sizeof err) ==
          LH_OK);
    for (size_t k = 0; k < keys; k++) last[k] = -1;
    size_t distinct = 0;
    uint64_t half_memory = 0, plain_half_memory = 0;
    int64_t now = 0;
    for (size_t r = 0; r < n; r++) {
      int64_t key_set[24], offsets[2] = {0, 1 + (int64_t)(rnd() % (keys < 24 ? keys : 24))}, want, hits, key, at;
      int64_t span = (int64_t)(r < n / 2 && keys > 300 ? 300 : keys) - offsets[1]; /* few keys first */
      int64_t base = (int64_t)(rnd() % (uint64_t)(span + 1));
      for (int64_t j = 0; j < offsets[1]; j++) key_set[j] = rnd() % 5 == 0 ? (int64_t)(rnd() % keys) : base + j;
      int32_t cat = (int32_t)(rnd() % 3), outcome;
      now += S;
      size_t done = 0;
      CHECK(lh_sim_process_batch(plain, key_set, 24, offsets, &now, &cat, 1, &want, &done, err, sizeof err) == LH_OK);
      CHECK(lh_sim_process_batch_misses(ev, key_set, 24, offsets, &now, &cat, 1, &hits, &outcome, &key, &at, &done, err,
                                        sizeof err) == LH_OK);
      CHECK(hits == want);
      if (hits == offsets[1]) {
        CHECK(outcome == LH_SIM_FULL_HIT && key == 0 && at == 0);
      } else {
        int64_t t = last[key_set[hits]];
        CHECK(key == key_set[hits] && outcome == (t < 0 ? LH_SIM_MISS_NO_MATCH : LH_SIM_MISS_EVICTED) &&
              at == (t < 0 ? 0 : t));
      }
      const int64_t *ev_keys, *ev_reqs, *plain_keys, *plain_reqs;
      size_t n_ev = lh_sim_evictions(ev, &ev_keys, &ev_reqs);
      CHECK(lh_sim_evictions(plain, &plain_keys, &plain_reqs) == n_ev &&
            memcmp(plain_keys, ev_keys, n_ev * sizeof *ev_keys) == 0);
      for (size_t e = 0; e < n_ev; e++) {
        distinct += last[ev_keys[e]] < 0;
        last[ev_keys[e]] = now;
      }
      if (r % 64 == 0)
        CHECK(lh_sim_check(ev, err, sizeof err) == LH_OK && lh_sim_check(plain, err, sizeof err) == LH_OK);
      if (r + 1 == n / 2) {
        lh_sim_stats st;
        lh_sim_get_stats(ev, &st);
        half_memory = st.memory_bytes;
        lh_sim_get_stats(plain, &st);
        plain_half_memory = st.memory_bytes;
      }
    }
    CHECK(lh_sim_check(ev, err, sizeof err) == LH_OK);
    lh_sim_stats st;
    lh_sim_get_stats(ev, &st);
    CHECK(st.evicted_keys == distinct && distinct > keys / 6);
    if (steady) CHECK(st.memory_bytes == half_memory && st.evictions > 4 * n);
    /* without evidence the map drops its ghosts rather than grow past what the capacity needs (WA
     * keeps every key's entry): the keys of the second half change nothing */
    CHECK(lh_sim_check(plain, err, sizeof err) == LH_OK);
    lh_sim_get_stats(plain, &st);
    CHECK(policy == LH_POLICY_WA || st.memory_bytes == plain_half_memory);
    lh_sim_destroy(plain);
    lh_sim_destroy(ev);
  }
  free(last);
}

/* The evidence's map grows many times (slots learn their keys' new places), and a long trace over
 * a few keys keeps its memory. The plain simulator beside it drops its ghosts many times
 * (6,000 keys at capacity 200) with the same hits and evictions. */
static void test_evidence_growth(void) {
  check_evidence_run(6000, 200, 3000, 0);
  check_evidence_run(30, 4, 40000, 1);
}

static int cmp_value(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* Every rank of arrays shaped to trouble a quickselect (runs of one value, sorted, reversed,
 * organ pipe, few distinct values, random), with the default round budget and with budgets
 * small enough that the sorting fallback does the work. */
static void test_select(void) {
  enum { MAX_N = 97 };
  int64_t values[MAX_N], sorted[MAX_N], work[MAX_N];
  for (int trial = 0; trial < 600; trial++) {
    size_t n = 1 + (size_t)(rnd() % MAX_N);
    int shape = trial % 6;
    for (size_t i = 0; i < n; i++) {
      switch (shape) {
        case 0: values[i] = 7; break;
        case 1: values[i] = (int64_t)i; break;
        case 2: values[i] = (int64_t)(n - i); break;
        case 3: values[i] = (int64_t)(i < n / 2 ? i : n - i); break;
        case 4: values[i] = (int64_t)(rnd() % 3); break;
        default: values[i] = (int64_t)(rnd() % 1000) - 500; break;
      }
    }
    memcpy(sorted, values, n * sizeof *values);
    qsort(sorted, n, sizeof *sorted, cmp_value);
    for (size_t k = 0; k < n; k++) {
      int budgets[] = {-1, 0, 1, 2, 3};
      for (size_t b = 0; b < sizeof budgets / sizeof budgets[0]; b++) {
        memcpy(work, values, n * sizeof *values);
        CHECK(lh_select_i64(work, n, k, budgets[b]) == sorted[k]);
        qsort(work, n, sizeof *work, cmp_value); /* a permutation of the input */
        CHECK(memcmp(work, sorted, n * sizeof *work) == 0);
      }
    }
  }
}

int main(void) {
  test_golden();
  test_errors();
  test_random(1);
  test_random(0);
  test_gdfs_ring_widths(1);
  test_gdfs_ring_widths(0);
  test_gdfs_far_minimum();
  test_large_tables();
  test_evidence_golden();
  test_evidence_errors();
  test_evidence_random();
  test_evidence_growth();
  test_select();
  return finish("policy simulator");
}
