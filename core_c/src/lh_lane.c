/* lh_lane.c - exact LRU prefix-hit core: key map, rank structure, TTL epochs, compaction.
 *
 * Positions are 1-based and grow with every committed block; a higher position is more recent.
 * Each tracked key owns exactly one "marker": the bit of its latest position. The LRU depth of
 * a key at position p is 1 + (markers above p). Stale positions (bits cleared by a later touch)
 * are compacted away when they outnumber four times the live markers plus a fixed slack.
 *
 * Key map: the engine's shared map (lh_keymap.h) from key to position, 12 bytes a slot, at most
 * 80 % full (it is most of a lane's memory); 16 bytes with LH_LANE_KEY_IDS, the key's number in
 * the slot's aux. The per-block code is compiled for each width (process_one_w's w, a constant).
 * The lane never deletes from it: compaction renumbers the positions in place or, to drop expired
 * keys, rebuilds it. A position value also encodes "pending in the current request" (high bit +
 * request index) and "dead" (expired, retained). Every slot of a request is prefetched before its
 * lookups, and phase 2 writes positions through the slot indices phase 1 found.
 *
 * TTL: epochs (start position, timestamp) are pushed as requests commit; since timestamps never
 * decrease along positions, everything below a watermark position is expired and everything at
 * or above it is alive.
 */
#include "lh_lane.h"

#include <stdlib.h>
#include <string.h>

#include "lh_batch.h"
#include "lh_buf.h"
#include "lh_common.h"
#include "lh_keymap.h"

#define POS_DEAD 0x7FFFFFFFu  /* expired key kept for exact cut attribution */
#define POS_LIMIT 0x7FFFFFFEu /* largest usable position */
#define PENDING 0x80000000u   /* slot touched by the current request; low bits = first index */
#define SB_SHIFT 9            /* 512 positions per superblock */
#define SB_WORDS 8            /* 64-bit words per superblock */
#define SLACK 4096u           /* compaction waits for this many extra stale positions */
#define COMPACT_FACTOR 4u     /* ... beyond this many positions per live marker */
#define MIN_POS_CAP 8192u
#define MAX_REQUEST_BLOCKS 0x7FFFFFFEu
#define MAP_LOAD_PERCENT 80
#define MAP_RUN_BITS 2 /* consecutive keys (a Mooncake request's blocks) share map lines: lh_keymap.h */
#define MAX_KEY_ID ((size_t)UINT32_MAX - 1) /* keys a numbering lane holds (numbers 0 .. MAX_KEY_ID - 1) */

/* One TTL over the lane's order: its own epochs and watermark. */
typedef struct lane_view {
  int64_t ttl_ns; /* 0: never expires */
  uint64_t *ep_start;
  int64_t *ep_ts;
  size_t ep_head, ep_len, ep_cap;
  uint64_t watermark; /* positions below are expired in this view; 0 = none */
  uint64_t expired_total;
} lane_view;

/* Where one view's facts of the current request go. */
typedef struct view_dest {
  int64_t *segs;
  size_t nseg;
  uint8_t cut;
} view_dest;

struct lh_lane {
  unsigned flags;
  /* TTL views: the lane's order is shared, each view expires it at its own TTL; `perm` expires
   * least (TTL 0, else the longest), so its watermark is the lowest: it decides what the lane
   * evaluates, keeps and reclaims */
  lane_view views[LH_LANE_MAX_VIEWS];
  size_t n_views, perm;
  int timed; /* some view has a TTL */
  /* key -> position map */
  lh_keymap map;
  /* rank structure over positions 0 .. pos_cap-1 (position 0 is never used) */
  uint64_t *bits;
  int32_t *fen; /* Fenwick tree over superblocks, 1-based, nsb entries */
  uint64_t pos_cap;
  uint64_t nsb;
  uint64_t top;          /* highest allocated position */
  uint64_t markers;      /* set bits = tracked keys with a position */
  uint64_t dead_markers; /* markers below perm's watermark, not yet compacted */
  int64_t now;
  int has_now;
  /* per-request scratch, sized for the largest request so far */
  uint64_t *s_ref;   /* key i's home slot, then the slot holding it */
  uint32_t *s_snap;  /* snapshot position of key i's first occurrence (0 = untracked) */
  uint32_t *s_first; /* index of key i's first occurrence in the request */
  size_t s_cap;
  /* counters */
  uint64_t n_requests, n_accesses, n_compactions;
};

/* ---- small helpers ---------------------------------------------------------------------- */

static inline unsigned popcount64(uint64_t x) {
#if defined(__GNUC__)
  return (unsigned)__builtin_popcountll(x);
#else
  x = x - ((x >> 1) & UINT64_C(0x5555555555555555));
  x = (x & UINT64_C(0x3333333333333333)) + ((x >> 2) & UINT64_C(0x3333333333333333));
  x = (x + (x >> 4)) & UINT64_C(0x0f0f0f0f0f0f0f0f);
  return (unsigned)((x * UINT64_C(0x0101010101010101)) >> 56);
#endif
}

static inline void prefetch(const void *p) {
#if defined(__GNUC__)
  __builtin_prefetch(p, 1, 3);
#else
  (void)p;
#endif
}

/* Bits 0 .. (p & 63) of a word. */
static inline uint64_t mask_upto(uint64_t p) { return (UINT64_C(2) << (p & 63)) - 1; }

static uint64_t pow2_at_least(uint64_t x, uint64_t floor) {
  uint64_t v = floor;
  while (v < x) v <<= 1;
  return v;
}

/* ---- rank structure ---------------------------------------------------------------------- */

static inline void fen_add(int32_t *fen, uint64_t nsb, uint64_t sb, int32_t delta) {
  for (uint64_t i = sb + 1; i <= nsb; i += i & (~i + 1)) fen[i] += delta;
}

/* Markers in the first k superblocks. */
static inline uint64_t fen_prefix(const int32_t *fen, uint64_t k) {
  int64_t s = 0;
  for (uint64_t i = k; i > 0; i &= i - 1) s += fen[i];
  return (uint64_t)s;
}

static void fen_rebuild(int32_t *fen, uint64_t nsb, const uint64_t *bits) {
  for (uint64_t i = 1; i <= nsb; i++) {
    const uint64_t *w = bits + (i - 1) * SB_WORDS;
    int32_t c = 0;
    for (int j = 0; j < SB_WORDS; j++) c += (int32_t)popcount64(w[j]);
    fen[i] = c;
  }
  for (uint64_t i = 1; i <= nsb; i++) {
    uint64_t j = i + (i & (~i + 1));
    if (j <= nsb) fen[j] += fen[i];
  }
}

/* Markers at positions <= p (p < pos_cap). */
static inline uint64_t rank_upto(const lh_lane *L, uint64_t p) {
  uint64_t sb = p >> SB_SHIFT;
  uint64_t s = fen_prefix(L->fen, sb);
  uint64_t w = p >> 6;
  for (uint64_t i = sb * SB_WORDS; i < w; i++) s += popcount64(L->bits[i]);
  return s + popcount64(L->bits[w] & mask_upto(p));
}

/* Markers at positions in (a, b], a < b < pos_cap. */
static inline uint64_t count_between(const uint64_t *bits, uint64_t a, uint64_t b) {
  uint64_t wa = a >> 6, wb = b >> 6;
  if (wa == wb) return popcount64(bits[wa] & mask_upto(b) & ~mask_upto(a));
  uint64_t s = popcount64(bits[wa] & ~mask_upto(a));
  for (uint64_t w = wa + 1; w < wb; w++) s += popcount64(bits[w]);
  return s + popcount64(bits[wb] & mask_upto(b));
}

/* Makes positions 0 .. need valid. On failure nothing changes. */
static int grow_positions(lh_lane *L, uint64_t need, char *err, size_t errlen) {
  if (need < L->pos_cap) return LH_OK;
  uint64_t cap = pow2_at_least(need + 1, L->pos_cap ? L->pos_cap : MIN_POS_CAP);
  uint64_t nsb = cap >> SB_SHIFT;
  int32_t *fen = calloc((size_t)nsb + 1, sizeof(int32_t));
  if (fen == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory growing lane positions");
  size_t old_bytes = (size_t)(L->pos_cap / 64) * sizeof(uint64_t);
  uint64_t *bits = lh_realloc_huge(L->bits, old_bytes, old_bytes, (size_t)(cap / 64) * sizeof(uint64_t));
  if (bits == NULL) {
    free(fen);
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory growing lane positions");
  }
  memset(bits + L->pos_cap / 64, 0, (size_t)((cap - L->pos_cap) / 64) * sizeof(uint64_t));
  fen_rebuild(fen, nsb, bits);
  free(L->fen);
  L->bits = bits;
  L->fen = fen;
  L->pos_cap = cap;
  L->nsb = nsb;
  return LH_OK;
}

/* ---- TTL --------------------------------------------------------------------------------- */

static inline int is_expired(int64_t ts, int64_t now, int64_t ttl) {
  return now >= ts && (uint64_t)now - (uint64_t)ts >= (uint64_t)ttl;
}

/* Pops the view's epochs that have expired at `now`; the markers its watermark passes expire. */
static void advance_watermark(lh_lane *L, lane_view *V, int64_t now) {
  int popped = 0;
  while (V->ep_len > 0 && is_expired(V->ep_ts[V->ep_head], now, V->ttl_ns)) {
    V->ep_head = (V->ep_head + 1) % V->ep_cap;
    V->ep_len--;
    popped = 1;
  }
  if (!popped) return;
  uint64_t old_wm = V->watermark;
  uint64_t new_wm = V->ep_len > 0 ? V->ep_start[V->ep_head] : L->top + 1;
  if (new_wm <= old_wm) return;
  uint64_t swept = rank_upto(L, new_wm - 1) - (old_wm > 1 ? rank_upto(L, old_wm - 1) : 0);
  V->expired_total += swept;
  if (V == &L->views[L->perm]) L->dead_markers += swept;
  V->watermark = new_wm;
}

/* Moves the clock to `now` (never backwards) and every timed view's watermark with it. */
static int64_t advance_clock(lh_lane *L, int64_t now) {
  if (L->has_now && now < L->now) now = L->now;
  L->now = now;
  L->has_now = 1;
  for (size_t v = 0; v < L->n_views; v++) {
    if (L->views[v].ttl_ns > 0) advance_watermark(L, &L->views[v], now);
  }
  return now;
}

static int reserve_epoch(lane_view *V, char *err, size_t errlen) {
  if (V->ep_len < V->ep_cap) return LH_OK;
  size_t cap = V->ep_cap ? V->ep_cap * 2 : 64;
  uint64_t *start = malloc(cap * sizeof(uint64_t));
  int64_t *ts = malloc(cap * sizeof(int64_t));
  if (start == NULL || ts == NULL) {
    free(start);
    free(ts);
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory growing TTL epochs");
  }
  for (size_t j = 0; j < V->ep_len; j++) {
    size_t at = (V->ep_head + j) % V->ep_cap;
    start[j] = V->ep_start[at];
    ts[j] = V->ep_ts[at];
  }
  free(V->ep_start);
  free(V->ep_ts);
  V->ep_start = start;
  V->ep_ts = ts;
  V->ep_head = 0;
  V->ep_cap = cap;
  return LH_OK;
}

static void push_epoch(lane_view *V, uint64_t start, int64_t now) {
  if (V->ep_len > 0) {
    size_t back = (V->ep_head + V->ep_len - 1) % V->ep_cap;
    if (V->ep_ts[back] == now) return; /* the new positions join the last epoch */
  }
  size_t at = (V->ep_head + V->ep_len) % V->ep_cap;
  V->ep_start[at] = start;
  V->ep_ts[at] = now;
  V->ep_len++;
}

/* ---- compaction -------------------------------------------------------------------------- */

/* Renumbers live markers 1..A in order, drops (or, with KEEP_EXPIRED, marks dead) keys expired
 * in every view (below perm's watermark), remaps epochs and watermarks. Results never change. On allocation failure
 * nothing changes and LH_ENOMEM is returned. */
static int compact(lh_lane *L) {
  uint64_t alive = L->markers - L->dead_markers;
  int rebuild_map = L->dead_markers > 0 && !(L->flags & (LH_LANE_KEEP_EXPIRED | LH_LANE_KEY_IDS));
  uint64_t nwords = (L->top >> 6) + 1;
  uint32_t *cum = malloc((size_t)(nwords + 1) * sizeof(uint32_t));
  if (cum == NULL) return LH_ENOMEM;
  lh_keymap new_map = {.max_load_percent = MAP_LOAD_PERCENT, .run_bits = MAP_RUN_BITS};
  if (rebuild_map) { /* room for twice the survivors, but never larger than now */
    size_t want = (size_t)(2 * alive), room = lh_keymap_room(&L->map);
    if (lh_keymap_reserve(&new_map, want < room ? want : room) != 0) {
      free(cum);
      return LH_ENOMEM;
    }
  }
  uint64_t wm = L->views[L->perm].watermark;
  /* Expired markers go first, so that ranks count survivors only. */
  if (wm > 1) {
    uint64_t w_end = (wm - 1) >> 6;
    for (uint64_t w = 0; w < w_end; w++) L->bits[w] = 0;
    L->bits[w_end] &= ~mask_upto(wm - 1);
  }
  cum[0] = 0;
  for (uint64_t w = 0; w < nwords; w++) cum[w + 1] = cum[w] + popcount64(L->bits[w]);
#define RANK(p) (cum[(p) >> 6] + popcount64(L->bits[(p) >> 6] & mask_upto(p)))
  const size_t w = lh_keymap_width(&L->map);
  for (size_t i = 0; i < lh_keymap_capacity(&L->map); i++) {
    uint32_t p = lh_keymap_val_w(&L->map, i, w);
    if (p == LH_NIL) continue;
    uint32_t np;
    if (p == POS_DEAD || p < wm) {
      if (rebuild_map) continue; /* reclaimed for good */
      np = POS_DEAD;
    } else {
      np = (uint32_t)RANK(p);
    }
    if (rebuild_map) {
      lh_keymap_put(&new_map, lh_keymap_key_w(&L->map, i, w), np); /* narrow: a numbering lane keeps its map */
    } else {
      lh_keymap_set_val_w(&L->map, i, np, w);
    }
  }
  if (rebuild_map) {
    lh_keymap_free(&L->map);
    L->map = new_map;
  }
  /* Epoch starts S -> 1 + survivors below S; epochs sharing a start keep the later time. A
   * view expiring more than perm keeps its watermark above the survivors it has expired. */
  for (size_t v = 0; v < L->n_views; v++) {
    lane_view *V = &L->views[v];
    size_t kept = 0;
    for (size_t j = 0; j < V->ep_len; j++) {
      size_t at = (V->ep_head + j) % V->ep_cap;
      uint64_t ns = 1 + RANK(V->ep_start[at] - 1);
      int64_t ts = V->ep_ts[at];
      if (kept > 0) {
        size_t prev = (V->ep_head + kept - 1) % V->ep_cap;
        if (V->ep_start[prev] == ns) {
          V->ep_ts[prev] = ts;
          continue;
        }
      }
      size_t out = (V->ep_head + kept) % V->ep_cap;
      V->ep_start[out] = ns;
      V->ep_ts[out] = ts;
      kept++;
    }
    V->ep_len = kept;
    if (V->watermark > 0) V->watermark = v == L->perm ? 1 : 1 + RANK(V->watermark - 1);
  }
#undef RANK
  free(cum);
  /* Survivors now sit at positions 1..alive. */
  memset(L->bits, 0, (size_t)nwords * sizeof(uint64_t));
  for (uint64_t p = 1; p <= alive; p++) L->bits[p >> 6] |= UINT64_C(1) << (p & 63);
  L->top = alive;
  L->markers = alive;
  L->dead_markers = 0;
  /* Give back a position space that has become far too large (e.g. after mass expiry). */
  uint64_t want = pow2_at_least(2 * (COMPACT_FACTOR * alive + SLACK), MIN_POS_CAP);
  if (L->pos_cap > 4 * want) {
    /* every word past the survivors' is 0: the first want / 64 words are the new bitmap */
    size_t bytes = (size_t)(want / 64) * sizeof(uint64_t);
    int32_t *fen = calloc((size_t)(want >> SB_SHIFT) + 1, sizeof(int32_t));
    uint64_t *bits =
        fen == NULL ? NULL : lh_realloc_huge(L->bits, (size_t)(L->pos_cap / 64) * sizeof(uint64_t), bytes, bytes);
    if (bits != NULL) {
      free(L->fen);
      L->bits = bits;
      L->fen = fen;
      L->pos_cap = want;
      L->nsb = want >> SB_SHIFT;
    } else {
      free(fen);
    }
  }
  fen_rebuild(L->fen, L->nsb, L->bits);
  L->n_compactions++;
  return LH_OK;
}

static int should_compact(const lh_lane *L) {
  uint64_t alive = L->markers - L->dead_markers;
  return L->top > SLACK && L->top > COMPACT_FACTOR * alive + SLACK;
}

/* ---- lifecycle --------------------------------------------------------------------------- */

/* Sets the views (ttls checked) and the key map's shape of a lane cleared to zero. */
static void init_lane(lh_lane *L, const int64_t *ttls_ns, size_t n_views, unsigned flags) {
  L->flags = flags;
  L->n_views = n_views;
  for (size_t v = 0; v < n_views; v++) {
    L->views[v].ttl_ns = ttls_ns[v];
    if (ttls_ns[v] > 0) L->timed = 1;
    int64_t best = L->views[L->perm].ttl_ns;
    if (best != 0 && (ttls_ns[v] == 0 || ttls_ns[v] > best)) L->perm = v;
  }
  L->map.max_load_percent = MAP_LOAD_PERCENT;
  L->map.run_bits = MAP_RUN_BITS;
  L->map.slot_bytes = flags & LH_LANE_KEY_IDS ? LH_KEYMAP_WIDE_SLOT : LH_KEYMAP_SLOT;
}

int lh_lane_create_views(lh_lane **out, const int64_t *ttls_ns, size_t n_views, unsigned flags, char *err,
                         size_t errlen) {
  if (out == NULL) return lh_fail(err, errlen, LH_EINVAL, "lane output pointer is NULL");
  if (n_views < 1 || n_views > LH_LANE_MAX_VIEWS) {
    return lh_fail(err, errlen, LH_EINVAL, "a lane has 1 to %d TTL views, not %zu", LH_LANE_MAX_VIEWS, n_views);
  }
  if (ttls_ns == NULL) return lh_fail(err, errlen, LH_EINVAL, "ttls_ns is NULL");
  for (size_t v = 0; v < n_views; v++) {
    if (ttls_ns[v] < 0) return lh_fail(err, errlen, LH_EINVAL, "ttl_ns must not be negative (view %zu)", v);
  }
  if (flags & ~(LH_LANE_KEEP_EXPIRED | LH_LANE_KEY_IDS)) {
    return lh_fail(err, errlen, LH_EINVAL, "unknown lane flags 0x%x", flags);
  }
  if ((flags & LH_LANE_KEY_IDS) && n_views > 1) {
    return lh_fail(err, errlen, LH_EINVAL, "a lane that numbers its keys has one view");
  }
  lh_lane *L = calloc(1, sizeof(lh_lane));
  if (L == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a lane");
  init_lane(L, ttls_ns, n_views, flags);
  *out = L;
  return LH_OK;
}

int lh_lane_create(lh_lane **out, int64_t ttl_ns, unsigned flags, char *err, size_t errlen) {
  return lh_lane_create_views(out, &ttl_ns, 1, flags, err, errlen);
}

static void release_state(lh_lane *L) {
  lh_keymap_free(&L->map);
  lh_free_huge(L->bits, (size_t)(L->pos_cap / 64) * sizeof(uint64_t));
  free(L->fen);
  for (size_t v = 0; v < L->n_views; v++) {
    free(L->views[v].ep_start);
    free(L->views[v].ep_ts);
  }
  free(L->s_ref);
  free(L->s_snap);
  free(L->s_first);
}

void lh_lane_destroy(lh_lane *lane) {
  if (lane == NULL) return;
  release_state(lane);
  free(lane);
}

void lh_lane_reset(lh_lane *lane) {
  int64_t ttls[LH_LANE_MAX_VIEWS];
  size_t n_views = lane->n_views;
  unsigned flags = lane->flags;
  for (size_t v = 0; v < n_views; v++) ttls[v] = lane->views[v].ttl_ns;
  release_state(lane);
  memset(lane, 0, sizeof(*lane));
  init_lane(lane, ttls, n_views, flags);
}

/* ---- processing -------------------------------------------------------------------------- */

/* Makes room for a request of n blocks so that nothing after this can fail. */
static int reserve(lh_lane *L, size_t n, char *err, size_t errlen) {
  if (n > MAX_REQUEST_BLOCKS) {
    return lh_fail(err, errlen, LH_ERANGE, "request has %zu blocks; at most %u are supported", n, MAX_REQUEST_BLOCKS);
  }
  if (n > L->s_cap) {
    size_t cap = n > 2 * L->s_cap ? n : 2 * L->s_cap;
    uint64_t *ref = malloc(cap * sizeof(uint64_t));
    uint32_t *snap = malloc(cap * sizeof(uint32_t));
    uint32_t *first = malloc(cap * sizeof(uint32_t));
    if (ref == NULL || snap == NULL || first == NULL) {
      free(ref);
      free(snap);
      free(first);
      return lh_fail(err, errlen, LH_ENOMEM, "out of memory for a request of %zu blocks", n);
    }
    free(L->s_ref);
    free(L->s_snap);
    free(L->s_first);
    L->s_ref = ref;
    L->s_snap = snap;
    L->s_first = first;
    L->s_cap = cap;
  }
  if (n == 0) return LH_OK;
  if ((L->flags & LH_LANE_KEY_IDS) && n > (size_t)MAX_KEY_ID - L->map.count) { /* numbers are uint32, LH_NIL apart */
    return lh_fail(err, errlen, LH_ERANGE, "a lane that numbers its keys holds at most %llu of them",
                   (unsigned long long)MAX_KEY_ID);
  }
  if (lh_keymap_reserve(&L->map, n) != 0) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory growing the key map");
  }
  if (L->top + n > POS_LIMIT) {
    if (L->markers - L->dead_markers + n <= POS_LIMIT && L->top > L->markers - L->dead_markers) {
      if (compact(L) != LH_OK) {
        return lh_fail(err, errlen, LH_ENOMEM, "out of memory compacting lane positions");
      }
    }
    if (L->top + n > POS_LIMIT) {
      return lh_fail(err, errlen, LH_ERANGE, "lane position space exhausted (%llu live blocks)",
                     (unsigned long long)(L->markers - L->dead_markers));
    }
  }
  int st = grow_positions(L, L->top + n, err, errlen);
  if (st != LH_OK) return st;
  for (size_t v = 0; v < L->n_views && st == LH_OK; v++) {
    if (L->views[v].ttl_ns > 0) st = reserve_epoch(&L->views[v], err, errlen);
  }
  return st;
}

/* The other views' facts of a request, from perm's (dest[perm]: n_eval blocks evaluated): a view
 * that expires more cuts the prefix at its first evaluated block below its watermark, so its curve
 * is perm's up to there (snap: the blocks' snapshot positions). */
static void cut_views(const lh_lane *L, const uint32_t *snap, size_t n_eval, view_dest *dest) {
  const view_dest *p = &dest[L->perm];
  const uint64_t wm_perm = L->views[L->perm].watermark;
  for (size_t v = 0; v < L->n_views; v++) {
    if (v == L->perm) continue;
    const uint64_t wm = L->views[v].watermark;
    size_t k = n_eval;
    view_dest *d = &dest[v];
    d->cut = p->cut;
    if (wm > wm_perm) {
      for (size_t i = 0; i < n_eval; i++) {
        if (snap[i] < wm) {
          k = i;
          d->cut = LH_CUT_EXPIRED;
          break;
        }
      }
    }
    size_t nseg = 0, covered = 0;
    for (; nseg < p->nseg && covered < k; nseg++) {
      int64_t run = p->segs[2 * nseg + 1];
      if ((size_t)run > k - covered) run = (int64_t)(k - covered);
      d->segs[2 * nseg] = p->segs[2 * nseg];
      d->segs[2 * nseg + 1] = run;
      covered += (size_t)run;
    }
    d->nseg = nseg;
  }
}

/* One request: see lh_lane.h. dest[v] receives view v's curve (room for 2 * n values) and cut;
 * ids (NULL, or n entries: a numbering lane's) receives each block's key number. w is the map's
 * slot width, a constant at each call, so the per-block code is compiled for each width. */
static LH_ALWAYS_INLINE int process_one_w(lh_lane *L, const int64_t *keys, size_t n, int64_t now, view_dest *dest,
                                          uint32_t *ids, const size_t w, char *err, size_t errlen) {
  int st = reserve(L, n, err, errlen);
  if (st != LH_OK) return st;
  if (L->timed) now = advance_clock(L, now); /* the clock never runs backwards */
  L->n_requests++;
  L->n_accesses += n;
  for (size_t v = 0; v < L->n_views; v++) {
    dest[v].nseg = 0;
    dest[v].cut = LH_CUT_NONE;
  }
  if (n == 0) return LH_OK;
  int64_t *const segs = dest[L->perm].segs;

  lh_keymap *const map = &L->map;
  uint64_t *const ref = L->s_ref;
  uint32_t *const snap = L->s_snap;
  uint32_t *const first = L->s_first;
  const uint64_t wm = L->views[L->perm].watermark;

  for (size_t i = 0; i < n; i++) {
    ref[i] = lh_keymap_home(map, keys[i]);
    prefetch(lh_keymap_slot_addr_w(map, (size_t)ref[i], w));
  }

  /* Look every key up (inserting absent ones as pending) and evaluate phase 1 on the snapshot:
   * positions and bits are not modified until phase 2. */
  size_t nseg = 0, n_eval = n;
  int64_t last_thr = 0, prefix_max = 0;
  uint64_t prev_snap = 0, prev_above = 0;
  int evaluating = 1;
  for (size_t i = 0; i < n; i++) {
    const int64_t key = keys[i];
    size_t slot = lh_keymap_probe_w(map, key, (size_t)ref[i], w);
    uint32_t p = lh_keymap_val_w(map, slot, w);
    uint32_t p_snap = 0, p_first = (uint32_t)i;
    if (p == LH_NIL) {
      lh_keymap_put_at_w(map, slot, key, PENDING | (uint32_t)i, w);
      if (w == LH_KEYMAP_WIDE_SLOT) lh_keymap_set_aux(map, slot, (uint32_t)(map->count - 1)); /* never deleted */
    } else if (p & PENDING) {
      p_first = p & ~PENDING;
      p_snap = snap[p_first];
    } else {
      p_snap = p;
      lh_keymap_set_val_w(map, slot, PENDING | (uint32_t)i, w);
    }
    if (w == LH_KEYMAP_WIDE_SLOT && ids != NULL) ids[i] = lh_keymap_aux(map, slot);
    ref[i] = slot;
    snap[i] = p_snap;
    first[i] = p_first;
    if (!evaluating) continue;
    if (p_snap == 0 || p_snap == POS_DEAD || p_snap < wm) {
      evaluating = 0;
      n_eval = i;
      dest[L->perm].cut = p_snap == 0 ? LH_CUT_COLD : LH_CUT_EXPIRED;
      continue;
    }
    /* Markers above this key: incremental from the previous key when close (chains are mostly
     * at consecutive positions), otherwise a full rank query. */
    uint64_t above;
    if (nseg > 0 && p_snap < prev_snap && prev_snap - p_snap <= 512) {
      above = prev_above + count_between(L->bits, p_snap, prev_snap);
    } else if (nseg > 0 && p_snap > prev_snap && p_snap - prev_snap <= 512) {
      above = prev_above - count_between(L->bits, prev_snap, p_snap);
    } else if (nseg > 0 && p_snap == prev_snap) {
      above = prev_above;
    } else {
      above = L->markers - rank_upto(L, p_snap);
    }
    prev_snap = p_snap;
    prev_above = above;
    int64_t required = (int64_t)above + 1;
    if (required > prefix_max) prefix_max = required;
    int64_t thr = prefix_max > last_thr ? prefix_max : last_thr + 1; /* monotone defense */
    if (nseg > 0 && segs[2 * nseg - 2] + segs[2 * nseg - 1] == thr) {
      segs[2 * nseg - 1]++;
    } else {
      segs[2 * nseg] = thr;
      segs[2 * nseg + 1] = 1;
      nseg++;
    }
    last_thr = thr;
  }
  dest[L->perm].nseg = nseg;
  if (L->n_views > 1) cut_views(L, snap, n_eval, dest);

  /* Phase 2: commit every distinct key from the tail to the head. */
  for (size_t v = 0; v < L->n_views; v++) {
    if (L->views[v].ttl_ns > 0) push_epoch(&L->views[v], L->top + 1, now);
  }
  uint64_t *const bits = L->bits;
  int32_t *const fen = L->fen;
  const uint64_t nsb = L->nsb;
  uint64_t pos = L->top;
  uint64_t del_sb = UINT64_MAX, add_sb = UINT64_MAX;
  int32_t del_n = 0, add_n = 0;
  for (size_t i = n; i-- > 0;) {
    if (first[i] != (uint32_t)i) continue;
    uint32_t old = snap[i];
    if (old != 0 && old != POS_DEAD) {
      bits[old >> 6] &= ~(UINT64_C(1) << (old & 63));
      uint64_t sb = (uint64_t)old >> SB_SHIFT;
      if (sb != del_sb) {
        if (del_n) fen_add(fen, nsb, del_sb, -del_n);
        del_sb = sb;
        del_n = 0;
      }
      del_n++;
      L->markers--;
      if (old < wm) L->dead_markers--;
    }
    pos++;
    bits[pos >> 6] |= UINT64_C(1) << (pos & 63);
    uint64_t sb = pos >> SB_SHIFT;
    if (sb != add_sb) {
      if (add_n) fen_add(fen, nsb, add_sb, add_n);
      add_sb = sb;
      add_n = 0;
    }
    add_n++;
    L->markers++;
    lh_keymap_set_val_w(map, (size_t)ref[i], (uint32_t)pos, w);
  }
  if (del_n) fen_add(fen, nsb, del_sb, -del_n);
  if (add_n) fen_add(fen, nsb, add_sb, add_n);
  L->top = pos;

  if (should_compact(L)) (void)compact(L); /* an allocation failure just postpones it */
  return LH_OK;
}

static int process_one(lh_lane *L, const int64_t *keys, size_t n, int64_t now, view_dest *dest, uint32_t *ids,
                       char *err, size_t errlen) {
  if (L->map.slot_bytes == LH_KEYMAP_WIDE_SLOT) {
    return process_one_w(L, keys, n, now, dest, ids, LH_KEYMAP_WIDE_SLOT, err, errlen);
  }
  return process_one_w(L, keys, n, now, dest, NULL, LH_KEYMAP_SLOT, err, errlen);
}

/* The batch loop of both entry points: outs[v] is view v's output (one per view). */
static int run_batch(lh_lane *lane, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                     const int64_t *timestamps, size_t n_req, const lh_lane_view_out *outs, uint32_t *key_ids,
                     size_t *n_done, char *err, size_t errlen) {
  const size_t nv = lane->n_views;
  int64_t written[LH_LANE_MAX_VIEWS] = {0};
  view_dest dest[LH_LANE_MAX_VIEWS];
  *n_done = 0;
  for (size_t v = 0; v < nv; v++) outs[v].seg_offsets[0] = 0;
  if (lane->timed && timestamps == NULL && n_req > 0) {
    return lh_fail(err, errlen, LH_EINVAL, "a TTL lane needs timestamps");
  }
  if (key_ids != NULL && !(lane->flags & LH_LANE_KEY_IDS)) {
    return lh_fail(err, errlen, LH_EINVAL, "key numbers need a lane created with LH_LANE_KEY_IDS");
  }
  const lh_batch batch = {n_req, offsets, n_keys, NULL, NULL, 0}; /* the TTL clock takes any time (process_one) */
  for (size_t r = 0; r < n_req; r++) {
    int st = lh_batch_check_request(&batch, r, NULL, err, errlen);
    if (st != LH_OK) {
      *n_done = r;
      return st;
    }
    int64_t lo = offsets[r], hi = offsets[r + 1];
    for (size_t v = 0; v < nv; v++) dest[v].segs = outs[v].segs + 2 * written[v];
    st = process_one(lane, keys + lo, (size_t)(hi - lo), timestamps ? timestamps[r] : 0, dest,
                     key_ids != NULL ? key_ids + lo : NULL, err, errlen);
    if (st != LH_OK) {
      *n_done = r;
      return st;
    }
    for (size_t v = 0; v < nv; v++) {
      written[v] += (int64_t)dest[v].nseg;
      outs[v].seg_offsets[r + 1] = written[v];
      if (outs[v].cuts != NULL) outs[v].cuts[r] = dest[v].cut;
    }
  }
  *n_done = n_req;
  return LH_OK;
}

int lh_lane_process_batch(lh_lane *lane, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                          const int64_t *timestamps, size_t n_req, int64_t *segs, int64_t *seg_offsets, uint8_t *cuts,
                          uint32_t *key_ids, size_t *n_done, char *err, size_t errlen) {
  if (lane->n_views != 1) {
    *n_done = 0;
    seg_offsets[0] = 0;
    return lh_fail(err, errlen, LH_EINVAL, "a lane of %zu TTL views takes lh_lane_process_views", lane->n_views);
  }
  const lh_lane_view_out out = {segs, seg_offsets, cuts};
  return run_batch(lane, keys, n_keys, offsets, timestamps, n_req, &out, key_ids, n_done, err, errlen);
}

int lh_lane_process_views(lh_lane *lane, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                          const int64_t *timestamps, size_t n_req, const lh_lane_view_out *outs, size_t n_outs,
                          size_t *n_done, char *err, size_t errlen) {
  *n_done = 0;
  if (n_outs != lane->n_views) {
    return lh_fail(err, errlen, LH_EINVAL, "%zu outputs for a lane of %zu TTL views", n_outs, lane->n_views);
  }
  return run_batch(lane, keys, n_keys, offsets, timestamps, n_req, outs, NULL, n_done, err, errlen);
}

void lh_lane_advance_time(lh_lane *lane, int64_t now_ns) {
  if (lane->timed) (void)advance_clock(lane, now_ns);
}

size_t lh_lane_views(const lh_lane *lane) { return lane->n_views; }

void lh_lane_get_view_stats(const lh_lane *L, size_t view, lh_lane_stats *s) {
  const lane_view *V = &L->views[view < L->n_views ? view : 0];
  uint64_t dead = L->dead_markers;
  if (V != &L->views[L->perm] && V->watermark > 1) dead = rank_upto(L, V->watermark - 1);
  size_t epoch_bytes = 0;
  for (size_t v = 0; v < L->n_views; v++) epoch_bytes += L->views[v].ep_cap * (sizeof(uint64_t) + sizeof(int64_t));
  s->unique_blocks = L->markers - dead;
  s->tracked_keys = L->map.count;
  s->positions = L->top;
  s->map_slots = lh_keymap_capacity(&L->map);
  s->epochs = V->ep_len;
  s->expired_blocks = V->expired_total;
  s->memory_bytes = sizeof(lh_lane) + lh_keymap_memory(&L->map) + L->pos_cap / 8 +
                    (L->fen ? (L->nsb + 1) * sizeof(int32_t) : 0) + epoch_bytes +
                    L->s_cap * (sizeof(uint64_t) + 2 * sizeof(uint32_t));
  s->compactions = L->n_compactions;
  s->requests = L->n_requests;
  s->accesses = L->n_accesses;
}

void lh_lane_get_stats(const lh_lane *L, lh_lane_stats *s) { lh_lane_get_view_stats(L, 0, s); }

/* A numbering lane's keys hold the numbers 0 .. count - 1, once each. */
static int check_numbers(const lh_lane *L, char *err, size_t errlen) {
  if (!(L->flags & LH_LANE_KEY_IDS)) return LH_OK;
  uint8_t *numbered = calloc(L->map.count + 1, 1);
  if (numbered == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory checking key numbers");
  int st = LH_OK;
  for (size_t i = 0; i < lh_keymap_capacity(&L->map) && st == LH_OK; i++) {
    if (lh_keymap_val_w(&L->map, i, LH_KEYMAP_WIDE_SLOT) == LH_NIL) continue;
    uint32_t id = lh_keymap_aux(&L->map, i);
    if (id >= L->map.count || numbered[id]) {
      st = lh_fail(err, errlen, LH_EINVAL, "key number %u out of range or repeated", id);
    } else {
      numbered[id] = 1;
    }
  }
  free(numbered);
  return st;
}

int lh_lane_check(const lh_lane *L, char *err, size_t errlen) {
  uint64_t entries = 0, with_pos = 0, below_wm = 0;
  int st = check_numbers(L, err, errlen);
  if (st != LH_OK) return st;
  const size_t w = lh_keymap_width(&L->map);
  for (size_t i = 0; i < lh_keymap_capacity(&L->map); i++) {
    uint32_t p = lh_keymap_val_w(&L->map, i, w);
    if (p == LH_NIL) continue;
    if (p & PENDING) return lh_fail(err, errlen, LH_EINVAL, "pending slot left behind");
    entries++;
    if (p == POS_DEAD) continue;
    if (p > L->top) return lh_fail(err, errlen, LH_EINVAL, "position %u above top", p);
    if (!(L->bits[p >> 6] >> (p & 63) & 1)) {
      return lh_fail(err, errlen, LH_EINVAL, "key at position %u has no marker", p);
    }
    with_pos++;
    if (p < L->views[L->perm].watermark) below_wm++;
  }
  if (entries != L->map.count) return lh_fail(err, errlen, LH_EINVAL, "map count mismatch");
  uint64_t bitcount = 0;
  for (uint64_t k = 0; k < L->pos_cap / 64; k++) bitcount += popcount64(L->bits[k]);
  if (bitcount != L->markers || with_pos != L->markers) {
    return lh_fail(err, errlen, LH_EINVAL, "marker count mismatch: bits %llu keys %llu markers %llu",
                   (unsigned long long)bitcount, (unsigned long long)with_pos, (unsigned long long)L->markers);
  }
  if (below_wm != L->dead_markers) return lh_fail(err, errlen, LH_EINVAL, "dead marker mismatch");
  uint64_t expect = 0;
  for (uint64_t sb = 0; sb <= L->nsb && L->pos_cap > 0; sb++) {
    if (fen_prefix(L->fen, sb) != expect) return lh_fail(err, errlen, LH_EINVAL, "fenwick mismatch");
    if (sb < L->nsb) {
      for (int j = 0; j < SB_WORDS; j++) expect += popcount64(L->bits[sb * SB_WORDS + j]);
    }
  }
  for (size_t v = 0; v < L->n_views; v++) {
    const lane_view *V = &L->views[v];
    for (size_t j = 1; j < V->ep_len; j++) {
      size_t a = (V->ep_head + j - 1) % V->ep_cap, b = (V->ep_head + j) % V->ep_cap;
      if (V->ep_start[a] >= V->ep_start[b] || V->ep_ts[a] > V->ep_ts[b]) {
        return lh_fail(err, errlen, LH_EINVAL, "epochs out of order (view %zu)", v);
      }
    }
    if (V->watermark > L->top + 1) return lh_fail(err, errlen, LH_EINVAL, "watermark above top (view %zu)", v);
    if (V->watermark < L->views[L->perm].watermark) {
      return lh_fail(err, errlen, LH_EINVAL, "view %zu expires less than the lane's most lasting view", v);
    }
  }
  return LH_OK;
}
