/* lh_trace_format.c - the table of trace row formats (see lh_trace_format.h).
 *
 * The one place that lists the formats: lh_scan_chunk dispatches through it and Python reads
 * it (core_c.scan.TRACE_FORMATS). Detection mirrors the reader's first-row rule: a row with
 * hash_ids is qwen_bailian when it also has chat_id, else mooncake; then publisher_log
 * (trigger_time_us + source); then standard (type + instance_id).
 */
#include "lh_trace_format.h"

#include "lh_common.h"
#include "lh_trace_row.h"

static const lh_trace_format FORMATS[] = {
    /* code, name, default trace block, instanceless, detect priority, detect keys */
    {{LH_FMT_STANDARD, "standard", 256, 0, 4, "type,instance_id"}, &lh_rule_standard},
    {{LH_FMT_MOONCAKE, "mooncake", 512, 1, 2, "hash_ids"}, &lh_rule_mooncake},
    {{LH_FMT_QWEN, "qwen_bailian", 16, 1, 1, "hash_ids,chat_id"}, &lh_rule_qwen},
    {{LH_FMT_PUBLISHER, "publisher_log", 16, 0, 3, "trigger_time_us,source"}, &lh_rule_publisher},
};

#define N_FORMATS (sizeof FORMATS / sizeof FORMATS[0])

size_t lh_trace_format_count(void) { return N_FORMATS; }

int lh_trace_format_get(size_t index, lh_trace_format_info *out) {
  if (index >= N_FORMATS) return LH_ERANGE;
  *out = FORMATS[index].info;
  return LH_OK;
}

const lh_trace_format *lh_trace_format_find(int code) {
  for (size_t i = 0; i < N_FORMATS; i++) {
    if (FORMATS[i].info.code == code) return &FORMATS[i];
  }
  return NULL;
}
