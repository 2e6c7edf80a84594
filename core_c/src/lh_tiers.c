/* lh_tiers.c - the tier split (lh_tiers.h). */
#include "lh_tiers.h"

#include "lh_common.h"
#include "lh_project.h"
#include "lh_query.h" /* LH_SLOT_* */

/* A tier's capacity in whole blocks of a row (UINT64_MAX when infinite). */
static uint64_t tier_blocks(uint64_t value, uint8_t kind, uint64_t block_bytes, uint64_t block_size) {
  switch (kind) {
    case LH_SLOT_INFINITE: return UINT64_MAX;
    case LH_SLOT_BLOCKS: return value;
    case LH_SLOT_TOKENS: return block_size == 0 ? 0 : value / block_size;
    default: return block_bytes == 0 ? 0 : value / block_bytes;
  }
}

static int check_args(const uint8_t *tier_kind, size_t n_cfg, size_t n_tiers, char *err, size_t errlen) {
  if (n_tiers == 0 || n_tiers > LH_TIERS_MAX)
    return lh_fail(err, errlen, LH_EINVAL, "a configuration has 1 to %d tiers, not %zu", LH_TIERS_MAX, n_tiers);
  for (size_t s = 0; s < n_cfg * n_tiers; s++) {
    if (tier_kind[s] > LH_SLOT_TOKENS)
      return lh_fail(err, errlen, LH_EINVAL, "tier %zu of configuration %zu has unknown kind %d", s % n_tiers,
                     s / n_tiers, (int)tier_kind[s]);
  }
  return LH_OK;
}

/* Blocks served by tiers 1..i of one curve at one configuration, into out[0 .. n_tiers). */
static int served_row(const int64_t *curve, size_t nseg, uint64_t bs, uint64_t bb, const uint64_t *value,
                      const uint8_t *kind, size_t n_tiers, int inclusive, uint64_t *out, size_t r, size_t c, char *err,
                      size_t errlen) {
  uint64_t capacity = 0, previous = 0;
  for (size_t i = 0; i < n_tiers; i++) {
    uint64_t blocks = tier_blocks(value[i], kind[i], bb, bs);
    if (inclusive) {
      if (i > 0 && blocks < previous)
        return lh_fail(err, errlen, LH_EINVAL,
                       "inclusive tier %zu of configuration %zu holds fewer blocks (%llu) than tier %zu (%llu) in "
                       "row %zu",
                       i, c, (unsigned long long)blocks, i - 1, (unsigned long long)previous, r);
      capacity = blocks;
    } else {
      capacity = blocks > UINT64_MAX - capacity ? UINT64_MAX : capacity + blocks; /* saturating */
    }
    previous = blocks;
    out[i] = lh_project_blocks(curve, nseg, capacity);
  }
  return LH_OK;
}

int lh_tiers_served(const int64_t *segs, const int64_t *seg_offsets, size_t n_req, const int64_t *block_size,
                    const int64_t *block_bytes, const uint64_t *tier_value, const uint8_t *tier_kind, size_t n_cfg,
                    size_t n_tiers, int inclusive, uint64_t *served, char *err, size_t errlen) {
  int status = check_args(tier_kind, n_cfg, n_tiers, err, errlen);
  if (status != LH_OK) return status;
  for (size_t r = 0; r < n_req; r++) {
    const int64_t *curve = segs + 2 * seg_offsets[r];
    size_t nseg = (size_t)(seg_offsets[r + 1] - seg_offsets[r]);
    for (size_t c = 0; c < n_cfg; c++) {
      status = served_row(curve, nseg, (uint64_t)block_size[r], (uint64_t)block_bytes[r], tier_value + c * n_tiers,
                          tier_kind + c * n_tiers, n_tiers, inclusive, served + (r * n_cfg + c) * n_tiers, r, c, err,
                          errlen);
      if (status != LH_OK) return status;
    }
  }
  return LH_OK;
}

int lh_tiers_sums(const int64_t *segs, const int64_t *seg_offsets, size_t n_req, const int64_t *block_size,
                  const int64_t *block_bytes, const int32_t *category, size_t n_categories, const uint64_t *tier_value,
                  const uint8_t *tier_kind, size_t n_cfg, size_t n_tiers, int inclusive, uint64_t *hit_blocks,
                  uint64_t *hit_tokens, uint64_t *bytes_loaded, uint64_t *tier_hits, char *err, size_t errlen) {
  int status = check_args(tier_kind, n_cfg, n_tiers, err, errlen);
  if (status != LH_OK) return status;
  uint64_t row[LH_TIERS_MAX];
  for (size_t r = 0; r < n_req; r++) {
    size_t g = category == NULL ? 0 : (size_t)category[r];
    if (category != NULL && (category[r] < 0 || g >= n_categories))
      return lh_fail(err, errlen, LH_EINVAL, "row %zu has category %d, not 0 .. %zu", r, (int)category[r],
                     n_categories == 0 ? 0 : n_categories - 1);
    const int64_t *curve = segs + 2 * seg_offsets[r];
    size_t nseg = (size_t)(seg_offsets[r + 1] - seg_offsets[r]);
    uint64_t bs = (uint64_t)block_size[r], bb = (uint64_t)block_bytes[r];
    for (size_t c = 0; c < n_cfg; c++) {
      status = served_row(curve, nseg, bs, bb, tier_value + c * n_tiers, tier_kind + c * n_tiers, n_tiers, inclusive,
                          row, r, c, err, errlen);
      if (status != LH_OK) return status;
      size_t at = (c * n_categories + g) * n_tiers;
      uint64_t before = 0;
      for (size_t i = 0; i < n_tiers; i++) {
        uint64_t alone = row[i] - before;
        before = row[i];
        hit_blocks[at + i] += alone;
        hit_tokens[at + i] += alone * bs;
        if (i > 0) bytes_loaded[at + i] += alone * bb;
        if (tier_hits != NULL) tier_hits[(r * n_cfg + c) * n_tiers + i] = alone;
      }
    }
  }
  return LH_OK;
}
