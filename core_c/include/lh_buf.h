/* lh_buf.h - internal helpers: growable arrays, a table of interned byte strings, and the hint
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

/* realloc for such a table: grows (or shrinks) p to `bytes`, keeping its first `keep` bytes, and
 * advises the result for huge pages. From 4 MiB it copies into a fresh block instead of letting
 * realloc move the pages: glibc moves a big block with mremap to an address that is not 2 MiB
 * aligned like the old one, and the kernel then splits every huge page of the part moved (a
 * process running the policy simulator, whose arrays grow by doubling, ended with a third of its
 * memory in 4 KiB pages, against a seventh when they are copied, and the simulator ran 7-14%
 * slower). Like a key map's growth, the copy holds the old block and the new one at once. NULL on
 * failure, p untouched, as realloc. */
void *lh_realloc_huge(void *p, size_t keep, size_t bytes);

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

#endif
