/* lh_query.h - answering capacity queries over many parsed facts rows at once.
 *
 * lh_query_chunk projects every row of a parsed facts table (lh_facts.h) at every capacity slot
 * through the projector (lh_project.h), accumulates integer sums per instance and optionally
 * renders the per-request JSONL rows of the original facts query.
 */
#ifndef LH_QUERY_H
#define LH_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "lh_facts.h" /* lh_facts_table */

/* What a capacity slot's value means (slot_kind). */
#define LH_SLOT_BYTES 0    /* bytes: blocks = bytes / the row's block_bytes */
#define LH_SLOT_INFINITE 1 /* infinite capacity (the value is ignored) */
#define LH_SLOT_BLOCKS 2   /* blocks, whatever a row's block size */
#define LH_SLOT_TOKENS 3   /* tokens: blocks = tokens / the row's block_size_tokens */

/* Projects rows row_lo.. of a parsed table at n_slots capacities, in order.
 *   slot_value[s]   the capacity, in the unit slot_kind[s] (LH_SLOT_*) names
 *   group[r]        the row's instance in the caller's numbering (< n_groups)
 * Adds to the caller-owned sums (n_groups * n_slots each, row-major by group):
 *   sum_blocks[g*n_slots+s] += hit blocks, sum_tokens[...] += hit blocks * block_size
 * and to requests[g] and input_tokens[g]. With out == NULL every remaining row is processed.
 * With out != NULL the per-request JSONL rows are rendered into out (capacity cap) and rows are
 * processed only while they surely fit: *rows_done tells how many were (call again from there).
 * Byte-step rows (hybrid lanes) project byte and infinite slots with lh_project_steps; a block
 * or token slot meeting one is LH_EINVAL naming its line and instance (*rows_done = that row,
 * the rows before it added).
 * Returns LH_OK, LH_EINVAL for an unknown slot kind (nothing added), or LH_ENOMEM for very many
 * slots. */
int lh_query_chunk(const lh_facts_table *table, size_t row_lo, const uint64_t *slot_value, const uint8_t *slot_kind,
                   size_t n_slots, const int32_t *group, uint64_t *sum_blocks, uint64_t *sum_tokens, uint64_t *requests,
                   uint64_t *input_tokens, char *out, size_t cap, size_t *written, size_t *rows_done, char *err,
                   size_t errlen);

/* Upper bound of the JSONL bytes of one row (so a buffer of that size always makes progress). */
size_t lh_query_row_bound(const lh_facts_table *table, size_t row, size_t n_slots);

/* Formats v like printf("%g") (6 significant digits) into out (>= 32 bytes); returns the length. */
size_t lh_format_g(double v, char *out);

#endif
