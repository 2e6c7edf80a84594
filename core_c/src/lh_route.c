/* lh_route.c - the routing simulator (see lh_route.h): one fixed-capacity LRU simulator per
 * replica (lh_sim.c), the load window as one ring of the routed requests in arrival order. */
#include "lh_route.h"

#include <stdlib.h>

#include "lh_batch.h"
#include "lh_common.h"
#include "lh_policy.h"
#include "lh_policy_ops.h"

#define THRESHOLD_DEN_MAX (1ULL << 40)
#define THRESHOLD_MAX 1000ULL

typedef struct routed {
  int64_t ts;
  int64_t prefill;
  uint32_t replica;
} routed;

struct lh_route {
  lh_route_params p;
  lh_sim **sims;
  int64_t *loads; /* per replica, over the window ending at the current request */
  int64_t total;  /* the sum of loads */
  routed *ring;   /* the window's requests, oldest at head */
  size_t head, len, cap;
  int started;
  int64_t last_ts;
};

__extension__ typedef __int128 i128;

static const int32_t NO_CATEGORY = 0;

int lh_route_create(lh_route **out, const lh_route_params *p, char *err, size_t errlen) {
  *out = NULL;
  if (p->router != LH_ROUTE_LEAST_LOADED && p->router != LH_ROUTE_CACHE_AWARE) {
    return lh_fail(err, errlen, LH_EINVAL, "unknown router code %d", p->router);
  }
  if (p->replicas < 1 || p->replicas > LH_ROUTE_MAX_REPLICAS) {
    return lh_fail(err, errlen, LH_EINVAL, "replicas must be 1 .. %d, got %u", LH_ROUTE_MAX_REPLICAS, p->replicas);
  }
  if (p->block_size <= 0) return lh_fail(err, errlen, LH_EINVAL, "block_size must be > 0");
  if (p->window_ns <= 0) return lh_fail(err, errlen, LH_EINVAL, "window_ns must be > 0");
  if (p->ttl_ns < 0) return lh_fail(err, errlen, LH_EINVAL, "ttl_ns must be >= 0");
  if (p->threshold_den < 1 || p->threshold_den > THRESHOLD_DEN_MAX ||
      p->threshold_num > THRESHOLD_MAX * p->threshold_den) {
    return lh_fail(err, errlen, LH_EINVAL, "the balance threshold must be num / den with 1 <= den <= 2^40, 0 .. %llu",
                   (unsigned long long)THRESHOLD_MAX);
  }
  lh_route *rt = calloc(1, sizeof *rt);
  if (rt == NULL) return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a routing simulator");
  rt->p = *p;
  rt->sims = calloc(p->replicas, sizeof *rt->sims);
  rt->loads = calloc(p->replicas, sizeof *rt->loads);
  if (rt->sims == NULL || rt->loads == NULL) {
    lh_route_destroy(rt);
    return lh_fail(err, errlen, LH_ENOMEM, "out of memory creating a routing simulator");
  }
  for (uint32_t j = 0; j < p->replicas; j++) {
    int rc = lh_sim_create(&rt->sims[j], LH_POLICY_LRU, p->capacity_blocks, NULL, 0, err, errlen);
    if (rc != LH_OK) {
      lh_route_destroy(rt);
      return rc;
    }
    if (lh_sim_set_ttl(rt->sims[j], p->ttl_ns) != 0) { /* a fresh simulator without evidence takes it */
      lh_route_destroy(rt);
      return lh_fail(err, errlen, LH_EINVAL, "a routing replica's simulator refused its TTL");
    }
  }
  *out = rt;
  return LH_OK;
}

void lh_route_destroy(lh_route *rt) {
  if (rt == NULL) return;
  if (rt->sims != NULL) {
    for (uint32_t j = 0; j < rt->p.replicas; j++) lh_sim_destroy(rt->sims[j]);
  }
  free(rt->sims);
  free(rt->loads);
  free(rt->ring);
  free(rt);
}

/* Drops the requests that left the window (t - window_ns, t]. */
static void expire(lh_route *rt, int64_t now) {
  while (rt->len > 0) {
    const routed *old = &rt->ring[rt->head];
    if ((uint64_t)now - (uint64_t)old->ts < (uint64_t)rt->p.window_ns) break; /* now >= old->ts */
    rt->loads[old->replica] -= old->prefill;
    rt->total -= old->prefill;
    rt->head = rt->head + 1 == rt->cap ? 0 : rt->head + 1;
    rt->len--;
  }
}

/* Room for one more request in the ring (it keeps its order when it grows). */
static int reserve_ring(lh_route *rt) {
  if (rt->len < rt->cap) return 0;
  size_t cap = rt->cap ? rt->cap * 2 : 64;
  if (cap > SIZE_MAX / sizeof(routed)) return -1;
  routed *ring = malloc(cap * sizeof *ring);
  if (ring == NULL) return -1;
  for (size_t i = 0; i < rt->len; i++) ring[i] = rt->ring[(rt->head + i) % rt->cap];
  free(rt->ring);
  rt->ring = ring;
  rt->cap = cap;
  rt->head = 0;
  return 0;
}

static uint32_t least_loaded(const lh_route *rt) {
  uint32_t best = 0;
  for (uint32_t j = 1; j < rt->p.replicas; j++) {
    if (rt->loads[j] < rt->loads[best]) best = j;
  }
  return best;
}

static uint32_t cache_aware(const lh_route *rt, const int64_t *keys, size_t n, int64_t now) {
  uint32_t best = 0;
  size_t best_prefix = lh_sim_resident_prefix(rt->sims[0], keys, n, now);
  for (uint32_t j = 1; j < rt->p.replicas; j++) {
    size_t prefix = lh_sim_resident_prefix(rt->sims[j], keys, n, now);
    if (prefix > best_prefix || (prefix == best_prefix && rt->loads[j] < rt->loads[best])) {
      best = j;
      best_prefix = prefix;
    }
  }
  /* load > (1 + num / den) x total / N, in integers: at most 2^63 x 2^10 x 2^40 on either side */
  i128 lhs = (i128)rt->loads[best] * rt->p.replicas * (i128)rt->p.threshold_den;
  i128 rhs = ((i128)rt->p.threshold_den + (i128)rt->p.threshold_num) * rt->total;
  return lhs > rhs ? least_loaded(rt) : best;
}

int lh_route_process_batch(lh_route *rt, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                           const int64_t *timestamps, const int64_t *input_tokens, size_t n_req, int32_t *replica,
                           int64_t *hits, size_t *n_done, char *err, size_t errlen) {
  *n_done = 0;
  const lh_batch batch = {n_req, offsets, n_keys, timestamps, NULL, 0};
  for (size_t r = 0; r < n_req; r++) {
    int rc = lh_batch_check_request(&batch, r, rt->started ? &rt->last_ts : NULL, err, errlen);
    if (rc != LH_OK) {
      *n_done = r;
      return rc;
    }
    int64_t now = timestamps[r];
    expire(rt, now); /* depends on `now` only: a request failing below leaves nothing a later one sees */
    if (reserve_ring(rt) != 0) {
      *n_done = r;
      return lh_fail(err, errlen, LH_ENOMEM, "request %zu: out of memory in the routing simulator", r);
    }
    const int64_t *mine = keys + offsets[r];
    size_t n = (size_t)(offsets[r + 1] - offsets[r]);
    uint32_t j = rt->p.router == LH_ROUTE_LEAST_LOADED ? least_loaded(rt) : cache_aware(rt, mine, n, now);
    int64_t h = 0;
    size_t done = 0;
    rc = lh_sim_process_batch(rt->sims[j], keys, n_keys, offsets + r, timestamps + r, &NO_CATEGORY, 1, &h, &done, err,
                              errlen);
    if (rc != LH_OK) {
      *n_done = r;
      return rc;
    }
    int64_t prefill = input_tokens[r] - h * rt->p.block_size;
    rt->ring[(rt->head + rt->len) % rt->cap] = (routed){now, prefill, j};
    rt->len++;
    rt->loads[j] += prefill;
    rt->total += prefill;
    rt->started = 1;
    rt->last_ts = now;
    replica[r] = (int32_t)j;
    hits[r] = h;
  }
  *n_done = n_req;
  return LH_OK;
}

uint64_t lh_route_memory(const lh_route *rt) {
  uint64_t bytes = sizeof *rt + rt->p.replicas * (sizeof(lh_sim *) + sizeof(int64_t)) + rt->cap * sizeof(routed);
  for (uint32_t j = 0; j < rt->p.replicas; j++) {
    lh_sim_stats stats;
    lh_sim_get_stats(rt->sims[j], &stats);
    bytes += stats.memory_bytes;
  }
  return bytes;
}
