/* lh_prefault.h - internal: pages faulted in ahead of their first write, off the caller's thread.
 *
 * A page's first write costs a fault and the kernel's zeroing of it; on the virtual machines this
 * project runs on (free page reporting hands idle memory back to the host), a page not touched
 * lately costs 2-3 ms per MiB (0.35-0.54 GB/s). A table that knows where it will grow asks for
 * those pages early, and one background thread (started at the first request; a child of fork
 * starts its own) faults them in while the engine works, on a core the engine leaves idle (it
 * runs under SCHED_IDLE where Linux has it: it never takes a core from another thread).
 *
 * The pages are populated for writing (Linux's MADV_POPULATE_WRITE, 5.14 on): their contents are
 * never changed, so the owner may write them at any time, before, during or after. A range
 * unmapped meanwhile only makes the kernel refuse the rest (and a range mapped again at the same
 * address gets its pages in early: no content changes there either). A hint: a request is
 * dropped when four are already waiting, on a kernel without that advice, when no thread can be
 * started, and off Linux. Not part of the Python-facing API.
 */
#ifndef LH_PREFAULT_H
#define LH_PREFAULT_H

#include <stddef.h>

/* Asks for the whole pages of [p, p + bytes) to be faulted in for writing, in the background. */
void lh_prefault(void *p, size_t bytes);

/* For an array filled in order from its start: `used` of its `room` bytes filled. Asks for the
 * next LH_PREFAULT_AHEAD bytes past the fill (within the room) once fewer than half of them are
 * left ahead of it. *ahead: how far the requests reached (0 for a new array; the array may move,
 * as lh_realloc_huge moves it, with its pages). Arrays of less than LH_HUGE_MIN bytes of room are
 * left alone. */
#define LH_PREFAULT_AHEAD ((size_t)8 << 20)
void lh_prefault_ahead(void *base, size_t used, size_t room, size_t *ahead);

/* Waits until every request made so far has been served or dropped (tests, benchmarks). */
void lh_prefault_wait(void);

#endif
