/* lh_normalize.h - request normalization shared by the offline replay and the online path.
 *
 * A raw request is (block keys at trace granularity, input token length). Normalization checks
 * the length contract at trace granularity, derives a missing length, optionally chains the
 * prefix hash (before re-blocking) and coarsens to the analysis block size by keeping every
 * k-th key. Only coarsening is possible: a block's inner tokens are not in the trace.
 */
#ifndef LH_NORMALIZE_H
#define LH_NORMALIZE_H

#include <stddef.h>
#include <stdint.h>

/* Normalizes one request.
 *   keys, n_keys      raw keys at trace granularity, front to back
 *   input_len         tokens of the request; <= 0 means missing and is derived as
 *                     n_keys * trace_block_size (a negative value is rejected)
 *   block_size        analysis tokens per block (> 0)
 *   trace_block_size  the trace's tokens per block; 0 means "same as block_size"
 *   prefix_hash       non-zero: keys are per-block raw hashes, chain them first
 *   out_keys          caller-owned, room for n_keys values; may alias keys
 * On success *out_n and *out_len are set and LH_OK is returned. On failure (LH_EINVAL, or
 * LH_ERANGE when a derived length overflows) the message is the original tool's
 * "NormalizeRequest ..." text and the outputs are unspecified. */
int lh_normalize(const int64_t *keys, size_t n_keys, int64_t input_len, int64_t block_size, int64_t trace_block_size,
                 int prefix_hash, int64_t *out_keys, size_t *out_n, int64_t *out_len, char *err, size_t errlen);

/* Normalizes many requests stored flat: request r has keys[offsets[r] .. offsets[r+1]) and
 * length input_lens[r]. With rows != NULL only requests rows[0..n) are taken, in that order
 * (routing a subset to one lane); with rows == NULL requests 0..n-1 are taken.
 * Outputs (caller-owned): out_keys with room for every selected key, out_offsets with n + 1
 * entries (out_offsets[0] = 0), out_lens with n entries.
 * On failure *n_done is the index (within the selection) of the failing request, the
 * requests before it are written, and the message names the reason. On success *n_done = n. */
int lh_normalize_batch(const int64_t *keys, const int64_t *offsets, const int64_t *input_lens, const int64_t *rows,
                       size_t n, int64_t block_size, int64_t trace_block_size, int prefix_hash, int64_t *out_keys,
                       int64_t *out_offsets, int64_t *out_lens, size_t *n_done, char *err, size_t errlen);

#endif
