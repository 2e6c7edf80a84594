/* lh_json.h - internal: a strict JSON (RFC 8259) lexer over one line of text.
 *
 * Not part of the Python-facing API (build_ffi.py lists it as internal). A cursor walks a byte
 * range; each function consumes one token or value at c->p and returns
 *    0  success (c->p is after the value),
 *   -1  syntax error: the first error's static description and position stay in c->error and
 *       c->error_at (later errors do not overwrite them),
 *   -2  allocation failure (only where a function appends to a caller-owned lh_vec).
 * Strings are decoded (escapes, surrogate pairs) and UTF-8 is validated; numbers are classified
 * (int64, uint64 above INT64_MAX, out of range, float); containers nest at most
 * LH_JSON_MAX_DEPTH deep. Nothing is printed and no input byte past c->end is read.
 */
#ifndef LH_JSON_H
#define LH_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "lh_buf.h"
#include "lh_text.h"

#define LH_JSON_MAX_DEPTH 256

/* Kinds of JSON values. LH_J_UINT and LH_J_BIGINT are integers outside int64; a number that has
 * not been parsed yet peeks as LH_J_INT. */
enum {
  LH_J_NONE, /* no value here (end of input or an unexpected character) */
  LH_J_STRING,
  LH_J_INT,    /* fits int64 */
  LH_J_UINT,   /* INT64_MAX < v <= UINT64_MAX */
  LH_J_BIGINT, /* an integer out of the 64-bit range */
  LH_J_FLOAT,  /* has a fraction or an exponent */
  LH_J_BOOL,
  LH_J_NULL,
  LH_J_ARRAY,
  LH_J_OBJECT,
};

typedef struct lh_json_cursor {
  const char *p, *begin, *end; /* next byte, start of the text (for columns), end of the text */
  const char *error;           /* static description of the first syntax error, or NULL */
  const char *error_at;        /* where it happened */
  int depth;                   /* containers currently open */
} lh_json_cursor;

typedef struct lh_json_number {
  int kind;         /* LH_J_INT, LH_J_UINT, LH_J_BIGINT or LH_J_FLOAT */
  int64_t i;        /* LH_J_INT value, or the LH_J_UINT value reinterpreted as two's complement */
  double d;         /* LH_J_FLOAT value (strtod) */
  const char *text; /* the number's text in the input */
  size_t text_len;
} lh_json_number;

/* What an array held when its elements were checked against one expected kind. */
typedef struct lh_json_array {
  int elem_ok;      /* every element had the expected kind */
  size_t bad_index; /* the first element that did not (when !elem_ok) */
  int bad_kind;     /* its LH_J_* kind (LH_J_BIGINT / LH_J_FLOAT for a bad number) */
  size_t n_ints;    /* integers appended to the caller's vector */
} lh_json_array;

static inline void lh_json_skip_space(lh_json_cursor *c) { c->p = lh_skip_json_space(c->p, c->end); }

/* The kind of the value at c->p without consuming it (any number peeks as LH_J_INT). */
static inline int lh_json_peek(const lh_json_cursor *c) {
  if (c->p >= c->end) return LH_J_NONE;
  switch (*c->p) {
    case '"': return LH_J_STRING;
    case '{': return LH_J_OBJECT;
    case '[': return LH_J_ARRAY;
    case 't':
    case 'f': return LH_J_BOOL;
    case 'n': return LH_J_NULL;
    default: return (*c->p == '-' || lh_is_digit(*c->p)) ? LH_J_INT : LH_J_NONE;
  }
}

/* Records a syntax error at c->p unless one is recorded already; returns -1. */
int lh_json_error(lh_json_cursor *c, const char *what);

/* The string at c->p (which is '"'). With out != NULL the decoded UTF-8 bytes are appended to
 * out (char elements) and *off, *len locate them; with out == NULL the string is only checked. */
int lh_json_read_string(lh_json_cursor *c, lh_vec *out, size_t *off, size_t *len);

/* The number at c->p, classified into *num. */
int lh_json_read_number(lh_json_cursor *c, lh_json_number *num);

/* Validates and skips any value (nested containers included). */
int lh_json_skip_value(lh_json_cursor *c);

/* Enters the container at c->p ('[' or '{'; close is ']' or '}'). Returns 1 when an element
 * follows, 0 when the container was empty (it is then consumed), -1 when nested too deep. */
int lh_json_open(lh_json_cursor *c, char close);

/* After an element: consumes ',' and returns 1 (another element follows), or consumes the
 * closing bracket and returns 0; anything else is a syntax error (-1). */
int lh_json_next(lh_json_cursor *c, char close);

/* An object member's name and its ':' (whitespace around them is consumed), leaving c->p at
 * the value. out, off, len as for lh_json_read_string (out == NULL: the name is only checked). */
int lh_json_member_name(lh_json_cursor *c, lh_vec *out, size_t *off, size_t *len);

/* The array at c->p ('['), whose elements should all be of kind want (LH_J_INT, LH_J_STRING or
 * LH_J_BOOL); *info says whether they were. Elements of another kind are validated and skipped.
 * With ints != NULL (want == LH_J_INT) every int64 or uint64 element is appended to ints
 * (int64_t elements; above INT64_MAX as two's complement). */
int lh_json_array_of(lh_json_cursor *c, int want, lh_vec *ints, lh_json_array *info);

/* "a string", "an integer", ... for messages; "missing" for LH_J_NONE. */
const char *lh_json_kind_name(int kind);

#endif
