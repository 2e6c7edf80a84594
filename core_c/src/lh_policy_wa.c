/* lh_policy_wa.c - the workload-aware policy of "KVCache in the Wild" (seed 004, section 4.2),
 * made exact.
 *
 * Each category w (of the request that last accessed a block) keeps a list of its resident
 * blocks in order of last access. The candidates for eviction are the heads of those lists (one
 * per category: O(categories) per eviction). A candidate's priority is, compared
 * lexicographically, (log ReuseProb_w(t, life), -offset), smallest evicted, ties by least recent
 * access; t = now - its last access, offset = its index in that request, and
 *     log ReuseProb_w(t, life) = log(1 - exp(-r_w life)) - r_w t
 * (the log form: the literal F(t + life) - F(t) underflows to 0 and creates false ties).
 *
 * Rates come from reuse-time observations made at trace level, whatever the cache holds: when a
 * request accesses a key an earlier request accessed, the time since that access is observed for
 * the category of that earlier access. At fit times T_k = t0 + k * refit (k >= 1, applied before
 * the first request with timestamp >= T_k) r_w = count / sum of w's observations in
 * [T_k - window, T_k) (kept when there are none or their sum is 0); r_all likewise over all
 * categories, used by categories never fitted. Until a fit yields a rate the policy is exactly
 * LRU. life is the caller's, or fixed at T_1 as the nearest-rank p90 of the observations before
 * it (60 s if none).
 *
 * Observation sums are exact integers (ns, 128-bit), and a rate is (double)count / (double)sum,
 * so results do not depend on the order of summation.
 *
 * Where a key's last access is kept: a resident key's in its slot (ts and cat as the simulator
 * and wa_hit leave them, the request number in prio), so a hit observes at its commit; every
 * other key's in its entry (`keys`), written when a request misses the key and after the key is
 * evicted (before anything reads the entry). The simulator's key map keeps every key (keeps_keys):
 * the lookup that finds a key not resident finds its entry in the same probe, and gives a new
 * key an entry. A resident slot's aux is its key's entry.
 * A request observes each of its distinct keys once: one not resident at its lookup in
 * wa_begin; a resident one at the first of its accesses the commit (tail to head) makes, a hit,
 * or an insertion after this commit evicted it. Observations wait for no fit (fits come before
 * a request's lookup), and their order does not matter (sums, counts, a p90): a request's are
 * summed per category and enter the window as one run each when the next request begins.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lh_common.h"
#include "lh_policy_ops.h"
#include "lh_prefault.h"

#if !defined(__SIZEOF_INT128__)
#error "lh_policy_wa.c needs a 128-bit integer type for exact sums of reuse times"
#endif
__extension__ typedef unsigned __int128 u128;

#define DEFAULT_LIFE_NS 60e9

typedef struct obs_run { /* observations of one category at one request time */
  int64_t ts;
  int32_t cat;
  uint64_t count;
  u128 sum;
} obs_run;

typedef struct wa_cat {
  lh_slot_list list;  /* resident blocks last accessed by this category, by last access */
  uint32_t active_at; /* index in wa.active, LH_NIL when the list is empty */
  uint64_t count;     /* observations in the current window */
  u128 sum;
  uint64_t req_count; /* observations of the current request, not yet in a run */
  u128 req_sum;
  double rate;     /* per ns, 0 = never fitted */
  double log_life; /* log(-expm1(-rate * life_ns)) for the current rate */
} wa_cat;

typedef struct seen_key { /* the last access of a key while it is not resident */
  int64_t ts;
  uint64_t req; /* request number */
  int32_t cat;
} seen_key;

typedef struct evicted_key { /* an eviction's write to its key's entry, not yet made */
  int64_t ts;
  uint64_t req;
  uint32_t entry;
  int32_t cat;
} evicted_key;

typedef struct wa {
  int64_t refit_ns, window_ns;
  double life_ns;
  int life_fixed;
  wa_cat *cats;
  size_t n_cats, cap_cats;
  int32_t *active; /* categories with resident blocks */
  size_t n_active, cap_active;
  int32_t *touched; /* categories the current request has observations of (req_count > 0) */
  size_t n_touched, cap_touched;
  int64_t req_now; /* the current request's timestamp */
  uint64_t all_count;
  u128 all_sum;
  double rate_all, log_life_all;
  int any_rate;
  int started, fits_exhausted;
  int64_t next_fit;
  uint64_t fits;
  seen_key *keys;          /* by entry: every key ever accessed has one (the simulator gives them) */
  size_t n_seen, cap_seen; /* n_seen: the entries this policy has seen */
  size_t keys_ahead;       /* lh_prefault_ahead's progress through `keys` (filled in entry order) */
  uint64_t req_no;
  uint32_t next_victim; /* the hint of the last eviction (wa_next_victim) */
  /* the evictions since the current request's lookup, their entries prefetched: written when the
   * next request begins, or sooner when an insertion reads one of their entries */
  evicted_key *evicted;
  size_t n_evicted, cap_evicted;
  /* observation runs in the window, oldest first (a ring) */
  obs_run *runs;
  size_t cap_runs, head_run, n_runs; /* cap_runs: a power of two */
  /* the reuse times observed before the first fit, while life is still to be derived */
  int64_t *sample;
  size_t n_sample, cap_sample;
} wa;

static int to_ns(double seconds, int64_t *out) {
  double ns = nearbyint(seconds * 1e9); /* to nearest, ties to even */
  if (!(ns >= 1.0) || ns > 4.0e18) return -1;
  *out = (int64_t)ns;
  return 0;
}

static int wa_create(void **state, const lh_wa_params *p, char *err, size_t errlen) {
  if (p == NULL || !isfinite(p->life_s) || p->life_s < 0) {
    return lh_fail(err, errlen, LH_EINVAL, "wa life_s must be finite and > 0 (0 = derive it)");
  }
  if (!isfinite(p->fit_window_s) || !isfinite(p->refit_s)) {
    return lh_fail(err, errlen, LH_EINVAL, "wa fit_window_s and refit_s must be finite");
  }
  wa *w = calloc(1, sizeof *w);
  if (w == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating the wa policy");
  if (to_ns(p->fit_window_s, &w->window_ns) != 0 || to_ns(p->refit_s, &w->refit_ns) != 0) {
    free(w);
    return lh_fail(err, errlen, LH_EINVAL, "wa fit_window_s and refit_s must be between 1 ns and 4e9 s");
  }
  if (p->life_s > 0) {
    w->life_ns = p->life_s * 1e9;
    w->life_fixed = 1;
  }
  *state = w;
  return LH_OK;
}

static void wa_destroy(void *state) {
  wa *w = state;
  if (w == NULL) return;
  lh_policy_free(w->cats, w->cap_cats, sizeof(wa_cat));
  lh_policy_free(w->active, w->cap_active, sizeof(int32_t));
  lh_policy_free(w->touched, w->cap_touched, sizeof(int32_t));
  lh_policy_free(w->keys, w->cap_seen, sizeof(seen_key));
  lh_policy_free(w->evicted, w->cap_evicted, sizeof(evicted_key));
  free(w->runs);
  lh_policy_free(w->sample, w->cap_sample, sizeof(int64_t));
  free(w);
}

static int grow_runs(wa *w, size_t need) {
  if (need <= w->cap_runs) return 0;
  size_t cap = w->cap_runs ? w->cap_runs : 64;
  while (cap < need) cap *= 2;
  obs_run *r = malloc(cap * sizeof *r);
  if (r == NULL) return -1;
  for (size_t i = 0; i < w->n_runs; i++) r[i] = w->runs[(w->head_run + i) & (w->cap_runs - 1)];
  free(w->runs);
  w->runs = r;
  w->cap_runs = cap;
  w->head_run = 0;
  return 0;
}

static int wa_reserve(void *state, size_t slots, const int64_t *keys, size_t n, int32_t cat) {
  (void)slots, (void)keys;
  wa *w = state;
  size_t old_cap = w->cap_cats;
  if (lh_policy_grow((void **)&w->cats, &w->cap_cats, (size_t)cat + 1, sizeof(wa_cat)) != 0) return -1;
  for (size_t c = old_cap; c < w->cap_cats; c++) {
    memset(&w->cats[c], 0, sizeof w->cats[c]);
    lh_list_init(&w->cats[c].list);
    w->cats[c].active_at = LH_NIL;
  }
  if (lh_policy_grow((void **)&w->active, &w->cap_active, w->cap_cats, sizeof(int32_t)) != 0 ||
      lh_policy_grow((void **)&w->touched, &w->cap_touched, w->cap_cats, sizeof(int32_t)) != 0) {
    return -1;
  }
  if (lh_policy_grow((void **)&w->keys, &w->cap_seen, w->n_seen + n, sizeof(seen_key)) != 0 ||
      lh_policy_grow((void **)&w->evicted, &w->cap_evicted, w->n_evicted + n, sizeof(evicted_key)) != 0) {
    return -1;
  }
  lh_prefault_ahead(w->keys, (w->n_seen + n) * sizeof(seen_key), w->cap_seen * sizeof(seen_key), &w->keys_ahead);
  if (grow_runs(w, w->n_runs + w->n_touched) != 0) return -1; /* the runs wa_begin flushes */
  if (!w->life_fixed && lh_policy_grow((void **)&w->sample, &w->cap_sample, w->n_sample + n, sizeof(int64_t)) != 0)
    return -1;
  return 0;
}

static void set_rate(double *rate, double *log_life, uint64_t count, u128 sum, double life_ns) {
  if (count == 0 || sum == 0) return; /* keeps the previous rate */
  *rate = (double)count / (double)sum;
  *log_life = log(-expm1(-*rate * life_ns));
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static void swap_i64(int64_t *a, int64_t *b) {
  int64_t t = *a;
  *a = *b;
  *b = t;
}

int64_t lh_select_i64(int64_t *a, size_t n, size_t k, int rounds) {
  ptrdiff_t lo = 0, hi = (ptrdiff_t)n - 1, want = (ptrdiff_t)k;
  if (rounds < 0) {
    rounds = 8;
    for (size_t m = n; m > 1; m >>= 1) rounds += 2;
  }
  while (lo < hi) {
    if (rounds-- == 0) {
      qsort(a + lo, (size_t)(hi - lo + 1), sizeof *a, cmp_i64);
      break;
    }
    ptrdiff_t mid = lo + (hi - lo) / 2;
    if (a[mid] < a[lo]) swap_i64(&a[mid], &a[lo]);
    if (a[hi] < a[lo]) swap_i64(&a[hi], &a[lo]);
    if (a[hi] < a[mid]) swap_i64(&a[hi], &a[mid]);
    int64_t pivot = a[mid];
    ptrdiff_t i = lo, j = hi;
    while (i <= j) { /* afterwards a[lo .. j] <= pivot, a[i .. hi] >= pivot, a[j+1 .. i-1] == pivot */
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) swap_i64(&a[i++], &a[j--]);
    }
    if (want <= j) {
      hi = j;
    } else if (want >= i) {
      lo = i;
    } else {
      break;
    }
  }
  return a[want];
}

/* The nearest-rank p90 of the sample (reordered in place), or the default when it is empty. */
static double p90_ns(int64_t *sample, size_t n) {
  if (n == 0) return DEFAULT_LIFE_NS;
  return (double)lh_select_i64(sample, n, (9 * n + 9) / 10 - 1, -1);
}

static void fit(wa *w, int64_t t) {
  while (w->n_runs > 0) { /* drop runs older than t - window (every run is before t) */
    obs_run *r = &w->runs[w->head_run];
    if ((uint64_t)t - (uint64_t)r->ts <= (uint64_t)w->window_ns) break;
    w->cats[r->cat].count -= r->count;
    w->cats[r->cat].sum -= r->sum;
    w->all_count -= r->count;
    w->all_sum -= r->sum;
    w->head_run = (w->head_run + 1) & (w->cap_runs - 1);
    w->n_runs--;
  }
  if (!w->life_fixed) {
    w->life_ns = p90_ns(w->sample, w->n_sample);
    w->life_fixed = 1;
    lh_policy_free(w->sample, w->cap_sample, sizeof(int64_t));
    w->sample = NULL;
    w->n_sample = w->cap_sample = 0;
  }
  for (size_t c = 0; c < w->n_cats; c++) {
    set_rate(&w->cats[c].rate, &w->cats[c].log_life, w->cats[c].count, w->cats[c].sum, w->life_ns);
  }
  set_rate(&w->rate_all, &w->log_life_all, w->all_count, w->all_sum, w->life_ns);
  w->any_rate = w->rate_all > 0;
  w->fits++;
}

/* Observes a reuse time of `value` ns for category cat at the current request: summed per
 * category until the next request's flush_request makes them one run each. */
static inline void observe(wa *w, int32_t cat, uint64_t value) {
  wa_cat *c = &w->cats[cat];
  if (c->req_count++ == 0) w->touched[w->n_touched++] = cat;
  c->req_sum += value;
  if (!w->life_fixed) w->sample[w->n_sample++] = (int64_t)value;
}

/* The current request's observations into the window: a run per category (before any fit). */
static void flush_request(wa *w) {
  for (size_t i = 0; i < w->n_touched; i++) {
    wa_cat *c = &w->cats[w->touched[i]];
    obs_run *r = &w->runs[(w->head_run + w->n_runs++) & (w->cap_runs - 1)];
    r->ts = w->req_now;
    r->cat = w->touched[i];
    r->count = c->req_count;
    r->sum = c->req_sum;
    c->count += c->req_count;
    c->sum += c->req_sum;
    w->all_count += c->req_count;
    w->all_sum += c->req_sum;
    c->req_count = 0;
    c->req_sum = 0;
  }
  w->n_touched = 0;
}

/* The entries of the keys evicted since the last call, written in the order of the evictions. */
static void write_evicted(wa *w) {
  for (size_t e = 0; e < w->n_evicted; e++) {
    const evicted_key *v = &w->evicted[e];
    seen_key *k = &w->keys[v->entry];
    k->ts = v->ts;
    k->req = v->req;
    k->cat = v->cat;
  }
  w->n_evicted = 0;
}

static void wa_begin(void *state, const int64_t *keys, const uint32_t *found, size_t n, int64_t now, int32_t cat) {
  (void)keys; /* the lookup's values say all: found[j] is a slot or the key's entry */
  wa *w = state;
  write_evicted(w);
  flush_request(w); /* the request before */
  w->req_now = now;
  if ((size_t)cat >= w->n_cats) w->n_cats = (size_t)cat + 1;
  if (!w->started) {
    w->started = 1;
    w->fits_exhausted = now > INT64_MAX - w->refit_ns;
    w->next_fit = w->fits_exhausted ? INT64_MAX : now + w->refit_ns;
  }
  while (!w->fits_exhausted && w->next_fit <= now) {
    fit(w, w->next_fit);
    /* Fits until the oldest run leaves the window (T > its ts + window) see exactly what this one
     * saw (no observation arrives between requests), so they would set the same rates: count
     * them without doing them. Without this a tiny refit over a long trace would loop for hours. */
    int64_t same_until = now;
    if (w->n_runs > 0) {
      int64_t head_ts = w->runs[w->head_run].ts;
      int64_t leaves = head_ts > INT64_MAX - w->window_ns ? INT64_MAX : head_ts + w->window_ns;
      if (leaves < same_until) same_until = leaves;
    }
    uint64_t steps = 1;
    if (same_until > w->next_fit) {
      steps += ((uint64_t)same_until - (uint64_t)w->next_fit) / (uint64_t)w->refit_ns;
      w->fits += steps - 1;
    }
    if (steps > (uint64_t)INT64_MAX / (uint64_t)w->refit_ns ||
        w->next_fit > INT64_MAX - (int64_t)(steps * (uint64_t)w->refit_ns)) {
      w->fits_exhausted = 1;
    } else {
      w->next_fit += (int64_t)(steps * (uint64_t)w->refit_ns);
    }
  }
  w->req_no++;
  size_t seen_before = w->n_seen;
  for (size_t j = 0; j < n; j++) {
    if (found[j] < LH_ABSENT) continue; /* resident: observed at its commit */
    uint32_t i = found[j] & ~LH_ABSENT;
    if (i >= seen_before) { /* a key this lookup met first: nothing to observe */
      if (i >= w->n_seen) w->n_seen = (size_t)i + 1;
    } else if (w->keys[i].req == w->req_no) {
      continue; /* a second occurrence in this request observes nothing */
    } else {
      observe(w, w->keys[i].cat, (uint64_t)now - (uint64_t)w->keys[i].ts);
    }
    w->keys[i].ts = now; /* for a request the commit does not insert (capacity 0) */
    w->keys[i].req = w->req_no;
    w->keys[i].cat = cat;
  }
}

static void link(wa *w, lh_slot *slots, uint32_t s, int32_t cat) {
  wa_cat *c = &w->cats[cat];
  if (c->list.len == 0) {
    c->active_at = (uint32_t)w->n_active;
    w->active[w->n_active++] = cat;
  }
  lh_list_append(&c->list, slots, s);
}

static void unlink_slot(wa *w, lh_slot *slots, uint32_t s) {
  wa_cat *c = &w->cats[slots[s].cat];
  lh_list_unlink(&c->list, slots, s);
  if (c->list.len == 0) { /* swap-remove from the active categories */
    int32_t moved = w->active[--w->n_active];
    w->active[c->active_at] = moved;
    w->cats[moved].active_at = c->active_at;
  }
}

static void wa_insert(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  wa *w = state;
  uint32_t i = slots[s].aux; /* its entry, from the simulator */
  seen_key *k = &w->keys[i];
  /* A key not resident at the lookup has this request's number in its entry; any other was
   * resident then and evicted since by this commit, which may not have written its entry yet. */
  if (k->req != w->req_no && w->n_evicted > 0) write_evicted(w);
  if (k->req != w->req_no) {
    observe(w, k->cat, (uint64_t)a->now - (uint64_t)k->ts);
  }
  slots[s].cat = a->cat;
  slots[s].offset = a->offset;
  slots[s].prio = w->req_no;
  link(w, slots, s, a->cat);
}

static void wa_hit(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  wa *w = state;
  if (slots[s].prio != w->req_no) observe(w, slots[s].cat, (uint64_t)a->now - (uint64_t)a->last_ts);
  unlink_slot(w, slots, s);
  slots[s].cat = a->cat;
  slots[s].offset = a->offset;
  slots[s].prio = w->req_no;
  link(w, slots, s, a->cat);
}

/* Whether candidate s (log ReuseProb lp; unused before the first fit) is evicted before t. */
static inline int precedes(const wa *w, const lh_slot *slots, uint32_t s, double lp, uint32_t t, double t_lp) {
  if (!w->any_rate) return slots[s].seq < slots[t].seq; /* exactly LRU: the least recent of the heads */
  if (lp != t_lp) return lp < t_lp;
  if (slots[s].offset != slots[t].offset) return slots[s].offset > slots[t].offset;
  return slots[s].seq < slots[t].seq;
}

static uint32_t wa_evict(void *state, lh_slot *slots, const lh_access *a) {
  wa *w = state;
  uint32_t best = LH_NIL, second = LH_NIL;
  double best_lp = 0, second_lp = 0;
  for (size_t i = 0; i < w->n_active; i++) {
    const wa_cat *c = &w->cats[w->active[i]];
    uint32_t s = c->list.head;
    double lp = 0;
    if (w->any_rate) {
      double rate = c->rate > 0 ? c->rate : w->rate_all;
      double log_life = c->rate > 0 ? c->log_life : w->log_life_all;
      lp = log_life - rate * (double)((uint64_t)a->now - (uint64_t)slots[s].ts);
    }
    if (best == LH_NIL || precedes(w, slots, s, lp, best, best_lp)) {
      second = best;
      second_lp = best_lp;
      best = s;
      best_lp = lp;
    } else if (second == LH_NIL || precedes(w, slots, s, lp, second, second_lp)) {
      second = s;
      second_lp = lp;
    }
  }
  unlink_slot(w, slots, best);
  /* The hint: the victim's successor in its own category, which is the next victim unless the
   * runner-up precedes it (telling would load its slot, the miss the hint is to hide). One
   * category's heads usually go first for a while: it was right for 95% of the bench trace's
   * evictions, where the runner-up was right for 5%. */
  uint32_t successor = w->cats[slots[best].cat].list.head;
  w->next_victim = successor != LH_NIL ? successor : second;
  /* Its last access, from now on kept in its entry: written later (write_evicted), so that the
   * entry's cache miss overlaps the rest of the commit. */
  evicted_key *v = &w->evicted[w->n_evicted++];
  v->ts = slots[best].ts;
  v->req = slots[best].prio;
  v->entry = slots[best].aux;
  v->cat = slots[best].cat;
#if defined(__GNUC__)
  __builtin_prefetch(&w->keys[v->entry], 1, 3);
#endif
  return best;
}

static uint32_t wa_next_victim(const void *state, const lh_slot *slots) {
  (void)slots;
  return ((const wa *)state)->next_victim;
}

static size_t wa_memory(const void *state) {
  const wa *w = state;
  return sizeof *w + w->cap_cats * sizeof(wa_cat) + (w->cap_active + w->cap_touched) * sizeof(int32_t) +
         w->cap_seen * sizeof(seen_key) + w->cap_evicted * sizeof(evicted_key) + w->cap_runs * sizeof(obs_run) +
         w->cap_sample * sizeof(int64_t);
}

static void wa_stats(const void *state, lh_sim_stats *st) {
  const wa *w = state;
  double life = w->life_ns;
  if (!w->life_fixed) { /* the horizon the first fit would fix */
    life = DEFAULT_LIFE_NS;
    int64_t *copy = w->n_sample ? malloc(w->n_sample * sizeof *copy) : NULL;
    if (copy != NULL) {
      memcpy(copy, w->sample, w->n_sample * sizeof *copy);
      life = p90_ns(copy, w->n_sample);
      free(copy);
    } else if (w->n_sample) {
      life = 0; /* out of memory: unknown */
    }
  }
  st->wa_life_s = life / 1e9;
  st->wa_fits = w->fits;
  st->wa_categories = w->n_cats;
  st->wa_rate_all = w->rate_all * 1e9;
}

static double wa_rate(const void *state, int32_t cat) {
  const wa *w = state;
  return cat >= 0 && (size_t)cat < w->n_cats ? w->cats[cat].rate * 1e9 : 0.0;
}

static int wa_check(const void *state, const lh_slot *slots, uint64_t resident, char *err, size_t errlen) {
  const wa *w = state;
  uint64_t total = 0;
  size_t active = 0;
  for (size_t c = 0; c < w->n_cats; c++) {
    const wa_cat *k = &w->cats[c];
    int rc = lh_list_check(&k->list, slots, 1, "wa category list", err, errlen);
    if (rc != LH_OK) return rc;
    for (uint32_t s = k->list.head; s != LH_NIL; s = slots[s].next) {
      if ((size_t)slots[s].cat != c) return lh_fail(err, errlen, LH_EINVAL, "wa: slot %u in the wrong category", s);
      if (slots[s].aux >= w->n_seen || slots[s].prio > w->req_no) {
        return lh_fail(err, errlen, LH_EINVAL, "wa: slot %u's entry or request number is wrong", s);
      }
    }
    if (k->list.len) {
      active++;
      if (k->active_at >= w->n_active || (size_t)w->active[k->active_at] != c) {
        return lh_fail(err, errlen, LH_EINVAL, "wa: category %zu missing from the active set", c);
      }
    }
    total += k->list.len;
  }
  if (active != w->n_active) return lh_fail(err, errlen, LH_EINVAL, "wa: active set holds empty categories");
  if (total != resident)
    return lh_fail(err, errlen, LH_EINVAL, "wa: lists hold %llu slots, %llu resident", (unsigned long long)total,
                   (unsigned long long)resident);
  return LH_OK;
}

const lh_policy_ops lh_policy_wa = {
    .name = "wa",
    .keeps_keys = 1,
    .create = wa_create,
    .destroy = wa_destroy,
    .reserve = wa_reserve,
    .begin_request = wa_begin,
    .on_insert = wa_insert,
    .on_hit = wa_hit,
    .evict = wa_evict,
    .next_victim = wa_next_victim,
    .memory = wa_memory,
    .stats = wa_stats,
    .rate = wa_rate,
    .check = wa_check,
};
