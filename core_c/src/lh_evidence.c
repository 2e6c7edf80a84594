/* lh_evidence.c - one worker's eviction evidence (see lh_evidence.h). */
#include "lh_evidence.h"

#include <stdlib.h>
#include <string.h>

#include "lh_common.h"

#define FILTER_HASHES 3

static uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

/* A compact open-addressing map from int64 digests to uint32 batches (0 = empty slot): keys and
 * values in separate arrays (12 bytes a slot), linear probing, at most 90 % full, deletion by
 * backward shift (no tombstones). Growth only in table_reserve. */
typedef struct table {
  int64_t *keys;
  uint32_t *vals; /* 0: the slot is empty */
  size_t mask;    /* capacity - 1 (capacity a power of two), 0 before the first reserve */
  size_t count;
} table;

static size_t table_home(const table *t, int64_t key) { return (size_t)mix64((uint64_t)key) & t->mask; }

static size_t table_limit(size_t cap) { return cap / 10 * 9 + cap % 10 * 9 / 10; }

static uint32_t table_get(const table *t, int64_t key) {
  if (t->vals == NULL) return 0;
  for (size_t i = table_home(t, key);; i = (i + 1) & t->mask) {
    if (t->vals[i] == 0) return 0;
    if (t->keys[i] == key) return t->vals[i];
  }
}

/* Sets key -> val (val != 0) whether or not key is present; room must be reserved. */
static void table_set(table *t, int64_t key, uint32_t val) {
  size_t i = table_home(t, key);
  while (t->vals[i] != 0 && t->keys[i] != key) i = (i + 1) & t->mask;
  if (t->vals[i] == 0) {
    t->keys[i] = key;
    t->count++;
  }
  t->vals[i] = val;
}

/* Empties slot i and shifts later entries of its probe run back into the hole. */
static void table_del_at(table *t, size_t i) {
  size_t hole = i;
  for (size_t j = (i + 1) & t->mask; t->vals[j] != 0; j = (j + 1) & t->mask) {
    size_t home = table_home(t, t->keys[j]);
    int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      t->keys[hole] = t->keys[j];
      t->vals[hole] = t->vals[j];
      hole = j;
    }
  }
  t->vals[hole] = 0;
  t->count--;
}

static void table_del(table *t, int64_t key) {
  if (t->vals == NULL) return;
  size_t i = table_home(t, key);
  while (t->vals[i] != 0 && t->keys[i] != key) i = (i + 1) & t->mask;
  if (t->vals[i] != 0) table_del_at(t, i);
}

/* Room for `extra` more keys: 0, or -1 on allocation failure (the table unchanged). */
static int table_reserve(table *t, size_t extra) {
  size_t cap = t->vals == NULL ? 0 : t->mask + 1;
  if (extra > SIZE_MAX - t->count) return -1;
  size_t need = t->count + extra;
  if (need <= table_limit(cap)) return 0;
  size_t new_cap = cap == 0 ? 64 : cap;
  while (need > table_limit(new_cap)) {
    if (new_cap > SIZE_MAX / 2 / (sizeof(int64_t) + sizeof(uint32_t))) return -1;
    new_cap *= 2;
  }
  int64_t *keys = malloc(new_cap * sizeof *keys);
  uint32_t *vals = calloc(new_cap, sizeof *vals);
  if (keys == NULL || vals == NULL) {
    free(keys);
    free(vals);
    return -1;
  }
  table old = *t;
  t->keys = keys;
  t->vals = vals;
  t->mask = new_cap - 1;
  t->count = 0;
  for (size_t i = 0; i < cap; i++) {
    if (old.vals[i] != 0) table_set(t, old.keys[i], old.vals[i]);
  }
  free(old.keys);
  free(old.vals);
  return 0;
}

static size_t table_memory(const table *t) {
  return t->vals == NULL ? 0 : (t->mask + 1) * (sizeof(int64_t) + sizeof(uint32_t));
}

static void table_free(table *t) {
  free(t->keys);
  free(t->vals);
  memset(t, 0, sizeof *t);
}

typedef struct ring_slot {
  uint64_t bucket;      /* the bucket this slot holds, or UINT64_MAX when it holds none */
  uint32_t first_batch; /* the first batch applied in that bucket */
} ring_slot;

struct lh_evidence {
  table resident; /* digest -> batch that stored it */
  table evidence; /* digest -> batch of its latest retained removal */
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
  uint64_t h1 = mix64((uint64_t)digest ^ 0x9e3779b97f4a7c15ULL);
  uint64_t h2 = mix64(h1 ^ 0xd6e8feb86659fd93ULL) | 1u;
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
  ev->ring_buckets = ring_buckets;
  ev->filter_log2 = filter_log2_bits;
  ev->generation = filter_generation;
  *out = ev;
  return LH_OK;
}

void lh_evidence_destroy(lh_evidence *ev) {
  if (ev == NULL) return;
  table_free(&ev->resident);
  table_free(&ev->evidence);
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
  table *t = &ev->evidence;
  if (t->vals == NULL) {
    ev->sweep_left = 0;
    return;
  }
  while (ev->sweep_left > 0 && budget > 0) {
    size_t i = ev->sweep_at;
    budget--;
    if (t->vals[i] != 0 && t->vals[i] < ev->expired_below) {
      filter_add(ev, t->keys[i]);
      ev->expired++;
      table_del_at(t, i);
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
    ev->sweep_left = ev->evidence.vals == NULL ? 0 : ev->evidence.mask + 1;
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
  if (table_reserve(&ev->resident, stored) != 0 || table_reserve(&ev->evidence, may_remove) != 0) {
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
      for (size_t j = 0; j < n; j++) table_set(&ev->resident, d[j], batch);
    } else if (kinds[i] == 1) {
      for (size_t j = 0; j < n; j++) {
        table_del(&ev->resident, d[j]);
        table_set(&ev->evidence, d[j], batch);
      }
    } else {
      table *r = &ev->resident;
      for (size_t k = 0; r->vals != NULL && k <= r->mask; k++) {
        if (r->vals[k] == 0) continue;
        table_set(&ev->evidence, r->keys[k], batch);
        r->vals[k] = 0;
      }
      r->count = 0;
    }
  }
  sweep(ev, SWEEP_SLOTS);
  return LH_OK;
}

void lh_evidence_lookup(const lh_evidence *ev, const int64_t *digests, size_t n, uint8_t *kinds, uint32_t *batches) {
  for (size_t i = 0; i < n; i++) {
    uint32_t b = table_get(&ev->resident, digests[i]);
    if (b != 0) {
      kinds[i] = LH_EVIDENCE_RESIDENT;
      batches[i] = b;
      continue;
    }
    b = table_get(&ev->evidence, digests[i]);
    if (b != 0 && b < ev->expired_below) { /* expired, not swept out yet: as good as in the filter */
      kinds[i] = ev->filter != NULL ? LH_EVIDENCE_AGED : LH_EVIDENCE_ABSENT;
      batches[i] = 0;
      continue;
    }
    if (b != 0) {
      kinds[i] = LH_EVIDENCE_REMOVED;
      batches[i] = b;
      continue;
    }
    kinds[i] = filter_has(ev, digests[i]) ? LH_EVIDENCE_AGED : LH_EVIDENCE_ABSENT;
    batches[i] = 0;
  }
}

void lh_evidence_forget(lh_evidence *ev) {
  table *tables[2] = {&ev->resident, &ev->evidence};
  for (int m = 0; m < 2; m++) {
    for (size_t k = 0; tables[m]->vals != NULL && k <= tables[m]->mask; k++) {
      if (tables[m]->vals[k] != 0) filter_add(ev, tables[m]->keys[k]);
    }
    table_free(tables[m]);
  }
  for (uint32_t i = 0; i < ev->ring_buckets; i++) ev->ring[i].bucket = UINT64_MAX;
  ev->last_batch = 0;
  ev->expired_below = 0;
  ev->sweep_at = 0;
  ev->sweep_left = 0;
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
  out->resident_bytes = table_memory(&ev->resident);
  out->evidence_bytes = table_memory(&ev->evidence);
  out->filter_bytes = ev->filter == NULL ? 0 : ((size_t)1 << ev->filter_log2) / 8 * (ev->previous != NULL ? 2 : 1);
  out->bucket = ev->bucket;
  out->last_batch = ev->last_batch;
}
