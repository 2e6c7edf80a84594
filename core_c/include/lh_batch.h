/* lh_batch.h - internal: the contract of a batch of requests, checked in one place.
 *
 * The lane (lh_lane.h), the simulator (lh_policy.h) and the profile recorder (lh_profile.h) take
 * n_req requests as an array of n_keys keys and n_req + 1 offsets: request r is keys[offsets[r] ..
 * offsets[r+1]). Each checks request r here just before processing it, so a bad request fails at
 * its own index (LH_EINVAL, "request r: ..."), the requests before it applied, nothing of it.
 *
 * Offsets: 0 <= offsets[r] <= offsets[r+1] <= n_keys. (offsets[0] need not be 0: a caller may
 * pass a slice of a larger batch.) So no request reads outside the keys, even when a later
 * offset decreases.
 * Timestamps: never below the previous request's, across batches too (simulator, profile). The
 * lane does not check them: its TTL clock never runs backwards, an earlier time counts as the
 * latest one.
 * Categories: 0 .. limit - 1 (the simulator's LH_SIM_MAX_CATEGORIES), or any non-negative value
 * (the profile: limit 0).
 * The profile's curve offsets (the lane's seg_offsets, over its segments) follow the same
 * offsets rule. The eviction evidence's events (lh_evidence_apply) are a different contract and
 * keep their own check: a batch of events is applied whole or not at all, so it is validated
 * whole first, and its offsets start at 0.
 * Not part of the Python-facing API.
 */
#ifndef LH_BATCH_H
#define LH_BATCH_H

#include <stddef.h>
#include <stdint.h>

typedef struct lh_batch {
  size_t n_req;
  const int64_t *offsets;    /* n_req + 1 entries */
  size_t n_keys;             /* the offsets index keys[0 .. n_keys) */
  const int64_t *timestamps; /* n_req entries, or NULL: not checked */
  const int32_t *categories; /* n_req entries, or NULL: none */
  int32_t category_limit;    /* categories are 0 .. category_limit - 1; 0: any non-negative value */
} lh_batch;

/* Checks request r (< n_req) of a batch: its offsets, then its timestamp against *previous_ts
 * (the timestamp of the request applied before it; NULL when there is none), then its category.
 * LH_OK, or LH_EINVAL with a message naming request r in err. Cannot change anything. */
int lh_batch_check_request(const lh_batch *batch, size_t r, const int64_t *previous_ts, char *err, size_t errlen);

/* The offsets rule alone: 0 <= offsets[r] <= offsets[r+1] <= n_items. LH_OK, or LH_EINVAL with
 * "request r: <what> must be non-decreasing and within <items> (lo .. hi of n_items)" in err
 * (what, items: "offsets", "keys" or "curve offsets", "segments"). */
int lh_batch_check_offsets(const int64_t *offsets, size_t r, size_t n_items, const char *what, const char *items,
                           char *err, size_t errlen);

#endif
