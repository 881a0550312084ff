/*
 * c11.c - C11 mtx_* and cnd_*.
 *
 * glibc implements mtx_lock and friends with internal calls to its own
 * pthread functions, so replacing pthread_mutex_* alone would leave every
 * C11 mutex on glibc's lock.  We replace the C11 calls too and route them to
 * the pthread entry points above: in glibc an mtx_t is a pthread_mutex_t
 * and a cnd_t a pthread_cond_t (same size and layout, checked below), so a
 * C11 mutex gets a wrapper exactly like a pthread one, and pass-through
 * mutexes still reach glibc through the same path.  Error codes map to the
 * thrd_* values as C11 (and glibc) define them. */
#include "shim.h"

#include <threads.h>

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is not a pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is not a pthread_cond_t");

static int thrd_result(int e)
{
    switch (e) {
    case 0:
        return thrd_success;
    case EBUSY:
        return thrd_busy;
    case ETIMEDOUT:
        return thrd_timedout;
    case ENOMEM:
        return thrd_nomem;
    default:
        return thrd_error;
    }
}

LL_EXPORT int mtx_init(mtx_t *m, int type)
{
    LL_KEEP_ERRNO;
    if (!m)
        return thrd_error;
    /* As glibc: plain or timed with mtx_recursive is a recursive mutex, any
     * other type (invalid ones included) a plain one. */
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (type == (mtx_plain | mtx_recursive) || type == (mtx_timed | mtx_recursive))
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    shim_c11_init = 1; /* the profiler reports the type as "c11" */
    int e = shim_mutex_init((pthread_mutex_t *)m, &a);
    shim_c11_init = 0;
    pthread_mutexattr_destroy(&a);
    return thrd_result(e);
}

LL_EXPORT int mtx_lock(mtx_t *m) { return thrd_result(shim_mutex_lock_at((pthread_mutex_t *)m, __builtin_return_address(0))); }
LL_EXPORT int mtx_trylock(mtx_t *m) { return thrd_result(shim_mutex_trylock_at((pthread_mutex_t *)m, __builtin_return_address(0))); }
LL_EXPORT int mtx_unlock(mtx_t *m) { return thrd_result(shim_mutex_unlock((pthread_mutex_t *)m)); }

LL_EXPORT int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict t)
{
    LL_KEEP_ERRNO;
    return thrd_result(shim_mutex_timedlock_at((pthread_mutex_t *)m, t, __builtin_return_address(0)));
}

LL_EXPORT void mtx_destroy(mtx_t *m)
{
    LL_KEEP_ERRNO;
    shim_mutex_destroy((pthread_mutex_t *)m);
}

LL_EXPORT int cnd_init(cnd_t *c)
{
    LL_KEEP_ERRNO;
    return thrd_result(shim_cond_init((pthread_cond_t *)c, NULL));
}
LL_EXPORT int cnd_signal(cnd_t *c)
{
    LL_KEEP_ERRNO;
    return thrd_result(shim_cond_signal((pthread_cond_t *)c));
}
LL_EXPORT int cnd_broadcast(cnd_t *c)
{
    LL_KEEP_ERRNO;
    return thrd_result(shim_cond_broadcast((pthread_cond_t *)c));
}
LL_EXPORT void cnd_destroy(cnd_t *c)
{
    LL_KEEP_ERRNO;
    shim_cond_destroy((pthread_cond_t *)c);
}

LL_EXPORT int cnd_wait(cnd_t *c, mtx_t *m)
{
    LL_KEEP_ERRNO;
    return thrd_result(shim_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

LL_EXPORT int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict t)
{
    LL_KEEP_ERRNO;
    return thrd_result(shim_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, t));
}

