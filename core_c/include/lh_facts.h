/* lh_facts.h - the facts CSV format: one self-describing row per (read request x lane).
 *
 *   trace_id,instance_id,timestamp_ns,input_token_len,block_size_tokens,block_bytes,hit_curve
 *
 * hit_curve is always quoted JSON "[[start,run],...]"; string fields are quoted only when they
 * contain , " CR or LF (a quote is doubled inside quotes); numbers are plain decimal; '\n' ends
 * every line. The opt-in extended format appends complete_blocks,cut_reason (none|cold|expired).
 */
#ifndef LH_FACTS_H
#define LH_FACTS_H

#include <stddef.h>
#include <stdint.h>

/* Upper bound of the bytes lh_facts_render writes for these rows (see its arguments). */
size_t lh_facts_render_bound(const int64_t *id_offsets, const int64_t *lane_id_offsets,
                             const int64_t *out_src, const int32_t *out_lane, const int64_t *out_seg_lo,
                             const int64_t *out_seg_hi, size_t n_out, int extended);

/* Renders n_out facts rows into buf (capacity cap, caller-owned; use lh_facts_render_bound).
 * Output row k is source row out_src[k] seen by lane out_lane[k]:
 *   per source row: trace id bytes ids[id_offsets[r] .. id_offsets[r+1]) (raw; escaped here),
 *                   timestamps[r];
 *   per lane:       lane id bytes lane_ids[lane_id_offsets[l] ..) (raw; escaped here),
 *                   lane_block_size[l], lane_block_bytes[l];
 *   per output row: input_lens[k], curve = segs pairs out_seg_lo[k] .. out_seg_hi[k];
 *                   with extended != 0 also blocks[k] and cuts[k] (LH_CUT_*).
 * Returns LH_OK and *written, or LH_ERANGE if cap is too small (nothing is promised about buf). */
int lh_facts_render(const char *ids, const int64_t *id_offsets, const int64_t *timestamps,
                    const char *lane_ids, const int64_t *lane_id_offsets, const int64_t *lane_block_size,
                    const int64_t *lane_block_bytes, const int64_t *out_src, const int32_t *out_lane,
                    const int64_t *input_lens, const int64_t *out_seg_lo, const int64_t *out_seg_hi,
                    const int64_t *segs, int extended, const int64_t *blocks, const uint8_t *cuts,
                    size_t n_out, char *buf, size_t cap, size_t *written, char *err, size_t errlen);

#endif
