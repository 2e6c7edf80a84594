/* lh_tiers.h - the tier split: the blocks each cache tier serves, per request, from the facts.
 *
 * A configuration is one capacity per tier (T1 = the GPU's memory first), each in the unit its
 * kind names (LH_SLOT_*, lh_query.h), converted to whole blocks of each row's lane by the
 * projector's rule (lh_project.h). Under LRU (decision 8):
 *   exclusive: tiers 1..i hold the cumulative capacity B1 + ... + Bi (an infinite tier makes
 *              every later sum infinite), so they serve lh_project_blocks(curve, B1 + ... + Bi);
 *   inclusive: every tier is an LRU over all accesses and B1 <= ... <= Bk, so tiers 1..i serve
 *              lh_project_blocks(curve, Bi).
 * Tier i alone serves served[i] - served[i-1].
 */
#ifndef LH_TIERS_H
#define LH_TIERS_H

#include <stddef.h>
#include <stdint.h>

#define LH_TIERS_MAX 64 /* tiers of one configuration */

/* Curve r of n_req is pairs seg_offsets[r] .. seg_offsets[r+1] of segs, its lane's block size
 * block_size[r] (tokens) and block bytes block_bytes[r]. Configuration c, tier i has the capacity
 * tier_value[c * n_tiers + i] in the unit tier_kind[c * n_tiers + i]. Writes
 *   served[(r * n_cfg + c) * n_tiers + i] = hit blocks served by tiers 1..i
 * (caller-owned, n_req * n_cfg * n_tiers). Returns LH_OK, or LH_EINVAL (err says why; served is
 * then unspecified) for an unknown kind, n_tiers of 0 or above LH_TIERS_MAX, or inclusive
 * capacities that decrease in some row's blocks. */
int lh_tiers_served(const int64_t *segs, const int64_t *seg_offsets, size_t n_req, const int64_t *block_size,
                    const int64_t *block_bytes, const uint64_t *tier_value, const uint8_t *tier_kind, size_t n_cfg,
                    size_t n_tiers, int inclusive, uint64_t *served, char *err, size_t errlen);

/* The same split summed, without a per-request array unless asked: for configuration c, request
 * category g (category[r], 0 <= g < n_categories; category NULL: every row is category 0) and
 * tier i, adds to the caller-owned sums (n_cfg * n_categories * n_tiers each, index
 * (c * n_categories + g) * n_tiers + i):
 *   hit_blocks    blocks tier i alone served,
 *   hit_tokens    those blocks x the row's block size,
 *   bytes_loaded  those blocks x the row's block bytes, for tiers below the first (0 for tier 0).
 * With tier_hits != NULL also writes tier_hits[(r * n_cfg + c) * n_tiers + i] = the blocks tier i
 * alone served for request r. Returns LH_OK or LH_EINVAL as lh_tiers_served, and for a category
 * outside 0 .. n_categories - 1 (nothing is then promised about the sums). */
int lh_tiers_sums(const int64_t *segs, const int64_t *seg_offsets, size_t n_req, const int64_t *block_size,
                  const int64_t *block_bytes, const int32_t *category, size_t n_categories, const uint64_t *tier_value,
                  const uint8_t *tier_kind, size_t n_cfg, size_t n_tiers, int inclusive, uint64_t *hit_blocks,
                  uint64_t *hit_tokens, uint64_t *bytes_loaded, uint64_t *tier_hits, char *err, size_t errlen);

#endif
