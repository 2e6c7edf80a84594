/* lh_prefix_hash.c - Jenkins-style 64-bit rolling hash over per-block raw hashes. */
#include "lh_prefix_hash.h"

int64_t lh_prefix_hash_next(int64_t prev, int64_t raw) {
  uint64_t h = (uint64_t)prev;
  uint64_t v = (uint64_t)raw;
  uint64_t rhs = v + UINT64_C(0x9e3779b97f4a7c15) + (h << 12) + (h >> 32);
  uint64_t out = h ^ rhs;
  /* Two's-complement reinterpretation without implementation-defined conversion. */
  return out <= (uint64_t)INT64_MAX ? (int64_t)out : -(int64_t)(~out) - 1;
}

void lh_prefix_hash_chain(const int64_t *raw, size_t n, int64_t *out) {
  int64_t prev = 0;
  for (size_t i = 0; i < n; i++) {
    prev = lh_prefix_hash_next(prev, raw[i]);
    out[i] = prev;
  }
}
