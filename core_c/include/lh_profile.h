/* lh_profile.h - the workload-profile recorder: who reuses what, how soon, for how long.
 *
 * A recorder follows one lane. It is fed the same requests as the lane (keys, offsets,
 * timestamps), each request's category, and the curves the lane wrote for them, and keeps:
 *   per unique key   its first and latest access (an access = a request containing the key), as
 *                    request numbers, and its reuse count: 12 bytes;
 *   per request      with blocks: its timestamp and category (a key's access times, the category
 *                    of its first access, and whether more than one request accessed it - two
 *                    numbers differ - come from these);
 *   per reuse        (one per prefix hit block at infinite capacity: the blocks the curve covers)
 *                    the time since the key's latest access by an EARLIER request, kept with the
 *                    hitting request's category, in runs of equal times (a request's hits were
 *                    mostly last accessed together: about 30 reuses a run on Mooncake traces);
 *                    the key's index too once two categories reuse;
 *   per request      its infinite-capacity hit blocks (written to the caller);
 *   per capacity     the hit blocks by threshold as a difference array: slope[t] is +1 at every
 *                    curve segment's start and -1 just past its end, so the hit blocks whose
 *                    threshold is exactly t are slope[0] + ... + slope[t], and the lane's hit
 *                    blocks at capacity C the sum of those over t <= C;
 *   per time window  the number of distinct keys accessed in each aligned window of window_ns
 *                    (only windows that saw a request are stored; requests come in time order).
 * Everything it holds is O(unique keys + requests with blocks + reuse runs + windows that saw
 * requests), plus one key index per reuse once two categories reuse; it never sees a capacity. No
 * function prints, aborts or exits.
 *
 * Reuses by key within a category: while only one category (the base category) has reused, the
 * per-key reuse counts are that category's. When a second one first reuses, those counts are
 * kept as base_reuses and from then on every reuse also records its key, so category c's count
 * of key k is base_reuses[k] (c == base category, k < n_base) plus the records of c naming k.
 */
#ifndef LH_PROFILE_H
#define LH_PROFILE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lh_profile lh_profile;

/* What the recorder holds, as arrays owned by the recorder (valid until the next
 * lh_profile_record_batch, lh_profile_reset or lh_profile_destroy). Key i is the i-th distinct
 * key in order of first access; request j the j-th recorded request that had blocks. Key i's first
 * access was at request_ns[first_req[i]] by category request_cat[first_req[i]], its latest at
 * request_ns[last_req[i]], and two or more requests contained it exactly when the two differ. */
typedef struct lh_profile_view {
  size_t n_keys;
  const uint32_t *first_req;  /* n_keys: the first request containing the key */
  const uint32_t *last_req;   /* n_keys: the latest request containing the key */
  const uint32_t *reuses;     /* n_keys: reuses of the key, every category */
  size_t n_requests;          /* requests recorded that had blocks */
  const int64_t *request_ns;  /* n_requests: their timestamps */
  const int32_t *request_cat; /* n_requests: their categories */
  size_t n_thresholds;
  const int64_t *threshold_slope; /* n_thresholds: the difference array of hits by threshold */
  size_t n_windows;
  const int64_t *window;       /* n_windows, ascending: floor(time / window_ns) */
  const int64_t *window_keys;  /* n_windows: distinct keys accessed in that window */
  size_t n_categories;         /* categories 0 .. n_categories - 1 may have reuses */
  int32_t base_category;       /* the first category that reused (-1: no reuse yet) */
  size_t n_base;               /* 0 while only the base category has reused */
  const uint32_t *base_reuses; /* n_base: the keys' reuse counts when a second category first reused */
} lh_profile_view;

/* The reuses of one category, in order: n of them, as n_runs runs of equal reuse times (run i:
 * runs[i] >= 1 reuses of ns[i] ns; consecutive runs may share a time only where a run reached
 * UINT32_MAX). keys is empty (NULL) while only one category has reused, else the key index of
 * every reuse recorded since (the last n_keys ones). */
typedef struct lh_profile_reuses {
  uint64_t n;
  size_t n_runs;
  const int64_t *ns;
  const uint32_t *runs;
  size_t n_keys;
  const uint32_t *keys;
} lh_profile_reuses;

typedef struct lh_profile_stats {
  uint64_t requests;     /* requests recorded */
  uint64_t accesses;     /* block accesses recorded (every key of every request) */
  uint64_t keys;         /* distinct keys */
  uint64_t reuses;       /* infinite-capacity prefix hit blocks */
  uint64_t memory_bytes; /* bytes of recorder state currently allocated */
} lh_profile_stats;

/* Creates an empty recorder whose working-set windows are window_ns long (> 0). On success
 * *out owns it; release it with lh_profile_destroy. */
int lh_profile_create(lh_profile **out, int64_t window_ns, char *err, size_t errlen);

/* Releases a recorder and all its memory. NULL is a no-op. */
void lh_profile_destroy(lh_profile *p);

/* Forgets everything recorded (keeps window_ns). Cannot fail. */
void lh_profile_reset(lh_profile *p);

/* Records n_req requests the lane has just processed, in order. Request r has keys[offsets[r] ..
 * offsets[r+1]) of the n_keys keys (0 <= offsets[r] <= offsets[r+1] <= n_keys), given either as
 * keys (looked up in the recorder's own key map) or, when key_ids is not NULL, as their numbers
 * in order of first access (0 for the first key, each new key the next number: what a lane with
 * LH_LANE_KEY_IDS writes; keys is then ignored and may be NULL). A recorder takes one or the
 * other for good, from the first request it records (LH_EINVAL for the other); numbers need no
 * key map, the recorder's largest cost. A number above the next new one is refused (LH_EINVAL).
 * Request r has the timestamp
 * timestamps[r] (never below the previous request's, nor more than 2^63 - 1 ns after the first
 * request's: LH_ERANGE), the category categories[r] (>= 0) and the
 * curve the lane wrote for it: pairs seg_offsets[r] .. seg_offsets[r+1] of the n_segs pairs of
 * segs (offsets under the same rule; well formed, covering at most the request's blocks).
 * hits (caller-owned, n_req entries) receives each request's infinite-capacity hit blocks.
 * A recorder holds at most 2^32 - 2 distinct keys and 2^32 - 2 requests with blocks (LH_ERANGE
 * beyond: their numbers are uint32).
 * Returns LH_OK with *n_done = n_req, or an error with *n_done = the index of the failing
 * request: requests before it are recorded, the failing one changed nothing. */
int lh_profile_record_batch(lh_profile *p, const int64_t *keys, const uint32_t *key_ids, size_t n_keys,
                            const int64_t *offsets, const int64_t *timestamps, const int32_t *categories, size_t n_req,
                            const int64_t *segs, size_t n_segs, const int64_t *seg_offsets, int64_t *hits,
                            size_t *n_done, char *err, size_t errlen);

/* Fills *view with the recorder's arrays. Cannot fail. */
void lh_profile_get_view(const lh_profile *p, lh_profile_view *view);

/* Fills *out with the reuses of category (empty for a category without reuses). Cannot fail. */
void lh_profile_get_reuses(lh_profile *p, int32_t category, lh_profile_reuses *out);

/* The distinct values of v[0 .. n) in ascending order and how often each occurs: values[i] and
 * counts[i] for i < *n_distinct (both caller-owned, room for max_distinct entries), and the exact
 * sum of the values, sum_high x 2^64 + sum_low (a 128-bit integer). weights (may be NULL: 1
 * each) counts v[i] weights[i] times, as a run of equal values (a category's reuse runs); the
 * counts and the sum then never overflow for fewer than 2^63 values in all. This is what a
 * profile's statistics need of its reuse times and lifespans (quantiles, histograms, the ECDF,
 * the mean), without sorting every value: one pass over v through a hash map of the distinct
 * values. Returns LH_OK; LH_ERANGE when v holds more than max_distinct distinct values (the
 * caller sorts instead; values, counts and the sum hold nothing useful then); LH_ENOMEM. */
int lh_tally_i64(const int64_t *v, const uint32_t *weights, size_t n, size_t max_distinct, int64_t *values,
                 int64_t *counts, size_t *n_distinct, int64_t *sum_high, uint64_t *sum_low, char *err, size_t errlen);

/* Fills *stats. Cannot fail. */
void lh_profile_get_stats(const lh_profile *p, lh_profile_stats *stats);

#endif
