/* lh_text.h - internal: the byte-level text helpers every parser and renderer shares.
 *
 * Not part of the Python-facing API (build_ffi.py lists it as internal). Everything here is a
 * small static inline function over a [p, end) byte range or a caller-owned output buffer: no
 * allocation, no failure, no locale (the C-locale character classes are spelled out).
 */
#ifndef LH_TEXT_H
#define LH_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define LH_MAX_INT_CHARS 20 /* "-9223372036854775808", "18446744073709551615" */

/* JSON whitespace (RFC 8259): space, tab, CR, LF. */
static inline int lh_is_json_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

/* isspace() in the C locale: space, tab, LF, VT, FF, CR. */
static inline int lh_is_c_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* The value of a decimal digit, or a number > 9 for any other byte. */
static inline unsigned lh_digit_value(char c) { return (unsigned)(unsigned char)c - '0'; }

static inline int lh_is_digit(char c) { return c >= '0' && c <= '9'; }

static inline const char *lh_skip_json_space(const char *p, const char *end) {
  while (p < end && lh_is_json_space(*p)) p++;
  return p;
}

static inline const char *lh_skip_c_space(const char *p, const char *end) {
  while (p < end && lh_is_c_space(*p)) p++;
  return p;
}

static inline const char *lh_skip_digits(const char *p, const char *end) {
  while (p < end && lh_is_digit(*p)) p++;
  return p;
}

/* The line that starts at *p (< end): returns where it ends (its '\n', or end) and moves *p to
 * the start of the next line. */
static inline const char *lh_take_line(const char **p, const char *end) {
  const char *nl = memchr(*p, '\n', (size_t)(end - *p));
  *p = nl ? nl + 1 : end;
  return nl ? nl : end;
}

/* Whether s[0..n) (which may hold NUL bytes) equals the NUL-terminated lit. Reads no byte of
 * lit past its terminator. */
static inline int lh_text_is(const char *lit, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (lit[i] != s[i] || lit[i] == '\0') return 0;
  }
  return lit[n] == '\0';
}

/* Consumes every decimal digit at *pp (none is fine: *out = 0) and stores their value in *out.
 * Returns 1 when the value exceeds UINT64_MAX (all digits are still consumed; *out is then
 * meaningless), 0 otherwise. */
static inline int lh_parse_digits(const char **pp, const char *end, uint64_t *out) {
  const char *p = *pp;
  const char *fits = end - p > 19 ? p + 19 : end; /* any 19 digits fit in 64 bits */
  uint64_t v = 0;
  int overflow = 0;
  for (; p < fits; p++) {
    unsigned d = lh_digit_value(*p);
    if (d > 9) goto done;
    v = v * 10 + d;
  }
  for (; p < end; p++) { /* the 20th digit on may overflow */
    unsigned d = lh_digit_value(*p);
    if (d > 9) break;
    if (v > (UINT64_MAX - d) / 10) overflow = 1;
    else v = v * 10 + d;
  }
done:
  *pp = p;
  *out = v;
  return overflow;
}

/* Writes v in decimal to out (room for LH_MAX_INT_CHARS bytes); returns the length. No NUL. */
static inline size_t lh_put_u64(char *out, uint64_t v) {
  char tmp[LH_MAX_INT_CHARS];
  size_t k = 0, n = 0;
  do {
    tmp[k++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (k) out[n++] = tmp[--k];
  return n;
}

/* Writes v in decimal to out (room for LH_MAX_INT_CHARS bytes); returns the length. No NUL. */
static inline size_t lh_put_i64(char *out, int64_t v) {
  if (v >= 0) return lh_put_u64(out, (uint64_t)v);
  out[0] = '-';
  return 1 + lh_put_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

/* Copies the NUL-terminated s to out without the NUL; returns its length. */
static inline size_t lh_put_lit(char *out, const char *s) {
  size_t n = strlen(s);
  memcpy(out, s, n);
  return n;
}

#endif
