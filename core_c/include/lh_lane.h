/* lh_lane.h - the LiteHit lane core: one exact global LRU order, no capacity anywhere.
 *
 * A lane replays requests (front-to-back block keys + a timestamp) in order and returns, for
 * each request, its capacity-independent fact: the hit curve, an arithmetic-segment RLE of the
 * prefix thresholds. Segment (start, run) means: the j-th block of the segment (0-based) is a
 * prefix hit at every capacity C >= start + j. Curves are written as flat int64 pairs
 * [start0, run0, start1, run1, ...].
 *
 * Semantics (the original LiteHit G3/G4 algorithm):
 *   phase 1  evaluate every block against the LRU snapshot taken before the request; the first
 *            cold or TTL-expired block truncates the prefix; thresholds are prefix maxima of
 *            (reuse distance + 1), raised to stay strictly increasing (monotone defense);
 *   phase 2  commit every block, hits and misses, from the tail to the head, each key once at
 *            its first occurrence, so the request's head becomes the most recent.
 * Optional fixed TTL: a block is alive iff now - last_access < ttl_ns; every access refreshes;
 * expired blocks truncate like cold ones and are reclaimed at compaction.
 *
 * State: an open-addressing map key -> position (lh_keymap.h) and a rank structure over positions
 * (bitset + Fenwick tree over 512-position superblocks). Stale positions are compacted away so
 * the position space stays O(live keys). No function prints, aborts or exits.
 */
#ifndef LH_LANE_H
#define LH_LANE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lh_lane lh_lane;

/* Why a request's prefix stopped before its last block. */
#define LH_CUT_NONE 0    /* every block was resident: the curve covers the whole request */
#define LH_CUT_COLD 1    /* the first missing block was never seen (or was forgotten) */
#define LH_CUT_EXPIRED 2 /* the first missing block was seen before but its TTL had run out */

/* Lane options (bit flags).
 * LH_LANE_KEEP_EXPIRED: remember expired keys (no reclaim) so cuts are told apart exactly; costs
 * memory for every key ever seen.
 * LH_LANE_KEY_IDS: number the keys in order of first sight, 0, 1, 2, ... (within a request, in
 * block order), and write each block's number (lh_lane_process_batch's key_ids), so that a
 * profile recorder following the lane needs no key map of its own. A key keeps its number for
 * good, so this keeps expired keys too (as LH_LANE_KEEP_EXPIRED); the key map's slots take 16
 * bytes instead of 12. At most 2^32 - 2 keys (LH_ERANGE beyond). */
#define LH_LANE_KEEP_EXPIRED 1u
#define LH_LANE_KEY_IDS 2u

/* TTL views: one lane can replay its requests for several TTLs at once (lh_lane_create_views).
 * Expiry follows recency (a block expires iff now - last access >= ttl, and the LRU order is the
 * order of last accesses), so every TTL sees the same order and the same reuse distances: a view
 * differs only in where it cuts each request's prefix, at its first block older than its TTL.
 * The views share the key map and the rank structure; each has its own epochs and watermark.
 * Each view's facts are exactly those of a lane of its own TTL. Cut reasons are exact in every
 * view with LH_LANE_KEEP_EXPIRED; without it, a key expired in every view may be forgotten and
 * then cut as cold (as in a lane of one TTL). */
#define LH_LANE_MAX_VIEWS 16

/* One view's outputs of lh_lane_process_views (as lh_lane_process_batch's segs, seg_offsets and
 * cuts; cuts may be NULL). */
typedef struct lh_lane_view_out {
  int64_t *segs;
  int64_t *seg_offsets;
  uint8_t *cuts;
} lh_lane_view_out;

typedef struct lh_lane_stats {
  uint64_t unique_blocks;  /* alive tracked blocks (expired ones excluded) */
  uint64_t tracked_keys;   /* map entries, including expired keys not yet reclaimed */
  uint64_t positions;      /* allocated positions (live + stale) */
  uint64_t map_slots;      /* slots in the key map */
  uint64_t epochs;         /* TTL epochs held */
  uint64_t expired_blocks; /* cumulative count of blocks that expired */
  uint64_t memory_bytes;   /* bytes of lane state currently allocated */
  uint64_t compactions;    /* compactions performed */
  uint64_t requests;       /* requests processed */
  uint64_t accesses;       /* block accesses processed */
} lh_lane_stats;

/* Creates an empty lane. ttl_ns == 0 is pure LRU (timestamps ignored); ttl_ns < 0 is rejected.
 * On success *out owns the lane; release it with lh_lane_destroy. */
int lh_lane_create(lh_lane **out, int64_t ttl_ns, unsigned flags, char *err, size_t errlen);

/* Creates an empty lane of n_views TTL views (1 .. LH_LANE_MAX_VIEWS), view v expiring at
 * ttls_ns[v] (0: never; negative is rejected). A lane of more than one view takes no
 * LH_LANE_KEY_IDS. lh_lane_create(ttl) is lh_lane_create_views of that one TTL. */
int lh_lane_create_views(lh_lane **out, const int64_t *ttls_ns, size_t n_views, unsigned flags, char *err,
                         size_t errlen);

/* Releases a lane and all its memory. NULL is a no-op. */
void lh_lane_destroy(lh_lane *lane);

/* Forgets every key and statistic, as if the lane were new (keeps ttl and flags). Cannot fail. */
void lh_lane_reset(lh_lane *lane);

/* Processes n_req requests in order. Request r has keys[offsets[r] .. offsets[r+1]) of the n_keys
 * keys (0 <= offsets[r] <= offsets[r+1] <= n_keys; offsets[0] may be above 0) and the timestamp
 * timestamps[r] (ignored when ttl_ns == 0; may be NULL then).
 * Outputs, all caller-owned:
 *   segs         room for 2 * (n_keys - offsets[0]) int64 (a curve never has more segments than
 *                its request has blocks)
 *   seg_offsets  n_req + 1 entries; request r's curve is pairs seg_offsets[r] .. seg_offsets[r+1]
 *   cuts         n_req entries of LH_CUT_* (may be NULL)
 *   key_ids      n_keys entries, as keys: block j's key number at key_ids[j] for j >= offsets[0]
 *                (may be NULL; a lane without LH_LANE_KEY_IDS refuses one with LH_EINVAL)
 * Returns LH_OK with *n_done = n_req, or an error with *n_done = the index of the failing
 * request: requests before it are committed and their outputs written, the failing request
 * changed nothing. */
int lh_lane_process_batch(lh_lane *lane, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                          const int64_t *timestamps, size_t n_req, int64_t *segs, int64_t *seg_offsets, uint8_t *cuts,
                          uint32_t *key_ids, size_t *n_done, char *err, size_t errlen);

/* lh_lane_process_batch for every view of a lane: outs[v] (n_outs == the lane's views) receives
 * view v's facts, each as lh_lane_process_batch writes them. A lane of one view takes either
 * function; a lane of several views only this one (LH_EINVAL). Timestamps are required as soon as
 * one view has a TTL. */
int lh_lane_process_views(lh_lane *lane, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                          const int64_t *timestamps, size_t n_req, const lh_lane_view_out *outs, size_t n_outs,
                          size_t *n_done, char *err, size_t errlen);

/* The lane's TTL views. */
size_t lh_lane_views(const lh_lane *lane);

/* Advances the TTL clock to now_ns without a request (expires blocks in every view). No-op
 * without TTL. */
void lh_lane_advance_time(lh_lane *lane, int64_t now_ns);

/* Fills *stats (of view 0). Cannot fail. */
void lh_lane_get_stats(const lh_lane *lane, lh_lane_stats *stats);

/* Fills *stats as seen by one view (an index out of range: view 0): unique_blocks, epochs and
 * expired_blocks are the view's; the rest, memory_bytes included, the whole lane's. */
void lh_lane_get_view_stats(const lh_lane *lane, size_t view, lh_lane_stats *stats);

/* Checks internal invariants (for tests): returns LH_OK or LH_EINVAL with a description. */
int lh_lane_check(const lh_lane *lane, char *err, size_t errlen);

#endif
