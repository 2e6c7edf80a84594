/* lh_format_qwen.c - row rule of the Qwen Bailian trace format (LH_FMT_QWEN).
 *
 *   {"chat_id": int|string, "timestamp": s (int or float), "input_length", "hash_ids",
 *    "type": label (optional), "turn": int (optional), "parent_chat_id": int|string|null
 *    (optional; -1, null or missing: the row starts a session)}
 *
 * Every row is a read without an instance; keys = hash_ids[: input_length // trace block size];
 * the trace id is chat_id as Python's str() would print it; type becomes a label, turn is kept;
 * chat_id and parent_chat_id become session numbers (lh_trace_scan.h).
 */
#include <string.h>

#include "lh_trace_row.h"

enum { Q_CHAT, Q_TS, Q_LEN, Q_IDS, Q_TYPE, Q_TURN, Q_PARENT };

/* The session number of an id's text (see lh_trace_scan.h): a canonical decimal integer within
 * 64 bits is its value, anything else its FNV-1a 64 hash. */
static int64_t session_number(const char *text, size_t n) {
  size_t i = n > 0 && text[0] == '-' ? 1 : 0;
  int canonical = i < n && n - i <= 20 && (text[i] != '0' || n - i == 1) && !(i == 1 && text[1] == '0');
  uint64_t value = 0;
  for (size_t k = i; canonical && k < n; k++) {
    unsigned d = (unsigned)(text[k] - '0');
    if (d > 9 || value > (UINT64_MAX - d) / 10) {
      canonical = 0;
    } else {
      value = value * 10 + d;
    }
  }
  if (canonical && i == 1) canonical = value <= (uint64_t)INT64_MAX + 1; /* -2^63 .. -1 */
  if (canonical) return (int64_t)(i == 1 ? 0 - value : value);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (size_t k = 0; k < n; k++) h = (h ^ (uint8_t)text[k]) * 0x100000001b3ULL;
  return (int64_t)h;
}

/* The text of a chat id field (an integer or a string), as Python's str() prints it. */
static void id_text(lh_scan *s, const lh_field *f, const char **text, size_t *n) {
  if (f->kind == LH_J_STRING) {
    *text = lh_row_str(s, f);
    *n = f->str_len;
  } else if (f->num.text_len == 2 && memcmp(f->num.text, "-0", 2) == 0) {
    *text = "0"; /* the integer's canonical text, as str(int) in Python */
    *n = 1;
  } else {
    *text = f->num.text; /* JSON integers have no leading zeros: the text is canonical */
    *n = f->num.text_len;
  }
}

static int is_id(const lh_field *f) {
  return f->kind == LH_J_STRING || f->kind == LH_J_INT || f->kind == LH_J_UINT || f->kind == LH_J_BIGINT;
}

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
  if (!is_id(chat)) {
    return lh_row_fail(r, "chat_id must be an integer or a string, got %s", lh_json_kind_name(chat->kind));
  }
  const lh_field *parent = &f[Q_PARENT];
  if (parent->present && parent->kind != LH_J_NULL && !is_id(parent)) {
    return lh_row_fail(r, "parent_chat_id must be an integer, a string or null, got %s",
                       lh_json_kind_name(parent->kind));
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
  lh_record rec = {line, LH_ROW_READ, ts, len, -1, label, turn, NULL, 0, NULL, 0, 0, 0};
  id_text(s, chat, &rec.id, &rec.id_len);
  rec.chat = rec.parent = session_number(rec.id, rec.id_len);
  int root = !parent->present || parent->kind == LH_J_NULL || (parent->kind == LH_J_INT && parent->num.i == -1);
  if (!root) {
    const char *text = NULL;
    size_t n = 0;
    id_text(s, parent, &text, &n);
    rec.parent = session_number(text, n);
  }
  return lh_row_emit(s, &rec);
}

const lh_trace_rule lh_rule_qwen = {
    {{"chat_id", "timestamp", "input_length", "hash_ids", "type", "turn", "parent_chat_id"},
     {LH_V_SCALAR, LH_V_NUMBER, LH_V_NUMBER, LH_V_KEYS, LH_V_STRING, LH_V_NUMBER, LH_V_SCALAR},
     7},
    row_qwen,
};
