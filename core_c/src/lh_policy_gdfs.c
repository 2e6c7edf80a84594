/* lh_policy_gdfs.c - GreedyDual-Frequency-Size with cost/size = 1.
 *
 * A clock L starts at 0. On insertion and on every hit a block's priority becomes
 * H = L + count (count: accesses since insertion); the victim has the smallest H, the least
 * recent among equals, and evicting it sets L = H(victim). L never decreases (the victim is a
 * minimum and every H was at least the L of its time).
 *
 * Blocks of equal H share a bucket: a list in order of last access (a block enters a bucket only
 * when accessed, so appending keeps the order), found through a map H -> bucket. The distinct H
 * values sit in a 4-ary min-heap of buckets, usually far smaller than the number of blocks, so
 * an access costs a list move and, only when a bucket appears or empties, a short heap update.
 * slot.prio = H, slot.aux = its bucket.
 */
#include <stdlib.h>

#include "lh_common.h"
#include "lh_policy_ops.h"

typedef struct bucket {
  uint64_t h;
  lh_slot_list items;
  uint32_t heap_at; /* position in the heap; the free list's link while unused */
} bucket;

typedef struct gdfs {
  bucket *b;
  size_t cap, used;
  uint32_t free_head;
  lh_keymap by_h; /* H -> bucket */
  uint32_t *heap; /* buckets, smallest H first */
  size_t heap_cap, heap_len;
  uint64_t clock; /* L */
  uint32_t last;  /* the bucket bucket_of returned last (LH_NIL once dropped): insertions at one clock share it */
} gdfs;

static int gdfs_create(void **state, const lh_wa_params *wa, char *err, size_t errlen) {
  (void)wa;
  gdfs *g = calloc(1, sizeof *g);
  if (g == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating the gdfs policy");
  g->free_head = g->last = LH_NIL;
  *state = g;
  return LH_OK;
}

static void gdfs_destroy(void *state) {
  gdfs *g = state;
  if (g == NULL) return;
  free(g->b);
  free(g->heap);
  lh_keymap_free(&g->by_h);
  free(g);
}

static int gdfs_reserve(void *state, size_t slots, const int64_t *keys, size_t n, int32_t cat) {
  (void)keys, (void)cat;
  gdfs *g = state;
  size_t need = slots + 1; /* one bucket per resident slot, plus one while a slot moves */
  if (lh_policy_grow((void **)&g->b, &g->cap, need, sizeof(bucket)) != 0 ||
      lh_policy_grow((void **)&g->heap, &g->heap_cap, need, sizeof(uint32_t)) != 0) {
    return -1;
  }
  /* A request's n accesses create at most n buckets (one more while a slot moves): the map of
   * the distinct priorities grows with them, not with the slots, so it stays small and cached. */
  return lh_keymap_reserve(&g->by_h, n + 1);
}

static inline void place(gdfs *g, size_t i, uint32_t k) {
  g->heap[i] = k;
  g->b[k].heap_at = (uint32_t)i;
}

static void sift_up(gdfs *g, size_t i) {
  uint32_t k = g->heap[i];
  while (i > 0) {
    size_t parent = (i - 1) / 4;
    if (g->b[g->heap[parent]].h <= g->b[k].h) break;
    place(g, i, g->heap[parent]);
    i = parent;
  }
  place(g, i, k);
}

static void sift_down(gdfs *g, size_t i) {
  uint32_t k = g->heap[i];
  for (;;) {
    size_t child = 4 * i + 1;
    if (child >= g->heap_len) break;
    size_t best = child, end = child + 4 < g->heap_len ? child + 4 : g->heap_len;
    for (size_t c = child + 1; c < end; c++) {
      if (g->b[g->heap[c]].h < g->b[g->heap[best]].h) best = c;
    }
    if (g->b[g->heap[best]].h >= g->b[k].h) break;
    place(g, i, g->heap[best]);
    i = best;
  }
  place(g, i, k);
}

/* The bucket of priority h, created (and put in the heap) when missing. */
static uint32_t bucket_of(gdfs *g, uint64_t h) {
  if (g->last != LH_NIL && g->b[g->last].h == h) return g->last;
  uint32_t k = lh_keymap_get(&g->by_h, (int64_t)h);
  if (k != LH_NIL) return g->last = k;
  if (g->free_head != LH_NIL) {
    k = g->free_head;
    g->free_head = g->b[k].heap_at;
  } else {
    k = (uint32_t)g->used++;
  }
  g->b[k].h = h;
  lh_list_init(&g->b[k].items);
  lh_keymap_put(&g->by_h, (int64_t)h, k);
  g->heap[g->heap_len] = k;
  sift_up(g, g->heap_len++);
  return g->last = k;
}

static void drop_if_empty(gdfs *g, uint32_t k) {
  if (g->b[k].items.len != 0) return;
  size_t at = g->b[k].heap_at;
  uint32_t last = g->heap[--g->heap_len];
  if (at < g->heap_len) {
    place(g, at, last);
    sift_up(g, at);
    sift_down(g, g->b[last].heap_at);
  }
  lh_keymap_del(&g->by_h, (int64_t)g->b[k].h);
  if (g->last == k) g->last = LH_NIL;
  g->b[k].heap_at = g->free_head;
  g->free_head = k;
}

static void enter(gdfs *g, lh_slot *slots, uint32_t s) {
  slots[s].prio = g->clock + slots[s].count;
  uint32_t k = bucket_of(g, slots[s].prio);
  lh_list_append(&g->b[k].items, slots, s);
  slots[s].aux = k;
}

static void gdfs_insert(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  (void)a;
  enter(state, slots, s);
}

static void gdfs_hit(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  (void)a;
  gdfs *g = state;
  uint32_t from = slots[s].aux;
  lh_list_unlink(&g->b[from].items, slots, s);
  enter(g, slots, s); /* before dropping `from`: a bucket of the new H must not reuse it mid-move */
  drop_if_empty(g, from);
}

static uint32_t gdfs_evict(void *state, lh_slot *slots, const lh_access *a) {
  (void)a;
  gdfs *g = state;
  uint32_t k = g->heap[0];
  uint32_t victim = g->b[k].items.head;
  g->clock = g->b[k].h;
  lh_list_unlink(&g->b[k].items, slots, victim);
  drop_if_empty(g, k);
  return victim;
}

static uint32_t gdfs_next_victim(const void *state, const lh_slot *slots) {
  (void)slots;
  const gdfs *g = state;
  return g->heap_len ? g->b[g->heap[0]].items.head : LH_NIL;
}

static size_t gdfs_memory(const void *state) {
  const gdfs *g = state;
  return sizeof *g + g->cap * sizeof(bucket) + g->heap_cap * sizeof(uint32_t) + lh_keymap_memory(&g->by_h);
}

static int gdfs_check(const void *state, const lh_slot *slots, uint64_t resident, char *err, size_t errlen) {
  const gdfs *g = state;
  uint64_t total = 0;
  for (size_t i = 0; i < g->heap_len; i++) {
    uint32_t k = g->heap[i];
    const bucket *b = &g->b[k];
    if (b->heap_at != i) return lh_fail(err, errlen, LH_EINVAL, "gdfs: bucket %u has a stale heap index", k);
    if (i > 0 && g->b[g->heap[(i - 1) / 4]].h > b->h) return lh_fail(err, errlen, LH_EINVAL, "gdfs: heap order broken");
    if (b->h < g->clock) return lh_fail(err, errlen, LH_EINVAL, "gdfs: priority below the clock");
    if (b->items.len == 0) return lh_fail(err, errlen, LH_EINVAL, "gdfs: empty bucket kept");
    if (lh_keymap_get(&g->by_h, (int64_t)b->h) != k) return lh_fail(err, errlen, LH_EINVAL, "gdfs: bucket map broken");
    int rc = lh_list_check(&b->items, slots, 1, "gdfs bucket", err, errlen);
    if (rc != LH_OK) return rc;
    for (uint32_t s = b->items.head; s != LH_NIL; s = slots[s].next) {
      if (slots[s].prio != b->h || slots[s].aux != k)
        return lh_fail(err, errlen, LH_EINVAL, "gdfs: slot %u in the wrong bucket", s);
    }
    total += b->items.len;
  }
  if (g->by_h.count != g->heap_len) return lh_fail(err, errlen, LH_EINVAL, "gdfs: map and heap disagree");
  if (total != resident)
    return lh_fail(err, errlen, LH_EINVAL, "gdfs: buckets hold %llu slots, %llu resident", (unsigned long long)total,
                   (unsigned long long)resident);
  return LH_OK;
}

const lh_policy_ops lh_policy_gdfs = {
    .name = "gdfs",
    .create = gdfs_create,
    .destroy = gdfs_destroy,
    .reserve = gdfs_reserve,
    .on_insert = gdfs_insert,
    .on_hit = gdfs_hit,
    .evict = gdfs_evict,
    .next_victim = gdfs_next_victim,
    .memory = gdfs_memory,
    .check = gdfs_check,
};
