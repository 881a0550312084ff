/*
 * mutex.c - the pthread_mutex_* entry points and liblock_execute_mutex.
 * The lp_* calls are the profiler's measurement hooks (shim.h): empty
 * inline functions in the interposer, so its fast paths are unchanged.
 */
#include "shim.h"

LL_EXPORT int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a)
{
    LL_KEEP_ERRNO;
    config_ensure();
    int type = PTHREAD_MUTEX_NORMAL, pshared = PTHREAD_PROCESS_PRIVATE, proto = PTHREAD_PRIO_NONE,
        robust = PTHREAD_MUTEX_STALLED;
    if (a) {
        if (pthread_mutexattr_gettype(a, &type) || pthread_mutexattr_getpshared(a, &pshared) ||
            pthread_mutexattr_getprotocol(a, &proto) || pthread_mutexattr_getrobust(a, &robust))
            return EINVAL;
    }
    if (pshared != PTHREAD_PROCESS_PRIVATE || proto != PTHREAD_PRIO_NONE || robust != PTHREAD_MUTEX_STALLED) {
        int r = R.mutex_init(m, a); /* the kind bits route every later call to glibc */
        if (r == 0 && cfg.wrap)
            shim_to_glibc(SG_MUTEX, pshared != PTHREAD_PROCESS_PRIVATE ? SG_PSHARED
                                    : robust != PTHREAD_MUTEX_STALLED  ? SG_ROBUST
                                    : proto == PTHREAD_PRIO_INHERIT    ? SG_PI
                                                                       : SG_PP);
        return r;
    }
    if (ip_in_setup || !cfg.wrap) {
        /* Inactive, or initialised while we set up another lock (an
         * allocator's mutex): glibc's for life, marked so it is never
         * converted later. */
        int r = R.mutex_init(m, a);
        if (r == 0)
            atomic_store_explicit(mptr(m), IP_GLIBC, memory_order_release);
        if (r == 0 && cfg.wrap && atomic_load_explicit(&shim_cfg_ready, memory_order_relaxed))
            shim_to_glibc(SG_MUTEX, SG_SETUP); /* (not the libraries the configuration itself loads) */
        return r;
    }
    if (type == PTHREAD_MUTEX_ADAPTIVE_NP)
        type = PTHREAD_MUTEX_NORMAL;
    struct shim_site site, *sp = NULL;
    struct shim_algo *alg = &cfg.def;
    ip_in_setup++;
    if (cfg.need_site) {
        shim_site_init(&site);
        alg = shim_algo_for(&site);
        sp = &site;
        if (cfg.debug_sites)
            shim_debug_site(&site, alg);
    }
    struct ip_mutex *w = NULL;
    if (alg)
        w = mutex_new(type, alg);
#ifdef LL_SHIM_PROFILE
    else if (R.mutex_init(m, a) == 0) /* glibc's mutex, measured: glibc mode */
        w = mutex_new(type, NULL);
#endif
    ip_in_setup--;
    if (!w) {
        if (alg)
            return ENOMEM;
        /* this site stays with glibc (interposer), or no memory to measure it */
        int r = alg ? 0 : R.mutex_init(m, a);
        if (r == 0)
            atomic_store_explicit(mptr(m), IP_GLIBC, memory_order_release);
#ifdef LL_SHIM_PROFILE
        if (r == 0)
            shim_to_glibc(SG_MUTEX, SG_NOMEM); /* not measured */
#else
        if (r == 0)
            shim_to_glibc(SG_MUTEX, SG_CONFIG);
#endif
        return r;
    }
    mutex_install(m, w, 1, type, alg, sp);
    return 0;
}

LL_EXPORT int pthread_mutex_destroy(pthread_mutex_t *m)
{
    LL_KEEP_ERRNO;
    config_ensure();
    if (mkind(m) & IP_KIND_PASS)
        return R.mutex_destroy(m);
    uintptr_t p = atomic_load_explicit(mptr(m), memory_order_acquire);
    if (p == 0 || p == IP_GLIBC)
        return R.mutex_destroy(m);
    struct ip_mutex *w = (struct ip_mutex *)p;
    if (atomic_load_explicit(&w->owner, memory_order_relaxed) != 0)
        return EBUSY;
    int r = SHIM_GLIBC(w) ? R.mutex_destroy(m) : liblock_destroy(&w->lock);
    if (r)
        return r; /* EBUSY: held or waited on; left intact */
    reg_del_mutex(w);
    free(w);
    atomic_fetch_sub_explicit(&shim_live_wrappers, 1, memory_order_relaxed);
    lp_set_fast(m, NULL);
    atomic_store_explicit(mptr(m), 0, memory_order_release);
    return 0;
}

/* The uncontended paths: a NORMAL mutex goes straight to the algorithm
 * (node-less: cached function pointer; queue lock: node path), other types
 * through w_lock/w_unlock.  (Measured: routing NORMAL queue locks through
 * the generic w_lock/w_unlock cost ~10 ns more per pair.) */
static inline __attribute__((always_inline)) int lock_at(pthread_mutex_t *m, void *ra)
{
    struct lp_tok t;
    int r;
#ifdef LL_SHIM_PROFILE
    uintptr_t d = lp_fast_desc(m);
    if (LL_LIKELY(d & LP_FAST_TAG) && LL_LIKELY(!(mkind(m) & IP_KIND_PASS))) {
        /* a recorded NORMAL mutex on glibc: neither wrapper nor record touched */
        lp_fast_begin(&t, m);
        r = R.mutex_lock(m);
        lp_fast_end(&t, d, m, r, ra);
        return r;
    }
#endif
    struct ip_mutex *w = mutex_fast(m);
    if (LL_LIKELY(w != NULL)) {
#ifdef LL_SHIM_PROFILE
        if (SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL) {
            /* glibc mode, NORMAL: glibc's lock; the wrapper is only read
             * (glibc's own owner field says who holds it: shim.h) */
            lp_lock_begin(&t, w, m);
            r = R.mutex_lock(m);
            lp_lock_end(&t, w, m, r, ra);
            return r;
        }
#endif
        lp_lock_begin(&t, w, m);
        if (LL_LIKELY(w->lockfn)) {
            r = w->lockfn(&w->lock, NULL);
        } else if (w->holds && w->type == PTHREAD_MUTEX_NORMAL && !w->track) {
            r = w_node_acquire(w, 0);
        } else {
            r = w_lock(w);
            lp_lock_end(&t, w, m, r, ra);
            return r;
        }
        if (LL_LIKELY(r == 0))
            atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
        lp_lock_end(&t, w, m, r, ra);
        return r;
    }
    if (LL_UNLIKELY(!atomic_load_explicit(&shim_resolved, memory_order_acquire)) && ip_resolving)
        return 0; /* bootstrap re-entry, see header */
    if (!(w = mutex_resolve(m)))
        return R.mutex_lock(m);
    lp_lock_begin(&t, w, m);
    r = w_lock(w);
    lp_lock_end(&t, w, m, r, ra);
    return r;
}

LL_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) { return lock_at(m, __builtin_return_address(0)); }
int shim_mutex_lock_at(pthread_mutex_t *m, void *ra) { return lock_at(m, ra); }

LL_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
#ifdef LL_SHIM_PROFILE
    uintptr_t d = lp_fast_desc(m);
    if (LL_LIKELY(d & LP_FAST_TAG) && LL_LIKELY(!(mkind(m) & IP_KIND_PASS))) {
        lp_fast_unlock(d, m);
        return R.mutex_unlock(m);
    }
#endif
    struct ip_mutex *w = mutex_fast(m);
    if (LL_LIKELY(w != NULL)) {
        lp_unlock_begin(w, m);
#ifdef LL_SHIM_PROFILE
        if (SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL)
            return R.mutex_unlock(m);
#endif
        if (LL_LIKELY(w->unlockfn)) {
            atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
            return w->unlockfn(&w->lock, NULL);
        }
        if (w->holds && w->type == PTHREAD_MUTEX_NORMAL && !w->track) {
            atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
            return w_node_release(w);
        }
        return w_unlock(w);
    }
    if (LL_UNLIKELY(!atomic_load_explicit(&shim_resolved, memory_order_acquire)) && ip_resolving)
        return 0;
    if (!(w = mutex_resolve(m)))
        return R.mutex_unlock(m);
    lp_unlock_begin(w, m);
    return w_unlock(w);
}

int shim_mutex_trylock_at(pthread_mutex_t *m, void *ra)
{
#ifdef LL_SHIM_PROFILE
    uintptr_t d = lp_fast_desc(m);
    if (LL_LIKELY(d & LP_FAST_TAG) && LL_LIKELY(!(mkind(m) & IP_KIND_PASS))) {
        int r = R.mutex_trylock(m);
        lp_fast_trylock_end(d, m, r, ra);
        return r;
    }
#endif
    struct ip_mutex *w = mutex_fast(m);
#ifdef LL_SHIM_PROFILE
    if (LL_LIKELY(w != NULL) && SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL) {
        /* glibc mode, NORMAL: as in lock_at */
        int r = R.mutex_trylock(m);
        lp_trylock_end(w, m, r, ra);
        return r;
    }
#endif
    if (LL_UNLIKELY(!w)) {
        if (LL_UNLIKELY(!atomic_load_explicit(&shim_resolved, memory_order_acquire)) && ip_resolving)
            return 0;
        if (!(w = mutex_resolve(m)))
            return R.mutex_trylock(m);
    }
    int r = w_trylock(w);
    lp_trylock_end(w, m, r, ra);
    return r;
}

LL_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m) { return shim_mutex_trylock_at(m, __builtin_return_address(0)); }

int shim_mutex_timedlock_at(pthread_mutex_t *m, const struct timespec *abstime, void *ra)
{
    ip_resolve();
    struct ip_mutex *w = mutex_resolve(m);
    if (!w)
        return R.mutex_timedlock(m, abstime);
    struct lp_tok t;
    lp_lock_begin(&t, w, m);
    int r = w_timedlock(w, CLOCK_REALTIME, abstime);
    lp_lock_end(&t, w, m, r, ra);
    return r;
}

LL_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    LL_KEEP_ERRNO;
    return shim_mutex_timedlock_at(m, abstime, __builtin_return_address(0));
}

LL_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
    LL_KEEP_ERRNO;
    ip_resolve();
    struct ip_mutex *w = mutex_resolve(m);
    if (!w)
        return R.mutex_clocklock ? R.mutex_clocklock(m, clk, abstime) : EINVAL;
    if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
        return EINVAL;
    struct lp_tok t;
    lp_lock_begin(&t, w, m);
    int r = w_timedlock(w, clk, abstime);
    lp_lock_end(&t, w, m, r, __builtin_return_address(0));
    return r;
}

/* ---- liblock_execute_mutex (include/liblock.h; what `liblock transform` emits) ----
 * Overrides the weak glibc version in src/core/execute_mutex.c (see there).
 * A NORMAL mutex on a delegating algorithm runs cs through liblock_execute:
 * on the RCL server for rcl, combined for the combining locks.  The
 * trampoline runs inside the critical section on whichever thread executes
 * it and keeps w->owner/count as a lock()/unlock() pair would (I2, I3: only
 * the executing holder writes them), so a pthread_cond_wait with m inside cs
 * and a later pthread_mutex_destroy see the mutex as they expect.  Every
 * other case (glibc's mutex, RECURSIVE/ERRORCHECK types whose owner is the
 * caller, non-delegating algorithms, a cs that may wait on an algorithm
 * whose delegated sections cannot: `_cond` without LIBLOCK_PROP_COND_IN_EXECUTE)
 * is lock, call, unlock on the calling thread through the wrappers above,
 * so it excludes pthread_mutex_lock/unlock of m exactly as they exclude
 * each other. */
struct ip_exec {
    struct ip_mutex *w;
    void *(*cs)(void *);
    void *ctx;
};

static void *ip_exec_tramp(void *a)
{
    struct ip_exec *x = a;
    atomic_store_explicit(&x->w->owner, self_tag(), memory_order_relaxed);
    x->w->count = 1;
    void *r = x->cs(x->ctx);
    atomic_store_explicit(&x->w->owner, 0, memory_order_relaxed);
    return r;
}

static void *ip_execute_mutex(pthread_mutex_t *m, void *(*cs)(void *), void *ctx, int waits)
{
    if (!m || !cs) {
        errno = EINVAL;
        return NULL;
    }
    struct ip_mutex *w = mutex_fast(m);
    if (!w && atomic_load_explicit(&shim_resolved, memory_order_acquire))
        w = mutex_resolve(m);
    if (w && w->api && w->type == PTHREAD_MUTEX_NORMAL &&
        (!waits || (LL_OPS(&w->lock)->props & LIBLOCK_PROP_COND_IN_EXECUTE))) {
        struct ip_exec x = {w, cs, ctx};
        return liblock_execute(&w->lock, ip_exec_tramp, &x); /* NULL + errno if it cannot run */
    }
    int r = pthread_mutex_lock(m);
    if (r) {
        errno = r;
        return NULL;
    }
    void *ret = cs(ctx);
    int saved = errno;
    pthread_mutex_unlock(m);
    errno = saved;
    return ret;
}

LL_EXPORT void *liblock_execute_mutex(pthread_mutex_t *m, void *(*cs)(void *), void *ctx)
{
    return ip_execute_mutex(m, cs, ctx, 0);
}

LL_EXPORT void *liblock_execute_mutex_cond(pthread_mutex_t *m, void *(*cs)(void *), void *ctx)
{
    return ip_execute_mutex(m, cs, ctx, 1);
}


#pragma GCC diagnostic ignored "-Wmissing-attributes"
/* The entry points under the names the shim's other files call (c11.c): a
 * reference to pthread_mutex_* from another object of the preload library
 * would be sent to glibc by the link's --wrap. */
extern __typeof(pthread_mutex_init) shim_mutex_init __attribute__((alias("pthread_mutex_init"), visibility("hidden")));
extern __typeof(pthread_mutex_unlock) shim_mutex_unlock __attribute__((alias("pthread_mutex_unlock"), visibility("hidden")));
extern __typeof(pthread_mutex_destroy) shim_mutex_destroy __attribute__((alias("pthread_mutex_destroy"), visibility("hidden")));
