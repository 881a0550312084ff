/*
 * cond.c - pthread_cond_* (shim.h "Condition variables").  A condvar
 * follows its mutex: a wait with a mutex on a liblock algorithm uses the
 * liblock_cond_t (or the generic protocol), a wait with a glibc mutex the
 * real glibc condvar, so mutexes of different algorithms (per-site
 * configuration) and glibc's can share one pthread_cond_t.
 */
#include "shim.h"

static inline _Atomic uintptr_t *cptr(pthread_cond_t *c) { return (_Atomic uintptr_t *)(void *)&c->__data.__wseq; }
static inline int cond_pshared(const pthread_cond_t *c) { return *(const volatile unsigned *)&c->__data.__wrefs & 1; }

static struct ip_cond *cond_new(clockid_t clock)
{
    struct ip_cond *c = ll_alloc_aligned(sizeof *c);
    if (!c)
        return NULL;
    if (liblock_cond_init(&c->lc, &cfg.cattr) != 0) {
        free(c);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, clock);
    R.cond_init(&c->rc, &ca);
    pthread_condattr_destroy(&ca);
    R.mutex_init(&c->im, NULL);
    c->clock = clock;
    return c;
}

static void cond_free(struct ip_cond *c)
{
    liblock_cond_destroy(&c->lc);
    R.cond_destroy(&c->rc);
    R.mutex_destroy(&c->im);
    free(c);
}

/* NULL: glibc's condvar (pshared or interposer inactive) or out of memory (*err). */
static struct ip_cond *cond_resolve(pthread_cond_t *c, int *err)
{
    config_ensure();
    *err = 0;
    if (!cfg.active || cond_pshared(c))
        return NULL;
    _Atomic uintptr_t *pw = cptr(c);
    uintptr_t p = atomic_load_explicit(pw, memory_order_acquire);
    if (p)
        return (struct ip_cond *)p;
    ip_in_setup++;
    struct ip_cond *n = cond_new(CLOCK_REALTIME);
    ip_in_setup--;
    if (!n) {
        *err = ENOMEM;
        return NULL;
    }
    reg_add_cond(n);
    uintptr_t z = 0;
    if (atomic_compare_exchange_strong_explicit(pw, &z, (uintptr_t)n, memory_order_acq_rel, memory_order_acquire))
        return n;
    reg_del_cond(n);
    cond_free(n);
    return (struct ip_cond *)z;
}

LL_EXPORT int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
    LL_KEEP_ERRNO;
    config_ensure();
    int pshared = PTHREAD_PROCESS_PRIVATE;
    clockid_t clock = CLOCK_REALTIME;
    if (a && (pthread_condattr_getpshared(a, &pshared) || pthread_condattr_getclock(a, &clock)))
        return EINVAL;
    if (!cfg.active || pshared != PTHREAD_PROCESS_PRIVATE) {
        int r = R.cond_init(c, a);
        if (r == 0 && cfg.wrap && pshared != PTHREAD_PROCESS_PRIVATE)
            shim_to_glibc(SG_COND, SG_PSHARED);
        return r;
    }
    ip_in_setup++;
    struct ip_cond *n = cond_new(clock);
    ip_in_setup--;
    if (!n)
        return ENOMEM;
    reg_add_cond(n);
    memset(c, 0, sizeof *c);
    atomic_store_explicit(cptr(c), (uintptr_t)n, memory_order_release);
    return 0;
}

LL_EXPORT int pthread_cond_destroy(pthread_cond_t *c)
{
    LL_KEEP_ERRNO;
    config_ensure();
    if (!cfg.active || cond_pshared(c))
        return R.cond_destroy(c);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0;
    struct ip_cond *n = (struct ip_cond *)p;
    int r = liblock_cond_destroy(&n->lc);
    if (r)
        return r; /* EBUSY: waiters remain; nothing changed */
    R.cond_destroy(&n->rc);
    R.mutex_destroy(&n->im);
    reg_del_cond(n);
    free(n);
    atomic_store_explicit(cptr(c), 0, memory_order_release);
    return 0;
}

LL_EXPORT int pthread_cond_signal(pthread_cond_t *c)
{
    LL_KEEP_ERRNO;
    config_ensure();
    if (!cfg.active || cond_pshared(c))
        return R.cond_signal(c);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0; /* nobody has ever waited here */
    struct ip_cond *n = (struct ip_cond *)p;
    if (atomic_load_explicit(&n->used_lc, memory_order_acquire))
        liblock_cond_signal(&n->lc);
    if (atomic_load_explicit(&n->used_rc, memory_order_acquire)) {
        R.mutex_lock(&n->im);
        R.cond_signal(&n->rc);
        R.mutex_unlock(&n->im);
    }
    return 0;
}

LL_EXPORT int pthread_cond_broadcast(pthread_cond_t *c)
{
    LL_KEEP_ERRNO;
    config_ensure();
    if (!cfg.active || cond_pshared(c))
        return R.cond_broadcast(c);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0;
    struct ip_cond *n = (struct ip_cond *)p;
    if (atomic_load_explicit(&n->used_lc, memory_order_acquire))
        liblock_cond_broadcast(&n->lc);
    if (atomic_load_explicit(&n->used_rc, memory_order_acquire)) {
        R.mutex_lock(&n->im);
        R.cond_broadcast(&n->rc);
        R.mutex_unlock(&n->im);
    }
    return 0;
}

/* abstime on clock clk -> the same instant on CLOCK_REALTIME. */
struct timespec to_realtime(clockid_t clk, const struct timespec *t)
{
    if (clk == CLOCK_REALTIME)
        return *t;
    struct timespec now_c, now_r;
    clock_gettime(clk, &now_c);
    clock_gettime(CLOCK_REALTIME, &now_r);
    int64_t d = ((int64_t)t->tv_sec - now_c.tv_sec) * 1000000000ll + (t->tv_nsec - now_c.tv_nsec);
    int64_t r = (int64_t)now_r.tv_sec * 1000000000ll + now_r.tv_nsec + d;
    if (r < 0)
        r = 0;
    struct timespec out = {(time_t)(r / 1000000000ll), (long)(r % 1000000000ll)};
    return out;
}

/* A wait on a real glibc condvar with a glibc mutex m; g: m's wrapper in
 * the profiler's glibc mode (NULL otherwise), whose owner/count are set
 * aside for the wait (another thread holds m meanwhile). */
static int glibc_wait(pthread_cond_t *c, pthread_mutex_t *m, struct ip_mutex *g, int has_clock, clockid_t clk,
                      const struct timespec *abstime)
{
    struct lp_tok t;
    uintptr_t owner = 0;
    unsigned count = 0;
    int normal = g && g->type == PTHREAD_MUTEX_NORMAL; /* no owner of ours: glibc's (shim.h) */
    if (g) {
        owner = atomic_load_explicit(&g->owner, memory_order_relaxed);
        if (normal ? !lp_glibc_mine(m) : owner != self_tag())
            g = NULL; /* not held by us: glibc answers (EPERM or undefined) */
    }
    if (g) {
        lp_cond_begin(&t, g);
        if (!normal) {
            count = g->count;
            atomic_store_explicit(&g->owner, 0, memory_order_relaxed);
        }
    }
    int r = !abstime ? R.cond_wait(c, m) : has_clock ? R.cond_clockwait(c, m, clk, abstime) : R.cond_timedwait(c, m, abstime);
    if (g) {
        if (!normal) {
            atomic_store_explicit(&g->owner, owner, memory_order_relaxed);
            g->count = count;
        }
        lp_cond_end(&t, g, m);
    }
    return r;
}

/* The wait itself.  has_clock: clockwait (clk given) vs timedwait (the
 * condvar's clock); abstime NULL: untimed. */
static int cond_wait_common(pthread_cond_t *c, pthread_mutex_t *m, int has_clock, clockid_t clk,
                            const struct timespec *abstime)
{
    if (has_clock && clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
        return EINVAL;
    int err;
    struct ip_cond *n = cond_resolve(c, &err);
    if (!n) {
        if (err)
            return err;
        struct ip_mutex *g = mutex_resolve(m);
        if (g != NULL && !SHIM_GLIBC(g))
            return EINVAL; /* glibc's condvar with one of our mutexes */
        if (has_clock && abstime && !R.cond_clockwait)
            return EINVAL;
        return glibc_wait(c, m, g, has_clock, clk, abstime);
    }
    if (abstime && !ts_valid(abstime))
        return EINVAL;
    struct ip_mutex *w = mutex_resolve(m);
    if (!w || SHIM_GLIBC(w)) {
        /* glibc's mutex (robust, PI, a site left to glibc ...): wait on the real condvar. */
        atomic_store_explicit(&n->used_rc, 1, memory_order_seq_cst);
        if (abstime && has_clock && clk != n->clock) {
            if (!R.cond_clockwait)
                return EINVAL;
            return glibc_wait(&n->rc, m, w, 1, clk, abstime);
        }
        return glibc_wait(&n->rc, m, w, 0, 0, abstime); /* rc was made with the condvar's clock */
    }
    struct lp_tok t;
    lp_cond_begin(&t, w);
    uintptr_t me = self_tag();
    if (w->type != PTHREAD_MUTEX_NORMAL && atomic_load_explicit(&w->owner, memory_order_relaxed) != me)
        return EPERM;
    unsigned count = w->count;
    clockid_t eff = has_clock ? clk : n->clock;
    int r;
    if ((LL_OPS(&w->lock)->props & LIBLOCK_PROP_COND) && !cfg.generic_cond) {
        atomic_store_explicit(&n->used_lc, 1, memory_order_seq_cst);
        /* liblock_cond_wait releases and retakes the lock through the API
         * hold stack: node algorithms lend it their node, direct-path
         * algorithms a fresh hold. */
        ll_thread_t *self = ip_get_self();
        if (!self)
            return ENOMEM;
        int lent = 1; /* 1: the holder's node lent, 2: a fresh hold pushed, 0: neither */
        if (w->holds && w->hold) {
            if (adopt_hold(self, w))
                return ENOMEM;
        } else if (w->holds && w->api) {
            /* a delegating algorithm's mutex not taken by lock(): held by a
             * delegated critical section (liblock_execute_mutex), or not
             * at all; the algorithm's cond_release tells (rcl: a servicing
             * thread running a section of it may wait; else EPERM) */
            lent = 0;
        } else if (w->holds) {
            return EPERM; /* the mutex is not locked */
        } else if (!ll_hold_push(self, &w->lock)) {
            return ENOMEM;
        } else {
            lent = 2;
        }
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
        if (abstime) {
            struct timespec rt = to_realtime(eff, abstime);
            r = liblock_cond_timedwait(&n->lc, &w->lock, &rt);
        } else {
            r = liblock_cond_wait(&n->lc, &w->lock);
        }
        if (lent == 1) {
            reclaim_hold(self, w);
        } else if (lent == 2) {
            ll_hold_t *h = ll_hold_find(self, &w->lock);
            if (h)
                ll_hold_pop(self, h);
        }
    } else {
        /* Fallback protocol (as src/core/cond.c) for algorithms without
         * LIBLOCK_PROP_COND: inner glibc mutex taken before our lock is
         * released, so a signaller (which takes the inner mutex) cannot
         * slip between our release and our sleep. */
        atomic_store_explicit(&n->used_rc, 1, memory_order_seq_cst);
        R.mutex_lock(&n->im);
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
        r = w_raw_unlock(w);
        if (r) {
            R.mutex_unlock(&n->im);
            if (!IP_OWNERLESS(w))
                atomic_store_explicit(&w->owner, me, memory_order_relaxed);
            return r;
        }
        if (!abstime)
            r = R.cond_wait(&n->rc, &n->im);
        else if (eff == n->clock || !R.cond_clockwait)
            r = R.cond_timedwait(&n->rc, &n->im, eff == n->clock ? abstime : &(struct timespec){0, 0});
        else
            r = R.cond_clockwait(&n->rc, &n->im, eff, abstime);
        R.mutex_unlock(&n->im);
        int r2;
        while ((r2 = w_raw_lock(w)) == ENOMEM)
            ll_yield();
        if (r2)
            r = r2;
        else if (r != ETIMEDOUT)
            r = 0;
    }
    if (!IP_OWNERLESS(w))
        atomic_store_explicit(&w->owner, me, memory_order_relaxed);
    w->count = count;
    lp_cond_end(&t, w, m);
    return r;
}

/* Cancellation: a glibc wait inside the liblock condvar would, if the
 * thread were cancelled there, unwind holding the condvar's inner mutex and
 * without our lock.  So cancellation is disabled during the wait and acted
 * on right after it, with the mutex held again - the state POSIX specifies
 * for cleanup handlers - at the cost that a cancel request does not by
 * itself end the wait (a signal, broadcast or timeout must). */
static int cond_wait_cancel(pthread_cond_t *c, pthread_mutex_t *m, int has_clock, clockid_t clk,
                            const struct timespec *abstime)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    int r = cond_wait_common(c, m, has_clock, clk, abstime);
    pthread_setcancelstate(old, NULL);
    if (old == PTHREAD_CANCEL_ENABLE)
        pthread_testcancel();
    return r;
}

LL_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    LL_KEEP_ERRNO;
    return cond_wait_cancel(c, m, 0, 0, NULL);
}

LL_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
    LL_KEEP_ERRNO;
    return cond_wait_cancel(c, m, 0, 0, abstime);
}

LL_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
    LL_KEEP_ERRNO;
    return cond_wait_cancel(c, m, 1, clk, abstime);
}


#pragma GCC diagnostic ignored "-Wmissing-attributes"
/* Under these names for c11.c (see the end of mutex.c). */
extern __typeof(pthread_cond_init) shim_cond_init __attribute__((alias("pthread_cond_init"), visibility("hidden")));
extern __typeof(pthread_cond_signal) shim_cond_signal __attribute__((alias("pthread_cond_signal"), visibility("hidden")));
extern __typeof(pthread_cond_broadcast) shim_cond_broadcast __attribute__((alias("pthread_cond_broadcast"), visibility("hidden")));
extern __typeof(pthread_cond_destroy) shim_cond_destroy __attribute__((alias("pthread_cond_destroy"), visibility("hidden")));
extern __typeof(pthread_cond_wait) shim_cond_wait __attribute__((alias("pthread_cond_wait"), visibility("hidden")));
extern __typeof(pthread_cond_timedwait) shim_cond_timedwait __attribute__((alias("pthread_cond_timedwait"), visibility("hidden")));
