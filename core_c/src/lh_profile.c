/* lh_profile.c - the workload-profile recorder (see lh_profile.h). */
#include "lh_profile.h"

#include <stdlib.h>
#include <string.h>

#include "lh_batch.h"
#include "lh_buf.h"
#include "lh_common.h"
#include "lh_keymap.h"
#include "lh_project.h"

#define MAX_KEYS ((uint64_t)UINT32_MAX - 1)     /* key indices are uint32, LH_NIL excluded */
#define MAX_REQUESTS ((uint64_t)UINT32_MAX - 1) /* request numbers likewise */
#define MAP_LOAD_PERCENT 75                     /* the key map holds every key of the lane: memory over probe length */
#define MAP_RUN_BITS 2 /* its runs of consecutive keys (a Mooncake request's blocks) share lines: lh_keymap.h */

/* A growable array growing by a quarter (the reuse arrays are the recorder's bulk). */
typedef struct array {
  void *data;
  size_t len, cap; /* in elements */
  size_t bytes;    /* allocated (a big table's block: lh_realloc_huge, lh_free_huge) */
} array;

static int reserve(array *a, size_t extra, size_t elem) {
  if (extra <= a->cap - a->len) return 0;
  if (a->len > SIZE_MAX / elem - extra) return -1;
  size_t need = a->len + extra, cap = a->cap < 64 ? 64 : a->cap;
  while (cap < need) cap = cap > SIZE_MAX / elem / 5 * 4 ? need : cap + cap / 4;
  void *data = lh_realloc_huge(a->data, a->bytes, a->len * elem, cap * elem); /* per-key arrays: read at random */
  if (data == NULL) return -1;
  a->data = data;
  a->cap = cap;
  a->bytes = cap * elem;
  return 0;
}

static void release(array *a) { lh_free_huge(a->data, a->bytes); }

#define AT(a, T) ((T *)(a).data)

/* The per-key arrays, by name, and their element sizes: 12 bytes a key. A key's first and latest
 * access are request numbers; their times and the first one's category are the request's. */
enum { FIRST_REQ, LAST_REQ, REUSES, N_KEY_ARRAYS };
static const size_t KEY_ELEM[N_KEY_ARRAYS] = {4, 4, 4};

typedef struct cat_reuses {
  array ns;   /* int64: reuse times, one per run of equal ones */
  array runs; /* uint32: the runs' lengths */
  array keys; /* uint32: key indices of the reuses since the split */
  uint64_t n; /* reuses */
} cat_reuses;

struct lh_profile {
  int64_t window_ns;
  lh_keymap map; /* key -> index (unused when the keys come numbered) */
  size_t n_keys; /* distinct keys: the next new key's index */
  int numbered;  /* 0: nothing recorded yet; 1: fed keys (looked up in map); 2: fed key numbers */
  array key[N_KEY_ARRAYS];
  array req_ns, req_cat; /* int64, int32: per numbered request (one with blocks), by its number */
  size_t window_req;     /* the number of the current window's first numbered request */
  array slope;           /* int64, zero-filled up to len */
  array window, window_keys;
  array scratch; /* uint32 per block of the current request: its key index */
  cat_reuses *cats;
  size_t n_cats, cap_cats; /* categories in use (that reused) and allocated (zeroed beyond n_cats) */
  int32_t base_cat;        /* -1 until the first reuse */
  array base;              /* uint32: per-key reuse counts at the split (len 0 before it) */
  int split;               /* a second category has reused: every reuse records its key */
  int started;
  int64_t first_ts, last_ts; /* of the first and the latest request recorded */
  lh_profile_stats stats;
};

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

int lh_profile_create(lh_profile **out, int64_t window_ns, char *err, size_t errlen) {
  *out = NULL;
  if (window_ns <= 0)
    return lh_fail(err, errlen, LH_EINVAL, "the working-set window must be positive, got %lld ns",
                   (long long)window_ns);
  lh_profile *p = calloc(1, sizeof *p);
  if (p == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a profile recorder");
  p->window_ns = window_ns;
  p->base_cat = -1;
  p->map.max_load_percent = MAP_LOAD_PERCENT;
  p->map.run_bits = MAP_RUN_BITS;
  *out = p;
  return LH_OK;
}

static void free_all(lh_profile *p) {
  lh_keymap_free(&p->map);
  for (size_t i = 0; i < N_KEY_ARRAYS; i++) release(&p->key[i]);
  array *arrays[] = {&p->req_ns, &p->req_cat, &p->slope, &p->window, &p->window_keys, &p->scratch, &p->base};
  for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++) release(arrays[i]);
  for (size_t c = 0; c < p->cap_cats; c++) {
    release(&p->cats[c].ns);
    release(&p->cats[c].runs);
    release(&p->cats[c].keys);
  }
  free(p->cats);
}

void lh_profile_destroy(lh_profile *p) {
  if (p == NULL) return;
  free_all(p);
  free(p);
}

void lh_profile_reset(lh_profile *p) {
  int64_t window_ns = p->window_ns;
  free_all(p);
  memset(p, 0, sizeof *p);
  p->window_ns = window_ns;
  p->base_cat = -1;
  p->map.max_load_percent = MAP_LOAD_PERCENT;
  p->map.run_bits = MAP_RUN_BITS;
}

/* Checks request r's curve (before anything changes): well formed, covering at most its n
 * blocks, thresholds within the keys seen plus the request's. Writes the hit blocks and the end
 * of the largest threshold (largest + 1). */
static int check_curve(const lh_profile *p, size_t n, const int64_t *segs, size_t n_segs, const int64_t *seg_offsets,
                       size_t r, int64_t *hits, int64_t *end, char *err, size_t errlen) {
  int64_t h = 0, top = 0;
  int64_t bound = (int64_t)p->n_keys + (int64_t)n; /* thresholds never exceed this */
  int st = lh_batch_check_offsets(seg_offsets, r, n_segs, "curve offsets", "segments", err, errlen);
  if (st != LH_OK) return st;
  for (int64_t s = seg_offsets[r]; s < seg_offsets[r + 1]; s++) {
    int64_t start = segs[2 * s], run = segs[2 * s + 1];
    if (start < 1 || run < 0 || run > (int64_t)n - h || start > bound - run + 1) {
      return lh_fail(err, errlen, LH_EINVAL, "request %zu: curve segment (%lld, %lld) is not one the lane writes", r,
                     (long long)start, (long long)run);
    }
    if (run > 0 && start <= top) {
      return lh_fail(err, errlen, LH_EINVAL, "request %zu: curve thresholds are not increasing", r);
    }
    h += run;
    if (run > 0) top = start + run - 1;
  }
  *hits = h;
  *end = top + 1;
  return LH_OK;
}

/* Whether request r (of category cat, with hits > 0) splits the reuses by key now. */
static int splits(const lh_profile *p, int32_t cat, int64_t hits) {
  return !p->split && hits > 0 && p->base_cat >= 0 && cat != p->base_cat;
}

/* Everything request r may allocate, allocated up front: afterwards it cannot fail. */
static int reserve_request(lh_profile *p, size_t n, int32_t cat, int64_t hits, int64_t end, int numbered, char *err,
                           size_t errlen) {
  if ((uint64_t)p->n_keys + n > MAX_KEYS) {
    return lh_fail(err, errlen, LH_ERANGE, "more than %llu distinct keys in one lane", (unsigned long long)MAX_KEYS);
  }
  if (n > 0 && (uint64_t)p->req_ns.len + 1 > MAX_REQUESTS) {
    return lh_fail(err, errlen, LH_ERANGE, "more than %llu requests with blocks in one lane",
                   (unsigned long long)MAX_REQUESTS);
  }
  int failed = numbered != 2 && lh_keymap_reserve(&p->map, n) != 0;
  failed = failed ||
           (n > 0 && (reserve(&p->req_ns, 1, sizeof(int64_t)) != 0 || reserve(&p->req_cat, 1, sizeof(int32_t)) != 0));
  for (size_t i = 0; i < N_KEY_ARRAYS && !failed; i++) failed = reserve(&p->key[i], n, KEY_ELEM[i]) != 0;
  size_t slope_len = p->slope.len, slope_need = (size_t)end + 1;
  size_t grow = slope_need > slope_len ? slope_need - slope_len : 0;
  failed = failed || reserve(&p->slope, grow, sizeof(int64_t)) != 0 || reserve(&p->window, 1, sizeof(int64_t)) != 0 ||
           reserve(&p->window_keys, 1, sizeof(int64_t)) != 0 ||
           (p->scratch.cap < n && reserve(&p->scratch, n, sizeof(uint32_t)) != 0);
  if (!failed && hits > 0 && (size_t)cat >= p->cap_cats) { /* allocated only: n_cats grows on success */
    size_t cap_cats = (size_t)cat + 1;
    cat_reuses *cats = realloc(p->cats, cap_cats * sizeof *cats);
    if (cats == NULL) {
      failed = 1;
    } else {
      memset(cats + p->cap_cats, 0, (cap_cats - p->cap_cats) * sizeof *cats);
      p->cats = cats;
      p->cap_cats = cap_cats;
    }
  }
  if (!failed && hits > 0) {
    cat_reuses *c = &p->cats[cat];
    failed = reserve(&c->ns, (size_t)hits, sizeof(int64_t)) != 0 ||
             reserve(&c->runs, (size_t)hits, sizeof(uint32_t)) != 0 ||
             ((p->split || splits(p, cat, hits)) && reserve(&c->keys, (size_t)hits, sizeof(uint32_t)) != 0) ||
             (splits(p, cat, hits) && reserve(&p->base, p->n_keys, sizeof(uint32_t)) != 0);
  }
  if (failed) return lh_fail(err, errlen, LH_ENOMEM, "out of memory in the profile recorder");
  if (grow) {
    memset(AT(p->slope, int64_t) + slope_len, 0, grow * sizeof(int64_t));
    p->slope.len = slope_need;
  }
  return LH_OK;
}

/* Records request r (reserved), its keys given as keys or, when ids is not NULL, as their numbers
 * (the key indices). Its first `hits` keys must have been seen before, with fewer than 2^32 - 1
 * reuses each, and a number of the others may be at most the next new one: if not, nothing is
 * recorded and the block's position is returned (*reason: 1 never seen, 2 too many reuses, 3 a
 * number skipped); else -1. */
static int64_t record_request(lh_profile *p, const int64_t *keys, const uint32_t *ids, size_t n, int64_t now,
                              int32_t cat, int64_t hits, const int64_t *segs, int64_t seg_lo, int64_t seg_hi,
                              int *reason) {
  uint32_t *first = AT(p->key[FIRST_REQ], uint32_t), *last = AT(p->key[LAST_REQ], uint32_t);
  uint32_t *reuses = AT(p->key[REUSES], uint32_t);
  const int64_t *req_ns = AT(p->req_ns, int64_t);
  const uint32_t me = (uint32_t)p->req_ns.len; /* this request's number, if it has blocks */
  uint32_t *idx = AT(p->scratch, uint32_t);
  if (ids == NULL) {
    for (size_t j = 0; j < n; j++) lh_keymap_prefetch(&p->map, keys[j]);
  }
  /* the reused keys, checked before anything changes */
  int64_t seen = hits; /* keys[0 .. seen) were seen before */
  for (int64_t i = 0; i < hits; i++) {
    uint32_t k = ids == NULL ? lh_keymap_get(&p->map, keys[i]) : ids[i] < p->n_keys ? ids[i] : LH_NIL;
    if (k == LH_NIL) {
      seen = i;
      break;
    }
    idx[i] = k;
    __builtin_prefetch(&last[k], 1, 3); /* read and written below, at random keys */
    __builtin_prefetch(&reuses[k], 1, 3);
  }
  for (int64_t i = 0; i < seen; i++) { /* their counts, once the lines are on their way */
    if (reuses[idx[i]] >= UINT32_MAX - (uint32_t)hits) {
      *reason = 2;
      return i;
    }
  }
  if (seen < hits) {
    *reason = 1;
    return seen;
  }
  if (ids != NULL) { /* the other numbers: each one seen, or the next new one */
    size_t next = p->n_keys;
    for (size_t j = (size_t)hits; j < n; j++) {
      if (ids[j] > next) {
        *reason = 3;
        return (int64_t)j;
      }
      if (ids[j] == next) next++;
    }
  }
  if (hits > 0) {
    if ((size_t)cat >= p->n_cats) p->n_cats = (size_t)cat + 1;
    if (p->base_cat < 0) p->base_cat = cat;
    if (splits(p, cat, hits)) {
      memcpy(p->base.data, reuses, p->n_keys * sizeof(uint32_t));
      p->base.len = p->n_keys;
      p->split = 1;
    }
    cat_reuses *c = &p->cats[cat];
    int64_t *ns = AT(c->ns, int64_t);
    uint32_t *runs = AT(c->runs, uint32_t);
    size_t len = c->ns.len;
    for (int64_t i = 0; i < hits; i++) { /* against the state before the request */
      int64_t t = now - req_ns[last[idx[i]]];
      if (len > 0 && ns[len - 1] == t && runs[len - 1] < UINT32_MAX) {
        runs[len - 1]++;
      } else {
        ns[len] = t;
        runs[len++] = 1;
      }
      reuses[idx[i]]++;
    }
    c->ns.len = c->runs.len = len;
    c->n += (uint64_t)hits;
    if (p->split) {
      memcpy(AT(c->keys, uint32_t) + c->keys.len, idx, (size_t)hits * sizeof(uint32_t));
      c->keys.len += (size_t)hits;
    }
  }
  /* the request's window. Requests come in time order, so those of earlier windows have smaller
   * numbers: a key's latest access lies in an earlier window exactly when its request's number is
   * below the window's first (window_req), no time compared per block. */
  int64_t w = floor_div(now, p->window_ns);
  if (p->window.len == 0 || AT(p->window, int64_t)[p->window.len - 1] != w) {
    AT(p->window, int64_t)[p->window.len++] = w;
    AT(p->window_keys, int64_t)[p->window_keys.len++] = 0;
    p->window_req = me;
  }
  const uint32_t window_req = (uint32_t)p->window_req;
  int64_t *window_keys = &AT(p->window_keys, int64_t)[p->window_keys.len - 1];
  /* the rest of the keys; a new one gets the next index, so indices from `before` on are this
   * request's own */
  size_t before = p->n_keys;
  for (size_t j = (size_t)hits; j < n; j++) {
    uint32_t k;
    if (ids != NULL) {
      k = ids[j] == p->n_keys ? LH_NIL : ids[j];
    } else {
      size_t at = lh_keymap_find(&p->map, keys[j]); /* the map has slots: reserve_request */
      k = lh_keymap_val(&p->map, at);
      if (k == LH_NIL) lh_keymap_put_at(&p->map, at, keys[j], (uint32_t)p->n_keys);
    }
    if (k == LH_NIL) {
      k = (uint32_t)p->n_keys++;
      first[k] = last[k] = me;
      reuses[k] = 0;
      ++*window_keys;
    } else {
      __builtin_prefetch(&last[k], 1, 3);
    }
    idx[j] = k;
  }
  for (size_t i = 0; i < N_KEY_ARRAYS; i++) p->key[i].len = p->n_keys;
  /* the accesses of the keys seen before (every update after every reuse time was taken) */
  for (size_t j = 0; j < n; j++) {
    uint32_t k = idx[j];
    if (k >= before) continue;
    if (last[k] < window_req) ++*window_keys; /* (a second block of the key finds last[k] == me) */
    last[k] = me;
  }
  if (n > 0) { /* numbered (reserve_request made room) */
    AT(p->req_ns, int64_t)[p->req_ns.len++] = now;
    AT(p->req_cat, int32_t)[p->req_cat.len++] = cat;
  }
  /* the slope reaches every segment's end (reserve_request) */
  lh_project_curve_add(AT(p->slope, int64_t), p->slope.len, segs + 2 * seg_lo, (size_t)(seg_hi - seg_lo));
  p->stats.requests++;
  p->stats.accesses += n;
  p->stats.reuses += (uint64_t)hits;
  return -1;
}

int lh_profile_record_batch(lh_profile *p, const int64_t *keys, const uint32_t *key_ids, size_t n_keys,
                            const int64_t *offsets, const int64_t *timestamps, const int32_t *categories, size_t n_req,
                            const int64_t *segs, size_t n_segs, const int64_t *seg_offsets, int64_t *hits,
                            size_t *n_done, char *err, size_t errlen) {
  *n_done = 0;
  const int numbered = key_ids != NULL ? 2 : 1;
  if (n_req > 0 && p->numbered != 0 && p->numbered != numbered) {
    return lh_fail(err, errlen, LH_EINVAL,
                   numbered == 2 ? "this recorder was fed keys: it cannot take key numbers"
                                 : "this recorder was fed key numbers: it cannot take keys");
  }
  if (keys == NULL && key_ids == NULL && n_keys > 0) return lh_fail(err, errlen, LH_EINVAL, "no keys given");
  const lh_batch batch = {n_req, offsets, n_keys, timestamps, categories, 0};
  for (size_t r = 0; r < n_req; r++) {
    int rc = lh_batch_check_request(&batch, r, p->started ? &p->last_ts : NULL, err, errlen);
    if (rc == LH_OK && p->started && (uint64_t)timestamps[r] - (uint64_t)p->first_ts > (uint64_t)INT64_MAX) {
      /* a reuse time or a lifespan is at most the span: it must fit int64 nanoseconds */
      rc = lh_fail(err, errlen, LH_ERANGE,
                   "request %zu: timestamp %lld ns is more than 2^63 - 1 ns after the first request's (%lld ns)", r,
                   (long long)timestamps[r], (long long)p->first_ts);
    }
    if (rc != LH_OK) {
      *n_done = r;
      return rc;
    }
    int64_t lo = offsets[r], now = timestamps[r];
    int32_t cat = categories[r];
    size_t n = (size_t)(offsets[r + 1] - lo);
    int64_t h = 0, end = 0;
    int reason = 0;
    rc = check_curve(p, n, segs, n_segs, seg_offsets, r, &h, &end, err, errlen);
    if (rc == LH_OK) rc = reserve_request(p, n, cat, h, end, numbered, err, errlen);
    int64_t bad = rc == LH_OK
                      ? record_request(p, key_ids == NULL ? keys + lo : NULL, key_ids != NULL ? key_ids + lo : NULL, n,
                                       now, cat, h, segs, seg_offsets[r], seg_offsets[r + 1], &reason)
                      : -1;
    if (bad >= 0 && reason == 1) {
      rc = lh_fail(err, errlen, LH_EINVAL, "request %zu: the curve covers block %lld, a key never seen before", r,
                   (long long)bad);
    } else if (bad >= 0 && reason == 2) {
      rc = lh_fail(err, errlen, LH_ERANGE, "request %zu: block %lld's key has 2^32 - 1 reuses", r, (long long)bad);
    } else if (bad >= 0) {
      size_t next = p->n_keys; /* the number a new key would have had there */
      for (int64_t j = h; j < bad; j++) next += key_ids[lo + j] == next;
      rc = lh_fail(err, errlen, LH_EINVAL,
                   "request %zu: block %lld's key number %u skips numbers (the next new key is number %zu)", r,
                   (long long)bad, key_ids[lo + bad], next);
    }
    if (rc != LH_OK) {
      *n_done = r;
      return rc;
    }
    if (!p->started) p->first_ts = now;
    p->started = 1;
    p->numbered = numbered;
    p->last_ts = now;
    hits[r] = h;
  }
  *n_done = n_req;
  return LH_OK;
}

void lh_profile_get_view(const lh_profile *p, lh_profile_view *view) {
  view->n_keys = p->n_keys;
  view->first_req = p->key[FIRST_REQ].data;
  view->last_req = p->key[LAST_REQ].data;
  view->reuses = p->key[REUSES].data;
  view->n_requests = p->req_ns.len;
  view->request_ns = p->req_ns.data;
  view->request_cat = p->req_cat.data;
  view->n_thresholds = p->slope.len;
  view->threshold_slope = p->slope.data;
  view->n_windows = p->window.len;
  view->window = p->window.data;
  view->window_keys = p->window_keys.data;
  view->n_categories = p->n_cats;
  view->base_category = p->base_cat;
  view->n_base = p->base.len;
  view->base_reuses = p->base.data;
}

void lh_profile_get_reuses(lh_profile *p, int32_t category, lh_profile_reuses *out) {
  memset(out, 0, sizeof *out);
  if (category < 0 || (size_t)category >= p->n_cats) return;
  cat_reuses *c = &p->cats[category];
  out->n = c->n;
  out->n_runs = c->ns.len;
  out->ns = c->ns.data;
  out->runs = c->runs.data;
  out->n_keys = c->keys.len;
  out->keys = c->keys.data;
}

void lh_profile_get_stats(const lh_profile *p, lh_profile_stats *stats) {
  *stats = p->stats;
  stats->keys = p->n_keys;
  size_t bytes = sizeof *p + lh_keymap_memory(&p->map) + p->cap_cats * sizeof(cat_reuses);
  for (size_t i = 0; i < N_KEY_ARRAYS; i++) bytes += p->key[i].cap * KEY_ELEM[i];
  bytes += (p->req_ns.cap + p->slope.cap + p->window.cap + p->window_keys.cap) * sizeof(int64_t) +
           p->req_cat.cap * sizeof(int32_t) + (p->scratch.cap + p->base.cap) * sizeof(uint32_t);
  for (size_t c = 0; c < p->cap_cats; c++)
    bytes += p->cats[c].ns.cap * sizeof(int64_t) + (p->cats[c].runs.cap + p->cats[c].keys.cap) * sizeof(uint32_t);
  stats->memory_bytes = bytes;
}

/* (*high, *low) += x * w, as 128-bit two's complement integers. */
static void add_product(uint64_t *high, uint64_t *low, int64_t x, uint32_t w) {
  uint64_t u = (uint64_t)x; /* x + 2^64 when x < 0: the product is then w x 2^64 too large */
  uint64_t lo = (u & 0xFFFFFFFFu) * w, hi = (u >> 32) * w; /* u x w = hi x 2^32 + lo */
  uint64_t p_low = lo + (hi << 32);
  uint64_t p_high = (hi >> 32) + (p_low < lo) - (x < 0 ? w : 0);
  *low += p_low;
  *high += p_high + (*low < p_low);
}

typedef struct tally_entry {
  int64_t value, count;
} tally_entry;

static int by_value(const void *a, const void *b) {
  int64_t x = ((const tally_entry *)a)->value, y = ((const tally_entry *)b)->value;
  return (x > y) - (x < y);
}

int lh_tally_i64(const int64_t *v, const uint32_t *weights, size_t n, size_t max_distinct, int64_t *values,
                 int64_t *counts, size_t *n_distinct, int64_t *sum_high, uint64_t *sum_low, char *err, size_t errlen) {
  *n_distinct = 0;
  *sum_high = 0;
  *sum_low = 0;
  if (n == 0) return LH_OK;
  if (max_distinct > MAX_KEYS) max_distinct = MAX_KEYS; /* indices are uint32, LH_NIL excluded */
  lh_keymap map = {0};
  map.max_load_percent = 50;
  size_t k = 0;
  int rc = LH_OK;
  /* runs of equal values are common (a request's blocks were mostly last seen together): the
   * previous value's index is kept, so a run costs one lookup */
  int64_t prev = 0;
  uint32_t prev_at = LH_NIL;
  uint64_t high = 0, low = 0; /* the sum, 128-bit two's complement */
  for (size_t i = 0; i < n; i++) {
    int64_t x = v[i];
    uint32_t w = weights != NULL ? weights[i] : 1;
    add_product(&high, &low, x, w);
    if (prev_at != LH_NIL && x == prev) {
      counts[prev_at] += w;
      continue;
    }
    if (map.count >= lh_keymap_room(&map) && lh_keymap_reserve(&map, 1) != 0) {
      rc = lh_fail(err, errlen, LH_ENOMEM, "out of memory tallying %zu values", n);
      break;
    }
    size_t at = lh_keymap_find(&map, x);
    uint32_t j = lh_keymap_val(&map, at);
    if (j == LH_NIL) {
      if (k == max_distinct) {
        rc = lh_fail(err, errlen, LH_ERANGE, "more than %zu distinct values", max_distinct);
        break;
      }
      j = (uint32_t)k++;
      lh_keymap_put_at(&map, at, x, j);
      values[j] = x;
      counts[j] = 0;
    }
    counts[j] += w;
    prev = x;
    prev_at = j;
  }
  lh_keymap_free(&map);
  if (rc != LH_OK) return rc;
  *sum_high = (int64_t)high; /* two's complement: the high word's sign is the sum's */
  *sum_low = low;
  tally_entry *e = malloc(k * sizeof *e);
  if (e == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory sorting %zu distinct values", k);
  for (size_t j = 0; j < k; j++) e[j] = (tally_entry){values[j], counts[j]};
  qsort(e, k, sizeof *e, by_value);
  for (size_t j = 0; j < k; j++) {
    values[j] = e[j].value;
    counts[j] = e[j].count;
  }
  free(e);
  *n_distinct = k;
  return LH_OK;
}
