/* lh_format_mooncake.c - row rule of the Mooncake trace format (LH_FMT_MOONCAKE).
 *
 *   {"timestamp": ms, "input_length": tokens, "hash_ids": [...]}
 *
 * Every row is a read without an instance; keys = hash_ids[: input_length // trace block size];
 * the trace id is the row's line number. Other fields (output_length, ...) are ignored.
 */
#include "lh_text.h"
#include "lh_trace_row.h"

enum { M_TS, M_LEN, M_IDS };

static int row_mooncake(lh_scan *s, lh_row *r, int64_t line, int64_t trace_block_size) {
  lh_field *f = r->f;
  int64_t ts_ms = 0, len = 0;
  if (lh_row_int(r, &f[M_TS], "timestamp", &ts_ms)) return -1;
  if (lh_row_int(r, &f[M_LEN], "input_length", &len)) return -1;
  if (lh_row_keys(r, &f[M_IDS], "hash_ids")) return -1;
  if (ts_ms < 0) return lh_row_fail(r, "timestamp must not be negative, got %lld", (long long)ts_ms);
  if (ts_ms > INT64_MAX / 1000000) {
    return lh_row_fail(r, "timestamp %lld ms overflows int64 nanoseconds", (long long)ts_ms);
  }
  if (len < 0) return lh_row_fail(r, "input_length must not be negative, got %lld", (long long)len);
  lh_row_truncate_keys(s, r, &f[M_IDS], len / trace_block_size);
  char id[LH_MAX_INT_CHARS];
  size_t n = lh_put_i64(id, line);
  lh_record rec = {line, LH_ROW_READ, ts_ms * 1000000, len, -1, -1, 0, id, n, NULL, 0, 0, 0};
  return lh_row_emit(s, &rec);
}

const lh_trace_rule lh_rule_mooncake = {
    {{"timestamp", "input_length", "hash_ids"}, {LH_V_NUMBER, LH_V_NUMBER, LH_V_KEYS}, 3},
    row_mooncake,
};
