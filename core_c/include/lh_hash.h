/* lh_hash.h - internal: the engine's one 64-bit mixer, for every table and filter keyed by an int64.
 *
 * The splitmix64 finalizer (two multiplies, three xor-shifts): a bijection of uint64 whose low
 * bits depend on every input bit, so `lh_mix64(key) & mask` spreads raw trace keys (often small
 * or sequential integers) as well as prefix hashes. Used by the key map (lh_keymap.h), so by the
 * lane, the simulator, the profile and the evidence, and by the evidence's aged filter. Changing
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

#endif
