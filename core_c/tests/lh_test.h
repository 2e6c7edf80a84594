/* lh_test.h - what every C test program shares: CHECK, a deterministic xorshift generator, the
 * mutator of the fuzz loops and the exit verdict. Header-only; each test_*.c includes it once. */
#ifndef LH_TEST_H
#define LH_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                              \
    }                                                                          \
  } while (0)

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;

static inline uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* A copy of seed after 1..max_edits random edits (truncate, overwrite or insert a byte of
 * alphabet; at most 7 insertions), in a heap buffer of exactly *len bytes (at least 1 allocated)
 * so that ASan catches any read past the end. The caller frees it. */
static inline char *mutated(const char *seed, int max_edits, const char *alphabet, size_t *len) {
  size_t n = strlen(seed), room = n + 7, k = strlen(alphabet);
  char *text = malloc(room + 1);
  char *exact = NULL;
  if (text == NULL) return NULL;
  memcpy(text, seed, n);
  int edits = 1 + (int)(rnd() % (uint64_t)max_edits);
  for (int e = 0; e < edits; e++) {
    size_t at = n ? (size_t)(rnd() % n) : 0;
    switch (rnd() % 3) {
      case 0: n = at; break; /* truncate */
      case 1:
        if (n) text[at] = alphabet[rnd() % k];
        break; /* overwrite */
      default: /* insert */
        if (n < room) {
          memmove(text + at + 1, text + at, n - at);
          text[at] = alphabet[rnd() % k];
          n++;
        }
    }
  }
  exact = malloc(n ? n : 1);
  if (exact != NULL) memcpy(exact, text, n);
  free(text);
  *len = n;
  return exact;
}

/* Prints the verdict of a test program; returns its exit status. */
static inline int finish(const char *what) {
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all C %s tests passed\n", what);
  return 0;
}

#endif
