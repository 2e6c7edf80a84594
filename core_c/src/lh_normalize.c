/* lh_normalize.c - length contract, prefix hash and re-blocking of one request. */
#include "lh_normalize.h"

#include "lh_common.h"
#include "lh_prefix_hash.h"

int lh_normalize(const int64_t *keys, size_t n_keys, int64_t input_len, int64_t block_size, int64_t trace_block_size,
                 int prefix_hash, int64_t *out_keys, size_t *out_n, int64_t *out_len, char *err, size_t errlen) {
  if (block_size <= 0) {
    return lh_fail(err, errlen, LH_EINVAL, "NormalizeRequest block_size_tokens must be positive");
  }
  if (input_len < 0) {
    return lh_fail(err, errlen, LH_EINVAL, "NormalizeRequest input_token_len must not be negative");
  }
  if (trace_block_size < 0) {
    return lh_fail(err, errlen, LH_EINVAL, "NormalizeRequest trace block size must not be negative");
  }
  int64_t trace_bs = trace_block_size == 0 ? block_size : trace_block_size;
  if (block_size % trace_bs != 0) {
    return lh_fail(err, errlen, LH_EINVAL,
                   "NormalizeRequest block_size_tokens must be a multiple of the trace block size "
                   "(coarsening only)");
  }
  int64_t len = input_len;
  if (len == 0) {
    if (n_keys > (uint64_t)INT64_MAX / (uint64_t)trace_bs) {
      return lh_fail(err, errlen, LH_ERANGE, "NormalizeRequest derived input_token_len overflows int64");
    }
    len = (int64_t)n_keys * trace_bs;
  }
  if ((uint64_t)(len / trace_bs) != (uint64_t)n_keys) {
    return lh_fail(err, errlen, LH_EINVAL,
                   "NormalizeRequest block_keys must contain exactly floor(input_token_len / "
                   "trace_block_size) blocks");
  }
  if (prefix_hash) {
    lh_prefix_hash_chain(keys, n_keys, out_keys);
    keys = out_keys;
  }
  size_t k = (size_t)(block_size / trace_bs);
  size_t kept = 0;
  if (k == 1) {
    if (out_keys != keys) {
      for (size_t i = 0; i < n_keys; i++) out_keys[i] = keys[i];
    }
    kept = n_keys;
  } else {
    /* The (j*k)-th chained key encodes the first j coarse blocks; a tail of < k keys is dropped. */
    for (size_t i = k - 1; i < n_keys; i += k) out_keys[kept++] = keys[i];
  }
  *out_n = kept;
  *out_len = len;
  return LH_OK;
}

int lh_normalize_batch(const int64_t *keys, const int64_t *offsets, const int64_t *input_lens, const int64_t *rows,
                       size_t n, int64_t block_size, int64_t trace_block_size, int prefix_hash, int64_t *out_keys,
                       int64_t *out_offsets, int64_t *out_lens, size_t *n_done, char *err, size_t errlen) {
  int64_t written = 0;
  out_offsets[0] = 0;
  for (size_t i = 0; i < n; i++) {
    size_t r = rows != NULL ? (size_t)rows[i] : i;
    int64_t lo = offsets[r], hi = offsets[r + 1];
    if (lo < 0 || hi < lo) {
      *n_done = i;
      return lh_fail(err, errlen, LH_EINVAL, "request offsets are not non-decreasing");
    }
    size_t kept = 0;
    int64_t len = 0;
    int st = lh_normalize(keys + lo, (size_t)(hi - lo), input_lens[r], block_size, trace_block_size, prefix_hash,
                          out_keys + written, &kept, &len, err, errlen);
    if (st != LH_OK) {
      *n_done = i;
      return st;
    }
    written += (int64_t)kept;
    out_offsets[i + 1] = written;
    out_lens[i] = len;
  }
  *n_done = n;
  return LH_OK;
}
