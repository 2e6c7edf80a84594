/* lh_prefault.c - the background thread that faults pages in ahead of their first write (see
 * lh_prefault.h). */
#define _GNU_SOURCE /* madvise */
#include "lh_prefault.h"

#include <stdint.h>

#include "lh_buf.h"

#if defined(__linux__)
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

#define QUEUE 4                      /* requests waiting at most */
#define STEP ((size_t)2 << 20)       /* populated per call: an unmapped range is noticed soon */
#define PAGE_ALIGN ((uintptr_t)4096) /* whole pages only (a huge page is populated whole) */

typedef struct request {
  uintptr_t lo, hi;
} request;

/* The state, guarded by `lock`. pthread_atfork keeps a fork from copying it half changed: the
 * forking thread holds the lock across fork, and the child starts afresh (no thread, no requests:
 * its parent's thread is not in it). */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, idle = PTHREAD_COND_INITIALIZER;
static request queue[QUEUE];
static unsigned head, waiting;
static int started, busy, unsupported;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
  pthread_mutex_init(&lock, NULL);
  pthread_cond_init(&wake, NULL);
  pthread_cond_init(&idle, NULL);
  head = waiting = 0;
  started = busy = 0; /* (unsupported stays: the same kernel) */
}
static void register_fork_handlers(void) { (void)pthread_atfork(before_fork, after_fork_parent, after_fork_child); }

static void *serve(void *arg) {
  (void)arg;
#if defined(SCHED_IDLE)
  /* Only on a core nothing else wants: the engine's helpers (scanning, planning) keep theirs. */
  struct sched_param idle_param = {0};
  (void)pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle_param);
#endif
  pthread_mutex_lock(&lock);
  for (;;) {
    while (waiting == 0) {
      busy = 0;
      pthread_cond_broadcast(&idle);
      pthread_cond_wait(&wake, &lock);
    }
    busy = 1;
    request r = queue[head];
    head = (head + 1) % QUEUE;
    waiting--;
    pthread_mutex_unlock(&lock);
    int refused = 0;
    for (uintptr_t p = r.lo; p < r.hi && !refused; p += STEP) {
      size_t len = r.hi - p < STEP ? (size_t)(r.hi - p) : STEP;
      if (madvise((void *)p, len, MADV_POPULATE_WRITE) != 0) refused = errno == EINVAL ? 2 : 1;
    }
    pthread_mutex_lock(&lock);
    if (refused == 2) unsupported = 1; /* a kernel without the advice: no more requests */
  }
  return NULL;
}

void lh_prefault(void *p, size_t bytes) {
  uintptr_t lo = ((uintptr_t)p + PAGE_ALIGN - 1) & ~(PAGE_ALIGN - 1);
  uintptr_t hi = ((uintptr_t)p + bytes) & ~(PAGE_ALIGN - 1);
  if (p == NULL || hi <= lo) return;
  (void)pthread_once(&once, register_fork_handlers);
  pthread_mutex_lock(&lock);
  if (!unsupported && waiting < QUEUE) {
    if (!started) {
      pthread_t t;
      pthread_attr_t attr;
      if (pthread_attr_init(&attr) == 0) {
        (void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        (void)pthread_attr_setstacksize(&attr, 64 << 10);
        started = pthread_create(&t, &attr, serve, NULL) == 0;
        (void)pthread_attr_destroy(&attr);
      }
    }
    if (started) {
      queue[(head + waiting) % QUEUE] = (request){lo, hi};
      waiting++;
      pthread_cond_signal(&wake);
    }
  }
  pthread_mutex_unlock(&lock);
}

void lh_prefault_ahead(void *base, size_t used, size_t room, size_t *ahead) {
  if (base == NULL || room < LH_HUGE_MIN || *ahead >= room || used + LH_PREFAULT_AHEAD / 2 <= *ahead) return;
  size_t from = *ahead > used ? *ahead : used;
  size_t to = room - used > LH_PREFAULT_AHEAD ? used + LH_PREFAULT_AHEAD : room;
  if (to > from) lh_prefault((char *)base + from, to - from);
  *ahead = to;
}

void lh_prefault_wait(void) {
  pthread_mutex_lock(&lock);
  while (started && (waiting > 0 || busy)) pthread_cond_wait(&idle, &lock);
  pthread_mutex_unlock(&lock);
}

#else

void lh_prefault(void *p, size_t bytes) { (void)p, (void)bytes; }
void lh_prefault_ahead(void *base, size_t used, size_t room, size_t *ahead) {
  (void)base, (void)used, (void)room, (void)ahead;
}
void lh_prefault_wait(void) {}

#endif
