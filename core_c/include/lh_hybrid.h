/* lh_hybrid.h - the hybrid lane core: Full blocks and Linear (linear-attention / Mamba / SSM)
 * states in ONE byte-weighted recency pool, no capacity anywhere (the original LiteHit's G5 core,
 * HYBRID_G5.md sections 2 and 4).
 *
 * Objects: one Full object per block key, one Linear state per key where a state was written;
 * both keyed by the prefix-chained block key, the type part of the identity. One recency order,
 * one byte budget: a Full object costs full_charge bytes, a Linear state linear_charge bytes.
 * RequiredBytes(object) = its charge + the charges of every object more recent than it: the
 * smallest total capacity that keeps it resident (byte-weighted inclusion).
 *
 * Per request (keys = block keys, front to back), on the snapshot before it:
 *   coverage  i = 0, 1, ...: stop at the first Full object that is absent or expired; running
 *             maximum of RequiredBytes(F keys[i]) over the covered prefix;
 *   points    Linear mode (linear_charge > 0): position p < covered is a restore point iff the
 *             Linear state of keys[p] is resident and alive (whoever wrote it); its threshold is
 *             max(running max at p, RequiredBytes(L keys[p])); every earlier point whose
 *             threshold is not smaller is dropped; the point (threshold, p + 1) is appended.
 *             Full-only byte mode (linear_charge == 0): (max(running max at p, last + full_charge),
 *             p + 1) for every covered p.
 *   commit    positions n-1 down to 0: the Linear state of position i is written first when
 *             (i + 1) % step_blocks == 0 or i == n - 1 (linear mode), then the Full block; every
 *             occurrence of a repeated key is touched. The head ends most recent.
 * At total capacity C a request hits the hit_blocks of its last point with threshold <= C (0 if
 * none): points strictly increase in both fields.
 *
 * TTL (ttl_ns > 0): positions are grouped in epochs by the request that wrote them (epoch time =
 * max(now, the previous epoch's), so out-of-order times are clamped); an object is dead once its
 * epoch's age (now - epoch time) reaches ttl_ns; a Linear state ages from the request that last
 * wrote it. Dead objects stop coverage like absent ones and are no restore points. Only expired
 * Full blocks count as expired_blocks.
 *
 * State: one map from a key to the positions of its Full block and its Linear state (16 bytes a
 * slot: one probe finds both), one bitset per type over positions with a
 * Fenwick tree of per-superblock counts, TTL epochs; stale and dead positions are compacted away
 * (when positions > 4 x alive objects + 4096). Same contracts as the lane core: status + error
 * buffer, a failing request changes nothing, no function prints, aborts or exits.
 */
#ifndef LH_HYBRID_H
#define LH_HYBRID_H

#include <stddef.h>
#include <stdint.h>

typedef struct lh_hybrid lh_hybrid;

typedef struct lh_hybrid_config {
  uint64_t full_charge;   /* bytes of a Full object, > 0 */
  uint64_t linear_charge; /* bytes of a Linear state; 0: Full-only byte mode (no states) */
  uint64_t step_blocks;   /* a state every step_blocks blocks (and at each request's tail); 0 acts as 1 */
  int64_t ttl_ns;         /* >= 0; 0: no TTL */
} lh_hybrid_config;

typedef struct lh_hybrid_stats {
  uint64_t unique_blocks;   /* alive Full objects */
  uint64_t resident_linear; /* alive Linear states */
  uint64_t resident_bytes;  /* their bytes (saturating) */
  uint64_t expired_blocks;  /* cumulative Full objects expired by the TTL */
  uint64_t positions;       /* positions in use (alive, stale and dead) */
  uint64_t epochs;          /* TTL epochs held */
  uint64_t compactions;
  uint64_t memory_bytes; /* bytes of state allocated */
  uint64_t requests;
  uint64_t accesses; /* blocks of the requests */
} lh_hybrid_stats;

/* Creates an empty core. LH_EINVAL for a zero full_charge or a negative ttl_ns, LH_ENOMEM. */
int lh_hybrid_create(lh_hybrid **out, const lh_hybrid_config *config, char *err, size_t errlen);

/* Releases a core. NULL is a no-op. */
void lh_hybrid_destroy(lh_hybrid *h);

/* Forgets every object, epoch and statistic (keeps the configuration). Cannot fail. */
void lh_hybrid_reset(lh_hybrid *h);

/* Processes n_req requests in order: request r has keys[offsets[r] .. offsets[r+1]) of the n_keys
 * keys (0 <= offsets[r] <= offsets[r+1] <= n_keys; offsets[0] may be above 0) at timestamps[r]
 * (may be NULL without TTL). Outputs, caller-owned: points, room for 2 * (n_keys - offsets[0])
 * uint64 (a request has at most one point per block), flat (min_total_capacity_bytes,
 * hit_blocks) pairs; point_offsets, n_req + 1 entries: request r's points are pairs
 * point_offsets[r] .. point_offsets[r+1]. LH_OK with *n_done = n_req, or an error with *n_done =
 * the failing request (LH_EINVAL bad offsets, LH_ENOMEM, LH_ERANGE more than 2^30 objects): the
 * requests before it are committed and written, the failing one changed nothing. */
int lh_hybrid_process_batch(lh_hybrid *h, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                            const int64_t *timestamps, size_t n_req, uint64_t *points, int64_t *point_offsets,
                            size_t *n_done, char *err, size_t errlen);

/* Advances the TTL clock to now_ns without a request (expires objects). No-op without TTL. */
void lh_hybrid_advance_time(lh_hybrid *h, int64_t now_ns);

/* Alive Full objects among the most recent alive objects whose charges add up to at most
 * budget_bytes (walking from the most recent, stopping before the sum would exceed it). */
uint64_t lh_hybrid_full_within_bytes(const lh_hybrid *h, uint64_t budget_bytes);

/* Fills *stats. Cannot fail. */
void lh_hybrid_get_stats(const lh_hybrid *h, lh_hybrid_stats *stats);

/* Checks internal invariants (for tests): LH_OK or LH_EINVAL with a description. */
int lh_hybrid_check(const lh_hybrid *h, char *err, size_t errlen);

#endif
