/* Declarations exposed to Python through cffi (API mode). This mirrors the public headers in
 * include/; the extension is compiled against those headers, so any drift fails the build. */

#define LH_OK 0
#define LH_ENOMEM 1
#define LH_EINVAL 2
#define LH_ERANGE 3
#define LH_EPARSE 4
#define LH_STATUS_COUNT 5
#define LH_ERR_LEN 512

const char *lh_status_name(int status);

/* lh_prefix_hash.h */
int64_t lh_prefix_hash_next(int64_t prev, int64_t raw);
void lh_prefix_hash_chain(const int64_t *raw, size_t n, int64_t *out);

/* lh_normalize.h */
int lh_normalize(const int64_t *keys, size_t n_keys, int64_t input_len, int64_t block_size,
                 int64_t trace_block_size, int prefix_hash, int64_t *out_keys, size_t *out_n,
                 int64_t *out_len, char *err, size_t errlen);
int lh_normalize_batch(const int64_t *keys, const int64_t *offsets, const int64_t *input_lens,
                       const int64_t *rows, size_t n, int64_t block_size, int64_t trace_block_size,
                       int prefix_hash, int64_t *out_keys, int64_t *out_offsets, int64_t *out_lens,
                       size_t *n_done, char *err, size_t errlen);

/* lh_lane.h */
typedef struct lh_lane lh_lane;
#define LH_CUT_NONE 0
#define LH_CUT_COLD 1
#define LH_CUT_EXPIRED 2
#define LH_LANE_KEEP_EXPIRED 1
typedef struct lh_lane_stats {
  uint64_t unique_blocks;
  uint64_t tracked_keys;
  uint64_t positions;
  uint64_t map_slots;
  uint64_t epochs;
  uint64_t expired_blocks;
  uint64_t memory_bytes;
  uint64_t compactions;
  uint64_t requests;
  uint64_t accesses;
} lh_lane_stats;
int lh_lane_create(lh_lane **out, int64_t ttl_ns, unsigned flags, char *err, size_t errlen);
void lh_lane_destroy(lh_lane *lane);
void lh_lane_reset(lh_lane *lane);
int lh_lane_process_batch(lh_lane *lane, const int64_t *keys, const int64_t *offsets,
                          const int64_t *timestamps, size_t n_req, int64_t *segs,
                          int64_t *seg_offsets, uint8_t *cuts, size_t *n_done, char *err,
                          size_t errlen);
void lh_lane_advance_time(lh_lane *lane, int64_t now_ns);
void lh_lane_get_stats(const lh_lane *lane, lh_lane_stats *stats);
int lh_lane_check(const lh_lane *lane, char *err, size_t errlen);

/* lh_project.h */
uint64_t lh_project_blocks(const int64_t *segs, size_t n_segs, uint64_t capacity_blocks);
uint64_t lh_project_infinite(const int64_t *segs, size_t n_segs);
uint64_t lh_project_bytes(const int64_t *segs, size_t n_segs, uint64_t capacity_bytes,
                          uint64_t block_bytes);
void lh_project_batch(const int64_t *segs, const int64_t *seg_offsets, size_t n_req,
                      const uint64_t *capacity_blocks, const uint8_t *infinite, size_t n_caps,
                      uint64_t *hits);

/* lh_trace_scan.h */
#define LH_FMT_STANDARD 1
#define LH_FMT_MOONCAKE 2
#define LH_FMT_QWEN 3
#define LH_FMT_PUBLISHER 4
#define LH_ROW_READ 1
#define LH_ROW_WRITE 2
typedef struct lh_scan lh_scan;
typedef struct lh_scan_result {
  size_t n_rows;
  const int64_t *line;
  const uint8_t *kind;
  const int64_t *timestamp;
  const int64_t *input_len;
  const int64_t *key_offsets;
  const int64_t *keys;
  size_t n_keys;
  const int64_t *id_offsets;
  const char *ids;
  const int32_t *instance;
  size_t n_instances;
  const int64_t *instance_offsets;
  const char *instance_names;
  const int32_t *label;
  const int64_t *turn;
  size_t n_labels;
  const int64_t *label_offsets;
  const char *label_names;
  int64_t error_line;
  size_t lines;
} lh_scan_result;
int lh_scan_create(lh_scan **out, char *err, size_t errlen);
void lh_scan_destroy(lh_scan *scan);
int lh_scan_chunk(lh_scan *scan, int format, const char *buf, size_t len, int64_t first_line,
                  int64_t trace_block_size, lh_scan_result *result, char *err, size_t errlen);

/* lh_facts.h */
size_t lh_facts_render_bound(const int64_t *id_offsets, const int64_t *lane_id_offsets,
                             const int64_t *out_src, const int32_t *out_lane, const int64_t *out_seg_lo,
                             const int64_t *out_seg_hi, size_t n_out, int extended);
int lh_facts_render(const char *ids, const int64_t *id_offsets, const int64_t *timestamps,
                    const char *lane_ids, const int64_t *lane_id_offsets, const int64_t *lane_block_size,
                    const int64_t *lane_block_bytes, const int64_t *out_src, const int32_t *out_lane,
                    const int64_t *input_lens, const int64_t *out_seg_lo, const int64_t *out_seg_hi,
                    const int64_t *segs, int extended, const int64_t *blocks, const uint8_t *cuts,
                    size_t n_out, char *buf, size_t cap, size_t *written, char *err, size_t errlen);

/* lh_query.h */
typedef struct lh_facts_reader lh_facts_reader;
typedef struct lh_facts_table {
  size_t n_rows;
  const int64_t *line;
  const int64_t *id_offsets;
  const char *ids;
  const int32_t *instance;
  size_t n_instances;
  const int64_t *instance_offsets;
  const char *instance_names;
  const int64_t *timestamp;
  const int64_t *input_len;
  const int64_t *block_size;
  const int64_t *block_bytes;
  const int64_t *seg_offsets;
  const int64_t *segs;
  size_t n_segs;
  const int64_t *blocks;
  const uint8_t *cut;
  int64_t error_line;
  size_t lines;
} lh_facts_table;
int lh_facts_reader_create(lh_facts_reader **out, char *err, size_t errlen);
void lh_facts_reader_destroy(lh_facts_reader *reader);
int lh_facts_parse(lh_facts_reader *reader, const char *buf, size_t len, int64_t first_line, int extended,
                   lh_facts_table *table, char *err, size_t errlen);
int lh_query_chunk(const lh_facts_table *table, size_t row_lo, const uint64_t *slot_bytes, const uint8_t *slot_inf,
                   size_t n_slots, const int32_t *group, uint64_t *sum_blocks, uint64_t *sum_tokens,
                   uint64_t *requests, uint64_t *input_tokens, char *out, size_t cap, size_t *written,
                   size_t *rows_done, char *err, size_t errlen);
size_t lh_query_row_bound(const lh_facts_table *table, size_t row, size_t n_slots);
size_t lh_format_g(double v, char *out);
