/*
 * posix - the glibc mutex behind the liblock API.
 *
 * Source: J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 3.1 (blocking
 * locks): try to set the lock word, otherwise sleep in the kernel (futex)
 * until the holder wakes a waiter.
 *
 * Invariants and orderings are glibc's: pthread_mutex_lock has acquire and
 * pthread_mutex_unlock release semantics (POSIX 4.12 memory
 * synchronisation).  Policies: "park" maps to PTHREAD_MUTEX_NORMAL (block at
 * once), "spin-then-park" to glibc's PTHREAD_MUTEX_ADAPTIVE_NP (a bounded
 * spin before sleeping).  Not FIFO: a releasing thread may take the lock
 * back before a woken waiter runs (barging), which is why it holds up at
 * very high contention and why it can starve.
 * destroy: glibc's mutex does not say whether threads wait on it, so lock()
 * tries first and, if that fails, counts itself in `waiters` around
 * pthread_mutex_lock (contended path only); destroy reports EBUSY when the
 * mutex is held or the count is non-zero.  A thread between its failed try
 * and its increment is not seen (destroy racing with the start of a lock()
 * is undefined, as in POSIX).
 */
#include "internal.h"

struct posix_lock {
    pthread_mutex_t m;
    _Atomic uint32_t waiters; /* threads in a contended lock(): for destroy */
};
/* The profiler's fast path (src/shim/mutex.c; the interposer locks the
 * program's own mutex instead, "posix in place" in src/shim/shim.h) calls
 * glibc's lock and unlock on m directly, found at the start of the state; it calls this
 * file's lock() when m's lock word is not 0, so a thread that finds it
 * held is counted in `waiters` as here (one that loses the race between
 * that read and glibc's CAS is not, like one between the failed try and
 * the increment below). */
_Static_assert(offsetof(struct posix_lock, m) == 0, "the interposer finds m at the start of the state");

static int posix_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK ? PTHREAD_MUTEX_ADAPTIVE_NP
                                                                          : PTHREAD_MUTEX_NORMAL);
    int r = pthread_mutex_init(&LL_STATE(l, struct posix_lock)->m, &ma);
    pthread_mutexattr_destroy(&ma);
    return r;
}

static int posix_destroy(liblock_t *l)
{
    pthread_mutex_t *m = &LL_STATE(l, struct posix_lock)->m;
    /* glibc's destroy does not look at the lock word; try it first so a held
     * lock gives EBUSY and stays intact. */
    if (pthread_mutex_trylock(m) != 0)
        return EBUSY;
    /* Free, but a woken waiter may be about to take it. */
    if (atomic_load_explicit(&LL_STATE(l, struct posix_lock)->waiters, memory_order_acquire)) {
        pthread_mutex_unlock(m);
        return EBUSY;
    }
    pthread_mutex_unlock(m);
    /* glibc's destroy answers EBUSY when its user count is off, which a
     * stray unlock (one too many, tolerated by a normal mutex) leaves
     * behind for good; we have just checked that nobody holds or waits. */
    (void)pthread_mutex_destroy(m);
    return 0;
}

static int posix_lock(liblock_t *l, void *node)
{
    (void)node;
    struct posix_lock *s = LL_STATE(l, struct posix_lock);
    if (LL_LIKELY(pthread_mutex_trylock(&s->m) == 0))
        return 0;
    atomic_fetch_add_explicit(&s->waiters, 1, memory_order_relaxed);
    int r = pthread_mutex_lock(&s->m);
    atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
    return r;
}

static int posix_trylock(liblock_t *l, void *node)
{
    (void)node;
    return pthread_mutex_trylock(&LL_STATE(l, struct posix_lock)->m);
}

static int posix_unlock(liblock_t *l, void *node)
{
    (void)node;
    return pthread_mutex_unlock(&LL_STATE(l, struct posix_lock)->m);
}

const struct ll_ops ll_ops_posix = {
    .name = "posix",
    .description = "glibc pthread mutex (futex-based blocking lock)",
    .source = "Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.1; glibc",
    .props = LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_PARK) | LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_PARK,
    .flags = LL_OPS_GLIBC_STATE,
    .oversubscribed = "waiters sleep in the kernel at once (glibc); a running thread may take the lock before a woken one (barging), so it keeps its throughput",
    .state_size = sizeof(struct posix_lock),
    .node_size = 0,
    .init = posix_init,
    .destroy = posix_destroy,
    .lock = posix_lock,
    .trylock = posix_trylock,
    .unlock = posix_unlock,
};
