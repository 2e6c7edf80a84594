/* lh_keymap.h - internal: the engine's open-addressing map from int64 keys to uint32 values.
 *
 * The one hash map of the engine: the lane core (key -> position), the simulator (resident and
 * evicted keys), its policies (GDFS buckets, WA reuse times), the profile recorder (key indices)
 * and the eviction evidence (resident and removed digests). A slot is 12 packed bytes, the key
 * then the value, so a lookup mostly touches one cache line; a slot is empty when its value is
 * LH_NIL. A wide map (slot_bytes = LH_KEYMAP_WIDE_SLOT, set before the first reserve) has 16-byte
 * slots with a second uint32 after the value, its aux, which moves with the key: the lane keeps a
 * key's number there when it numbers keys (LH_LANE_KEY_IDS). Home slot lh_mix_runs(key, run_bits)
 * & mask (lh_hash.h): with run_bits r > 0, the 2^r keys that differ only in their low r bits get
 * adjacent home slots. The keys of a Mooncake trace are numbers given in order to new blocks, so a
 * request's blocks are mostly consecutive keys, and their slots then share cache lines: the maps of
 * trace keys (the lane's, the simulator's, the profile's) take r = 2. Random keys land as with
 * r = 0, the other maps' (lh_mix64(key) & mask). Linear probing, deletion by backward shift (no
 * tombstones, so lookups stay short).
 * At most max_load_percent full: 50 by default, higher for maps that trade probes for memory (the
 * profile's and WA's 75, the lane's 80, the evidence's 90). Growth happens only in
 * lh_keymap_reserve, which doubles the capacity (64 slots at first) until the keys fit, so a caller
 * reserves first and then puts without any failure path. It grows the slots in place (a big
 * table's block, lh_buf.h: its pages stay, new ones are added after them) and moves the keys to
 * their new places there. A map whose owner sets grow_ahead (the simulator's for a policy that
 * keeps every key) has its big block mapped twice its size, the upper half address space only
 * until, once the keys reach 80 % of the room, lh_prefault faults it in on a thread of its own
 * (lh_prefault.h): the doubling then finds its new pages there. Up to the table's size again may
 * so be resident early, for nothing if the keys stop short of the doubling. The slot a key lands
 * in depends only on the keys put and deleted and their order, never on the platform.
 *
 * Keys move only in lh_keymap_reserve, lh_keymap_del and lh_keymap_del_at. In between, a caller
 * may keep a slot index (lh_keymap_find) and rewrite that slot's value (lh_keymap_set_val), as
 * the lane does with its pending marks and positions, and scan the slots 0 .. capacity - 1.
 *
 * One table is kept apart, for a reason: the interned strings of lh_buf.h, whose keys are byte
 * strings compared in full, not int64 values.
 * Not part of the Python-facing API.
 */
#ifndef LH_KEYMAP_H
#define LH_KEYMAP_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lh_hash.h"

#define LH_NIL UINT32_MAX      /* "no value": also marks an empty slot */
#define LH_KEYMAP_SLOT 12      /* bytes a slot: the int64 key at 0, the uint32 value at 8 (unaligned, memcpy) */
#define LH_KEYMAP_WIDE_SLOT 16 /* a wide map's slot: the key, the value, then the uint32 aux at 12 */

typedef struct lh_keymap {
  unsigned char *slots;      /* capacity slots of slot_bytes bytes; NULL before the first reserve */
  size_t mask;               /* capacity - 1; capacity is a power of two (0 slots: mask 0) */
  size_t count;              /* keys held */
  unsigned max_load_percent; /* how full reserve lets it get: 0 means 50; at most 90 */
  unsigned slot_bytes;       /* LH_KEYMAP_SLOT (0 means that) or LH_KEYMAP_WIDE_SLOT; fixed once it has slots */
  unsigned run_bits;         /* 0 .. LH_KEYMAP_MAX_RUN_BITS (see lh_keymap_home); fixed once it has slots */
  unsigned grow_ahead;       /* set by the owner: prepare the next doubling (above); fixed once it has slots */
  size_t prefaulted;         /* grow_ahead: the capacity whose next doubling was asked for, else 0 */
} lh_keymap;

#define LH_KEYMAP_MAX_RUN_BITS 4 /* a run's home slots stay within the smallest map (64 slots) */

/* Inlined even where the compiler would not: GCC finds a function whose only effect is a prefetch
 * free of side effects, and a call of it that it leaves out of line (as a costlier home can make
 * it) is then deleted as dead code, its prefetch with it. Every prefetch helper takes it. */
#if defined(__GNUC__)
#define LH_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define LH_ALWAYS_INLINE inline
#endif

/* ---- slots (inline: they sit on the per-block paths of the lane, simulator and recorder) ----
 *
 * Each accessor has a form taking the slot width w, a constant where it is inlined, so that a
 * wide map's hot loop (the lane's) computes its addresses as a narrow one's does; the plain forms
 * are for narrow maps. */

/* The width of m's slots, read at run time (for the paths that are not per block). */
static inline size_t lh_keymap_width(const lh_keymap *m) {
  return m->slot_bytes == LH_KEYMAP_WIDE_SLOT ? LH_KEYMAP_WIDE_SLOT : LH_KEYMAP_SLOT;
}

/* The slots of the map: 0 before the first reserve, else mask + 1. */
static inline size_t lh_keymap_capacity(const lh_keymap *m) { return m->slots == NULL ? 0 : m->mask + 1; }

/* The value in slot i (< capacity) of a map of w-byte slots: LH_NIL when the slot is empty. */
static inline uint32_t lh_keymap_val_w(const lh_keymap *m, size_t i, size_t w) {
  uint32_t v;
  memcpy(&v, m->slots + i * w + 8, sizeof v);
  return v;
}
static inline uint32_t lh_keymap_val(const lh_keymap *m, size_t i) { return lh_keymap_val_w(m, i, LH_KEYMAP_SLOT); }

/* The key in occupied slot i. */
static inline int64_t lh_keymap_key_w(const lh_keymap *m, size_t i, size_t w) {
  int64_t k;
  memcpy(&k, m->slots + i * w, sizeof k);
  return k;
}
static inline int64_t lh_keymap_key(const lh_keymap *m, size_t i) { return lh_keymap_key_w(m, i, LH_KEYMAP_SLOT); }

/* Rewrites the value of occupied slot i (v != LH_NIL). Cannot fail. */
static inline void lh_keymap_set_val_w(lh_keymap *m, size_t i, uint32_t v, size_t w) {
  memcpy(m->slots + i * w + 8, &v, sizeof v);
}
static inline void lh_keymap_set_val(lh_keymap *m, size_t i, uint32_t v) {
  lh_keymap_set_val_w(m, i, v, LH_KEYMAP_SLOT);
}

/* The aux of occupied slot i of a wide map, and its rewrite. */
static inline uint32_t lh_keymap_aux(const lh_keymap *m, size_t i) {
  uint32_t v;
  memcpy(&v, m->slots + i * LH_KEYMAP_WIDE_SLOT + 12, sizeof v);
  return v;
}
static inline void lh_keymap_set_aux(lh_keymap *m, size_t i, uint32_t v) {
  memcpy(m->slots + i * LH_KEYMAP_WIDE_SLOT + 12, &v, sizeof v);
}

/* The address of slot i, for prefetching. */
static inline const void *lh_keymap_slot_addr_w(const lh_keymap *m, size_t i, size_t w) { return m->slots + i * w; }
static inline const void *lh_keymap_slot_addr(const lh_keymap *m, size_t i) {
  return lh_keymap_slot_addr_w(m, i, LH_KEYMAP_SLOT);
}

/* ---- lookups ---- */

/* The slot where key's probe starts: H(key) & mask, H independent of the capacity (so a key's
 * home after a doubling is its old home or that plus the old capacity). The map must have slots. */
static inline size_t lh_keymap_home(const lh_keymap *m, int64_t key) {
  return (size_t)lh_mix_runs((uint64_t)key, m->run_bits) & m->mask;
}

/* The slot holding key or, when key is absent, the empty slot that ends its probe run (where
 * lh_keymap_put_at may put it), searching from home = lh_keymap_home(m, key) (a caller that
 * prefetched keeps it). The map must have slots. */
static inline size_t lh_keymap_probe_w(const lh_keymap *m, int64_t key, size_t home, size_t w) {
  size_t i = home;
  while (lh_keymap_val_w(m, i, w) != LH_NIL && lh_keymap_key_w(m, i, w) != key) i = (i + 1) & m->mask;
  return i;
}
static inline size_t lh_keymap_probe(const lh_keymap *m, int64_t key, size_t home) {
  return lh_keymap_probe_w(m, key, home, LH_KEYMAP_SLOT);
}

/* lh_keymap_probe from key's home slot. The map must have slots. */
static inline size_t lh_keymap_find(const lh_keymap *m, int64_t key) {
  return lh_keymap_probe(m, key, lh_keymap_home(m, key));
}

/* The value of key, or LH_NIL. */
static inline uint32_t lh_keymap_get(const lh_keymap *m, int64_t key) {
  return m->slots == NULL ? LH_NIL : lh_keymap_val(m, lh_keymap_find(m, key));
}

/* Hints the CPU to load the slot key's probe starts at. */
static LH_ALWAYS_INLINE void lh_keymap_prefetch(const lh_keymap *m, int64_t key) {
#if defined(__GNUC__)
  if (m->slots != NULL) __builtin_prefetch(lh_keymap_slot_addr(m, lh_keymap_home(m, key)), 0, 3);
#else
  (void)m;
  (void)key;
#endif
}

/* ---- changes ---- */

/* Ensures room for `extra` more keys without growing later: 0, or -1 on allocation failure or a
 * size that cannot be represented (the map is unchanged). Any width: a key moves with its aux.
 * lh_keymap_del, _del_at, _clear, _room, _memory and _free take any width too; the other calls
 * below only narrow maps. */
int lh_keymap_reserve(lh_keymap *m, size_t extra);

/* Sets key -> val (val != LH_NIL) in slot i, the empty slot lh_keymap_find (or _probe) returned
 * for key, with room reserved and no key moved since. Cannot fail. */
static inline void lh_keymap_put_at_w(lh_keymap *m, size_t i, int64_t key, uint32_t val, size_t w) {
  memcpy(m->slots + i * w, &key, sizeof key);
  lh_keymap_set_val_w(m, i, val, w);
  m->count++;
}
static inline void lh_keymap_put_at(lh_keymap *m, size_t i, int64_t key, uint32_t val) {
  lh_keymap_put_at_w(m, i, key, val, LH_KEYMAP_SLOT);
}

/* Sets key -> val (val != LH_NIL). The key must be absent and room reserved. Cannot fail. (Any
 * width; a wide map's new slot keeps whatever aux it had: set it.) */
void lh_keymap_put(lh_keymap *m, int64_t key, uint32_t val);

/* Sets key -> val (val != LH_NIL), replacing the value of a key already present. Room for one
 * more key must be reserved. Cannot fail. */
void lh_keymap_set(lh_keymap *m, int64_t key, uint32_t val);

/* Removes key if present. Cannot fail. */
void lh_keymap_del(lh_keymap *m, int64_t key);

/* Empties occupied slot i (for scans over the slots). Later keys of its probe run may each move
 * back to a slot from i up to their old one (cyclically); no other key moves. Cannot fail. */
void lh_keymap_del_at(lh_keymap *m, size_t i);

/* Removes every key and keeps the slots (the capacity is unchanged). Cannot fail. */
void lh_keymap_clear(lh_keymap *m);

/* The most keys the current slots hold at max_load_percent (0 before the first reserve): a map
 * reserved for at most this many keys is no larger than this one. */
size_t lh_keymap_room(const lh_keymap *m);

/* Bytes allocated. */
size_t lh_keymap_memory(const lh_keymap *m);

/* Releases the slots: the map is empty, as after zero-initialisation (keeps max_load_percent). */
void lh_keymap_free(lh_keymap *m);

#endif
