/* lh_policy.h - fixed-capacity cache simulation under a chosen eviction policy (what-if).
 *
 * This is a seam apart from the lane core: the lane core (lh_lane.h) is exact LRU at every
 * capacity at once and the only producer of facts; a simulator here answers ONE capacity under
 * ONE policy, for policies that are not stack algorithms (their hit rates cannot be read off a
 * capacity-independent curve).
 *
 * Semantics, per request in input order (capacity C blocks; C == 0 stores nothing):
 *   lookup  hits = the longest prefix of the request's keys resident at request start;
 *   commit  the keys from last to first, each position one access: a resident key gets the
 *           policy's hit update; a missing key, when C keys are resident, first evicts one victim
 *           chosen by the policy (any resident key, including keys this request just committed),
 *           then is inserted.
 * Every access gets a global, strictly increasing sequence number; "least recent" means the
 * smallest sequence number of a block's last access, and breaks every tie between victims.
 *
 * Policies (one lh_policy_<name>.c each, behind lh_policy_ops.h):
 *   LRU   victim = least recently accessed.
 *   FIFO  victim = earliest inserted; hits change nothing.
 *   LFU   victim = smallest access count since insertion (1 at insertion, +1 per hit).
 *   GDFS  GreedyDual-Frequency-Size, cost/size = 1: clock L = 0; on insertion and on every hit
 *         H = L + count; victim = smallest H; evicting it sets L = H(victim).
 *   WA    the workload-aware policy of "KVCache in the Wild" (see lh_policy_wa.c): candidates are
 *         the least recent block of each category; priority (log ReuseProb, -offset) from
 *         per-category exponential reuse-time fits refreshed on a trace-time schedule; exactly
 *         LRU until the first fit yields a rate.
 * TTL is not modelled: callers reject TTL lanes.
 *
 * Eviction evidence (for sizing an eviction-attribution window; lh_sim_process_batch_misses):
 * the time of an eviction is the timestamp of the request whose commit evicted the key. A
 * request MISSES when its hits are fewer than its keys (its complete blocks); its first uncached
 * block is keys[hits]. Without TTL a key that is not resident but was ever inserted was evicted,
 * so the miss is EVICTED (that key was evicted by an earlier request, possibly more than once and
 * re-inserted in between: its latest eviction counts) or NO_MATCH (never evicted here).
 */
#ifndef LH_POLICY_H
#define LH_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define LH_POLICY_LRU 1
#define LH_POLICY_FIFO 2
#define LH_POLICY_LFU 3
#define LH_POLICY_GDFS 4
#define LH_POLICY_WA 5

#define LH_SIM_MAX_CATEGORIES 65536 /* request categories are 0 .. LH_SIM_MAX_CATEGORIES - 1 */

/* lh_sim_create flags (OR them; 0 = none) */
#define LH_SIM_RECORD_EVICTIONS 1 /* keep each batch's evictions (lh_sim_evictions) */
#define LH_SIM_MISS_EVIDENCE 2    /* remember every evicted key's latest eviction time (misses) */

/* Outcome of a request in lh_sim_process_batch_misses */
#define LH_SIM_FULL_HIT 0      /* hits == keys (also a request without keys): nothing missed */
#define LH_SIM_MISS_EVICTED 1  /* the first uncached block was evicted earlier */
#define LH_SIM_MISS_NO_MATCH 2 /* the first uncached block was never evicted by this simulator */

typedef struct lh_sim lh_sim;

/* Parameters of the WA policy (ignored by the others). Times in seconds, all finite:
 * life_s > 0 fixes the prediction horizon; life_s == 0 derives it at the first fit as the
 * nearest-rank p90 of the reuse times observed before it (60 s if none). fit_window_s > 0 and
 * refit_s > 0 are converted to whole nanoseconds by rounding to nearest. */
typedef struct lh_wa_params {
  double life_s;
  double fit_window_s;
  double refit_s;
} lh_wa_params;

typedef struct lh_sim_stats {
  uint64_t requests;   /* requests processed */
  uint64_t accesses;   /* block accesses (commit positions) */
  uint64_t hit_blocks; /* sum of the requests' prefix hits */
  uint64_t inserts;    /* keys inserted */
  uint64_t evictions;  /* keys evicted */
  uint64_t resident;   /* keys resident now */
  uint64_t memory_bytes;
  /* WA only (zero otherwise) */
  double wa_life_s;       /* the horizon in use, or the one the first fit would fix (0: no data) */
  uint64_t wa_fits;       /* fits performed */
  uint64_t wa_categories; /* category slots seen (highest category + 1) */
  double wa_rate_all;     /* the all-categories rate per second, 0 = none yet */
  /* peak eviction rate: the most evictions whose times fall in one aligned second
   * floor(time_ns / 1e9) (always kept; 0 and 0 before the first eviction) */
  uint64_t peak_evictions_per_s;
  int64_t peak_second;   /* that second (the first one reaching the peak), in seconds */
  uint64_t evicted_keys; /* LH_SIM_MISS_EVIDENCE: distinct keys ever evicted (else 0) */
} lh_sim_stats;

/* Creates a simulator of `policy` (LH_POLICY_*) at capacity_blocks; wa may be NULL for every
 * policy but LH_POLICY_WA. flags: an OR of LH_SIM_RECORD_EVICTIONS (keep each batch's evictions,
 * lh_sim_evictions) and LH_SIM_MISS_EVIDENCE (one map entry per distinct evicted key, so that
 * lh_sim_process_batch_misses can tell evicted from never-seen misses), or 0.
 * On success *out owns the simulator; release it with lh_sim_destroy. LH_EINVAL for an unknown
 * policy, bad WA parameters or unknown flags, LH_ENOMEM. */
int lh_sim_create(lh_sim **out, int policy, uint64_t capacity_blocks, const lh_wa_params *wa, int flags, char *err,
                  size_t errlen);

/* Releases a simulator and all its memory. NULL is a no-op. */
void lh_sim_destroy(lh_sim *sim);

/* Processes n_req requests in order: request r has keys[offsets[r] .. offsets[r+1]) of the n_keys
 * keys (0 <= offsets[r] <= offsets[r+1] <= n_keys), the timestamp timestamps[r] (ns, never below
 * the previous request's, across batches too) and the category categories[r] (0 ..
 * LH_SIM_MAX_CATEGORIES - 1). Writes hits[r] (caller-owned, n_req entries). Returns LH_OK with
 * *n_done = n_req, or an error with *n_done = the index of the failing request: requests before
 * it are committed and their hits written; the failing request changed nothing (LH_EINVAL for
 * bad offsets, a decreasing timestamp or a bad category, LH_ENOMEM, LH_ERANGE past the limits:
 * 2^31 - 1 resident blocks, and 2^31 - 2 keys in the key map: with the wa policy or miss evidence
 * every key seen or evicted, else the resident keys and the request's). */
int lh_sim_process_batch(lh_sim *sim, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                         const int64_t *timestamps, const int32_t *categories, size_t n_req, int64_t *hits,
                         size_t *n_done, char *err, size_t errlen);

/* lh_sim_process_batch (same arguments, effects and failures), plus each request's miss
 * evidence in caller-owned arrays of n_req entries: outcome[r] = LH_SIM_FULL_HIT, or
 * LH_SIM_MISS_EVICTED / LH_SIM_MISS_NO_MATCH with miss_key[r] = its first uncached block
 * keys[offsets[r] + hits[r]]; evicted_at[r] = the time (ns) of that key's latest eviction for
 * LH_SIM_MISS_EVICTED (at most timestamps[r]: an eviction by an earlier request of this or an
 * earlier batch). miss_key[r] and evicted_at[r] are 0 where they do not apply. The outputs of
 * the requests before a failing one are written. LH_EINVAL (nothing processed) unless the
 * simulator was created with LH_SIM_MISS_EVIDENCE; LH_ERANGE as lh_sim_process_batch. */
int lh_sim_process_batch_misses(lh_sim *sim, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                                const int64_t *timestamps, const int32_t *categories, size_t n_req, int64_t *hits,
                                int32_t *outcome, int64_t *miss_key, int64_t *evicted_at, size_t *n_done, char *err,
                                size_t errlen);

/* The length of the longest prefix of keys[0 .. n) resident (and alive at `now` under the
 * simulator's TTL, lh_policy_ops.h) -- what a request of these keys at `now` would hit -- without
 * changing anything. Cannot fail. */
size_t lh_sim_resident_prefix(const lh_sim *sim, const int64_t *keys, size_t n, int64_t now);

/* The evictions of the last process call (empty without LH_SIM_RECORD_EVICTIONS): victim
 * keys and, for each, the index (within that batch) of the request whose commit evicted it.
 * The arrays are owned by the simulator and valid until its next process call or destroy. */
size_t lh_sim_evictions(const lh_sim *sim, const int64_t **keys, const int64_t **requests);

/* Fills *stats. Cannot fail. */
void lh_sim_get_stats(const lh_sim *sim, lh_sim_stats *stats);

/* The WA rate per second of category c (0 = not fitted yet, or not WA). Cannot fail. */
double lh_sim_wa_rate(const lh_sim *sim, int32_t category);

/* Checks internal invariants (for tests): LH_OK or LH_EINVAL with a description. */
int lh_sim_check(const lh_sim *sim, char *err, size_t errlen);

#endif
