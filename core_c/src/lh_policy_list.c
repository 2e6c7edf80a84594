/* lh_policy_list.c - the pieces shared by the policies that keep one list of slots (LRU, FIFO):
 * a list as the whole state, append on insertion, evict the head. */
#include <stdlib.h>

#include "lh_common.h"
#include "lh_policy_ops.h"

int lh_policy_list_create(void **state, const lh_wa_params *wa, char *err, size_t errlen) {
  (void)wa;
  lh_slot_list *l = malloc(sizeof *l);
  if (l == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating an eviction policy");
  lh_list_init(l);
  *state = l;
  return LH_OK;
}

void lh_policy_list_destroy(void *state) { free(state); }

int lh_policy_reserve_nothing(void *state, size_t slots, const int64_t *keys, size_t n, int32_t cat) {
  (void)state, (void)slots, (void)keys, (void)n, (void)cat;
  return 0;
}

void lh_policy_list_append(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  (void)a;
  lh_list_append(state, slots, s);
}

uint32_t lh_policy_list_evict_head(void *state, lh_slot *slots, const lh_access *a) {
  (void)a;
  lh_slot_list *l = state;
  uint32_t victim = l->head;
  lh_list_unlink(l, slots, victim);
  return victim;
}

uint32_t lh_policy_list_head(const void *state, const lh_slot *slots) {
  (void)slots;
  return ((const lh_slot_list *)state)->head;
}

size_t lh_policy_list_memory(const void *state) {
  (void)state;
  return sizeof(lh_slot_list);
}
