/* lh_keymap.c - the int64 -> uint32 open-addressing map (see lh_keymap.h). */
#include "lh_keymap.h"

#include <stdlib.h>

static void insert_entry(lh_keymap_entry *entries, size_t mask, int64_t key, uint32_t val) {
  lh_keymap m = {entries, mask, 0, 0};
  size_t i = lh_keymap_slot(&m, key);
  while (entries[i].val != LH_NIL) i = (i + 1) & mask;
  entries[i].key = key;
  entries[i].val = val;
}

/* The most keys a map of cap entries holds at a load of pct percent (no overflow). */
static size_t load_limit(size_t cap, unsigned pct) { return cap / 100 * pct + cap % 100 * pct / 100; }

int lh_keymap_reserve(lh_keymap *m, size_t extra) {
  unsigned pct = m->max_load_percent == 0 ? 50 : m->max_load_percent > 90 ? 90 : m->max_load_percent;
  size_t need = m->count + extra;
  size_t cap = m->entries == NULL ? 0 : m->mask + 1;
  if (need <= load_limit(cap, pct)) return 0;
  size_t new_cap = cap == 0 ? 64 : cap;
  while (need > load_limit(new_cap, pct)) {
    if (new_cap > SIZE_MAX / 2 / sizeof(lh_keymap_entry)) return -1;
    new_cap *= 2;
  }
  lh_keymap_entry *entries = malloc(new_cap * sizeof *entries);
  if (entries == NULL) return -1;
  for (size_t i = 0; i < new_cap; i++) entries[i].val = LH_NIL;
  for (size_t i = 0; i < cap; i++) {
    if (m->entries[i].val != LH_NIL) insert_entry(entries, new_cap - 1, m->entries[i].key, m->entries[i].val);
  }
  free(m->entries);
  m->entries = entries;
  m->mask = new_cap - 1;
  return 0;
}

void lh_keymap_put(lh_keymap *m, int64_t key, uint32_t val) {
  insert_entry(m->entries, m->mask, key, val);
  m->count++;
}

void lh_keymap_del(lh_keymap *m, int64_t key) {
  if (m->entries == NULL) return;
  size_t i = lh_keymap_slot(m, key);
  while (m->entries[i].val != LH_NIL && m->entries[i].key != key) i = (i + 1) & m->mask;
  if (m->entries[i].val == LH_NIL) return;
  /* Backward shift: move later entries of the probe run into the hole when their home slot
   * does not lie (cyclically) after the hole. */
  size_t hole = i;
  for (size_t j = (i + 1) & m->mask; m->entries[j].val != LH_NIL; j = (j + 1) & m->mask) {
    size_t home = lh_keymap_slot(m, m->entries[j].key);
    int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      m->entries[hole] = m->entries[j];
      hole = j;
    }
  }
  m->entries[hole].val = LH_NIL;
  m->count--;
}

size_t lh_keymap_memory(const lh_keymap *m) { return m->entries == NULL ? 0 : (m->mask + 1) * sizeof(lh_keymap_entry); }

void lh_keymap_free(lh_keymap *m) {
  free(m->entries);
  m->entries = NULL;
  m->mask = 0;
  m->count = 0;
}
