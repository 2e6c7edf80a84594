/* The reference loop of bench/bench_speed.py: the textbook exact-LRU stack-distance algorithm
 * over one key sequence, written for this benchmark only (it shares nothing with the engine).
 *
 *   ref_stack_distance KEYS.bin
 *
 * KEYS.bin holds little-endian int64 keys, one per block access, in trace order. For access t of
 * key k whose previous access was at p, the stack distance is the number of distinct keys
 * accessed in (p, t): a Fenwick tree over access positions holds 1 at the latest access of every
 * key, so the distance is the tree's sum over (p, t). An open-addressing table (linear probing,
 * power of two, doubled when half full, so sized by the distinct keys as they come) maps a key to
 * its latest position (any int64 key: a slot is empty by its position, -1); the slot of the access
 * a few steps ahead is prefetched. The loop is timed alone (the file is read before); it prints
 * "accesses distinct reuses distance_sum seconds" on one line. */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define AHEAD 8

typedef struct {
  uint64_t key;
  int64_t pos;
} slot_t;

static uint64_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return x;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s KEYS.bin\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  fseek(f, 0, SEEK_SET);
  size_t n = (size_t)bytes / sizeof(uint64_t);
  uint64_t *keys = malloc(n * sizeof(uint64_t) + 1);
  if (!keys || fread(keys, sizeof(uint64_t), n, f) != n) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  fclose(f);

  size_t cap = 1 << 16, mask = cap - 1;
  slot_t *table = malloc(cap * sizeof(slot_t));
  int32_t *tree = calloc(n + 1, sizeof(int32_t)); /* 1-based Fenwick tree over positions */
  if (!table || !tree) {
    fprintf(stderr, "out of memory\n");
    return 1;
  }
  for (size_t i = 0; i < cap; i++) table[i].pos = -1;

  double start = now();
  uint64_t distinct = 0, reuses = 0, distance_sum = 0;
  for (size_t t = 0; t < n; t++) {
    if (t + AHEAD < n) __builtin_prefetch(&table[mix(keys[t + AHEAD]) & mask]);
    uint64_t key = keys[t];
    size_t i = mix(key) & mask;
    while (table[i].pos >= 0 && table[i].key != key) i = (i + 1) & mask;
    if (table[i].pos >= 0) {
      int64_t p = table[i].pos; /* 0-based; the tree is 1-based */
      int64_t sum = 0;          /* prefix(t) - prefix(p + 1): keys last seen in (p, t) */
      for (int64_t j = (int64_t)t; j > 0; j -= j & -j) sum += tree[j];
      for (int64_t j = p + 1; j > 0; j -= j & -j) sum -= tree[j];
      distance_sum += (uint64_t)sum;
      reuses++;
      for (int64_t j = p + 1; j <= (int64_t)n; j += j & -j) tree[j]--;
      table[i].pos = (int64_t)t;
    } else {
      table[i].key = key;
      table[i].pos = (int64_t)t;
      if (2 * ++distinct > cap) { /* half full: double and reinsert */
        size_t old_cap = cap;
        slot_t *old = table;
        cap *= 2;
        mask = cap - 1;
        table = malloc(cap * sizeof(slot_t));
        if (!table) {
          fprintf(stderr, "out of memory\n");
          return 1;
        }
        for (size_t k = 0; k < cap; k++) table[k].pos = -1;
        for (size_t k = 0; k < old_cap; k++) {
          if (old[k].pos < 0) continue;
          size_t h = mix(old[k].key) & mask;
          while (table[h].pos >= 0) h = (h + 1) & mask;
          table[h] = old[k];
        }
        free(old);
      }
    }
    for (int64_t j = (int64_t)t + 1; j <= (int64_t)n; j += j & -j) tree[j]++;
  }
  double seconds = now() - start;
  printf("%zu %llu %llu %llu %.6f\n", n, (unsigned long long)distinct, (unsigned long long)reuses,
         (unsigned long long)distance_sum, seconds);
  free(keys);
  free(table);
  free(tree);
  return 0;
}
