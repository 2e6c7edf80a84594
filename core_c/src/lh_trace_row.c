/* lh_trace_row.c - one trace row: its fields out of a JSON object, the checks row rules share,
 * and the record appended to the scanner's columns (see lh_trace_row.h). */
#include "lh_trace_row.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lh_text.h"

/* ---- parsing a line ---------------------------------------------------------------------- */

static int field_index(const lh_row_fields *def, const char *name, size_t n) {
  for (int i = 0; i < def->n; i++) {
    if (lh_text_is(def->names[i], name, n)) return i;
  }
  return -1;
}

static int parse_field(lh_json_cursor *c, lh_scan *s, int mode, lh_field *f) {
  int k = lh_json_peek(c);
  f->present = 1;
  f->kind = k;
  if (k == LH_J_STRING && (mode == LH_V_STRING || mode == LH_V_SCALAR)) {
    return lh_json_read_string(c, &s->str, &f->str_off, &f->str_len);
  }
  if (k == LH_J_INT && mode != LH_V_SKIP) {
    int st = lh_json_read_number(c, &f->num);
    f->kind = f->num.kind;
    return st;
  }
  if (k == LH_J_ARRAY) {
    switch (mode) {
      case LH_V_KEYS: return lh_json_array_of(c, LH_J_INT, &s->keys, &f->arr);
      case LH_V_STR_ARRAY: return lh_json_array_of(c, LH_J_STRING, NULL, &f->arr);
      case LH_V_BLOCK_MASK: return lh_json_array_of(c, LH_J_BOOL, NULL, &f->arr);
      default: break;
    }
  }
  return lh_json_skip_value(c);
}

int lh_row_parse(lh_json_cursor *c, lh_scan *s, const lh_row_fields *def, lh_row *r) {
  lh_json_skip_space(c);
  if (c->p >= c->end || *c->p != '{') return lh_json_error(c, "expected a JSON object");
  c->depth = 0;
  int more = lh_json_open(c, '}');
  while (more > 0) {
    size_t name_off = 0, name_len = 0;
    int st = lh_json_member_name(c, &s->str, &name_off, &name_len);
    if (st) return st;
    int idx = field_index(def, LH_VEC_AT(s->str, char) + name_off, name_len);
    s->str.len = name_off; /* the name is not needed any more */
    if (idx >= 0 && !r->f[idx].present) {
      st = parse_field(c, s, def->modes[idx], &r->f[idx]);
    } else {
      st = lh_json_skip_value(c);
    }
    if (st) return st;
    more = lh_json_next(c, '}');
  }
  if (more < 0) return more;
  lh_json_skip_space(c);
  if (c->p != c->end) return lh_json_error(c, "trailing characters after the object");
  return 0;
}

/* ---- helpers for row functions ----------------------------------------------------------- */

int lh_row_fail(lh_row *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->msg, sizeof r->msg, fmt, ap);
  va_end(ap);
  return -1;
}

const char *lh_row_str(const lh_scan *s, const lh_field *f) { return LH_VEC_AT(s->str, char) + f->str_off; }

int lh_row_str_is(const lh_scan *s, const lh_field *f, const char *lit) {
  return f->kind == LH_J_STRING && lh_text_is(lit, lh_row_str(s, f), f->str_len);
}

int lh_row_int(lh_row *r, const lh_field *f, const char *name, int64_t *out) {
  if (!f->present) return lh_row_fail(r, "missing integer field: %s", name);
  if (f->kind != LH_J_INT) {
    if (f->kind == LH_J_UINT || f->kind == LH_J_BIGINT) return lh_row_fail(r, "integer field out of range: %s", name);
    return lh_row_fail(r, "missing integer field: %s (got %s)", name, lh_json_kind_name(f->kind));
  }
  *out = f->num.i;
  return 0;
}

int lh_row_keys(lh_row *r, const lh_field *f, const char *name) {
  if (!f->present || f->kind != LH_J_ARRAY) return lh_row_fail(r, "missing array field: %s", name);
  if (!f->arr.elem_ok) {
    return lh_row_fail(r, "%s[%zu] is %s, expected a 64-bit integer", name, f->arr.bad_index,
                       lh_json_kind_name(f->arr.bad_kind));
  }
  return 0;
}

void lh_row_truncate_keys(lh_scan *s, const lh_row *r, const lh_field *f, int64_t keep) {
  if (keep < (int64_t)f->arr.n_ints) s->keys.len = r->keys_start + (size_t)(keep < 0 ? 0 : keep);
}

void lh_row_drop_keys(lh_scan *s, const lh_row *r) { s->keys.len = r->keys_start; }

lh_printable lh_row_shown(const char *s, size_t n) {
  lh_printable out;
  size_t w = 0;
  for (size_t i = 0; i < n && w + 5 < sizeof out.text; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f) {
      w += (size_t)snprintf(out.text + w, sizeof out.text - w,
                            c == '\n'   ? "\\n"
                            : c == '\r' ? "\\r"
                            : c == '\t' ? "\\t"
                                        : "\\x%02x",
                            c);
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

/* ---- the record -------------------------------------------------------------------------- */

int lh_row_emit(lh_scan *s, const lh_record *rec) {
  if (lh_vec_reserve(&s->line, 1, sizeof(int64_t)) || lh_vec_reserve(&s->kind, 1, 1) ||
      lh_vec_reserve(&s->ts, 1, sizeof(int64_t)) || lh_vec_reserve(&s->input_len, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->key_off, 1, sizeof(int64_t)) || lh_vec_reserve(&s->id_off, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->instance, 1, sizeof(int32_t)) || lh_vec_reserve(&s->label, 1, sizeof(int32_t)) ||
      lh_vec_reserve(&s->turn, 1, sizeof(int64_t)) || lh_vec_reserve(&s->chat, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->parent, 1, sizeof(int64_t))) {
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
  LH_VEC_AT(s->chat, int64_t)[i] = rec->chat;
  LH_VEC_AT(s->parent, int64_t)[i] = rec->parent;
  LH_VEC_AT(s->key_off, int64_t)[i + 1] = (int64_t)s->keys.len;
  if (rec->id != NULL) {
    if (lh_vec_reserve(&s->ids, rec->id_len, 1)) return -2;
    memcpy(LH_VEC_AT(s->ids, char) + s->ids.len, rec->id, rec->id_len);
    s->ids.len += rec->id_len;
  } else {
    /* trace_<instance>_<timestamp> */
    if (lh_vec_reserve(&s->ids, sizeof "trace__" - 1 + rec->inst_len + LH_MAX_INT_CHARS, 1)) return -2;
    char *dst = LH_VEC_AT(s->ids, char) + s->ids.len;
    size_t n = lh_put_lit(dst, "trace_");
    memcpy(dst + n, rec->inst_name, rec->inst_len);
    n += rec->inst_len;
    dst[n++] = '_';
    n += lh_put_i64(dst + n, rec->ts);
    s->ids.len += n;
  }
  LH_VEC_AT(s->id_off, int64_t)[i + 1] = (int64_t)s->ids.len;
  s->line.len = s->kind.len = s->ts.len = s->input_len.len = s->instance.len = s->label.len = s->turn.len = i + 1;
  s->chat.len = s->parent.len = i + 1;
  s->key_off.len = s->id_off.len = i + 2;
  return 0;
}
