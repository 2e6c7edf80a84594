/* lh_policy_lru.c - LRU: one list in order of last access; the victim is its head. */
#include "lh_common.h"
#include "lh_policy_ops.h"

static void lru_hit(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  (void)a;
  lh_list_unlink(state, slots, s);
  lh_list_append(state, slots, s);
}

static int lru_check(const void *state, const lh_slot *slots, uint64_t resident, char *err, size_t errlen) {
  const lh_slot_list *l = state;
  if (l->len != resident) return lh_fail(err, errlen, LH_EINVAL, "lru list length differs from the resident count");
  return lh_list_check(l, slots, 1, "lru list", err, errlen);
}

const lh_policy_ops lh_policy_lru = {
    .name = "lru",
    .create = lh_policy_list_create,
    .destroy = lh_policy_list_destroy,
    .reserve = lh_policy_reserve_nothing,
    .on_insert = lh_policy_list_append,
    .on_hit = lru_hit,
    .evict = lh_policy_list_evict_head,
    .next_victim = lh_policy_list_head,
    .victim_lead = 8,
    .memory = lh_policy_list_memory,
    .check = lru_check,
};
