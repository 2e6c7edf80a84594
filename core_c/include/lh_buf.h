/* lh_buf.h - internal helpers: growable arrays, bitmaps, a table of interned byte strings, and the hint
 * that a big table read at random take huge pages.
 * Not part of the Python-facing API. All functions report allocation failure by returning -1
 * and leave the structure usable. */
#ifndef LH_BUF_H
#define LH_BUF_H

#include <stddef.h>
#include <stdint.h>

typedef struct lh_vec {
  void *data;
  size_t len, cap; /* in elements */
} lh_vec;

#define LH_VEC_AT(v, T) ((T *)(v).data)

/* Ensures room for `extra` more elements of `elem` bytes; 0 or -1. */
int lh_vec_reserve(lh_vec *v, size_t extra, size_t elem);

/* Offers the whole 2 MiB pages inside [p, p + bytes) of a big table read at random (a key map,
 * a bitmap, per-key arrays) to the kernel's transparent huge pages, on Linux and from 4 MiB: its
 * random reads then miss the TLB less, and its first writes fault once per 2 MiB instead of once
 * per 4 KiB. Call it before the new part of the table is first written. A hint: where the kernel
 * declines it, nothing changes. */
void lh_advise_huge(void *p, size_t bytes);

/* Such a table's block. Below LH_HUGE_MIN (4 MiB) it is malloc's; from it, on Linux, it is a
 * mapping of its own, 2 MiB-aligned and advised for huge pages, so that it grows by moving its
 * pages, not by copying them (mremap to a 2 MiB-aligned address: the kernel moves each huge page
 * whole). realloc would not do: glibc moves a big block with mremap to an address that is not
 * 2 MiB-aligned like the old one, and the kernel then splits every huge page of the part moved (a
 * process running the policy simulator ended with a third of its memory in 4 KiB pages, and ran
 * 7-14% slower); copying into a fresh block keeps them but writes, and faults in, the whole table
 * again at each growth: on a VM whose host takes freed memory back, new pages are the slowest
 * memory there is (0.5 GB/s on this machine kind against 7-8 GB/s for pages already in use).
 *
 * A block's size travels with it: every call takes the bytes last asked for it (0 for NULL), as
 * the caller's capacity records them. lh_realloc_huge grows (or shrinks) p from old_bytes to
 * `bytes`, keeping its first `keep` (<= both) bytes: NULL on failure, p untouched, as realloc; a
 * fresh mapping's new part reads as zeros, malloc's may not. lh_free_huge releases it (NULL: a
 * no-op). Never hand such a block to free() or realloc(). */
#define LH_HUGE_MIN ((size_t)4 << 20)
void *lh_realloc_huge(void *p, size_t old_bytes, size_t keep, size_t bytes);
void lh_free_huge(void *p, size_t bytes);

/* Interned strings: names in a byte vector, count + 1 offsets, and an open-addressing index.
 * The index is its own small table, not the engine's key map (lh_keymap.h): its keys are byte
 * strings compared in full (two names may share a 64-bit hash), hashed with FNV-1a. */
typedef struct lh_intern {
  lh_vec bytes;   /* char */
  lh_vec offsets; /* int64_t, count + 1 once used */
  int32_t *index;
  size_t index_cap; /* power of two */
  size_t count;
} lh_intern;

/* Empties the table (keeps memory); offsets[0] = 0 stays readable if ever allocated. */
void lh_intern_clear(lh_intern *t);

/* Index of the string s[0..n) in the table, adding it if new; -1 on allocation failure. */
int32_t lh_intern_get(lh_intern *t, const char *s, size_t n);

void lh_intern_free(lh_intern *t);

/* Bit i of a bitmap of uint64 words, and its rewrite (a bitmap per slot or position). */
static inline int lh_bit(const uint64_t *bits, size_t i) { return (int)(bits[i >> 6] >> (i & 63)) & 1; }
static inline void lh_bit_put(uint64_t *bits, size_t i, int on) {
  bits[i >> 6] = (bits[i >> 6] & ~(UINT64_C(1) << (i & 63))) | ((uint64_t)(on != 0) << (i & 63));
}

#endif
