/* lh_query.c - batch projection of parsed facts rows and the facts-query JSONL rows. */
#include "lh_query.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_common.h"
#include "lh_project.h"
#include "lh_text.h"

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
      case '"':
        out[w++] = '\\';
        out[w++] = '"';
        break;
      case '\\':
        out[w++] = '\\';
        out[w++] = '\\';
        break;
      case '\n':
        out[w++] = '\\';
        out[w++] = 'n';
        break;
      case '\r':
        out[w++] = '\\';
        out[w++] = 'r';
        break;
      case '\t':
        out[w++] = '\\';
        out[w++] = 't';
        break;
      default: out[w++] = c;
    }
  }
  out[w++] = '"';
  return w;
}

size_t lh_query_row_bound(const lh_facts_table *t, size_t r, size_t n_slots) {
  size_t id = (size_t)(t->id_offsets[r + 1] - t->id_offsets[r]);
  int32_t i = t->instance[r];
  size_t inst = (size_t)(t->instance_offsets[i + 1] - t->instance_offsets[i]);
  return json_escaped_bound(id) + json_escaped_bound(inst) + 160 + n_slots * (24 + 34);
}

/* Hit blocks of a curve at one slot (kind checked by the caller; a byte-step row meets only byte
 * and infinite slots). */
static uint64_t project_slot(const int64_t *segs, size_t nseg, int step, uint64_t value, uint8_t kind, uint64_t bb,
                             uint64_t bs) {
  if (step) {
    const uint64_t *points = (const uint64_t *)(const void *)segs; /* thresholds kept as uint64 bits */
    return kind == LH_SLOT_INFINITE ? lh_project_steps_infinite(points, nseg) : lh_project_steps(points, nseg, value);
  }
  switch (kind) {
    case LH_SLOT_INFINITE: return lh_project_infinite(segs, nseg);
    case LH_SLOT_BLOCKS: return lh_project_blocks(segs, nseg, value);
    case LH_SLOT_TOKENS: return lh_project_blocks(segs, nseg, bs == 0 ? 0 : value / bs);
    default: return lh_project_bytes(segs, nseg, value, bb);
  }
}

static int has_unit_slot(const uint8_t *kind, size_t n) {
  for (size_t s = 0; s < n; s++) {
    if (kind[s] == LH_SLOT_BLOCKS || kind[s] == LH_SLOT_TOKENS) return 1;
  }
  return 0;
}

int lh_query_chunk(const lh_facts_table *t, size_t row_lo, const uint64_t *slot_value, const uint8_t *slot_kind,
                   size_t n_slots, const int32_t *group, uint64_t *sum_blocks, uint64_t *sum_tokens, uint64_t *requests,
                   uint64_t *input_tokens, char *out, size_t cap, size_t *written, size_t *rows_done, char *err,
                   size_t errlen) {
  for (size_t s = 0; s < n_slots; s++) {
    if (slot_kind[s] > LH_SLOT_TOKENS) {
      *rows_done = row_lo;
      if (written != NULL) *written = 0;
      return lh_fail(err, errlen, LH_EINVAL, "capacity slot %zu has unknown kind %d", s, (int)slot_kind[s]);
    }
  }
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
    int step = t->step != NULL && t->step[r];
    if (step && has_unit_slot(slot_kind, n_slots)) {
      if (hits != hits_stack) free(hits);
      if (written != NULL) *written = (size_t)(w - out);
      *rows_done = r;
      int32_t i = t->instance[r];
      return lh_fail(err, errlen, LH_EINVAL,
                     "facts line %lld: instance %.*s is a hybrid lane (byte-step facts): ask for capacities in bytes "
                     "(GiB, MiB, ... or inf), not blocks or tokens",
                     (long long)t->line[r], (int)(t->instance_offsets[i + 1] - t->instance_offsets[i]),
                     t->instance_names + t->instance_offsets[i]);
    }
    for (size_t s = 0; s < n_slots; s++) {
      hits[s] = project_slot(segs, nseg, step, slot_value[s], slot_kind[s], bb, bs);
      sum_blocks[(size_t)g * n_slots + s] += hits[s];
      sum_tokens[(size_t)g * n_slots + s] += hits[s] * bs;
    }
    requests[g] += 1;
    input_tokens[g] += (uint64_t)t->input_len[r];
    if (out == NULL) continue;
    int32_t inst = t->instance[r];
    w += lh_put_lit(w, "{\"trace_id\":");
    w += put_json_string(w, t->ids + t->id_offsets[r], (size_t)(t->id_offsets[r + 1] - t->id_offsets[r]));
    w += lh_put_lit(w, ",\"instance_id\":");
    w += put_json_string(w, t->instance_names + t->instance_offsets[inst],
                         (size_t)(t->instance_offsets[inst + 1] - t->instance_offsets[inst]));
    w += lh_put_lit(w, ",\"timestamp_ns\":");
    w += lh_put_i64(w, t->timestamp[r]);
    w += lh_put_lit(w, ",\"input_token_len\":");
    w += lh_put_i64(w, t->input_len[r]);
    w += lh_put_lit(w, ",\"hit_blocks\":[");
    for (size_t s = 0; s < n_slots; s++) {
      if (s) *w++ = ',';
      w += lh_put_u64(w, hits[s]);
    }
    w += lh_put_lit(w, "],\"hit_rates\":[");
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
    w += lh_put_lit(w, "]}\n");
  }
  if (hits != hits_stack) free(hits);
  if (written != NULL) *written = (size_t)(w - out);
  *rows_done = r;
  return LH_OK;
}
