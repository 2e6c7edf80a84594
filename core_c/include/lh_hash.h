/* lh_hash.h - internal: the engine's one 64-bit mixer, for every table and filter keyed by an int64.
 *
 * The splitmix64 finalizer (two multiplies, three xor-shifts): a bijection of uint64 whose low
 * bits depend on every input bit, so `lh_mix64(key) & mask` spreads raw trace keys (often small
 * or sequential integers) as well as prefix hashes; lh_mix_runs keeps runs of consecutive keys
 * together instead. Used by the key map (lh_keymap.h), so by the lane, the simulator, the profile
 * and the evidence, by the hybrid lane's map, and by the evidence's aged filter. Changing
 * it changes no result, only where keys sit in memory and so the order of the evidence's expiry
 * sweep (never an answer: when memory is freed, and the counts before a settle), and which
 * digests the aged filter confuses (its false positives).
 * Not part of the Python-facing API.
 */
#ifndef LH_HASH_H
#define LH_HASH_H

#include <stdint.h>

/* The mixed value of x. Cannot fail. */
static inline uint64_t lh_mix64(uint64_t x) {
  x ^= x >> 30;
  x *= UINT64_C(0xbf58476d1ce4e5b9);
  x ^= x >> 27;
  x *= UINT64_C(0x94d049bb133111eb);
  x ^= x >> 31;
  return x;
}

/* The mixed value of x, but for its low r bits (r < 64), kept as they are: for a table whose home
 * slot is lh_mix_runs(key, r) & mask, the 2^r keys that differ only in those bits get adjacent
 * slots (consecutive keys, as a Mooncake trace numbers a request's new blocks, share cache lines),
 * while other keys spread as with lh_mix64 (r = 0 is lh_mix64). Cannot fail. */
static inline uint64_t lh_mix_runs(uint64_t x, unsigned r) {
  return (lh_mix64(x >> r) << r) | (x & ((UINT64_C(1) << r) - 1));
}

#endif
