/* lh_facts.h - the facts CSV format: one self-describing row per (read request x lane).
 *
 *   trace_id,instance_id,timestamp_ns,input_token_len,block_size_tokens,block_bytes,hit_curve
 *
 * hit_curve is always quoted: a Full-only lane's RLE "[[start,run],...]" (untagged, as the
 * original's G2-G4 writers), a hybrid lane's byte-step points "bytes:[[min_total_capacity_bytes,
 * hit_blocks],...]" (HYBRID_G5.md 3.3; the reader also takes "rle:" and the interim "mamba:");
 * string fields are quoted only when they contain , " CR or LF (a quote is doubled inside
 * quotes); numbers are plain decimal; '\n' ends every line. The opt-in extended format appends
 * complete_blocks,cut_reason (none|cold|expired).
 *
 * Writing: lh_facts_render (src/lh_facts_render.c) turns replay outputs into rows.
 * Reading:  lh_facts_parse (src/lh_facts_parse.c) turns rows back into columns: strict CSV, the
 *           original's messages, plus semantic checks that catch corrupted curves.
 */
#ifndef LH_FACTS_H
#define LH_FACTS_H

#include <stddef.h>
#include <stdint.h>

/* ---- writing ----------------------------------------------------------------------------- */

/* Upper bound of the bytes lh_facts_render writes for these rows (see its arguments). */
size_t lh_facts_render_bound(const int64_t *id_offsets, const int64_t *lane_id_offsets, const int64_t *out_src,
                             const int32_t *out_lane, const int64_t *out_seg_lo, const int64_t *out_seg_hi,
                             size_t n_out, int extended);

/* The tag of a lane's rows in lh_facts_render's lane_steps. */
#define LH_FACTS_RLE 0   /* Full-only: untagged RLE pairs (start, run) */
#define LH_FACTS_BYTES 1 /* hybrid: "bytes:" and (threshold, hit_blocks) pairs, thresholds unsigned */

/* Renders n_out facts rows into buf (capacity cap, caller-owned; use lh_facts_render_bound).
 * Output row k is source row out_src[k] seen by lane out_lane[k]:
 *   per source row: trace id bytes ids[id_offsets[r] .. id_offsets[r+1]) (raw; escaped here),
 *                   timestamps[r];
 *   per lane:       lane id bytes lane_ids[lane_id_offsets[l] ..) (raw; escaped here),
 *                   lane_block_size[l], lane_block_bytes[l], lane_steps[l] (LH_FACTS_*; NULL:
 *                   every lane RLE);
 *   per output row: input_lens[k], curve = segs pairs out_seg_lo[k] .. out_seg_hi[k];
 *                   with extended != 0 also blocks[k] and cuts[k] (LH_CUT_*).
 * Returns LH_OK and *written, or LH_ERANGE if cap is too small (nothing is promised about buf). */
int lh_facts_render(const char *ids, const int64_t *id_offsets, const int64_t *timestamps, const char *lane_ids,
                    const int64_t *lane_id_offsets, const int64_t *lane_block_size, const int64_t *lane_block_bytes,
                    const uint8_t *lane_steps, const int64_t *out_src, const int32_t *out_lane,
                    const int64_t *input_lens, const int64_t *out_seg_lo, const int64_t *out_seg_hi,
                    const int64_t *segs, int extended, const int64_t *blocks, const uint8_t *cuts, size_t n_out,
                    char *buf, size_t cap, size_t *written, char *err, size_t errlen);

/* ---- reading ----------------------------------------------------------------------------- */

typedef struct lh_facts_reader lh_facts_reader;

/* Columns of the rows of the last parse; owned by the reader, valid until the next parse or
 * destroy. */
typedef struct lh_facts_table {
  size_t n_rows;
  const int64_t *line;       /* 1-based file line (the header is line 1) */
  const int64_t *id_offsets; /* n_rows + 1 into ids: trace ids, CSV-unescaped */
  const char *ids;
  const int32_t *instance; /* index into this chunk's instance table */
  size_t n_instances;
  const int64_t *instance_offsets;
  const char *instance_names;
  const int64_t *timestamp;
  const int64_t *input_len;
  const int64_t *block_size;
  const int64_t *block_bytes;
  const int64_t *seg_offsets; /* n_rows + 1, in segments */
  const int64_t *segs;        /* flat (start, run) pairs */
  size_t n_segs;
  const uint8_t *step;   /* 1: a byte-step row ("bytes:" or "mamba:"): its pairs are (threshold,
                          * hit_blocks) points, thresholds as uint64 bits; 0: RLE ("rle:" or untagged) */
  const int64_t *blocks; /* extended facts: complete blocks of the request */
  const uint8_t *cut;    /* extended facts: LH_CUT_* */
  int64_t error_line;    /* line of the first bad row, 0 if none */
  size_t lines;          /* lines consumed: the rows' (a bad row's too) and the empty ones */
  size_t consumed;       /* bytes of buf consumed: all, or up to the bad row or the open row (more) */
} lh_facts_table;

/* Creates a reader (owns growable column buffers): LH_OK and *out, or LH_ENOMEM. Release it
 * with lh_facts_reader_destroy. */
int lh_facts_reader_create(lh_facts_reader **out, char *err, size_t errlen);

/* Releases a reader and every table it returned. NULL is a no-op. */
void lh_facts_reader_destroy(lh_facts_reader *reader);

/* Parses whole lines buf[0..len) (no header), first line numbered first_line. extended != 0
 * expects the two extra columns. Empty lines are skipped; a trailing CR is ignored; a quoted
 * field may hold line breaks, so a row may span lines (its line is the first). more != 0: the
 * text goes on after buf, so a row whose quoted field is still open at the end of buf is not a
 * row yet: parsing stops before it, and table->consumed says where it starts (the caller parses
 * it again with the text that follows). Returns LH_OK, or LH_EPARSE with table->error_line and
 * the reason in err (rows before it are valid), or LH_ENOMEM. table (caller-owned) is filled in
 * every case; the ids and names it points to are copies, buf need not outlive the call. */
int lh_facts_parse(lh_facts_reader *reader, const char *buf, size_t len, int64_t first_line, int extended, int more,
                   lh_facts_table *table, char *err, size_t errlen);

#endif
