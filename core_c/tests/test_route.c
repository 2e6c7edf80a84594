/* test_route.c - the routing simulator (lh_route.h): a worked example of both routers by hand,
 * the exact balance threshold at equality, the load window's open left edge, and the error
 * contract (bad parameters, a decreasing timestamp fails at its index and changes nothing). */
#include "lh_common.h"
#include "lh_route.h"
#include "lh_test.h"

static lh_route *make(int router, uint32_t replicas, uint64_t capacity, int64_t window, uint64_t num, uint64_t den) {
  lh_route_params p = {router, replicas, capacity, 4, window, num, den, 0};
  lh_route *rt = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_route_create(&rt, &p, err, sizeof err) == LH_OK);
  return rt;
}

/* cache_aware, 3 replicas, threshold 1/10: [1 2 3] -> 0 (all cold, ties to 0); [1 2 5] -> its
 * prefix is on 0, but 0's load 12 x 3 > 1.1 x 12: least loaded 1; [7] -> no prefix anywhere,
 * smallest load: 2; [1 2] -> prefix 2 on 0 and 1 (equal loads: 0), 12 x 3 > 1.1 x 28: 2. */
static void test_by_hand(void) {
  lh_route *rt = make(LH_ROUTE_CACHE_AWARE, 3, 10, 1000000000, 1, 10);
  const int64_t keys[] = {1, 2, 3, 1, 2, 5, 7, 1, 2};
  const int64_t offsets[] = {0, 3, 6, 7, 9};
  const int64_t ts[] = {0, 1, 2, 3};
  const int64_t input[] = {12, 12, 4, 8};
  int32_t replica[4];
  int64_t hits[4];
  size_t done = 0;
  char err[LH_ERR_LEN];
  CHECK(lh_route_process_batch(rt, keys, 9, offsets, ts, input, 4, replica, hits, &done, err, sizeof err) == LH_OK);
  CHECK(done == 4);
  CHECK(replica[0] == 0 && replica[1] == 1 && replica[2] == 2 && replica[3] == 2);
  CHECK(hits[0] == 0 && hits[1] == 0 && hits[2] == 0 && hits[3] == 0);
  lh_route_destroy(rt);
}

/* Threshold 1/2 with two replicas, and the window (t - 10, t]: a request 10 ns earlier no longer
 * counts. */
static void test_threshold_and_window(void) {
  lh_route *rt = make(LH_ROUTE_CACHE_AWARE, 2, 100, 10, 1, 2);
  const int64_t keys[] = {9, 8, 9};
  const int64_t offsets[] = {0, 1, 2, 3};
  const int64_t ts[] = {0, 0, 5};
  const int64_t input[] = {7, 1, 4};
  int32_t replica[3];
  int64_t hits[3];
  size_t done = 0;
  char err[LH_ERR_LEN];
  /* [9] -> 0 (load 7); [8] -> no prefix: smaller load 1 (load 1); [9] -> prefix 1 on 0, load 7:
   * 7 x 2 x 2 = 28 > 3 x 8 = 24: least loaded, replica 1 */
  CHECK(lh_route_process_batch(rt, keys, 3, offsets, ts, input, 3, replica, hits, &done, err, sizeof err) == LH_OK);
  CHECK(replica[0] == 0 && replica[1] == 1 && replica[2] == 1 && hits[2] == 0);
  /* at t = 10 the requests at 0 left the window, the one at 5 is in it: loads (0, 4) */
  const int64_t keys2[] = {9};
  const int64_t offsets2[] = {0, 1};
  const int64_t ts2[] = {10};
  const int64_t input2[] = {4};
  CHECK(lh_route_process_batch(rt, keys2, 1, offsets2, ts2, input2, 1, replica, hits, &done, err, sizeof err) == LH_OK);
  /* prefix 1 on both; smaller load: 0 */
  CHECK(replica[0] == 0 && hits[0] == 1);
  lh_route_destroy(rt);
}

/* TTL 5 ns: a block last touched at 0 is alive at 4 and expired at 9 (9 - 4 >= 5 after the
 * touch at 4); the expired block keeps its slot, and the commit at 9 revives it. */
static void test_ttl(void) {
  lh_route_params p = {LH_ROUTE_CACHE_AWARE, 1, 10, 4, 100, 0, 1, 5};
  lh_route *rt = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_route_create(&rt, &p, err, sizeof err) == LH_OK);
  const int64_t keys[] = {9, 9, 9, 9};
  const int64_t offsets[] = {0, 1, 2, 3, 4};
  const int64_t ts[] = {0, 4, 9, 9};
  const int64_t input[] = {4, 4, 4, 4};
  int32_t replica[4];
  int64_t hits[4];
  size_t done = 0;
  CHECK(lh_route_process_batch(rt, keys, 4, offsets, ts, input, 4, replica, hits, &done, err, sizeof err) == LH_OK);
  CHECK(hits[0] == 0 && hits[1] == 1 && hits[2] == 0 && hits[3] == 1);
  lh_route_destroy(rt);
}

static void test_errors(void) {
  char err[LH_ERR_LEN];
  lh_route *rt = NULL;
  lh_route_params bad[] = {
      {0, 2, 10, 4, 1, 0, 1, 0},                             /* router */
      {LH_ROUTE_LEAST_LOADED, 0, 10, 4, 1, 0, 1, 0},         /* replicas */
      {LH_ROUTE_LEAST_LOADED, 1025, 10, 4, 1, 0, 1, 0},      /* replicas */
      {LH_ROUTE_LEAST_LOADED, 2, 10, 0, 1, 0, 1, 0},         /* block size */
      {LH_ROUTE_LEAST_LOADED, 2, 10, 4, 0, 0, 1, 0},         /* window */
      {LH_ROUTE_CACHE_AWARE, 2, 10, 4, 1, 1, 0, 0},          /* den */
      {LH_ROUTE_CACHE_AWARE, 2, 10, 4, 1, 1001, 1, 0},       /* num > 1000 den */
      {LH_ROUTE_CACHE_AWARE, 2, 10, 4, 1, 1, 1ULL << 41, 0}, /* den > 2^40 */
      {LH_ROUTE_LEAST_LOADED, 2, 10, 4, 1, 0, 1, -1}         /* ttl */
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK(lh_route_create(&rt, &bad[i], err, sizeof err) == LH_EINVAL && rt == NULL);
  }
  rt = make(LH_ROUTE_LEAST_LOADED, 2, 10, 100, 0, 1);
  const int64_t keys[] = {1, 2, 3};
  const int64_t offsets[] = {0, 1, 2, 3};
  const int64_t ts[] = {5, 6, 4};
  const int64_t input[] = {4, 4, 4};
  int32_t replica[3] = {-1, -1, -1};
  int64_t hits[3] = {-1, -1, -1};
  size_t done = 9;
  CHECK(lh_route_process_batch(rt, keys, 3, offsets, ts, input, 3, replica, hits, &done, err, sizeof err) == LH_EINVAL);
  CHECK(done == 2 && replica[0] == 0 && replica[1] == 1 && replica[2] == -1);
  /* the failed request changed nothing: the same keys at a valid time go where they would have */
  const int64_t ts_ok[] = {6};
  CHECK(lh_route_process_batch(rt, keys + 2, 1, offsets, ts_ok, input, 1, replica, hits, &done, err, sizeof err) ==
        LH_OK);
  CHECK(done == 1 && replica[0] == 0 && hits[0] == 0);
  lh_route_destroy(rt);
  lh_route_destroy(NULL);
}

int main(void) {
  test_by_hand();
  test_threshold_and_window();
  test_ttl();
  test_errors();
  return finish("routing simulator");
}
