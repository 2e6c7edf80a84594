/* lh_evidence.c - one worker's eviction evidence (see lh_evidence.h). */
#include "lh_evidence.h"

#include <stdlib.h>
#include <string.h>

#include "lh_buf.h"
#include "lh_common.h"
#include "lh_hash.h"
#include "lh_keymap.h"

#define FILTER_HASHES 3
#define EVIDENCE_LOAD_PERCENT 90 /* both maps: 12-byte slots at most 90 % full (the memory target) */

typedef struct ring_slot {
  uint64_t bucket;      /* the bucket this slot holds, or UINT64_MAX when it holds none */
  uint32_t first_batch; /* the first batch applied in that bucket */
} ring_slot;

struct lh_evidence {
  lh_keymap resident; /* digest -> batch that stored it */
  lh_keymap evidence; /* digest -> batch of its latest retained removal */
  ring_slot *ring;
  uint32_t ring_buckets;
  uint64_t bucket;        /* the current bucket */
  uint32_t last_batch;    /* 0 before the first batch of this epoch */
  uint32_t expired_below; /* evidence with a smaller batch has expired (maybe not swept out yet) */
  size_t sweep_at;        /* the sweep's next slot of the evidence table */
  size_t sweep_left;      /* slots the sweep still has to examine (0: every expired entry is out) */
  uint64_t expired;
  uint64_t *filter;   /* the current generation: 2^filter_log2 bits, NULL when there is no filter */
  uint64_t *previous; /* the generation before it, same size */
  uint32_t filter_log2;
  uint64_t generation; /* inserts per generation (0: one generation forever) */
  uint64_t filter_set; /* bits set in the current generation */
  uint64_t previous_set;
  uint64_t generation_inserts; /* inserts into the current generation */
  uint64_t filter_inserts;
  uint64_t rotations;
};

/* Bloom filter probes by double hashing: h1 + i * h2 (h2 odd, so the probes differ). */
static void filter_probes(const lh_evidence *ev, int64_t digest, uint64_t probes[FILTER_HASHES]) {
  uint64_t h1 = lh_mix64((uint64_t)digest ^ 0x9e3779b97f4a7c15ULL);
  uint64_t h2 = lh_mix64(h1 ^ 0xd6e8feb86659fd93ULL) | 1u;
  uint64_t mask = (ev->filter_log2 >= 64 ? UINT64_MAX : (UINT64_C(1) << ev->filter_log2) - 1);
  for (int i = 0; i < FILTER_HASHES; i++) probes[i] = (h1 + (uint64_t)i * h2) & mask;
}

/* A full generation becomes the previous one (the one before is forgotten) before the next insert. */
static void filter_rotate(lh_evidence *ev) {
  uint64_t *old = ev->previous;
  ev->previous = ev->filter;
  ev->previous_set = ev->filter_set;
  memset(old, 0, (((size_t)1 << ev->filter_log2) / 64) * sizeof *old);
  ev->filter = old;
  ev->filter_set = 0;
  ev->generation_inserts = 0;
  ev->rotations++;
}

static void filter_add(lh_evidence *ev, int64_t digest) {
  if (ev->filter == NULL) return;
  if (ev->generation != 0 && ev->generation_inserts >= ev->generation) filter_rotate(ev);
  uint64_t probes[FILTER_HASHES];
  filter_probes(ev, digest, probes);
  for (int i = 0; i < FILTER_HASHES; i++) {
    uint64_t word = probes[i] >> 6, bit = UINT64_C(1) << (probes[i] & 63);
    if (!(ev->filter[word] & bit)) {
      ev->filter[word] |= bit;
      ev->filter_set++;
    }
  }
  ev->generation_inserts++;
  ev->filter_inserts++;
}

static int bits_have(const uint64_t *bits, const uint64_t probes[FILTER_HASHES]) {
  for (int i = 0; i < FILTER_HASHES; i++) {
    if (!(bits[probes[i] >> 6] & (UINT64_C(1) << (probes[i] & 63)))) return 0;
  }
  return 1;
}

static int filter_has(const lh_evidence *ev, int64_t digest) {
  if (ev->filter == NULL) return 0;
  uint64_t probes[FILTER_HASHES];
  filter_probes(ev, digest, probes);
  return bits_have(ev->filter, probes) || (ev->previous != NULL && bits_have(ev->previous, probes));
}

int lh_evidence_create(lh_evidence **out, uint32_t ring_buckets, uint32_t filter_log2_bits, uint64_t filter_generation,
                       char *err, size_t errlen) {
  if (out == NULL) return lh_fail(err, errlen, LH_EINVAL, "out must not be NULL");
  if (ring_buckets == 0 || ring_buckets > (1u << 24)) {
    return lh_fail(err, errlen, LH_EINVAL, "ring_buckets must be in [1, 16777216], got %u", ring_buckets);
  }
  if (filter_log2_bits != 0 && (filter_log2_bits < 6 || filter_log2_bits > 40)) {
    return lh_fail(err, errlen, LH_EINVAL, "filter_log2_bits must be 0 or in [6, 40], got %u", filter_log2_bits);
  }
  lh_evidence *ev = calloc(1, sizeof *ev);
  if (ev == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating the evidence set");
  ev->ring = malloc(ring_buckets * sizeof *ev->ring);
  if (filter_log2_bits != 0) {
    ev->filter = calloc((size_t)1 << (filter_log2_bits - 6), sizeof *ev->filter);
    if (filter_generation != 0) ev->previous = calloc((size_t)1 << (filter_log2_bits - 6), sizeof *ev->previous);
    lh_advise_huge(ev->filter, ((size_t)1 << (filter_log2_bits - 6)) * sizeof *ev->filter);
    lh_advise_huge(ev->previous, ((size_t)1 << (filter_log2_bits - 6)) * sizeof *ev->previous);
  }
  if (ev->ring == NULL ||
      (filter_log2_bits != 0 && (ev->filter == NULL || (filter_generation != 0 && ev->previous == NULL)))) {
    free(ev->ring);
    free(ev->filter);
    free(ev->previous);
    free(ev);
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating the evidence set");
  }
  for (uint32_t i = 0; i < ring_buckets; i++) ev->ring[i].bucket = UINT64_MAX;
  ev->resident.max_load_percent = EVIDENCE_LOAD_PERCENT;
  ev->evidence.max_load_percent = EVIDENCE_LOAD_PERCENT;
  ev->ring_buckets = ring_buckets;
  ev->filter_log2 = filter_log2_bits;
  ev->generation = filter_generation;
  *out = ev;
  return LH_OK;
}

void lh_evidence_destroy(lh_evidence *ev) {
  if (ev == NULL) return;
  lh_keymap_free(&ev->resident);
  lh_keymap_free(&ev->evidence);
  free(ev->ring);
  free(ev->filter);
  free(ev->previous);
  free(ev);
}

#define SWEEP_SLOTS 4096 /* slots of the evidence table one advance or apply examines at most */

/* Examines up to `budget` slots of the evidence table, from where the last call stopped, and
 * moves the expired entries (batch below expired_below) into the aged filter. Until the sweep
 * has passed, an expired entry still in the table is answered AGED by lookups, so spreading the
 * work over calls changes no answer, only when memory is freed. Deleting shifts later entries of
 * the probe run back into the emptied slot, which is examined again; entries only ever move
 * into slots the pass has not finished, so none is skipped, and one examined twice is harmless. */
static void sweep(lh_evidence *ev, size_t budget) {
  lh_keymap *t = &ev->evidence;
  if (t->slots == NULL) {
    ev->sweep_left = 0;
    return;
  }
  while (ev->sweep_left > 0 && budget > 0) {
    size_t i = ev->sweep_at;
    budget--;
    uint32_t b = lh_keymap_val(t, i);
    if (b != LH_NIL && b < ev->expired_below) {
      filter_add(ev, lh_keymap_key(t, i));
      ev->expired++;
      lh_keymap_del_at(t, i);
      continue;
    }
    ev->sweep_at = (i + 1) & t->mask;
    ev->sweep_left--;
  }
}

void lh_evidence_advance(lh_evidence *ev, uint64_t bucket) {
  if (bucket > LH_EVIDENCE_MAX_BUCKET) bucket = LH_EVIDENCE_MAX_BUCKET; /* UINT64_MAX marks an empty slot */
  if (bucket < ev->bucket) return;
  ev->bucket = bucket;
  uint64_t oldest = bucket >= ev->ring_buckets - 1 ? bucket - (ev->ring_buckets - 1) : 0;
  uint32_t threshold = ev->last_batch + 1; /* no retained bucket saw a batch: all expire */
  for (uint32_t i = 0; i < ev->ring_buckets; i++) {
    const ring_slot *s = &ev->ring[i];
    if (s->bucket != UINT64_MAX && s->bucket >= oldest && s->bucket <= bucket && s->first_batch < threshold) {
      threshold = s->first_batch;
    }
  }
  if (threshold > ev->expired_below) { /* a new pass over the whole table */
    ev->expired_below = threshold;
    ev->sweep_left = lh_keymap_capacity(&ev->evidence);
  }
  sweep(ev, SWEEP_SLOTS);
}

int lh_evidence_apply(lh_evidence *ev, uint32_t batch, const uint8_t *kinds, const int64_t *offsets, size_t n_events,
                      const int64_t *digests, char *err, size_t errlen) {
  if (batch <= ev->last_batch || batch > LH_EVIDENCE_MAX_BATCH) {
    return lh_fail(err, errlen, LH_EINVAL, "batch %u must be in (%u, %u]", batch, ev->last_batch,
                   LH_EVIDENCE_MAX_BATCH);
  }
  if (n_events > 0 && (kinds == NULL || offsets == NULL)) {
    return lh_fail(err, errlen, LH_EINVAL, "kinds and offsets must not be NULL");
  }
  /* Validate everything and count the room needed before changing anything. */
  size_t stored = 0, removed = 0;
  int clears = 0;
  if (n_events > 0 && offsets[0] != 0) return lh_fail(err, errlen, LH_EINVAL, "offsets[0] must be 0");
  for (size_t i = 0; i < n_events; i++) {
    if (offsets[i + 1] < offsets[i]) return lh_fail(err, errlen, LH_EINVAL, "offsets must not decrease");
    size_t n = (size_t)(offsets[i + 1] - offsets[i]);
    if (n > 0 && digests == NULL) return lh_fail(err, errlen, LH_EINVAL, "digests must not be NULL");
    switch (kinds[i]) {
      case 0: stored += n; break;
      case 1: removed += n; break;
      case 2:
        if (n != 0) return lh_fail(err, errlen, LH_EINVAL, "event %zu: a cleared event takes no digests", i);
        clears = 1;
        break;
      default: return lh_fail(err, errlen, LH_EINVAL, "event %zu: kind %u is not 0, 1 or 2", i, kinds[i]);
    }
  }
  /* Every digest that can gain removal evidence: the removed ones, and on a clear every resident
   * one (resident now or stored by this batch). */
  size_t may_remove = removed + (clears ? ev->resident.count + stored : 0);
  size_t evidence_mask = ev->evidence.mask;
  if (lh_keymap_reserve(&ev->resident, stored) != 0 || lh_keymap_reserve(&ev->evidence, may_remove) != 0) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory applying batch %u", batch);
  }
  if (ev->evidence.mask != evidence_mask && ev->sweep_left > 0) { /* rehashed mid-pass: start over */
    ev->sweep_at = 0;
    ev->sweep_left = ev->evidence.mask + 1;
  }
  ring_slot *slot = &ev->ring[ev->bucket % ev->ring_buckets];
  if (slot->bucket != ev->bucket) {
    slot->bucket = ev->bucket;
    slot->first_batch = batch;
  }
  ev->last_batch = batch;
  for (size_t i = 0; i < n_events; i++) {
    const int64_t *d = digests + offsets[i];
    size_t n = (size_t)(offsets[i + 1] - offsets[i]);
    if (kinds[i] == 0) {
      for (size_t j = 0; j < n; j++) lh_keymap_set(&ev->resident, d[j], batch);
    } else if (kinds[i] == 1) {
      for (size_t j = 0; j < n; j++) {
        lh_keymap_del(&ev->resident, d[j]);
        lh_keymap_set(&ev->evidence, d[j], batch);
      }
    } else {
      const lh_keymap *r = &ev->resident;
      for (size_t k = 0; k < lh_keymap_capacity(r); k++) {
        if (lh_keymap_val(r, k) != LH_NIL) lh_keymap_set(&ev->evidence, lh_keymap_key(r, k), batch);
      }
      lh_keymap_clear(&ev->resident);
    }
  }
  sweep(ev, SWEEP_SLOTS);
  return LH_OK;
}

void lh_evidence_lookup(const lh_evidence *ev, const int64_t *digests, size_t n, uint8_t *kinds, uint32_t *batches) {
  for (size_t i = 0; i < n; i++) {
    uint32_t b = lh_keymap_get(&ev->resident, digests[i]);
    if (b != LH_NIL) {
      kinds[i] = LH_EVIDENCE_RESIDENT;
      batches[i] = b;
      continue;
    }
    b = lh_keymap_get(&ev->evidence, digests[i]);
    if (b != LH_NIL && b < ev->expired_below) { /* expired, not swept out yet: as good as in the filter */
      kinds[i] = ev->filter != NULL ? LH_EVIDENCE_AGED : LH_EVIDENCE_ABSENT;
      batches[i] = 0;
      continue;
    }
    if (b != LH_NIL) {
      kinds[i] = LH_EVIDENCE_REMOVED;
      batches[i] = b;
      continue;
    }
    kinds[i] = filter_has(ev, digests[i]) ? LH_EVIDENCE_AGED : LH_EVIDENCE_ABSENT;
    batches[i] = 0;
  }
}

void lh_evidence_forget(lh_evidence *ev) {
  lh_keymap *maps[2] = {&ev->resident, &ev->evidence};
  for (int m = 0; m < 2; m++) {
    for (size_t k = 0; k < lh_keymap_capacity(maps[m]); k++) {
      if (lh_keymap_val(maps[m], k) != LH_NIL) filter_add(ev, lh_keymap_key(maps[m], k));
    }
    lh_keymap_free(maps[m]);
  }
  for (uint32_t i = 0; i < ev->ring_buckets; i++) ev->ring[i].bucket = UINT64_MAX;
  ev->last_batch = 0;
  ev->expired_below = 0;
  ev->sweep_at = 0;
  ev->sweep_left = 0;
}

size_t lh_evidence_sweep(lh_evidence *ev, size_t budget) {
  sweep(ev, budget);
  return ev->sweep_left;
}

/* Moves m's entries into a map sized for them (at most about half full); -1 on allocation failure
 * (m unchanged). An empty map is freed. */
static int map_shrink(lh_keymap *m) {
  if (m->slots == NULL) return 0;
  size_t cap = lh_keymap_capacity(m);
  if (m->count == 0) {
    lh_keymap_free(m);
    return 0;
  }
  if (m->count > lh_keymap_room(m) / 4) return 0;
  lh_keymap fresh;
  memset(&fresh, 0, sizeof fresh);
  fresh.max_load_percent = m->max_load_percent;
  fresh.run_bits = m->run_bits;
  if (lh_keymap_reserve(&fresh, m->count * 2) != 0) return -1;
  if (lh_keymap_capacity(&fresh) >= cap) { /* already as small as it gets */
    lh_keymap_free(&fresh);
    return 0;
  }
  for (size_t i = 0; i < cap; i++) {
    if (lh_keymap_val(m, i) != LH_NIL) lh_keymap_put(&fresh, lh_keymap_key(m, i), lh_keymap_val(m, i));
  }
  lh_keymap_free(m);
  *m = fresh;
  return 0;
}

int lh_evidence_trim(lh_evidence *ev, char *err, size_t errlen) {
  size_t evidence_mask = ev->evidence.mask;
  if (map_shrink(&ev->resident) != 0 || map_shrink(&ev->evidence) != 0) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory shrinking the evidence tables");
  }
  if (ev->evidence.slots == NULL) {
    ev->sweep_at = 0;
    ev->sweep_left = 0;
  } else if (ev->evidence.mask != evidence_mask && ev->sweep_left > 0) { /* rehashed mid-pass: start over */
    ev->sweep_at = 0;
    ev->sweep_left = ev->evidence.mask + 1;
  } else if (ev->evidence.mask != evidence_mask) {
    ev->sweep_at = 0;
  }
  return LH_OK;
}

void lh_evidence_get_stats(lh_evidence *ev, int settle, lh_evidence_stats *out) {
  if (settle) sweep(ev, SIZE_MAX);
  memset(out, 0, sizeof *out);
  out->resident = ev->resident.count;
  out->evidence = ev->evidence.count;
  out->expired = ev->expired;
  out->filter_bits = ev->filter == NULL ? 0 : UINT64_C(1) << ev->filter_log2;
  out->filter_set = ev->filter_set;
  out->previous_set = ev->previous_set;
  out->filter_inserts = ev->filter_inserts;
  out->generation_inserts = ev->generation_inserts;
  out->rotations = ev->rotations;
  out->resident_bytes = lh_keymap_memory(&ev->resident);
  out->evidence_bytes = lh_keymap_memory(&ev->evidence);
  out->filter_bytes = ev->filter == NULL ? 0 : ((size_t)1 << ev->filter_log2) / 8 * (ev->previous != NULL ? 2 : 1);
  out->bucket = ev->bucket;
  out->last_batch = ev->last_batch;
}
