/* lh_evidence.h - one worker's eviction evidence: which block digests are resident, which were
 * removed recently (with the batch that removed them), and which aged out of that window.
 *
 * The attribution owner keeps one per worker (litehit.attribution.store). It numbers the
 * worker's applied batches 1, 2, ... and its time buckets 0, 1, ...; this object never sees a
 * clock or a timestamp, only those numbers:
 *   resident   digest -> the batch that stored it (stored adds, removed and cleared take away);
 *   evidence   digest -> the batch of its LATEST removal, for removals in retained buckets;
 *   aged       a Bloom filter of digests whose removal evidence expired or that were dropped
 *              by lh_evidence_forget, in two generations: when the current one has taken
 *              `filter_generation` digests it becomes the previous one and the one before is
 *              forgotten, so the filter never saturates; a digest is remembered for at least one
 *              generation's worth of later inserts. A member may be a false positive; within
 *              that memory there are no false negatives.
 * Buckets: lh_evidence_advance(b) retains the removals of buckets b - (ring - 1) .. b; older
 * evidence expires into the aged filter. A removal is filed in the current (latest advanced)
 * bucket. Expiry is a sweep over the evidence table spread over the calls (4096 slots per
 * advance or apply): an expired entry the sweep has not reached yet is already answered as aged,
 * so answers never depend on its progress; only memory is freed later.
 * Memory: both tables (the engine's key map, lh_keymap.h) take 12 bytes a slot (8-byte digest,
 * 4-byte batch) and are at most 90 % full; a table doubles before an event that could overfill
 * it (counting digests it already holds too) and shrinks only in lh_evidence_trim, so one grown
 * by fresh digests holds 13.3 to 26.7 bytes per entry, and its size is its peak until a trim.
 * The filter is allocated once.
 * No function prints, aborts or exits.
 */
#ifndef LH_EVIDENCE_H
#define LH_EVIDENCE_H

#include <stddef.h>
#include <stdint.h>

typedef struct lh_evidence lh_evidence;

#define LH_EVIDENCE_ABSENT 0   /* neither resident, nor removed in the window, nor aged */
#define LH_EVIDENCE_RESIDENT 1 /* batch = the batch that stored it */
#define LH_EVIDENCE_REMOVED 2  /* batch = the batch of its latest retained removal */
#define LH_EVIDENCE_AGED 3     /* in the aged filter (possibly a false positive) */

#define LH_EVIDENCE_MAX_BATCH 4294967294u            /* batch numbers are 1 .. this */
#define LH_EVIDENCE_MAX_BUCKET 18446744073709551614u /* bucket numbers are 0 .. this (larger: this) */

typedef struct lh_evidence_stats {
  size_t resident;             /* digests resident now */
  size_t evidence;             /* digests with retained removal evidence */
  uint64_t expired;            /* removal records that aged out (ever) */
  uint64_t filter_bits;        /* bits of each of the aged filter's two generations (0: none) */
  uint64_t filter_set;         /* bits set in the current generation */
  uint64_t previous_set;       /* bits set in the previous generation */
  uint64_t filter_inserts;     /* digests put into the filter (ever) */
  uint64_t generation_inserts; /* digests put into the current generation */
  uint64_t rotations;          /* generations completed */
  size_t resident_bytes;       /* memory of the resident table */
  size_t evidence_bytes;       /* memory of the evidence table */
  size_t filter_bytes;         /* memory of the filter (both generations) */
  uint64_t bucket;             /* the latest advanced bucket */
  uint32_t last_batch;         /* the latest batch applied (0: none) */
} lh_evidence_stats;

/* Creates an empty set that retains `ring_buckets` (>= 1) buckets of removals, with an aged
 * filter of two generations of 2^filter_log2_bits bits each (0: no filter; else 6 .. 40), each
 * generation taking `filter_generation` digests (0: a single generation that never rotates, and
 * only one is allocated).
 * LH_OK and *out, or LH_EINVAL / LH_ENOMEM (*out untouched). Destroy with lh_evidence_destroy. */
int lh_evidence_create(lh_evidence **out, uint32_t ring_buckets, uint32_t filter_log2_bits, uint64_t filter_generation,
                       char *err, size_t errlen);

void lh_evidence_destroy(lh_evidence *ev);

/* Moves the current bucket forward to `bucket` (a smaller number is ignored; one above
 * LH_EVIDENCE_MAX_BUCKET counts as that) and expires the
 * removals of buckets older than bucket - (ring_buckets - 1) into the aged filter. Cannot fail. */
void lh_evidence_advance(lh_evidence *ev, uint64_t bucket);

/* Applies one batch's events, in order: kinds[i] is 0 stored, 1 removed, 2 cleared, and event i
 * covers digests[offsets[i] .. offsets[i+1]) (offsets has n_events + 1 entries; a cleared event
 * takes no digests). `batch` must be greater than every batch applied before and at most
 * LH_EVIDENCE_MAX_BATCH. All or nothing: LH_EINVAL (bad arguments) or LH_ENOMEM leaves the set
 * as it was. */
int lh_evidence_apply(lh_evidence *ev, uint32_t batch, const uint8_t *kinds, const int64_t *offsets, size_t n_events,
                      const int64_t *digests, char *err, size_t errlen);

/* For each of n digests: its LH_EVIDENCE_* kind and the batch that goes with it (0 for ABSENT and
 * AGED). Resident wins over removal evidence (a digest stored again after its removal). */
void lh_evidence_lookup(const lh_evidence *ev, const int64_t *digests, size_t n, uint8_t *kinds, uint32_t *batches);

/* A restart: every resident and retained digest goes into the aged filter; resident and
 * evidence become empty and batch numbering may start again at 1. The filter is kept. A digest
 * both resident and retained is put in twice. */
void lh_evidence_forget(lh_evidence *ev);

/* Continues the expiry sweep (see lh_evidence_advance) over at most `budget` slots of the evidence
 * table and returns the slots it still has to examine (0: every expired entry is out of the table
 * and in the aged filter). For a timer that frees expired memory in steps; changes no answer.
 * Cannot fail. */
size_t lh_evidence_sweep(lh_evidence *ev, size_t budget);

/* Gives memory back: a table at most a quarter full (by its 90 % limit) is reallocated at the
 * smallest size that holds its entries at most half full, an empty one is freed. Call it after a
 * finished sweep (lh_evidence_sweep returned 0) to shrink the evidence table; a sweep still under
 * way starts over on the new table. Changes no answer. LH_OK, or LH_ENOMEM (a table that could not
 * be reallocated keeps its size). */
int lh_evidence_trim(lh_evidence *ev, char *err, size_t errlen);

/* The counts and sizes. With `settle` it first finishes the expiry sweep, so they are exact (that
 * takes a scan of the evidence table); without, `evidence` also counts expired entries the sweep
 * has not reached yet, and `expired` / the filter counts lack them. */
void lh_evidence_get_stats(lh_evidence *ev, int settle, lh_evidence_stats *out);

#endif
