/* lh_trace_format.h - the table of trace row formats the scanner knows.
 *
 * One entry per format: its code (LH_FMT_*, what lh_scan_chunk takes), its name (what Python and
 * the configs call it), the trace block size assumed when a user gives none, whether its rows
 * carry an instance id, and the rule that recognises a row of the format from the top-level keys
 * of the first row: formats are tried in ascending detect_priority and the first whose
 * detect_keys are all present wins. Adding a format = one row-rule file (src/lh_format_*.c) and
 * one entry in the table (src/lh_trace_format.c).
 */
#ifndef LH_TRACE_FORMAT_H
#define LH_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define LH_FMT_STANDARD 1  /* "standard" */
#define LH_FMT_MOONCAKE 2  /* "mooncake" */
#define LH_FMT_QWEN 3      /* "qwen_bailian" */
#define LH_FMT_PUBLISHER 4 /* "publisher_log" */

typedef struct lh_trace_format_info {
  int code;                    /* LH_FMT_* */
  const char *name;            /* static storage, e.g. "qwen_bailian" */
  int64_t default_trace_block; /* the trace's tokens per block when the user gives none */
  int instanceless;            /* non-zero: rows carry no instance id (scan instance = -1) */
  int detect_priority;         /* detection tries formats in ascending order (distinct values) */
  const char *detect_keys;     /* comma-separated top-level keys a row of this format all has */
} lh_trace_format_info;

/* Number of formats in the table. Cannot fail. */
size_t lh_trace_format_count(void);

/* Copies entry index (0 <= index < lh_trace_format_count(), table order) into the caller-owned
 * *out; its strings are static. Returns LH_OK, or LH_ERANGE (out untouched) for a bad index. */
int lh_trace_format_get(size_t index, lh_trace_format_info *out);

#endif
