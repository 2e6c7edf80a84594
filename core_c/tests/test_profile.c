/* test_profile.c - C-level tests of the workload-profile recorder (lh_profile.h), built and run
 * under AddressSanitizer and UndefinedBehaviorSanitizer by tests/test_core_sanitized.py.
 *
 * Written against the header's contract, fed with the curves of a real lane (lh_lane.h):
 * golden values on hand-made traces (reuse times, per-key first/last/category/shared/reuses,
 * hits by threshold, windows, hits per request), repeated keys within a request, a TTL lane, the
 * category split (base category, base_reuses snapshot, per-category keys), every error path
 * (recorder unchanged, failing index in n_done), reset and reuse, stats, and a random
 * differential test against a naive computation kept in this file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_test.h"
#include "litehit.h"

/* Allocation failures must come back as NULL (-> LH_ENOMEM), not abort the sanitized program:
 * the huge-threshold cases below may legitimately ask for more memory than exists. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

#define MAXCAT 12 /* categories probed: 0 .. MAXCAT - 1 (plus -1 and a huge id) */

/* ---------------------------------------------------------------------------------------------
 * helpers */

static lh_profile *new_profile(int64_t window_ns) {
  lh_profile *p = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_profile_create(&p, window_ns, err, sizeof err) == LH_OK);
  CHECK(p != NULL);
  return p;
}

static lh_lane *new_lane(int64_t ttl_ns) {
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, ttl_ns, 0, err, sizeof err) == LH_OK);
  return lane;
}

/* Feeds n requests to the lane, then the same requests and the lane's curves to the recorder;
 * hits receives the recorder's per-request hit blocks. Checks that the recorder's hits are the
 * blocks the lane's curves cover. */
static void feed(lh_lane *lane, lh_profile *p, const int64_t *keys, const int64_t *offsets, const int64_t *ts,
                 const int32_t *cats, size_t n, int64_t *hits) {
  size_t total = (size_t)(offsets[n] - offsets[0]);
  int64_t *segs = malloc(sizeof(int64_t) * (2 * total + 2));
  int64_t *seg_offsets = malloc(sizeof(int64_t) * (n + 1));
  size_t done = 99;
  char err[LH_ERR_LEN] = "";
  CHECK(segs != NULL && seg_offsets != NULL);
  if (segs == NULL || seg_offsets == NULL) goto out;
  CHECK(lh_lane_process_batch(lane, keys, (size_t)offsets[n], offsets, ts, n, segs, seg_offsets, NULL, NULL, &done, err,
                              sizeof err) == LH_OK);
  CHECK(done == n);
  done = 99;
  int st = lh_profile_record_batch(p, keys, NULL, (size_t)offsets[n], offsets, ts, cats, n, segs,
                                   (size_t)seg_offsets[n], seg_offsets, hits, &done, err, sizeof err);
  CHECK(st == LH_OK);
  if (st != LH_OK) fprintf(stderr, "  record_batch: %s\n", err);
  CHECK(done == n);
  for (size_t r = 0; r < n; r++) {
    int64_t covered = 0;
    for (int64_t s = seg_offsets[r]; s < seg_offsets[r + 1]; s++) covered += segs[2 * s + 1];
    CHECK(hits[r] == covered);
  }
out:
  free(segs);
  free(seg_offsets);
}

/* Records with hand-made curves (keys and segments end where the last request's do); returns the status. */
static int record(lh_profile *p, const int64_t *keys, const int64_t *offsets, const int64_t *ts, const int32_t *cats,
                  size_t n, const int64_t *segs, const int64_t *seg_offsets, int64_t *hits, size_t *done) {
  char err[LH_ERR_LEN] = "";
  size_t n_keys = offsets[n] > 0 ? (size_t)offsets[n] : 0, n_segs = seg_offsets[n] > 0 ? (size_t)seg_offsets[n] : 0;
  int st = lh_profile_record_batch(p, keys, NULL, n_keys, offsets, ts, cats, n, segs, n_segs, seg_offsets, hits, done,
                                   err, sizeof err);
  if (st != LH_OK) CHECK(err[0] != '\0'); /* a failure always says why */
  return st;
}

/* The hit blocks whose threshold is exactly t, from the view's difference array (0 past it). */
static int64_t at_threshold(const lh_profile_view *v, size_t t) {
  int64_t sum = 0;
  size_t end = t < v->n_thresholds ? t + 1 : v->n_thresholds;
  for (size_t i = 0; i < end; i++) sum += v->threshold_slope[i];
  return sum;
}

/* Checks the difference array against want[0..n) (exact hit blocks per threshold, 0 beyond). */
static void check_thresholds(const lh_profile_view *v, const int64_t *want, size_t n) {
  size_t top = n > v->n_thresholds ? n : v->n_thresholds;
  int64_t sum = 0;
  for (size_t t = 0; t <= top; t++) {
    if (t < v->n_thresholds) sum += v->threshold_slope[t];
    int64_t w = t < n ? want[t] : 0;
    if (sum != w) {
      fprintf(stderr, "  threshold %zu: want %lld got %lld\n", t, (long long)w, (long long)sum);
      CHECK(sum == w);
      return;
    }
  }
  CHECK(sum == 0); /* every segment's -1 is stored: nothing hits past the array */
}

/* Category c's reuse count of key k, reconstructed as the header describes: while only the base
 * category has reused (n_base == 0) the per-key counts are its own; after, base_reuses plus the
 * records naming k. */
static uint32_t category_count(lh_profile *p, int32_t c, size_t k) {
  lh_profile_view v;
  lh_profile_reuses r;
  lh_profile_get_view(p, &v);
  lh_profile_get_reuses(p, c, &r);
  if (v.n_base == 0) return c == v.base_category && k < v.n_keys ? v.reuses[k] : 0u;
  uint32_t n = 0;
  if (c == v.base_category && k < v.n_base) n = v.base_reuses[k];
  for (size_t i = 0; i < r.n_keys; i++) n += r.keys[i] == (uint32_t)k;
  return n;
}

/* Whether a category's reuses are want[0 .. n), in order: the runs expanded, each run of
 * length >= 1 and apart from its neighbours (runs are maximal below UINT32_MAX). */
static int reuses_are(const lh_profile_reuses *r, const int64_t *want, size_t n) {
  if (r->n != n) return 0;
  size_t at = 0;
  for (size_t i = 0; i < r->n_runs; i++) {
    if (r->runs[i] == 0 || (i > 0 && r->ns[i] == r->ns[i - 1] && r->runs[i - 1] < UINT32_MAX)) return 0;
    for (uint32_t j = 0; j < r->runs[i]; j++, at++)
      if (at >= n || want[at] != r->ns[i]) return 0;
  }
  return at == n;
}

static int same_reuses(lh_profile *a, lh_profile *b, int32_t c) {
  lh_profile_reuses x, y;
  lh_profile_get_reuses(a, c, &x);
  lh_profile_get_reuses(b, c, &y);
  if (x.n != y.n || x.n_runs != y.n_runs || x.n_keys != y.n_keys) return 0;
  if (x.n_runs &&
      (memcmp(x.ns, y.ns, x.n_runs * sizeof(int64_t)) != 0 || memcmp(x.runs, y.runs, x.n_runs * sizeof(uint32_t)) != 0))
    return 0;
  if (x.n_keys && memcmp(x.keys, y.keys, x.n_keys * sizeof(uint32_t)) != 0) return 0;
  return 1;
}

#define SAME_ARRAY(a, b, n) ((n) == 0 || memcmp((a), (b), (n) * sizeof *(a)) == 0)

/* Key k's facts as the view gives them: request numbers into the request arrays. */
static int64_t key_first_ns(const lh_profile_view *v, size_t k) { return v->request_ns[v->first_req[k]]; }
static int64_t key_last_ns(const lh_profile_view *v, size_t k) { return v->request_ns[v->last_req[k]]; }
static int32_t key_first_cat(const lh_profile_view *v, size_t k) { return v->request_cat[v->first_req[k]]; }
static int key_shared(const lh_profile_view *v, size_t k) { return v->first_req[k] != v->last_req[k]; }

/* Whether the view's n keys have these first and latest access times, first categories (NULL:
 * not checked) and shared flags. */
static int keys_are(const lh_profile_view *v, const int64_t *first, const int64_t *last, const int32_t *fcat,
                    const uint8_t *shares, size_t n) {
  if (v->n_keys != n) return 0;
  for (size_t k = 0; k < n; k++) {
    if (key_first_ns(v, k) != first[k] || key_last_ns(v, k) != last[k] || key_shared(v, k) != shares[k]) return 0;
    if (fcat != NULL && key_first_cat(v, k) != fcat[k]) return 0;
  }
  return 1;
}

/* Everything observable of two recorders is equal (memory_bytes aside). */
static void check_same(lh_profile *a, lh_profile *b, int line) {
  lh_profile_view x, y;
  lh_profile_get_view(a, &x);
  lh_profile_get_view(b, &y);
  const char *what = NULL;
  if (x.n_keys != y.n_keys) what = "n_keys";
  else if (x.n_windows != y.n_windows) what = "n_windows";
  else if (x.n_categories != y.n_categories) what = "n_categories";
  else if (x.base_category != y.base_category) what = "base_category";
  else if (x.n_base != y.n_base) what = "n_base";
  else if (x.n_requests != y.n_requests) what = "n_requests";
  else if (!SAME_ARRAY(x.first_req, y.first_req, x.n_keys)) what = "first_req";
  else if (!SAME_ARRAY(x.last_req, y.last_req, x.n_keys)) what = "last_req";
  else if (!SAME_ARRAY(x.request_ns, y.request_ns, x.n_requests)) what = "request_ns";
  else if (!SAME_ARRAY(x.request_cat, y.request_cat, x.n_requests)) what = "request_cat";
  else if (!SAME_ARRAY(x.reuses, y.reuses, x.n_keys)) what = "reuses";
  else if (!SAME_ARRAY(x.window, y.window, x.n_windows)) what = "window";
  else if (!SAME_ARRAY(x.window_keys, y.window_keys, x.n_windows)) what = "window_keys";
  else if (!SAME_ARRAY(x.base_reuses, y.base_reuses, x.n_base)) what = "base_reuses";
  size_t top = x.n_thresholds > y.n_thresholds ? x.n_thresholds : y.n_thresholds;
  for (size_t t = 0; !what && t <= top; t++)
    if (at_threshold(&x, t) != at_threshold(&y, t)) what = "threshold_slope";
  for (int32_t c = -1; !what && c < MAXCAT; c++)
    if (!same_reuses(a, b, c)) what = "category reuses";
  lh_profile_stats s, u;
  lh_profile_get_stats(a, &s);
  lh_profile_get_stats(b, &u);
  if (!what && !(s.requests == u.requests && s.accesses == u.accesses && s.keys == u.keys && s.reuses == u.reuses))
    what = "stats";
  if (what) {
    fprintf(stderr, "%s:%d: recorders differ (%s)\n", __FILE__, line, what);
    failures++;
  }
}
#define CHECK_SAME(a, b) check_same((a), (b), __LINE__)

static void check_empty_reuses(lh_profile *p, int32_t c) {
  lh_profile_reuses r;
  memset(&r, 0x5a, sizeof r);
  lh_profile_get_reuses(p, c, &r);
  CHECK(r.n == 0 && r.n_runs == 0 && r.n_keys == 0);
}

/* ---------------------------------------------------------------------------------------------
 * golden trace (window 10 ns, pure LRU), keys 1..5 have indexes 0..4:
 *   r0 cat 0 t 0  [1 2 3]  cold
 *   r1 cat 0 t 5  [1 2 4]  curve (1,2): 1 and 2 reused after 5
 *   r2 cat 1 t 12 [1 2 3]  curve (1,2)(4,1): 1, 2 after 7, 3 after 12 -- the second category
 *   r3 cat 0 t 13 [1 5]    curve (1,1): 1 after 1
 *   r4 cat 1 t 25 [1 5]    curve (1,2): 1 and 5 after 12 */

static const int64_t G_KEYS[] = {1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 5, 1, 5};
static const int64_t G_OFFSETS[] = {0, 3, 6, 9, 11, 13};
static const int64_t G_TS[] = {0, 5, 12, 13, 25};
static const int32_t G_CATS[] = {0, 0, 1, 0, 1};

static void check_golden(lh_profile *p, const int64_t *hits) {
  static const int64_t want_hits[] = {0, 2, 3, 1, 2};
  CHECK(memcmp(hits, want_hits, sizeof want_hits) == 0);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  static const int64_t first[] = {0, 0, 0, 5, 13}, last[] = {25, 12, 12, 5, 25};
  static const int32_t fcat[] = {0, 0, 0, 0, 0};
  static const uint8_t shares[] = {1, 1, 1, 0, 1};
  static const uint32_t reuses[] = {4, 2, 1, 0, 1};
  CHECK(v.n_keys == 5);
  if (v.n_keys == 5) {
    CHECK(keys_are(&v, first, last, fcat, shares, 5));
    CHECK(memcmp(v.reuses, reuses, sizeof reuses) == 0);
  }
  /* thresholds: r1 1,2; r2 1,2,4; r3 1; r4 1,2 */
  static const int64_t by_threshold[] = {0, 4, 3, 0, 1};
  check_thresholds(&v, by_threshold, 5);
  /* windows: 0 {1,2,3,4}; 1 {1,2,3,5}; 2 {1,5} */
  static const int64_t window[] = {0, 1, 2}, window_keys[] = {4, 4, 2};
  CHECK(v.n_windows == 3);
  if (v.n_windows == 3) {
    CHECK(memcmp(v.window, window, sizeof window) == 0);
    CHECK(memcmp(v.window_keys, window_keys, sizeof window_keys) == 0);
  }
  CHECK(v.n_categories >= 2);
  CHECK(v.base_category == 0);
  /* the counts when category 1 first reused (r2): keys 1 and 2 once each, 3 and 4 never */
  CHECK(v.n_base == 4);
  for (size_t k = 0; k < v.n_base; k++) CHECK(v.base_reuses[k] == (k < 2 ? 1u : 0u));
  lh_profile_reuses r;
  lh_profile_get_reuses(p, 0, &r);
  static const int64_t ns0[] = {5, 5, 1};
  CHECK(reuses_are(&r, ns0, 3));
  CHECK(r.n_keys == 1 && r.keys[0] == 0);
  lh_profile_get_reuses(p, 1, &r);
  static const int64_t ns1[] = {7, 7, 12, 12, 12};
  static const uint32_t keys1[] = {0, 1, 2, 0, 4};
  CHECK(reuses_are(&r, ns1, 5));
  CHECK(r.n_keys == 5 && memcmp(r.keys, keys1, sizeof keys1) == 0);
  check_empty_reuses(p, 2);
  check_empty_reuses(p, -1);
  check_empty_reuses(p, INT32_MAX);
  /* per-category counts reconstructed as the header says */
  static const uint32_t per_cat[2][5] = {{2, 1, 0, 0, 0}, {2, 1, 1, 0, 1}};
  for (int32_t c = 0; c < 2; c++)
    for (size_t k = 0; k < 5; k++) CHECK(category_count(p, c, k) == per_cat[c][k]);
  lh_profile_stats s;
  lh_profile_get_stats(p, &s);
  CHECK(s.requests == 5 && s.accesses == 13 && s.keys == 5 && s.reuses == 8 && s.memory_bytes > 0);
}

static void test_golden(void) {
  /* one batch */
  lh_lane *lane = new_lane(0);
  lh_profile *p = new_profile(10);
  int64_t hits[5];
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == 0 && v.n_windows == 0 && v.base_category == -1 && v.n_base == 0);
  check_empty_reuses(p, 0);
  lh_profile_stats s;
  lh_profile_get_stats(p, &s);
  CHECK(s.requests == 0 && s.accesses == 0 && s.keys == 0 && s.reuses == 0);
  feed(lane, p, G_KEYS, G_OFFSETS, G_TS, G_CATS, 5, hits);
  check_golden(p, hits);
  /* before the second category reused: no split yet */
  lh_lane_reset(lane);
  lh_profile_reset(p);
  feed(lane, p, G_KEYS, G_OFFSETS, G_TS, G_CATS, 2, hits);
  lh_profile_get_view(p, &v);
  CHECK(v.base_category == 0 && v.n_base == 0);
  lh_profile_reuses r;
  lh_profile_get_reuses(p, 0, &r);
  CHECK(reuses_are(&r, (const int64_t[]){5, 5}, 2) && r.n_keys == 0);
  CHECK(category_count(p, 0, 0) == 1 && category_count(p, 0, 1) == 1);
  lh_profile_destroy(p);
  lh_lane_destroy(lane);

  /* one request per batch, with offsets not starting at 0 */
  lane = new_lane(0);
  p = new_profile(10);
  for (size_t q = 0; q < 5; q++) {
    int64_t off[2] = {G_OFFSETS[q], G_OFFSETS[q + 1]};
    feed(lane, p, G_KEYS, off, &G_TS[q], &G_CATS[q], 1, &hits[q]);
  }
  check_golden(p, hits);
  lh_profile_destroy(p);
  lh_lane_destroy(lane);
}

/* The same golden trace with hand-written curves, and curve offsets not starting at 0. */
static void test_golden_hand_curves(void) {
  lh_profile *p = new_profile(10);
  int64_t segs[] = {-7, -7, 1, 2, 1, 2, 4, 1, 1, 1, 1, 2};
  int64_t seg_offsets[] = {1, 1, 2, 4, 5, 6};
  int64_t hits[5];
  size_t done = 0;
  CHECK(record(p, G_KEYS, G_OFFSETS, G_TS, G_CATS, 5, segs, seg_offsets, hits, &done) == LH_OK && done == 5);
  check_golden(p, hits);
  lh_profile_destroy(p);
}

/* A key repeated within a request: its reuse times are measured against the state before the
 * request; a window counts it once; an access is a request containing it. */
static void test_repeated_keys(void) {
  lh_lane *lane = new_lane(0);
  lh_profile *p = new_profile(100);
  /* r0 t0 [1 2]; r1 t10 [1 1 2] -> (1,3); r2 t15 [2 2 1] -> (2,3); r3 t20 [3 3] cold;
   * r4 t30 [3] -> (1,1) */
  int64_t keys[] = {1, 2, 1, 1, 2, 2, 2, 1, 3, 3, 3}, offsets[] = {0, 2, 5, 8, 10, 11}, ts[] = {0, 10, 15, 20, 30},
          hits[5];
  int32_t cats[] = {0, 0, 0, 0, 0};
  feed(lane, p, keys, offsets, ts, cats, 5, hits);
  CHECK(hits[0] == 0 && hits[1] == 3 && hits[2] == 3 && hits[3] == 0 && hits[4] == 1);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == 3);
  if (v.n_keys == 3) {
    static const int64_t first[] = {0, 0, 20}, last[] = {15, 15, 30};
    static const uint8_t shares[] = {1, 1, 1};
    static const uint32_t reuses[] = {3, 3, 1};
    CHECK(keys_are(&v, first, last, NULL, shares, 3) && memcmp(v.reuses, reuses, sizeof reuses) == 0);
  }
  CHECK(v.n_windows == 1 && v.window[0] == 0 && v.window_keys[0] == 3);
  /* r1: thresholds 1,2,3; r2: 2,3,4; r4: 1 */
  static const int64_t by_threshold[] = {0, 2, 2, 2, 1};
  check_thresholds(&v, by_threshold, 5);
  lh_profile_reuses r;
  lh_profile_get_reuses(p, 0, &r);
  static const int64_t ns[] = {10, 10, 10, 5, 5, 5, 10};
  CHECK(reuses_are(&r, ns, 7) && r.n_runs == 3 && r.n_keys == 0);
  lh_profile_stats s;
  lh_profile_get_stats(p, &s);
  CHECK(s.requests == 5 && s.accesses == 11 && s.keys == 3 && s.reuses == 7);
  lh_profile_destroy(p);

  /* a key only in one request, however often, is not shared */
  p = new_profile(100);
  int64_t once[] = {9, 9, 9}, off1[] = {0, 3}, t1 = 4, h1 = -1;
  int32_t c1 = 3;
  lh_lane_reset(lane);
  feed(lane, p, once, off1, &t1, &c1, 1, &h1);
  lh_profile_get_view(p, &v);
  CHECK(h1 == 0 && v.n_keys == 1 && !key_shared(&v, 0) && key_first_cat(&v, 0) == 3 && v.reuses[0] == 0);
  CHECK(v.n_windows == 1 && v.window_keys[0] == 1 && v.base_category == -1);
  lh_profile_destroy(p);
  lh_lane_destroy(lane);
}

/* A TTL lane: an expired block is no reuse (the curve stops there), but it is an access. */
static void test_ttl(void) {
  lh_lane *lane = new_lane(10);
  lh_profile *p = new_profile(1000);
  /* r0 t0 [1 2]; r1 t10 [1 2] (both expired: age 10 is not < 10); r2 t15 [1 2] (age 5);
   * r3 t30 [2 1] (expired again); r4 t31 [2] (age 1) */
  int64_t keys[] = {1, 2, 1, 2, 1, 2, 2, 1, 2}, offsets[] = {0, 2, 4, 6, 8, 9}, ts[] = {0, 10, 15, 30, 31}, hits[5];
  int32_t cats[] = {0, 1, 1, 2, 0};
  feed(lane, p, keys, offsets, ts, cats, 5, hits);
  CHECK(hits[0] == 0 && hits[1] == 0 && hits[2] == 2 && hits[3] == 0 && hits[4] == 1);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == 2);
  if (v.n_keys == 2) {
    CHECK(key_first_ns(&v, 0) == 0 && key_first_ns(&v, 1) == 0 && key_last_ns(&v, 0) == 30 && key_last_ns(&v, 1) == 31);
    CHECK(key_shared(&v, 0) && key_shared(&v, 1) && v.reuses[0] == 1 && v.reuses[1] == 2);
    CHECK(key_first_cat(&v, 0) == 0 && key_first_cat(&v, 1) == 0);
  }
  CHECK(v.base_category == 1);
  lh_profile_reuses r;
  lh_profile_get_reuses(p, 1, &r);
  CHECK(reuses_are(&r, (const int64_t[]){5, 5}, 2));
  lh_profile_get_reuses(p, 0, &r);
  CHECK(reuses_are(&r, (const int64_t[]){1}, 1) && r.n_keys == 1 && r.keys[0] == 1);
  check_empty_reuses(p, 2); /* category 2 had only an expired request */
  CHECK(category_count(p, 1, 0) == 1 && category_count(p, 1, 1) == 1);
  CHECK(category_count(p, 0, 0) == 0 && category_count(p, 0, 1) == 1);
  CHECK(v.n_windows == 1 && v.window_keys[0] == 2);
  lh_profile_stats s;
  lh_profile_get_stats(p, &s);
  CHECK(s.requests == 5 && s.accesses == 9 && s.keys == 2 && s.reuses == 3);
  lh_profile_destroy(p);
  lh_lane_destroy(lane);
}

/* Windows are floor(time / window_ns), negative times included; an empty request still makes
 * its window seen; equal timestamps are in order. */
static void test_windows(void) {
  lh_lane *lane = new_lane(0);
  lh_profile *p = new_profile(10);
  int64_t keys[] = {1, 2, 1, 3, 4, 4, 1}, offsets[] = {0, 1, 1, 3, 4, 4, 6, 7},
          ts[] = {INT64_MIN + 30, -15, -10, -1, 0, 0, 29}, hits[7]; /* the widest span: 2^63 - 1 ns */
  int32_t cats[] = {0, 0, 0, 0, 0, 0, 0};
  /* windows: min/10 floored; -2 {}; -1 {2,1} + {3}; 0 {} + {4}; 2 {1} */
  feed(lane, p, keys, offsets, ts, cats, 7, hits);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  static const int64_t window[] = {(INT64_MIN + 30) / 10 - 1, -2, -1, 0, 2}, window_keys[] = {1, 0, 3, 1, 1};
  CHECK(v.n_windows == 5);
  if (v.n_windows == 5) {
    CHECK(memcmp(v.window, window, sizeof window) == 0);
    CHECK(memcmp(v.window_keys, window_keys, sizeof window_keys) == 0);
  }
  CHECK(hits[2] == 0 && hits[6] == 1);
  lh_profile_reuses r;
  lh_profile_get_reuses(p, 0, &r);
  CHECK(reuses_are(&r, (const int64_t[]){39}, 1)); /* key 1 last at -10 */
  lh_profile_stats s;
  lh_profile_get_stats(p, &s);
  CHECK(s.requests == 7 && s.accesses == 7 && s.keys == 4);
  lh_profile_destroy(p);
  lh_lane_destroy(lane);
}

/* ---------------------------------------------------------------------------------------------
 * errors: a batch of three requests whose last one is bad; the first two are recorded, the bad
 * one changes nothing, n_done = 2, and the recorder keeps working. */

/* prefix, recorded first: t100 cat 0 [1 2 3]; t110 cat 0 [1 2] (1,2) */
static const int64_t P_KEYS[] = {1, 2, 3, 1, 2}, P_OFFSETS[] = {0, 3, 5}, P_TS[] = {100, 110};
static const int32_t P_CATS[] = {0, 0};
static const int64_t P_SEGS[] = {1, 2}, P_SEG_OFFSETS[] = {0, 0, 1};

typedef struct bad_case {
  const char *what;
  int64_t keys[8];
  int64_t offsets[4];
  int64_t ts[3];
  int32_t cats[3];
  int64_t segs[8];
  int64_t seg_offsets[4];
  int any_status; /* 1: any error status will do (out of memory or out of range) */
} bad_case;

/* the good batch: t120 cat 0 [1 4] (1,1); t130 cat 0 [2 5] (1,1); t1000 cat 1 [1 2 3 6] (1,1)(3,2) */
/* (the formatter cannot see through a braced list in a macro, so it leaves these and the table alone) */
/* clang-format off */
#define GOOD_KEYS {1, 4, 2, 5, 1, 2, 3, 6}
#define GOOD_KEYS_LAST(a, b, c, d) {1, 4, 2, 5, a, b, c, d}
/* clang-format on */

static void prefix(lh_profile *p) {
  int64_t hits[2];
  size_t done = 0;
  CHECK(record(p, P_KEYS, P_OFFSETS, P_TS, P_CATS, 2, P_SEGS, P_SEG_OFFSETS, hits, &done) == LH_OK && done == 2);
}

static void test_errors(void) {
  /* clang-format off */
  const bad_case good = {"good", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, 1, 3, 2},
                         {0, 1, 2, 4}, 0};
  const int64_t big = (INT64_C(1) << 61) + 1;
  const bad_case cases[] = {
      {"timestamp backwards", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 125}, {0, 0, 1}, {1, 1, 1, 1, 1, 1, 3, 2},
       {0, 1, 2, 4}, 0},
      {"negative category", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, -1}, {1, 1, 1, 1, 1, 1, 3, 2},
       {0, 1, 2, 4}, 0},
      {"start 0", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 0, 2}, {0, 1, 2, 3}, 0},
      {"start negative", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, -3, 1}, {0, 1, 2, 3}, 0},
      {"thresholds overlap", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, 2, 2, 1},
       {0, 1, 2, 4}, 0},
      {"thresholds decrease", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 3, 1, 1, 1},
       {0, 1, 2, 4}, 0},
      {"run beyond the request", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, 2, 4, 3},
       {0, 1, 2, 4}, 0},
      {"single run beyond the request", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, 5},
       {0, 1, 2, 3}, 0},
      {"run overflows", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, 2, 3, INT64_MAX},
       {0, 1, 2, 4}, 0},
      {"negative run", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, -1}, {0, 1, 2, 3}, 0},
      {"negative run after a good one", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1},
       {1, 1, 1, 1, 1, 2, 5, -1}, {0, 1, 2, 4}, 0},
      {"covers a key never seen", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, 3, 5, 1},
       {0, 1, 2, 4}, 0},
      {"covers a key first seen in this request", GOOD_KEYS_LAST(1, 7, 7, 2), {0, 2, 4, 8}, {120, 130, 1000},
       {0, 0, 1}, {1, 1, 1, 1, 1, 3}, {0, 1, 2, 3}, 0},
      {"key offsets decrease", GOOD_KEYS, {0, 2, 4, 3}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1}, {0, 1, 2, 2}, 0},
      {"curve offsets decrease", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1}, {1, 1, 1, 1, 1, 1},
       {0, 1, 2, 1}, 0},
      {"threshold past INT64_MAX", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1},
       {1, 1, 1, 1, 1, 1, INT64_MAX, 1}, {0, 1, 2, 4}, 1},
      {"threshold too large to store", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1},
       {1, 1, 1, 1, 1, 1, big, 1}, {0, 1, 2, 4}, 1},
      {"threshold needing terabytes", GOOD_KEYS, {0, 2, 4, 8}, {120, 130, 1000}, {0, 0, 1},
       {1, 1, 1, 1, 1, 1, INT64_C(1) << 40, 1}, {0, 1, 2, 4}, 1},
  };
  /* clang-format on */
  int64_t hits[3];
  size_t done = 0;
  /* the good batch passes */
  lh_profile *p = new_profile(100);
  prefix(p);
  CHECK(record(p, good.keys, good.offsets, good.ts, good.cats, 3, good.segs, good.seg_offsets, hits, &done) == LH_OK);
  CHECK(done == 3 && hits[0] == 1 && hits[1] == 1 && hits[2] == 3);
  lh_profile_destroy(p);

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const bad_case *b = &cases[i];
    lh_profile *ref = new_profile(100);
    p = new_profile(100);
    prefix(p);
    prefix(ref);
    done = 99;
    hits[0] = hits[1] = -1;
    char err[LH_ERR_LEN] = "";
    int st = lh_profile_record_batch(p, b->keys, NULL, sizeof b->keys / sizeof b->keys[0], b->offsets, b->ts, b->cats,
                                     3, b->segs, sizeof b->segs / sizeof b->segs[0] / 2, b->seg_offsets, hits, &done,
                                     err, sizeof err);
    int status_ok = b->any_status ? st != LH_OK : st == LH_EINVAL;
    if (!status_ok || done != 2 || err[0] == '\0') {
      fprintf(stderr, "  error case '%s': status %d done %zu err '%s'\n", b->what, st, done, err);
      CHECK(status_ok && done == 2 && err[0] != '\0');
    }
    CHECK(hits[0] == 1 && hits[1] == 1);
    /* the reference records only the two good requests */
    int64_t ref_hits[2];
    CHECK(record(ref, good.keys, good.offsets, good.ts, good.cats, 2, good.segs, good.seg_offsets, ref_hits, &done) ==
          LH_OK);
    int before = failures;
    CHECK_SAME(p, ref);
    if (failures != before) fprintf(stderr, "  ... after error case '%s'\n", b->what);
    /* both go on with the good third request */
    CHECK(record(p, good.keys, &good.offsets[2], &good.ts[2], &good.cats[2], 1, good.segs, &good.seg_offsets[2], hits,
                 &done) == LH_OK);
    CHECK(hits[0] == 3);
    CHECK(record(ref, good.keys, &good.offsets[2], &good.ts[2], &good.cats[2], 1, good.segs, &good.seg_offsets[2], hits,
                 &done) == LH_OK);
    before = failures;
    CHECK_SAME(p, ref);
    if (failures != before) fprintf(stderr, "  ... continuing after error case '%s'\n", b->what);
    lh_profile_destroy(p);
    lh_profile_destroy(ref);
  }

  /* failing at index 0: a timestamp below the previous batch's last */
  p = new_profile(100);
  lh_profile *ref = new_profile(100);
  prefix(p);
  prefix(ref);
  int64_t k1[] = {1}, o1[] = {0, 1}, t1[] = {109}, s1[] = {1, 1}, so1[] = {0, 1};
  int32_t c1[] = {0};
  done = 99;
  CHECK(record(p, k1, o1, t1, c1, 1, s1, so1, hits, &done) == LH_EINVAL && done == 0);
  CHECK_SAME(p, ref);
  t1[0] = 110; /* equal is fine */
  CHECK(record(p, k1, o1, t1, c1, 1, s1, so1, hits, &done) == LH_OK && done == 1 && hits[0] == 1);
  /* an empty batch */
  done = 99;
  CHECK(record(p, k1, o1, t1, c1, 0, s1, so1, hits, &done) == LH_OK && done == 0);
  /* curve offsets past the segments (lh_batch.h) */
  int64_t so_past[] = {0, 2};
  char msg[LH_ERR_LEN] = "";
  CHECK(lh_profile_record_batch(p, k1, NULL, 1, o1, t1, c1, 1, s1, 1, so_past, hits, &done, msg, sizeof msg) ==
        LH_EINVAL);
  CHECK(done == 0 &&
        strstr(msg, "request 0: curve offsets must be non-decreasing and within segments (0 .. 2 of 1)") != NULL);
  lh_profile_destroy(p);
  lh_profile_destroy(ref);

  /* create */
  lh_profile *bad = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_profile_create(&bad, 0, err, sizeof err) == LH_EINVAL);
  CHECK(lh_profile_create(&bad, -5, err, sizeof err) == LH_EINVAL);
  CHECK(bad == NULL);
  lh_profile_destroy(NULL);
}

/* A request that would be the first reuse of all fails after two good blocks: no base category,
 * no reuse, no key, no window, no threshold stays behind. */
static void test_error_at_the_first_reuse(void) {
  lh_profile *p = new_profile(100), *ref = new_profile(100);
  int64_t keys[] = {1, 2, 3, 1, 2, 9, 8}, offsets[] = {0, 3, 7}, ts[] = {5, 500}, hits[2];
  int64_t segs[] = {1, 1, 2, 1, 3, 1}, seg_offsets[] = {0, 0, 3};
  int32_t cats[] = {0, 3};
  size_t done = 99;
  CHECK(record(ref, keys, offsets, ts, cats, 1, segs, seg_offsets, hits, &done) == LH_OK && done == 1);
  CHECK(record(p, keys, offsets, ts, cats, 2, segs, seg_offsets, hits, &done) == LH_EINVAL && done == 1);
  CHECK_SAME(p, ref);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.base_category == -1 && v.n_keys == 3 && v.n_windows == 1 && at_threshold(&v, 1) == 0);
  check_empty_reuses(p, 3);
  /* then a good one: category 3 is the base */
  int64_t good_segs[] = {1, 1, 2, 1}, good_so[] = {0, 0, 2};
  int64_t ok_offsets[] = {0, 3, 5};
  CHECK(record(p, keys, &ok_offsets[1], &ts[1], &cats[1], 1, good_segs, &good_so[1], hits, &done) == LH_OK);
  CHECK(done == 1 && hits[0] == 2);
  lh_profile_get_view(p, &v);
  CHECK(v.base_category == 3 && v.n_base == 0 && v.reuses[0] == 1 && v.reuses[1] == 1 && v.reuses[2] == 0);
  lh_profile_destroy(p);
  lh_profile_destroy(ref);
}

/* Category ids are any int32 >= 0: a large one reuses like any other (or, if the recorder
 * cannot hold that many categories, fails cleanly and changes nothing). */
static void test_large_categories(void) {
  static const int32_t ids[] = {100000, INT32_MAX};
  for (size_t i = 0; i < 2; i++) {
    lh_profile *p = new_profile(100), *ref = new_profile(100);
    prefix(p);
    prefix(ref);
    int64_t keys[] = {1, 2}, offsets[] = {0, 2}, ts[] = {200}, segs[] = {1, 2}, seg_offsets[] = {0, 1}, hits[1];
    int32_t cats[] = {ids[i]};
    size_t done = 99;
    int st = record(p, keys, offsets, ts, cats, 1, segs, seg_offsets, hits, &done);
    if (st == LH_OK) {
      CHECK(done == 1 && hits[0] == 2);
      lh_profile_view v;
      lh_profile_get_view(p, &v);
      CHECK(v.n_categories > (size_t)ids[i] && v.base_category == 0 && v.n_base == 3);
      lh_profile_reuses r;
      lh_profile_get_reuses(p, ids[i], &r);
      CHECK(reuses_are(&r, (const int64_t[]){90, 90}, 2) && r.n_keys == 2 && r.keys[0] == 0 && r.keys[1] == 1);
      CHECK(category_count(p, ids[i], 0) == 1 && category_count(p, 0, 0) == 1 && category_count(p, 0, 2) == 0);
      check_empty_reuses(p, ids[i] - 1);
    } else {
      CHECK(ids[i] == INT32_MAX && done == 0); /* 100000 categories must fit */
      CHECK_SAME(p, ref);
    }
    lh_profile_destroy(p);
    lh_profile_destroy(ref);
  }
}

/* reset forgets everything (the last timestamp too) and keeps window_ns. */
static void test_reset(void) {
  lh_lane *lane = new_lane(0);
  lh_profile *p = new_profile(10);
  int64_t hits[5];
  feed(lane, p, G_KEYS, G_OFFSETS, G_TS, G_CATS, 5, hits);
  lh_profile_reset(p);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == 0 && v.n_windows == 0 && v.base_category == -1 && v.n_base == 0);
  CHECK(at_threshold(&v, 0) == 0 && at_threshold(&v, 1) == 0 && at_threshold(&v, 4) == 0);
  for (size_t t = 0; t < v.n_thresholds; t++) CHECK(v.threshold_slope[t] == 0);
  for (int32_t c = -1; c < MAXCAT; c++) check_empty_reuses(p, c);
  lh_profile_stats s;
  lh_profile_get_stats(p, &s);
  CHECK(s.requests == 0 && s.accesses == 0 && s.keys == 0 && s.reuses == 0);
  /* a key recorded before the reset is unknown now */
  int64_t k[] = {1}, o[] = {0, 1}, t[] = {0}, segs[] = {1, 1}, so[] = {0, 1}, h;
  int32_t c[] = {0};
  size_t done = 99;
  CHECK(record(p, k, o, t, c, 1, segs, so, &h, &done) == LH_EINVAL && done == 0);
  /* times start again below the last one before the reset */
  lh_lane_reset(lane);
  feed(lane, p, G_KEYS, G_OFFSETS, G_TS, G_CATS, 5, hits);
  check_golden(p, hits);
  lh_profile_reset(p);
  lh_profile_reset(p);
  lh_lane_reset(lane);
  feed(lane, p, G_KEYS, G_OFFSETS, G_TS, G_CATS, 5, hits);
  check_golden(p, hits);
  lh_profile_destroy(p);
  lh_lane_destroy(lane);
}

/* ---------------------------------------------------------------------------------------------
 * random differential test against a naive computation */

#define NK 40     /* key space */
#define MAXREQ 7  /* blocks per request: 0 .. MAXREQ - 1 */
#define NREQ 3000 /* requests per run */
#define NCATS 5   /* category ids drawn: 0, 1, 2, 3, 9 */
#define MAXT 4096 /* thresholds tracked by the naive count */

typedef struct naive {
  int64_t key[NK];
  int64_t first[NK], last[NK];
  int32_t fcat[NK];
  int requests[NK];
  uint32_t reuses[NK];
  size_t nk;
  int32_t base; /* first category that reused, -1 */
  int split;    /* a second category has reused */
  uint32_t snap[NK];
  uint32_t count[MAXCAT][NK]; /* per category and key */
  int64_t *ns[MAXCAT];        /* every reuse of a category */
  size_t n_ns[MAXCAT];
  uint32_t *keys[MAXCAT]; /* the key of every reuse since the split */
  size_t n_keys[MAXCAT];
  int64_t by_threshold[MAXT];
  int64_t (*pairs)[2]; /* (window, key index) of every access */
  size_t n_pairs;
  int64_t win[NREQ + 64]; /* every window that saw a request, in order */
  size_t n_win;
  uint64_t requests_total, accesses, reuses_total;
} naive;

static const int32_t CAT_IDS[NCATS] = {0, 1, 2, 3, 9};

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

static long find_key(const naive *m, int64_t key) {
  for (size_t i = 0; i < m->nk; i++)
    if (m->key[i] == key) return (long)i;
  return -1;
}

static void naive_clear(naive *m) {
  for (int c = 0; c < MAXCAT; c++) {
    free(m->ns[c]);
    free(m->keys[c]);
  }
  free(m->pairs);
  memset(m, 0, sizeof *m);
  m->base = -1;
}

/* The hit blocks of a request at infinite capacity, from the definition: the leading blocks
 * whose key an earlier request accessed, less than ttl ago (ttl > 0). */
static int64_t naive_hits(const naive *m, const int64_t *keys, size_t n, int64_t now, int64_t ttl) {
  size_t h = 0;
  while (h < n) {
    long k = find_key(m, keys[h]);
    if (k < 0 || (ttl > 0 && !(now - m->last[k] < ttl))) break;
    h++;
  }
  return (int64_t)h;
}

static void push_ns(naive *m, int c, int64_t ns) {
  int64_t *grown = realloc(m->ns[c], sizeof(int64_t) * (m->n_ns[c] + 1));
  CHECK(grown != NULL);
  if (grown == NULL) return;
  m->ns[c] = grown;
  m->ns[c][m->n_ns[c]++] = ns;
}

static void push_key(naive *m, int c, uint32_t k) {
  uint32_t *grown = realloc(m->keys[c], sizeof(uint32_t) * (m->n_keys[c] + 1));
  CHECK(grown != NULL);
  if (grown == NULL) return;
  m->keys[c] = grown;
  m->keys[c][m->n_keys[c]++] = k;
}

/* Applies one request: the first h blocks are reuses; segs are its curve. */
static void naive_request(naive *m, const int64_t *keys, size_t n, int64_t now, int32_t cat, int64_t h,
                          const int64_t *segs, size_t nseg, int64_t window_ns) {
  for (int64_t j = 0; j < h; j++) {
    long k = find_key(m, keys[j]);
    CHECK(k >= 0);
    if (k < 0) return;
    if (m->base < 0) m->base = cat;
    if (cat != m->base && !m->split) {
      m->split = 1;
      memcpy(m->snap, m->reuses, sizeof m->snap);
    }
    push_ns(m, cat, now - m->last[k]); /* last[] is still the state before the request */
    if (m->split) push_key(m, cat, (uint32_t)k);
    m->reuses[k]++;
    m->count[cat][k]++;
    m->reuses_total++;
  }
  for (size_t s = 0; s < nseg; s++)
    for (int64_t j = 0; j < segs[2 * s + 1]; j++) {
      int64_t t = segs[2 * s] + j;
      CHECK(t > 0 && t < MAXT);
      if (t > 0 && t < MAXT) m->by_threshold[t]++;
    }
  int64_t w = floor_div(now, window_ns);
  if (m->n_win == 0 || m->win[m->n_win - 1] != w) m->win[m->n_win++] = w;
  int64_t(*grown)[2] = n ? realloc(m->pairs, sizeof *m->pairs * (m->n_pairs + n)) : NULL;
  CHECK(grown != NULL || n == 0);
  if (grown != NULL) m->pairs = grown;
  for (size_t j = 0; j < n; j++) {
    long k = find_key(m, keys[j]);
    int seen_here = 0;
    for (size_t i = 0; i < j; i++) seen_here |= keys[i] == keys[j];
    if (k < 0) {
      k = (long)m->nk++;
      m->key[k] = keys[j];
      m->first[k] = now;
      m->fcat[k] = cat;
    }
    if (!seen_here) m->requests[k]++;
    m->last[k] = now;
    if (grown != NULL) {
      m->pairs[m->n_pairs][0] = w;
      m->pairs[m->n_pairs][1] = k;
      m->n_pairs++;
    }
  }
  m->requests_total++;
  m->accesses += n;
}

static int cmp_pair(const void *a, const void *b) {
  const int64_t *x = a, *y = b;
  if (x[0] != y[0]) return x[0] < y[0] ? -1 : 1;
  if (x[1] != y[1]) return x[1] < y[1] ? -1 : 1;
  return 0;
}

static void check_against_naive(lh_profile *p, const naive *m, const char *what) {
  int before = failures;
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == m->nk);
  if (v.n_keys == m->nk) {
    for (size_t k = 0; k < m->nk; k++) {
      CHECK(key_first_ns(&v, k) == m->first[k] && key_last_ns(&v, k) == m->last[k] &&
            key_first_cat(&v, k) == m->fcat[k]);
      CHECK(key_shared(&v, k) == (m->requests[k] >= 2) && v.reuses[k] == m->reuses[k]);
    }
  }
  check_thresholds(&v, m->by_threshold, MAXT);
  /* windows: every window that saw a request; its distinct (window, key) pairs */
  CHECK(v.n_windows == m->n_win);
  int64_t(*pairs)[2] = malloc(sizeof *pairs * (m->n_pairs ? m->n_pairs : 1));
  CHECK(pairs != NULL);
  if (pairs != NULL && v.n_windows == m->n_win) {
    if (m->n_pairs) memcpy(pairs, m->pairs, sizeof *pairs * m->n_pairs);
    qsort(pairs, m->n_pairs, sizeof *pairs, cmp_pair);
    size_t i = 0;
    for (size_t w = 0; w < m->n_win; w++) {
      int64_t distinct = 0;
      while (i < m->n_pairs && pairs[i][0] < m->win[w]) i++;
      for (; i < m->n_pairs && pairs[i][0] == m->win[w]; i++) distinct += i == 0 || cmp_pair(pairs[i], pairs[i - 1]);
      CHECK(v.window[w] == m->win[w] && v.window_keys[w] == distinct);
    }
  }
  free(pairs);
  /* categories */
  CHECK(v.base_category == m->base);
  if (!m->split) {
    CHECK(v.n_base == 0);
  } else {
    CHECK(v.n_base <= v.n_keys);
    for (size_t k = 0; k < m->nk; k++) CHECK((k < v.n_base ? v.base_reuses[k] : 0u) == m->snap[k]);
  }
  for (int c = 0; c < MAXCAT; c++) {
    lh_profile_reuses r;
    lh_profile_get_reuses(p, c, &r);
    CHECK(reuses_are(&r, m->ns[c], m->n_ns[c]));
    CHECK(r.n_keys == m->n_keys[c]);
    if (r.n_keys == m->n_keys[c] && r.n_keys) CHECK(memcmp(r.keys, m->keys[c], r.n_keys * sizeof(uint32_t)) == 0);
    if (m->n_ns[c]) CHECK((size_t)c < v.n_categories);
    if ((size_t)c >= v.n_categories) CHECK(r.n == 0);
    for (size_t k = 0; k < m->nk; k++) CHECK(category_count(p, c, k) == m->count[c][k]);
  }
  check_empty_reuses(p, -1);
  lh_profile_stats s;
  lh_profile_get_stats(p, &s);
  CHECK(s.requests == m->requests_total && s.accesses == m->accesses && s.keys == m->nk);
  CHECK(s.reuses == m->reuses_total && s.memory_bytes > 0);
  if (failures != before) fprintf(stderr, "  ... in the differential run %s\n", what);
}

/* numbered: the lane numbers its keys (LH_LANE_KEY_IDS) and the recorder is fed those numbers
 * instead of the keys; the lane's invariants (its numbers among them) are checked after each batch. */
static void differential(int64_t ttl, int64_t window_ns, int32_t first_cat, size_t first_len, uint64_t seed,
                         const char *what, int numbered) {
  rng_state = seed;
  int64_t key_values[NK];
  for (size_t k = 0; k < NK; k++) key_values[k] = (int64_t)((uint64_t)k * 0x9E3779B97F4A7C15ULL);
  naive *m = calloc(1, sizeof *m);
  CHECK(m != NULL);
  if (m == NULL) return;
  lh_lane *lane = NULL;
  char lane_err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, ttl, numbered ? LH_LANE_KEY_IDS : 0, lane_err, sizeof lane_err) == LH_OK);
  lh_profile *p = new_profile(window_ns);
  m->base = -1;
  int64_t now = -50; /* starts below 0: windows of negative times */
  size_t r = 0;
  int did_reset = 0;
  int64_t *keys = malloc(sizeof(int64_t) * 64 * MAXREQ), *segs = malloc(sizeof(int64_t) * 2 * 64 * MAXREQ);
  int64_t offsets[65], ts[64], seg_offsets[65], hits[64];
  int32_t cats[64];
  uint32_t *ids = numbered ? malloc(sizeof(uint32_t) * 64 * MAXREQ) : NULL;
  CHECK(keys != NULL && segs != NULL && (ids != NULL || !numbered));
  while (keys != NULL && segs != NULL && (ids != NULL || !numbered) && r < NREQ) {
    size_t n = 1 + (size_t)(rnd() % 40), total = 0;
    offsets[0] = 0;
    for (size_t q = 0; q < n; q++) {
      size_t len = (size_t)(rnd() % MAXREQ);
      for (size_t j = 0; j < len; j++) {
        /* skewed: low keys are hot; sometimes repeat the previous key */
        size_t k = (rnd() % 3 == 0) ? (size_t)(rnd() % NK) : (size_t)(rnd() % 8);
        keys[total + j] = (j > 0 && rnd() % 6 == 0) ? keys[total + j - 1] : key_values[k];
      }
      total += len;
      offsets[q + 1] = (int64_t)total;
      now += (int64_t)(rnd() % 4);
      ts[q] = now;
      cats[q] = (r + q < first_len) ? first_cat : CAT_IDS[rnd() % NCATS];
    }
    size_t done = 99;
    char err[LH_ERR_LEN] = "";
    CHECK(lh_lane_process_batch(lane, keys, (size_t)offsets[n], offsets, ts, n, segs, seg_offsets, NULL, ids, &done,
                                err, sizeof err) == LH_OK);
    CHECK(lh_lane_check(lane, err, sizeof err) == LH_OK);
    int64_t want[64]; /* the naive hits; the lane's curves and the recorder's hits must match them */
    int st = lh_profile_record_batch(p, numbered ? NULL : keys, ids, (size_t)offsets[n], offsets, ts, cats, n, segs,
                                     (size_t)seg_offsets[n], seg_offsets, hits, &done, err, sizeof err);
    CHECK(st == LH_OK && done == n);
    if (st != LH_OK) fprintf(stderr, "  record_batch: %s\n", err);
    for (size_t q = 0; q < n; q++) {
      const int64_t *rk = &keys[offsets[q]];
      size_t len = (size_t)(offsets[q + 1] - offsets[q]);
      want[q] = naive_hits(m, rk, len, ts[q], ttl);
      int64_t covered = 0;
      for (int64_t s = seg_offsets[q]; s < seg_offsets[q + 1]; s++) covered += segs[2 * s + 1];
      CHECK(covered == want[q] && hits[q] == want[q]);
      naive_request(m, rk, len, ts[q], cats[q], want[q], &segs[2 * seg_offsets[q]],
                    (size_t)(seg_offsets[q + 1] - seg_offsets[q]), window_ns);
    }
    r += n;
    if (rnd() % 4 == 0) check_against_naive(p, m, what);
    if (!did_reset && r >= NREQ / 2) {
      did_reset = 1;
      check_against_naive(p, m, what);
      lh_profile_reset(p);
      lh_lane_reset(lane);
      naive_clear(m);
      now -= 500; /* a reset forgets the last timestamp */
      check_against_naive(p, m, what);
    }
  }
  check_against_naive(p, m, what);
  naive_clear(m);
  free(m);
  free(keys);
  free(segs);
  free(ids);
  lh_profile_destroy(p);
  lh_lane_destroy(lane);
}

static void test_differential(void) {
  for (int numbered = 0; numbered <= 1; numbered++) { /* the key indices must be the lane's numbers */
    differential(0, 7, 2, 300, 0x1234567ULL, "lru, base category 2", numbered);
    differential(6, 5, 0, 0, 0xABCDEF12345ULL, "ttl 6", numbered);
    differential(0, 1000, 9, 1200, 0x5EED5EEDULL, "lru, base category 9, late split", numbered);
    differential(3, 1, 3, 50, 0x77ULL, "ttl 3, window 1", numbered);
  }
}

/* Key numbers: a number that skips one is refused and changes nothing; a recorder takes keys or
 * numbers for good; a lane that does not number its keys refuses to write numbers. */
static void test_key_numbers(void) {
  lh_profile *p = new_profile(10);
  char err[LH_ERR_LEN] = "";
  int64_t offsets[] = {0, 2, 4}, ts[] = {1, 2}, segs[] = {1, 1}, seg_none[] = {0, 0, 0}, hits[2] = {7, 7};
  int64_t seg_offsets[] = {0, 0, 1};
  int32_t cats[] = {0, 0};
  uint32_t skip[] = {0, 2, 0, 1}; /* block 1 should be 1 (a new key) or 0 */
  size_t done = 99;
  CHECK(lh_profile_record_batch(p, NULL, skip, 4, offsets, ts, cats, 2, segs, 0, seg_none, hits, &done, err,
                                sizeof err) == LH_EINVAL);
  CHECK(done == 0 && strstr(err, "block 1's key number 2 skips numbers (the next new key is number 1)") != NULL);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == 0 && v.n_windows == 0); /* (the difference array may have grown, by zeros) */
  uint32_t good[] = {0, 1, 0, 1};           /* two new keys, then both again: the second request hits key 0 */
  CHECK(lh_profile_record_batch(p, NULL, good, 4, offsets, ts, cats, 2, segs, 1, seg_offsets, hits, &done, err,
                                sizeof err) == LH_OK);
  CHECK(done == 2 && hits[0] == 0 && hits[1] == 1);
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == 2 && v.reuses[0] == 1 && v.reuses[1] == 0 && key_shared(&v, 0) && key_shared(&v, 1));
  CHECK(key_first_ns(&v, 1) == 1 && key_last_ns(&v, 1) == 2);
  int64_t keys[] = {5, 6, 5, 6}, later[] = {3, 4};
  CHECK(lh_profile_record_batch(p, keys, NULL, 4, offsets, later, cats, 2, segs, 0, seg_none, hits, &done, err,
                                sizeof err) == LH_EINVAL);
  CHECK(done == 0 && strstr(err, "fed key numbers: it cannot take keys") != NULL);
  uint32_t unseen[] = {2, 3, 2, 3}; /* the curve covers block 0 of request 1: key 2 was new in request 0 */
  CHECK(lh_profile_record_batch(p, NULL, unseen, 4, offsets, later, cats, 2, segs, 1, seg_offsets, hits, &done, err,
                                sizeof err) == LH_OK);
  uint32_t hit_unseen[] = {9}; /* a hit on a number never given */
  int64_t one[] = {0, 1}, one_seg[] = {0, 1}, t5[] = {5};
  CHECK(lh_profile_record_batch(p, NULL, hit_unseen, 1, one, t5, cats, 1, segs, 1, one_seg, hits, &done, err,
                                sizeof err) == LH_EINVAL);
  CHECK(done == 0 && strstr(err, "a key never seen before") != NULL);
  lh_profile_reset(p); /* a reset recorder takes either again */
  CHECK(lh_profile_record_batch(p, keys, NULL, 4, offsets, ts, cats, 2, segs, 1, seg_offsets, hits, &done, err,
                                sizeof err) == LH_OK);
  CHECK(lh_profile_record_batch(p, NULL, good, 4, offsets, later, cats, 2, segs, 0, seg_none, hits, &done, err,
                                sizeof err) == LH_EINVAL);
  CHECK(strstr(err, "fed keys: it cannot take key numbers") != NULL);
  lh_profile_destroy(p);

  lh_lane *plain = new_lane(0);
  int64_t lane_segs[8], lane_offsets[3];
  uint32_t out[4];
  CHECK(lh_lane_process_batch(plain, keys, 4, offsets, NULL, 2, lane_segs, lane_offsets, NULL, out, &done, err,
                              sizeof err) == LH_EINVAL);
  CHECK(done == 0 && strstr(err, "LH_LANE_KEY_IDS") != NULL);
  lh_lane_destroy(plain);
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* lh_tally_i64 against a sorted copy: the distinct values ascending with their run lengths, at
 * room exactly the distinct count; one short of it refused; sizes where the map grows. */
static void test_tally(void) {
  char err[LH_ERR_LEN];
  size_t sizes[] = {0, 1, 2, 7, 64, 1000, 20000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    size_t n = sizes[s];
    int64_t *v = malloc((n + 1) * sizeof *v), *sorted = malloc((n + 1) * sizeof *sorted);
    int64_t *values = malloc((n + 1) * sizeof *values), *counts = malloc((n + 1) * sizeof *counts);
    CHECK(v != NULL && sorted != NULL && values != NULL && counts != NULL);
    for (size_t i = 0; i < n; i++) { /* runs, extremes and a few thousand distinct values */
      uint64_t r = rnd();
      v[i] = i > 0 && r % 3 == 0 ? v[i - 1]
             : r % 17 == 0       ? (r % 2 ? INT64_MIN : INT64_MAX)
                                 : (int64_t)(r % 5000) - 2500;
    }
    memcpy(sorted, v, n * sizeof *v);
    qsort(sorted, n, sizeof *sorted, cmp_i64);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) distinct += i == 0 || sorted[i] != sorted[i - 1];
    size_t k = 99;
    int64_t high = 99;
    uint64_t low = 99;
    CHECK(lh_tally_i64(v, NULL, n, distinct, values, counts, &k, &high, &low, err, sizeof err) == LH_OK);
    CHECK(k == distinct);
#ifdef __SIZEOF_INT128__ /* the exact sum against the compiler's 128-bit integers */
    __int128 sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
    CHECK(high == (int64_t)(sum >> 64) && low == (uint64_t)sum);
#endif
    size_t at = 0;
    for (size_t j = 0; j < k && j < distinct; j++) {
      CHECK(counts[j] > 0 && at + (size_t)counts[j] <= n);
      if (counts[j] <= 0 || at + (size_t)counts[j] > n) break;
      for (int64_t c = 0; c < counts[j]; c++) CHECK(sorted[at + (size_t)c] == values[j]);
      at += (size_t)counts[j];
    }
    CHECK(at == n);
    if (distinct > 0) {
      err[0] = '\0';
      CHECK(lh_tally_i64(v, NULL, n, distinct - 1, values, counts, &k, &high, &low, err, sizeof err) == LH_ERANGE);
      CHECK(k == 0 && err[0] != '\0');
    }
    free(v);
    free(sorted);
    free(values);
    free(counts);
  }
}

/* lh_tally_i64 with weights (runs of equal values) against the runs expanded: each distinct
 * value's count is the sum of its weights, the sum is the weighted sum, at extreme values and
 * weights up to UINT32_MAX. */
static void test_tally_weighted(void) {
  char err[LH_ERR_LEN];
  enum { N = 3000 };
  static int64_t v[N], values[N], counts[N], want_counts[N];
  static uint32_t w[N];
  for (int round = 0; round < 4; round++) {
    for (size_t i = 0; i < N; i++) {
      uint64_t r = rnd();
      v[i] = r % 11 == 0 ? (r % 2 ? INT64_MIN : INT64_MAX) : (int64_t)(r % 300) - 150;
      w[i] = round == 3 && r % 7 == 0 ? UINT32_MAX - (uint32_t)(r % 3) : 1 + (uint32_t)(r % 5);
    }
    size_t k = 0;
    int64_t high = 0;
    uint64_t low = 0;
    CHECK(lh_tally_i64(v, w, N, N, values, counts, &k, &high, &low, err, sizeof err) == LH_OK);
    /* the counts: every value of the input looked up in the (ascending) output */
    for (size_t j = 0; j < k; j++) {
      want_counts[j] = 0;
      if (j > 0) CHECK(values[j - 1] < values[j]);
    }
    for (size_t i = 0; i < N; i++) {
      size_t j = 0;
      while (j < k && values[j] != v[i]) j++;
      CHECK(j < k);
      if (j < k) want_counts[j] += w[i];
    }
    for (size_t j = 0; j < k; j++) CHECK(counts[j] == want_counts[j]);
#ifdef __SIZEOF_INT128__
    __int128 sum = 0;
    for (size_t i = 0; i < N; i++) sum += (__int128)v[i] * w[i];
    CHECK(high == (int64_t)(sum >> 64) && low == (uint64_t)sum);
#endif
  }
}

/* Timestamps at the ends of int64: a reuse time of exactly 2^63 - 1 ns is recorded, one more
 * nanosecond of span is refused (it would wrap in now - last) and changes nothing. */
static void test_timestamp_span(void) {
  const int64_t keys[] = {7, 7, 7}, offsets[] = {0, 1, 2, 3}, segs[] = {1, 1, 1, 1}, seg_offsets[] = {0, 0, 1, 2};
  const int32_t cats[] = {0, 0, 0};
  const int64_t first = INT64_MIN + 5, widest = first + INT64_MAX; /* = 4 */
  int64_t ts[] = {first, widest, widest + 1}, hits[3] = {-1, -1, -1};
  size_t done = 9;
  char err[LH_ERR_LEN] = "";
  lh_profile *p = new_profile(1000);
  int st = lh_profile_record_batch(p, keys, NULL, 3, offsets, ts, cats, 3, segs, 2, seg_offsets, hits, &done, err,
                                   sizeof err);
  CHECK(st == LH_ERANGE && done == 2 && hits[0] == 0 && hits[1] == 1);
  CHECK(strstr(err, "request 2: timestamp 5 ns is more than 2^63 - 1 ns after the first request's") != NULL);
  lh_profile_reuses r;
  lh_profile_get_reuses(p, 0, &r);
  CHECK(r.n == 1 && r.n_runs == 1 && r.ns[0] == INT64_MAX && r.runs[0] == 1);
  lh_profile_view v;
  lh_profile_get_view(p, &v);
  CHECK(v.n_keys == 1 && key_first_ns(&v, 0) == first && key_last_ns(&v, 0) == widest && v.reuses[0] == 1);
  lh_profile_destroy(p);
}

int main(void) {
  test_golden();
  test_golden_hand_curves();
  test_repeated_keys();
  test_ttl();
  test_windows();
  test_errors();
  test_error_at_the_first_reuse();
  test_timestamp_span();
  test_large_categories();
  test_reset();
  test_differential();
  test_key_numbers();
  test_tally();
  test_tally_weighted();
  return finish("profile");
}
