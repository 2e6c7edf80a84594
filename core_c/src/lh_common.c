/* lh_common.c - error reporting helpers. */
#include "lh_common.h"

#include <stdarg.h>
#include <stdio.h>

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
