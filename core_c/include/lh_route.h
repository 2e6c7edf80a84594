/* lh_route.h - routing what-if for routers that read cache state or load (fixed capacity).
 *
 * N identical replicas, each a fixed-capacity LRU cache of capacity_blocks blocks (the policy
 * simulator of lh_policy.h: prefix hits on the snapshot before the request, commit from the last
 * key to the first). Every request, in input order, goes to one replica chosen by the router from
 * the replicas' state just before it; its hits are that replica's.
 *
 * Load of replica r when a request with timestamp t arrives: the prefill tokens (input tokens -
 * hit blocks x block_size) of the earlier requests routed to r whose timestamps ts lie in
 * (t - window_ns, t] (timestamps never decrease, so every earlier one is <= t). Mean load = the
 * sum of the N loads / N.
 *
 *   LEAST_LOADED  the replica with the smallest load; ties to the lowest index.
 *   CACHE_AWARE   the replica with the longest resident prefix of the request's keys, ties to the
 *                 smaller load, then to the lower index; when its load is strictly greater than
 *                 (1 + num / den) x the mean load (exact integer arithmetic: load x N x den >
 *                 (den + num) x sum), the least-loaded replica instead (balanced cache routing,
 *                 the shape of SGLang's cache-aware router and llm-d's prefix scorer with a load
 *                 guard).
 *
 * With a TTL (ttl_ns > 0) the resident prefix and the hits count alive blocks only, as the lane
 * core's TTL does. Same contract as the simulator: a bad request fails at its own index, the
 * requests before it applied, nothing of it.
 */
#ifndef LH_ROUTE_H
#define LH_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#define LH_ROUTE_LEAST_LOADED 1
#define LH_ROUTE_CACHE_AWARE 2
#define LH_ROUTE_MAX_REPLICAS 1024

typedef struct lh_route lh_route;

typedef struct lh_route_params {
  int router;               /* LH_ROUTE_* */
  uint32_t replicas;        /* 1 .. LH_ROUTE_MAX_REPLICAS */
  uint64_t capacity_blocks; /* per replica; UINT64_MAX: unbounded (up to the simulator's 2^31 - 1 resident blocks) */
  int64_t block_size;       /* tokens per block, > 0 */
  int64_t window_ns;        /* > 0 */
  uint64_t threshold_num;   /* balance threshold num / den >= 0 (CACHE_AWARE) */
  uint64_t threshold_den;   /* 1 .. 2^40; num <= 1000 x den */
  int64_t ttl_ns;           /* >= 0; 0: none. A block last accessed ttl_ns or more before a request
                             * is no hit (it keeps its place and slot; the commit touches it) */
} lh_route_params;

/* Creates a routing simulator. LH_EINVAL for bad parameters (named in err), LH_ENOMEM. */
int lh_route_create(lh_route **out, const lh_route_params *params, char *err, size_t errlen);

/* Releases it. NULL is a no-op. */
void lh_route_destroy(lh_route *rt);

/* Routes and simulates n_req requests in order: request r has keys[offsets[r] .. offsets[r+1])
 * (0 <= offsets[r] <= offsets[r+1] <= n_keys), the timestamp timestamps[r] (ns, never below the
 * previous request's, across batches too) and input_tokens[r] tokens. Writes replica[r] and
 * hits[r] (caller-owned, n_req entries each). LH_OK with *n_done = n_req, or an error with
 * *n_done = the failing request (LH_EINVAL: bad offsets or a decreasing timestamp; LH_ENOMEM;
 * LH_ERANGE: a count out of range); the requests before it are applied and written. */
int lh_route_process_batch(lh_route *rt, const int64_t *keys, size_t n_keys, const int64_t *offsets,
                           const int64_t *timestamps, const int64_t *input_tokens, size_t n_req, int32_t *replica,
                           int64_t *hits, size_t *n_done, char *err, size_t errlen);

/* Bytes of memory held (every replica's simulator and the load window). Cannot fail. */
uint64_t lh_route_memory(const lh_route *rt);

#endif
