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

int lh_tiers_served(const int64_t *segs, const int64_t *seg_offsets, size_t n_req, const int64_t *block_size,
                    const int64_t *block_bytes, const uint64_t *tier_value, const uint8_t *tier_kind, size_t n_cfg,
                    size_t n_tiers, int inclusive, uint64_t *served, char *err, size_t errlen) {
  if (n_tiers == 0 || n_tiers > LH_TIERS_MAX)
    return lh_fail(err, errlen, LH_EINVAL, "a configuration has 1 to %d tiers, not %zu", LH_TIERS_MAX, n_tiers);
  for (size_t s = 0; s < n_cfg * n_tiers; s++) {
    if (tier_kind[s] > LH_SLOT_TOKENS)
      return lh_fail(err, errlen, LH_EINVAL, "tier %zu of configuration %zu has unknown kind %d", s % n_tiers,
                     s / n_tiers, (int)tier_kind[s]);
  }
  for (size_t r = 0; r < n_req; r++) {
    const int64_t *curve = segs + 2 * seg_offsets[r];
    size_t nseg = (size_t)(seg_offsets[r + 1] - seg_offsets[r]);
    uint64_t bs = (uint64_t)block_size[r], bb = (uint64_t)block_bytes[r];
    for (size_t c = 0; c < n_cfg; c++) {
      const uint64_t *value = tier_value + c * n_tiers;
      const uint8_t *kind = tier_kind + c * n_tiers;
      uint64_t *out = served + (r * n_cfg + c) * n_tiers;
      uint64_t capacity = 0, previous = 0;
      for (size_t i = 0; i < n_tiers; i++) {
        uint64_t blocks = tier_blocks(value[i], kind[i], bb, bs);
        if (inclusive) {
          if (i > 0 && blocks < previous)
            return lh_fail(err, errlen, LH_EINVAL,
                           "inclusive tier %zu of configuration %zu holds fewer blocks (%llu) than tier %zu "
                           "(%llu) in row %zu",
                           i, c, (unsigned long long)blocks, i - 1, (unsigned long long)previous, r);
          capacity = blocks;
        } else {
          capacity = blocks > UINT64_MAX - capacity ? UINT64_MAX : capacity + blocks; /* saturating */
        }
        previous = blocks;
        out[i] = lh_project_blocks(curve, nseg, capacity);
      }
    }
  }
  return LH_OK;
}
