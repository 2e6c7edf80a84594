/* lh_facts_parse.c - reading facts CSV rows into columns (see lh_facts.h).
 *
 * A row is split honouring double quotes, its integers are read like strtoll/strtoull, its
 * hit_curve JSON is read into (start, run) pairs, and the curve is checked against what the
 * lane core can produce (increasing gapped starts, runs >= 1, no more hits than complete blocks,
 * extended columns consistent with the curve).
 */
#include "lh_facts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_buf.h"
#include "lh_common.h"
#include "lh_lane.h"
#include "lh_text.h"

struct lh_facts_reader {
  lh_vec line, id_off, ids, instance, ts, len, bs, bb, seg_off, segs, blocks, cut, step;
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
  lh_vec *all[] = {&r->line, &r->id_off,  &r->ids,  &r->instance, &r->ts,  &r->len,  &r->bs,
                   &r->bb,   &r->seg_off, &r->segs, &r->blocks,   &r->cut, &r->step, &r->field};
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

#define FAIL(ctx, ...) (snprintf((ctx)->msg, sizeof(ctx)->msg, __VA_ARGS__), -1)

/* The text of one row: its current line (a quoted field may run on to the next ones). */
typedef struct row_text {
  const char *end;     /* the end of the current line, a CR before its line break excluded */
  const char *next;    /* where the line after it starts (buf_end when none does) */
  const char *buf_end; /* the end of the buffer */
  int more;            /* more text follows buf_end (a row open there continues in it) */
  int64_t breaks;      /* line breaks inside quoted fields of the row so far */
} row_text;

#define ROW_OPEN (-2) /* a quoted field is still open where the buffer ends */

static void line_at(row_text *t, const char *start) {
  const char *nl = memchr(start, '\n', (size_t)(t->buf_end - start));
  t->next = nl ? nl + 1 : t->buf_end;
  t->end = nl ? nl : t->buf_end;
  if (t->end > start && t->end[-1] == '\r') t->end--;
}

/* Splits the row starting at p into fields honouring double quotes: "" inside quotes is a quote,
 * and a quoted field may hold line breaks (the writer quotes a field holding CR or LF), so the
 * row then spans several lines of t. Quoted fields are unescaped into r->field (spans then point
 * there). Returns the field count; -1 with ctx->msg; ROW_OPEN when a quoted field is open at the
 * end of the buffer and t->more (without more text that is an unterminated quoted field). */
static int split(lh_facts_reader *r, const char *p, row_text *t, span *fields, int max, row_ctx *ctx) {
  r->field.len = 0; /* room for the rest of the buffer: spans into it stay valid */
  if (lh_vec_reserve(&r->field, (size_t)(t->buf_end - p), 1)) return FAIL(ctx, "out of memory");
  char *scratch = LH_VEC_AT(r->field, char);
  int n = 0;
  for (;;) {
    span f = {p, 0, 0};
    if (p < t->end && *p == '"') {
      f.quoted = 1;
      f.p = scratch + r->field.len;
      p++;
      for (;;) {
        if (p >= t->end) {
          if (t->next == t->buf_end) return t->more ? ROW_OPEN : FAIL(ctx, "unterminated quoted field");
          while (p < t->next) scratch[r->field.len++] = *p++; /* the line break (CR LF or LF) */
          line_at(t, p);
          t->breaks++;
          continue;
        }
        if (*p == '"') {
          if (p + 1 < t->end && p[1] == '"') {
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
      if (p < t->end && *p != ',') return FAIL(ctx, "unexpected character after a quoted field");
    } else {
      while (p < t->end && *p != ',') {
        if (*p == '"') return FAIL(ctx, "unexpected quote inside an unquoted field");
        p++;
      }
      f.n = (size_t)(p - f.p);
    }
    if (n < max) fields[n] = f;
    n++;
    if (p >= t->end) break;
    p++; /* the comma */
  }
  return n;
}

/* strtoll/strtoull-like: optional leading whitespace and sign, digits to the end of the field. */
static int parse_int_field(const span *f, const char *name, int is_unsigned, int64_t *out, row_ctx *ctx) {
  const char *p = f->p, *end = f->p + f->n;
  if (f->n == 0) return FAIL(ctx, "%s is empty", name);
  p = lh_skip_c_space(p, end);
  int neg = 0;
  if (p < end && (*p == '+' || *p == '-')) neg = *p++ == '-';
  const char *digits = p;
  uint64_t v = 0;
  int overflow = lh_parse_digits(&p, end, &v);
  uint64_t limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  if (p == digits || p != end || overflow || v > limit || (is_unsigned && neg && v != 0)) {
    return FAIL(ctx, "%s is not a valid %sinteger: %.*s", name, is_unsigned ? "unsigned " : "",
                (int)(f->n > 64 ? 64 : f->n), f->p);
  }
  *out = neg ? (v == limit ? INT64_MIN : -(int64_t)v) : (int64_t)v;
  return 0;
}

/* A non-negative integer of the hit curve: digits only, no sign, at most `limit`. 0 or -1. */
static int curve_int(const char **pp, const char *end, uint64_t limit, int64_t *out) {
  const char *start = *pp;
  uint64_t v = 0;
  if (lh_parse_digits(pp, end, &v) || *pp == start || v > limit) return -1;
  *out = (int64_t)v; /* a byte-step threshold above INT64_MAX keeps its uint64 bits */
  return 0;
}

/* The tag of a hit_curve field (an exact prefix, HYBRID_G5.md 3.3): sets *step and skips it. */
static void curve_tag(span *f, uint8_t *step) {
  static const struct {
    const char *tag;
    uint8_t step;
  } tags[] = {{"bytes:", 1}, {"mamba:", 1}, {"rle:", 0}};
  *step = 0;
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++) {
    size_t n = strlen(tags[i].tag);
    if (f->n >= n && memcmp(f->p, tags[i].tag, n) == 0) {
      *step = tags[i].step;
      f->p += n;
      f->n -= n;
      return;
    }
  }
}

/* The hit_curve JSON: [[start,run],...] (byte-step rows: [[threshold,hit_blocks],...]) with
 * optional whitespace; appends the pairs. */
static int parse_curve(lh_facts_reader *r, const span *f, int steps, row_ctx *ctx) {
  const char *p = f->p, *end = f->p + f->n;
  uint64_t first_limit = steps ? UINT64_MAX : (uint64_t)INT64_MAX;
  p = lh_skip_c_space(p, end);
  if (p >= end || *p != '[') return FAIL(ctx, "hit_curve must start with '['");
  p = lh_skip_c_space(p + 1, end);
  if (p < end && *p == ']') {
    p = lh_skip_c_space(p + 1, end);
    return p == end ? 0 : FAIL(ctx, "hit_curve has trailing characters");
  }
  for (;;) {
    if (p >= end || *p != '[') return FAIL(ctx, "hit_curve segment must start with '['");
    int64_t start, run;
    p = lh_skip_c_space(p + 1, end);
    if (curve_int(&p, end, first_limit, &start)) return FAIL(ctx, "hit_curve segment start is not a valid integer");
    p = lh_skip_c_space(p, end);
    if (p >= end || *p != ',') return FAIL(ctx, "hit_curve segment expects ','");
    p = lh_skip_c_space(p + 1, end);
    if (curve_int(&p, end, (uint64_t)INT64_MAX, &run)) {
      return FAIL(ctx, "hit_curve segment length is not a valid integer");
    }
    p = lh_skip_c_space(p, end);
    if (p >= end || *p != ']') return FAIL(ctx, "hit_curve segment must end with ']'");
    if (lh_vec_reserve(&r->segs, 2, sizeof(int64_t))) return FAIL(ctx, "out of memory");
    int64_t *segs = LH_VEC_AT(r->segs, int64_t);
    segs[r->segs.len++] = start;
    segs[r->segs.len++] = run;
    p = lh_skip_c_space(p + 1, end);
    if (p < end && *p == ',') {
      p = lh_skip_c_space(p + 1, end);
      continue;
    }
    if (p >= end || *p != ']') return FAIL(ctx, "hit_curve must end with ']'");
    p = lh_skip_c_space(p + 1, end);
    return p == end ? 0 : FAIL(ctx, "hit_curve has trailing characters");
  }
}

static int parse_row(lh_facts_reader *r, const char *p, row_text *t, int64_t line, int extended, row_ctx *ctx) {
  span f[MAX_FIELDS];
  int want = extended ? 9 : 7;
  int n = split(r, p, t, f, MAX_FIELDS, ctx);
  if (n < 0) return n;
  if (n != want) return FAIL(ctx, "expected %d fields, got %d", want, n);
  int64_t ts, len, bs, bb, blocks = 0;
  if (parse_int_field(&f[2], "timestamp_ns", 0, &ts, ctx) || parse_int_field(&f[3], "input_token_len", 1, &len, ctx) ||
      parse_int_field(&f[4], "block_size_tokens", 1, &bs, ctx) || parse_int_field(&f[5], "block_bytes", 1, &bb, ctx)) {
    return -1;
  }
  size_t seg_start = r->segs.len;
  uint8_t step = 0;
  curve_tag(&f[6], &step);
  if (parse_curve(r, &f[6], step, ctx)) return -1;
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
  for (size_t k = seg_start; step && k < r->segs.len; k += 2) { /* byte-step: both fields increase */
    uint64_t c = (uint64_t)segs[k], h = (uint64_t)segs[k + 1];
    if (c < 1 || h < 1 || (k > seg_start && (c <= (uint64_t)segs[k - 2] || h <= (uint64_t)segs[k - 1]))) {
      return FAIL(ctx, "hit_curve point %zu must be above 0 and above the previous point in both fields",
                  (k - seg_start) / 2 + 1);
    }
    hits = h;
  }
  for (size_t k = seg_start; !step && k < r->segs.len; k += 2) {
    int64_t s = segs[k], run = segs[k + 1];
    if (run < 1)
      return FAIL(ctx, "hit_curve segment %zu has length %lld (must be >= 1)", (k - seg_start) / 2 + 1, (long long)run);
    if (s < 1 || s <= prev_end) {
      return FAIL(
          ctx, "hit_curve segment %zu starts at %lld; starts must be >= 1 and leave a gap after the previous segment",
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
    return FAIL(ctx, "hit_curve has %llu hit blocks but the request has only %lld complete blocks",
                (unsigned long long)hits, (long long)complete);
  }
  if (extended && (cut == LH_CUT_NONE) != (hits == (uint64_t)complete)) {
    return FAIL(ctx, "cut_reason %s does not match %llu hit blocks of %lld",
                cut == LH_CUT_NONE ? "none" : "cold/expired", (unsigned long long)hits, (long long)complete);
  }
  int32_t inst = lh_intern_get(&r->instances, f[1].p, f[1].n);
  if (inst < 0 || lh_vec_reserve(&r->ids, f[0].n, 1) || lh_vec_reserve(&r->line, 1, 8) ||
      lh_vec_reserve(&r->id_off, 1, 8) || lh_vec_reserve(&r->instance, 1, 4) || lh_vec_reserve(&r->ts, 1, 8) ||
      lh_vec_reserve(&r->len, 1, 8) || lh_vec_reserve(&r->bs, 1, 8) || lh_vec_reserve(&r->bb, 1, 8) ||
      lh_vec_reserve(&r->seg_off, 1, 8) || lh_vec_reserve(&r->blocks, 1, 8) || lh_vec_reserve(&r->cut, 1, 1) ||
      lh_vec_reserve(&r->step, 1, 1)) {
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
  LH_VEC_AT(r->step, uint8_t)[i] = step;
  r->line.len = r->instance.len = r->ts.len = r->len.len = r->bs.len = r->bb.len = r->blocks.len = r->cut.len = i + 1;
  r->step.len = i + 1;
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
  t->step = LH_VEC_AT(r->step, uint8_t);
}

int lh_facts_parse(lh_facts_reader *r, const char *buf, size_t len, int64_t first_line, int extended, int more,
                   lh_facts_table *t, char *err, size_t errlen) {
  memset(t, 0, sizeof *t);
  if (lh_vec_reserve(&r->id_off, 1, 8) || lh_vec_reserve(&r->seg_off, 1, 8) ||
      lh_vec_reserve(&r->instances.offsets, 1, 8)) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory reading facts");
  }
  r->line.len = r->ids.len = r->instance.len = r->ts.len = r->len.len = r->bs.len = r->bb.len = 0;
  r->segs.len = r->blocks.len = r->cut.len = r->step.len = 0;
  r->id_off.len = r->seg_off.len = 1;
  LH_VEC_AT(r->id_off, int64_t)[0] = 0;
  LH_VEC_AT(r->seg_off, int64_t)[0] = 0;
  lh_intern_clear(&r->instances);
  row_ctx ctx;
  const char *p = buf, *end = buf + len;
  int status = LH_OK;
  for (int64_t line = first_line; p < end;) {
    row_text text = {NULL, NULL, end, more, 0};
    line_at(&text, p);
    if (text.end > p) {
      size_t segs_before = r->segs.len;
      int rc = parse_row(r, p, &text, line, extended, &ctx);
      if (rc == ROW_OPEN) {
        r->segs.len = segs_before;
        break; /* the row and what follows are the rest (t->consumed) */
      }
      if (rc) {
        r->segs.len = segs_before;
        t->error_line = line;
        t->lines += (size_t)(1 + text.breaks);
        status = strcmp(ctx.msg, "out of memory") == 0 ? lh_fail(err, errlen, LH_ENOMEM, "out of memory reading facts")
                                                       : lh_fail(err, errlen, LH_EPARSE, "%s", ctx.msg);
        break;
      }
    } /* (else an empty line) */
    line += 1 + text.breaks;
    t->lines += (size_t)(1 + text.breaks);
    p = text.next;
  }
  t->consumed = (size_t)(p - buf);
  fill_table(r, t);
  return status;
}
