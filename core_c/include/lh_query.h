/* lh_query.h - reading facts CSV rows and answering capacity queries over many rows at once.
 *
 * lh_facts_parse turns whole facts lines into columns (strict CSV, the original's messages,
 * plus semantic checks that catch corrupted curves). lh_query_chunk projects every row at every
 * capacity slot through the projector (lh_project.h), accumulates integer sums per instance and
 * optionally renders the per-request JSONL rows of the original facts query.
 */
#ifndef LH_QUERY_H
#define LH_QUERY_H

#include <stddef.h>
#include <stdint.h>

typedef struct lh_facts_reader lh_facts_reader;

/* Columns of the rows of the last parse; valid until the next parse or destroy. */
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
  const int64_t *blocks; /* extended facts: complete blocks of the request */
  const uint8_t *cut;    /* extended facts: LH_CUT_* */
  int64_t error_line;    /* line of the first bad row, 0 if none */
  size_t lines;          /* lines consumed */
} lh_facts_table;

int lh_facts_reader_create(lh_facts_reader **out, char *err, size_t errlen);
void lh_facts_reader_destroy(lh_facts_reader *reader);

/* Parses whole lines buf[0..len) (no header), first line numbered first_line. extended != 0
 * expects the two extra columns. Empty lines are skipped; a trailing CR is ignored. Returns
 * LH_OK, or LH_EPARSE with table->error_line and the reason in err (rows before it are valid),
 * or LH_ENOMEM. */
int lh_facts_parse(lh_facts_reader *reader, const char *buf, size_t len, int64_t first_line, int extended,
                   lh_facts_table *table, char *err, size_t errlen);

/* Projects rows row_lo.. of a parsed table at n_slots capacities, in order.
 *   slot_bytes[s]   capacity in bytes (ignored for infinite slots); blocks = bytes / block_bytes
 *   slot_inf[s]     non-zero: infinite capacity
 *   group[r]        the row's instance in the caller's numbering (< n_groups)
 * Adds to the caller-owned sums (n_groups * n_slots each, row-major by group):
 *   sum_blocks[g*n_slots+s] += hit blocks, sum_tokens[...] += hit blocks * block_size
 * and to requests[g] and input_tokens[g]. With out == NULL every remaining row is processed.
 * With out != NULL the per-request JSONL rows are rendered into out (capacity cap) and rows are
 * processed only while they surely fit: *rows_done tells how many were (call again from there).
 * Returns LH_OK (or LH_ENOMEM for very many slots). */
int lh_query_chunk(const lh_facts_table *table, size_t row_lo, const uint64_t *slot_bytes, const uint8_t *slot_inf,
                   size_t n_slots, const int32_t *group, uint64_t *sum_blocks, uint64_t *sum_tokens,
                   uint64_t *requests, uint64_t *input_tokens, char *out, size_t cap, size_t *written,
                   size_t *rows_done, char *err, size_t errlen);

/* Upper bound of the JSONL bytes of one row (so a buffer of that size always makes progress). */
size_t lh_query_row_bound(const lh_facts_table *table, size_t row, size_t n_slots);

/* Formats v like printf("%g") (6 significant digits) into out (>= 32 bytes); returns the length. */
size_t lh_format_g(double v, char *out);

#endif
