/* lh_prefix_hash.h - the rolling prefix hash that turns per-block raw hashes into prefix keys.
 *
 * Bit-identical to the Python producer's hash_int64_func: all arithmetic is on uint64 with
 * logical shifts. Key j of a request encodes raw hashes 0..j, so equal keys mean equal prefixes.
 */
#ifndef LH_PREFIX_HASH_H
#define LH_PREFIX_HASH_H

#include <stddef.h>
#include <stdint.h>

/* One step of the chain: the key following prev when the next block's raw hash is raw. */
int64_t lh_prefix_hash_next(int64_t prev, int64_t raw);

/* Chains n raw hashes starting from 0: out[j] = next(out[j-1], raw[j]). out may alias raw.
 * Cannot fail. */
void lh_prefix_hash_chain(const int64_t *raw, size_t n, int64_t *out);

#endif
