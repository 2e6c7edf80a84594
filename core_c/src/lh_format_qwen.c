/* lh_format_qwen.c - row rule of the Qwen Bailian trace format (LH_FMT_QWEN).
 *
 *   {"chat_id": int|string, "timestamp": s (int or float), "input_length", "hash_ids",
 *    "type": label (optional), "turn": int (optional)}
 *
 * Every row is a read without an instance; keys = hash_ids[: input_length // trace block size];
 * the trace id is chat_id as Python's str() would print it; type becomes a label, turn is kept.
 */
#include <string.h>

#include "lh_trace_row.h"

enum { Q_CHAT, Q_TS, Q_LEN, Q_IDS, Q_TYPE, Q_TURN };

/* The timestamp in ns exactly as the Python reader computes it; -1 with the reason otherwise. */
static int timestamp_ns(lh_row *r, const lh_field *t, int64_t *ts) {
  if (!t->present || (t->kind != LH_J_INT && t->kind != LH_J_FLOAT && t->kind != LH_J_UINT && t->kind != LH_J_BIGINT)) {
    return lh_row_fail(r, "missing number field: timestamp");
  }
  if (t->kind == LH_J_INT) { /* Python: int * int is exact */
    if (t->num.i < 0) return lh_row_fail(r, "timestamp must not be negative");
    if (t->num.i > INT64_MAX / 1000000000) return lh_row_fail(r, "timestamp overflows int64 nanoseconds");
    *ts = t->num.i * 1000000000;
    return 0;
  }
  if (t->kind == LH_J_FLOAT) { /* Python: int(float * 1_000_000_000), float arithmetic */
    double v = t->num.d * 1000000000.0;
    if (!(v >= 0.0)) return lh_row_fail(r, "timestamp must not be negative");
    if (!(v < 9223372036854775808.0)) return lh_row_fail(r, "timestamp overflows int64 nanoseconds");
    *ts = (int64_t)v;
    return 0;
  }
  return lh_row_fail(r, "timestamp overflows int64 nanoseconds");
}

static int row_qwen(lh_scan *s, lh_row *r, int64_t line, int64_t trace_block_size) {
  lh_field *f = r->f;
  const lh_field *chat = &f[Q_CHAT];
  if (!chat->present) return lh_row_fail(r, "missing field: chat_id");
  if (chat->kind != LH_J_STRING && chat->kind != LH_J_INT && chat->kind != LH_J_UINT && chat->kind != LH_J_BIGINT) {
    return lh_row_fail(r, "chat_id must be an integer or a string, got %s", lh_json_kind_name(chat->kind));
  }
  int64_t ts = 0;
  if (timestamp_ns(r, &f[Q_TS], &ts)) return -1;
  int64_t len = 0;
  if (lh_row_int(r, &f[Q_LEN], "input_length", &len)) return -1;
  if (lh_row_keys(r, &f[Q_IDS], "hash_ids")) return -1;
  if (len < 0) return lh_row_fail(r, "input_length must not be negative, got %lld", (long long)len);
  if (f[Q_TYPE].present && f[Q_TYPE].kind != LH_J_STRING && f[Q_TYPE].kind != LH_J_NULL) {
    return lh_row_fail(r, "type must be a string");
  }
  int64_t turn = 0;
  if (f[Q_TURN].present && f[Q_TURN].kind != LH_J_NULL) {
    if (f[Q_TURN].kind != LH_J_INT) return lh_row_fail(r, "turn must be an integer");
    turn = f[Q_TURN].num.i;
  }
  lh_row_truncate_keys(s, r, &f[Q_IDS], len / trace_block_size);
  int32_t label = -1;
  if (f[Q_TYPE].present && f[Q_TYPE].kind == LH_J_STRING) {
    label = lh_intern_get(&s->labels, lh_row_str(s, &f[Q_TYPE]), f[Q_TYPE].str_len);
    if (label < 0) return -2;
  }
  lh_record rec = {line, LH_ROW_READ, ts, len, -1, label, turn, NULL, 0, NULL, 0};
  if (chat->kind == LH_J_STRING) {
    rec.id = lh_row_str(s, chat);
    rec.id_len = chat->str_len;
  } else if (chat->num.text_len == 2 && memcmp(chat->num.text, "-0", 2) == 0) {
    rec.id = "0"; /* the integer's canonical text, as str(int) in Python */
    rec.id_len = 1;
  } else {
    rec.id = chat->num.text; /* JSON integers have no leading zeros: the text is canonical */
    rec.id_len = chat->num.text_len;
  }
  return lh_row_emit(s, &rec);
}

const lh_trace_rule lh_rule_qwen = {
    {{"chat_id", "timestamp", "input_length", "hash_ids", "type", "turn"},
     {LH_V_SCALAR, LH_V_NUMBER, LH_V_NUMBER, LH_V_KEYS, LH_V_STRING, LH_V_NUMBER},
     6},
    row_qwen,
};
