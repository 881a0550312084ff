/* c11_common.h - thrd_* result names for the C11 programs of tests/posix/. */
#ifndef POSIX_C11_COMMON_H
#define POSIX_C11_COMMON_H
#include "common.h"
#include <threads.h>
static inline const char *tn(int r)
{
    switch (r) {
    case thrd_success: return "thrd_success";
    case thrd_busy: return "thrd_busy";
    case thrd_error: return "thrd_error";
    case thrd_nomem: return "thrd_nomem";
    case thrd_timedout: return "thrd_timedout";
    default: return "?";
    }
}
#define TSHOW(label, expr) printf("%s: %s\n", (label), tn(expr))
static inline int mtx_trylock_fn(void *m) { return mtx_trylock(m); }
static inline int mtx_unlock_fn(void *m) { return mtx_unlock(m); }
#endif
