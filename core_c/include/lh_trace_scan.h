/* lh_trace_scan.h - strict JSONL trace scanner: text rows -> flat, validated columns.
 *
 * One call scans a buffer of whole lines (a chunk of a trace file) in one of the formats of the
 * format table (lh_trace_format.h) and appends one record per read or write row to columnar
 * arrays owned by the scanner: timestamps in ns, input lengths, block keys (flat + offsets),
 * trace ids (flat bytes + offsets) and the row's instance (an index into the chunk's table of
 * distinct instance names).
 * Blank lines (only spaces, tabs, CR) are skipped. Every row must be one JSON object (RFC 8259,
 * UTF-8); the first malformed row stops the scan with LH_EPARSE, its 1-based line number in
 * result->error_line and the reason in err; the records before it remain valid.
 *
 * The formats are listed in lh_trace_format.h; each row rule's file (src/lh_format_*.c) states
 * the fields it reads and the record it makes of them.
 */
#ifndef LH_TRACE_SCAN_H
#define LH_TRACE_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "lh_trace_format.h" /* LH_FMT_* */

#define LH_ROW_READ 1
#define LH_ROW_WRITE 2

typedef struct lh_scan lh_scan;

/* Columns of the records of the last scan. Pointers stay valid until the next lh_scan_chunk or
 * lh_scan_destroy on the same scanner. */
typedef struct lh_scan_result {
  size_t n_rows;
  const int64_t *line;        /* 1-based line number of each record */
  const uint8_t *kind;        /* LH_ROW_READ or LH_ROW_WRITE */
  const int64_t *timestamp;   /* ns */
  const int64_t *input_len;   /* tokens as given; 0 = missing (derived at normalization) */
  const int64_t *key_offsets; /* n_rows + 1; write rows carry no keys */
  const int64_t *keys;
  size_t n_keys;
  const int64_t *id_offsets; /* n_rows + 1 into ids */
  const char *ids;
  const int32_t *instance; /* index into the instance table, -1 when the format has none */
  size_t n_instances;
  const int64_t *instance_offsets; /* n_instances + 1 into instance_names */
  const char *instance_names;
  const int32_t *label; /* qwen "type": index into the label table, -1 when absent */
  const int64_t *turn;  /* qwen "turn", 0 when absent */
  /* qwen sessions: the session number of chat_id and of parent_chat_id (== chat when the row is
   * a root: parent_chat_id missing, null or -1). A session number is the id's value when its text
   * (as str() prints it) is a canonical decimal integer within 64 bits (two's complement bits of
   * the unsigned value), else the FNV-1a 64 hash of the text. 0 and 0 in the other formats. */
  const int64_t *chat;
  const int64_t *parent;
  size_t n_labels;
  const int64_t *label_offsets;
  const char *label_names;
  int64_t error_line; /* line of the malformed row, 0 when the scan succeeded */
  size_t lines;       /* lines consumed (including blank ones and the failing one) */
} lh_scan_result;

/* Creates a scanner (owns growable output buffers): LH_OK and *out, or LH_ENOMEM. Release it
 * with lh_scan_destroy. */
int lh_scan_create(lh_scan **out, char *err, size_t errlen);

/* Releases a scanner and every column it returned. NULL is a no-op. */
void lh_scan_destroy(lh_scan *scan);

/* Scans buf[0..len) whose first line has number first_line. The last line needs no '\n'.
 * trace_block_size (> 0) is the trace's tokens per block (mooncake/qwen key truncation).
 * format is an LH_FMT_* code of the format table.
 * Returns LH_OK, LH_EPARSE (malformed row; see result->error_line), LH_EINVAL (bad format or
 * block size) or LH_ENOMEM. result is filled in every case. */
int lh_scan_chunk(lh_scan *scan, int format, const char *buf, size_t len, int64_t first_line, int64_t trace_block_size,
                  lh_scan_result *result, char *err, size_t errlen);

/* The '\n' bytes of buf[0..len): the lines of a chunk of whole lines (the reader numbers the
 * next chunk's first line with it, before that chunk is scanned). Cannot fail. */
size_t lh_count_lines(const char *buf, size_t len);

#endif
