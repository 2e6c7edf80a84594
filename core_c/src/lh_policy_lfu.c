/* lh_policy_lfu.c - LFU: the victim has the smallest access count since insertion, the least
 * recent one among equals.
 *
 * O(1) per event: slots sit in buckets of equal count, each bucket a list in order of last
 * access (a slot enters a bucket only when accessed, so appending keeps that order), and the
 * buckets form a list in increasing count. The victim is the head of the first bucket.
 * A slot's bucket index is kept in slot.prio.
 */
#include <stdlib.h>

#include "lh_common.h"
#include "lh_policy_ops.h"

typedef struct bucket {
  uint64_t count;
  lh_slot_list items;
  uint32_t prev, next; /* neighbouring buckets (next has a larger count); free list via next */
} bucket;

typedef struct lfu {
  bucket *b;
  size_t cap, used;
  uint32_t first;     /* bucket of the smallest count, LH_NIL when empty */
  uint32_t free_head; /* recycled buckets */
} lfu;

static int lfu_create(void **state, const lh_wa_params *wa, char *err, size_t errlen) {
  (void)wa;
  lfu *f = calloc(1, sizeof *f);
  if (f == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating the lfu policy");
  f->first = f->free_head = LH_NIL;
  *state = f;
  return LH_OK;
}

static void lfu_destroy(void *state) {
  lfu *f = state;
  if (f != NULL) lh_policy_free(f->b, f->cap, sizeof(bucket));
  free(f);
}

static int lfu_reserve(void *state, size_t slots, const int64_t *keys, size_t n, int32_t cat) {
  (void)keys, (void)n, (void)cat;
  lfu *f = state;
  /* one bucket per resident slot, plus one while a slot moves up */
  return lh_policy_grow((void **)&f->b, &f->cap, slots + 1, sizeof(bucket));
}

/* A new bucket of `count` linked after `after` (LH_NIL: at the front). */
static uint32_t new_bucket(lfu *f, uint64_t count, uint32_t after) {
  uint32_t i;
  if (f->free_head != LH_NIL) {
    i = f->free_head;
    f->free_head = f->b[i].next;
  } else {
    i = (uint32_t)f->used++;
  }
  bucket *nb = &f->b[i];
  nb->count = count;
  lh_list_init(&nb->items);
  nb->prev = after;
  nb->next = after == LH_NIL ? f->first : f->b[after].next;
  if (nb->next != LH_NIL) f->b[nb->next].prev = i;
  if (after == LH_NIL) {
    f->first = i;
  } else {
    f->b[after].next = i;
  }
  return i;
}

static void drop_if_empty(lfu *f, uint32_t i) {
  bucket *b = &f->b[i];
  if (b->items.len != 0) return;
  if (b->prev != LH_NIL) {
    f->b[b->prev].next = b->next;
  } else {
    f->first = b->next;
  }
  if (b->next != LH_NIL) f->b[b->next].prev = b->prev;
  b->next = f->free_head;
  f->free_head = i;
}

static void lfu_insert(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  (void)a;
  lfu *f = state;
  uint32_t i =
      f->first != LH_NIL && f->b[f->first].count == slots[s].count ? f->first : new_bucket(f, slots[s].count, LH_NIL);
  lh_list_append(&f->b[i].items, slots, s);
  slots[s].prio = i;
}

static void lfu_hit(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  (void)a;
  lfu *f = state;
  uint32_t from = (uint32_t)slots[s].prio;
  uint32_t next = f->b[from].next;
  uint32_t to = next != LH_NIL && f->b[next].count == slots[s].count ? next : new_bucket(f, slots[s].count, from);
  lh_list_unlink(&f->b[from].items, slots, s);
  lh_list_append(&f->b[to].items, slots, s);
  slots[s].prio = to;
  drop_if_empty(f, from);
}

static uint32_t lfu_evict(void *state, lh_slot *slots, const lh_access *a) {
  (void)a;
  lfu *f = state;
  uint32_t i = f->first;
  uint32_t victim = f->b[i].items.head;
  lh_list_unlink(&f->b[i].items, slots, victim);
  drop_if_empty(f, i);
  return victim;
}

static uint32_t lfu_next_victim(const void *state, const lh_slot *slots) {
  (void)slots;
  const lfu *f = state;
  return f->first != LH_NIL ? f->b[f->first].items.head : LH_NIL;
}

static size_t lfu_memory(const void *state) {
  const lfu *f = state;
  return sizeof *f + f->cap * sizeof(bucket);
}

static int lfu_check(const void *state, const lh_slot *slots, uint64_t resident, char *err, size_t errlen) {
  const lfu *f = state;
  uint64_t total = 0;
  uint32_t prev = LH_NIL;
  for (uint32_t i = f->first; i != LH_NIL; i = f->b[i].next) {
    const bucket *b = &f->b[i];
    if (b->prev != prev) return lh_fail(err, errlen, LH_EINVAL, "lfu: broken bucket link at %u", i);
    if (prev != LH_NIL && f->b[prev].count >= b->count)
      return lh_fail(err, errlen, LH_EINVAL, "lfu: counts not increasing");
    if (b->items.len == 0) return lh_fail(err, errlen, LH_EINVAL, "lfu: empty bucket kept");
    int rc = lh_list_check(&b->items, slots, 1, "lfu bucket", err, errlen);
    if (rc != LH_OK) return rc;
    for (uint32_t s = b->items.head; s != LH_NIL; s = slots[s].next) {
      if (slots[s].count != b->count || slots[s].prio != i)
        return lh_fail(err, errlen, LH_EINVAL, "lfu: slot %u in the wrong bucket", s);
    }
    total += b->items.len;
    prev = i;
  }
  if (total != resident)
    return lh_fail(err, errlen, LH_EINVAL, "lfu: buckets hold %llu slots, %llu resident", (unsigned long long)total,
                   (unsigned long long)resident);
  return LH_OK;
}

const lh_policy_ops lh_policy_lfu = {
    .name = "lfu",
    .create = lfu_create,
    .destroy = lfu_destroy,
    .reserve = lfu_reserve,
    .on_insert = lfu_insert,
    .on_hit = lfu_hit,
    .evict = lfu_evict,
    .next_victim = lfu_next_victim,
    .memory = lfu_memory,
    .check = lfu_check,
};
