/* lh_batch.c - the request-batch contract (see lh_batch.h). */
#include "lh_batch.h"

#include "lh_common.h"

int lh_batch_check_offsets(const int64_t *offsets, size_t r, size_t n_items, const char *what, const char *items,
                           char *err, size_t errlen) {
  int64_t lo = offsets[r], hi = offsets[r + 1];
  if (lo < 0 || hi < lo || (uint64_t)hi > n_items) {
    return lh_fail(err, errlen, LH_EINVAL, "request %zu: %s must be non-decreasing and within %s (%lld .. %lld of %zu)",
                   r, what, items, (long long)lo, (long long)hi, n_items);
  }
  return LH_OK;
}

int lh_batch_check_request(const lh_batch *b, size_t r, const int64_t *previous_ts, char *err, size_t errlen) {
  int st = lh_batch_check_offsets(b->offsets, r, b->n_keys, "offsets", "keys", err, errlen);
  if (st != LH_OK) return st;
  if (b->timestamps != NULL && previous_ts != NULL && b->timestamps[r] < *previous_ts) {
    return lh_fail(err, errlen, LH_EINVAL, "request %zu: timestamp %lld is before the previous request's %lld", r,
                   (long long)b->timestamps[r], (long long)*previous_ts);
  }
  if (b->categories != NULL) {
    int32_t cat = b->categories[r];
    if (b->category_limit == 0 && cat < 0) {
      return lh_fail(err, errlen, LH_EINVAL, "request %zu: negative category %d", r, (int)cat);
    }
    if (b->category_limit != 0 && (cat < 0 || cat >= b->category_limit)) {
      return lh_fail(err, errlen, LH_EINVAL, "request %zu: category %d is outside 0..%d", r, (int)cat,
                     (int)(b->category_limit - 1));
    }
  }
  return LH_OK;
}
