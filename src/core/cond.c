/*
 * cond.c - condition variables for any lock (seed 000 section 3.2; LiTL).
 *
 * A liblock condition variable is a POSIX condition variable plus an inner
 * POSIX mutex.  wait(cond, L):
 *   1. take the inner mutex          (while still holding L)
 *   2. release L                     (algorithm hook or the API's unlock)
 *   3. pthread_cond_wait(inner)      (atomically releases the inner mutex)
 *   4. drop the inner mutex
 *   5. take L again
 * signal/broadcast take the inner mutex around pthread_cond_signal/broadcast.
 *
 * No lost wake-up: a signaller that changed the predicate under L can only
 * have done so after step 2; it then needs the inner mutex, which the waiter
 * holds from step 1 until it is asleep in step 3, so the signal finds the
 * waiter on the condition's queue.  No deadlock: nobody waits for L while
 * holding the inner mutex (step 4 precedes step 5).
 *
 * Algorithms whose lock is not held by the calling thread in the ordinary
 * sense (RCL critical sections running on a server thread) supply
 * cond_release/cond_reacquire hooks; algorithms that cannot support waiting
 * at all leave LIBLOCK_PROP_COND unset and get ENOTSUP.
 *
 * Mostly-LIFO condition variables (seed 001 section 6.10): a condattr on
 * which liblock_condattr_setfifo was called selects the explicit-queue kind
 * (_kind = LL_COND_KIND_LIFO), implemented in cond_lifo.c; the functions
 * here check arguments and dispatch on _kind.
 */
#include "../internal.h"
#include "cond_lifo.h"

#include <string.h>

struct posix_cond {
    pthread_cond_t c;
    pthread_mutex_t m;
    unsigned waiters; /* guarded by m; destroy refuses while non-zero */
};
_Static_assert(sizeof(struct posix_cond) <= sizeof(((liblock_cond_t *)0)->_storage), "cond storage too small");

LL_EXPORT int liblock_condattr_init(liblock_condattr_t *attr)
{
    if (!attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->_magic = LL_CONDATTR_MAGIC;
    attr->_kind = 0;
    attr->_fifo_probability = 1.0;
    return 0;
}

LL_EXPORT int liblock_condattr_setfifo(liblock_condattr_t *attr, double p)
{
    if (!attr || attr->_magic != LL_CONDATTR_MAGIC || !(p >= 0.0 && p <= 1.0))
        return EINVAL;
    attr->_fifo_probability = p;
    attr->_kind = LL_COND_KIND_LIFO; /* choosing an order selects the explicit queue (cond_lifo.c) */
    return 0;
}

LL_EXPORT int liblock_cond_init(liblock_cond_t *cond, const void *attrp)
{
    const liblock_condattr_t *attr = attrp;
    if (!cond || (attr && attr->_magic != LL_CONDATTR_MAGIC))
        return EINVAL;
    if (attr && attr->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_init(cond, attr->_fifo_probability);
    struct posix_cond *pc = (struct posix_cond *)cond->_storage;
    pc->waiters = 0;
    int r = pthread_mutex_init(&pc->m, NULL);
    if (r)
        return r;
    r = pthread_cond_init(&pc->c, NULL);
    if (r) {
        pthread_mutex_destroy(&pc->m);
        return r;
    }
    cond->_kind = 0;
    cond->_impl = pc;
    cond->_magic = LL_COND_MAGIC;
    return 0;
}

static int release_outer(liblock_t *l)
{
    const struct ll_ops *o = LL_OPS(l);
    return o->cond_release ? o->cond_release(l) : ll_api_unlock(l);
}

static int reacquire_outer(liblock_t *l)
{
    const struct ll_ops *o = LL_OPS(l);
    int r;
    /* Retaking a lock we released cannot fail for lack of a reason the
     * caller can act on; retry transient ENOMEM rather than return without
     * the lock the caller's code assumes it holds. */
    while ((r = (o->cond_reacquire ? o->cond_reacquire(l) : ll_api_lock(l))) == ENOMEM)
        ll_yield();
    return r;
}

int ll_cond_release_outer(liblock_t *l) { return release_outer(l); }
int ll_cond_reacquire_outer(liblock_t *l) { return reacquire_outer(l); }

static int cond_wait_common(liblock_cond_t *cond, liblock_t *l, const struct timespec *abstime)
{
    if (!cond || cond->_magic != LL_COND_MAGIC || !l || l->_magic != LL_LOCK_MAGIC)
        return EINVAL;
    if (abstime && (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L))
        return EINVAL;
    const struct ll_ops *o = LL_OPS(l);
    if (!(o->props & LIBLOCK_PROP_COND))
        return ENOTSUP;
    if (!o->cond_release) {
        ll_thread_t *self = ll_self_tls;
        if (!self || !ll_hold_find(self, l))
            return EPERM;
    }
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_wait(cond, l, abstime);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    int r = release_outer(l);
    if (r) {
        pthread_mutex_unlock(&pc->m);
        return r;
    }
    pc->waiters++;
    int w = abstime ? pthread_cond_timedwait(&pc->c, &pc->m, abstime) : pthread_cond_wait(&pc->c, &pc->m);
    pc->waiters--;
    pthread_mutex_unlock(&pc->m);
    r = reacquire_outer(l);
    if (r)
        return r;
    return w == ETIMEDOUT ? ETIMEDOUT : 0;
}

LL_EXPORT int liblock_cond_wait(liblock_cond_t *cond, liblock_t *l) { return cond_wait_common(cond, l, NULL); }

LL_EXPORT int liblock_cond_timedwait(liblock_cond_t *cond, liblock_t *l, const struct timespec *abstime)
{
    if (!abstime)
        return EINVAL;
    return cond_wait_common(cond, l, abstime);
}

LL_EXPORT int liblock_cond_signal(liblock_cond_t *cond)
{
    if (!cond || cond->_magic != LL_COND_MAGIC)
        return EINVAL;
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_signal(cond);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    pthread_cond_signal(&pc->c);
    pthread_mutex_unlock(&pc->m);
    return 0;
}

LL_EXPORT int liblock_cond_broadcast(liblock_cond_t *cond)
{
    if (!cond || cond->_magic != LL_COND_MAGIC)
        return EINVAL;
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_broadcast(cond);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    pthread_cond_broadcast(&pc->c);
    pthread_mutex_unlock(&pc->m);
    return 0;
}

LL_EXPORT int liblock_cond_destroy(liblock_cond_t *cond)
{
    if (!cond || cond->_magic != LL_COND_MAGIC)
        return EINVAL;
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_destroy(cond);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    unsigned waiting = pc->waiters;
    pthread_mutex_unlock(&pc->m);
    if (waiting)
        return EBUSY; /* threads still wait: the condition is left intact */
    pthread_cond_destroy(&pc->c);
    pthread_mutex_destroy(&pc->m);
    cond->_magic = 0;
    return 0;
}
