/* lh_policy_gdfs.c - GreedyDual-Frequency-Size with cost/size = 1.
 *
 * A clock L starts at 0. On insertion and on every hit a block's priority becomes
 * H = L + count (count: accesses since insertion); the victim has the smallest H, the least
 * recent among equals, and evicting it sets L = H(victim). L never decreases (the victim is a
 * minimum and every H was at least the L of its time), so every H is at least L.
 *
 * Blocks of equal H share a bucket: a list in order of last access (a block enters a bucket only
 * when accessed, so appending keeps the order). Buckets live in two places, by H - L:
 *   - near, H < L + near_w (a power of two): bucket of H at ring[H mod near_w], so finding one
 *     is an array read, and a bitmap of the ring (with a summary of its non-zero words) finds
 *     the smallest H by scanning from L mod near_w; distinct near priorities are fewer than
 *     near_w apart, so no two share a ring position;
 *   - far, H >= L + near_w (a block accessed at least near_w times since its insertion): a map
 *     H -> bucket and a 4-ary min-heap of buckets, as before there was a ring.
 * When an eviction raises L, the far buckets that came within near_w of it move to the ring, so
 * the split always holds. Most accesses give H = L + a small count: a bucket appears or empties
 * every few accesses, which the ring makes a bit flip instead of a map and heap update.
 * slot.prio = H, slot.aux = its bucket; a bucket's heap_at is its heap position while far, the
 * free list's link while unused.
 */
#include <stdlib.h>

#include "lh_common.h"
#include "lh_policy_ops.h"

#define NEAR_DEFAULT 65536 /* H - L below it is near: 256 KiB of ring, 8 KiB of bitmap */

typedef struct bucket {
  uint64_t h;
  lh_slot_list items;
  uint32_t heap_at;
} bucket;

typedef struct gdfs {
  bucket *b;
  size_t cap, used;
  uint32_t free_head;
  /* near buckets */
  size_t near_w;     /* a power of two */
  uint32_t *ring;    /* near_w entries: the bucket of H at H & (near_w - 1), LH_NIL when none */
  uint64_t *bits;    /* bit p: ring[p] holds a bucket */
  uint64_t *summary; /* bit w: bits[w] != 0 */
  size_t n_words, n_near;
  /* far buckets */
  lh_keymap by_h; /* H -> bucket */
  uint32_t *heap; /* buckets, smallest H first */
  size_t heap_cap, heap_len;
  uint64_t clock; /* L */
} gdfs;

static void free_near(gdfs *g) {
  free(g->ring);
  free(g->bits);
  free(g->summary);
  g->ring = NULL;
  g->bits = g->summary = NULL;
}

/* An empty ring of width near_w (a power of two): 0, or -1 out of memory (the old one kept). */
static int make_near(gdfs *g, size_t near_w) {
  size_t n_words = (near_w + 63) / 64;
  uint32_t *ring = malloc(near_w * sizeof *ring);
  uint64_t *bits = calloc(n_words, sizeof *bits), *summary = calloc((n_words + 63) / 64, sizeof *summary);
  if (ring == NULL || bits == NULL || summary == NULL) {
    free(ring);
    free(bits);
    free(summary);
    return -1;
  }
  for (size_t p = 0; p < near_w; p++) ring[p] = LH_NIL;
  free_near(g);
  g->ring = ring;
  g->bits = bits;
  g->summary = summary;
  g->near_w = near_w;
  g->n_words = n_words;
  return 0;
}

static int gdfs_create(void **state, const lh_wa_params *wa, char *err, size_t errlen) {
  (void)wa;
  gdfs *g = calloc(1, sizeof *g);
  if (g == NULL || make_near(g, NEAR_DEFAULT) != 0) {
    free(g);
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating the gdfs policy");
  }
  g->free_head = LH_NIL;
  *state = g;
  return LH_OK;
}

static void gdfs_destroy(void *state) {
  gdfs *g = state;
  if (g == NULL) return;
  lh_policy_free(g->b, g->cap, sizeof(bucket));
  lh_policy_free(g->heap, g->heap_cap, sizeof(uint32_t));
  free_near(g);
  lh_keymap_free(&g->by_h);
  free(g);
}

int lh_gdfs_set_near_width(void *state, size_t width) {
  gdfs *g = state;
  if (width == 0 || (width & (width - 1)) != 0 || width > ((size_t)1 << 30)) return -1;
  if (g->used != 0) return -1; /* before the first block only */
  return make_near(g, width);
}

static int gdfs_reserve(void *state, size_t slots, const int64_t *keys, size_t n, int32_t cat) {
  (void)keys, (void)cat;
  gdfs *g = state;
  size_t need = slots + 1; /* one bucket per resident slot, plus one while a slot moves */
  if (lh_policy_grow((void **)&g->b, &g->cap, need, sizeof(bucket)) != 0 ||
      lh_policy_grow((void **)&g->heap, &g->heap_cap, need, sizeof(uint32_t)) != 0) {
    return -1;
  }
  /* A request's n accesses create at most n far buckets (one more while a slot moves): the map
   * of the far priorities grows with them, not with the slots, so it stays small and cached. */
  return lh_keymap_reserve(&g->by_h, n + 1);
}

static inline int is_near(const gdfs *g, uint64_t h) { return h - g->clock < g->near_w; }

/* ---- the ring ---- */

static inline void near_set(gdfs *g, uint64_t h, uint32_t k) {
  size_t p = (size_t)(h & (g->near_w - 1));
  g->ring[p] = k;
  g->bits[p >> 6] |= (uint64_t)1 << (p & 63);
  g->summary[p >> 12] |= (uint64_t)1 << ((p >> 6) & 63);
  g->n_near++;
}

static inline void near_clear(gdfs *g, uint64_t h) {
  size_t p = (size_t)(h & (g->near_w - 1));
  g->ring[p] = LH_NIL;
  g->bits[p >> 6] &= ~((uint64_t)1 << (p & 63));
  if (g->bits[p >> 6] == 0) g->summary[p >> 12] &= ~((uint64_t)1 << ((p >> 6) & 63));
  g->n_near--;
}

/* The index of x's lowest set bit (x != 0). */
static inline size_t ctz64(uint64_t x) {
#if defined(__GNUC__)
  return (size_t)__builtin_ctzll(x);
#else
  size_t n = 0;
  while ((x & 1) == 0) x >>= 1, n++;
  return n;
#endif
}

/* The first ring position >= p holding a bucket, or near_w when none. */
static size_t near_scan(const gdfs *g, size_t p) {
  if (p >= g->near_w) return g->near_w;
  size_t w = p >> 6;
  uint64_t word = g->bits[w] & (~(uint64_t)0 << (p & 63));
  if (word != 0) return (w << 6) + ctz64(word);
  size_t next = w + 1; /* the next non-zero word, through the summary */
  while (next < g->n_words) {
    uint64_t s = g->summary[next >> 6] & (~(uint64_t)0 << (next & 63));
    if (s != 0) {
      w = ((next >> 6) << 6) + ctz64(s);
      return (w << 6) + ctz64(g->bits[w]);
    }
    next = ((next >> 6) + 1) << 6;
  }
  return g->near_w;
}

/* The near bucket of smallest H (there is one): positions from L's around the ring are the H
 * from L upwards. */
static uint32_t near_min(const gdfs *g) {
  size_t p = near_scan(g, (size_t)(g->clock & (g->near_w - 1)));
  if (p == g->near_w) p = near_scan(g, 0);
  return g->ring[p];
}

/* ---- the far heap ---- */

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

/* Takes far bucket k out of the heap and the map. */
static void far_remove(gdfs *g, uint32_t k) {
  size_t at = g->b[k].heap_at;
  uint32_t last = g->heap[--g->heap_len];
  if (at < g->heap_len) {
    place(g, at, last);
    sift_up(g, at);
    sift_down(g, g->b[last].heap_at);
  }
  lh_keymap_del(&g->by_h, (int64_t)g->b[k].h);
}

/* After L rose: the far buckets now within near_w of it go to the ring. */
static void migrate(gdfs *g) {
  while (g->heap_len > 0 && is_near(g, g->b[g->heap[0]].h)) {
    uint32_t k = g->heap[0];
    far_remove(g, k);
    near_set(g, g->b[k].h, k);
  }
}

/* ---- buckets ---- */

static uint32_t new_bucket(gdfs *g, uint64_t h) {
  uint32_t k;
  if (g->free_head != LH_NIL) {
    k = g->free_head;
    g->free_head = g->b[k].heap_at;
  } else {
    k = (uint32_t)g->used++;
  }
  g->b[k].h = h;
  lh_list_init(&g->b[k].items);
  return k;
}

/* The bucket of priority h, created when missing. */
static uint32_t bucket_of(gdfs *g, uint64_t h) {
  if (is_near(g, h)) {
    uint32_t k = g->ring[h & (g->near_w - 1)];
    if (k != LH_NIL) return k;
    k = new_bucket(g, h);
    near_set(g, h, k);
    return k;
  }
  uint32_t k = lh_keymap_get(&g->by_h, (int64_t)h);
  if (k != LH_NIL) return k;
  k = new_bucket(g, h);
  lh_keymap_put(&g->by_h, (int64_t)h, k);
  g->heap[g->heap_len] = k;
  sift_up(g, g->heap_len++);
  return k;
}

static void drop_if_empty(gdfs *g, uint32_t k) {
  if (g->b[k].items.len != 0) return;
  if (is_near(g, g->b[k].h)) {
    near_clear(g, g->b[k].h);
  } else {
    far_remove(g, k);
  }
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

/* The bucket of the smallest H (there is one), L raised to it and the ring refilled. */
static uint32_t min_bucket(gdfs *g) {
  if (g->n_near == 0) { /* every bucket far: L jumps to the smallest */
    g->clock = g->b[g->heap[0]].h;
    migrate(g);
  }
  uint32_t k = near_min(g);
  if (g->b[k].h != g->clock) {
    g->clock = g->b[k].h;
    migrate(g);
  }
  return k;
}

static uint32_t gdfs_evict(void *state, lh_slot *slots, const lh_access *a) {
  (void)a;
  gdfs *g = state;
  uint32_t k = min_bucket(g);
  uint32_t victim = g->b[k].items.head;
  lh_list_unlink(&g->b[k].items, slots, victim);
  drop_if_empty(g, k);
  return victim;
}

static uint32_t gdfs_next_victim(const void *state, const lh_slot *slots) {
  (void)slots;
  const gdfs *g = state;
  if (g->n_near != 0) return g->b[near_min(g)].items.head;
  return g->heap_len ? g->b[g->heap[0]].items.head : LH_NIL;
}

static size_t gdfs_memory(const void *state) {
  const gdfs *g = state;
  return sizeof *g + g->cap * sizeof(bucket) + g->heap_cap * sizeof(uint32_t) + lh_keymap_memory(&g->by_h) +
         g->near_w * sizeof(uint32_t) + (g->n_words + (g->n_words + 63) / 64) * sizeof(uint64_t);
}

/* A bucket's own invariants: non-empty, priority at least the clock, its slots in order. */
static int check_bucket(const gdfs *g, const lh_slot *slots, uint32_t k, char *err, size_t errlen) {
  const bucket *b = &g->b[k];
  if (b->h < g->clock) return lh_fail(err, errlen, LH_EINVAL, "gdfs: priority below the clock");
  if (b->items.len == 0) return lh_fail(err, errlen, LH_EINVAL, "gdfs: empty bucket kept");
  int rc = lh_list_check(&b->items, slots, 1, "gdfs bucket", err, errlen);
  if (rc != LH_OK) return rc;
  for (uint32_t s = b->items.head; s != LH_NIL; s = slots[s].next) {
    if (slots[s].prio != b->h || slots[s].aux != k)
      return lh_fail(err, errlen, LH_EINVAL, "gdfs: slot %u in the wrong bucket", s);
  }
  return LH_OK;
}

static int gdfs_check(const void *state, const lh_slot *slots, uint64_t resident, char *err, size_t errlen) {
  const gdfs *g = state;
  uint64_t total = 0;
  size_t near = 0;
  for (size_t w = 0; w < g->n_words; w++) { /* the set bits: the ring's buckets */
    if (((g->summary[w >> 6] >> (w & 63)) & 1) != (g->bits[w] != 0))
      return lh_fail(err, errlen, LH_EINVAL, "gdfs: ring summary broken");
    for (uint64_t word = g->bits[w]; word != 0; word &= word - 1) {
      size_t p = (w << 6) + ctz64(word);
      uint32_t k = p < g->near_w ? g->ring[p] : LH_NIL;
      if (k == LH_NIL) return lh_fail(err, errlen, LH_EINVAL, "gdfs: ring bitmap broken at %zu", p);
      if (!is_near(g, g->b[k].h) || (g->b[k].h & (g->near_w - 1)) != p)
        return lh_fail(err, errlen, LH_EINVAL, "gdfs: ring position %zu holds a bucket of another priority", p);
      int rc = check_bucket(g, slots, k, err, errlen);
      if (rc != LH_OK) return rc;
      near++;
      total += g->b[k].items.len;
    }
  }
  if (g->near_w <= 4096) { /* small rings (the tests'): no entry without its bit */
    size_t entries = 0;
    for (size_t p = 0; p < g->near_w; p++) entries += g->ring[p] != LH_NIL;
    if (entries != near) return lh_fail(err, errlen, LH_EINVAL, "gdfs: ring entry without its bit");
  }
  if (near != g->n_near) return lh_fail(err, errlen, LH_EINVAL, "gdfs: near bucket count broken");
  for (size_t i = 0; i < g->heap_len; i++) {
    uint32_t k = g->heap[i];
    const bucket *b = &g->b[k];
    if (b->heap_at != i) return lh_fail(err, errlen, LH_EINVAL, "gdfs: bucket %u has a stale heap index", k);
    if (i > 0 && g->b[g->heap[(i - 1) / 4]].h > b->h) return lh_fail(err, errlen, LH_EINVAL, "gdfs: heap order broken");
    if (is_near(g, b->h)) return lh_fail(err, errlen, LH_EINVAL, "gdfs: a near priority left in the heap");
    if (lh_keymap_get(&g->by_h, (int64_t)b->h) != k) return lh_fail(err, errlen, LH_EINVAL, "gdfs: bucket map broken");
    int rc = check_bucket(g, slots, k, err, errlen);
    if (rc != LH_OK) return rc;
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
    .victim_lead = 8,
    .memory = gdfs_memory,
    .check = gdfs_check,
};
