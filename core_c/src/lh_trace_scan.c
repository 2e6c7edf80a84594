/* lh_trace_scan.c - the chunk driver of the trace scanner (see lh_trace_scan.h).
 *
 * Splits a chunk into lines, skips blank ones, parses each other line as one JSON object into
 * the fields its format asks for (lh_trace_row.c over the lexer in lh_json.c) and hands them to
 * the format's row rule, found in the format table (lh_trace_format.c). The first bad row stops
 * the chunk; its reason becomes the error message.
 */
#include "lh_trace_scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lh_buf.h"
#include "lh_common.h"
#include "lh_json.h"
#include "lh_text.h"
#include "lh_trace_row.h"

int lh_scan_create(lh_scan **out, char *err, size_t errlen) {
  lh_scan *s = calloc(1, sizeof(lh_scan));
  if (s == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a trace scanner");
  *out = s;
  return LH_OK;
}

void lh_scan_destroy(lh_scan *s) {
  if (s == NULL) return;
  lh_vec *all[] = {&s->line, &s->kind,     &s->ts,    &s->input_len, &s->key_off, &s->keys,   &s->id_off,
                   &s->ids,  &s->instance, &s->label, &s->turn,      &s->chat,    &s->parent, &s->str};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]->data);
  lh_intern_free(&s->instances);
  lh_intern_free(&s->labels);
  free(s);
}

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
  res->chat = LH_VEC_AT(s->chat, int64_t);
  res->parent = LH_VEC_AT(s->parent, int64_t);
  res->n_labels = s->labels.count;
  res->label_offsets = LH_VEC_AT(s->labels.offsets, int64_t);
  res->label_names = LH_VEC_AT(s->labels.bytes, char);
}

static void reset_outputs(lh_scan *s) {
  s->line.len = s->kind.len = s->ts.len = s->input_len.len = s->keys.len = 0;
  s->ids.len = s->instance.len = s->label.len = s->turn.len = s->chat.len = s->parent.len = 0;
  s->key_off.len = s->id_off.len = 1;
  LH_VEC_AT(s->key_off, int64_t)[0] = 0;
  LH_VEC_AT(s->id_off, int64_t)[0] = 0;
  lh_intern_clear(&s->instances); /* empty tables still expose offsets[0] = 0 */
  lh_intern_clear(&s->labels);
}

/* One non-blank line: 0 (a record or a skipped row), -1 (malformed: reason in r->msg) or -2. */
static int scan_line(lh_scan *s, const lh_trace_rule *rule, const char *p, const char *end, int64_t line,
                     int64_t trace_block_size, lh_row *r) {
  memset(r->f, 0, sizeof r->f);
  r->msg[0] = '\0';
  r->keys_start = s->keys.len;
  s->str.len = 0;
  lh_json_cursor c = {p, p, end, NULL, NULL, 0};
  int st = lh_row_parse(&c, s, &rule->fields, r);
  if (st == -1) {
    snprintf(r->msg, sizeof r->msg, "invalid JSON: %s at column %lld", c.error, (long long)(c.error_at - c.begin) + 1);
  } else if (st == 0) {
    st = rule->row(s, r, line, trace_block_size);
    if (st == 1) st = 0; /* a skipped row */
  }
  if (st != 0) lh_row_drop_keys(s, r);
  return st;
}

size_t lh_count_lines(const char *buf, size_t len) {
  size_t n = 0;
  if (len == 0) return 0;
  for (const char *p = buf, *end = buf + len; p < end; p++, n++) {
    p = memchr(p, '\n', (size_t)(end - p));
    if (p == NULL) break;
  }
  return n;
}

int lh_scan_chunk(lh_scan *s, int format, const char *buf, size_t len, int64_t first_line, int64_t trace_block_size,
                  lh_scan_result *res, char *err, size_t errlen) {
  memset(res, 0, sizeof *res);
  const lh_trace_format *fmt = lh_trace_format_find(format);
  if (fmt == NULL) return lh_fail(err, errlen, LH_EINVAL, "unknown trace format code %d", format);
  if (trace_block_size <= 0) return lh_fail(err, errlen, LH_EINVAL, "trace block size must be positive");
  if (lh_vec_reserve(&s->key_off, 1, sizeof(int64_t)) || lh_vec_reserve(&s->id_off, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->instances.offsets, 1, sizeof(int64_t)) ||
      lh_vec_reserve(&s->labels.offsets, 1, sizeof(int64_t))) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory scanning a trace chunk");
  }
  reset_outputs(s);
  lh_row *r = malloc(sizeof(lh_row));
  if (r == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory scanning a trace chunk");
  const char *p = buf, *end = buf + len;
  int status = LH_OK;
  for (int64_t line = first_line; p < end; line++) {
    const char *start = p, *line_end = lh_take_line(&p, end);
    res->lines++;
    if (lh_skip_json_space(start, line_end) == line_end) continue; /* blank: spaces, tabs, CR */
    int st = scan_line(s, fmt->rule, start, line_end, line, trace_block_size, r);
    if (st != 0) {
      res->error_line = line;
      status = st == -2 ? lh_fail(err, errlen, LH_ENOMEM, "out of memory scanning a trace chunk")
                        : lh_fail(err, errlen, LH_EPARSE, "%s", r->msg);
      break;
    }
  }
  free(r);
  fill_result(s, res);
  return status;
}
