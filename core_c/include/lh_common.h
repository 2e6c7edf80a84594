/* lh_common.h - status codes and error reporting shared by every LiteHit C module.
 *
 * Every fallible function returns one of the LH_* status codes and, on failure, writes a
 * NUL-terminated message into a caller-owned buffer (err, errlen). The library never aborts,
 * exits, asserts or prints: it is loaded into long-lived worker processes.
 */
#ifndef LH_COMMON_H
#define LH_COMMON_H

#include <stddef.h>
#include <stdint.h>

#define LH_OK 0
#define LH_ENOMEM 1 /* an allocation failed; the object is left as it was */
#define LH_EINVAL 2 /* an argument or a request violates the documented contract */
#define LH_ERANGE 3 /* a position, count or number does not fit its representation */
#define LH_EPARSE 4 /* malformed input text (trace row, facts row, number) */
#define LH_STATUS_COUNT 5

#define LH_ERR_LEN 512 /* a comfortable size for error buffers */

/* Writes a printf-style message into err (if err != NULL and errlen > 0) and returns status. */
int lh_fail(char *err, size_t errlen, int status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* The symbolic name of a status code ("LH_ENOMEM", ...); "LH_UNKNOWN" for anything else. */
const char *lh_status_name(int status);

#endif
