/* lh_keymap.c - the int64 -> uint32 open-addressing map (see lh_keymap.h). */
#include "lh_keymap.h"

#include <stdlib.h>
#include <string.h>

#include "lh_buf.h"
#include "lh_prefault.h"

/* The most keys a map of cap slots holds at a load of pct percent (no overflow). */
static size_t load_limit(size_t cap, unsigned pct) { return cap / 100 * pct + cap % 100 * pct / 100; }

/* The bytes of the slots' block (lh_realloc_huge) of m at capacity cap: the slots, and as many
 * again for a grow_ahead map's big block (its next doubling's address space). */
static size_t block_bytes(const lh_keymap *m, size_t cap) {
  size_t bytes = cap * lh_keymap_width(m);
  return m->grow_ahead && bytes >= LH_HUGE_MIN && bytes <= SIZE_MAX / 2 ? 2 * bytes : bytes;
}

static unsigned load_percent(const lh_keymap *m) {
  return m->max_load_percent == 0 ? 50 : m->max_load_percent > 90 ? 90 : m->max_load_percent;
}

/* Puts the keys of m's first old_cap slots where m's larger mask puts them, in place (the slots
 * after them empty; placed: old_cap zeroed bits). The slots are taken in order; when slot i comes,
 * every slot before it is empty or holds a key already placed, and a key after it is pending unless
 * its bit in `placed` says otherwise. Each key is placed at the first slot of its probe run that is
 * empty, is its own (i) or holds a pending key (swapped: that key comes to i and takes its turn).
 * So every slot a placed key's probe passes holds a placed key, and placed keys never move: each
 * key's probe run ends at it. A probe passes i only for the keys of a run that wrapped around the
 * old table's end, so swaps, and bits, are few. Whole slots move (a wide map's aux with its key). */
static inline void rehash_w(lh_keymap *m, size_t old_cap, uint64_t *placed, size_t w) {
  unsigned char held[LH_KEYMAP_WIDE_SLOT];
  for (size_t i = 0; i < old_cap; i++) {
    if (lh_keymap_val_w(m, i, w) == LH_NIL || lh_bit(placed, i)) continue;
    for (;;) { /* slot i holds a pending key */
      size_t j = lh_keymap_home(m, lh_keymap_key_w(m, i, w));
      while (j != i && lh_keymap_val_w(m, j, w) != LH_NIL && (j < i || j >= old_cap || lh_bit(placed, j))) {
        j = (j + 1) & m->mask;
      }
      if (j == i) break;
      if (j > i && j < old_cap) placed[j >> 6] |= UINT64_C(1) << (j & 63);
      if (lh_keymap_val_w(m, j, w) == LH_NIL) {
        memcpy(m->slots + j * w, m->slots + i * w, w);
        lh_keymap_set_val_w(m, i, LH_NIL, w);
        break;
      }
      memcpy(held, m->slots + j * w, w); /* j holds a pending key: it comes to i */
      memcpy(m->slots + j * w, m->slots + i * w, w);
      memcpy(m->slots + i * w, held, w);
    }
  }
}

int lh_keymap_reserve(lh_keymap *m, size_t extra) {
  unsigned pct = load_percent(m);
  if (extra > SIZE_MAX - m->count) return -1;
  size_t need = m->count + extra;
  size_t cap = lh_keymap_capacity(m);
  size_t w = lh_keymap_width(m);
  if (need <= load_limit(cap, pct)) {
    size_t block = block_bytes(m, cap);
    if (m->grow_ahead && m->prefaulted != cap && block > cap * w && need >= load_limit(cap, pct) / 5 * 4) {
      lh_prefault(m->slots + cap * w, block - cap * w); /* the next doubling's new half */
      m->prefaulted = cap;
    }
    return 0;
  }
  size_t new_cap = cap == 0 ? 64 : cap;
  while (need > load_limit(new_cap, pct)) {
    if (new_cap > SIZE_MAX / 2 / LH_KEYMAP_WIDE_SLOT) return -1;
    new_cap *= 2;
  }
  /* Grown in place: a big table's block keeps its pages and adds new ones after them (see
   * lh_realloc_huge), where a fresh table would fault in, and write, all of them again. With
   * grow_ahead a big block is mapped twice the table's size (the next doubling's address space). */
  uint64_t *placed = cap == 0 ? NULL : calloc((cap + 63) / 64, sizeof(uint64_t));
  if (cap > 0 && placed == NULL) return -1;
  unsigned char *slots = lh_realloc_huge(m->slots, block_bytes(m, cap), cap * w, block_bytes(m, new_cap));
  if (slots == NULL) {
    free(placed);
    return -1;
  }
  memset(slots + cap * w, 0xFF, (new_cap - cap) * w); /* every value LH_NIL: the new slots empty */
  m->slots = slots;
  m->mask = new_cap - 1;
  if (cap > 0) {
    if (w == LH_KEYMAP_WIDE_SLOT) {
      rehash_w(m, cap, placed, LH_KEYMAP_WIDE_SLOT);
    } else {
      rehash_w(m, cap, placed, LH_KEYMAP_SLOT);
    }
  }
  free(placed);
  return 0;
}

void lh_keymap_put(lh_keymap *m, int64_t key, uint32_t val) {
  size_t w = lh_keymap_width(m), i = lh_keymap_home(m, key);
  while (lh_keymap_val_w(m, i, w) != LH_NIL) i = (i + 1) & m->mask;
  lh_keymap_put_at_w(m, i, key, val, w);
}

void lh_keymap_set(lh_keymap *m, int64_t key, uint32_t val) {
  size_t i = lh_keymap_find(m, key);
  if (lh_keymap_val(m, i) == LH_NIL) {
    lh_keymap_put_at(m, i, key, val);
  } else {
    lh_keymap_set_val(m, i, val);
  }
}

/* Backward shift: move later keys of the probe run into the hole when their home slot does not
 * lie (cyclically) after the hole. w is a constant at each call (the copies stay inline moves). */
static inline void del_at_w(lh_keymap *m, size_t i, size_t w) {
  size_t hole = i;
  for (size_t j = (i + 1) & m->mask; lh_keymap_val_w(m, j, w) != LH_NIL; j = (j + 1) & m->mask) {
    size_t home = lh_keymap_home(m, lh_keymap_key_w(m, j, w));
    int movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
    if (movable) {
      memcpy(m->slots + hole * w, m->slots + j * w, w);
      hole = j;
    }
  }
  lh_keymap_set_val_w(m, hole, LH_NIL, w);
  m->count--;
}

void lh_keymap_del_at(lh_keymap *m, size_t i) {
  if (m->slot_bytes == LH_KEYMAP_WIDE_SLOT) {
    del_at_w(m, i, LH_KEYMAP_WIDE_SLOT);
  } else {
    del_at_w(m, i, LH_KEYMAP_SLOT);
  }
}

void lh_keymap_del(lh_keymap *m, int64_t key) {
  if (m->slots == NULL) return;
  if (m->slot_bytes == LH_KEYMAP_WIDE_SLOT) {
    size_t i = lh_keymap_probe_w(m, key, lh_keymap_home(m, key), LH_KEYMAP_WIDE_SLOT);
    if (lh_keymap_val_w(m, i, LH_KEYMAP_WIDE_SLOT) != LH_NIL) del_at_w(m, i, LH_KEYMAP_WIDE_SLOT);
  } else {
    size_t i = lh_keymap_probe(m, key, lh_keymap_home(m, key));
    if (lh_keymap_val(m, i) != LH_NIL) del_at_w(m, i, LH_KEYMAP_SLOT);
  }
}

void lh_keymap_clear(lh_keymap *m) {
  if (m->slots != NULL) memset(m->slots, 0xFF, (m->mask + 1) * lh_keymap_width(m));
  m->count = 0;
}

size_t lh_keymap_room(const lh_keymap *m) { return load_limit(lh_keymap_capacity(m), load_percent(m)); }

size_t lh_keymap_memory(const lh_keymap *m) { return lh_keymap_capacity(m) * lh_keymap_width(m); }

void lh_keymap_free(lh_keymap *m) {
  lh_free_huge(m->slots, block_bytes(m, lh_keymap_capacity(m)));
  m->slots = NULL;
  m->mask = 0;
  m->count = 0;
  m->prefaulted = 0;
}
