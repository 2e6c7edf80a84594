/* lh_keymap.h - internal: an open-addressing map from int64 keys to uint32 values.
 *
 * Linear probing over 16-byte entries (four per cache line), at most 50% full (or the map's
 * max_load_percent, for maps that trade probes for memory); deletion shifts
 * later entries back, so there are no tombstones and lookups stay short. Growth happens only in
 * lh_keymap_reserve, so a caller reserves first and then puts without any failure path.
 * Not part of the Python-facing API.
 */
#ifndef LH_KEYMAP_H
#define LH_KEYMAP_H

#include <stddef.h>
#include <stdint.h>

#define LH_NIL UINT32_MAX /* "no value": also marks an empty entry */

typedef struct lh_keymap_entry {
  int64_t key;
  uint32_t val; /* LH_NIL when the entry is empty */
  uint32_t pad;
} lh_keymap_entry;

typedef struct lh_keymap {
  lh_keymap_entry *entries;
  size_t mask; /* capacity - 1; capacity is a power of two, 0 entries before the first reserve */
  size_t count;
  unsigned max_load_percent; /* how full reserve lets it get: 0 means 50; at most 90 */
} lh_keymap;

static inline size_t lh_keymap_slot(const lh_keymap *m, int64_t key) {
  uint64_t x = (uint64_t)key; /* splitmix64 finalizer: raw trace keys are often small integers */
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return (size_t)x & m->mask;
}

/* The value of key, or LH_NIL. */
static inline uint32_t lh_keymap_get(const lh_keymap *m, int64_t key) {
  if (m->entries == NULL) return LH_NIL;
  for (size_t i = lh_keymap_slot(m, key);; i = (i + 1) & m->mask) {
    const lh_keymap_entry *e = &m->entries[i];
    if (e->val == LH_NIL) return LH_NIL;
    if (e->key == key) return e->val;
  }
}

/* Hints the CPU to load key's first probe entry. */
static inline void lh_keymap_prefetch(const lh_keymap *m, int64_t key) {
#if defined(__GNUC__)
  if (m->entries != NULL) __builtin_prefetch(&m->entries[lh_keymap_slot(m, key)], 0, 3);
#else
  (void)m;
  (void)key;
#endif
}

/* Ensures room for `extra` more keys without growing later: 0, or -1 on allocation failure
 * (the map is unchanged). */
int lh_keymap_reserve(lh_keymap *m, size_t extra);

/* Sets key -> val (val != LH_NIL). The key must be absent and room reserved. Cannot fail. */
void lh_keymap_put(lh_keymap *m, int64_t key, uint32_t val);

/* Removes key if present. Cannot fail. */
void lh_keymap_del(lh_keymap *m, int64_t key);

/* Bytes allocated. */
size_t lh_keymap_memory(const lh_keymap *m);

void lh_keymap_free(lh_keymap *m);

#endif
