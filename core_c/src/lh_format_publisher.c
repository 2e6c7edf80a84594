/* lh_format_publisher.c - row rule of the cache-manager event log (LH_FMT_PUBLISHER).
 *
 *   {"type": event, "source": instance, "id": trace id, "trigger_time_us", "keys"}
 *
 * GetCacheLocation is a read, StartWriteCache a write (its keys are dropped); FinishWriteCache
 * and events without keys are skipped; any other event with keys is an error. Reads carry no
 * length (input_len 0: derived at normalization); a missing or empty id becomes
 * trace_<source>_<ns>.
 */
#include "lh_trace_row.h"

enum { P_TYPE, P_SOURCE, P_ID, P_TS, P_KEYS };

static int row_publisher(lh_scan *s, lh_row *r, int64_t line, int64_t trace_block_size) {
  (void)trace_block_size; /* keys are taken as they are */
  lh_field *f = r->f;
  if (!f[P_TYPE].present || f[P_TYPE].kind != LH_J_STRING) return lh_row_fail(r, "missing string field: type");
  uint8_t kind;
  if (lh_row_str_is(s, &f[P_TYPE], "GetCacheLocation")) {
    kind = LH_ROW_READ;
  } else if (lh_row_str_is(s, &f[P_TYPE], "StartWriteCache")) {
    kind = LH_ROW_WRITE;
  } else {
    const lh_field *k = &f[P_KEYS];
    int empty = k->kind == LH_J_ARRAY && k->arr.n_ints == 0 && k->arr.elem_ok;
    int has_keys = k->present && !empty && k->kind != LH_J_NULL;
    if (lh_row_str_is(s, &f[P_TYPE], "FinishWriteCache") || !has_keys) {
      lh_row_drop_keys(s, r);
      return 1;
    }
    return lh_row_fail(r, "unsupported event type %s with keys (expected GetCacheLocation or StartWriteCache)",
                       lh_row_shown(lh_row_str(s, &f[P_TYPE]), f[P_TYPE].str_len).text);
  }
  if (!f[P_SOURCE].present || f[P_SOURCE].kind != LH_J_STRING || f[P_SOURCE].str_len == 0) {
    return lh_row_fail(r, "missing non-empty string field: source");
  }
  int64_t us = 0;
  if (lh_row_int(r, &f[P_TS], "trigger_time_us", &us)) return -1;
  if (lh_row_keys(r, &f[P_KEYS], "keys")) return -1;
  if (f[P_ID].present && f[P_ID].kind != LH_J_STRING) return lh_row_fail(r, "id must be a string");
  if (us <= 0) return lh_row_fail(r, "trigger_time_us must be positive, got %lld", (long long)us);
  if (us > INT64_MAX / 1000) return lh_row_fail(r, "trigger_time_us overflows int64 nanoseconds");
  const char *source = lh_row_str(s, &f[P_SOURCE]);
  int32_t inst = lh_intern_get(&s->instances, source, f[P_SOURCE].str_len);
  if (inst < 0) return -2;
  if (kind == LH_ROW_WRITE) lh_row_drop_keys(s, r); /* writes carry no keys */
  lh_record rec = {line, kind, us * 1000, 0, inst, -1, 0, NULL, 0, source, f[P_SOURCE].str_len, 0, 0};
  if (f[P_ID].present && f[P_ID].str_len > 0) {
    rec.id = lh_row_str(s, &f[P_ID]);
    rec.id_len = f[P_ID].str_len;
  }
  return lh_row_emit(s, &rec);
}

const lh_trace_rule lh_rule_publisher = {
    {{"type", "source", "id", "trigger_time_us", "keys"},
     {LH_V_STRING, LH_V_STRING, LH_V_STRING, LH_V_NUMBER, LH_V_KEYS},
     5},
    row_publisher,
};
