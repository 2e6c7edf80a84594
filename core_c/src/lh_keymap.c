/* lh_keymap.c - the int64 -> uint32 open-addressing map (see lh_keymap.h). */
#include "lh_keymap.h"

#include <stdlib.h>
#include <string.h>

#define SLOT_BYTES (sizeof(int64_t) + sizeof(uint32_t))

/* The most keys a map of cap slots holds at a load of pct percent (no overflow). */
static size_t load_limit(size_t cap, unsigned pct) { return cap / 100 * pct + cap % 100 * pct / 100; }

static unsigned load_percent(const lh_keymap *m) {
  return m->max_load_percent == 0 ? 50 : m->max_load_percent > 90 ? 90 : m->max_load_percent;
}

int lh_keymap_reserve(lh_keymap *m, size_t extra) {
  unsigned pct = load_percent(m);
  if (extra > SIZE_MAX - m->count) return -1;
  size_t need = m->count + extra;
  size_t cap = lh_keymap_capacity(m);
  if (need <= load_limit(cap, pct)) return 0;
  size_t new_cap = cap == 0 ? 64 : cap;
  while (need > load_limit(new_cap, pct)) {
    if (new_cap > SIZE_MAX / 2 / SLOT_BYTES) return -1;
    new_cap *= 2;
  }
  int64_t *keys = malloc(new_cap * sizeof *keys);
  uint32_t *vals = malloc(new_cap * sizeof *vals);
  if (keys == NULL || vals == NULL) {
    free(keys);
    free(vals);
    return -1;
  }
  memset(vals, 0xFF, new_cap * sizeof *vals); /* every slot LH_NIL */
  lh_keymap old = *m;
  m->keys = keys;
  m->vals = vals;
  m->mask = new_cap - 1;
  for (size_t i = 0; i < cap; i++) {
    if (old.vals[i] != LH_NIL) {
      size_t at = lh_keymap_find(m, old.keys[i]);
      m->keys[at] = old.keys[i];
      m->vals[at] = old.vals[i];
    }
  }
  free(old.keys);
  free(old.vals);
  return 0;
}

void lh_keymap_put(lh_keymap *m, int64_t key, uint32_t val) {
  size_t i = lh_keymap_home(m, key);
  while (m->vals[i] != LH_NIL) i = (i + 1) & m->mask;
  m->keys[i] = key;
  m->vals[i] = val;
  m->count++;
}

void lh_keymap_set(lh_keymap *m, int64_t key, uint32_t val) {
  size_t i = lh_keymap_find(m, key);
  if (m->vals[i] == LH_NIL) {
    m->keys[i] = key;
    m->count++;
  }
  m->vals[i] = val;
}

void lh_keymap_del_at(lh_keymap *m, size_t i) {
  /* Backward shift: move later keys of the probe run into the hole when their home slot does
   * not lie (cyclically) after the hole. */
  size_t hole = i;
  for (size_t j = (i + 1) & m->mask; m->vals[j] != LH_NIL; j = (j + 1) & m->mask) {
    size_t home = lh_keymap_home(m, m->keys[j]);
    int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      m->keys[hole] = m->keys[j];
      m->vals[hole] = m->vals[j];
      hole = j;
    }
  }
  m->vals[hole] = LH_NIL;
  m->count--;
}

void lh_keymap_del(lh_keymap *m, int64_t key) {
  if (m->vals == NULL) return;
  size_t i = lh_keymap_find(m, key);
  if (m->vals[i] != LH_NIL) lh_keymap_del_at(m, i);
}

void lh_keymap_clear(lh_keymap *m) {
  if (m->vals != NULL) memset(m->vals, 0xFF, (m->mask + 1) * sizeof *m->vals);
  m->count = 0;
}

size_t lh_keymap_room(const lh_keymap *m) { return load_limit(lh_keymap_capacity(m), load_percent(m)); }

size_t lh_keymap_memory(const lh_keymap *m) { return lh_keymap_capacity(m) * SLOT_BYTES; }

void lh_keymap_free(lh_keymap *m) {
  free(m->keys);
  free(m->vals);
  m->keys = NULL;
  m->vals = NULL;
  m->mask = 0;
  m->count = 0;
}
