/* lh_trace_row.h - internal: what a trace format's row rule works with.
 *
 * Not part of the Python-facing API (build_ffi.py lists it as internal). The scanner
 * (lh_trace_scan.c) parses each non-blank line into the fields its format asks for
 * (lh_row_parse), then calls the format's row function, which validates those fields with the
 * helpers below and appends at most one record to the scanner's columns (lh_row_emit).
 *
 * A row function returns 0 (a record was emitted), 1 (the row is skipped: no record, no keys),
 * -1 (the row is malformed: the reason is in r->msg) or -2 (allocation failure). On -1/-2 the
 * scanner drops the row's keys; a row function need not clean up.
 */
#ifndef LH_TRACE_ROW_H
#define LH_TRACE_ROW_H

#include <stddef.h>
#include <stdint.h>

#include "lh_buf.h"
#include "lh_common.h"
#include "lh_json.h"
#include "lh_trace_format.h"
#include "lh_trace_scan.h"

/* The scanner: output columns of the current chunk and the current row's scratch. */
struct lh_scan {
  lh_vec line, kind, ts, input_len, key_off, keys, id_off, ids, instance, label, turn, chat, parent;
  lh_intern instances, labels;
  lh_vec str; /* decoded strings of the current row */
};

/* What a row format does with the value of one field. */
enum {
  LH_V_SKIP,       /* validate and ignore */
  LH_V_STRING,     /* keep a decoded string */
  LH_V_NUMBER,     /* keep a number */
  LH_V_SCALAR,     /* keep a string or a number (qwen chat_id) */
  LH_V_KEYS,       /* array of integers appended to the key column */
  LH_V_STR_ARRAY,  /* array of strings (validated) */
  LH_V_BLOCK_MASK, /* array of bools, or a number */
  LH_V_ANY_SHAPE,  /* remember only the JSON kind */
};

#define LH_ROW_MAX_FIELDS 12

/* The top-level fields a format reads, in the order of its field indices. Other fields are
 * validated and skipped; of duplicated fields the first one counts. */
typedef struct lh_row_fields {
  const char *names[LH_ROW_MAX_FIELDS];
  int modes[LH_ROW_MAX_FIELDS]; /* LH_V_* */
  int n;
} lh_row_fields;

/* One parsed field of the current row. */
typedef struct lh_field {
  int present;
  int kind;                /* LH_J_* of the value (numbers: after classification) */
  lh_json_number num;      /* numbers */
  size_t str_off, str_len; /* strings: decoded bytes in scan->str */
  lh_json_array arr;       /* arrays: element check; LH_V_KEYS: keys appended */
} lh_field;

/* The row being assembled. */
typedef struct lh_row {
  lh_field f[LH_ROW_MAX_FIELDS];
  size_t keys_start; /* scan->keys.len before the row */
  char msg[LH_ERR_LEN];
} lh_row;

/* A row's record. id == NULL synthesizes the trace id trace_<inst_name>_<ts>. */
typedef struct lh_record {
  int64_t line;
  uint8_t kind; /* LH_ROW_READ or LH_ROW_WRITE */
  int64_t ts;   /* ns */
  int64_t input_len;
  int32_t instance; /* -1: none */
  int32_t label;    /* -1: none */
  int64_t turn;
  const char *id;
  size_t id_len;
  const char *inst_name; /* for the synthesized id */
  size_t inst_len;
  int64_t chat;   /* qwen: the session number of chat_id (lh_scan_result.chat), else 0 */
  int64_t parent; /* qwen: that of parent_chat_id; == chat for a root and for other formats */
} lh_record;

typedef int (*lh_row_fn)(lh_scan *s, lh_row *r, int64_t line, int64_t trace_block_size);

/* A format's row rule: the fields it reads and the function that turns them into a record. */
typedef struct lh_trace_rule {
  lh_row_fields fields;
  lh_row_fn row;
} lh_trace_rule;

/* The rules, one file each (src/lh_format_*.c). */
extern const lh_trace_rule lh_rule_standard;
extern const lh_trace_rule lh_rule_mooncake;
extern const lh_trace_rule lh_rule_qwen;
extern const lh_trace_rule lh_rule_publisher;

/* A format table entry (src/lh_trace_format.c). */
typedef struct lh_trace_format {
  lh_trace_format_info info;
  const lh_trace_rule *rule;
} lh_trace_format;

/* The entry of a format code, or NULL. */
const lh_trace_format *lh_trace_format_find(int code);

/* ---- parsing a line ---------------------------------------------------------------------- */

/* Parses the whole line [c->p, c->end) as one JSON object, filling r->f for the fields of def
 * (r->f must be zeroed). Decoded strings go to s->str, LH_V_KEYS integers to s->keys.
 * 0, -1 (syntax error in c) or -2 (allocation failure). */
int lh_row_parse(lh_json_cursor *c, lh_scan *s, const lh_row_fields *def, lh_row *r);

/* ---- helpers for row functions ----------------------------------------------------------- */

/* Writes a printf-style reason into r->msg and returns -1. */
int lh_row_fail(lh_row *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The decoded bytes of a string field (f->str_len of them; not NUL-terminated). */
const char *lh_row_str(const lh_scan *s, const lh_field *f);

/* Whether f is a string field equal to the NUL-terminated lit. */
int lh_row_str_is(const lh_scan *s, const lh_field *f, const char *lit);

/* f as an int64: 0 and *out, or -1 with "missing integer field: <name>" (or why it is not). */
int lh_row_int(lh_row *r, const lh_field *f, const char *name, int64_t *out);

/* 0 when f is an array of 64-bit integers, else -1 with the reason. */
int lh_row_keys(lh_row *r, const lh_field *f, const char *name);

/* Keeps only the first `keep` (< 0: none) of the row's keys (hash_ids[: len // block_size]). */
void lh_row_truncate_keys(lh_scan *s, const lh_row *r, const lh_field *f, int64_t keep);

/* Drops all the row's keys (write rows and skipped rows carry none). */
void lh_row_drop_keys(lh_scan *s, const lh_row *r);

/* A user string made safe for a one-line message: control bytes escaped, at most 80 bytes shown
 * (then "..."). */
typedef struct lh_printable {
  char text[4 * 80 + 4];
} lh_printable;
lh_printable lh_row_shown(const char *s, size_t n);

/* Appends one record with the keys appended since r->keys_start. 0, or -2 on allocation failure. */
int lh_row_emit(lh_scan *s, const lh_record *rec);

#endif
