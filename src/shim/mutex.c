/*
 * mutex.c - the pthread_mutex_* entry points and liblock_execute_mutex.
 * The lp_* calls are the profiler's measurement hooks (shim.h): empty
 * inline functions in the interposer, so its fast paths are unchanged.
 */
#include "shim.h"

#include <sys/single_threaded.h>

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
    else if (SHIM_OBSERVED && R.mutex_init(m, a) == 0) /* glibc's mutex, observed: glibc mode */
        w = mutex_new(type, NULL);
    ip_in_setup--;
    if (!w) {
        if (alg)
            return ENOMEM;
        /* this site stays with glibc (interposer), or no memory to measure it */
        int r = alg ? 0 : R.mutex_init(m, a);
        if (r == 0)
            atomic_store_explicit(mptr(m), IP_GLIBC, memory_order_release);
        if (r == 0) /* observed: no memory to observe it; else: the configuration's */
            shim_to_glibc(SG_MUTEX, SHIM_OBSERVED ? SG_NOMEM : SG_CONFIG);
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
    struct ip_mutex *w = ip_untag(p);
    if (atomic_load_explicit(&w->owner, memory_order_relaxed) != 0)
        return EBUSY;
    if (w->lazy && atomic_load_explicit(lzw(m), memory_order_relaxed) > IP_LAZY_ENGAGED)
        return EBUSY; /* held lazily (lazy.c) */
    /* posix in place (shim.h): glibc's destroy says whether m is in use
     * (EBUSY, m intact) and marks it destroyed as it does without us; the
     * algorithm's state, unused while in place, is then freed */
    int r = SHIM_GLIBC(w) || IP_INPLACE(w) ? R.mutex_destroy(m) : 0;
    if (r == 0 && !SHIM_GLIBC(w))
        r = liblock_destroy(&w->lock);
    if (r)
        return r; /* EBUSY: held or waited on; left intact */
    int lazy = w->lazy;
    reg_del_mutex(w);
    free(w);
    atomic_fetch_sub_explicit(&shim_live_wrappers, 1, memory_order_relaxed);
    lp_set_fast(m, NULL);
    if (lazy) /* not held (checked above) and no thread may use m now (POSIX); the release store below orders it */
        atomic_store_explicit(lzw(m), 0, memory_order_relaxed);
    atomic_store_explicit(mptr(m), 0, memory_order_release);
    return 0;
}

/* The uncontended paths.  A NORMAL mutex goes straight to its algorithm,
 * by w->fast (mutex_set_fns):
 *  - IP_FAST_FN: node-less algorithm, through the function cached in the
 *    wrapper's first line;
 *  - IP_FAST_GLIBC: the posix algorithm: glibc's lock and unlock on the
 *    program's own mutex (shim.h "posix in place"); in the profiler, on
 *    the glibc mutex inside the algorithm's state;
 *  - IP_FAST_NODE: queue lock, with the node cached in the thread's
 *    shim_tls block (wrapper.c, "per-thread nodes"); the record's free
 *    list only when none is cached;
 *  - IP_FAST_TRACK: a tracked one with nodes: IP_FAST_NODE's path plus
 *    the hold count (below).
 * Other types go through w_lock/w_unlock.  The owner word is written by
 * the holder only (I2): after the acquire, before the release.  One
 * thread-local variable per call at most (shim_tls, for the node; the
 * owner tag is the thread pointer, shim.h self_tag).
 * In the interposer each kind is its own small function, entered from
 * pthread_mutex_lock/unlock by a tail call chosen from the tag of the
 * pointer word (shim.h); lock_at/unlock_at are the general path, and the
 * profiler's only path (with its hooks). */
static inline __attribute__((always_inline)) int fn_lock(struct ip_mutex *w)
{
    int r = w->lockfn(&w->lock, NULL);
    if (LL_LIKELY(r == 0))
        atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
    return r;
}

static inline __attribute__((always_inline)) int fn_unlock(struct ip_mutex *w)
{
    atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
    return w->unlockfn(&w->lock, NULL);
}

static inline __attribute__((always_inline)) int node_lock(struct ip_mutex *w)
{
    struct shim_tls *t = &shim_tls;
    ll_hold_t *h = t->node;
    int r;
    if (LL_UNLIKELY(!h || t->node_ops != w->lock._ops)) {
        r = w_node_acquire(w, 0);
    } else {
        t->node = NULL;
        r = w->lockfn(&w->lock, h->node);
        if (LL_UNLIKELY(r))
            t->node = h;
        else
            w->hold = h; /* the holder's node: read by whichever thread unlocks */
    }
    if (LL_LIKELY(r == 0))
        atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
    return r;
}

static inline __attribute__((always_inline)) int node_unlock(struct ip_mutex *w)
{
    struct shim_tls *t = &shim_tls;
    ll_hold_t *h = w->hold;
    atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
    /* the general case: not locked, a node already cached (nested holds),
     * or a thread without a record yet (CLH needs ll_self_tls set) */
    if (LL_UNLIKELY(!h || t->node || !t->rec))
        return w_node_release(w);
    w->hold = NULL;
    int r = w->unlockfn(&w->lock, h->node);
    if (LL_UNLIKELY(r)) {
        w->hold = h;
        return r;
    }
    t->node = h;
    t->node_ops = w->lock._ops;
    return 0;
}

/* IP_FAST_TRACK: a tracked NORMAL mutex with per-hold nodes (a
 * delegating algorithm's, or a queue lock's under a mixed configuration):
 * what w_lock/w_unlock do for it, inline.  Lock: the rcl bind check, the
 * algorithm's lock with the node cached in shim_tls, the holder's node in
 * w->hold, the owner and count, then the hold counted in the thread record
 * (shim.h w_track_acquired).  Unlock, in w_unlock's order: the owner
 * cleared, trk read while the lock is still held (after the release a new
 * holder may write it), the release, then the count decremented only if it
 * is this thread's (another thread may unlock a NORMAL mutex).  Anything
 * else - not bound yet, no cached node (nested holds, first use), a node
 * already cached at unlock, no record - takes w_lock/w_unlock.
 * A cached node implies shim_tls.rec == ll_self_tls (wrapper.c: rec is set
 * from ll_self() and cleared by the exit hook, which runs while ll_self_tls
 * still names the record), so rec is the record w_track_acquired and
 * w_track_released would use.  Everything here is the caller's own
 * thread-local state or wrapper fields covered by I2/I3: no new ordering. */
static inline __attribute__((always_inline)) int track_lock(struct ip_mutex *w)
{
    struct shim_tls *t = &shim_tls;
    ll_hold_t *h = t->node;
    if (LL_UNLIKELY(!h || t->node_ops != w->lock._ops || atomic_load_explicit(&w->bind, memory_order_relaxed)))
        return w_lock(w);
    t->node = NULL;
    int r = w->lockfn(&w->lock, h->node);
    if (LL_UNLIKELY(r)) {
        t->node = h;
        return r;
    }
    w->hold = h; /* the holder's node: read by whichever thread unlocks */
    atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
    w->count = 1;
    ll_thread_t *s = t->rec;
    s->shim_held++;
    w->trk = s->serial;
    return 0;
}

static inline __attribute__((always_inline)) int track_unlock(struct ip_mutex *w)
{
    struct shim_tls *t = &shim_tls;
    ll_hold_t *h = w->hold;
    if (LL_UNLIKELY(!h || t->node || !t->rec || w->trk == IP_TRK_LAZY))
        return w_unlock(w);
    uintptr_t owner = atomic_load_explicit(&w->owner, memory_order_relaxed);
    atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
    uint64_t trk = w->trk;
    w->hold = NULL;
    int r = w->unlockfn(&w->lock, h->node);
    if (LL_UNLIKELY(r)) {
        w->hold = h;
        atomic_store_explicit(&w->owner, owner, memory_order_relaxed);
        if (owner == self_tag())
            w->count = 1;
        return r;
    }
    t->node = h;
    t->node_ops = w->lock._ops;
    ll_thread_t *s = t->rec;
    if (s->serial == trk && s->shim_held)
        s->shim_held--;
    return 0;
}

/* IP_FAST_GLIBC.  Interposer: posix in place, glibc's own functions on
 * the program's mutex m (shim.h); both are tail calls (IP_OWNERLESS).
 * Profiler: glibc's functions on the posix state's glibc mutex; its lock
 * word (0: free) says whether to count ourselves as a waiter (posix.c, for
 * destroy). */
static inline __attribute__((always_inline)) int glibc_lock(struct ip_mutex *w, pthread_mutex_t *m)
{
    if (IP_INPLACE(w))
        return R_INPLACE.mutex_lock(m);
    pthread_mutex_t *gm = IP_POSIX_MUTEX(w);
    if (LL_LIKELY(__atomic_load_n(&gm->__data.__lock, __ATOMIC_RELAXED) == 0))
        return R.mutex_lock(gm);
    return LL_OPS(&w->lock)->lock(&w->lock, NULL);
}

static inline __attribute__((always_inline)) int glibc_unlock(struct ip_mutex *w, pthread_mutex_t *m)
{
    if (IP_INPLACE(w))
        return R_INPLACE.mutex_unlock(m);
    if (SHIM_OBSERVED) /* (IP_OWNERLESS: without an observer only) */
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
    return R.mutex_unlock(IP_POSIX_MUTEX(w));
}

static inline __attribute__((always_inline)) int lock_at(pthread_mutex_t *m, void *ra)
{
    struct lp_tok t;
    int r;
    uintptr_t d = lp_fast_desc(m);
    if (LL_LIKELY(d & LP_FAST_TAG) && LL_LIKELY(!(mkind(m) & IP_KIND_PASS))) {
        /* an observed NORMAL mutex on glibc: neither wrapper nor record touched */
        lp_fast_begin(&t, m);
        r = R.mutex_lock(m);
        lp_fast_end(&t, d, m, r, ra);
        return r;
    }
    struct ip_mutex *w = mutex_fast(m);
    if (LL_LIKELY(w != NULL)) {
        if (SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL) {
            /* glibc mode, NORMAL: glibc's lock; the wrapper is only read
             * (glibc's own owner field says who holds it: shim.h) */
            lp_lock_begin(&t, w, m);
            r = R.mutex_lock(m);
            lp_lock_end(&t, w, m, r, ra);
            return r;
        }
        lp_lock_begin(&t, w, m);
        switch (w->lazy ? IP_FAST_NONE : w->fast) { /* lazy: w_lock (lazy.c) */
        case IP_FAST_FN:
            r = fn_lock(w);
            break;
        case IP_FAST_GLIBC:
            r = glibc_lock(w, m);
            if (SHIM_OBSERVED && LL_LIKELY(r == 0)) /* (IP_OWNERLESS: without an observer only) */
                atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
            break;
        case IP_FAST_NODE:
            r = node_lock(w);
            break;
        case IP_FAST_TRACK:
            r = track_lock(w);
            break;
        default:
            r = w_lock(w);
            break;
        }
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

static inline __attribute__((always_inline)) int unlock_at(pthread_mutex_t *m)
{
    uintptr_t d = lp_fast_desc(m);
    if (LL_LIKELY(d & LP_FAST_TAG) && LL_LIKELY(!(mkind(m) & IP_KIND_PASS))) {
        lp_fast_unlock(d, m);
        return R.mutex_unlock(m);
    }
    struct ip_mutex *w = mutex_fast(m);
    if (LL_LIKELY(w != NULL)) {
        lp_unlock_begin(w, m);
        if (SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL)
            return R.mutex_unlock(m);
        switch (w->lazy ? IP_FAST_NONE : w->fast) { /* lazy: w_unlock (lazy.c) */
        case IP_FAST_FN:
            return fn_unlock(w);
        case IP_FAST_GLIBC:
            return glibc_unlock(w, m);
        case IP_FAST_NODE:
            return node_unlock(w);
        case IP_FAST_TRACK:
            return track_unlock(w);
        default:
            return w_unlock(w);
        }
    }
    if (LL_UNLIKELY(!atomic_load_explicit(&shim_resolved, memory_order_acquire)) && ip_resolving)
        return 0;
    if (!(w = mutex_resolve(m)))
        return R.mutex_unlock(m);
    lp_unlock_begin(w, m);
    return w_unlock(w);
}

int shim_mutex_lock_at(pthread_mutex_t *m, void *ra) { return lock_at(m, ra); }

#ifndef LL_SHIM_PROFILE
static __attribute__((noinline)) int lock_rest(pthread_mutex_t *m) { return lock_at(m, NULL); }
static __attribute__((noinline)) int unlock_rest(pthread_mutex_t *m) { return unlock_at(m); }
static __attribute__((noinline)) int node_lock_f(struct ip_mutex *w) { return node_lock(w); }
static __attribute__((noinline)) int node_unlock_f(struct ip_mutex *w) { return node_unlock(w); }
static __attribute__((noinline)) int track_lock_f(struct ip_mutex *w) { return track_lock(w); }
static __attribute__((noinline)) int track_unlock_f(struct ip_mutex *w) { return track_unlock(w); }

/* The entry points: the fast path is chosen from the tag of the pointer
 * word (shim.h), loaded with __kind from the mutex's own line; posix in
 * place is then a tail call into glibc on m itself, the others a tail call into a
 * small function of their kind. */
/* posix in place is tested first, on the word alone: a word whose tag is
 * IP_FAST_GLIBC is one we published for an in-place mutex (IP_GLIBC is 1,
 * unset is 0, and glibc writes the word only for robust mutexes, with
 * pointers to 8-aligned list entries), and for any mutex glibc's own
 * function on m is the right call anyway (it is what the pass-through kinds
 * get), so __kind need not be read: one load, the compare, the tail jump.
 * The word is loaded with acquire (shim.h I1). */
/* A lazy mutex (lazy.c) is tested next, also on the word alone (its tags,
 * like IP_FAST_GLIBC's, are no value glibc writes there): the CAS on the
 * lazy word, in the same pthread_mutex_t; the wrapper is not read.
 * While the process has one thread (__libc_single_threaded, which glibc
 * clears in pthread_create before the new thread exists, so that the new
 * thread's start orders every store made before), the lazy lock and unlock
 * are a load and a plain store instead of the CAS, as glibc's own lock
 * then skips its LOCK prefix: no other thread can write the word.  A
 * signal handler that locks the mutex between the load and the store of
 * the code it interrupted would make both take it, where glibc's unlocked
 * cmpxchg would deadlock; mutex calls are not async-signal-safe, and an
 * unlocked cmpxchg here costs a third more than the load and store
 * (docs/interpose.md, "Lazy engagement").
 * The values are the CAS's own (0 and self_tag()), so a word taken that
 * way is released by the CAS once threads exist, and the reverse (a fork
 * child). */
LL_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
    uintptr_t p = atomic_load_explicit(mptr(m), memory_order_acquire), tag = p & IP_TAG_MASK;
    if (tag == IP_FAST_GLIBC) /* posix in place: the wrapper is not read */
        return R_INPLACE.mutex_lock(m);
    if (LL_LIKELY((tag | 1) == IP_FAST_LAZYT)) { /* IP_FAST_LAZY or IP_FAST_LAZYT */
        if (__libc_single_threaded) { /* (above) */
            if (LL_LIKELY(atomic_load_explicit(lzw(m), memory_order_relaxed) == 0)) {
                atomic_store_explicit(lzw(m), self_tag(), memory_order_relaxed);
                ll_lazy_held += tag & 1;
                return 0;
            }
            return lock_rest(m);
        }
        uintptr_t z = 0;
        if (LL_LIKELY(atomic_compare_exchange_strong_explicit(lzw(m), &z, self_tag(), memory_order_acquire,
                                                              memory_order_relaxed))) {
            ll_lazy_held += tag & 1; /* tracked: counted (lazy.c) */
            return 0;
        }
        return lock_rest(m); /* held, or engaged: w_lock */
    }
    if (LL_UNLIKELY(p <= IP_GLIBC || (mkind(m) & IP_KIND_PASS)))
        return lock_rest(m);
    struct ip_mutex *w = ip_untag(p);
    if (LL_LIKELY(tag == IP_FAST_FN))
        return fn_lock(w);
    if (tag == IP_FAST_NODE)
        return node_lock_f(w);
    if (tag == IP_FAST_TRACK)
        return track_lock_f(w);
    return lock_rest(m);
}

LL_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
    uintptr_t p = atomic_load_explicit(mptr(m), memory_order_acquire), tag = p & IP_TAG_MASK;
    if (tag == IP_FAST_GLIBC) /* posix in place */
        return R_INPLACE.mutex_unlock(m);
    if (LL_LIKELY((tag | 1) == IP_FAST_LAZYT)) {
        uintptr_t v = self_tag();
        if (__libc_single_threaded) { /* (above pthread_mutex_lock) */
            if (LL_LIKELY(atomic_load_explicit(lzw(m), memory_order_relaxed) == v)) {
                atomic_store_explicit(lzw(m), 0, memory_order_relaxed);
                ll_lazy_held -= tag & 1;
                return 0;
            }
            return unlock_rest(m);
        }
        if (LL_LIKELY(atomic_compare_exchange_strong_explicit(lzw(m), &v, 0, memory_order_release, memory_order_relaxed))) {
            ll_lazy_held -= tag & 1; /* our own hold: its count back (lazy.c) */
            return 0;
        }
        return unlock_rest(m); /* another thread's hold, or engaged: w_unlock */
    }
    if (LL_UNLIKELY(p <= IP_GLIBC || (mkind(m) & IP_KIND_PASS)))
        return unlock_rest(m);
    struct ip_mutex *w = ip_untag(p);
    if (LL_LIKELY(tag == IP_FAST_FN))
        return fn_unlock(w);
    if (tag == IP_FAST_NODE)
        return node_unlock_f(w);
    if (tag == IP_FAST_TRACK)
        return track_unlock_f(w);
    return unlock_rest(m);
}
#else
LL_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) { return lock_at(m, __builtin_return_address(0)); }
LL_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m) { return unlock_at(m); }
#endif

int shim_mutex_trylock_at(pthread_mutex_t *m, void *ra)
{
    uintptr_t d = lp_fast_desc(m);
    if (LL_LIKELY(d & LP_FAST_TAG) && LL_LIKELY(!(mkind(m) & IP_KIND_PASS))) {
        int r = R.mutex_trylock(m);
        lp_fast_trylock_end(d, m, r, ra);
        return r;
    }
    struct ip_mutex *w = mutex_fast(m);
    if (LL_LIKELY(w != NULL) && SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL) {
        /* glibc mode, NORMAL: as in lock_at */
        int r = R.mutex_trylock(m);
        lp_trylock_end(w, m, r, ra);
        return r;
    }
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
    if (!w && !ip_resolving) /* (not from inside our own dlsym: Bootstrap) */
        w = mutex_resolve(m);
    if (w && w->api && w->type == PTHREAD_MUTEX_NORMAL &&
        (!waits || (LL_OPS(&w->lock)->props & LIBLOCK_PROP_COND_IN_EXECUTE))) {
        if (w->lazy) {
            int r = lazy_engage(w, 0); /* a delegated section engages m (lazy.c) */
            if (r) {
                errno = r;
                return NULL;
            }
        }
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
