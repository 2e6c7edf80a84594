/* lh_query.c - facts CSV parsing, batch projection and the facts-query JSONL rows. */
#include "lh_query.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_buf.h"
#include "lh_common.h"
#include "lh_lane.h"
#include "lh_project.h"

struct lh_facts_reader {
  lh_vec line, id_off, ids, instance, ts, len, bs, bb, seg_off, segs, blocks, cut;
  lh_intern instances;
  lh_vec field; /* scratch: one unescaped field */
};

int lh_facts_reader_create(lh_facts_reader **out, char *err, size_t errlen) {
  lh_facts_reader *r = calloc(1, sizeof *r);
  if (r == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a facts reader");
  *out = r;
  return LH_OK;
}

void lh_facts_reader_destroy(lh_facts_reader *r) {
  if (r == NULL) return;
  lh_vec *all[] = {&r->line, &r->id_off, &r->ids, &r->instance, &r->ts,     &r->len,   &r->bs,
                   &r->bb,   &r->seg_off, &r->segs, &r->blocks, &r->cut, &r->field};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->data);
  lh_intern_free(&r->instances);
  free(r);
}

/* ---- one row ----------------------------------------------------------------------------- */

#define MAX_FIELDS 9

typedef struct span {
  const char *p;
  size_t n;
  int quoted;
} span;

typedef struct row_ctx {
  char msg[LH_ERR_LEN];
} row_ctx;

#define FAIL(ctx, ...) (snprintf((ctx)->msg, sizeof (ctx)->msg, __VA_ARGS__), -1)

/* Splits a line into fields honouring double quotes. Quoted fields are unescaped into
 * r->field (spans then point there). Returns the field count, or -1 with ctx->msg. */
static int split(lh_facts_reader *r, const char *p, const char *end, span *fields, int max, row_ctx *ctx) {
  r->field.len = 0;
  if (lh_vec_reserve(&r->field, (size_t)(end - p), 1)) return FAIL(ctx, "out of memory");
  char *scratch = LH_VEC_AT(r->field, char);
  int n = 0;
  for (;;) {
    span f = {p, 0, 0};
    if (p < end && *p == '"') {
      f.quoted = 1;
      f.p = scratch + r->field.len;
      p++;
      for (;;) {
        if (p >= end) return FAIL(ctx, "unterminated quoted field");
        if (*p == '"') {
          if (p + 1 < end && p[1] == '"') {
            scratch[r->field.len++] = '"';
            p += 2;
            continue;
          }
          p++;
          break;
        }
        scratch[r->field.len++] = *p++;
      }
      f.n = (size_t)(scratch + r->field.len - f.p);
      if (p < end && *p != ',') return FAIL(ctx, "unexpected character after a quoted field");
    } else {
      while (p < end && *p != ',') {
        if (*p == '"') return FAIL(ctx, "unexpected quote inside an unquoted field");
        p++;
      }
      f.n = (size_t)(p - f.p);
    }
    if (n < max) fields[n] = f;
    n++;
    if (p >= end) break;
    p++; /* the comma */
  }
  return n;
}

/* strtoll/strtoull-like: optional leading whitespace and sign, digits to the end of the field. */
static int parse_int_field(const span *f, const char *name, int is_unsigned, int64_t *out, row_ctx *ctx) {
  const char *p = f->p, *end = f->p + f->n;
  if (f->n == 0) return FAIL(ctx, "%s is empty", name);
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\v' || *p == '\f' || *p == '\r')) p++;
  int neg = 0;
  if (p < end && (*p == '+' || *p == '-')) neg = *p++ == '-';
  const char *digits = p;
  uint64_t v = 0;
  int overflow = 0;
  while (p < end && *p >= '0' && *p <= '9') {
    unsigned d = (unsigned)(*p++ - '0');
    if (v > (UINT64_MAX - d) / 10) overflow = 1;
    else v = v * 10 + d;
  }
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  if (p == digits || p != end || overflow || v > limit || (is_unsigned && neg && v != 0)) {
    return FAIL(ctx, "%s is not a valid %sinteger: %.*s", name, is_unsigned ? "unsigned " : "",
                (int)(f->n > 64 ? 64 : f->n), f->p);
  }
  *out = neg ? (v == limit ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  return 0;
}

static const char *skip_ws(const char *p, const char *end) {
  while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')) p++;
  return p;
}

static int curve_int(const char **pp, const char *end, int64_t *out) {
  const char *p = *pp;
  uint64_t v = 0;
  const char *start = p;
  while (p < end && *p >= '0' && *p <= '9') {
    v = v * 10 + (uint64_t)(*p++ - '0');
    if (v > (uint64_t)INT64_MAX) return -1;
  }
  if (p == start) return -1;
  *out = (int64_t)v;
  *pp = p;
  return 0;
}

/* The hit_curve JSON: [[start,run],...] with optional whitespace; appends segments. */
static int parse_curve(lh_facts_reader *r, const span *f, row_ctx *ctx) {
  const char *p = f->p, *end = f->p + f->n;
  p = skip_ws(p, end);
  if (p >= end || *p != '[') return FAIL(ctx, "hit_curve must start with '['");
  p = skip_ws(p + 1, end);
  if (p < end && *p == ']') {
    p = skip_ws(p + 1, end);
    return p == end ? 0 : FAIL(ctx, "hit_curve has trailing characters");
  }
  for (;;) {
    if (p >= end || *p != '[') return FAIL(ctx, "hit_curve segment must start with '['");
    int64_t start, run;
    p = skip_ws(p + 1, end);
    if (curve_int(&p, end, &start)) return FAIL(ctx, "hit_curve segment start is not a valid integer");
    p = skip_ws(p, end);
    if (p >= end || *p != ',') return FAIL(ctx, "hit_curve segment expects ','");
    p = skip_ws(p + 1, end);
    if (curve_int(&p, end, &run)) return FAIL(ctx, "hit_curve segment length is not a valid integer");
    p = skip_ws(p, end);
    if (p >= end || *p != ']') return FAIL(ctx, "hit_curve segment must end with ']'");
    if (lh_vec_reserve(&r->segs, 2, sizeof(int64_t))) return FAIL(ctx, "out of memory");
    int64_t *segs = LH_VEC_AT(r->segs, int64_t);
    segs[r->segs.len++] = start;
    segs[r->segs.len++] = run;
    p = skip_ws(p + 1, end);
    if (p < end && *p == ',') {
      p = skip_ws(p + 1, end);
      continue;
    }
    if (p >= end || *p != ']') return FAIL(ctx, "hit_curve must end with ']'");
    p = skip_ws(p + 1, end);
    return p == end ? 0 : FAIL(ctx, "hit_curve has trailing characters");
  }
}

static int parse_row(lh_facts_reader *r, const char *p, const char *end, int64_t line, int extended, row_ctx *ctx) {
  span f[MAX_FIELDS];
  int want = extended ? 9 : 7;
  int n = split(r, p, end, f, MAX_FIELDS, ctx);
  if (n < 0) return -1;
  if (n != want) return FAIL(ctx, "expected %d fields, got %d", want, n);
  int64_t ts, len, bs, bb, blocks = 0;
  if (parse_int_field(&f[2], "timestamp_ns", 0, &ts, ctx) || parse_int_field(&f[3], "input_token_len", 1, &len, ctx) ||
      parse_int_field(&f[4], "block_size_tokens", 1, &bs, ctx) || parse_int_field(&f[5], "block_bytes", 1, &bb, ctx)) {
    return -1;
  }
  size_t seg_start = r->segs.len;
  if (parse_curve(r, &f[6], ctx)) return -1;
  if (bb == 0 || bs == 0) return FAIL(ctx, "block_bytes/block_size_tokens must be positive");
  uint8_t cut = LH_CUT_NONE;
  if (extended) {
    if (parse_int_field(&f[7], "complete_blocks", 1, &blocks, ctx)) return -1;
    const span *c = &f[8];
    if (c->n == 4 && memcmp(c->p, "none", 4) == 0) cut = LH_CUT_NONE;
    else if (c->n == 4 && memcmp(c->p, "cold", 4) == 0) cut = LH_CUT_COLD;
    else if (c->n == 7 && memcmp(c->p, "expired", 7) == 0) cut = LH_CUT_EXPIRED;
    else return FAIL(ctx, "cut_reason must be none, cold or expired: %.*s", (int)(c->n > 32 ? 32 : c->n), c->p);
  }
  /* Semantic checks: a curve the core could have produced, within the request's blocks. */
  const int64_t *segs = LH_VEC_AT(r->segs, int64_t);
  int64_t prev_end = 0;
  uint64_t hits = 0;
  for (size_t k = seg_start; k < r->segs.len; k += 2) {
    int64_t s = segs[k], run = segs[k + 1];
    if (run < 1) return FAIL(ctx, "hit_curve segment %zu has length %lld (must be >= 1)", (k - seg_start) / 2 + 1, (long long)run);
    if (s < 1 || s <= prev_end) {
      return FAIL(ctx, "hit_curve segment %zu starts at %lld; starts must be >= 1 and leave a gap after the previous segment",
                  (k - seg_start) / 2 + 1, (long long)s);
    }
    if (run > INT64_MAX - s) return FAIL(ctx, "hit_curve segment %zu overflows", (k - seg_start) / 2 + 1);
    prev_end = s + run;
    hits += (uint64_t)run;
  }
  int64_t complete = len / bs;
  if (extended && blocks != complete) {
    return FAIL(ctx, "complete_blocks is %lld but input_token_len / block_size_tokens gives %lld", (long long)blocks,
                (long long)complete);
  }
  if (hits > (uint64_t)complete) {
    return FAIL(ctx, "hit_curve has %llu hit blocks but the request has only %lld complete blocks", (unsigned long long)hits,
                (long long)complete);
  }
  if (extended && (cut == LH_CUT_NONE) != (hits == (uint64_t)complete)) {
    return FAIL(ctx, "cut_reason %s does not match %llu hit blocks of %lld", cut == LH_CUT_NONE ? "none" : "cold/expired",
                (unsigned long long)hits, (long long)complete);
  }
  int32_t inst = lh_intern_get(&r->instances, f[1].p, f[1].n);
  if (inst < 0 || lh_vec_reserve(&r->ids, f[0].n, 1) || lh_vec_reserve(&r->line, 1, 8) || lh_vec_reserve(&r->id_off, 1, 8) ||
      lh_vec_reserve(&r->instance, 1, 4) || lh_vec_reserve(&r->ts, 1, 8) || lh_vec_reserve(&r->len, 1, 8) ||
      lh_vec_reserve(&r->bs, 1, 8) || lh_vec_reserve(&r->bb, 1, 8) || lh_vec_reserve(&r->seg_off, 1, 8) ||
      lh_vec_reserve(&r->blocks, 1, 8) || lh_vec_reserve(&r->cut, 1, 1)) {
    return FAIL(ctx, "out of memory");
  }
  memcpy(LH_VEC_AT(r->ids, char) + r->ids.len, f[0].p, f[0].n);
  r->ids.len += f[0].n;
  size_t i = r->line.len;
  LH_VEC_AT(r->line, int64_t)[i] = line;
  LH_VEC_AT(r->id_off, int64_t)[i + 1] = (int64_t)r->ids.len;
  LH_VEC_AT(r->instance, int32_t)[i] = inst;
  LH_VEC_AT(r->ts, int64_t)[i] = ts;
  LH_VEC_AT(r->len, int64_t)[i] = len;
  LH_VEC_AT(r->bs, int64_t)[i] = bs;
  LH_VEC_AT(r->bb, int64_t)[i] = bb;
  LH_VEC_AT(r->seg_off, int64_t)[i + 1] = (int64_t)(r->segs.len / 2);
  LH_VEC_AT(r->blocks, int64_t)[i] = extended ? blocks : complete;
  LH_VEC_AT(r->cut, uint8_t)[i] = extended ? cut : (hits == (uint64_t)complete ? LH_CUT_NONE : LH_CUT_COLD);
  r->line.len = r->instance.len = r->ts.len = r->len.len = r->bs.len = r->bb.len = r->blocks.len = r->cut.len = i + 1;
  r->id_off.len = r->seg_off.len = i + 2;
  return 0;
}

static void fill_table(lh_facts_reader *r, lh_facts_table *t) {
  t->n_rows = r->line.len;
  t->line = LH_VEC_AT(r->line, int64_t);
  t->id_offsets = LH_VEC_AT(r->id_off, int64_t);
  t->ids = LH_VEC_AT(r->ids, char);
  t->instance = LH_VEC_AT(r->instance, int32_t);
  t->n_instances = r->instances.count;
  t->instance_offsets = LH_VEC_AT(r->instances.offsets, int64_t);
  t->instance_names = LH_VEC_AT(r->instances.bytes, char);
  t->timestamp = LH_VEC_AT(r->ts, int64_t);
  t->input_len = LH_VEC_AT(r->len, int64_t);
  t->block_size = LH_VEC_AT(r->bs, int64_t);
  t->block_bytes = LH_VEC_AT(r->bb, int64_t);
  t->seg_offsets = LH_VEC_AT(r->seg_off, int64_t);
  t->segs = LH_VEC_AT(r->segs, int64_t);
  t->n_segs = r->segs.len / 2;
  t->blocks = LH_VEC_AT(r->blocks, int64_t);
  t->cut = LH_VEC_AT(r->cut, uint8_t);
}

int lh_facts_parse(lh_facts_reader *r, const char *buf, size_t len, int64_t first_line, int extended,
                   lh_facts_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (lh_vec_reserve(&r->id_off, 1, 8) || lh_vec_reserve(&r->seg_off, 1, 8) ||
      lh_vec_reserve(&r->instances.offsets, 1, 8)) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory reading facts");
  }
  r->line.len = r->ids.len = r->instance.len = r->ts.len = r->len.len = r->bs.len = r->bb.len = 0;
  r->segs.len = r->blocks.len = r->cut.len = 0;
  r->id_off.len = r->seg_off.len = 1;
  LH_VEC_AT(r->id_off, int64_t)[0] = 0;
  LH_VEC_AT(r->seg_off, int64_t)[0] = 0;
  lh_intern_clear(&r->instances);
  row_ctx ctx;
  const char *p = buf, *end = buf + len;
  int64_t line = first_line;
  int status = LH_OK;
  while (p < end) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *line_end = nl ? nl : end;
    t->lines++;
    if (line_end > p && line_end[-1] == '\r') line_end--;
    if (line_end > p) {
      size_t segs_before = r->segs.len;
      if (parse_row(r, p, line_end, line, extended, &ctx)) {
        r->segs.len = segs_before;
        t->error_line = line;
        status = strcmp(ctx.msg, "out of memory") == 0 ? lh_fail(err, errlen, LH_ENOMEM, "out of memory reading facts")
                                                       : lh_fail(err, errlen, LH_EPARSE, "%s", ctx.msg);
        break;
      }
    }
    line++;
    p = nl ? nl + 1 : end;
  }
  fill_table(r, t);
  return status;
}

/* ---- %g ---------------------------------------------------------------------------------- */

static const double POW10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Six significant digits of x > 0: m in [100000, 999999] and decimal exponent e with
 * x ~= m * 10^(e-5). Returns 0 when the rounding cannot be decided cheaply. */
static int six_digits(double x, long *m_out, int *e_out) {
  int e = (int)floor(log10(x));
  for (int attempt = 0; attempt < 3; attempt++) {
    int k = 5 - e;
    double t;
    if (k >= 0 && k <= 22) t = x * POW10[k];
    else if (k < 0 && -k <= 22) t = x / POW10[-k];
    else return 0;
    double fl = floor(t);
    double frac = t - fl;
    if (fabs(frac - 0.5) < 1e-6) return 0; /* too close to a tie: let printf decide */
    long m = (long)fl + (frac > 0.5 ? 1 : 0);
    if (m >= 1000000) {
      e++;
      continue;
    }
    if (m < 100000) {
      e--;
      continue;
    }
    *m_out = m;
    *e_out = e;
    return 1;
  }
  return 0;
}

size_t lh_format_g(double v, char *out) {
  long m;
  int e;
  if (!(v > 0.0) || isinf(v) || !six_digits(v, &m, &e)) {
    if (v == 0.0) {
      out[0] = '0';
      out[1] = '\0';
      return 1;
    }
    return (size_t)snprintf(out, 32, "%g", v);
  }
  char d[6];
  for (int i = 5; i >= 0; i--) {
    d[i] = (char)('0' + m % 10);
    m /= 10;
  }
  int nd = 6;
  while (nd > 1 && d[nd - 1] == '0') nd--;
  size_t n = 0;
  if (e >= -4 && e < 6) {
    if (e >= 0) {
      for (int i = 0; i <= e; i++) out[n++] = i < nd ? d[i] : '0';
      if (nd > e + 1) {
        out[n++] = '.';
        for (int i = e + 1; i < nd; i++) out[n++] = d[i];
      }
    } else {
      out[n++] = '0';
      out[n++] = '.';
      for (int i = 0; i < -e - 1; i++) out[n++] = '0';
      for (int i = 0; i < nd; i++) out[n++] = d[i];
    }
  } else {
    out[n++] = d[0];
    if (nd > 1) {
      out[n++] = '.';
      for (int i = 1; i < nd; i++) out[n++] = d[i];
    }
    out[n++] = 'e';
    out[n++] = e < 0 ? '-' : '+';
    int a = e < 0 ? -e : e;
    if (a >= 100) out[n++] = (char)('0' + a / 100);
    out[n++] = (char)('0' + a / 10 % 10);
    out[n++] = (char)('0' + a % 10);
  }
  out[n] = '\0';
  return n;
}

/* ---- query ------------------------------------------------------------------------------- */

static size_t json_escaped_bound(size_t n) { return 2 * n; }

static size_t put_json_string(char *out, const char *s, size_t n) {
  size_t w = 0;
  out[w++] = '"';
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    switch (c) {
      case '"': out[w++] = '\\'; out[w++] = '"'; break;
      case '\\': out[w++] = '\\'; out[w++] = '\\'; break;
      case '\n': out[w++] = '\\'; out[w++] = 'n'; break;
      case '\r': out[w++] = '\\'; out[w++] = 'r'; break;
      case '\t': out[w++] = '\\'; out[w++] = 't'; break;
      default: out[w++] = c;
    }
  }
  out[w++] = '"';
  return w;
}

static size_t put_u64(char *out, uint64_t v) {
  char tmp[24];
  size_t k = 0, n = 0;
  do {
    tmp[k++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (k) out[n++] = tmp[--k];
  return n;
}

static size_t put_i64(char *out, int64_t v) {
  if (v >= 0) return put_u64(out, (uint64_t)v);
  out[0] = '-';
  return 1 + put_u64(out + 1, (uint64_t)0 - (uint64_t)v);
}

static size_t put_lit(char *out, const char *s) {
  size_t n = strlen(s);
  memcpy(out, s, n);
  return n;
}

size_t lh_query_row_bound(const lh_facts_table *t, size_t r, size_t n_slots) {
  size_t id = (size_t)(t->id_offsets[r + 1] - t->id_offsets[r]);
  int32_t i = t->instance[r];
  size_t inst = (size_t)(t->instance_offsets[i + 1] - t->instance_offsets[i]);
  return json_escaped_bound(id) + json_escaped_bound(inst) + 160 + n_slots * (24 + 34);
}

int lh_query_chunk(const lh_facts_table *t, size_t row_lo, const uint64_t *slot_bytes, const uint8_t *slot_inf,
                   size_t n_slots, const int32_t *group, uint64_t *sum_blocks, uint64_t *sum_tokens,
                   uint64_t *requests, uint64_t *input_tokens, char *out, size_t cap, size_t *written,
                   size_t *rows_done, char *err, size_t errlen) {
  char *w = out;
  uint64_t hits_stack[64];
  uint64_t *hits = n_slots <= 64 ? hits_stack : malloc(n_slots * sizeof(uint64_t));
  if (hits == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory projecting facts");
  size_t r = row_lo;
  for (; r < t->n_rows; r++) {
    if (out != NULL && (size_t)(w - out) + lh_query_row_bound(t, r, n_slots) > cap) break;
    const int64_t *segs = t->segs + 2 * t->seg_offsets[r];
    size_t nseg = (size_t)(t->seg_offsets[r + 1] - t->seg_offsets[r]);
    uint64_t bb = (uint64_t)t->block_bytes[r], bs = (uint64_t)t->block_size[r];
    int32_t g = group[r];
    for (size_t s = 0; s < n_slots; s++) {
      hits[s] = slot_inf[s] ? lh_project_infinite(segs, nseg) : lh_project_bytes(segs, nseg, slot_bytes[s], bb);
      sum_blocks[(size_t)g * n_slots + s] += hits[s];
      sum_tokens[(size_t)g * n_slots + s] += hits[s] * bs;
    }
    requests[g] += 1;
    input_tokens[g] += (uint64_t)t->input_len[r];
    if (out == NULL) continue;
    int32_t inst = t->instance[r];
    w += put_lit(w, "{\"trace_id\":");
    w += put_json_string(w, t->ids + t->id_offsets[r], (size_t)(t->id_offsets[r + 1] - t->id_offsets[r]));
    w += put_lit(w, ",\"instance_id\":");
    w += put_json_string(w, t->instance_names + t->instance_offsets[inst],
                         (size_t)(t->instance_offsets[inst + 1] - t->instance_offsets[inst]));
    w += put_lit(w, ",\"timestamp_ns\":");
    w += put_i64(w, t->timestamp[r]);
    w += put_lit(w, ",\"input_token_len\":");
    w += put_i64(w, t->input_len[r]);
    w += put_lit(w, ",\"hit_blocks\":[");
    for (size_t s = 0; s < n_slots; s++) {
      if (s) *w++ = ',';
      w += put_u64(w, hits[s]);
    }
    w += put_lit(w, "],\"hit_rates\":[");
    const char *prev = NULL; /* a step function: neighbouring slots often share a value */
    size_t prev_len = 0;
    for (size_t s = 0; s < n_slots; s++) {
      if (s) *w++ = ',';
      if (prev != NULL && hits[s] == hits[s - 1]) {
        memcpy(w, prev, prev_len);
      } else {
        double rate = t->input_len[r] > 0 ? (double)(hits[s] * bs) / (double)t->input_len[r] : 0.0;
        prev_len = lh_format_g(rate, w);
      }
      prev = w;
      w += prev_len;
    }
    w += put_lit(w, "]}\n");
  }
  if (hits != hits_stack) free(hits);
  if (written != NULL) *written = (size_t)(w - out);
  *rows_done = r;
  return LH_OK;
}
