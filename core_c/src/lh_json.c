/* lh_json.c - the strict JSON lexer behind the trace scanner (see lh_json.h).
 *
 * A recursive-descent validator: strings are decoded (escapes, surrogate pairs, UTF-8 checked),
 * numbers are classified, containers are skipped or, for arrays of one element kind, checked
 * element by element. Positions of the first syntax error are kept for the caller's message.
 *
 * The work is done by static functions that call each other directly; the exported lh_json_*
 * entry points at the end only forward to them. (An exported function of a -fPIC library may be
 * interposed, so the compiler neither inlines nor directly calls it: the per-element calls of
 * the hot key arrays must stay static. Scan throughput was measured against the single-file
 * scanner this replaced: equal on Mooncake traces, faster on event logs.)
 */
#include "lh_json.h"

#include <stdlib.h>
#include <string.h>

static int syntax(lh_json_cursor *c, const char *what) {
  if (c->error == NULL) {
    c->error = what;
    c->error_at = c->p;
  }
  return -1;
}

/* ---- strings ----------------------------------------------------------------------------- */

static int hexval(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static int read_hex4(lh_json_cursor *c, unsigned *out) {
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

/* The code point of the escape after a backslash (c->p is past the backslash). */
static int read_escape(lh_json_cursor *c, unsigned *cp) {
  if (c->p >= c->end) return syntax(c, "unterminated string");
  char e = *c->p++;
  switch (e) {
    case '"': *cp = '"'; return 0;
    case '\\': *cp = '\\'; return 0;
    case '/': *cp = '/'; return 0;
    case 'b': *cp = '\b'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'u': break;
    default: return syntax(c, "bad escape in string");
  }
  if (read_hex4(c, cp)) return -1;
  if (*cp >= 0xDC00 && *cp <= 0xDFFF) return syntax(c, "lone low surrogate in \\u escape");
  if (*cp >= 0xD800 && *cp <= 0xDBFF) {
    unsigned lo;
    if (c->end - c->p < 2 || c->p[0] != '\\' || c->p[1] != 'u') {
      return syntax(c, "lone high surrogate in \\u escape");
    }
    c->p += 2;
    if (read_hex4(c, &lo)) return -1;
    if (lo < 0xDC00 || lo > 0xDFFF) return syntax(c, "bad surrogate pair in \\u escape");
    *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
  }
  return 0;
}

static int read_string(lh_json_cursor *c, lh_vec *out, size_t *off, size_t *len) {
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
  char *dst = out != NULL ? LH_VEC_AT(*out, char) + out->len : NULL;
  if (dst != NULL && c->p > start) memcpy(dst, start, (size_t)(c->p - start));
  size_t n = (size_t)(c->p - start);
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
      unsigned cp;
      if (read_escape(c, &cp)) return -1;
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

/* ---- numbers ----------------------------------------------------------------------------- */

static int read_number(lh_json_cursor *c, lh_json_number *num) {
  const char *s = c->p;
  int neg = 0;
  if (c->p < c->end && *c->p == '-') {
    neg = 1;
    c->p++;
  }
  if (c->p >= c->end || !lh_is_digit(*c->p)) return syntax(c, "bad number");
  uint64_t mag = 0;
  int overflow = 0;
  if (*c->p == '0') {
    c->p++; /* no leading zeros: a digit after it ends the number */
  } else {
    overflow = lh_parse_digits(&c->p, c->end, &mag);
  }
  int is_float = 0;
  if (c->p < c->end && *c->p == '.') {
    is_float = 1;
    c->p++;
    if (c->p >= c->end || !lh_is_digit(*c->p)) return syntax(c, "bad number");
    c->p = lh_skip_digits(c->p, c->end);
  }
  if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
    is_float = 1;
    c->p++;
    if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
    if (c->p >= c->end || !lh_is_digit(*c->p)) return syntax(c, "bad number");
    c->p = lh_skip_digits(c->p, c->end);
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
    num->kind = LH_J_FLOAT;
  } else if (overflow) {
    num->kind = LH_J_BIGINT;
  } else if (neg) {
    if (mag > (uint64_t)INT64_MAX + 1) {
      num->kind = LH_J_BIGINT;
    } else {
      num->kind = LH_J_INT;
      num->i = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    }
  } else if (mag > (uint64_t)INT64_MAX) {
    num->kind = LH_J_UINT;
    num->i = -(int64_t)(~mag) - 1; /* two's complement reinterpretation */
  } else {
    num->kind = LH_J_INT;
    num->i = (int64_t)mag;
  }
  return 0;
}

/* ---- containers -------------------------------------------------------------------------- */

static int open_container(lh_json_cursor *c, char close) {
  if (++c->depth > LH_JSON_MAX_DEPTH) return syntax(c, "nesting too deep");
  c->p++;
  lh_json_skip_space(c);
  if (c->p < c->end && *c->p == close) {
    c->p++;
    c->depth--;
    return 0;
  }
  return 1;
}

static int next_element(lh_json_cursor *c, char close) {
  lh_json_skip_space(c);
  if (c->p < c->end && *c->p == ',') {
    c->p++;
    return 1;
  }
  if (c->p < c->end && *c->p == close) {
    c->p++;
    c->depth--;
    return 0;
  }
  return syntax(c, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
}

static int member_name(lh_json_cursor *c, lh_vec *out, size_t *off, size_t *len) {
  lh_json_skip_space(c);
  if (c->p >= c->end || *c->p != '"') return syntax(c, "expected a field name");
  int st = read_string(c, out, off, len);
  if (st) return st;
  lh_json_skip_space(c);
  if (c->p >= c->end || *c->p != ':') return syntax(c, "expected ':'");
  c->p++;
  lh_json_skip_space(c);
  return 0;
}

static int skip_value(lh_json_cursor *c);

static int expect_literal(lh_json_cursor *c, const char *lit, size_t n) {
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0) return syntax(c, "unexpected token");
  c->p += n;
  return 0;
}

static int skip_container(lh_json_cursor *c, char close) {
  int more = open_container(c, close);
  while (more > 0) {
    int st = close == '}' ? member_name(c, NULL, NULL, NULL) : 0;
    if (st) return st;
    lh_json_skip_space(c);
    st = skip_value(c);
    if (st) return st;
    more = next_element(c, close);
  }
  return more;
}

static int skip_value(lh_json_cursor *c) {
  lh_json_number num;
  switch (lh_json_peek(c)) {
    case LH_J_STRING: return read_string(c, NULL, NULL, NULL);
    case LH_J_OBJECT: return skip_container(c, '}');
    case LH_J_ARRAY: return skip_container(c, ']');
    case LH_J_BOOL: return *c->p == 't' ? expect_literal(c, "true", 4) : expect_literal(c, "false", 5);
    case LH_J_NULL: return expect_literal(c, "null", 4);
    case LH_J_INT: return read_number(c, &num);
    default: return syntax(c, c->p >= c->end ? "unexpected end of line" : "unexpected character");
  }
}

static void mark_bad(lh_json_array *info, size_t index, int kind) {
  if (!info->elem_ok) return;
  info->elem_ok = 0;
  info->bad_index = index;
  info->bad_kind = kind;
}

/* The common block key, 1 to 18 digits without a leading zero and not followed by a fraction or
 * an exponent, appended to ints: returns 1 (c->p past it), else 0 with nothing consumed, and
 * read_number reads it (the same value when it is one of these: this path only skips the
 * classification). 0 also when ints cannot grow (read_number's path reports that). */
static inline int short_int(lh_json_cursor *c, lh_vec *ints) {
  const char *p = c->p, *end = c->end;
  if (p == end || (unsigned char)(*p - '1') > 8) return 0;
  const char *fits = end - p > 18 ? p + 18 : end; /* 18 digits are below 10^18 < 2^63 */
  uint64_t v = (uint64_t)(*p++ - '0');
  while (p < fits && lh_is_digit(*p)) v = v * 10 + (uint64_t)(*p++ - '0');
  if (p < end && (lh_is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E')) return 0;
  if (ints->len == ints->cap && lh_vec_reserve(ints, 1, sizeof(int64_t))) return 0;
  LH_VEC_AT(*ints, int64_t)[ints->len++] = (int64_t)v;
  c->p = p;
  return 1;
}

static int array_of(lh_json_cursor *c, int want, lh_vec *ints, lh_json_array *info) {
  info->elem_ok = 1;
  info->n_ints = 0;
  int more = open_container(c, ']');
  for (size_t index = 0; more > 0; index++) {
    lh_json_skip_space(c);
    if (ints != NULL && short_int(c, ints)) {
      info->n_ints++;
      more = next_element(c, ']');
      continue;
    }
    int k = lh_json_peek(c);
    if (ints != NULL && k == LH_J_INT) {
      /* Hot path (block keys): plain decimal integers straight into the caller's column. */
      lh_json_number num;
      int st = read_number(c, &num);
      if (st) return st;
      if (num.kind == LH_J_INT || num.kind == LH_J_UINT) {
        if (ints->len == ints->cap && lh_vec_reserve(ints, 1, sizeof(int64_t))) return -2;
        LH_VEC_AT(*ints, int64_t)[ints->len++] = num.i;
        info->n_ints++;
      } else {
        mark_bad(info, index, num.kind);
      }
    } else {
      if (k != want) mark_bad(info, index, k);
      int st = lh_json_skip_value(c); /* not inlined: keeps this rare case out of the key loop */
      if (st) return st;
    }
    more = next_element(c, ']');
  }
  return more;
}

const char *lh_json_kind_name(int kind) {
  switch (kind) {
    case LH_J_STRING: return "a string";
    case LH_J_INT:
    case LH_J_UINT: return "an integer";
    case LH_J_BIGINT: return "an integer out of the 64-bit range";
    case LH_J_FLOAT: return "a non-integer number";
    case LH_J_BOOL: return "a boolean";
    case LH_J_NULL: return "null";
    case LH_J_ARRAY: return "an array";
    case LH_J_OBJECT: return "an object";
    default: return "missing";
  }
}

/* ---- the exported entry points ----------------------------------------------------------- */

int lh_json_error(lh_json_cursor *c, const char *what) { return syntax(c, what); }

int lh_json_read_string(lh_json_cursor *c, lh_vec *out, size_t *off, size_t *len) {
  return read_string(c, out, off, len);
}

int lh_json_read_number(lh_json_cursor *c, lh_json_number *num) { return read_number(c, num); }

int lh_json_skip_value(lh_json_cursor *c) { return skip_value(c); }

int lh_json_open(lh_json_cursor *c, char close) { return open_container(c, close); }

int lh_json_next(lh_json_cursor *c, char close) { return next_element(c, close); }

int lh_json_member_name(lh_json_cursor *c, lh_vec *out, size_t *off, size_t *len) {
  return member_name(c, out, off, len);
}

int lh_json_array_of(lh_json_cursor *c, int want, lh_vec *ints, lh_json_array *info) {
  return array_of(c, want, ints, info);
}
