/* lh_project.c - projection of RLE hit curves onto capacities. */
#include "lh_project.h"

#include <stdint.h>

uint64_t lh_project_blocks(const int64_t *segs, size_t n_segs, uint64_t capacity_blocks) {
  uint64_t hits = 0;
  for (size_t k = 0; k < n_segs; k++) {
    uint64_t start = (uint64_t)segs[2 * k], run = (uint64_t)segs[2 * k + 1];
    if (start > capacity_blocks) break;
    /* Thresholds start .. capacity are hits: capacity - start + 1 of them, at most run. */
    uint64_t avail = capacity_blocks - start;
    hits += avail >= run ? run : avail + 1;
  }
  return hits;
}

uint64_t lh_project_infinite(const int64_t *segs, size_t n_segs) {
  uint64_t hits = 0;
  for (size_t k = 0; k < n_segs; k++) hits += (uint64_t)segs[2 * k + 1];
  return hits;
}

void lh_project_batch(const int64_t *segs, const int64_t *seg_offsets, size_t n_req, const uint64_t *capacity_blocks,
                      const uint8_t *infinite, size_t n_caps, uint64_t *hits) {
  for (size_t r = 0; r < n_req; r++) {
    const int64_t *curve = segs + 2 * seg_offsets[r];
    size_t n = (size_t)(seg_offsets[r + 1] - seg_offsets[r]);
    for (size_t s = 0; s < n_caps; s++) {
      hits[r * n_caps + s] = infinite != NULL && infinite[s] ? lh_project_infinite(curve, n)
                                                             : lh_project_blocks(curve, n, capacity_blocks[s]);
    }
  }
}

uint64_t lh_project_bytes(const int64_t *segs, size_t n_segs, uint64_t capacity_bytes, uint64_t block_bytes) {
  if (block_bytes == 0) return 0;
  return lh_project_blocks(segs, n_segs, capacity_bytes / block_bytes);
}

uint64_t lh_project_steps(const uint64_t *points, size_t n_points, uint64_t capacity_bytes) {
  uint64_t hits = 0;
  for (size_t k = 0; k < n_points && points[2 * k] <= capacity_bytes; k++) hits = points[2 * k + 1];
  return hits;
}

uint64_t lh_project_steps_infinite(const uint64_t *points, size_t n_points) {
  return n_points == 0 ? 0 : points[2 * n_points - 1];
}

void lh_project_steps_batch(const uint64_t *points, const int64_t *point_offsets, size_t n_req,
                            const uint64_t *capacity_bytes, const uint8_t *infinite, size_t n_caps, uint64_t *hits) {
  for (size_t r = 0; r < n_req; r++) {
    const uint64_t *fact = points + 2 * point_offsets[r];
    size_t n = (size_t)(point_offsets[r + 1] - point_offsets[r]);
    for (size_t s = 0; s < n_caps; s++) {
      hits[r * n_caps + s] = infinite != NULL && infinite[s] ? lh_project_steps_infinite(fact, n)
                                                             : lh_project_steps(fact, n, capacity_bytes[s]);
    }
  }
}

size_t lh_project_curve_add(int64_t *diff, size_t size, const int64_t *segs, size_t n_segs) {
  uint64_t top = 0; /* the largest start + run: a first pass, so that nothing changes when it is too far */
  for (size_t k = 0; k < n_segs; k++) {
    if (segs[2 * k] < 1 || segs[2 * k + 1] < 0) return SIZE_MAX;
    uint64_t end = (uint64_t)segs[2 * k] + (uint64_t)segs[2 * k + 1];
    if (end > top) top = end;
  }
  if (n_segs == 0) return 0;
  if (top >= size) return (size_t)top + 1;
  for (size_t k = 0; k < n_segs; k++) {
    diff[segs[2 * k]]++;
    diff[segs[2 * k] + segs[2 * k + 1]]--;
  }
  return (size_t)top + 1;
}

size_t lh_project_curve_points(const int64_t *diff, size_t size, int64_t *caps, int64_t *hits) {
  int64_t cover = diff[0], total = 0; /* cover(0) is 0 for well-formed curves (start >= 1) */
  size_t n = 0;
  caps[n] = 0;
  hits[n++] = 0;
  for (size_t c = 1; c < size; c++) {
    cover += diff[c];
    if (cover == 0) continue;
    total += cover;
    caps[n] = (int64_t)c;
    hits[n++] = total;
  }
  return n;
}
