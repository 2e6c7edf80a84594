/* lh_sim.c - the fixed-capacity simulator: key map, slots, lookup and reverse commit (see
 * lh_policy.h); the policy behind lh_policy_ops.h decides only the victims. Also the eviction
 * evidence: the per-second peak of evictions, and (LH_SIM_MISS_EVIDENCE) every evicted key's
 * latest eviction time, read by the lookup of a missing request. */
#include <stdlib.h>
#include <string.h>

#include "lh_batch.h"
#include "lh_buf.h"
#include "lh_common.h"
#include "lh_policy_ops.h"
#include "lh_prefault.h"

#define MAX_TRACKED ((uint64_t)UINT32_MAX - 1) /* slot and record indices are uint32, LH_NIL excluded */
#define SIM_RUN_BITS 2 /* the key maps' runs of consecutive keys (a Mooncake request's blocks): lh_keymap.h */

struct lh_sim {
  const lh_policy_ops *ops;
  void *policy;
  uint64_t capacity;
  /* resident key -> slot; when the policy keeps_keys, any other key -> LH_ABSENT | its entry; else
   * (ghosts_in_map) a key evicted and not resident since -> LH_ABSENT | its ghost time with
   * evidence, LH_ABSENT without: a ghost */
  lh_keymap map;
  uint32_t n_entries; /* keeps_keys: the entries given */
  /* Keys leave the map only by purge_ghosts: a slot knows its key's place there (lh_slot.at), so
   * an eviction rewrites that value, a store where a deletion would shift the keys after it, and a
   * key evicted and back later finds its old place. Nothing else moves a key but the map's growth.
   * Without evidence the ghosts are only that cheaper deletion, and purge_ghosts drops them all
   * where the map would otherwise grow past twice what the residents can need, so the memory
   * follows the capacity, not the trace's keys. */
  lh_slot *slots;
  size_t n_slots, cap_slots; /* slots in use (== resident) and allocated */
  uint64_t seq;
  int64_t ttl_ns; /* 0: none (lh_sim_set_ttl) */
  int64_t last_ts;
  int started;
  /* per-request scratch: the slot of each key the lookup found resident (LH_NIL: not resident),
   * and each key's home slot in the map (hashed once: the map keeps its size within a request),
   * with keeps_keys its place in the map once the lookup has put it (the commit puts no key) */
  uint32_t *found;
  size_t cap_found;
  size_t *home;
  size_t cap_home;
  size_t slots_ahead; /* lh_prefault_ahead's progress through `slots` */
  /* eviction log of the current batch */
  int record;
  int64_t *ev_keys, *ev_reqs;
  size_t n_ev, cap_ev_keys, cap_ev_reqs;
  /* LH_SIM_MISS_EVIDENCE: each evicted key's ghost time, an index into ghost_ts, the time of its
   * latest eviction. ghost_ts holds the distinct times of the requests that evicted, in order (at
   * most one a request), so an eviction writes only its key's value in a map, never a per-key
   * array at random. With ghosts_in_map (a policy that does not keep keys; evidence refuses a TTL)
   * the key map itself holds them, and never purges them: an evicted key's value becomes
   * LH_ABSENT | its ghost time, so the lookup reads a missing key's evidence with its residence
   * and an eviction costs one store; a slot's bit in evicted_before tells whether its key had been
   * evicted before it came in (for n_ghosts). Else (WA, whose map values of absent keys are entries) the map `ghosts`
   * keeps every evicted key -> its ghost time (a re-inserted key that misses again was evicted again since). */
  int evidence, ghosts_in_map;
  size_t n_ghosts; /* distinct keys ever evicted */
  int64_t *ghost_ts;
  size_t n_ghost_ts, cap_ghost_ts;
  uint64_t *evicted_before; /* evidence and ghosts_in_map: a bit per slot */
  size_t cap_evicted_before;
  lh_keymap ghosts;
  /* the keys the current request has evicted, their slots in `ghosts` prefetched: their ghost time
   * is written after its commit, so the map's cache misses overlap (nothing reads the ghosts in
   * between) */
  int64_t *evicted;
  size_t n_evicted, cap_evicted;
  /* evictions in the aligned second of the current request */
  int64_t second;
  uint64_t second_evictions;
  /* prefetch_victims's cursor: the slot pf_lead evictions ahead of the next victim */
  uint32_t pf_slot;
  unsigned pf_lead;
  lh_sim_stats stats;
};

#define NS_PER_S 1000000000LL

static int64_t floor_second(int64_t ns) {
  int64_t s = ns / NS_PER_S;
  return ns % NS_PER_S < 0 ? s - 1 : s;
}

/* The slot of map value v: LH_NIL for none (an empty slot, an entry or a ghost: a key not resident). */
static inline uint32_t slot_of(uint32_t v) { return v >= LH_ABSENT ? LH_NIL : v; }

/* keeps_keys: key's map value, the key put with a new entry if the map does not hold it yet
 * (home: lh_keymap_home of the key). */
static inline uint32_t kept_value(lh_sim *s, int64_t key, size_t home, size_t *at) {
  *at = lh_keymap_probe(&s->map, key, home);
  uint32_t v = lh_keymap_val(&s->map, *at);
  if (v == LH_NIL) {
    v = LH_ABSENT | s->n_entries++;
    lh_keymap_put_at(&s->map, *at, key, v);
  }
  return v;
}

static const lh_policy_ops *policy_ops(int policy) {
  switch (policy) {
    case LH_POLICY_LRU: return &lh_policy_lru;
    case LH_POLICY_FIFO: return &lh_policy_fifo;
    case LH_POLICY_LFU: return &lh_policy_lfu;
    case LH_POLICY_GDFS: return &lh_policy_gdfs;
    case LH_POLICY_WA: return &lh_policy_wa;
    default: return NULL;
  }
}

int lh_sim_create(lh_sim **out, int policy, uint64_t capacity_blocks, const lh_wa_params *wa, int flags, char *err,
                  size_t errlen) {
  *out = NULL;
  const lh_policy_ops *ops = policy_ops(policy);
  if (ops == NULL) return lh_fail(err, errlen, LH_EINVAL, "unknown eviction policy code %d", policy);
  if ((flags & ~(LH_SIM_RECORD_EVICTIONS | LH_SIM_MISS_EVIDENCE)) != 0) {
    return lh_fail(err, errlen, LH_EINVAL, "unknown simulator flags %d", flags);
  }
  if (policy == LH_POLICY_WA && wa == NULL)
    return lh_fail(err, errlen, LH_EINVAL, "the wa policy needs its parameters");
  lh_sim *s = calloc(1, sizeof *s);
  if (s == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a policy simulator");
  int rc = ops->create(&s->policy, wa, err, errlen);
  if (rc != LH_OK) {
    free(s);
    return rc;
  }
  s->ops = ops;
  s->capacity = capacity_blocks;
  s->record = (flags & LH_SIM_RECORD_EVICTIONS) != 0;
  s->evidence = (flags & LH_SIM_MISS_EVIDENCE) != 0;
  s->ghosts_in_map = !ops->keeps_keys;
  s->map.run_bits = s->ghosts.run_bits = SIM_RUN_BITS;
  s->map.max_load_percent = 75;        /* ghosts or entries fill it: as full as other maps of (nearly) every key */
  s->map.grow_ahead = ops->keeps_keys; /* every key: it grows with them (the others purge their ghosts instead) */
  *out = s;
  return LH_OK;
}

void lh_sim_destroy(lh_sim *s) {
  if (s == NULL) return;
  s->ops->destroy(s->policy);
  lh_keymap_free(&s->map);
  lh_policy_free(s->slots, s->cap_slots, sizeof(lh_slot));
  lh_policy_free(s->found, s->cap_found, sizeof(uint32_t));
  lh_policy_free(s->home, s->cap_home, sizeof(size_t));
  lh_policy_free(s->ev_keys, s->cap_ev_keys, sizeof(int64_t));
  lh_policy_free(s->ev_reqs, s->cap_ev_reqs, sizeof(int64_t));
  lh_keymap_free(&s->ghosts);
  lh_policy_free(s->ghost_ts, s->cap_ghost_ts, sizeof(int64_t));
  lh_policy_free(s->evicted_before, s->cap_evicted_before, sizeof(uint64_t));
  lh_policy_free(s->evicted, s->cap_evicted, sizeof(int64_t));
  free(s);
}

int lh_policy_grow(void **p, size_t *cap, size_t need, size_t elem) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > SIZE_MAX / 2 / elem) return -1;
    c *= 2;
  }
  void *q = lh_realloc_huge(*p, *cap * elem, *cap * elem, c * elem); /* slots and per-key arrays: read at random */
  if (q == NULL) return -1;
  *p = q;
  *cap = c;
  return 0;
}

void lh_policy_free(void *p, size_t cap, size_t elem) { lh_free_huge(p, cap * elem); }

/* The map that holds the ghost times: the key map (ghosts_in_map) or `ghosts`. */
static lh_keymap *ghost_map(lh_sim *s) { return s->ghosts_in_map ? &s->map : &s->ghosts; }

/* The ghost time of map value v, or LH_NIL when v holds none (an empty slot, a resident key). */
static inline uint32_t ghost_of(const lh_sim *s, uint32_t v) {
  if (v == LH_NIL) return LH_NIL;
  if (!s->ghosts_in_map) return v;
  return v >= LH_ABSENT ? v & ~LH_ABSENT : LH_NIL;
}

/* Drops the ghost times no key holds any longer (times of keys evicted again since, or in again)
 * and renumbers the others, in order, where the map values hold them: afterwards there are at most
 * as many times as keys holding one. So the times follow the evicted keys, not the requests that
 * evicted (a long trace over few keys); a pass over the map once the times have grown by the
 * keys' count at least (reserve_request), so O(1) per time. Nothing observable changes. 0, or -1
 * out of memory (nothing changed). */
static int compact_ghost_times(lh_sim *s) {
  lh_keymap *m = ghost_map(s);
  uint32_t *rank = calloc(s->n_ghost_ts + 1, sizeof *rank); /* old time -> 1 + new, 0: none holds it */
  if (rank == NULL) return -1;
  for (size_t i = 0; i < lh_keymap_capacity(m); i++) {
    uint32_t g = ghost_of(s, lh_keymap_val(m, i));
    if (g != LH_NIL) rank[g] = 1;
  }
  size_t kept = 0;
  for (size_t g = 0; g < s->n_ghost_ts; g++) {
    if (rank[g] == 0) continue;
    s->ghost_ts[kept] = s->ghost_ts[g];
    rank[g] = (uint32_t)++kept;
  }
  for (size_t i = 0; i < lh_keymap_capacity(m); i++) {
    uint32_t v = lh_keymap_val(m, i), g = ghost_of(s, v);
    if (g != LH_NIL) lh_keymap_set_val(m, i, (v - g) + rank[g] - 1); /* (keeps the LH_ABSENT bit) */
  }
  s->n_ghost_ts = kept;
  free(rank);
  return 0;
}

/* Empties the key map of its ghosts (without evidence: they are no result's), the residents put
 * back, their slots told where. O(the map's slots). */
static void purge_ghosts(lh_sim *s) {
  lh_keymap_clear(&s->map);
  for (size_t i = 0; i < s->n_slots; i++) {
    size_t at = lh_keymap_find(&s->map, s->slots[i].key);
    lh_keymap_put_at(&s->map, at, s->slots[i].key, (uint32_t)i);
    s->slots[i].at = (uint32_t)at;
  }
}

/* Whether the ghosts (without evidence) should go before the map takes `more` keys: when it would
 * grow while half its room holds every resident and the new keys (after a purge at most
 * capacity + more: so the map stays within 4 x (capacity + a request's keys) of room, and a
 * purge comes after room / 2 - more new keys at least), or when it would pass its limit. */
static int ghosts_in_the_way(const lh_sim *s, size_t more) {
  size_t room = lh_keymap_room(&s->map);
  if ((uint64_t)s->map.count + more > LH_ABSENT - 2) return 1;
  return s->map.count + more > room && room / 2 >= more && room / 2 - more >= s->capacity;
}

/* Everything request r may allocate, allocated up front: afterwards it cannot fail. */
static int reserve_request(lh_sim *s, const int64_t *keys, size_t n, int32_t cat, char *err, size_t errlen) {
  uint64_t room = s->capacity - s->n_slots; /* slots that can still be added without evicting */
  size_t add = room < n ? (size_t)room : n;
  if ((uint64_t)s->n_slots + add > MAX_TRACKED) {
    return lh_fail(err, errlen, LH_ERANGE, "more than %llu resident blocks", (unsigned long long)MAX_TRACKED);
  }
  if (s->evidence && s->n_ghost_ts >= 2 * ghost_map(s)->count + 1024 && compact_ghost_times(s) != 0) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory in the policy simulator");
  }
  if (s->evidence && (uint64_t)s->n_ghost_ts + 1 > (s->ghosts_in_map ? LH_ABSENT - 1 : MAX_TRACKED)) {
    return lh_fail(err, errlen, LH_ERANGE, "more than %llu requests that evicted (distinct times)",
                   (unsigned long long)(s->ghosts_in_map ? LH_ABSENT - 1 : MAX_TRACKED)); /* a request adds one */
  }
  if (s->ops->keeps_keys && ((uint64_t)s->n_slots + add >= LH_ABSENT || (uint64_t)s->n_entries + n > LH_ABSENT - 1)) {
    return lh_fail(err, errlen, LH_ERANGE, "the %s policy tracks at most 2^31 - 2 keys and 2^31 - 1 resident blocks",
                   s->ops->name);
  }
  /* each key may be new to the map (for ghosts_in_map, only when the cache takes keys at all) */
  size_t map_keys = s->ops->keeps_keys || s->capacity > 0 ? n : 0;
  if (!s->evidence && s->ghosts_in_map && s->map.count > s->n_slots && ghosts_in_the_way(s, map_keys)) purge_ghosts(s);
  if (s->ghosts_in_map && ((uint64_t)s->n_slots + add >= LH_ABSENT || (uint64_t)s->map.count + n > LH_ABSENT - 2)) {
    /* (so the map, 75 % full, has at most 2^32 slots: lh_slot.at holds a place in it) */
    return lh_fail(err, errlen, LH_ERANGE, "the simulator tracks at most 2^31 - 2 keys and 2^31 - 1 resident blocks");
  }
  size_t map_cap = lh_keymap_capacity(&s->map);
  if (lh_keymap_reserve(&s->map, map_keys) != 0) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory in the policy simulator");
  }
  if (lh_keymap_capacity(&s->map) != map_cap) { /* the keys moved: their slots learn where */
    for (size_t i = 0; i < lh_keymap_capacity(&s->map); i++) {
      uint32_t v = lh_keymap_val(&s->map, i);
      if (v < LH_ABSENT) s->slots[v].at = (uint32_t)i;
    }
  }
  if (lh_policy_grow((void **)&s->slots, &s->cap_slots, s->n_slots + add, sizeof(lh_slot)) != 0 ||
      lh_policy_grow((void **)&s->found, &s->cap_found, n, sizeof(uint32_t)) != 0 ||
      lh_policy_grow((void **)&s->home, &s->cap_home, n, sizeof(size_t)) != 0 ||
      (s->record && (lh_policy_grow((void **)&s->ev_keys, &s->cap_ev_keys, s->n_ev + n, sizeof(int64_t)) != 0 ||
                     lh_policy_grow((void **)&s->ev_reqs, &s->cap_ev_reqs, s->n_ev + n, sizeof(int64_t)) != 0)) ||
      (s->evidence &&
       lh_policy_grow((void **)&s->ghost_ts, &s->cap_ghost_ts, s->n_ghost_ts + 1, sizeof(int64_t)) != 0) ||
      (s->evidence && s->ghosts_in_map &&
       lh_policy_grow((void **)&s->evicted_before, &s->cap_evicted_before, (s->n_slots + add + 63) / 64,
                      sizeof(uint64_t)) != 0) ||
      (s->evidence && !s->ghosts_in_map &&
       (lh_keymap_reserve(&s->ghosts, n) != 0 ||
        lh_policy_grow((void **)&s->evicted, &s->cap_evicted, n, sizeof(int64_t)) != 0))) {
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory in the policy simulator");
  }
  /* the slots fill in order up to the capacity: their pages come in ahead of the fill */
  uint64_t usable = s->capacity < s->cap_slots ? s->capacity : s->cap_slots;
  lh_prefault_ahead(s->slots, (s->n_slots + add) * sizeof(lh_slot), (size_t)usable * sizeof(lh_slot), &s->slots_ahead);
  int rc = s->ops->reserve(s->policy, s->n_slots + add, keys, n, cat);
  if (rc != 0) return lh_fail(err, errlen, LH_ENOMEM, "out of memory in the %s policy", s->ops->name);
  return LH_OK;
}

/* The ghost time of `now`, the current request's time: its index in ghost_ts, added at the
 * request's first eviction (reserve_request made room). */
static inline uint32_t ghost_time(lh_sim *s, int64_t now) {
  if (s->n_ghost_ts == 0 || s->ghost_ts[s->n_ghost_ts - 1] != now) s->ghost_ts[s->n_ghost_ts++] = now;
  return (uint32_t)(s->n_ghost_ts - 1);
}

/* Takes the victim's key out of the resident keys: with keeps_keys its entry replaces its slot in
 * the map, else a ghost does (its ghost time with evidence). */
static inline void unmap_victim(lh_sim *s, uint32_t slot, int64_t now) {
  const lh_slot *v = &s->slots[slot];
  if (s->ops->keeps_keys) {
    lh_keymap_set_val(&s->map, v->at, LH_ABSENT | v->aux);
  } else if (s->evidence) {
    if (!lh_bit(s->evicted_before, slot)) s->n_ghosts++;
    lh_keymap_set_val(&s->map, v->at, LH_ABSENT | ghost_time(s, now));
  } else {
    lh_keymap_set_val(&s->map, v->at, LH_ABSENT);
  }
}

/* Counts an eviction of key by the current request: the per-second peak, and, when evidence is
 * kept apart (`ghosts`), the key for write_ghosts. Cannot fail after reserve_request (a request
 * evicts at most one key per block). */
static void note_eviction(lh_sim *s, int64_t key) {
  if (++s->second_evictions > s->stats.peak_evictions_per_s) {
    s->stats.peak_evictions_per_s = s->second_evictions;
    s->stats.peak_second = s->second;
  }
  if (!s->evidence || s->ghosts_in_map) return;
  lh_keymap_prefetch(&s->ghosts, key);
  s->evicted[s->n_evicted++] = key;
}

/* Writes `now` as the latest eviction time of every key the request evicted (evidence kept apart). */
static void write_ghosts(lh_sim *s, int64_t now) {
  if (s->n_evicted == 0) return;
  uint32_t t = ghost_time(s, now);
  for (size_t i = 0; i < s->n_evicted; i++) {
    size_t at = lh_keymap_find(&s->ghosts, s->evicted[i]);
    if (lh_keymap_val(&s->ghosts, at) == LH_NIL) {
      lh_keymap_put_at(&s->ghosts, at, s->evicted[i], t);
      s->n_ghosts++;
    } else {
      lh_keymap_set_val(&s->ghosts, at, t);
    }
  }
  s->n_evicted = 0;
}

/* The miss evidence of a request whose lookup found `hits` of its n keys (see lh_policy.h), read
 * before any change of the ghosts by its commit: with ghosts_in_map, from the lookup's found[hits]
 * (the map value of keys[hits], not resident), else from `ghosts` before write_ghosts. */
static void classify_miss(const lh_sim *s, const int64_t *keys, size_t n, size_t hits, int32_t *outcome,
                          int64_t *miss_key, int64_t *evicted_at) {
  *miss_key = 0;
  *evicted_at = 0;
  if (hits == n) {
    *outcome = LH_SIM_FULL_HIT;
    return;
  }
  *miss_key = keys[hits];
  uint32_t g = s->ghosts_in_map ? ghost_of(s, s->found[hits]) : lh_keymap_get(&s->ghosts, keys[hits]);
  if (g == LH_NIL) {
    *outcome = LH_SIM_MISS_NO_MATCH;
  } else {
    *outcome = LH_SIM_MISS_EVICTED;
    *evicted_at = s->ghost_ts[g];
  }
}

/* Optional per-request outputs of a batch (all NULL, or all set). */
typedef struct miss_out {
  int32_t *outcome;
  int64_t *key;
  int64_t *evicted_at;
} miss_out;

/* Whether a resident slot is a hit at `now` (no TTL: always; timestamps never decrease). */
static inline int alive(const lh_sim *s, uint32_t slot, int64_t now) {
  return s->ttl_ns == 0 || (uint64_t)now - (uint64_t)s->slots[slot].ts < (uint64_t)s->ttl_ns;
}

int lh_sim_set_ttl(lh_sim *s, int64_t ttl_ns) {
  if (s->evidence || s->started) return -1;
  s->ttl_ns = ttl_ns > 0 ? ttl_ns : 0;
  return 0;
}

int lh_sim_gdfs_near_width(lh_sim *s, size_t width) {
  if (s->ops != &lh_policy_gdfs || s->started) return -1;
  return lh_gdfs_set_near_width(s->policy, width);
}

/* Hints the CPU to load the key map slot unmap_victim changes for victim v. */
static LH_ALWAYS_INLINE void prefetch_unmap(const lh_sim *s, uint32_t v) {
#if defined(__GNUC__)
  __builtin_prefetch(lh_keymap_slot_addr(&s->map, s->slots[v].at), 1, 3);
#else
  (void)s;
  (void)v;
#endif
}

/* After an eviction: the key map slots of the next victims on their way into the cache, with the
 * list slot after the farthest (each eviction's lookup of its victim in the map would otherwise
 * wait for memory). For a policy whose victims follow a list (victim_lead > 1), a cursor walks it
 * up to victim_lead evictions ahead of the next victim (next_victim, then list successors); hits
 * may move what it passed, so it restarts from the next victim once its lead ran out. A hint
 * only: it changes no result. */
static inline void prefetch_victims(lh_sim *s) {
#if defined(__GNUC__)
  if (s->ops->next_victim == NULL) return;
  if (s->pf_lead > 0) s->pf_lead--;
  if (s->pf_lead == 0) {
    uint32_t v = s->ops->next_victim(s->policy, s->slots);
    if (v == LH_NIL) return;
    s->pf_slot = v;
    prefetch_unmap(s, v);
    if (s->ops->victim_lead <= 1) {
      if (s->slots[v].next != LH_NIL) __builtin_prefetch(&s->slots[s->slots[v].next], 0, 3);
      return;
    }
  }
  for (int step = 0; step < 2 && s->pf_lead < s->ops->victim_lead; step++) {
    uint32_t next = s->slots[s->pf_slot].next;
    if (next == LH_NIL) break;
    s->pf_slot = next;
    s->pf_lead++;
    prefetch_unmap(s, next);
    if (s->slots[next].next != LH_NIL) __builtin_prefetch(&s->slots[s->slots[next].next], 0, 3);
  }
#else
  (void)s;
#endif
}

static int64_t run_request(lh_sim *s, const int64_t *keys, size_t n, int64_t now, int32_t cat, int64_t r,
                           const miss_out *out) {
  /* The lookup: found[0 .. known) are the map values of keys[0 .. known) (slot_of: the slots),
   * every key for a policy that reads them, else the prefix hits and the key that ends them */
  int all = s->ops->begin_request != NULL;
  size_t *const home = s->home;
  const int mapped = s->map.slots != NULL; /* (none yet: a cache of capacity 0 that keeps no keys) */
  for (size_t j = 0; j < n; j++) {
    home[j] = lh_keymap_home(&s->map, keys[j]);
#if defined(__GNUC__)
    if (mapped) __builtin_prefetch(lh_keymap_slot_addr(&s->map, home[j]), 0, 3);
#endif
  }
  size_t hits = 0, known = 0;
  while (known < n) {
    size_t at;
    uint32_t v;
    if (s->ops->keeps_keys) {
      v = kept_value(s, keys[known], home[known], &at);
      home[known] = at; /* a key put never moves, and none is deleted */
    } else {
      v = mapped ? lh_keymap_val(&s->map, lh_keymap_probe(&s->map, keys[known], home[known])) : LH_NIL;
    }
    uint32_t slot = slot_of(v);
#if defined(__GNUC__)
    if (slot != LH_NIL) __builtin_prefetch(&s->slots[slot], 1, 3); /* the commit touches it (tail to head) */
#endif
    s->found[known++] = v;
    if (hits + 1 == known && slot != LH_NIL && alive(s, slot, now)) {
      hits++;
    } else if (!all) {
      break;
    }
  }
  if (all) s->ops->begin_request(s->policy, keys, s->found, n, now, cat);
  /* the miss evidence is read after the commit (from found, or from `ghosts`, which only
   * write_ghosts changes, after it), so the slot of the first missing key there loads meanwhile */
  if (out != NULL && hits < n && !s->ghosts_in_map) lh_keymap_prefetch(&s->ghosts, keys[hits]);
  int64_t second = floor_second(now);
  if (second != s->second) {
    s->second = second;
    s->second_evictions = 0;
  }
  lh_access a = {now, cat, 0, 0};
  for (size_t j = n; j-- > 0;) {
    int64_t key = keys[j];
    /* the slot the lookup found, unless this commit evicted that key (and gave its slot to
     * another); a key not resident then may have been inserted since by a later duplicate */
    uint32_t slot = j < known ? slot_of(s->found[j]) : LH_NIL;
    size_t at = 0; /* the key's place in the map, where it is not resident */
    if ((slot == LH_NIL || s->slots[slot].key != key) && s->map.slots != NULL) {
      at = s->ops->keeps_keys && j < known ? home[j] : lh_keymap_probe(&s->map, key, home[j]);
      slot = slot_of(lh_keymap_val(&s->map, at));
    }
    a.offset = (int32_t)(j > INT32_MAX ? INT32_MAX : j);
    s->seq++;
    if (slot != LH_NIL) {
      lh_slot *b = &s->slots[slot];
      a.last_ts = b->ts;
      b->seq = s->seq;
      b->ts = now;
      b->count++;
      s->ops->on_hit(s->policy, s->slots, slot, &a);
      continue;
    }
    if (s->capacity == 0) continue;
    if (s->n_slots == s->capacity) {
      slot = s->ops->evict(s->policy, s->slots, &a);
      unmap_victim(s, slot, now); /* `at` stays right: no key moved */
      if (s->record) {
        s->ev_keys[s->n_ev] = s->slots[slot].key;
        s->ev_reqs[s->n_ev++] = r;
      }
      note_eviction(s, s->slots[slot].key);
      s->stats.evictions++;
      prefetch_victims(s);
    } else {
      slot = (uint32_t)s->n_slots++;
    }
    lh_slot *b = &s->slots[slot];
    b->key = key;
    b->seq = s->seq;
    b->ts = now;
    b->count = 1;
    if (s->ops->keeps_keys) {
      /* its entry (the lookup put the key; such a policy's lookup meets every key) */
      b->aux = (j < known ? lh_keymap_val(&s->map, at) : kept_value(s, key, home[j], &at)) & ~LH_ABSENT;
      b->at = (uint32_t)at;
      lh_keymap_set_val(&s->map, at, slot);
    } else {
      int ghost = lh_keymap_val(&s->map, at) != LH_NIL; /* absent, so evicted before */
      if (s->evidence) lh_bit_put(s->evicted_before, slot, ghost);
      if (ghost) {
        lh_keymap_set_val(&s->map, at, slot);
      } else {
        lh_keymap_put_at(&s->map, at, key, slot);
      }
      b->at = (uint32_t)at;
    }
    s->ops->on_insert(s->policy, s->slots, slot, &a);
    s->stats.inserts++;
  }
  if (out != NULL) classify_miss(s, keys, n, hits, &out->outcome[r], &out->key[r], &out->evicted_at[r]);
  write_ghosts(s, now);
  s->stats.requests++;
  s->stats.accesses += n;
  s->stats.hit_blocks += hits;
  return (int64_t)hits;
}

static int process(lh_sim *s, const int64_t *keys, size_t n_keys, const int64_t *offsets, const int64_t *timestamps,
                   const int32_t *categories, size_t n_req, int64_t *hits, const miss_out *out, size_t *n_done,
                   char *err, size_t errlen) {
  *n_done = 0;
  s->n_ev = 0;
  const lh_batch batch = {n_req, offsets, n_keys, timestamps, categories, LH_SIM_MAX_CATEGORIES};
  for (size_t r = 0; r < n_req; r++) {
    int rc = lh_batch_check_request(&batch, r, s->started ? &s->last_ts : NULL, err, errlen);
    if (rc != LH_OK) {
      *n_done = r;
      return rc;
    }
    int64_t lo = offsets[r], now = timestamps[r];
    int32_t cat = categories[r];
    size_t n = (size_t)(offsets[r + 1] - lo);
    rc = reserve_request(s, keys + lo, n, cat, err, errlen);
    if (rc != LH_OK) {
      *n_done = r;
      return rc;
    }
    s->started = 1;
    s->last_ts = now;
    hits[r] = run_request(s, keys + lo, n, now, cat, (int64_t)r, out);
  }
  *n_done = n_req;
  return LH_OK;
}

int lh_sim_process_batch(lh_sim *s, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                         const int64_t *timestamps, const int32_t *categories, size_t n_req, int64_t *hits,
                         size_t *n_done, char *err, size_t errlen) {
  return process(s, keys, n_keys, offsets, timestamps, categories, n_req, hits, NULL, n_done, err, errlen);
}

int lh_sim_process_batch_misses(lh_sim *s, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                                const int64_t *timestamps, const int32_t *categories, size_t n_req, int64_t *hits,
                                int32_t *outcome, int64_t *miss_key, int64_t *evicted_at, size_t *n_done, char *err,
                                size_t errlen) {
  if (!s->evidence) {
    *n_done = 0;
    s->n_ev = 0;
    return lh_fail(err, errlen, LH_EINVAL, "miss evidence needs a simulator created with LH_SIM_MISS_EVIDENCE");
  }
  miss_out out = {outcome, miss_key, evicted_at};
  return process(s, keys, n_keys, offsets, timestamps, categories, n_req, hits, &out, n_done, err, errlen);
}

size_t lh_sim_resident_prefix(const lh_sim *s, const int64_t *keys, size_t n, int64_t now) {
  size_t hits = 0;
  while (hits < n) {
    uint32_t slot = slot_of(lh_keymap_get(&s->map, keys[hits]));
    if (slot == LH_NIL || !alive(s, slot, now)) break;
    hits++;
  }
  return hits;
}

size_t lh_sim_evictions(const lh_sim *s, const int64_t **keys, const int64_t **requests) {
  *keys = s->ev_keys;
  *requests = s->ev_reqs;
  return s->n_ev;
}

void lh_sim_get_stats(const lh_sim *s, lh_sim_stats *stats) {
  *stats = s->stats;
  stats->resident = s->n_slots;
  stats->evicted_keys = s->n_ghosts;
  stats->memory_bytes = sizeof *s + lh_keymap_memory(&s->map) + s->cap_slots * sizeof(lh_slot) +
                        s->cap_found * sizeof(uint32_t) + s->cap_home * sizeof(size_t) +
                        (s->cap_ev_keys + s->cap_ev_reqs) * sizeof(int64_t) + lh_keymap_memory(&s->ghosts) +
                        (s->cap_ghost_ts + s->cap_evicted) * sizeof(int64_t) +
                        s->cap_evicted_before * sizeof(uint64_t) + s->ops->memory(s->policy);
  if (s->ops->stats != NULL) s->ops->stats(s->policy, stats);
}

double lh_sim_wa_rate(const lh_sim *s, int32_t category) {
  return s->ops->rate == NULL ? 0.0 : s->ops->rate(s->policy, category);
}

/* Whether ghost time g exists and is not in the future. */
static int ghost_time_ok(const lh_sim *s, uint32_t g) { return g < s->n_ghost_ts && s->ghost_ts[g] <= s->last_ts; }

int lh_sim_check(const lh_sim *s, char *err, size_t errlen) {
  size_t mapped = s->map.count, absent = 0; /* keys mapped to a slot, and the others */
  if (s->ops->keeps_keys && s->map.count != s->n_entries) {
    return lh_fail(err, errlen, LH_EINVAL, "map holds %zu keys but %u entries were given", s->map.count,
                   (unsigned)s->n_entries);
  }
  {
    mapped = 0;
    for (size_t i = 0; i < lh_keymap_capacity(&s->map); i++) {
      uint32_t v = lh_keymap_val(&s->map, i);
      if (v == LH_NIL) continue;
      if (v < LH_ABSENT) {
        mapped++;
        continue;
      }
      absent++;
      if (s->ops->keeps_keys ? (v & ~LH_ABSENT) >= s->n_entries
          : s->evidence      ? !ghost_time_ok(s, v & ~LH_ABSENT)
                             : v != LH_ABSENT) {
        return lh_fail(err, errlen, LH_EINVAL, "key %lld maps to %s %u, never given",
                       (long long)lh_keymap_key(&s->map, i),
                       s->ops->keeps_keys ? "entry"
                       : s->evidence      ? "ghost time"
                                          : "ghost",
                       (unsigned)(v & ~LH_ABSENT));
      }
    }
  }
  if (mapped != s->n_slots) {
    return lh_fail(err, errlen, LH_EINVAL, "map holds %zu resident keys but %zu slots are resident", mapped,
                   s->n_slots);
  }
  if (s->n_slots > s->capacity) return lh_fail(err, errlen, LH_EINVAL, "more resident blocks than the capacity");
  /* distinct evicted keys the evidence holds */
  size_t ghosts = !s->evidence ? 0 : s->ghosts_in_map ? absent : s->ghosts.count;
  for (size_t i = 0; i < s->n_slots; i++) {
    if (lh_keymap_get(&s->map, s->slots[i].key) != (uint32_t)i) {
      return lh_fail(err, errlen, LH_EINVAL, "slot %zu's key does not map back to it", i);
    }
    if (s->slots[i].at != lh_keymap_find(&s->map, s->slots[i].key)) {
      return lh_fail(err, errlen, LH_EINVAL, "slot %zu does not know its key's place in the map", i);
    }
    if (s->ops->keeps_keys && s->slots[i].aux >= s->n_entries) {
      return lh_fail(err, errlen, LH_EINVAL, "slot %zu holds entry %u, never given", i, (unsigned)s->slots[i].aux);
    }
    if (s->evidence && s->ghosts_in_map && lh_bit(s->evicted_before, i)) ghosts++;
  }
  if (ghosts != s->n_ghosts) {
    return lh_fail(err, errlen, LH_EINVAL, "the evidence holds %zu evicted keys but %zu are counted", ghosts,
                   s->n_ghosts);
  }
  for (size_t g = 1; g < s->n_ghost_ts; g++) {
    if (s->ghost_ts[g] <= s->ghost_ts[g - 1]) return lh_fail(err, errlen, LH_EINVAL, "ghost times out of order");
  }
  for (size_t i = 0; i < lh_keymap_capacity(&s->ghosts); i++) {
    uint32_t g = lh_keymap_val(&s->ghosts, i);
    if (g != LH_NIL && !ghost_time_ok(s, g)) {
      return lh_fail(err, errlen, LH_EINVAL, "evicted key %lld has no eviction time or one in the future",
                     (long long)lh_keymap_key(&s->ghosts, i));
    }
  }
  if (s->ops->check != NULL) return s->ops->check(s->policy, s->slots, s->n_slots, err, errlen);
  return LH_OK;
}

int lh_list_check(const lh_slot_list *l, const lh_slot *slots, int by_seq, const char *what, char *err, size_t errlen) {
  uint64_t len = 0;
  uint32_t prev = LH_NIL;
  for (uint32_t s = l->head; s != LH_NIL; s = slots[s].next) {
    if (slots[s].prev != prev) return lh_fail(err, errlen, LH_EINVAL, "%s: broken prev link at slot %u", what, s);
    if (by_seq && prev != LH_NIL && slots[prev].seq >= slots[s].seq) {
      return lh_fail(err, errlen, LH_EINVAL, "%s: not ordered by last access at slot %u", what, s);
    }
    prev = s;
    if (++len > l->len)
      return lh_fail(err, errlen, LH_EINVAL, "%s: longer than its length %llu", what, (unsigned long long)l->len);
  }
  if (prev != l->tail || len != l->len) return lh_fail(err, errlen, LH_EINVAL, "%s: bad tail or length", what);
  return LH_OK;
}
