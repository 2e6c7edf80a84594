/* lh_policy_fifo.c - FIFO: one list in order of insertion; the victim is its head and hits
 * change nothing. */
#include "lh_common.h"
#include "lh_policy_ops.h"

static void fifo_hit(void *state, lh_slot *slots, uint32_t s, const lh_access *a) {
  (void)state, (void)slots, (void)s, (void)a;
}

static int fifo_check(const void *state, const lh_slot *slots, uint64_t resident, char *err, size_t errlen) {
  const lh_slot_list *l = state;
  if (l->len != resident) return lh_fail(err, errlen, LH_EINVAL, "fifo list length differs from the resident count");
  return lh_list_check(l, slots, 0, "fifo list", err, errlen);
}

const lh_policy_ops lh_policy_fifo = {
    .name = "fifo",
    .create = lh_policy_list_create,
    .destroy = lh_policy_list_destroy,
    .reserve = lh_policy_reserve_nothing,
    .on_insert = lh_policy_list_append,
    .on_hit = fifo_hit,
    .evict = lh_policy_list_evict_head,
    .next_victim = lh_policy_list_head,
    .victim_lead = 8,
    .memory = lh_policy_list_memory,
    .check = fifo_check,
};
