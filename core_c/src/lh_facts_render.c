/* lh_facts_render.c - writing facts CSV rows (see lh_facts.h). */
#include "lh_facts.h"

#include <string.h>

#include "lh_common.h"
#include "lh_lane.h"
#include "lh_text.h"

static inline int needs_quotes(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == ',' || c == '"' || c == '\r' || c == '\n') return 1;
  }
  return 0;
}

static inline size_t put_field(char *out, const char *s, size_t n) {
  if (!needs_quotes(s, n)) {
    memcpy(out, s, n);
    return n;
  }
  size_t w = 0;
  out[w++] = '"';
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '"') out[w++] = '"';
    out[w++] = s[i];
  }
  out[w++] = '"';
  return w;
}

size_t lh_facts_render_bound(const int64_t *id_offsets, const int64_t *lane_id_offsets, const int64_t *out_src,
                             const int32_t *out_lane, const int64_t *out_seg_lo, const int64_t *out_seg_hi,
                             size_t n_out, int extended) {
  size_t total = 0;
  for (size_t k = 0; k < n_out; k++) {
    int64_t r = out_src[k];
    int32_t l = out_lane[k];
    size_t id_len = (size_t)(id_offsets[r + 1] - id_offsets[r]);
    size_t lane_len = (size_t)(lane_id_offsets[l + 1] - lane_id_offsets[l]);
    size_t segs = (size_t)(out_seg_hi[k] - out_seg_lo[k]);
    total += 2 * id_len + 2 + 2 * lane_len + 2 + 4 * (LH_MAX_INT_CHARS + 1) + 5 + 6 + segs * (2 * LH_MAX_INT_CHARS + 4);
    if (extended) total += LH_MAX_INT_CHARS + 10;
  }
  return total;
}

int lh_facts_render(const char *ids, const int64_t *id_offsets, const int64_t *timestamps, const char *lane_ids,
                    const int64_t *lane_id_offsets, const int64_t *lane_block_size, const int64_t *lane_block_bytes,
                    const uint8_t *lane_steps, const int64_t *out_src, const int32_t *out_lane,
                    const int64_t *input_lens, const int64_t *out_seg_lo, const int64_t *out_seg_hi,
                    const int64_t *segs, int extended, const int64_t *blocks, const uint8_t *cuts, size_t n_out,
                    char *buf, size_t cap, size_t *written, char *err, size_t errlen) {
  size_t need =
      lh_facts_render_bound(id_offsets, lane_id_offsets, out_src, out_lane, out_seg_lo, out_seg_hi, n_out, extended);
  if (need > cap) {
    return lh_fail(err, errlen, LH_ERANGE, "facts buffer of %zu bytes is smaller than the %zu needed", cap, need);
  }
  char *w = buf;
  for (size_t k = 0; k < n_out; k++) {
    int64_t r = out_src[k];
    int32_t l = out_lane[k];
    w += put_field(w, ids + id_offsets[r], (size_t)(id_offsets[r + 1] - id_offsets[r]));
    *w++ = ',';
    w += put_field(w, lane_ids + lane_id_offsets[l], (size_t)(lane_id_offsets[l + 1] - lane_id_offsets[l]));
    *w++ = ',';
    w += lh_put_i64(w, timestamps[r]);
    *w++ = ',';
    w += lh_put_i64(w, input_lens[k]);
    *w++ = ',';
    w += lh_put_i64(w, lane_block_size[l]);
    *w++ = ',';
    w += lh_put_i64(w, lane_block_bytes[l]);
    *w++ = ',';
    *w++ = '"';
    int steps = lane_steps != NULL && lane_steps[l] == LH_FACTS_BYTES;
    if (steps) w += lh_put_lit(w, "bytes:");
    *w++ = '[';
    for (int64_t s = out_seg_lo[k]; s < out_seg_hi[k]; s++) {
      if (s > out_seg_lo[k]) *w++ = ',';
      *w++ = '[';
      w += steps ? lh_put_u64(w, (uint64_t)segs[2 * s]) : lh_put_i64(w, segs[2 * s]);
      *w++ = ',';
      w += lh_put_i64(w, segs[2 * s + 1]);
      *w++ = ']';
    }
    *w++ = ']';
    *w++ = '"';
    if (extended) {
      *w++ = ',';
      w += lh_put_i64(w, blocks[k]);
      *w++ = ',';
      w += lh_put_lit(w, cuts[k] == LH_CUT_COLD ? "cold" : cuts[k] == LH_CUT_EXPIRED ? "expired" : "none");
    }
    *w++ = '\n';
  }
  *written = (size_t)(w - buf);
  return LH_OK;
}
