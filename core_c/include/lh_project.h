/* lh_project.h - the hit-curve projector: the ONLY code that turns a capacity into hits.
 *
 * A curve is n_segs (start, run) int64 pairs stored flat. Thresholds of segment k are
 * start, start+1, ..., start+run-1; a block is a prefix hit at capacity C iff its threshold <= C.
 * Capacities are in blocks; byte capacities become blocks here and only here, with one floor
 * division by block_bytes. Curves must be well formed (start >= 1, run >= 0, as the lane core
 * writes them and the facts reader verifies). None of these functions allocate or fail.
 */
#ifndef LH_PROJECT_H
#define LH_PROJECT_H

#include <stddef.h>
#include <stdint.h>

/* Hit blocks at a capacity of capacity_blocks blocks. */
uint64_t lh_project_blocks(const int64_t *segs, size_t n_segs, uint64_t capacity_blocks);

/* Hit blocks at infinite capacity (only cold / expired misses remain). */
uint64_t lh_project_infinite(const int64_t *segs, size_t n_segs);

/* Hit blocks at capacity_bytes for blocks of block_bytes (> 0; 0 hits when block_bytes == 0). */
uint64_t lh_project_bytes(const int64_t *segs, size_t n_segs, uint64_t capacity_bytes, uint64_t block_bytes);

/* Many curves at many block capacities: curve r is pairs seg_offsets[r] .. seg_offsets[r+1] of
 * segs; capacity s is capacity_blocks[s], or infinite when infinite[s] != 0 (infinite may be
 * NULL). Writes hits[r * n_caps + s] (caller-owned, n_req * n_caps). Cannot fail. */
void lh_project_batch(const int64_t *segs, const int64_t *seg_offsets, size_t n_req, const uint64_t *capacity_blocks,
                      const uint8_t *infinite, size_t n_caps, uint64_t *hits);

/* Byte-step facts (hybrid lanes, lh_hybrid.h): n_points (min_total_capacity_bytes, hit_blocks)
 * uint64 pairs stored flat, strictly increasing in both. Hit blocks at capacity_bytes: the
 * hit_blocks of the last point with threshold <= capacity_bytes, 0 if none. */
uint64_t lh_project_steps(const uint64_t *points, size_t n_points, uint64_t capacity_bytes);

/* Hit blocks at infinite capacity: the last point's hit_blocks (0 without points). */
uint64_t lh_project_steps_infinite(const uint64_t *points, size_t n_points);

/* Many byte-step facts at many byte capacities, as lh_project_batch: fact r is pairs
 * point_offsets[r] .. point_offsets[r+1] of points; writes hits[r * n_caps + s]. Cannot fail. */
void lh_project_steps_batch(const uint64_t *points, const int64_t *point_offsets, size_t n_req,
                            const uint64_t *capacity_bytes, const uint8_t *infinite, size_t n_caps, uint64_t *hits);

#endif
