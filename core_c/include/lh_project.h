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

/* ---- the summed curve of many requests over every capacity ----
 *
 * hit_blocks(C) summed over many curves, for every C at once, from a difference array: diff[i]
 * counts the segments starting at threshold i minus those ending just before it (start + run), so
 * cover(i) = diff[0] + .. + diff[i] is the number of thresholds equal to i, and hit_blocks(C) =
 * cover(1) + .. + cover(C). O(segments + largest threshold), never one projection per capacity. */

/* Adds curve segs (n_segs pairs) to diff[0 .. size) and returns the size diff needs for them: the
 * largest start + run, plus one (0 without segments). When that is above size, nothing changed;
 * SIZE_MAX (nothing changed) for a malformed segment (start < 1 or run < 0). */
size_t lh_project_curve_add(int64_t *diff, size_t size, const int64_t *segs, size_t n_segs);

/* The breakpoints of the summed curve in diff[0 .. size): capacity 0 (0 hits), then every capacity
 * C >= 1 where hit_blocks(C) > hit_blocks(C - 1), in increasing order, into caps and hits
 * (caller-owned, room for `size` pairs at least; size >= 1). Returns the pairs written. */
size_t lh_project_curve_points(const int64_t *diff, size_t size, int64_t *caps, int64_t *hits);

#endif
