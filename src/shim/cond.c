/*
 * cond.c - pthread_cond_* (shim.h "Condition variables").  A condvar
 * follows its mutex: a wait with a mutex on a liblock algorithm uses the
 * liblock_cond_t (or the generic protocol), a wait with a glibc mutex the
 * real glibc condvar, so mutexes of different algorithms (per-site
 * configuration) and glibc's can share one pthread_cond_t.
 *
 * The generic protocol (algorithms without LIBLOCK_PROP_COND, or
 * LIBLOCK_COND_GENERIC) is src/core/cond.c's: the waiter takes an inner
 * glibc mutex `im` before it releases our lock and sleeps on a glibc
 * condvar with it; signallers take im around pthread_cond_signal, so none
 * slips between the release and the sleep.  A process-shared condvar
 * waited on with one of our (private) mutexes uses the same protocol on
 * the program's own glibc condvar, with an inner mutex from a fixed array
 * (pshared_im, indexed by the condvar's address: a process-shared condvar
 * has no heap object of ours); its signallers in this process take that
 * mutex once such a wait has happened (pshared_mixed).  Signallers in
 * other processes do not, and need not: they cannot hold our private
 * mutex, so nothing orders their signal against our release anyway (with
 * glibc alone the same holds).
 *
 * Cancellation (pthread_cond_wait/timedwait/clockwait are cancellation
 * points).  A pending request is acted on at entry, with the mutex still
 * held.  A request made while the thread sleeps is acted on there: in the
 * queue kinds by src/core/cond_lifo.c's cancellable sleep, in the glibc
 * kind by glibc's wait inside src/core/cond.c, in the generic protocol by
 * glibc's wait here; each clean-up passes on any wake-up the thread got
 * (no signal is consumed: the argument is in those files and, for the
 * glibc condvars, glibc's), leaves the condition's bookkeeping and retakes
 * the program's mutex through its algorithm before the program's cleanup
 * handlers run.  Our own bookkeeping after a wait (owner, recursion count,
 * hold stack) is redone by lc_cancelled / gen_cancelled on that path; for
 * the liblock_cond_t the core calls lc_cancelled through ll_cond_hook_tls
 * (cond_lifo.h), so an ordinary wait pays two thread-local stores for it
 * and no cleanup-handler registration.
 *
 * Destroy right after a broadcast: the woken waiters may not have left our
 * bookkeeping yet; destroy waits for them (the core's destroy for the
 * liblock_cond_t; here, yielding under im, for the generic protocol's
 * gen_waiters, of which gen_unblocked were woken), and returns EBUSY only
 * while a waiter is still blocked (undefined in POSIX; glibc would wait
 * for ever).  glibc's own destroy of rc waits for the woken waiters of
 * waits with glibc mutexes.
 */
#include "shim.h"
#include "core/cond_lifo.h" /* ll_cond_hook_tls, ll_ts_diff_ns */

static inline _Atomic uintptr_t *cptr(pthread_cond_t *c) { return (_Atomic uintptr_t *)(void *)&c->__data.__wseq; }
static inline int cond_pshared(const pthread_cond_t *c) { return *(const volatile unsigned *)&c->__data.__wrefs & 1; }

/* Process-shared condvars waited on with our mutexes (header). */
#define PSHARED_IM 16
static pthread_mutex_t pshared_im[PSHARED_IM] = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER,
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
/* Set (seq_cst) by the first such wait before it takes its inner mutex and
 * releases our lock; a signaller that changed the predicate under that lock
 * took it after the release, so it reads 1 and takes the inner mutex too. */
static _Atomic int pshared_mixed;

static pthread_mutex_t *pshared_mutex(const pthread_cond_t *c)
{
    uintptr_t a = (uintptr_t)c;
    return &pshared_im[(a >> 4 ^ a >> 10) % PSHARED_IM];
}

/* fork child: a pshared_im held by another thread of the parent is free. */
void cond_fork_child(void)
{
    for (int i = 0; i < PSHARED_IM; i++)
        R.mutex_init(&pshared_im[i], NULL);
}

static int pshared_signal(pthread_cond_t *c, int all)
{
    if (!atomic_load_explicit(&pshared_mixed, memory_order_relaxed))
        return all ? R.cond_broadcast(c) : R.cond_signal(c);
    pthread_mutex_t *im = pshared_mutex(c);
    R.mutex_lock(im);
    int r = all ? R.cond_broadcast(c) : R.cond_signal(c);
    R.mutex_unlock(im);
    return r;
}

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
    R.mutex_lock(&n->im);
    while (n->gen_waiters && n->gen_waiters <= n->gen_unblocked) {
        /* every generic-protocol waiter left was woken: let them leave (header) */
        R.mutex_unlock(&n->im);
        ll_yield();
        R.mutex_lock(&n->im);
    }
    unsigned blocked = n->gen_waiters;
    R.mutex_unlock(&n->im);
    if (blocked)
        return EBUSY; /* a waiter is still blocked: nothing changed */
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
        return pshared_signal(c, 0);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0; /* nobody has ever waited here */
    struct ip_cond *n = (struct ip_cond *)p;
    if (atomic_load_explicit(&n->used_lc, memory_order_acquire))
        liblock_cond_signal(&n->lc);
    if (atomic_load_explicit(&n->used_rc, memory_order_acquire)) {
        R.mutex_lock(&n->im);
        R.cond_signal(&n->rc);
        if (n->gen_unblocked < n->gen_waiters)
            n->gen_unblocked++;
        R.mutex_unlock(&n->im);
    }
    return 0;
}

LL_EXPORT int pthread_cond_broadcast(pthread_cond_t *c)
{
    LL_KEEP_ERRNO;
    config_ensure();
    if (!cfg.active || cond_pshared(c))
        return pshared_signal(c, 1);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0;
    struct ip_cond *n = (struct ip_cond *)p;
    if (atomic_load_explicit(&n->used_lc, memory_order_acquire))
        liblock_cond_broadcast(&n->lc);
    if (atomic_load_explicit(&n->used_rc, memory_order_acquire)) {
        R.mutex_lock(&n->im);
        R.cond_broadcast(&n->rc);
        n->gen_unblocked = n->gen_waiters;
        R.mutex_unlock(&n->im);
    }
    return 0;
}

/* abstime on clock clk -> the same instant on CLOCK_REALTIME.  Saturating
 * (ll_ts_diff_ns): a deadline centuries away stays centuries away (about
 * 126 years: never reached), one far back becomes the epoch. */
struct timespec to_realtime(clockid_t clk, const struct timespec *t)
{
    if (clk == CLOCK_REALTIME)
        return *t;
    struct timespec now_c, now_r;
    clock_gettime(clk, &now_c);
    clock_gettime(CLOCK_REALTIME, &now_r);
    int64_t d = ll_ts_diff_ns(t, &now_c);
    int64_t r = (int64_t)now_r.tv_sec * 1000000000ll + now_r.tv_nsec; /* < 2^63 - LL_FAR_NS until about 2130 */
    r = d > 0 && r > INT64_MAX - d ? INT64_MAX : r + d;
    if (r < 0)
        r = 0;
    struct timespec out = {(time_t)(r / 1000000000ll), (long)(r % 1000000000ll)};
    return out;
}

/* A wait on a real glibc condvar with a glibc mutex m; g: m's wrapper in
 * the profiler's glibc mode (NULL otherwise), whose owner/count are set
 * aside for the wait (another thread holds m meanwhile) and restored after
 * it, also when the thread is cancelled there (glibc then retakes m). */
struct glibc_restore {
    struct ip_mutex *g;
    pthread_mutex_t *m;
    struct lp_tok *t;
    uintptr_t owner;
    unsigned count;
    int normal;
};

static void glibc_restore(void *arg)
{
    struct glibc_restore *x = arg;
    if (!x->normal) {
        atomic_store_explicit(&x->g->owner, x->owner, memory_order_relaxed);
        x->g->count = x->count;
    }
    lp_cond_end(x->t, x->g, x->m);
}

static int glibc_timed(pthread_cond_t *c, pthread_mutex_t *m, int has_clock, clockid_t clk, const struct timespec *abstime)
{
    return !abstime ? R.cond_wait(c, m) : has_clock ? R.cond_clockwait(c, m, clk, abstime) : R.cond_timedwait(c, m, abstime);
}

static int glibc_wait(pthread_cond_t *c, pthread_mutex_t *m, struct ip_mutex *g, int has_clock, clockid_t clk,
                      const struct timespec *abstime)
{
    struct lp_tok t;
    struct glibc_restore x = {g, m, &t, 0, 0, g && g->type == PTHREAD_MUTEX_NORMAL}; /* NORMAL: no owner of ours */
    if (g) {
        x.owner = atomic_load_explicit(&g->owner, memory_order_relaxed);
        if (x.normal ? !lp_glibc_mine(m) : x.owner != self_tag())
            g = NULL; /* not held by us: glibc answers (EPERM or undefined) */
    }
    if (!g)
        return glibc_timed(c, m, has_clock, clk, abstime);
    lp_cond_begin(&t, g);
    if (!x.normal) {
        x.count = g->count;
        atomic_store_explicit(&g->owner, 0, memory_order_relaxed);
    }
    int r;
    pthread_cleanup_push(glibc_restore, &x);
    r = glibc_timed(c, m, has_clock, clk, abstime);
    pthread_cleanup_pop(1);
    return r;
}

/* posix in place (shim.h): the liblock_cond_t releases and retakes the
 * program's own mutex through glibc, by way of a lock object made for the
 * wait whose only operations are the condition hooks (cond_release /
 * cond_reacquire: src/core/cond.c calls them instead of the API's unlock
 * and lock, and then needs no hold on the API's stack; having no requeue
 * hooks, it never puts the waiter on a lock queue).  Its state is m.  The
 * ordering is glibc's unlock (release) and lock (acquire), taken inside the
 * condition's protocol exactly where the algorithm's would be. */
static int inplace_release(liblock_t *l) { return R.mutex_unlock((pthread_mutex_t *)l->_state); }
static int inplace_reacquire(liblock_t *l) { return R.mutex_lock((pthread_mutex_t *)l->_state); }
static const struct ll_ops inplace_cond_ops = {
    .name = "glibc-in-place",
    .description = "posix in place: the program's glibc mutex, for a condition wait",
    .source = "glibc",
    .props = LIBLOCK_PROP_COND,
    .cond_release = inplace_release,
    .cond_reacquire = inplace_reacquire,
};

/* After a wait on the liblock_cond_t: the hold of the API layer goes back
 * where our fast path keeps it; then the owner and count are ours again. */
struct lc_after {
    struct ll_cond_hook hook; /* for a cancelled wait (header) */
    struct ip_mutex *w;
    pthread_mutex_t *m;
    ll_thread_t *self;
    struct lp_tok *t;
    uintptr_t me;
    unsigned count;
    uint64_t trk; /* w->trk before the wait (another holder rewrites it meanwhile) */
    int lent; /* 1: the holder's node lent, 2: a fresh hold pushed, 0: neither */
};

static void lc_after_wait(struct lc_after *x)
{
    struct ip_mutex *w = x->w;
    if (x->lent == 1) {
        reclaim_hold(x->self, w);
    } else if (x->lent == 2) {
        ll_hold_t *h = ll_hold_find(x->self, &w->lock);
        if (h)
            ll_hold_pop(x->self, h);
    }
    if (!IP_OWNERLESS(w))
        atomic_store_explicit(&w->owner, x->me, memory_order_relaxed);
    w->count = x->count;
    w->trk = x->trk; /* the hold stays counted where it was (shim.h w_track_acquired) */
    lp_cond_end(x->t, w, x->m);
}

static void lc_cancelled(void *arg) { lc_after_wait(arg); }

/* The generic protocol (header) on the glibc condvar rc with inner mutex
 * im; n: the condvar's object (its waiter counts), NULL for a
 * process-shared condvar. */
struct gen_wait {
    struct ip_mutex *w;
    pthread_mutex_t *m, *im;
    struct ip_cond *n;
    struct lp_tok *t;
    uintptr_t me;
    unsigned count;
    uint64_t trk; /* as in struct lc_after */
};

/* Under im: a generic waiter leaves (consumed: woken by a signal). */
static void gen_leave(struct ip_cond *n, int consumed)
{
    if (!n)
        return;
    n->gen_waiters--;
    if (consumed && n->gen_unblocked)
        n->gen_unblocked--;
    if (n->gen_unblocked > n->gen_waiters)
        n->gen_unblocked = n->gen_waiters;
}

static void gen_relock(struct gen_wait *x)
{
    int r2;
    while ((r2 = w_raw_lock(x->w)) == ENOMEM)
        ll_yield();
    (void)r2; /* cannot fail otherwise: we released it */
    if (!IP_OWNERLESS(x->w))
        atomic_store_explicit(&x->w->owner, x->me, memory_order_relaxed);
    x->w->count = x->count;
    x->w->trk = x->trk;
    lp_cond_end(x->t, x->w, x->m);
}

/* Cancelled in glibc's wait, which has retaken im (and consumed no signal). */
static void gen_cancelled(void *arg)
{
    struct gen_wait *x = arg;
    gen_leave(x->n, 0);
    R.mutex_unlock(x->im);
    gen_relock(x);
}

static int generic_wait(struct gen_wait *x, pthread_cond_t *rc, int has_clock, clockid_t clk,
                        const struct timespec *abstime)
{
    R.mutex_lock(x->im);
    if (x->n)
        x->n->gen_waiters++;
    atomic_store_explicit(&x->w->owner, 0, memory_order_relaxed);
    int r = w_raw_unlock(x->w);
    if (r) {
        gen_leave(x->n, 0);
        R.mutex_unlock(x->im);
        if (!IP_OWNERLESS(x->w))
            atomic_store_explicit(&x->w->owner, x->me, memory_order_relaxed);
        return r;
    }
    pthread_cleanup_push(gen_cancelled, x);
    r = glibc_timed(rc, x->im, has_clock, clk, abstime);
    pthread_cleanup_pop(0);
    gen_leave(x->n, r == 0);
    R.mutex_unlock(x->im);
    gen_relock(x);
    return r == ETIMEDOUT || r == EINVAL ? r : 0;
}

/* The wait itself.  has_clock: clockwait (clk given) vs timedwait (the
 * condvar's clock); abstime NULL: untimed. */
static int cond_wait_common(pthread_cond_t *c, pthread_mutex_t *m, int has_clock, clockid_t clk,
                            const struct timespec *abstime)
{
    if (has_clock && clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
        return EINVAL;
    if (has_clock && abstime && !R.cond_clockwait)
        return EINVAL;
    pthread_testcancel(); /* a cancellation point: a pending request is acted on with the mutex held */
    int err;
    struct ip_cond *n = cond_resolve(c, &err);
    struct ip_mutex *w;
    if (!n) {
        if (err)
            return err;
        w = mutex_resolve(m);
        if (w == NULL || SHIM_GLIBC(w))
            return glibc_wait(c, m, w, has_clock, clk, abstime);
        /* a process-shared condvar (or ours out of reach) with one of our mutexes */
        if (abstime && !ts_valid(abstime))
            return EINVAL;
        int le;
        if (w->lazy && (le = lazy_engage(w, 1)) != 0)
            return le; /* a condition wait engages m (lazy.c); its algorithm could not start */
        struct lp_tok t;
        lp_cond_begin(&t, w);
        uintptr_t me = self_tag();
        if (w->type != PTHREAD_MUTEX_NORMAL && atomic_load_explicit(&w->owner, memory_order_relaxed) != me)
            return EPERM;
        atomic_store_explicit(&pshared_mixed, 1, memory_order_seq_cst); /* before our lock is released (above) */
        struct gen_wait x = {w, m, pshared_mutex(c), NULL, &t, me, w->count, w->trk};
        return generic_wait(&x, c, has_clock, clk, abstime);
    }
    if (abstime && !ts_valid(abstime))
        return EINVAL;
    w = mutex_resolve(m);
    if (!w || SHIM_GLIBC(w)) {
        /* glibc's mutex (robust, PI, a site left to glibc ...): wait on the real condvar. */
        atomic_store_explicit(&n->used_rc, 1, memory_order_seq_cst);
        return glibc_wait(&n->rc, m, w, has_clock && abstime && clk != n->clock, clk, abstime); /* rc has the condvar's clock */
    }
    int le;
    if (w->lazy && (le = lazy_engage(w, 1)) != 0)
        return le; /* a condition wait engages m (lazy.c); its algorithm could not start */
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
        liblock_t *cl = &w->lock, proxy;
        if (IP_INPLACE(w)) {
            proxy = w->lock;  /* (magic and policy) */
            proxy._ops = &inplace_cond_ops;
            proxy._state = m; /* the lock the wait releases and retakes (above) */
            proxy._stats = NULL;
            cl = &proxy;
            lent = 0;
        } else if (w->holds && w->hold) {
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
        struct lc_after x = {{lc_cancelled, NULL}, w, m, self, &t, me, count, w->trk, lent};
        x.hook.arg = &x;
        ll_cond_hook_tls = &x.hook;
        if (abstime) {
            struct timespec rt = to_realtime(eff, abstime);
            r = liblock_cond_timedwait(&n->lc, cl, &rt);
        } else {
            r = liblock_cond_wait(&n->lc, cl);
        }
        ll_cond_hook_tls = NULL;
        lc_after_wait(&x);
        return r;
    }
    atomic_store_explicit(&n->used_rc, 1, memory_order_seq_cst);
    struct gen_wait x = {w, m, &n->im, n, &t, me, count, w->trk};
    return generic_wait(&x, &n->rc, has_clock && abstime && clk != n->clock, clk, abstime);
}

LL_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    LL_KEEP_ERRNO;
    return cond_wait_common(c, m, 0, 0, NULL);
}

LL_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
    LL_KEEP_ERRNO;
    return cond_wait_common(c, m, 0, 0, abstime);
}

LL_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
    LL_KEEP_ERRNO;
    return cond_wait_common(c, m, 1, clk, abstime);
}


#pragma GCC diagnostic ignored "-Wmissing-attributes"
/* Under these names for c11.c (see the end of mutex.c). */
extern __typeof(pthread_cond_init) shim_cond_init __attribute__((alias("pthread_cond_init"), visibility("hidden")));
extern __typeof(pthread_cond_signal) shim_cond_signal __attribute__((alias("pthread_cond_signal"), visibility("hidden")));
extern __typeof(pthread_cond_broadcast) shim_cond_broadcast __attribute__((alias("pthread_cond_broadcast"), visibility("hidden")));
extern __typeof(pthread_cond_destroy) shim_cond_destroy __attribute__((alias("pthread_cond_destroy"), visibility("hidden")));
extern __typeof(pthread_cond_wait) shim_cond_wait __attribute__((alias("pthread_cond_wait"), visibility("hidden")));
extern __typeof(pthread_cond_timedwait) shim_cond_timedwait __attribute__((alias("pthread_cond_timedwait"), visibility("hidden")));
