/* lh_policy_ops.h - internal: the simulator's state and the interface every policy implements.
 *
 * The simulator (lh_sim.c) owns the key map, the slots and the lookup/commit loop; a policy
 * (lh_policy_<name>.c) owns only its ordering structure and answers three events: a slot was
 * inserted, a slot was hit, pick (and unlink) the victim. Policies never allocate inside those
 * events: lh_sim.c calls `reserve` first, so a request either fails before any change or runs
 * to the end. Not part of the Python-facing API.
 */
#ifndef LH_POLICY_OPS_H
#define LH_POLICY_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "lh_keymap.h"
#include "lh_policy.h"

/* One resident block. Policies may use prev/next (list links), prio and aux as they like. */
typedef struct lh_slot {
  int64_t key;
  uint64_t seq;   /* sequence number of the last access */
  int64_t ts;     /* timestamp (ns) of the request of the last access */
  uint64_t count; /* accesses since insertion: 1 at insertion, +1 per hit */
  uint64_t prio;  /* policy-defined (GDFS: H; LFU: bucket; WA: request number of the last access) */
  uint32_t prev, next;
  uint32_t aux;   /* policy-defined (GDFS: its bucket), or with keeps_keys its key's entry (WA) */
  int32_t cat;    /* category of the request of the last access */
  int32_t offset; /* index of the block in that request */
  uint32_t at;    /* the simulator's: its key's slot in the key map (lh_sim.c) */
} lh_slot;

/* What the policy sees of the request being committed. */
typedef struct lh_access {
  int64_t now;     /* the request's timestamp */
  int32_t cat;     /* its category */
  int32_t offset;  /* the position being committed */
  int64_t last_ts; /* on_hit: the slot's ts before this access */
} lh_access;

/* In the simulator's key map, the mark of a key not resident: LH_ABSENT | its entry where the policy
 * keeps every key (keeps_keys), else an evicted key's ghost (lh_sim.c). */
#define LH_ABSENT 0x80000000u

typedef struct lh_policy_ops {
  const char *name;
  /* Whether the simulator's key map keeps every key the trace accessed, not only the resident
   * ones (WA: its reuse observations need each key's last access, wherever the key is): a resident
   * key maps to its slot, any other to LH_ABSENT | its entry, a number the simulator gives each key
   * at its first access (0, 1, ... in the order the lookups meet them) and keeps in the slot's aux
   * while the key is resident (set before on_insert). One probe of one map then finds a key's slot
   * or its entry, an eviction rewrites the key's value instead of deleting it, and keys never leave
   * the map. Such a policy has begin_request; at most 2^31 - 2 keys and 2^31 - 1 resident blocks. */
  int keeps_keys;
  /* Creates the policy's state; LH_OK, LH_EINVAL (bad parameters) or LH_ENOMEM. */
  int (*create)(void **state, const lh_wa_params *wa, char *err, size_t errlen);
  void (*destroy)(void *state);
  /* Ensures the next request (n keys, category cat) can run with up to `slots` slots without
   * allocating: 0, or -1 (out of memory) with nothing changed. */
  int (*reserve)(void *state, size_t slots, const int64_t *keys, size_t n, int32_t cat);
  /* Called once per request after its lookup, before its commit (WA: fits and reuse
   * observations): found[j] is the slot of keys[j] if that key is resident (whether or not it is
   * a hit: a TTL may have expired it), else LH_NIL, or with keeps_keys LH_ABSENT | its entry (an
   * entry given during this lookup is one the policy has not seen). Cannot fail after a successful
   * reserve. May be NULL: the lookup then stops at the first key that is not a hit. */
  void (*begin_request)(void *state, const int64_t *keys, const uint32_t *found, size_t n, int64_t now, int32_t cat);
  void (*on_insert)(void *state, lh_slot *slots, uint32_t s, const lh_access *a);
  void (*on_hit)(void *state, lh_slot *slots, uint32_t s, const lh_access *a);
  /* Picks the victim among the resident slots (there is at least one), unlinks it from the
   * policy's structure and returns it. */
  uint32_t (*evict)(void *state, lh_slot *slots, const lh_access *a);
  /* A hint, read after each eviction: the slot evict would pick next if nothing changed before
   * it, its list successor likely the one after (the simulator prefetches the key map's slot of
   * the first and the second's slot); LH_NIL when not cheaply known. May be NULL. */
  uint32_t (*next_victim)(const void *state, const lh_slot *slots);
  /* How far the victims follow next_victim's list (its slots' next links), so that the simulator
   * prefetches the key map slots of that many victims ahead; 0 or 1: the next victim only. */
  unsigned victim_lead;
  size_t (*memory)(const void *state);
  /* Fills the policy's part of the statistics (may be NULL). */
  void (*stats)(const void *state, lh_sim_stats *stats);
  double (*rate)(const void *state, int32_t cat); /* may be NULL */
  /* Invariants over `resident` slots (for tests); may be NULL. */
  int (*check)(const void *state, const lh_slot *slots, uint64_t resident, char *err, size_t errlen);
} lh_policy_ops;

extern const lh_policy_ops lh_policy_lru;
extern const lh_policy_ops lh_policy_fifo;
extern const lh_policy_ops lh_policy_lfu;
extern const lh_policy_ops lh_policy_gdfs;
extern const lh_policy_ops lh_policy_wa;

/* Gives an LRU simulator a TTL (the routing simulator's, lh_route.c; before its first request):
 * a resident block whose last access is ttl_ns or more before the request is not a hit (the
 * prefix stops there); it keeps its place in the order and its slot, and the commit touches it
 * like any resident block. 0: none (the default). Not for the other policies. 0, or -1 (nothing
 * set) for a simulator that started or keeps miss evidence (its lookup reads a missing key's
 * evidence only where the key is not resident). */
int lh_sim_set_ttl(lh_sim *sim, int64_t ttl_ns);

/* Sets the GDFS ring's width (lh_policy_gdfs.c: the priorities within `width` of the clock are
 * kept in a ring, the others in a heap): a power of two up to 2^30, before the first request.
 * Results do not depend on it; tests make it small to send buckets through the heap and back.
 * 0, or -1 (not a gdfs simulator, started, a bad width, or out of memory: nothing changed). */
int lh_sim_gdfs_near_width(lh_sim *sim, size_t width);
int lh_gdfs_set_near_width(void *state, size_t width); /* the policy's half of it */

/* Grows *p (an array of *cap elements of elem bytes) to hold at least `need`, doubling; 0, or -1
 * on allocation failure with *p and *cap unchanged. Such an array is a big table's block
 * (lh_realloc_huge): lh_policy_free releases it, never free(). (lh_sim.c) */
int lh_policy_grow(void **p, size_t *cap, size_t need, size_t elem);
void lh_policy_free(void *p, size_t cap, size_t elem);

/* The k-th smallest (from 0) of a[0 .. n), k < n, reordering a; the value a full sort would put
 * at k. Quickselect (median-of-three pivot, Hoare's partition, which splits runs of equal values
 * evenly); after `rounds` partitions without converging (< 0: 2 log2(n) + 8) it sorts the range
 * left instead, so it is never quadratic. (lh_policy_wa.c: WA's nearest-rank p90 life) */
int64_t lh_select_i64(int64_t *a, size_t n, size_t k, int rounds);

/* ---- shared pieces (lh_policy_list.c): a one-list state, no-op hooks ---- */

int lh_policy_list_create(void **state, const lh_wa_params *wa, char *err, size_t errlen);
void lh_policy_list_destroy(void *state);
int lh_policy_reserve_nothing(void *state, size_t slots, const int64_t *keys, size_t n, int32_t cat);
void lh_policy_list_append(void *state, lh_slot *slots, uint32_t s, const lh_access *a);
uint32_t lh_policy_list_evict_head(void *state, lh_slot *slots, const lh_access *a);
uint32_t lh_policy_list_head(const void *state, const lh_slot *slots);
size_t lh_policy_list_memory(const void *state);

/* ---- doubly linked lists threaded through lh_slot.prev/next (head = least recent) ---- */

typedef struct lh_slot_list {
  uint32_t head, tail;
  uint64_t len;
} lh_slot_list;

static inline void lh_list_init(lh_slot_list *l) {
  l->head = l->tail = LH_NIL;
  l->len = 0;
}

static inline void lh_list_append(lh_slot_list *l, lh_slot *slots, uint32_t s) {
  slots[s].prev = l->tail;
  slots[s].next = LH_NIL;
  if (l->tail != LH_NIL) {
    slots[l->tail].next = s;
  } else {
    l->head = s;
  }
  l->tail = s;
  l->len++;
}

static inline void lh_list_unlink(lh_slot_list *l, lh_slot *slots, uint32_t s) {
  uint32_t p = slots[s].prev, n = slots[s].next;
  if (p != LH_NIL) {
    slots[p].next = n;
  } else {
    l->head = n;
  }
  if (n != LH_NIL) {
    slots[n].prev = p;
  } else {
    l->tail = p;
  }
  l->len--;
}

/* Walks a list and checks links, length and strictly increasing `seq` (or insertion order when
 * by_seq == 0: only links and length). */
int lh_list_check(const lh_slot_list *l, const lh_slot *slots, int by_seq, const char *what, char *err, size_t errlen);

#endif
