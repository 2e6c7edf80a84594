/* test_core.c - C-level tests of the LiteHit engine, built and run under AddressSanitizer and
 * UndefinedBehaviorSanitizer by tests/test_core_sanitized.py. Exit status 0 = all passed.
 *
 * Golden numbers from the original tool's tests, plus a randomized comparison against a naive
 * array LRU that exercises growth, compaction (with and without TTL) and reset. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "lh_buf.h"
#include "lh_keymap.h"
#include "lh_prefault.h"
#include "lh_test.h"
#include "litehit.h"

/* Processes one request; returns the number of segments written to segs (room for 2*n). */
static size_t run1(lh_lane *lane, const int64_t *keys, size_t n, int64_t now, int64_t *segs) {
  int64_t offsets[2] = {0, (int64_t)n};
  int64_t seg_offsets[2];
  uint8_t cut;
  size_t done = 0;
  char err[LH_ERR_LEN];
  int st =
      lh_lane_process_batch(lane, keys, n, offsets, &now, 1, segs, seg_offsets, &cut, NULL, &done, err, sizeof err);
  CHECK(st == LH_OK);
  return (size_t)seg_offsets[1];
}

static int curve_is(const int64_t *segs, size_t nseg, const int64_t *want, size_t nwant) {
  if (nseg != nwant) return 0;
  return memcmp(segs, want, nseg * 2 * sizeof(int64_t)) == 0;
}

static void test_worked_example(void) {
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, 0, 0, err, sizeof err) == LH_OK);
  int64_t r1[] = {1, 2, 3}, r2[] = {1, 2, 4}, r4[] = {1, 5};
  int64_t segs[16];
  CHECK(run1(lane, r1, 3, 0, segs) == 0);
  size_t n = run1(lane, r2, 3, 0, segs);
  int64_t w2[] = {1, 2};
  CHECK(curve_is(segs, n, w2, 1));
  n = run1(lane, r1, 3, 0, segs);
  int64_t w3[] = {1, 2, 4, 1};
  CHECK(curve_is(segs, n, w3, 2));
  CHECK(lh_project_blocks(segs, n, 3) == 2 && lh_project_blocks(segs, n, 4) == 3);
  CHECK(lh_project_bytes(segs, n, 3072, 1024) == 2 && lh_project_infinite(segs, n) == 3);
  n = run1(lane, r4, 2, 0, segs);
  int64_t w4[] = {1, 1};
  CHECK(curve_is(segs, n, w4, 1));
  n = run1(lane, r4, 2, 0, segs);
  int64_t w5[] = {1, 2};
  CHECK(curve_is(segs, n, w5, 1));
  CHECK(lh_lane_check(lane, err, sizeof err) == LH_OK);
  lh_lane_destroy(lane);
}

static void test_ttl_boundary_and_counts(void) {
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, 2000, 0, err, sizeof err) == LH_OK);
  int64_t r[] = {1, 2, 3}, segs[8];
  CHECK(run1(lane, r, 3, 1000, segs) == 0);
  CHECK(run1(lane, r, 3, 2999, segs) == 1 && segs[0] == 1 && segs[1] == 3);
  CHECK(run1(lane, r, 3, 4999, segs) == 0);
  lh_lane_stats st;
  lh_lane_get_stats(lane, &st);
  CHECK(st.expired_blocks == 3 && st.unique_blocks == 3);
  lh_lane_advance_time(lane, 6999);
  lh_lane_get_stats(lane, &st);
  CHECK(st.unique_blocks == 0 && st.expired_blocks == 6);
  lh_lane_reset(lane);
  lh_lane_get_stats(lane, &st);
  CHECK(st.unique_blocks == 0 && st.expired_blocks == 0 && st.memory_bytes > 0);
  CHECK(lh_lane_create(NULL, 0, 0, err, sizeof err) == LH_EINVAL);
  lh_lane *bad = NULL;
  CHECK(lh_lane_create(&bad, -1, 0, err, sizeof err) == LH_EINVAL && bad == NULL);
  CHECK(lh_lane_create(&bad, 0, 0x80, err, sizeof err) == LH_EINVAL);
  lh_lane_destroy(lane);
  lh_lane_destroy(NULL);
}

static void test_batch_error_index(void) {
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, 0, 0, err, sizeof err) == LH_OK);
  int64_t keys[] = {1, 2, 3, 4}, offsets[] = {0, 2, 1, 4}, segs[8], seg_offsets[4];
  size_t done = 99;
  int st =
      lh_lane_process_batch(lane, keys, 4, offsets, NULL, 3, segs, seg_offsets, NULL, NULL, &done, err, sizeof err);
  CHECK(st == LH_EINVAL && done == 1 && strstr(err, "offsets") != NULL);
  lh_lane_stats s;
  lh_lane_get_stats(lane, &s);
  CHECK(s.unique_blocks == 2 && s.requests == 1);
  lh_lane_destroy(lane);
  CHECK(lh_lane_create(&lane, 10, 0, err, sizeof err) == LH_OK);
  int64_t good[] = {0, 2};
  CHECK(lh_lane_process_batch(lane, keys, 4, good, NULL, 1, segs, seg_offsets, NULL, NULL, &done, err, sizeof err) ==
        LH_EINVAL);
  lh_lane_destroy(
      lane); /* a request that would read past the keys, or before them, fails before anything is read (lh_batch.h) */
  CHECK(lh_lane_create(&lane, 0, 0, err, sizeof err) == LH_OK);
  int64_t past[] = {0, 5, 3}, before[] = {-1, 2};
  st = lh_lane_process_batch(lane, keys, 4, past, NULL, 2, segs, seg_offsets, NULL, NULL, &done, err, sizeof err);
  CHECK(st == LH_EINVAL && done == 0 &&
        strstr(err, "request 0: offsets must be non-decreasing and within keys (0 .. 5 of 4)") != NULL);
  st = lh_lane_process_batch(lane, keys, 4, before, NULL, 1, segs, seg_offsets, NULL, NULL, &done, err, sizeof err);
  CHECK(st == LH_EINVAL && done == 0 &&
        strstr(err, "request 0: offsets must be non-decreasing and within keys (-1 .. 2 of 4)") != NULL);
  lh_lane_get_stats(lane, &s);
  CHECK(s.requests == 0 && s.unique_blocks == 0);
  CHECK(lh_lane_check(lane, err, sizeof err) == LH_OK);
  lh_lane_destroy(lane);
}

static void test_normalize_and_hash(void) {
  int64_t raw[] = {1, 2, 3, 4}, out[4];
  lh_prefix_hash_chain(raw, 3, out);
  CHECK(out[0] == INT64_C(-7046029254386353130) && out[1] == INT64_C(-8366447756632839738) &&
        out[2] == INT64_C(8024461590772477417));
  size_t n = 0;
  int64_t len = 0;
  char err[LH_ERR_LEN];
  CHECK(lh_normalize(raw, 4, 16, 8, 4, 1, out, &n, &len, err, sizeof err) == LH_OK);
  CHECK(n == 2 && len == 16 && out[0] == INT64_C(-8366447756632839738) && out[1] == INT64_C(527151483457094799));
  CHECK(lh_normalize(raw, 2, 21, 8, 4, 0, out, &n, &len, err, sizeof err) == LH_EINVAL);
  CHECK(lh_normalize(raw, 1, 4, 6, 4, 0, out, &n, &len, err, sizeof err) == LH_EINVAL);
  CHECK(lh_normalize(raw, 1, -1, 4, 0, 0, out, &n, &len, err, sizeof err) == LH_EINVAL);
  CHECK(lh_normalize(raw, 1, 0, 0, 0, 0, out, &n, &len, err, sizeof err) == LH_EINVAL);
  CHECK(lh_normalize(raw, 4, 0, INT64_MAX, INT64_MAX / 2, 0, out, &n, &len, err, sizeof err) == LH_EINVAL);
  int64_t offsets[] = {0, 2, 4}, lens[] = {8, 3}, ok[4], ooff[3], olen[2];
  size_t done = 0;
  CHECK(lh_normalize_batch(raw, offsets, lens, NULL, 2, 4, 0, 0, ok, ooff, olen, &done, err, sizeof err) == LH_EINVAL &&
        done == 1);
  CHECK(strcmp(lh_status_name(LH_EPARSE), "LH_EPARSE") == 0);
}

/* ---- naive oracle: recency list as an array, MRU first ---------------------------------- */

typedef struct {
  int64_t *key;
  int64_t *last;
  size_t n, cap;
} naive;

static size_t naive_find(const naive *o, int64_t k) {
  for (size_t i = 0; i < o->n; i++)
    if (o->key[i] == k) return i;
  return (size_t)-1;
}

static void naive_touch(naive *o, int64_t k, int64_t now) {
  size_t at = naive_find(o, k);
  if (at == (size_t)-1) {
    if (o->n == o->cap) {
      o->cap = o->cap ? 2 * o->cap : 64;
      o->key = realloc(o->key, o->cap * sizeof(int64_t));
      o->last = realloc(o->last, o->cap * sizeof(int64_t));
    }
    at = o->n++;
  }
  memmove(o->key + 1, o->key, at * sizeof(int64_t));
  memmove(o->last + 1, o->last, at * sizeof(int64_t));
  o->key[0] = k;
  o->last[0] = now;
}

/* Prefix hits at capacity cap (0 = infinite) on the snapshot. */
static uint64_t naive_hits(const naive *o, const int64_t *keys, size_t n, uint64_t cap, int64_t now, int64_t ttl) {
  uint64_t hits = 0;
  for (size_t i = 0; i < n; i++) {
    size_t at = naive_find(o, keys[i]);
    if (at == (size_t)-1) break;
    if (ttl > 0 && now - o->last[at] >= ttl) break;
    if (cap > 0 && at + 1 > cap) break;
    hits++;
  }
  return hits;
}

static void test_random_against_naive(int64_t ttl, unsigned flags, size_t requests) {
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, ttl, flags, err, sizeof err) == LH_OK);
  naive o = {0};
  int64_t keys[16], segs[32], now = 0;
  const uint64_t caps[] = {1, 2, 5, 9, 40};
  for (size_t r = 0; r < requests; r++) {
    now += (int64_t)(rnd() % 20);
    size_t n = (size_t)(rnd() % 9);
    int64_t prev = 0;
    for (size_t i = 0; i < n; i++) {
      prev = lh_prefix_hash_next(prev, (int64_t)(rnd() % 3));
      keys[i] = prev;
    }
    uint64_t want[6];
    for (int c = 0; c < 5; c++) want[c] = naive_hits(&o, keys, n, caps[c], now, ttl);
    want[5] = naive_hits(&o, keys, n, 0, now, ttl);
    size_t nseg = run1(lane, keys, n, now, segs);
    for (int c = 0; c < 5; c++) CHECK(lh_project_blocks(segs, nseg, caps[c]) == want[c]);
    CHECK(lh_project_infinite(segs, nseg) == want[5]);
    for (size_t i = n; i-- > 0;) naive_touch(&o, keys[i], now);
    if (r % 1000 == 0) CHECK(lh_lane_check(lane, err, sizeof err) == LH_OK);
    if (r == requests / 2 && flags == 0 && ttl == 0) {
      lh_lane_reset(lane);
      o.n = 0;
    }
  }
  lh_lane_stats st;
  lh_lane_get_stats(lane, &st);
  CHECK(st.compactions > 0);
  CHECK(lh_lane_check(lane, err, sizeof err) == LH_OK);
  free(o.key);
  free(o.last);
  lh_lane_destroy(lane);
}

/* The line starting with `field` in /proc/self/smaps's entry for the mapping holding addr, into
 * line: 1, or 0 when there is none or /proc/self/smaps cannot be read. */
static int smaps_line(uintptr_t addr, const char *field, char *line, size_t size) {
  FILE *f = fopen("/proc/self/smaps", "r");
  if (f == NULL) return 0;
  int inside = 0, found = 0;
  while (!found && fgets(line, (int)size, f) != NULL) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = addr >= lo && addr < hi;
    } else {
      found = inside && strncmp(line, field, strlen(field)) == 0;
    }
  }
  fclose(f);
  return found;
}

/* Whether the mapping holding addr is flagged for huge pages in /proc/self/smaps: 1 or 0, or -1
 * when that cannot be read. */
static int huge_flagged(uintptr_t addr) {
  char line[512];
  return smaps_line(addr, "VmFlags:", line, sizeof line) ? strstr(line, " hg") != NULL : -1;
}

/* The AnonHugePages (KiB) of the mapping holding addr in /proc/self/smaps, or -1. */
static long huge_kib(uintptr_t addr) {
  char line[512];
  long kib = -1;
  if (smaps_line(addr, "AnonHugePages:", line, sizeof line)) (void)sscanf(line, "AnonHugePages: %ld kB", &kib);
  return kib;
}

/* lh_advise_huge flags exactly the whole 2 MiB pages inside a big table, and none of a small one.
 * The tables are carved out of fresh mappings of the test's own, so no earlier advice (a freed key
 * map's, say, whose heap range malloc may hand out again) can be mistaken for this one's. */
static void test_advise_huge(void) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  FILE *thp = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (thp == NULL) {
    printf("skipped: no transparent huge pages here\n");
    return;
  }
  fclose(thp);
  const uintptr_t huge = (uintptr_t)2 << 20;
  size_t region = 16 * ((size_t)1 << 20), bytes = 9 * ((size_t)1 << 20) + 12345;
  unsigned char *big = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned char *small = mmap(NULL, region, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(big != MAP_FAILED && small != MAP_FAILED);
  if (big == MAP_FAILED || small == MAP_FAILED) return;
  if (huge_flagged((uintptr_t)big) != 0) {
    printf("skipped: /proc/self/smaps unreadable\n");
  } else {
    unsigned char *p = big + huge + 4096 + 48; /* a table that starts and ends inside 2 MiB pages */
    lh_advise_huge(p, bytes);
    lh_advise_huge(small + 4096, 3 * ((size_t)1 << 20) + 4096); /* under 4 MiB: left alone */
    uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1), hi = ((uintptr_t)p + bytes) & ~(huge - 1);
    CHECK(hi - lo >= 3 * huge);
    CHECK(huge_flagged(lo) == 1);
    CHECK(huge_flagged(hi - 1) == 1);
    CHECK(huge_flagged(lo - 1) == 0); /* the table's head, before its first whole page */
    CHECK(huge_flagged(hi) == 0);     /* its tail, after the last */
    CHECK(huge_flagged((uintptr_t)small + 2 * huge) == 0);
    memset(p, 0xAB, bytes); /* still ordinary memory */
    CHECK(p[0] == 0xAB && p[bytes - 1] == 0xAB);
  }
  munmap(big, region);
  munmap(small, region);
#else
  printf("skipped: no madvise(MADV_HUGEPAGE) here\n");
#endif
}

/* lh_realloc_huge keeps the first `keep` bytes whichever way it grows or shrinks (malloc's
 * blocks below 4 MiB, mappings of their own from it, and the moves between the two), and a block
 * grown past 4 MiB keeps its huge pages (realloc moved big blocks by remapping them to an address
 * that splits every huge page of the part moved). */
static void test_realloc_huge(void) {
  const size_t mib = (size_t)1 << 20;
  size_t sizes[] = {1000, mib, 3 * mib, 6 * mib + 7, 40 * mib, 41 * mib, 5 * mib, 512, 9 * mib};
  unsigned char *p = NULL;
  size_t have = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    size_t keep = have < sizes[i] ? have : sizes[i];
    if (i == 5) keep /= 3; /* a caller may keep less than the block held (the profile's arrays) */
    unsigned char *q = lh_realloc_huge(p, have, keep, sizes[i]);
    CHECK(q != NULL);
    if (q == NULL) break;
    int kept = 1;
    for (size_t j = 0; j < keep; j++) kept &= q[j] == (unsigned char)(j * 31 + j / 4096);
    CHECK(kept);
    for (size_t j = keep; j < sizes[i]; j++) q[j] = (unsigned char)(j * 31 + j / 4096);
    p = q;
    have = sizes[i];
  }
  lh_free_huge(p, have);
  lh_free_huge(NULL, 64 * mib);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  size_t old = 64 * mib;
  unsigned char *a = lh_realloc_huge(NULL, 0, 0, old);
  CHECK(a != NULL);
  if (a == NULL) return;
  memset(a, 0x5A, old);
  long before = huge_kib((uintptr_t)a + old / 2);
  if (before < 4096) {
    printf("skipped: the kernel gave the test no huge pages (%ld KiB)\n", before);
    lh_free_huge(a, old);
    return;
  }
  unsigned char *b = lh_realloc_huge(a, old, old, 2 * old);
  CHECK(b != NULL);
  if (b == NULL) return;
  CHECK(b[0] == 0x5A && b[old - 1] == 0x5A && b[old] == 0 && b[2 * old - 1] == 0);
  long after = huge_kib((uintptr_t)b + old / 2); /* the part that was moved */
  CHECK(after >= before / 2);
  lh_free_huge(b, 2 * old);
#endif
}

/* Whether m is a valid linear-probing map holding exactly the live keys[i] -> vals[i] (and, wide,
 * aux vals[i] ^ 0xA5A5): every key's probe run from its home reaches it through occupied slots
 * only (what lookups and deletion by backward shift rely on), and each live key is found. */
static int keymap_matches(const lh_keymap *m, const int64_t *keys, const uint32_t *vals, const unsigned char *live,
                          size_t n) {
  size_t cap = lh_keymap_capacity(m), w = lh_keymap_width(m), held = 0;
  for (size_t i = 0; i < cap; i++) {
    if (lh_keymap_val_w(m, i, w) == LH_NIL) continue;
    held++;
    for (size_t j = lh_keymap_home(m, lh_keymap_key_w(m, i, w)); j != i; j = (j + 1) & m->mask) {
      if (lh_keymap_val_w(m, j, w) == LH_NIL) return 0;
    }
  }
  size_t want = 0;
  for (size_t k = 0; k < n; k++) {
    size_t i = cap == 0 ? 0 : lh_keymap_probe_w(m, keys[k], lh_keymap_home(m, keys[k]), w);
    int found = cap > 0 && lh_keymap_val_w(m, i, w) != LH_NIL;
    if (found != live[k]) return 0;
    if (!live[k]) continue;
    want++;
    if (lh_keymap_val_w(m, i, w) != vals[k]) return 0;
    if (w == LH_KEYMAP_WIDE_SLOT && lh_keymap_aux(m, i) != (vals[k] ^ 0xA5A5u)) return 0;
  }
  return held == want && m->count == want;
}

/* Home slots: with run_bits 0 the mixed key; with r > 0, the keys that differ only in their low r
 * bits sit side by side from the first one's home (in key order, wrapping around the table), and
 * runs of other keys land at scattered places. */
static void test_keymap_runs(void) {
  lh_keymap m;
  memset(&m, 0, sizeof m);
  CHECK(lh_keymap_reserve(&m, 1000) == 0);
  size_t cap = lh_keymap_capacity(&m);
  for (int64_t key = -5000; key < 5000; key += 7) CHECK(lh_keymap_home(&m, key) == (lh_mix64((uint64_t)key) & m.mask));
  lh_keymap_free(&m);
  for (unsigned r = 1; r <= LH_KEYMAP_MAX_RUN_BITS; r++) {
    memset(&m, 0, sizeof m);
    m.run_bits = r;
    CHECK(lh_keymap_reserve(&m, r == LH_KEYMAP_MAX_RUN_BITS ? 1 : 1000) == 0);
    cap = lh_keymap_capacity(&m);
    size_t run = (size_t)1 << r, distinct = 0, firsts[200];
    for (int64_t base = -100 * (int64_t)run; base < 100 * (int64_t)run; base += (int64_t)run) {
      size_t first = lh_keymap_home(&m, base);
      for (size_t j = 1; j < run; j++) CHECK(lh_keymap_home(&m, base + (int64_t)j) == ((first + j) & m.mask));
      size_t seen = 0;
      while (seen < distinct && firsts[seen] != first) seen++;
      if (seen == distinct) firsts[distinct++] = first;
    }
    CHECK(distinct > (cap / run < 200 ? cap / run : 200) / 2); /* runs spread over the table */
    lh_keymap_free(&m);
  }
}

/* Key maps grown in place (lh_keymap_reserve) against arrays of the keys put: narrow and wide
 * slots, several loads, homes with and without runs of keys (run_bits), keys deleted between growths, growths of one
 * doubling and of several at once, and a map big enough to be a block of its own (from 4 MiB). Keys are drawn from a
 * small range so that homes collide and probe runs wrap around the end of the table. */
static void test_keymap_growth(void) {
  const struct {
    unsigned width, load, run_bits, grow_ahead;
    size_t keys;
  } cases[] = {{LH_KEYMAP_SLOT, 0, 0, 0, 3000},         {LH_KEYMAP_SLOT, 90, 0, 0, 3000},
               {LH_KEYMAP_WIDE_SLOT, 80, 0, 0, 3000},   {LH_KEYMAP_SLOT, 75, 0, 0, 700000},
               {LH_KEYMAP_WIDE_SLOT, 90, 0, 0, 400000}, {LH_KEYMAP_SLOT, 80, 2, 0, 3000},
               {LH_KEYMAP_WIDE_SLOT, 90, 4, 0, 3000},   {LH_KEYMAP_SLOT, 80, 2, 0, 700000},
               {LH_KEYMAP_WIDE_SLOT, 80, 2, 0, 400000}, {LH_KEYMAP_SLOT, 75, 2, 1, 700000},
               {LH_KEYMAP_WIDE_SLOT, 90, 0, 1, 400000}, {LH_KEYMAP_SLOT, 50, 0, 1, 3000}};
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
    size_t n = cases[c].keys;
    int64_t *keys = malloc(n * sizeof *keys);
    uint32_t *vals = malloc(n * sizeof *vals);
    unsigned char *live = calloc(n, 1), *used = calloc(4 * n, 1);
    CHECK(keys != NULL && vals != NULL && live != NULL && used != NULL);
    lh_keymap m;
    memset(&m, 0, sizeof m);
    m.slot_bytes = cases[c].width;
    m.max_load_percent = cases[c].load;
    m.run_bits = cases[c].run_bits;
    m.grow_ahead = cases[c].grow_ahead;
    int ok = 1;
    size_t put = 0, checks = 0;
    while (put < n && ok) {
      size_t batch = 1 + (size_t)(rnd() % (put < 200 ? 40 : put / 2 + 1)); /* sometimes several doublings */
      if (batch > n - put) batch = n - put;
      size_t before = lh_keymap_capacity(&m);
      CHECK(lh_keymap_reserve(&m, batch) == 0);
      for (size_t b = 0; b < batch; b++, put++) {
        size_t r;
        do { /* distinct keys from a range 4x their count */
          r = (size_t)(rnd() % (4 * n));
        } while (used[r]);
        used[r] = 1;
        int64_t key = (int64_t)r - (int64_t)n;
        keys[put] = key;
        vals[put] = (uint32_t)(rnd() % 1000000);
        live[put] = 1;
        lh_keymap_put(&m, key, vals[put]);
        if (m.slot_bytes == LH_KEYMAP_WIDE_SLOT) {
          lh_keymap_set_aux(&m, lh_keymap_probe_w(&m, key, lh_keymap_home(&m, key), LH_KEYMAP_WIDE_SLOT),
                            vals[put] ^ 0xA5A5u);
        }
      }
      for (size_t d = rnd() % (batch / 3 + 1); d > 0; d--) { /* delete some live keys */
        size_t k = (size_t)(rnd() % put);
        if (!live[k]) continue;
        lh_keymap_del(&m, keys[k]);
        live[k] = 0;
      }
      if (lh_keymap_capacity(&m) != before && (n < 10000 || checks++ < 6 || put == n)) {
        ok = keymap_matches(&m, keys, vals, live, put);
      }
    }
    lh_prefault_wait(); /* the pages asked for are in: nothing the map holds changed */
    if (ok) ok = keymap_matches(&m, keys, vals, live, put);
    CHECK(ok);
    if (!ok) printf("key map case %zu: wrong after %zu keys (capacity %zu)\n", c, put, lh_keymap_capacity(&m));
    size_t table = lh_keymap_capacity(&m) * lh_keymap_width(&m);
    if (cases[c].grow_ahead && table >= LH_HUGE_MIN) { /* the next doubling's room is mapped: writable */
      m.slots[2 * table - 1] = 0x5A;
      CHECK(m.slots[2 * table - 1] == 0x5A);
    }
    lh_keymap_free(&m);
    free(keys);
    free(vals);
    free(live);
    free(used);
  }
}

/* lh_prefault: pages asked for keep what was written to them (before and while they are faulted
 * in), unwritten ones read as zeros, a range freed before the thread reaches it is only refused, and
 * lh_prefault_ahead asks for LH_PREFAULT_AHEAD bytes past the fill, within the room, once fewer
 * than half of them are left. */
static void test_prefault(void) {
  size_t bytes = (size_t)24 << 20;
  unsigned char *p = lh_realloc_huge(NULL, 0, 0, bytes);
  CHECK(p != NULL);
  for (size_t i = 0; i < bytes / 2; i += 4096) p[i] = (unsigned char)(i >> 12 | 1);
  lh_prefault(p, bytes);
  for (size_t i = bytes / 2; i < bytes; i += 8192) p[i] = (unsigned char)(i >> 12 | 1); /* while it runs */
  lh_prefault_wait();
  int kept = 1;
  for (size_t i = 0; i < bytes; i += 4096) {
    unsigned char want = i < bytes / 2 || i % 8192 == 0 ? (unsigned char)(i >> 12 | 1) : 0;
    if (p[i] != want || p[i + 1] != 0) kept = 0;
  }
  CHECK(kept);
  unsigned char *q = lh_realloc_huge(NULL, 0, 0, bytes);
  CHECK(q != NULL);
  lh_prefault(q, bytes);
  lh_free_huge(q, bytes); /* possibly before the thread gets to it */
  lh_prefault(NULL, bytes);
  lh_prefault(p, 100); /* no whole page: nothing */
  lh_prefault_wait();
  size_t ahead = 0, room = (size_t)20 << 20, mib = (size_t)1 << 20;
  lh_prefault_ahead(p, 0, room, &ahead);
  CHECK(ahead == LH_PREFAULT_AHEAD);
  lh_prefault_ahead(p, LH_PREFAULT_AHEAD / 2, room, &ahead); /* half of it still ahead: no request */
  CHECK(ahead == LH_PREFAULT_AHEAD);
  lh_prefault_ahead(p, LH_PREFAULT_AHEAD / 2 + mib, room, &ahead);
  CHECK(ahead == LH_PREFAULT_AHEAD / 2 + mib + LH_PREFAULT_AHEAD);
  lh_prefault_ahead(p, room - mib, room, &ahead); /* never past the room */
  CHECK(ahead == room);
  lh_prefault_ahead(p, room, room, &ahead);
  CHECK(ahead == room);
  size_t small = 0;
  lh_prefault_ahead(p, 0, LH_HUGE_MIN - 1, &small); /* a small array: left alone */
  CHECK(small == 0);
  lh_prefault_wait();
  lh_free_huge(p, bytes);
}

static void test_large_growth(void) {
  lh_lane *lane = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&lane, 0, 0, err, sizeof err) == LH_OK);
  enum { N = 200000 };
  int64_t *keys = malloc(N * sizeof(int64_t));
  int64_t *segs = malloc(2 * N * sizeof(int64_t));
  for (int i = 0; i < N; i++) keys[i] = (int64_t)i * 7919;
  CHECK(run1(lane, keys, N, 0, segs) == 0);
  CHECK(run1(lane, keys, N, 0, segs) == 1 && segs[0] == 1 && segs[1] == N);
  CHECK(lh_lane_check(lane, err, sizeof err) == LH_OK);
  free(keys);
  free(segs);
  lh_lane_destroy(lane);
}

/* A lane numbering its keys (LH_LANE_KEY_IDS): each block's number is the key's rank in order of
 * first sight (a naive table of the keys drawn, 0 .. K - 1), through map growth, TTL expiry,
 * compaction and reset; its curves are a plain lane's and its cuts a KEEP_EXPIRED lane's,
 * request by request. */
static void test_key_numbers(int64_t ttl) {
  enum { K = 30000, BATCH = 64, MAXLEN = 40 };
  lh_lane *numbered = NULL, *plain = NULL, *keeping = NULL;
  char err[LH_ERR_LEN];
  CHECK(lh_lane_create(&numbered, ttl, LH_LANE_KEY_IDS, err, sizeof err) == LH_OK);
  CHECK(lh_lane_create(&plain, ttl, 0, err, sizeof err) == LH_OK);
  CHECK(lh_lane_create(&keeping, ttl, LH_LANE_KEEP_EXPIRED | LH_LANE_KEY_IDS, err, sizeof err) == LH_OK);
  uint32_t *number = malloc(K * sizeof(uint32_t)); /* the naive numbering: UINT32_MAX = not seen */
  int64_t *keys = malloc(BATCH * MAXLEN * sizeof(int64_t));
  int64_t *segs[3], seg_offsets[3][BATCH + 1], offsets[BATCH + 1], ts[BATCH], now = 0;
  uint8_t cuts[3][BATCH];
  uint32_t *ids = malloc(BATCH * MAXLEN * sizeof(uint32_t)), next = 0;
  for (int l = 0; l < 3; l++) segs[l] = malloc(2 * BATCH * MAXLEN * sizeof(int64_t));
  CHECK(number != NULL && keys != NULL && ids != NULL && segs[0] && segs[1] && segs[2]);
  if (!(number && keys && ids && segs[0] && segs[1] && segs[2])) return;
  for (size_t k = 0; k < K; k++) number[k] = UINT32_MAX;
  lh_lane *lanes[3] = {numbered, plain, keeping};
  for (int b = 0; b < 400; b++) {
    size_t total = 0;
    offsets[0] = 0;
    for (size_t r = 0; r < BATCH; r++) {
      size_t len = (size_t)(rnd() % MAXLEN);
      uint64_t hot = rnd() % 4; /* a quarter of the requests draw from every key: the map grows */
      for (size_t i = 0; i < len; i++) {
        uint64_t k = hot == 0 ? rnd() % K : rnd() % 500;
        keys[total + i] = (i > 0 && rnd() % 8 == 0) ? keys[total + i - 1] : (int64_t)k;
      }
      total += len;
      offsets[r + 1] = (int64_t)total;
      now += (int64_t)(rnd() % 3);
      ts[r] = now;
    }
    size_t done = 0;
    for (int l = 0; l < 3; l++) {
      CHECK(lh_lane_process_batch(lanes[l], keys, total, offsets, ts, BATCH, segs[l], seg_offsets[l], cuts[l],
                                  l == 1 ? NULL : ids, &done, err, sizeof err) == LH_OK);
      CHECK(done == BATCH);
      CHECK(lh_lane_check(lanes[l], err, sizeof err) == LH_OK);
    }
    for (size_t i = 0; i < total; i++) {
      uint32_t *want = &number[keys[i]];
      if (*want == UINT32_MAX) *want = next++;
      CHECK(ids[i] == *want); /* (the third lane wrote these: the first lane's were the same) */
    }
    CHECK(memcmp(seg_offsets[0], seg_offsets[1], sizeof seg_offsets[0]) == 0);
    CHECK(memcmp(segs[0], segs[1], (size_t)seg_offsets[0][BATCH] * 2 * sizeof(int64_t)) == 0);
    CHECK(memcmp(cuts[0], cuts[2], sizeof cuts[0]) == 0);
    if (b == 200) { /* a reset lane numbers from 0 again */
      for (int l = 0; l < 3; l++) lh_lane_reset(lanes[l]);
      for (size_t k = 0; k < K; k++) number[k] = UINT32_MAX;
      next = 0;
    }
  }
  lh_lane_stats st;
  lh_lane_get_stats(numbered, &st);
  CHECK(st.tracked_keys == next && st.compactions > 0);
  if (ttl > 0) CHECK(st.expired_blocks > 0);
  CHECK(st.map_slots * 16 <= st.memory_bytes);
  for (int l = 0; l < 3; l++) {
    lh_lane_destroy(lanes[l]);
    free(segs[l]);
  }
  free(number);
  free(keys);
  free(ids);
}

/* A lane of several TTL views: each view's facts are those of a lane of its TTL (the randomized
 * comparison lives in tests/core_c/test_core_lane_views.py); the entry points refuse what does
 * not fit the lane. */
static void test_views(void) {
  char err[LH_ERR_LEN];
  const int64_t ttls[2] = {0, 2000}, keys[3] = {1, 2, 3}, offsets[3] = {0, 3, 6}, times[2] = {1000, 3000};
  const int64_t twice[6] = {1, 2, 3, 1, 2, 3};
  lh_lane *lane = NULL, *bad = NULL;
  CHECK(lh_lane_create_views(&lane, ttls, 2, 0, err, sizeof err) == LH_OK && lh_lane_views(lane) == 2);
  int64_t segs[2][12], seg_off[2][3];
  uint8_t cuts[2][2];
  lh_lane_view_out outs[2] = {{segs[0], seg_off[0], cuts[0]}, {segs[1], seg_off[1], cuts[1]}};
  size_t done = 0;
  CHECK(lh_lane_process_views(lane, twice, 6, offsets, times, 2, outs, 2, &done, err, sizeof err) == LH_OK);
  CHECK(done == 2 && seg_off[0][2] == 1 && segs[0][0] == 1 && segs[0][1] == 3 && cuts[0][1] == LH_CUT_NONE);
  CHECK(seg_off[1][2] == 0 && cuts[1][1] == LH_CUT_EXPIRED && cuts[0][0] == LH_CUT_COLD);
  lh_lane_stats st;
  lh_lane_get_view_stats(lane, 1, &st);
  CHECK(st.unique_blocks == 3 && st.expired_blocks == 3);
  lh_lane_get_view_stats(lane, 0, &st);
  CHECK(st.unique_blocks == 3 && st.expired_blocks == 0 && st.requests == 2);
  CHECK(lh_lane_process_batch(lane, keys, 3, offsets, times, 1, segs[0], seg_off[0], NULL, NULL, &done, err,
                              sizeof err) == LH_EINVAL);
  CHECK(lh_lane_process_views(lane, keys, 3, offsets, times, 1, outs, 1, &done, err, sizeof err) == LH_EINVAL);
  CHECK(lh_lane_process_views(lane, keys, 3, offsets, NULL, 1, outs, 2, &done, err, sizeof err) == LH_EINVAL);
  CHECK(lh_lane_check(lane, err, sizeof err) == LH_OK);
  lh_lane_reset(lane);
  CHECK(lh_lane_views(lane) == 2);
  CHECK(lh_lane_process_views(lane, keys, 3, offsets, times, 1, outs, 2, &done, err, sizeof err) == LH_OK);
  lh_lane_destroy(lane);
  CHECK(lh_lane_create_views(&bad, ttls, 0, 0, err, sizeof err) == LH_EINVAL && bad == NULL);
  CHECK(lh_lane_create_views(&bad, ttls, LH_LANE_MAX_VIEWS + 1, 0, err, sizeof err) == LH_EINVAL);
  CHECK(lh_lane_create_views(&bad, ttls, 2, LH_LANE_KEY_IDS, err, sizeof err) == LH_EINVAL && bad == NULL);
  CHECK(lh_lane_create_views(&bad, NULL, 1, 0, err, sizeof err) == LH_EINVAL);
}

/* The summed curve of two requests: segments (1, 2) (4, 1) and (2, 3) have thresholds 1 2 4 and
 * 2 3 4, so the sum rises at 1 (1), 2 (3), 3 (4), 4 (6); a diff too short changes nothing. */
static void test_summed_curve(void) {
  const int64_t segs[] = {1, 2, 4, 1, 2, 3};
  int64_t diff[6] = {0}, caps[6], hits[6];
  CHECK(lh_project_curve_add(diff, 5, segs, 3) == 6);
  for (int i = 0; i < 6; i++) CHECK(diff[i] == 0);
  CHECK(lh_project_curve_add(diff, 6, segs, 2) == 6 && lh_project_curve_add(diff, 6, segs + 4, 1) == 6);
  CHECK(lh_project_curve_add(diff, 6, segs, 0) == 0);
  const int64_t bad[] = {1, 1, 0, 2, 3, -1};
  CHECK(lh_project_curve_add(diff, 6, bad, 2) == SIZE_MAX && lh_project_curve_add(diff, 6, bad + 2, 2) == SIZE_MAX);
  const int64_t want_caps[] = {0, 1, 2, 3, 4}, want_hits[] = {0, 1, 3, 4, 6};
  CHECK(lh_project_curve_points(diff, 6, caps, hits) == 5);
  for (int i = 0; i < 5; i++) CHECK(caps[i] == want_caps[i] && hits[i] == want_hits[i]);
  CHECK(lh_project_curve_points(diff, 1, caps, hits) == 1 && caps[0] == 0 && hits[0] == 0);
}

int main(void) {
  rng_state = 88172645463325252ULL; /* the sequence the randomized comparison has always used */
  test_worked_example();
  test_ttl_boundary_and_counts();
  test_batch_error_index();
  test_normalize_and_hash();
  test_random_against_naive(0, 0, 20000);
  test_random_against_naive(60, 0, 20000);
  test_random_against_naive(60, LH_LANE_KEEP_EXPIRED, 20000);
  test_large_growth();
  test_random_against_naive(0, LH_LANE_KEY_IDS, 20000);
  test_random_against_naive(60, LH_LANE_KEY_IDS, 20000);
  test_key_numbers(0);
  test_key_numbers(25);
  test_advise_huge();
  test_realloc_huge();
  test_keymap_runs();
  test_keymap_growth();
  test_prefault();
  test_views();
  test_summed_curve();
  return finish("core");
}
