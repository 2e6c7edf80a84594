/* lh_buf.c - growable arrays, interned strings and the huge-page hint. */
#define _GNU_SOURCE /* madvise, mremap */
#include "lh_buf.h"

#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((uintptr_t)2 << 20)

void lh_advise_huge(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == NULL || bytes < 2 * HUGE_PAGE) return;
  uintptr_t lo = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), hi = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
  if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

#if defined(__linux__) && defined(MADV_HUGEPAGE) && defined(MREMAP_MAYMOVE) && defined(MREMAP_FIXED)
#define OWN_MAPPINGS 1

/* The bytes a mapped block of `bytes` takes: whole 2 MiB pages. */
static size_t mapped_len(size_t bytes) { return (bytes + HUGE_PAGE - 1) & ~(size_t)(HUGE_PAGE - 1); }

/* A fresh read-write mapping of len bytes (a multiple of 2 MiB) at a 2 MiB-aligned address. */
static void *map_aligned(size_t len) {
  size_t span = len + HUGE_PAGE;
  char *r = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED) return NULL;
  char *a = (char *)(((uintptr_t)r + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
  if (a > r) (void)munmap(r, (size_t)(a - r));
  if (r + span > a + len) (void)munmap(a + len, (size_t)(r + span - (a + len)));
  (void)madvise(a, len, MADV_HUGEPAGE);
  return a;
}

/* The mapped block p of old_len bytes grown to len: in place when the addresses after it are
 * free, else its pages moved to a fresh 2 MiB-aligned range. */
static void *remap_aligned(void *p, size_t old_len, size_t len) {
  void *q = mremap(p, old_len, len, 0);
  if (q != MAP_FAILED) return q;
  void *dst = map_aligned(len); /* reserves the range: MREMAP_FIXED replaces it */
  if (dst == NULL) return NULL;
  q = mremap(p, old_len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
  if (q == MAP_FAILED) {
    (void)munmap(dst, len);
    return NULL;
  }
  (void)madvise(q, len, MADV_HUGEPAGE);
  return q;
}
#endif

void *lh_realloc_huge(void *p, size_t old_bytes, size_t keep, size_t bytes) {
#if defined(OWN_MAPPINGS)
  int was_mapped = p != NULL && old_bytes >= LH_HUGE_MIN;
  if (bytes >= LH_HUGE_MIN) {
    if (was_mapped) {
      size_t old_len = mapped_len(old_bytes), len = mapped_len(bytes);
      if (len == old_len) return p;
      if (len < old_len) {
        (void)munmap((char *)p + len, old_len - len);
        return p;
      }
      void *q = remap_aligned(p, old_len, len);
      if (q != NULL) return q;
    }
    void *q = map_aligned(mapped_len(bytes)); /* from malloc's block, or a move that failed */
    if (q == NULL) return NULL;
    if (p != NULL && keep > 0) memcpy(q, p, keep);
    lh_free_huge(p, old_bytes);
    return q;
  }
  if (was_mapped) {
    void *q = malloc(bytes);
    if (q == NULL) return NULL;
    if (keep > 0) memcpy(q, p, keep < bytes ? keep : bytes);
    lh_free_huge(p, old_bytes);
    return q;
  }
#else
  (void)old_bytes, (void)keep;
#endif
  void *q = realloc(p, bytes);
  if (q != NULL) lh_advise_huge(q, bytes);
  return q;
}

void lh_free_huge(void *p, size_t bytes) {
  if (p == NULL) return;
#if defined(OWN_MAPPINGS)
  if (bytes >= LH_HUGE_MIN) {
    (void)munmap(p, mapped_len(bytes));
    return;
  }
#else
  (void)bytes;
#endif
  free(p);
}

int lh_vec_reserve(lh_vec *v, size_t extra, size_t elem) {
  if (v->len + extra <= v->cap) return 0;
  size_t cap = v->cap ? v->cap : 256;
  while (cap < v->len + extra) {
    if (cap > SIZE_MAX / 2 / elem) return -1;
    cap *= 2;
  }
  void *p = realloc(v->data, cap * elem);
  if (p == NULL) return -1;
  v->data = p;
  v->cap = cap;
  return 0;
}

static uint64_t fnv1a(const char *s, size_t n) {
  uint64_t h = UINT64_C(1469598103934665603);
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * UINT64_C(1099511628211);
  return h;
}

void lh_intern_clear(lh_intern *t) {
  t->bytes.len = 0;
  t->offsets.len = 0;
  t->count = 0;
  if (t->index) memset(t->index, 0, t->index_cap * sizeof(int32_t));
  if (t->offsets.cap) LH_VEC_AT(t->offsets, int64_t)[0] = 0;
}

static int rehash(lh_intern *t, size_t cap) {
  int32_t *idx = calloc(cap, sizeof(int32_t));
  if (idx == NULL) return -1;
  const int64_t *off = LH_VEC_AT(t->offsets, int64_t);
  const char *names = LH_VEC_AT(t->bytes, char);
  for (size_t i = 0; i < t->count; i++) {
    size_t h = (size_t)fnv1a(names + off[i], (size_t)(off[i + 1] - off[i])) & (cap - 1);
    while (idx[h]) h = (h + 1) & (cap - 1);
    idx[h] = (int32_t)(i + 1);
  }
  free(t->index);
  t->index = idx;
  t->index_cap = cap;
  return 0;
}

int32_t lh_intern_get(lh_intern *t, const char *s, size_t n) {
  if (t->offsets.len == 0) {
    if (lh_vec_reserve(&t->offsets, 1, sizeof(int64_t))) return -1;
    LH_VEC_AT(t->offsets, int64_t)[0] = 0;
    t->offsets.len = 1;
  }
  if ((t->count + 1) * 2 > t->index_cap && rehash(t, t->index_cap ? t->index_cap * 2 : 16)) return -1;
  const int64_t *off = LH_VEC_AT(t->offsets, int64_t);
  const char *names = LH_VEC_AT(t->bytes, char);
  size_t h = (size_t)fnv1a(s, n) & (t->index_cap - 1);
  while (t->index[h]) {
    size_t i = (size_t)t->index[h] - 1;
    if ((size_t)(off[i + 1] - off[i]) == n && memcmp(names + off[i], s, n) == 0) return (int32_t)i;
    h = (h + 1) & (t->index_cap - 1);
  }
  if (t->count >= INT32_MAX - 1) return -1;
  if (lh_vec_reserve(&t->bytes, n, 1) || lh_vec_reserve(&t->offsets, 1, sizeof(int64_t))) return -1;
  if (n) memcpy(LH_VEC_AT(t->bytes, char) + t->bytes.len, s, n);
  t->bytes.len += n;
  LH_VEC_AT(t->offsets, int64_t)[t->count + 1] = (int64_t)t->bytes.len;
  t->offsets.len++;
  t->index[h] = (int32_t)(t->count + 1);
  return (int32_t)t->count++;
}

void lh_intern_free(lh_intern *t) {
  free(t->bytes.data);
  free(t->offsets.data);
  free(t->index);
  memset(t, 0, sizeof *t);
}
