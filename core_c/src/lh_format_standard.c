/* lh_format_standard.c - row rule of the standard trace format (LH_FMT_STANDARD).
 *
 *   {"type": "get"|"request"|"write", "instance_id", "trace_id", "timestamp_ns", "keys",
 *    "input_len", "query_type", "block_mask", "sw_size", "location_spec_names", "ttl_us", "category"}
 *
 * get/request rows are reads, write rows are writes (their keys are dropped); a missing or empty
 * trace_id becomes trace_<instance_id>_<timestamp_ns>. Every present optional field must have
 * the type the original typed parser expects. "category" (our addition: the request category of
 * workload profiles and the WA policy) is an optional string; it becomes the row's label.
 */
#include "lh_trace_row.h"

enum {
  S_TYPE,
  S_INSTANCE,
  S_TRACE_ID,
  S_TS,
  S_KEYS,
  S_LEN,
  S_QUERY_TYPE,
  S_BLOCK_MASK,
  S_SW,
  S_LSN,
  S_TTL,
  S_CATEGORY
};

static int row_standard(lh_scan *s, lh_row *r, int64_t line, int64_t trace_block_size) {
  (void)trace_block_size; /* keys are taken as they are */
  lh_field *f = r->f;
  if (!f[S_TYPE].present || f[S_TYPE].kind != LH_J_STRING) return lh_row_fail(r, "missing string field: type");
  uint8_t kind;
  const char *tname;
  if (lh_row_str_is(s, &f[S_TYPE], "get")) {
    kind = LH_ROW_READ;
    tname = "get";
  } else if (lh_row_str_is(s, &f[S_TYPE], "request")) {
    kind = LH_ROW_READ;
    tname = "request";
  } else if (lh_row_str_is(s, &f[S_TYPE], "write")) {
    kind = LH_ROW_WRITE;
    tname = "write";
  } else {
    return lh_row_fail(r, "unknown trace type: %s", lh_row_shown(lh_row_str(s, &f[S_TYPE]), f[S_TYPE].str_len).text);
  }
  if (!f[S_INSTANCE].present || f[S_INSTANCE].kind != LH_J_STRING || f[S_INSTANCE].str_len == 0) {
    return lh_row_fail(r, "missing non-empty string field: instance_id");
  }
  int64_t ts = 0;
  if (lh_row_int(r, &f[S_TS], "timestamp_ns", &ts)) return -1;
  if (!f[S_KEYS].present || f[S_KEYS].kind != LH_J_ARRAY) return lh_row_fail(r, "missing array field: keys");
  int64_t len = 0;
  if (kind == LH_ROW_READ) {
    if (!f[S_LEN].present) return lh_row_fail(r, "missing integer field: input_len");
    if (f[S_LEN].kind != LH_J_INT) return lh_row_fail(r, "non-integer field: input_len");
    len = f[S_LEN].num.i;
  }
  /* The typed parser: every present field must have its JSON type. */
  if (!f[S_KEYS].arr.elem_ok) {
    return lh_row_fail(r, "failed to parse %s trace (keys[%zu] is %s, expected a 64-bit integer)", tname,
                       f[S_KEYS].arr.bad_index, lh_json_kind_name(f[S_KEYS].arr.bad_kind));
  }
  if (f[S_TRACE_ID].present && f[S_TRACE_ID].kind != LH_J_STRING) {
    return lh_row_fail(r, "failed to parse %s trace (trace_id must be a string)", tname);
  }
  if (f[S_QUERY_TYPE].present && f[S_QUERY_TYPE].kind != LH_J_STRING) {
    return lh_row_fail(r, "failed to parse %s trace (query_type must be a string)", tname);
  }
  const lh_field *bm = &f[S_BLOCK_MASK];
  if (bm->present && !(bm->kind == LH_J_ARRAY && bm->arr.elem_ok) && !(bm->kind == LH_J_INT && bm->num.i >= 0)) {
    return lh_row_fail(r,
                       "failed to parse %s trace (block_mask must be an array of booleans or a non-negative "
                       "integer)",
                       tname);
  }
  const lh_field *sw = &f[S_SW];
  if (sw->present && !(sw->kind == LH_J_INT && sw->num.i >= INT32_MIN && sw->num.i <= INT32_MAX)) {
    return lh_row_fail(r, "failed to parse %s trace (sw_size must be a 32-bit integer)", tname);
  }
  if (f[S_LSN].present && !(f[S_LSN].kind == LH_J_ARRAY && f[S_LSN].arr.elem_ok)) {
    return lh_row_fail(r, "failed to parse %s trace (location_spec_names must be an array of strings)", tname);
  }
  if (f[S_TTL].present && f[S_TTL].kind != LH_J_INT) {
    return lh_row_fail(r, "failed to parse %s trace (ttl_us must be a 64-bit integer)", tname);
  }
  if (f[S_CATEGORY].present && f[S_CATEGORY].kind != LH_J_STRING && f[S_CATEGORY].kind != LH_J_NULL) {
    return lh_row_fail(r, "failed to parse %s trace (category must be a string)", tname);
  }
  if (kind == LH_ROW_READ && len <= 0) {
    return lh_row_fail(r, "failed to parse %s trace (input_len must be positive, got %lld)", tname, (long long)len);
  }
  if (ts <= 0) {
    return lh_row_fail(r, "failed to validate trace: timestamp_ns must be positive, got %lld", (long long)ts);
  }
  const char *inst_name = lh_row_str(s, &f[S_INSTANCE]);
  int32_t inst = lh_intern_get(&s->instances, inst_name, f[S_INSTANCE].str_len);
  if (inst < 0) return -2;
  if (kind == LH_ROW_WRITE) lh_row_drop_keys(s, r); /* writes carry no keys */
  int32_t label = -1;
  if (f[S_CATEGORY].present && f[S_CATEGORY].kind == LH_J_STRING) {
    label = lh_intern_get(&s->labels, lh_row_str(s, &f[S_CATEGORY]), f[S_CATEGORY].str_len);
    if (label < 0) return -2;
  }
  lh_record rec = {line, kind, ts, len, inst, label, 0, NULL, 0, inst_name, f[S_INSTANCE].str_len, 0, 0};
  if (f[S_TRACE_ID].present && f[S_TRACE_ID].str_len > 0) {
    rec.id = lh_row_str(s, &f[S_TRACE_ID]);
    rec.id_len = f[S_TRACE_ID].str_len;
  }
  return lh_row_emit(s, &rec);
}

const lh_trace_rule lh_rule_standard = {
    {{"type", "instance_id", "trace_id", "timestamp_ns", "keys", "input_len", "query_type", "block_mask", "sw_size",
      "location_spec_names", "ttl_us", "category"},
     {LH_V_STRING, LH_V_STRING, LH_V_STRING, LH_V_NUMBER, LH_V_KEYS, LH_V_NUMBER, LH_V_ANY_SHAPE, LH_V_BLOCK_MASK,
      LH_V_NUMBER, LH_V_STR_ARRAY, LH_V_NUMBER, LH_V_STRING},
     12},
    row_standard,
};
