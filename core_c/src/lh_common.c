/* lh_common.c - error reporting helpers; memory advice. */
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE /* madvise and MADV_HUGEPAGE (the build is -std=c99); without them, no advice */
#endif
#include "lh_common.h"

#include <stdarg.h>
#include <stdio.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

#define HUGE_PAGE ((uintptr_t)2 << 20)

void lh_advise_huge(void *p, size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p == NULL || bytes < 2 * HUGE_PAGE) return;
  uintptr_t start = ((uintptr_t)p + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
  uintptr_t end = ((uintptr_t)p + bytes) & ~(HUGE_PAGE - 1);
  if (end > start) (void)madvise((void *)start, end - start, MADV_HUGEPAGE);
#else
  (void)p, (void)bytes;
#endif
}

int lh_fail(char *err, size_t errlen, int status, const char *fmt, ...) {
  if (err != NULL && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return status;
}

const char *lh_status_name(int status) {
  switch (status) {
    case LH_OK: return "LH_OK";
    case LH_ENOMEM: return "LH_ENOMEM";
    case LH_EINVAL: return "LH_EINVAL";
    case LH_ERANGE: return "LH_ERANGE";
    case LH_EPARSE: return "LH_EPARSE";
    default: return "LH_UNKNOWN";
  }
}
