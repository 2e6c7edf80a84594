/* lh_hybrid.c - the hybrid lane core (see lh_hybrid.h): Full blocks and Linear states in one
 * byte-weighted recency pool.
 *
 * Positions are 1-based and grow with every touch; a higher position is more recent. Every object
 * owns one marker, the bit of its latest position in its type's bitset; the bytes more recent
 * than position p are full_charge x (Full markers above p) + linear_charge x (Linear markers
 * above p), counted with a rank structure per type (bitset + Fenwick tree over 512-position
 * superblocks). One map holds, per key, the positions of its Full block and of its Linear state (a
 * state is written only with its Full block, just before it, so a key has a Full position whenever
 * it has a state, and the state's is the lower): one probe finds both. Stale positions (bits
 * cleared by a later touch) and dead ones (below the TTL watermark) are compacted away when the
 * positions exceed four times the alive objects plus a slack of 4096: the alive markers are renumbered
 * 1 .. A in order, the dead entries dropped from the maps; no result changes.
 *
 * TTL: epochs (first position, time) as requests commit; the times never decrease along the
 * positions, so everything below the watermark is dead and everything at or above it alive.
 */
#include "lh_hybrid.h"

#include <stdlib.h>
#include <string.h>

#include "lh_batch.h"
#include "lh_buf.h"
#include "lh_common.h"
#include "lh_keymap.h"

#define SB_SHIFT 9 /* 512 positions per superblock */
#define SB_WORDS 8 /* 64-bit words per superblock */
#define SLACK 4096u
#define COMPACT_FACTOR 4u /* compaction when the positions exceed this many per alive object + SLACK */
#define MIN_SB 16u
#define POS_LIMIT 0x7FFFFFFEull  /* largest position */
#define MAX_OBJECTS (1ull << 30) /* objects of both types tracked at once */
#define MAP_LOAD_PERCENT 80
#define MIN_SLOTS 64u

enum { FULL = 0, LINEAR = 1 };

__extension__ typedef unsigned __int128 u128;

typedef struct rankset {
  uint64_t *bits; /* SB_WORDS x nsb words */
  uint64_t count; /* set bits */
  size_t bytes;   /* allocated (a big table's block: lh_realloc_huge, lh_free_huge) */
} rankset;

typedef struct counts2 {
  int32_t n[2]; /* markers of each type */
} counts2;

/* A key and the positions of its two objects (LH_NIL: none). pos[FULL] == LH_NIL: an empty slot. */
typedef struct pslot {
  int64_t key;
  uint32_t pos[2];
} pslot;

/* Open addressing, home lh_mix_runs(key, PM_RUN_BITS) & mask (runs of 4 consecutive keys side by
 * side, as in the lane's map: lh_keymap.h), linear probing, no deletion (a compaction rebuilds the
 * map without its dead keys); grows only in pm_reserve. */
#define PM_RUN_BITS 2
typedef struct pairmap {
  pslot *slots; /* NULL before the first reserve */
  size_t mask;
  size_t count; /* keys held */
} pairmap;

struct lh_hybrid {
  lh_hybrid_config cfg;
  uint64_t charge[2];
  int linear; /* linear mode: states are written and restore points need them */
  uint64_t step;
  pairmap map;
  rankset rs[2];
  counts2 *fen;     /* Fenwick tree over the closed superblocks (below open_sb), both types at once */
  uint64_t nsb;     /* superblocks allocated, for both types */
  uint64_t open_sb; /* the superblock new positions go to: its counts are not in the tree yet */
  uint64_t top;     /* highest position used */
  /* TTL epochs: a ring of (first position, time) */
  uint64_t *ep_start;
  int64_t *ep_ts;
  size_t ep_head, ep_len, ep_cap;
  uint64_t watermark; /* positions below are dead; 0: none */
  uint64_t expired;
  /* per-request scratch: the running maximum of the Full coverage */
  uint64_t *pref;
  size_t *slot; /* the map slot of each key looked up in phase 1 (NO_SLOT: absent), reused by the
                 * commit: a present key's slot does not move during a request */
  size_t n_slot;
  size_t pref_cap;
  uint64_t n_requests, n_accesses, n_compactions;
};

/* ---- arithmetic --------------------------------------------------------------------------- */

static inline uint64_t sat64(u128 x) { return x > UINT64_MAX ? UINT64_MAX : (uint64_t)x; }

static inline uint64_t max64(uint64_t a, uint64_t b) { return a > b ? a : b; }

static inline unsigned popcount64(uint64_t x) {
#if defined(__GNUC__)
  return (unsigned)__builtin_popcountll(x);
#else
  unsigned n = 0;
  for (; x; x &= x - 1) n++;
  return n;
#endif
}

/* ---- the map ------------------------------------------------------------------------------ */

static inline size_t pm_home(const pairmap *m, int64_t key) {
  return (size_t)lh_mix_runs((uint64_t)key, PM_RUN_BITS) & m->mask;
}

/* The slot holding key or the empty slot ending its probe run. The map must have slots. */
static inline size_t pm_find(const pairmap *m, int64_t key) {
  size_t i = pm_home(m, key);
  while (m->slots[i].pos[FULL] != LH_NIL && m->slots[i].key != key) i = (i + 1) & m->mask;
  return i;
}

static LH_ALWAYS_INLINE void pm_prefetch(const pairmap *m, int64_t key) {
#if defined(__GNUC__)
  if (m->slots != NULL) __builtin_prefetch(&m->slots[pm_home(m, key)], 0, 3);
#else
  (void)m;
  (void)key;
#endif
}

static pslot *pm_alloc(size_t n) {
  pslot *slots = malloc(n * sizeof *slots);
  if (slots != NULL) {
    lh_advise_huge(slots, n * sizeof *slots);
    for (size_t i = 0; i < n; i++) slots[i].pos[FULL] = slots[i].pos[LINEAR] = LH_NIL;
  }
  return slots;
}

/* Room for `extra` more keys: 0, or -1 out of memory (the map unchanged). */
static int pm_reserve(pairmap *m, size_t extra) {
  size_t cap = m->slots == NULL ? 0 : m->mask + 1;
  if (extra > SIZE_MAX / 100 - m->count) return -1;
  size_t need = m->count + extra;
  if (cap != 0 && need * 100 <= cap * MAP_LOAD_PERCENT) return 0;
  size_t grown = cap ? cap : MIN_SLOTS;
  while (need * 100 > grown * MAP_LOAD_PERCENT) {
    if (grown > SIZE_MAX / 2 / sizeof(pslot)) return -1;
    grown *= 2;
  }
  pslot *slots = pm_alloc(grown);
  if (slots == NULL) return -1;
  pairmap next = {slots, grown - 1, m->count};
  for (size_t i = 0; i < cap; i++) {
    if (m->slots[i].pos[FULL] != LH_NIL) next.slots[pm_find(&next, m->slots[i].key)] = m->slots[i];
  }
  free(m->slots);
  *m = next;
  return 0;
}

/* ---- rank structure ----------------------------------------------------------------------- */

static void fen_add(lh_hybrid *h, uint64_t sb, int t, int32_t delta) {
  for (uint64_t i = sb + 1; i <= h->nsb; i += i & (~i + 1)) h->fen[i - 1].n[t] += delta;
}

/* Markers of each type at positions 1 .. p (p clamped to the positions in use): one walk of the
 * tree for both types, then the words of p's superblock. */
static void rank2(const lh_hybrid *h, uint64_t p, uint64_t out[2]) {
  if (p > h->top) p = h->top;
  out[0] = out[1] = 0;
  if (p == 0) return;
  uint64_t sb = p >> SB_SHIFT, w = p >> 6; /* sb <= open_sb: the superblocks below it are closed */
  int64_t s0 = 0, s1 = 0;
  for (uint64_t i = sb; i > 0; i -= i & (~i + 1)) {
    s0 += h->fen[i - 1].n[0];
    s1 += h->fen[i - 1].n[1];
  }
  unsigned b = (unsigned)(p & 63);
  uint64_t mask = b == 63 ? UINT64_MAX : ((2ull << b) - 1);
  for (int t = 0; t < 2; t++) {
    const uint64_t *bits = h->rs[t].bits;
    uint64_t c = 0;
    for (uint64_t i = sb * SB_WORDS; i < w; i++) c += popcount64(bits[i]);
    out[t] = (uint64_t)(t == 0 ? s0 : s1) + c + popcount64(bits[w] & mask);
  }
}

static uint64_t rank_of(const lh_hybrid *h, int t, uint64_t p) {
  uint64_t c[2];
  rank2(h, p, c);
  return c[t];
}

/* Adds the superblocks from open_sb up to (not including) sb to the tree. */
static void close_until(lh_hybrid *h, uint64_t sb) {
  for (; h->open_sb < sb; h->open_sb++) {
    for (int t = 0; t < 2; t++) {
      int32_t c = 0;
      for (uint64_t w = 0; w < SB_WORDS; w++) c += (int32_t)popcount64(h->rs[t].bits[h->open_sb * SB_WORDS + w]);
      if (c) fen_add(h, h->open_sb, t, c);
    }
  }
}

static void set_bit(lh_hybrid *h, int t, uint64_t p) { /* p is the new top: no tree update */
  close_until(h, p >> SB_SHIFT);
  h->rs[t].bits[p >> 6] |= 1ull << (p & 63);
  h->rs[t].count++;
}

static void clear_bit(lh_hybrid *h, int t, uint64_t p) {
  h->rs[t].bits[p >> 6] &= ~(1ull << (p & 63));
  if ((p >> SB_SHIFT) < h->open_sb) fen_add(h, p >> SB_SHIFT, t, -1);
  h->rs[t].count--;
}

/* The tree of the closed superblocks (below open_sb) from the bitsets. */
static void fen_build(lh_hybrid *h) {
  for (uint64_t sb = 0; sb < h->nsb; sb++) {
    for (int t = 0; t < 2; t++) {
      int32_t c = 0;
      for (uint64_t w = 0; sb < h->open_sb && w < SB_WORDS; w++)
        c += (int32_t)popcount64(h->rs[t].bits[sb * SB_WORDS + w]);
      h->fen[sb].n[t] = c;
    }
  }
  for (uint64_t i = 1; i <= h->nsb; i++) {
    uint64_t j = i + (i & (~i + 1));
    if (j <= h->nsb) {
      h->fen[j - 1].n[0] += h->fen[i - 1].n[0];
      h->fen[j - 1].n[1] += h->fen[i - 1].n[1];
    }
  }
}

/* Room for positions up to `need` in both ranksets; 0, or -1 out of memory (nothing changed
 * that matters: grown arrays keep their contents and the old size stays in force). */
static int reserve_positions(lh_hybrid *h, uint64_t need) {
  if (need < (h->nsb << SB_SHIFT)) return 0;
  uint64_t nsb = h->nsb ? h->nsb : MIN_SB;
  while (need >= (nsb << SB_SHIFT)) nsb *= 2;
  for (int t = 0; t < 2; t++) {
    size_t bytes = nsb * SB_WORDS * sizeof(uint64_t);
    uint64_t *bits = lh_realloc_huge(h->rs[t].bits, h->rs[t].bytes, h->nsb * SB_WORDS * sizeof(uint64_t), bytes);
    if (bits == NULL) return -1;
    h->rs[t].bits = bits;
    h->rs[t].bytes = bytes;
  }
  counts2 *fen = realloc(h->fen, nsb * sizeof(counts2));
  if (fen == NULL) return -1;
  h->fen = fen;
  for (int t = 0; t < 2; t++) {
    memset(h->rs[t].bits + h->nsb * SB_WORDS, 0, (nsb - h->nsb) * SB_WORDS * sizeof(uint64_t));
  }
  h->nsb = nsb;
  fen_build(h);
  return 0;
}

/* ---- the pool ----------------------------------------------------------------------------- */

static inline uint64_t alive_from(const lh_hybrid *h) { return h->watermark > 1 ? h->watermark : 1; }

static uint64_t bytes_of(const lh_hybrid *h, const uint64_t above[2]) {
  return sat64((u128)above[FULL] * h->charge[FULL] + (u128)above[LINEAR] * h->charge[LINEAR]);
}

/* Bytes of the markers at positions above p. */
static uint64_t bytes_above(const lh_hybrid *h, uint64_t p) {
  uint64_t c[2];
  rank2(h, p, c);
  const uint64_t above[2] = {h->rs[FULL].count - c[FULL], h->rs[LINEAR].count - c[LINEAR]};
  return bytes_of(h, above);
}

/* The markers of each type at positions lo+1 .. hi (lo < hi), from the words between. */
static void count_between(const lh_hybrid *h, uint64_t lo, uint64_t hi, uint64_t out[2]) {
  uint64_t first = lo + 1, wf = first >> 6, wl = hi >> 6;
  uint64_t head = UINT64_MAX << (first & 63);
  uint64_t tail = (hi & 63) == 63 ? UINT64_MAX : ((2ull << (hi & 63)) - 1);
  for (int t = 0; t < 2; t++) {
    const uint64_t *bits = h->rs[t].bits;
    uint64_t c;
    if (wf == wl) {
      c = popcount64(bits[wf] & head & tail);
    } else {
      c = popcount64(bits[wf] & head) + popcount64(bits[wl] & tail);
      for (uint64_t w = wf + 1; w < wl; w++) c += popcount64(bits[w]);
    }
    out[t] = c;
  }
}

/* Phase 1 asks the markers above many positions of one snapshot, mostly close to each other (a
 * request's blocks and states were committed together): the cursor keeps the last answer and
 * counts only the words between it and the next position when they are near, the rank structure
 * otherwise. Same counts either way. */
#define NEAR_POSITIONS 384u

typedef struct cursor {
  uint64_t pos; /* 0: no answer yet */
  uint64_t above[2];
} cursor;

static uint64_t cursor_bytes_above(const lh_hybrid *h, cursor *c, uint64_t p) {
  uint64_t d[2];
  if (c->pos != 0 && p <= c->pos && c->pos - p <= NEAR_POSITIONS) {
    if (p < c->pos) {
      count_between(h, p, c->pos, d);
      c->above[FULL] += d[FULL];
      c->above[LINEAR] += d[LINEAR];
    }
  } else if (c->pos != 0 && p > c->pos && p - c->pos <= NEAR_POSITIONS) {
    count_between(h, c->pos, p, d);
    c->above[FULL] -= d[FULL];
    c->above[LINEAR] -= d[LINEAR];
  } else {
    rank2(h, p, d);
    c->above[FULL] = h->rs[FULL].count - d[FULL];
    c->above[LINEAR] = h->rs[LINEAR].count - d[LINEAR];
  }
  c->pos = p;
  return bytes_of(h, c->above);
}

#define NO_SLOT SIZE_MAX

/* RequiredBytes of the type-t object of the key in map slot i: 0 when there is none or it is dead
 * (a real answer is >= its charge >= 1). */
static uint64_t required(const lh_hybrid *h, cursor *c, int t, size_t i) {
  uint32_t p = h->map.slots[i].pos[t];
  if (p == LH_NIL || p < alive_from(h)) return 0;
  return sat64((u128)h->charge[t] + cursor_bytes_above(h, c, p));
}

/* Moves the type-t object of the key in map slot i to a new top position. */
static void touch(lh_hybrid *h, int t, size_t i) {
  uint32_t old = h->map.slots[i].pos[t];
  if (old != LH_NIL) clear_bit(h, t, old);
  uint64_t p = ++h->top;
  h->map.slots[i].pos[t] = (uint32_t)p;
  set_bit(h, t, p);
}

/* touch(LINEAR, i) then touch(FULL, i), with one walk of the tree when both old markers are in
 * the same closed superblock (the usual case: they were written together). */
static void touch_both(lh_hybrid *h, size_t i) {
  uint32_t *pos = h->map.slots[i].pos;
  uint32_t old_l = pos[LINEAR], old_f = pos[FULL];
  if (old_l != LH_NIL && old_f != LH_NIL && (old_l >> SB_SHIFT) == (old_f >> SB_SHIFT)) {
    uint64_t sb = old_l >> SB_SHIFT;
    h->rs[LINEAR].bits[old_l >> 6] &= ~(1ull << (old_l & 63));
    h->rs[FULL].bits[old_f >> 6] &= ~(1ull << (old_f & 63));
    h->rs[LINEAR].count--;
    h->rs[FULL].count--;
    if (sb < h->open_sb) {
      for (uint64_t k = sb + 1; k <= h->nsb; k += k & (~k + 1)) {
        h->fen[k - 1].n[FULL]--;
        h->fen[k - 1].n[LINEAR]--;
      }
    }
    pos[LINEAR] = (uint32_t)++h->top;
    set_bit(h, LINEAR, h->top);
    pos[FULL] = (uint32_t)++h->top;
    set_bit(h, FULL, h->top);
    return;
  }
  touch(h, LINEAR, i);
  touch(h, FULL, i);
}

static uint64_t alive_count(const lh_hybrid *h, int t) { return h->rs[t].count - rank_of(h, t, alive_from(h) - 1); }

/* ---- TTL ------------------------------------------------------------------------------------ */

static inline uint64_t age_ns(int64_t now, int64_t ts) { return ts >= now ? 0 : (uint64_t)now - (uint64_t)ts; }

static uint64_t full_before(const lh_hybrid *h, uint64_t b) { return b <= 1 ? 0 : rank_of(h, FULL, b - 1); }

void lh_hybrid_advance_time(lh_hybrid *h, int64_t now) {
  if (h->cfg.ttl_ns == 0) return;
  uint64_t old = h->watermark;
  int moved = 0;
  while (h->ep_len > 0 && age_ns(now, h->ep_ts[h->ep_head]) >= (uint64_t)h->cfg.ttl_ns) {
    h->ep_head = (h->ep_head + 1) % h->ep_cap;
    h->ep_len--;
    h->watermark = h->ep_len > 0 ? h->ep_start[h->ep_head] : h->top + 1;
    moved = 1;
  }
  if (moved && h->watermark > old) h->expired += full_before(h, h->watermark) - full_before(h, old);
}

static int reserve_epoch(lh_hybrid *h) {
  if (h->ep_len < h->ep_cap) return 0;
  size_t cap = h->ep_cap ? h->ep_cap * 2 : 16;
  uint64_t *start = malloc(cap * sizeof *start);
  int64_t *ts = malloc(cap * sizeof *ts);
  if (start == NULL || ts == NULL) {
    free(start);
    free(ts);
    return -1;
  }
  for (size_t i = 0; i < h->ep_len; i++) {
    start[i] = h->ep_start[(h->ep_head + i) % h->ep_cap];
    ts[i] = h->ep_ts[(h->ep_head + i) % h->ep_cap];
  }
  free(h->ep_start);
  free(h->ep_ts);
  h->ep_start = start;
  h->ep_ts = ts;
  h->ep_cap = cap;
  h->ep_head = 0;
  return 0;
}

static void begin_commit(lh_hybrid *h, int64_t now, uint64_t next) {
  if (h->cfg.ttl_ns == 0) return;
  size_t back = (h->ep_head + h->ep_len + h->ep_cap - 1) % (h->ep_cap ? h->ep_cap : 1);
  int64_t ts = h->ep_len == 0 ? now : (now > h->ep_ts[back] ? now : h->ep_ts[back]);
  if (h->ep_len > 0 && h->ep_ts[back] == ts) return; /* the new positions join the last epoch */
  size_t at = (h->ep_head + h->ep_len) % h->ep_cap;
  h->ep_start[at] = next;
  h->ep_ts[at] = ts;
  h->ep_len++;
}

/* ---- compaction ----------------------------------------------------------------------------- */

static void reverse_u64(uint64_t *a, size_t lo, size_t hi) { /* [lo, hi) */
  for (; lo + 1 < hi; lo++, hi--) {
    uint64_t t = a[lo];
    a[lo] = a[hi - 1];
    a[hi - 1] = t;
  }
}

/* Rotates the epoch ring so that its oldest epoch is at index 0 (in place). */
static void ring_to_front(lh_hybrid *h) {
  if (h->ep_head == 0) return;
  uint64_t *ts = (uint64_t *)(void *)h->ep_ts; /* same width: the rotation only moves bits */
  for (int k = 0; k < 2; k++) {
    uint64_t *a = k == 0 ? h->ep_start : ts;
    reverse_u64(a, 0, h->ep_head);
    reverse_u64(a, h->ep_head, h->ep_cap);
    reverse_u64(a, 0, h->ep_cap);
  }
  h->ep_head = 0;
}

/* Markers of both types at positions 1 .. p. */
static uint64_t rank_all(const lh_hybrid *h, uint64_t p) {
  uint64_t c[2];
  rank2(h, p, c);
  return c[0] + c[1];
}

/* Renumbers the alive markers 1 .. A in order and drops the dead entries. Skipped (nothing
 * changes) when memory for the new maps or bitsets is short: compaction never changes results. */
/* Markers of both types at positions 1 .. p, from `before` (markers of both types in the words
 * below p's, prefix sums) and p's word: no tree walk. */
static uint64_t rank_scan(const lh_hybrid *h, const uint64_t *before, uint64_t p) {
  uint64_t w = p >> 6;
  unsigned b = (unsigned)(p & 63);
  uint64_t mask = b == 63 ? UINT64_MAX : ((2ull << b) - 1);
  return before[w] + popcount64(h->rs[FULL].bits[w] & mask) + popcount64(h->rs[LINEAR].bits[w] & mask);
}

/* Renumbers the alive markers 1 .. A in order. With dead entries (below the TTL watermark) the
 * maps are rebuilt without them; else their values are rewritten in place. Skipped (nothing
 * changes) when memory is short: compaction never changes results. */
static void compact(lh_hybrid *h) {
  uint64_t af = alive_from(h), base = rank_all(h, af - 1);
  int rebuild = base > 0;
  pairmap map = {NULL, 0, 0};
  uint64_t *bits[2] = {NULL, NULL};
  uint64_t words = h->nsb * SB_WORDS;
  size_t bytes = (size_t)words * sizeof(uint64_t);
  uint64_t *before = malloc((words + 1) * sizeof(uint64_t));
  int ok = before != NULL && (!rebuild || pm_reserve(&map, (size_t)alive_count(h, FULL)) == 0);
  for (int t = 0; t < 2 && ok; t++) {
    bits[t] = lh_realloc_huge(NULL, 0, 0, bytes);
    ok = bits[t] != NULL;
    if (ok) memset(bits[t], 0, bytes);
  }
  if (!ok) {
    free(map.slots);
    for (int t = 0; t < 2; t++) lh_free_huge(bits[t], bytes);
    free(before);
    return;
  }
  before[0] = 0;
  for (uint64_t w = 0; w < words; w++) {
    before[w + 1] = before[w] + popcount64(h->rs[FULL].bits[w]) + popcount64(h->rs[LINEAR].bits[w]);
  }
  uint64_t kept[2] = {0, 0};
  size_t cap = h->map.slots == NULL ? 0 : h->map.mask + 1;
  for (size_t i = 0; i < cap; i++) {
    pslot e = h->map.slots[i];
    if (e.pos[FULL] == LH_NIL || e.pos[FULL] < af) continue; /* empty, or dead (and its state too) */
    for (int t = 0; t < 2; t++) {
      if (e.pos[t] == LH_NIL || e.pos[t] < af) {
        e.pos[t] = LH_NIL;
        continue;
      }
      uint64_t q = rank_scan(h, before, e.pos[t]) - base;
      e.pos[t] = (uint32_t)q;
      bits[t][q >> 6] |= 1ull << (q & 63);
      kept[t]++;
    }
    if (rebuild) {
      map.slots[pm_find(&map, e.key)] = e;
      map.count++;
    } else {
      h->map.slots[i] = e;
    }
  }
  /* epochs: each start becomes 1 + the alive markers below it; epochs left empty merge into the
   * next one (the later time) */
  ring_to_front(h);
  size_t out = 0;
  for (size_t k = 0; k < h->ep_len; k++) {
    uint64_t start = h->ep_start[k] <= af ? 1 : 1 + rank_scan(h, before, h->ep_start[k] - 1) - base;
    if (out > 0 && h->ep_start[out - 1] == start) {
      h->ep_ts[out - 1] = h->ep_ts[k];
    } else {
      h->ep_start[out] = start;
      h->ep_ts[out] = h->ep_ts[k];
      out++;
    }
  }
  h->ep_len = out;
  h->ep_head = 0;
  uint64_t alive = rank_all(h, h->top) - base;
  if (rebuild) {
    free(h->map.slots);
    h->map = map;
  }
  for (int t = 0; t < 2; t++) {
    lh_free_huge(h->rs[t].bits, h->rs[t].bytes);
    h->rs[t].bits = bits[t];
    h->rs[t].bytes = bytes;
    h->rs[t].count = kept[t];
  }
  free(before);
  h->top = alive;
  h->open_sb = alive >> SB_SHIFT;
  fen_build(h);
  if (h->watermark > 0) h->watermark = 1;
  h->n_compactions++;
}

static void maybe_compact(lh_hybrid *h) {
  if (h->top <= SLACK) return;
  uint64_t alive = alive_count(h, FULL) + alive_count(h, LINEAR);
  if (h->top <= COMPACT_FACTOR * alive + SLACK) return;
  compact(h);
}

/* ---- requests ------------------------------------------------------------------------------- */

int lh_hybrid_create(lh_hybrid **out, const lh_hybrid_config *config, char *err, size_t errlen) {
  *out = NULL;
  if (config->full_charge == 0) return lh_fail(err, errlen, LH_EINVAL, "LiteHit full_charge_bytes must be positive");
  if (config->ttl_ns < 0) return lh_fail(err, errlen, LH_EINVAL, "ttl_ns must be >= 0");
  lh_hybrid *h = calloc(1, sizeof *h);
  if (h == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a hybrid lane");
  h->cfg = *config;
  h->charge[FULL] = config->full_charge;
  h->charge[LINEAR] = config->linear_charge;
  h->linear = config->linear_charge > 0;
  h->step = config->step_blocks == 0 ? 1 : config->step_blocks;
  if (reserve_positions(h, 1) != 0) {
    lh_hybrid_destroy(h);
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a hybrid lane");
  }
  *out = h;
  return LH_OK;
}

void lh_hybrid_destroy(lh_hybrid *h) {
  if (h == NULL) return;
  free(h->map.slots);
  for (int t = 0; t < 2; t++) lh_free_huge(h->rs[t].bits, h->rs[t].bytes);
  free(h->fen);
  free(h->ep_start);
  free(h->ep_ts);
  free(h->pref);
  free(h->slot);
  free(h);
}

void lh_hybrid_reset(lh_hybrid *h) {
  size_t cap = h->map.slots == NULL ? 0 : h->map.mask + 1;
  for (size_t i = 0; i < cap; i++) h->map.slots[i].pos[FULL] = h->map.slots[i].pos[LINEAR] = LH_NIL;
  h->map.count = 0;
  for (int t = 0; t < 2; t++) {
    memset(h->rs[t].bits, 0, h->nsb * SB_WORDS * sizeof(uint64_t));
    h->rs[t].count = 0;
  }
  memset(h->fen, 0, h->nsb * sizeof(counts2));
  h->top = h->open_sb = 0;
  h->ep_head = h->ep_len = 0;
  h->watermark = 0;
  h->expired = 0;
  h->n_requests = h->n_accesses = h->n_compactions = 0;
}

/* Everything request of n keys may need, allocated before it changes anything. */
static int reserve_request(lh_hybrid *h, size_t n, char *err, size_t errlen) {
  if (h->rs[FULL].count + h->rs[LINEAR].count + 2 * (uint64_t)n > MAX_OBJECTS && h->watermark > 1) {
    compact(h); /* the count includes expired objects until a compaction drops them; no result changes */
  }
  if (h->rs[FULL].count + h->rs[LINEAR].count + 2 * (uint64_t)n > MAX_OBJECTS) {
    return lh_fail(err, errlen, LH_ERANGE, "a hybrid lane tracks at most %llu objects",
                   (unsigned long long)MAX_OBJECTS);
  }
  if (h->top + 2 * (uint64_t)n > POS_LIMIT) compact(h); /* changes no result */
  if (h->top + 2 * (uint64_t)n > POS_LIMIT) {
    return lh_fail(err, errlen, LH_ERANGE, "a request of %zu blocks does not fit the lane's positions", n);
  }
  if (reserve_positions(h, h->top + 2 * (uint64_t)n + 1) != 0 || pm_reserve(&h->map, n) != 0 ||
      (h->cfg.ttl_ns > 0 && reserve_epoch(h) != 0)) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory in a hybrid lane");
  }
  if (n > h->pref_cap) {
    uint64_t *pref = malloc(n * sizeof *pref);
    size_t *slot = malloc(n * sizeof *slot);
    if (pref == NULL || slot == NULL) {
      free(pref);
      free(slot);
      return lh_fail(err, errlen, LH_ENOMEM, "out of memory in a hybrid lane");
    }
    free(h->pref);
    free(h->slot);
    h->pref = pref;
    h->slot = slot;
    h->pref_cap = n;
  }
  return LH_OK;
}

/* Phase 1 on the snapshot: writes the request's points, returns their number. */
static size_t evaluate(lh_hybrid *h, const int64_t *keys, size_t n, uint64_t *pts) {
  for (size_t i = 0; i < n; i++) pm_prefetch(&h->map, keys[i]);
  size_t covered = 0;
  uint64_t run = 0;
  cursor c = {0, {0, 0}};
  h->n_slot = 0;
  while (covered < n) {
    size_t i = pm_find(&h->map, keys[covered]);
    int present = h->map.slots[i].pos[FULL] != LH_NIL;
    h->slot[covered] = present ? i : NO_SLOT;
    h->n_slot = covered + 1;
    uint64_t r = present ? required(h, &c, FULL, i) : 0;
    if (r == 0) break;
    run = max64(run, r);
    h->pref[covered++] = run;
  }
  size_t m = 0;
  uint64_t last = 0;
  for (size_t p = 0; p < covered; p++) {
    uint64_t threshold;
    if (!h->linear) {
      threshold = max64(h->pref[p], sat64((u128)last + h->charge[FULL]));
      last = threshold;
    } else {
      uint64_t r = required(h, &c, LINEAR, h->slot[p]); /* 0: no state, or a dead one */
      if (r == 0) continue;
      threshold = max64(h->pref[p], r);
      while (m > 0 && pts[2 * (m - 1)] >= threshold) m--;
    }
    pts[2 * m] = threshold;
    pts[2 * m + 1] = (uint64_t)p + 1;
    m++;
  }
  return m;
}

/* Phase 2, tail to head: a scheduled position's state, then its Full block. A key absent in
 * phase 1 (or repeated after it) is found again; a new key's entry is completed in the same step. */
static void commit(lh_hybrid *h, const int64_t *keys, size_t n) {
  for (size_t i = n; i-- > 0;) {
    size_t at = i < h->n_slot ? h->slot[i] : NO_SLOT;
    if (at == NO_SLOT) {
      at = pm_find(&h->map, keys[i]);
      if (h->map.slots[at].pos[FULL] == LH_NIL) {
        h->map.slots[at].key = keys[i];
        h->map.count++;
      }
    }
    if (h->linear && ((i + 1) % h->step == 0 || i == n - 1)) {
      touch_both(h, at);
    } else {
      touch(h, FULL, at);
    }
  }
}

int lh_hybrid_process_batch(lh_hybrid *h, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                            const int64_t *timestamps, size_t n_req, uint64_t *points, int64_t *point_offsets,
                            size_t *n_done, char *err, size_t errlen) {
  *n_done = 0;
  if (h->cfg.ttl_ns > 0 && timestamps == NULL && n_req > 0) {
    return lh_fail(err, errlen, LH_EINVAL, "a hybrid lane with a TTL needs timestamps");
  }
  const lh_batch batch = {n_req, offsets, n_keys, NULL, NULL, 0};
  size_t written = 0;
  point_offsets[0] = 0;
  for (size_t r = 0; r < n_req; r++) {
    int rc = lh_batch_check_request(&batch, r, NULL, err, errlen);
    if (rc == LH_OK) rc = reserve_request(h, (size_t)(offsets[r + 1] - offsets[r]), err, errlen);
    if (rc != LH_OK) {
      *n_done = r;
      return rc;
    }
    const int64_t *mine = keys + offsets[r];
    size_t n = (size_t)(offsets[r + 1] - offsets[r]);
    int64_t now = h->cfg.ttl_ns > 0 ? timestamps[r] : 0;
    lh_hybrid_advance_time(h, now);
    written += evaluate(h, mine, n, points + 2 * written);
    point_offsets[r + 1] = (int64_t)written;
    if (n > 0) {
      begin_commit(h, now, h->top + 1);
      commit(h, mine, n);
      maybe_compact(h);
    }
    h->n_requests++;
    h->n_accesses += n;
  }
  *n_done = n_req;
  return LH_OK;
}

uint64_t lh_hybrid_full_within_bytes(const lh_hybrid *h, uint64_t budget) {
  uint64_t af = alive_from(h);
  if (h->top == 0 || budget == 0 || af > h->top) return 0;
  uint64_t lo = af, hi = h->top + 1; /* the smallest p whose suffix of markers fits the budget */
  while (lo < hi) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (bytes_above(h, mid - 1) <= budget) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return h->rs[FULL].count - rank_of(h, FULL, lo - 1);
}

void lh_hybrid_get_stats(const lh_hybrid *h, lh_hybrid_stats *s) {
  memset(s, 0, sizeof *s);
  s->unique_blocks = alive_count(h, FULL);
  s->resident_linear = alive_count(h, LINEAR);
  s->resident_bytes = sat64((u128)s->unique_blocks * h->charge[FULL] + (u128)s->resident_linear * h->charge[LINEAR]);
  s->expired_blocks = h->expired;
  s->positions = h->top;
  s->epochs = h->ep_len;
  s->compactions = h->n_compactions;
  s->requests = h->n_requests;
  s->accesses = h->n_accesses;
  s->memory_bytes = sizeof *h + (h->map.slots == NULL ? 0 : (h->map.mask + 1) * sizeof(pslot)) +
                    h->nsb * (2 * SB_WORDS * sizeof(uint64_t) + sizeof(counts2)) +
                    h->ep_cap * (sizeof(uint64_t) + sizeof(int64_t)) +
                    h->pref_cap * (sizeof(uint64_t) + sizeof(size_t));
}

int lh_hybrid_check(const lh_hybrid *h, char *err, size_t errlen) {
  uint64_t entries[2] = {0, 0};
  size_t keys = 0, cap = h->map.slots == NULL ? 0 : h->map.mask + 1;
  for (size_t i = 0; i < cap; i++) {
    const pslot *e = &h->map.slots[i];
    if (e->pos[FULL] == LH_NIL) {
      if (e->pos[LINEAR] != LH_NIL) return lh_fail(err, errlen, LH_EINVAL, "an empty slot holds a Linear position");
      continue;
    }
    keys++;
    if (&h->map.slots[pm_find(&h->map, e->key)] != e) {
      return lh_fail(err, errlen, LH_EINVAL, "key %lld is not found where it is held", (long long)e->key);
    }
    if (e->pos[LINEAR] != LH_NIL && e->pos[LINEAR] >= e->pos[FULL]) {
      return lh_fail(err, errlen, LH_EINVAL, "key %lld: its state is not older than its Full block", (long long)e->key);
    }
    for (int t = 0; t < 2; t++) {
      uint32_t p = e->pos[t];
      if (p == LH_NIL) continue;
      entries[t]++;
      if (p == 0 || p > h->top || !((h->rs[t].bits[p >> 6] >> (p & 63)) & 1)) {
        return lh_fail(err, errlen, LH_EINVAL, "type %d: key %lld maps to position %u without its marker", t,
                       (long long)e->key, p);
      }
      if ((h->rs[1 - t].bits[p >> 6] >> (p & 63)) & 1) {
        return lh_fail(err, errlen, LH_EINVAL, "position %u holds markers of both types", p);
      }
    }
  }
  if (keys != h->map.count) {
    return lh_fail(err, errlen, LH_EINVAL, "the map counts %zu keys but holds %zu", h->map.count, keys);
  }
  for (int t = 0; t < 2; t++) {
    if (entries[t] != h->rs[t].count) {
      return lh_fail(err, errlen, LH_EINVAL, "type %d: %llu map entries but %llu markers", t,
                     (unsigned long long)entries[t], (unsigned long long)h->rs[t].count);
    }
    if (rank_of(h, t, h->top) != h->rs[t].count) {
      return lh_fail(err, errlen, LH_EINVAL, "type %d: the rank structure counts %llu markers, not %llu", t,
                     (unsigned long long)rank_of(h, t, h->top), (unsigned long long)h->rs[t].count);
    }
  }
  for (size_t k = 1; k < h->ep_len; k++) {
    size_t a = (h->ep_head + k - 1) % h->ep_cap, b = (h->ep_head + k) % h->ep_cap;
    if (h->ep_start[a] >= h->ep_start[b] || h->ep_ts[a] > h->ep_ts[b]) {
      return lh_fail(err, errlen, LH_EINVAL, "epochs %zu and %zu are out of order", k - 1, k);
    }
  }
  return LH_OK;
}
