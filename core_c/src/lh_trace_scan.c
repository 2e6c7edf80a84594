/* lh_trace_scan.c - strict JSON Lines parsing of trace rows into columns.
 *
 * The JSON layer is a small recursive-descent validator over one line: strings are decoded
 * (escapes, surrogate pairs, UTF-8 checked), numbers are classified (int64, uint64 above
 * INT64_MAX, float, out of range). Row formats pick the fields they know from the top-level
 * object; unknown fields are validated and skipped. Duplicate fields: the first one counts.
 */
#include "lh_trace_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_buf.h"
#include "lh_common.h"

struct lh_scan {
  lh_vec line, kind, ts, input_len, key_off, keys, id_off, ids, instance, label, turn;
  lh_intern instances, labels;
  lh_vec str; /* scratch for decoded strings of the current row */
};

int lh_scan_create(lh_scan **out, char *err, size_t errlen) {
  lh_scan *s = calloc(1, sizeof(lh_scan));
  if (s == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a trace scanner");
  *out = s;
  return LH_OK;
}

void lh_scan_destroy(lh_scan *s) {
  if (s == NULL) return;
  lh_vec *all[] = {&s->line, &s->kind, &s->ts,    &s->input_len, &s->key_off, &s->keys,
                &s->id_off, &s->ids, &s->instance, &s->label, &s->turn, &s->str};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->data);
  lh_intern_free(&s->instances);
  lh_intern_free(&s->labels);
  free(s);
}

/* ---- JSON primitives --------------------------------------------------------------------- */

enum { J_NONE, J_STRING, J_INT, J_UINT, J_BIGINT, J_FLOAT, J_BOOL, J_NULL, J_ARRAY, J_OBJECT };

typedef struct cursor {
  const char *p, *begin, *end;
  const char *error; /* static description of the first syntax error */
  const char *error_at;
  int depth;
} cursor;

#define MAX_DEPTH 256

static inline void skip_ws(cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r' || *c->p == '\n')) c->p++;
}

static int syntax(cursor *c, const char *what) {
  if (c->error == NULL) {
    c->error = what;
    c->error_at = c->p;
  }
  return -1;
}

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static int read_hex4(cursor *c, unsigned *out) {
  if (c->end - c->p < 4) return syntax(c, "truncated \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    int h = hexval(c->p[i]);
    if (h < 0) return syntax(c, "bad \\u escape");
    v = v * 16 + (unsigned)h;
  }
  c->p += 4;
  *out = v;
  return 0;
}

/* Length of a valid UTF-8 sequence starting at p (< end), or 0. */
static size_t utf8_len(const unsigned char *p, const unsigned char *end) {
  unsigned char b = p[0];
  if (b < 0x80) return 1;
  size_t n;
  unsigned cp;
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
    cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    cp = b & 0x0F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    cp = b & 0x07;
  } else {
    return 0;
  }
  if ((size_t)(end - p) < n) return 0;
  for (size_t i = 1; i < n; i++) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
    return 0;
  }
  return n;
}

static void put_utf8(char *out, size_t *n, unsigned cp) {
  if (cp < 0x80) {
    out[(*n)++] = (char)cp;
  } else if (cp < 0x800) {
    out[(*n)++] = (char)(0xC0 | (cp >> 6));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out[(*n)++] = (char)(0xE0 | (cp >> 12));
    out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  } else {
    out[(*n)++] = (char)(0xF0 | (cp >> 18));
    out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[(*n)++] = (char)(0x80 | (cp & 0x3F));
  }
}

/* Parses a string at c->p (which is '"'). When out != NULL the decoded bytes are appended to out
 * and off, len describe them; returns 0, -1 on syntax error, -2 on allocation failure. */
static int parse_string(cursor *c, lh_vec *out, size_t *off, size_t *len) {
  c->p++; /* opening quote */
  const char *start = c->p;
  /* Fast path: no escapes. */
  while (c->p < c->end) {
    unsigned char ch = (unsigned char)*c->p;
    if (ch == '"' || ch == '\\' || ch < 0x20 || ch >= 0x80) break;
    c->p++;
  }
  if (out != NULL) {
    if (lh_vec_reserve(out, (size_t)(c->end - start), 1)) return -2;
    *off = out->len;
  }
  size_t n = 0;
  char *dst = out != NULL ? LH_VEC_AT(*out, char) + out->len : NULL;
  if (dst != NULL && c->p > start) memcpy(dst, start, (size_t)(c->p - start));
  n = (size_t)(c->p - start);
  for (;;) {
    if (c->p >= c->end) return syntax(c, "unterminated string");
    unsigned char ch = (unsigned char)*c->p;
    if (ch == '"') {
      c->p++;
      break;
    }
    if (ch < 0x20) return syntax(c, "control character in string");
    if (ch == '\\') {
      c->p++;
      if (c->p >= c->end) return syntax(c, "unterminated string");
      char e = *c->p++;
      unsigned cp;
      switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
          if (read_hex4(c, &cp)) return -1;
          if (cp >= 0xDC00 && cp <= 0xDFFF) return syntax(c, "lone low surrogate in \\u escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            unsigned lo;
            if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u') {
              return syntax(c, "lone high surrogate in \\u escape");
            }
            c->p += 2;
            if (read_hex4(c, &lo)) return -1;
            if (lo < 0xDC00 || lo > 0xDFFF) return syntax(c, "bad surrogate pair in \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          break;
        default: return syntax(c, "bad escape in string");
      }
      if (dst != NULL) put_utf8(dst, &n, cp);
      continue;
    }
    if (ch >= 0x80) {
      size_t k = utf8_len((const unsigned char *)c->p, (const unsigned char *)c->end);
      if (k == 0) return syntax(c, "invalid UTF-8 in string");
      if (dst != NULL) memcpy(dst + n, c->p, k);
      n += k;
      c->p += k;
      continue;
    }
    if (dst != NULL) dst[n] = (char)ch;
    n++;
    c->p++;
  }
  if (out != NULL) {
    *len = n;
    out->len += n;
  }
  return 0;
}

typedef struct number {
  int kind;    /* J_INT (fits int64), J_UINT (INT64_MAX < v <= UINT64_MAX), J_BIGINT, J_FLOAT */
  int64_t i;   /* J_INT value, or J_UINT reinterpreted as two's complement */
  double d;    /* J_FLOAT value */
  const char *text;
  size_t text_len;
} number;

static int parse_number(cursor *c, number *num) {
  const char *s = c->p;
  int neg = 0;
  if (c->p < c->end && *c->p == '-') {
    neg = 1;
    c->p++;
  }
  if (c->p >= c->end || *c->p < '0' || *c->p > '9') return syntax(c, "bad number");
  uint64_t mag = 0;
  int overflow = 0;
  if (*c->p == '0') {
    c->p++;
  } else {
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
      unsigned dgt = (unsigned)(*c->p - '0');
      if (mag > (UINT64_MAX - dgt) / 10) overflow = 1;
      else mag = mag * 10 + dgt;
      c->p++;
    }
  }
  int is_float = 0;
  if (c->p < c->end && *c->p == '.') {
    is_float = 1;
    c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return syntax(c, "bad number");
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
  }
  if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
    is_float = 1;
    c->p++;
    if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
    if (c->p >= c->end || *c->p < '0' || *c->p > '9') return syntax(c, "bad number");
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') c->p++;
  }
  num->text = s;
  num->text_len = (size_t)(c->p - s);
  if (is_float) {
    char small[64];
    char *buf = num->text_len < sizeof small ? small : malloc(num->text_len + 1);
    if (buf == NULL) return -2;
    memcpy(buf, s, num->text_len);
    buf[num->text_len] = '\0';
    num->d = strtod(buf, NULL);
    if (buf != small) free(buf);
    num->kind = J_FLOAT;
  } else if (overflow) {
    num->kind = J_BIGINT;
  } else if (neg) {
    if (mag > (uint64_t)INT64_MAX + 1) {
      num->kind = J_BIGINT;
    } else {
      num->kind = J_INT;
      num->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    }
  } else if (mag > (uint64_t)INT64_MAX) {
    num->kind = J_UINT;
    num->i = -(int64_t)(~mag) - 1; /* two's complement reinterpretation */
  } else {
    num->kind = J_INT;
    num->i = (int64_t)mag;
  }
  return 0;
}

static int skip_value(cursor *c);

static int expect_literal(cursor *c, const char *lit, size_t n) {
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return syntax(c, "unexpected token");
  c->p += n;
  return 0;
}

/* Kind of the value at c->p without consuming it. */
static int peek_kind(cursor *c) {
  if (c->p >= c->end) return J_NONE;
  switch (*c->p) {
    case '"': return J_STRING;
    case '{': return J_OBJECT;
    case '[': return J_ARRAY;
    case 't':
    case 'f': return J_BOOL;
    case 'n': return J_NULL;
    default: return (*c->p == '-' || (*c->p >= '0' && *c->p <= '9')) ? J_INT : J_NONE;
  }
}

static int skip_container(cursor *c, char close) {
  if (++c->depth > MAX_DEPTH) return syntax(c, "nesting too deep");
  c->p++;
  skip_ws(c);
  if (c->p < c->end && *c->p == close) {
    c->p++;
    c->depth--;
    return 0;
  }
  for (;;) {
    skip_ws(c);
    if (close == '}') {
      if (c->p >= c->end || *c->p != '"') return syntax(c, "expected a field name");
      int st = parse_string(c, NULL, NULL, NULL);
      if (st) return st;
      skip_ws(c);
      if (c->p >= c->end || *c->p != ':') return syntax(c, "expected ':'");
      c->p++;
      skip_ws(c);
    }
    int st = skip_value(c);
    if (st) return st;
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
      c->p++;
      continue;
    }
    if (c->p < c->end && *c->p == close) {
      c->p++;
      c->depth--;
      return 0;
    }
    return syntax(c, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static int skip_value(cursor *c) {
  number num;
  switch (peek_kind(c)) {
    case J_STRING: return parse_string(c, NULL, NULL, NULL);
    case J_OBJECT: return skip_container(c, '}');
    case J_ARRAY: return skip_container(c, ']');
    case J_BOOL: return *c->p == 't' ? expect_literal(c, "true", 4) : expect_literal(c, "false", 5);
    case J_NULL: return expect_literal(c, "null", 4);
    case J_INT: return parse_number(c, &num);
    default: return syntax(c, c->p >= c->end ? "unexpected end of line" : "unexpected character");
  }
}

/* ---- field values ------------------------------------------------------------------------ */

/* What a row format does with the value of one field. */
enum {
  V_SKIP,       /* validate and ignore */
  V_STRING,     /* keep a decoded string */
  V_NUMBER,     /* keep a number */
  V_SCALAR,     /* keep a string or a number (qwen chat_id) */
  V_KEYS,       /* array of integers appended to the key column */
  V_STR_ARRAY,  /* array of strings (validated) */
  V_BLOCK_MASK, /* array of bools, or a number */
  V_ANY_SHAPE,  /* remember only the JSON kind */
};

typedef struct field {
  int present;
  int kind; /* J_* of the value */
  number num;
  size_t str_off, str_len; /* decoded string in scan->str */
  int elem_ok;             /* arrays: every element had the expected kind */
  size_t bad_index;        /* arrays: first bad element */
  int bad_kind;            /* arrays: J_* of the first bad element (J_BIGINT = out of range) */
  size_t n_keys;           /* V_KEYS: elements appended */
} field;

/* Parses an array whose elements must have one kind. For V_KEYS, integers are appended to
 * scan->keys (unsigned above INT64_MAX wrap). */
static int parse_array(cursor *c, lh_scan *s, int mode, field *f) {
  if (++c->depth > MAX_DEPTH) return syntax(c, "nesting too deep");
  c->p++;
  f->elem_ok = 1;
  f->n_keys = 0;
  skip_ws(c);
  if (c->p < c->end && *c->p == ']') {
    c->p++;
    c->depth--;
    return 0;
  }
  size_t index = 0;
  for (;;) {
    skip_ws(c);
    int k = peek_kind(c);
    if (mode == V_KEYS && k == J_INT) {
      /* Hot path: plain decimal integers straight into the key column. */
      number num;
      int st = parse_number(c, &num);
      if (st) return st;
      if (num.kind == J_INT || num.kind == J_UINT) {
        if (s->keys.len == s->keys.cap && lh_vec_reserve(&s->keys, 1, sizeof(int64_t))) return -2;
        LH_VEC_AT(s->keys, int64_t)[s->keys.len++] = num.i;
        f->n_keys++;
      } else if (f->elem_ok) {
        f->elem_ok = 0;
        f->bad_index = index;
        f->bad_kind = num.kind;
      }
    } else {
      int want = mode == V_STR_ARRAY ? J_STRING : mode == V_BLOCK_MASK ? J_BOOL : J_INT;
      if (k != want && f->elem_ok) {
        f->elem_ok = 0;
        f->bad_index = index;
        f->bad_kind = k;
      }
      int st = skip_value(c);
      if (st) return st;
    }
    index++;
    skip_ws(c);
    if (c->p < c->end && *c->p == ',') {
      c->p++;
      continue;
    }
    if (c->p < c->end && *c->p == ']') {
      c->p++;
      c->depth--;
      return 0;
    }
    return syntax(c, "expected ',' or ']'");
  }
}

static int parse_field(cursor *c, lh_scan *s, int mode, field *f) {
  int k = peek_kind(c);
  f->present = 1;
  f->kind = k;
  if (k == J_STRING && (mode == V_STRING || mode == V_SCALAR)) {
    return parse_string(c, &s->str, &f->str_off, &f->str_len);
  }
  if (k == J_INT && mode != V_SKIP) {
    int st = parse_number(c, &f->num);
    f->kind = f->num.kind;
    return st;
  }
  if (k == J_ARRAY && (mode == V_KEYS || mode == V_STR_ARRAY || mode == V_BLOCK_MASK)) {
    return parse_array(c, s, mode, f);
  }
  return skip_value(c);
}

static const char *kind_name(int k) {
  switch (k) {
    case J_STRING: return "a string";
    case J_INT:
    case J_UINT: return "an integer";
    case J_BIGINT: return "an integer out of the 64-bit range";
    case J_FLOAT: return "a non-integer number";
    case J_BOOL: return "a boolean";
    case J_NULL: return "null";
    case J_ARRAY: return "an array";
    case J_OBJECT: return "an object";
    default: return "missing";
  }
}

/* ---- row formats ------------------------------------------------------------------------- */

#define MAX_FIELDS 12

typedef struct format_def {
  const char *names[MAX_FIELDS];
  int modes[MAX_FIELDS];
  int n;
} format_def;

/* Field indices per format (order of names[]). */
enum { S_TYPE, S_INSTANCE, S_TRACE_ID, S_TS, S_KEYS, S_LEN, S_QUERY_TYPE, S_BLOCK_MASK, S_SW, S_LSN, S_TTL };
static const format_def STANDARD = {
    {"type", "instance_id", "trace_id", "timestamp_ns", "keys", "input_len", "query_type", "block_mask",
     "sw_size", "location_spec_names", "ttl_us"},
    {V_STRING, V_STRING, V_STRING, V_NUMBER, V_KEYS, V_NUMBER, V_ANY_SHAPE, V_BLOCK_MASK, V_NUMBER,
     V_STR_ARRAY, V_NUMBER},
    11};

enum { M_TS, M_LEN, M_IDS };
static const format_def MOONCAKE = {{"timestamp", "input_length", "hash_ids"}, {V_NUMBER, V_NUMBER, V_KEYS}, 3};

enum { Q_CHAT, Q_TS, Q_LEN, Q_IDS, Q_TYPE, Q_TURN };
static const format_def QWEN = {{"chat_id", "timestamp", "input_length", "hash_ids", "type", "turn"},
                                {V_SCALAR, V_NUMBER, V_NUMBER, V_KEYS, V_STRING, V_NUMBER},
                                6};

enum { P_TYPE, P_SOURCE, P_ID, P_TS, P_KEYS };
static const format_def PUBLISHER = {{"type", "source", "id", "trigger_time_us", "keys"},
                                     {V_STRING, V_STRING, V_STRING, V_NUMBER, V_KEYS},
                                     5};

/* One row being assembled. */
typedef struct row {
  field f[MAX_FIELDS];
  size_t keys_start; /* scan->keys.len before the row */
  char msg[LH_ERR_LEN];
} row;

static int field_index(const format_def *def, const char *name, size_t n) {
  for (int i = 0; i < def->n; i++) {
    if (strlen(def->names[i]) == n && memcmp(def->names[i], name, n) == 0) return i;
  }
  return -1;
}

/* Parses a whole line as one object, filling r->f for known fields. 0 / -1 syntax / -2 nomem. */
static int parse_object(cursor *c, lh_scan *s, const format_def *def, row *r) {
  skip_ws(c);
  if (c->p >= c->end || *c->p != '{') return syntax(c, "expected a JSON object");
  c->depth = 1;
  c->p++;
  skip_ws(c);
  if (c->p < c->end && *c->p == '}') {
    c->p++;
  } else {
    for (;;) {
      skip_ws(c);
      if (c->p >= c->end || *c->p != '"') return syntax(c, "expected a field name");
      size_t name_off = 0, name_len = 0;
      int st = parse_string(c, &s->str, &name_off, &name_len);
      if (st) return st;
      int idx = field_index(def, LH_VEC_AT(s->str, char) + name_off, name_len);
      s->str.len = name_off; /* the name is not needed any more */
      skip_ws(c);
      if (c->p >= c->end || *c->p != ':') return syntax(c, "expected ':'");
      c->p++;
      skip_ws(c);
      if (idx >= 0 && !r->f[idx].present) {
        st = parse_field(c, s, def->modes[idx], &r->f[idx]);
      } else {
        st = skip_value(c);
      }
      if (st) return st;
      skip_ws(c);
      if (c->p < c->end && *c->p == ',') {
        c->p++;
        continue;
      }
      if (c->p < c->end && *c->p == '}') {
        c->p++;
        break;
      }
      return syntax(c, "expected ',' or '}'");
    }
  }
  skip_ws(c);
  if (c->p != c->end) return syntax(c, "trailing characters after the object");
  return 0;
}

static const char *fstr(lh_scan *s, const field *f) { return LH_VEC_AT(s->str, char) + f->str_off; }

static int fstr_is(lh_scan *s, const field *f, const char *lit) {
  return f->kind == J_STRING && f->str_len == strlen(lit) && memcmp(fstr(s, f), lit, f->str_len) == 0;
}

/* Emits one record. id_src/id_len: trace id bytes (NULL = synthesize trace_<inst>_<ts>). */
typedef struct record {
  int64_t line;
  uint8_t kind;
  int64_t ts;
  int64_t input_len;
  int32_t instance;
  int32_t label;
  int64_t turn;
  const char *id;
  size_t id_len;
  const char *inst_name; /* for the synthesized id */
  size_t inst_len;
} record;

static int emit(lh_scan *s, const record *rec) {
  if (lh_vec_reserve(&s->line, 1, sizeof(int64_t)) || lh_vec_reserve(&s->kind, 1, 1) ||
      lh_vec_reserve(&s->ts, 1, sizeof(int64_t)) || lh_vec_reserve(&s->input_len, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->key_off, 1, sizeof(int64_t)) || lh_vec_reserve(&s->id_off, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->instance, 1, sizeof(int32_t)) || lh_vec_reserve(&s->label, 1, sizeof(int32_t)) ||
      lh_vec_reserve(&s->turn, 1, sizeof(int64_t))) {
    return -2;
  }
  size_t i = s->line.len;
  LH_VEC_AT(s->line, int64_t)[i] = rec->line;
  LH_VEC_AT(s->kind, uint8_t)[i] = rec->kind;
  LH_VEC_AT(s->ts, int64_t)[i] = rec->ts;
  LH_VEC_AT(s->input_len, int64_t)[i] = rec->input_len;
  LH_VEC_AT(s->instance, int32_t)[i] = rec->instance;
  LH_VEC_AT(s->label, int32_t)[i] = rec->label;
  LH_VEC_AT(s->turn, int64_t)[i] = rec->turn;
  LH_VEC_AT(s->key_off, int64_t)[i + 1] = (int64_t)s->keys.len;
  if (rec->id != NULL) {
    if (lh_vec_reserve(&s->ids, rec->id_len, 1)) return -2;
    memcpy(LH_VEC_AT(s->ids, char) + s->ids.len, rec->id, rec->id_len);
    s->ids.len += rec->id_len;
  } else {
    /* trace_<instance>_<timestamp> */
    if (lh_vec_reserve(&s->ids, rec->inst_len + 32, 1)) return -2;
    char *dst = LH_VEC_AT(s->ids, char) + s->ids.len;
    memcpy(dst, "trace_", 6);
    memcpy(dst + 6, rec->inst_name, rec->inst_len);
    size_t n = 6 + rec->inst_len;
    dst[n++] = '_';
    char digits[24];
    int nd = 0;
    uint64_t v = rec->ts < 0 ? (uint64_t)0 - (uint64_t)rec->ts : (uint64_t)rec->ts;
    do {
      digits[nd++] = (char)('0' + v % 10);
      v /= 10;
    } while (v);
    if (rec->ts < 0) dst[n++] = '-';
    while (nd) dst[n++] = digits[--nd];
    s->ids.len += n;
  }
  LH_VEC_AT(s->id_off, int64_t)[i + 1] = (int64_t)s->ids.len;
  s->line.len = s->kind.len = s->ts.len = s->input_len.len = s->instance.len = s->label.len = s->turn.len = i + 1;
  s->key_off.len = s->id_off.len = i + 2;
  return 0;
}

#define ROW_FAIL(...) (snprintf(r->msg, sizeof r->msg, __VA_ARGS__), -1)

/* A user string made safe for a one-line message: control bytes escaped, at most 80 bytes shown. */
typedef struct printable {
  char text[4 * 80 + 4];
} printable;

static printable shown(const char *s, size_t n) {
  printable out;
  size_t w = 0;
  for (size_t i = 0; i < n && w + 5 < sizeof out.text; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f) {
      w += (size_t)snprintf(out.text + w, sizeof out.text - w, c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : "\\x%02x", c);
    } else {
      out.text[w++] = (char)c;
    }
    if (i == 79 && n > 80) {
      memcpy(out.text + w, "...", 3);
      w += 3;
      break;
    }
  }
  out.text[w] = '\0';
  return out;
}

/* Describes why an integer field is unusable. */
static int int_field(row *r, const field *f, const char *name, int64_t *out) {
  if (!f->present) return ROW_FAIL("missing integer field: %s", name);
  if (f->kind != J_INT) {
    if (f->kind == J_UINT || f->kind == J_BIGINT) return ROW_FAIL("integer field out of range: %s", name);
    return ROW_FAIL("missing integer field: %s (got %s)", name, kind_name(f->kind));
  }
  *out = f->num.i;
  return 0;
}

static int keys_field(row *r, const field *f, const char *name) {
  if (!f->present || f->kind != J_ARRAY) return ROW_FAIL("missing array field: %s", name);
  if (!f->elem_ok) {
    return ROW_FAIL("%s[%zu] is %s, expected a 64-bit integer", name, f->bad_index, kind_name(f->bad_kind));
  }
  return 0;
}

/* Keeps only the first `keep` keys of the row (hash_ids[: input_length // block_size]). */
static void truncate_keys(lh_scan *s, const row *r, const field *f, int64_t keep) {
  if (keep < (int64_t)f->n_keys) s->keys.len = r->keys_start + (size_t)(keep < 0 ? 0 : keep);
}

static int row_standard(lh_scan *s, row *r, int64_t line) {
  field *f = r->f;
  if (!f[S_TYPE].present || f[S_TYPE].kind != J_STRING) return ROW_FAIL("missing string field: type");
  uint8_t kind;
  const char *tname;
  if (fstr_is(s, &f[S_TYPE], "get")) {
    kind = LH_ROW_READ;
    tname = "get";
  } else if (fstr_is(s, &f[S_TYPE], "request")) {
    kind = LH_ROW_READ;
    tname = "request";
  } else if (fstr_is(s, &f[S_TYPE], "write")) {
    kind = LH_ROW_WRITE;
    tname = "write";
  } else {
    return ROW_FAIL("unknown trace type: %s", shown(fstr(s, &f[S_TYPE]), f[S_TYPE].str_len).text);
  }
  if (!f[S_INSTANCE].present || f[S_INSTANCE].kind != J_STRING || f[S_INSTANCE].str_len == 0) {
    return ROW_FAIL("missing non-empty string field: instance_id");
  }
  int64_t ts = 0;
  if (int_field(r, &f[S_TS], "timestamp_ns", &ts)) return -1;
  if (!f[S_KEYS].present || f[S_KEYS].kind != J_ARRAY) return ROW_FAIL("missing array field: keys");
  int64_t len = 0;
  if (kind == LH_ROW_READ) {
    if (!f[S_LEN].present) return ROW_FAIL("missing integer field: input_len");
    if (f[S_LEN].kind != J_INT) return ROW_FAIL("non-integer field: input_len");
    len = f[S_LEN].num.i;
  }
  /* The typed parser: every present field must have its JSON type. */
  if (!f[S_KEYS].elem_ok) {
    return ROW_FAIL("failed to parse %s trace (keys[%zu] is %s, expected a 64-bit integer)", tname,
                    f[S_KEYS].bad_index, kind_name(f[S_KEYS].bad_kind));
  }
  if (f[S_TRACE_ID].present && f[S_TRACE_ID].kind != J_STRING) {
    return ROW_FAIL("failed to parse %s trace (trace_id must be a string)", tname);
  }
  if (f[S_QUERY_TYPE].present && f[S_QUERY_TYPE].kind != J_STRING) {
    return ROW_FAIL("failed to parse %s trace (query_type must be a string)", tname);
  }
  const field *bm = &f[S_BLOCK_MASK];
  if (bm->present && !(bm->kind == J_ARRAY && bm->elem_ok) && !(bm->kind == J_INT && bm->num.i >= 0)) {
    return ROW_FAIL("failed to parse %s trace (block_mask must be an array of booleans or a non-negative "
                    "integer)",
                    tname);
  }
  if (f[S_SW].present && !(f[S_SW].kind == J_INT && f[S_SW].num.i >= INT32_MIN && f[S_SW].num.i <= INT32_MAX)) {
    return ROW_FAIL("failed to parse %s trace (sw_size must be a 32-bit integer)", tname);
  }
  if (f[S_LSN].present && !(f[S_LSN].kind == J_ARRAY && f[S_LSN].elem_ok)) {
    return ROW_FAIL("failed to parse %s trace (location_spec_names must be an array of strings)", tname);
  }
  if (f[S_TTL].present && f[S_TTL].kind != J_INT) {
    return ROW_FAIL("failed to parse %s trace (ttl_us must be a 64-bit integer)", tname);
  }
  if (kind == LH_ROW_READ && len <= 0) {
    return ROW_FAIL("failed to parse %s trace (input_len must be positive, got %lld)", tname, (long long)len);
  }
  if (ts <= 0) return ROW_FAIL("failed to validate trace: timestamp_ns must be positive, got %lld", (long long)ts);
  int32_t inst = lh_intern_get(&s->instances, fstr(s, &f[S_INSTANCE]), f[S_INSTANCE].str_len);
  if (inst < 0) return -2;
  if (kind == LH_ROW_WRITE) s->keys.len = r->keys_start; /* writes carry no keys */
  record rec = {line, kind, ts, len, inst, -1, 0, NULL, 0, fstr(s, &f[S_INSTANCE]), f[S_INSTANCE].str_len};
  if (f[S_TRACE_ID].present && f[S_TRACE_ID].str_len > 0) {
    rec.id = fstr(s, &f[S_TRACE_ID]);
    rec.id_len = f[S_TRACE_ID].str_len;
  }
  return emit(s, &rec);
}

static int row_mooncake(lh_scan *s, row *r, int64_t line, int64_t block_size) {
  field *f = r->f;
  int64_t ts_ms = 0, len = 0;
  if (int_field(r, &f[M_TS], "timestamp", &ts_ms)) return -1;
  if (int_field(r, &f[M_LEN], "input_length", &len)) return -1;
  if (keys_field(r, &f[M_IDS], "hash_ids")) return -1;
  if (ts_ms < 0) return ROW_FAIL("timestamp must not be negative, got %lld", (long long)ts_ms);
  if (ts_ms > INT64_MAX / 1000000) return ROW_FAIL("timestamp %lld ms overflows int64 nanoseconds", (long long)ts_ms);
  if (len < 0) return ROW_FAIL("input_length must not be negative, got %lld", (long long)len);
  truncate_keys(s, r, &f[M_IDS], len / block_size);
  char id[24];
  int n = snprintf(id, sizeof id, "%lld", (long long)line);
  record rec = {line, LH_ROW_READ, ts_ms * 1000000, len, -1, -1, 0, id, (size_t)n, NULL, 0};
  return emit(s, &rec);
}

static int row_qwen(lh_scan *s, row *r, int64_t line, int64_t block_size) {
  field *f = r->f;
  const field *chat = &f[Q_CHAT];
  if (!chat->present) return ROW_FAIL("missing field: chat_id");
  if (chat->kind != J_STRING && chat->kind != J_INT && chat->kind != J_UINT && chat->kind != J_BIGINT) {
    return ROW_FAIL("chat_id must be an integer or a string, got %s", kind_name(chat->kind));
  }
  const field *t = &f[Q_TS];
  if (!t->present || (t->kind != J_INT && t->kind != J_FLOAT && t->kind != J_UINT && t->kind != J_BIGINT)) {
    return ROW_FAIL("missing number field: timestamp");
  }
  int64_t ts;
  if (t->kind == J_INT) { /* Python: int * int is exact */
    if (t->num.i < 0) return ROW_FAIL("timestamp must not be negative");
    if (t->num.i > INT64_MAX / 1000000000) return ROW_FAIL("timestamp overflows int64 nanoseconds");
    ts = t->num.i * 1000000000;
  } else if (t->kind == J_FLOAT) { /* Python: int(float * 1_000_000_000), float arithmetic */
    double v = t->num.d * 1000000000.0;
    if (!(v >= 0.0)) return ROW_FAIL("timestamp must not be negative");
    if (!(v < 9223372036854775808.0)) return ROW_FAIL("timestamp overflows int64 nanoseconds");
    ts = (int64_t)v;
  } else {
    return ROW_FAIL("timestamp overflows int64 nanoseconds");
  }
  int64_t len = 0;
  if (int_field(r, &f[Q_LEN], "input_length", &len)) return -1;
  if (keys_field(r, &f[Q_IDS], "hash_ids")) return -1;
  if (len < 0) return ROW_FAIL("input_length must not be negative, got %lld", (long long)len);
  if (f[Q_TYPE].present && f[Q_TYPE].kind != J_STRING && f[Q_TYPE].kind != J_NULL) {
    return ROW_FAIL("type must be a string");
  }
  int64_t turn = 0;
  if (f[Q_TURN].present && f[Q_TURN].kind != J_NULL) {
    if (f[Q_TURN].kind != J_INT) return ROW_FAIL("turn must be an integer");
    turn = f[Q_TURN].num.i;
  }
  truncate_keys(s, r, &f[Q_IDS], len / block_size);
  int32_t label = -1;
  if (f[Q_TYPE].present && f[Q_TYPE].kind == J_STRING) {
    label = lh_intern_get(&s->labels, fstr(s, &f[Q_TYPE]), f[Q_TYPE].str_len);
    if (label < 0) return -2;
  }
  record rec = {line, LH_ROW_READ, ts, len, -1, label, turn, NULL, 0, NULL, 0};
  if (chat->kind == J_STRING) {
    rec.id = fstr(s, chat);
    rec.id_len = chat->str_len;
  } else if (chat->num.text_len == 2 && memcmp(chat->num.text, "-0", 2) == 0) {
    rec.id = "0"; /* the integer's canonical text, as str(int) in Python */
    rec.id_len = 1;
  } else {
    rec.id = chat->num.text; /* JSON integers have no leading zeros: the text is canonical */
    rec.id_len = chat->num.text_len;
  }
  return emit(s, &rec);
}

/* Returns 1 when the event is skipped (no record), 0 when emitted, -1/-2 on error. */
static int row_publisher(lh_scan *s, row *r, int64_t line) {
  field *f = r->f;
  if (!f[P_TYPE].present || f[P_TYPE].kind != J_STRING) return ROW_FAIL("missing string field: type");
  uint8_t kind;
  if (fstr_is(s, &f[P_TYPE], "GetCacheLocation")) {
    kind = LH_ROW_READ;
  } else if (fstr_is(s, &f[P_TYPE], "StartWriteCache")) {
    kind = LH_ROW_WRITE;
  } else {
    int has_keys = f[P_KEYS].present && !(f[P_KEYS].kind == J_ARRAY && f[P_KEYS].n_keys == 0 && f[P_KEYS].elem_ok) &&
                   f[P_KEYS].kind != J_NULL;
    if (fstr_is(s, &f[P_TYPE], "FinishWriteCache") || !has_keys) {
      s->keys.len = r->keys_start;
      return 1;
    }
    return ROW_FAIL("unsupported event type %s with keys (expected GetCacheLocation or StartWriteCache)",
                    shown(fstr(s, &f[P_TYPE]), f[P_TYPE].str_len).text);
  }
  if (!f[P_SOURCE].present || f[P_SOURCE].kind != J_STRING || f[P_SOURCE].str_len == 0) {
    return ROW_FAIL("missing non-empty string field: source");
  }
  int64_t us = 0;
  if (int_field(r, &f[P_TS], "trigger_time_us", &us)) return -1;
  if (keys_field(r, &f[P_KEYS], "keys")) return -1;
  if (f[P_ID].present && f[P_ID].kind != J_STRING) return ROW_FAIL("id must be a string");
  if (us <= 0) return ROW_FAIL("trigger_time_us must be positive, got %lld", (long long)us);
  if (us > INT64_MAX / 1000) return ROW_FAIL("trigger_time_us overflows int64 nanoseconds");
  int32_t inst = lh_intern_get(&s->instances, fstr(s, &f[P_SOURCE]), f[P_SOURCE].str_len);
  if (inst < 0) return -2;
  if (kind == LH_ROW_WRITE) s->keys.len = r->keys_start;
  record rec = {line, kind, us * 1000, 0, inst, -1, 0, NULL, 0, fstr(s, &f[P_SOURCE]), f[P_SOURCE].str_len};
  if (f[P_ID].present && f[P_ID].str_len > 0) {
    rec.id = fstr(s, &f[P_ID]);
    rec.id_len = f[P_ID].str_len;
  }
  return emit(s, &rec);
}

/* ---- chunk driver ------------------------------------------------------------------------ */

static void fill_result(lh_scan *s, lh_scan_result *res) {
  res->n_rows = s->line.len;
  res->line = LH_VEC_AT(s->line, int64_t);
  res->kind = LH_VEC_AT(s->kind, uint8_t);
  res->timestamp = LH_VEC_AT(s->ts, int64_t);
  res->input_len = LH_VEC_AT(s->input_len, int64_t);
  res->key_offsets = LH_VEC_AT(s->key_off, int64_t);
  res->keys = LH_VEC_AT(s->keys, int64_t);
  res->n_keys = s->keys.len;
  res->id_offsets = LH_VEC_AT(s->id_off, int64_t);
  res->ids = LH_VEC_AT(s->ids, char);
  res->instance = LH_VEC_AT(s->instance, int32_t);
  res->n_instances = s->instances.count;
  res->instance_offsets = LH_VEC_AT(s->instances.offsets, int64_t);
  res->instance_names = LH_VEC_AT(s->instances.bytes, char);
  res->label = LH_VEC_AT(s->label, int32_t);
  res->turn = LH_VEC_AT(s->turn, int64_t);
  res->n_labels = s->labels.count;
  res->label_offsets = LH_VEC_AT(s->labels.offsets, int64_t);
  res->label_names = LH_VEC_AT(s->labels.bytes, char);
}

static void reset_outputs(lh_scan *s) {
  s->line.len = s->kind.len = s->ts.len = s->input_len.len = s->keys.len = 0;
  s->ids.len = s->instance.len = s->label.len = s->turn.len = 0;
  s->key_off.len = s->id_off.len = 1;
  LH_VEC_AT(s->key_off, int64_t)[0] = 0;
  LH_VEC_AT(s->id_off, int64_t)[0] = 0;
  lh_intern_clear(&s->instances); /* empty tables still expose offsets[0] = 0 */
  lh_intern_clear(&s->labels);
}

int lh_scan_chunk(lh_scan *s, int format, const char *buf, size_t len, int64_t first_line,
                  int64_t trace_block_size, lh_scan_result *res, char *err, size_t errlen) {
  memset(res, 0, sizeof *res);
  const format_def *def;
  switch (format) {
    case LH_FMT_STANDARD: def = &STANDARD; break;
    case LH_FMT_MOONCAKE: def = &MOONCAKE; break;
    case LH_FMT_QWEN: def = &QWEN; break;
    case LH_FMT_PUBLISHER: def = &PUBLISHER; break;
    default: return lh_fail(err, errlen, LH_EINVAL, "unknown trace format code %d", format);
  }
  if (trace_block_size <= 0) return lh_fail(err, errlen, LH_EINVAL, "trace block size must be positive");
  if (lh_vec_reserve(&s->key_off, 1, sizeof(int64_t)) || lh_vec_reserve(&s->id_off, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->instances.offsets, 1, sizeof(int64_t)) || lh_vec_reserve(&s->labels.offsets, 1, sizeof(int64_t))) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory scanning a trace chunk");
  }
  reset_outputs(s);
  row *r = malloc(sizeof(row));
  if (r == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory scanning a trace chunk");
  const char *p = buf, *end = buf + len;
  int64_t line = first_line;
  int status = LH_OK;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = nl ? nl : end;
    res->lines++;
    const char *q = p;
    while (q < line_end && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
    if (q < line_end) {
      memset(r->f, 0, sizeof r->f);
      r->msg[0] = '\0';
      r->keys_start = s->keys.len;
      s->str.len = 0;
      cursor c = {p, p, line_end, NULL, NULL, 0};
      int st = parse_object(&c, s, def, r);
      if (st == 0) {
        switch (format) {
          case LH_FMT_STANDARD: st = row_standard(s, r, line); break;
          case LH_FMT_MOONCAKE: st = row_mooncake(s, r, line, trace_block_size); break;
          case LH_FMT_QWEN: st = row_qwen(s, r, line, trace_block_size); break;
          default: st = row_publisher(s, r, line); break;
        }
        if (st == 1) st = 0;
      } else if (st == -1) {
        snprintf(r->msg, sizeof r->msg, "invalid JSON: %s at column %lld", c.error,
                 (long long)(c.error_at - c.begin) + 1);
      }
      if (st != 0) {
        s->keys.len = r->keys_start;
        res->error_line = line;
        status = st == -2 ? lh_fail(err, errlen, LH_ENOMEM, "out of memory scanning a trace chunk")
                          : lh_fail(err, errlen, LH_EPARSE, "%s", r->msg);
        break;
      }
    }
    line++;
    p = nl ? nl + 1 : end;
  }
  free(r);
  fill_result(s, res);
  return status;
}
