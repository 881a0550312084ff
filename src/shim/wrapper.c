/*
 * wrapper.c - a pthread_mutex_t's wrapper (struct ip_mutex, shim.h): its
 * set-up (eager at pthread_mutex_init, lazy at first use of a statically
 * initialised mutex), the choice of its algorithm by site (config.c), the
 * per-thread nodes of queue locks, and acquire/release on it with POSIX
 * types (RECURSIVE/ERRORCHECK implemented here on top of the algorithm).
 *
 * With an observer (SHIM_OBSERVED, observer.h: the profiler) a mutex left to glibc still gets a
 * wrapper, with algo == NULL ("glibc mode"): acquire/release call glibc's
 * own functions on the pthread_mutex_t itself (so every type, timed locks
 * and glibc's condition variables keep glibc's exact semantics), and the
 * wrapper only adds the owner/count bookkeeping the measurement needs
 * (owner and count are written by the holder only, as in I2/I3).  glibc
 * does not use the pointer word (__list.__prev) of a non-robust mutex.
 */
#include "shim.h"

void mutex_set_fns(struct ip_mutex *w)
{
    w->track = 0;
    w->lazy = 0;
    if (SHIM_GLIBC(w)) {
        w->api = w->holds = 0;
        w->fast = IP_FAST_NONE;
        w->lockfn = w->unlockfn = w->trylockfn = NULL;
        atomic_store_explicit(&w->bind, 0, memory_order_relaxed);
        return;
    }
    const struct ll_ops *o = LL_OPS(&w->lock);
    /* Delegating algorithms (RCL, combining) are called through their ops
     * with a node kept in the wrapper (the node path below), like the queue
     * locks, and not through the API layer's per-thread hold stack: a hold
     * there belongs to the thread, so a NORMAL mutex could neither be
     * relocked by its owner (EDEADLK instead of a deadlock) nor unlocked by
     * another thread (EPERM), both of which glibc does ("Mutex types" in
     * shim.h).  Their holds are counted for ll_may_run_foreign instead
     * (track).  LIBLOCK_INTERPOSE_API=1 takes every algorithm this way (for
     * testing). */
    w->api = (o->props & LIBLOCK_PROP_DELEGATES) || cfg.force_api;
    atomic_store_explicit(&w->bind, o->bind != NULL, memory_order_relaxed);
    w->holds = w->api || o->node_size > 0;
    w->trylockfn = o->trylock;
    /* Holds a combining lock may ask about (ll_may_run_foreign) are counted
     * in the thread record (shim.h w_track_acquired): a delegating
     * algorithm's, or any under a mixed configuration.  Such a NORMAL mutex
     * with per-hold nodes takes IP_FAST_TRACK (mutex.c), a node-less one
     * the generic path. */
    w->track = cfg.mixed || w->api;
    int normal = w->type == PTHREAD_MUTEX_NORMAL;
    w->fast = !normal                ? IP_FAST_NONE
              : w->track             ? (w->holds ? IP_FAST_TRACK : IP_FAST_NONE)
              : w->holds             ? IP_FAST_NODE
              : o->flags & LL_OPS_GLIBC_STATE ? IP_FAST_GLIBC
                                     : IP_FAST_FN;
    if (w->fast == IP_FAST_GLIBC)
        (void)shim_real_ready(); /* before the wrapper is published: R_INPLACE (shim.h) */
    int fn = w->fast == IP_FAST_FN || w->fast == IP_FAST_NODE || w->fast == IP_FAST_TRACK;
    w->lockfn = fn ? o->lock : NULL;
    w->unlockfn = fn ? o->unlock : NULL;
    w->lazy = cfg.lazy && mutex_lazy_kind(w);
}

/* Lazy engagement (lazy.c) applies to w's kind: NORMAL mutexes (posix in
 * place too: its algorithm is then glibc's lock on the program's mutex),
 * in the interposer only (and not under LIBLOCK_INTERPOSE_API). */
int mutex_lazy_kind(const struct ip_mutex *w)
{
    return !SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL && !SHIM_OBSERVED && !cfg.force_api;
}

/* A wrapper of `type` on algorithm a (NULL: glibc mode, profiler only). */
struct ip_mutex *mutex_new(int type, struct shim_algo *a)
{
    if (a && shim_algo_ready(a))
        return NULL;
    struct ip_mutex *w = ll_alloc_aligned(sizeof *w);
    if (!w)
        return NULL;
    memset(w, 0, sizeof *w);
    if (a && liblock_init(&w->lock, a->ops->name, &a->attr) != 0) {
        free(w);
        return NULL;
    }
    w->algo = a;
    w->type = type;
    mutex_set_fns(w);
    atomic_fetch_add_explicit(&shim_live_wrappers, 1, memory_order_relaxed);
    return w;
}

void mutex_free(struct ip_mutex *w)
{
    if (!SHIM_GLIBC(w))
        liblock_destroy(&w->lock);
    free(w);
    atomic_fetch_sub_explicit(&shim_live_wrappers, 1, memory_order_relaxed);
}

/* For tests: wrappers currently allocated. */
LL_EXPORT long liblock_interpose_debug_wrappers(void) { return atomic_load_explicit(&shim_live_wrappers, memory_order_relaxed); }
/* For tests: the calling thread's count of tracked holds (shim.h
 * w_track_acquired; lazy ones in ll_lazy_held: lazy.c). */
LL_EXPORT long liblock_interpose_debug_held(void)
{
    ll_thread_t *s = ll_self_tls;
    return (long)(s ? s->shim_held : 0) + (long)ll_lazy_held;
}

int kind_to_type(int kind)
{
    switch (kind & IP_KIND_TYPE) {
    case PTHREAD_MUTEX_RECURSIVE:
        return PTHREAD_MUTEX_RECURSIVE;
    case PTHREAD_MUTEX_ERRORCHECK:
        return PTHREAD_MUTEX_ERRORCHECK;
    default:
        return PTHREAD_MUTEX_NORMAL; /* NORMAL (== DEFAULT in glibc) and ADAPTIVE */
    }
}

/* The wrapper of m, setting it up if needed; NULL: glibc handles m. */
struct ip_mutex *mutex_resolve(pthread_mutex_t *m)
{
    LL_KEEP_ERRNO;
    config_ensure();
    if (mkind(m) & IP_KIND_PASS)
        return NULL;
    _Atomic uintptr_t *pw = mptr(m);
    uintptr_t p = atomic_load_explicit(pw, memory_order_acquire);
    if (p > IP_GLIBC)
        return ip_untag(p);
    if (p == IP_GLIBC)
        return NULL;
    if (ip_in_setup) {
        /* An allocator's mutex, met while we set up another one: glibc's for life. */
        uintptr_t z = 0;
        if (atomic_compare_exchange_strong_explicit(pw, &z, IP_GLIBC, memory_order_acq_rel, memory_order_acquire)) {
            if (cfg.wrap && atomic_load_explicit(&shim_cfg_ready, memory_order_relaxed))
                shim_to_glibc(SG_MUTEX, SG_SETUP); /* (not the libraries the configuration itself loads) */
            return NULL;
        }
        if (z == IP_GLIBC)
            return NULL;
        return ip_untag(z);
    }
    if (!cfg.wrap)
        return NULL;
    /* First use of a statically initialised mutex: its site (symbol, else
     * this first use's backtrace) picks its algorithm. */
    struct shim_site site, *sp = NULL;
    struct shim_algo *a = &cfg.def;
    if (cfg.need_site) {
        ip_in_setup++;
        shim_site_static(&site, m);
        a = shim_algo_for(&site);
        if (cfg.debug_sites)
            shim_debug_site(&site, a);
        ip_in_setup--;
        sp = &site;
    }
    if (!SHIM_OBSERVED && !a) {
        uintptr_t z = 0;
        if (atomic_compare_exchange_strong_explicit(pw, &z, IP_GLIBC, memory_order_acq_rel, memory_order_acquire)) {
            shim_to_glibc(SG_MUTEX, SG_CONFIG);
            return NULL;
        }
        if (z == IP_GLIBC)
            return NULL;
        return ip_untag(z);
    }
    /* No wrapper allocated here: install reuses an idle one left at this
     * address first, so a loop that news and deletes std::mutex objects
     * allocates nothing and keeps getting the same address back. */
    return mutex_install(m, NULL, 0, kind_to_type(mkind(m)), a, sp);
}

/* ---- per-thread nodes for queue locks ---------------------------------------------
 * Algorithms with node_size > 0 need a node that stays put from lock() to
 * unlock().  The API layer's hold stack provides one but costs a
 * stack search and bookkeeping per call; here the node is an
 * ll_hold_t taken from the thread's own free list (the API layer's, so it is
 * freed at thread exit like the API's), and the holder's node is remembered
 * in the wrapper: only the holder reads or writes w->hold between its lock
 * and its unlock, so the mutex itself protects that field.  (CLH-style
 * algorithms also use the record's spare node through ll_self_tls, which is
 * therefore set up before every call.)
 * The common case (a thread that holds one queue lock at a time) does not
 * touch the record: one spare node is cached in the thread's shim_tls block
 * (shim.h), taken by lock and put back by unlock (shim_node_lock and
 * shim_node_unlock in mutex.c); these functions are the general case (no
 * spare cached, or one already cached at unlock: nested holds).  The cache
 * is filled only while shim_tls.rec is this thread's record with the exit
 * hook below registered, so a cached node implies ll_self_tls is set (CLH)
 * and is given back to the record's free list at thread exit.  All of it
 * is the thread's own memory: no atomics.
 * A condition wait hands the node to the API layer's hold stack for the
 * duration of liblock_cond_wait (adopt_hold / reclaim_hold below). */
static void shim_tls_exit(ll_thread_t *s, void *arg)
{
    (void)arg;
    struct shim_tls *t = &shim_tls;
    if (t->node) {
        t->node->next_free = s->free_holds;
        s->free_holds = t->node;
        t->node = NULL;
    }
    t->rec = NULL;
}

/* Make s (the calling thread's record) the one shim_tls names, with the
 * exit hook that clears it. */
void shim_tls_attach(ll_thread_t *s)
{
    struct shim_tls *t = &shim_tls;
    if (LL_UNLIKELY(t->rec == NULL)) {
        /* (rec is NULL or this record: the hook clears it before the
         * record is freed) */
        t->rec = s;
        t->hook.fn = shim_tls_exit;
        t->hook.arg = NULL;
        ll_thread_on_exit(s, &t->hook);
    }
}

int w_node_acquire(struct ip_mutex *w, int try)
{
    ll_thread_t *s = ip_get_self();
    if (LL_UNLIKELY(!s))
        return ENOMEM;
    shim_tls_attach(s);
    const struct ll_ops *o = LL_OPS(&w->lock);
    ll_hold_t *h = ll_hold_take(s, o);
    if (LL_UNLIKELY(!h))
        return ENOMEM;
    h->lock = &w->lock;
    int r = try ? o->trylock(&w->lock, h->node) : o->lock(&w->lock, h->node);
    if (LL_UNLIKELY(r)) {
        h->lock = NULL;
        h->next_free = s->free_holds;
        s->free_holds = h;
        return r;
    }
    w->hold = h;
    return 0;
}

int w_node_release(struct ip_mutex *w)
{
    ll_thread_t *s = ip_get_self(); /* before unlock: CLH hands its spare node to ll_self_tls */
    ll_hold_t *h = w->hold;
    if (LL_UNLIKELY(!h))
        return EPERM; /* not locked */
    w->hold = NULL;
    int r = LL_OPS(&w->lock)->unlock(&w->lock, h->node);
    if (LL_UNLIKELY(r)) {
        w->hold = h;
        return r;
    }
    if (LL_LIKELY(s != NULL)) {
        h->lock = NULL;
        if (shim_tls.rec == s && !shim_tls.node) {
            shim_tls.node = h;
            shim_tls.node_ops = h->ops;
        } else {
            h->next_free = s->free_holds;
            s->free_holds = h;
        }
    }
    return 0;
}

/* Put the holder's node on the API hold stack (for liblock_cond_wait). */
int adopt_hold(ll_thread_t *s, struct ip_mutex *w)
{
    ll_hold_t *slot = ll_hold_push(s, &w->lock); /* grows the stack if needed */
    if (!slot)
        return ENOMEM;
    s->held[s->nheld - 1] = w->hold;
    w->hold->lock = &w->lock;
    slot->lock = NULL;
    slot->next_free = s->free_holds;
    s->free_holds = slot;
    return 0;
}

/* Take the (possibly new) node back from the API hold stack after the wait. */
void reclaim_hold(ll_thread_t *s, struct ip_mutex *w)
{
    ll_hold_t *h = ll_hold_find(s, &w->lock);
    if (!h)
        return;
    ll_hold_pop(s, h);          /* pushes h on the free list head ... */
    s->free_holds = h->next_free; /* ... from where we take it back */
    h->lock = &w->lock;
    w->hold = h;
}

/* ---- acquire / release on a wrapper -------------------------------------------- */
/* A lock whose algorithm has a bind hook (struct ll_ops; an RCL lock: its
 * server, which is started then if needed) is bound when the mutex first
 * takes the algorithm's path (its engagement, lazy.c, or its first use
 * under LIBLOCK_LAZY=0), not when it is set up (a process that never
 * contends starts no server: docs/rcl.md).  Bind it here, inside set-up, so that a mutex the server's
 * start meets (an allocator's) stays glibc's as during any set-up (see
 * "Bootstrap"). */
void w_bind(struct ip_mutex *w)
{
    ip_in_setup++;
    LL_OPS(&w->lock)->bind(&w->lock);
    ip_in_setup--;
    atomic_store_explicit(&w->bind, 0, memory_order_relaxed);
}

#define GM(w) ((pthread_mutex_t *)(uintptr_t)(w)->addr)

/* posix in place (shim.h): glibc's own functions on the program's mutex. */
int w_raw_lock(struct ip_mutex *w)
{
    if (SHIM_GLIBC(w) || IP_INPLACE(w))
        return R.mutex_lock(GM(w));
    if (LL_UNLIKELY(atomic_load_explicit(&w->bind, memory_order_relaxed)))
        w_bind(w);
    return w->holds ? w_node_acquire(w, 0) : LL_OPS(&w->lock)->lock(&w->lock, NULL);
}

int w_raw_trylock(struct ip_mutex *w)
{
    if (SHIM_GLIBC(w) || IP_INPLACE(w))
        return R.mutex_trylock(GM(w));
    if (LL_UNLIKELY(atomic_load_explicit(&w->bind, memory_order_relaxed)))
        w_bind(w);
    return w->holds ? w_node_acquire(w, 1) : w->trylockfn(&w->lock, NULL);
}

/* Releases whoever holds w: for a NORMAL mutex that may be another thread
 * than the caller (the node is the holder's, found in w->hold). */
int w_raw_unlock(struct ip_mutex *w)
{
    if (SHIM_GLIBC(w) || IP_INPLACE(w))
        return R.mutex_unlock(GM(w));
    return w->holds ? w_node_release(w) : LL_OPS(&w->lock)->unlock(&w->lock, NULL);
}

/* Install a wrapper for m (the slow path of set-up; serialised by
 * reg_mutex).  fresh: a new wrapper of the right type and algorithm a.
 * init: from pthread_mutex_init (always install) rather than lazy set-up
 * (install only if m is still unset; else use what another thread
 * installed).  fresh may be NULL (lazy set-up): a wrapper of `type` on a is
 * then allocated here only if no idle one can be reused; if that allocation
 * fails, m is left to glibc.  An idle wrapper of the same algorithm left at
 * m's address by a mutex that was never destroyed is reused instead of fresh
 * (see registry.c); an idle one of another algorithm (another site) is
 * freed.  site: where m comes from (NULL when not computed).  Returns the
 * wrapper in use, or NULL if m turned out to be glibc's. */
struct ip_mutex *mutex_install(pthread_mutex_t *m, struct ip_mutex *fresh, int init, int type, struct shim_algo *a,
                               const struct shim_site *site)
{
    _Atomic uintptr_t *pw = mptr(m);
    struct ip_mutex *use = fresh, *drop = NULL;
    ip_in_setup++; /* an allocator met here (table growth, nodes) stays glibc's */
    R.mutex_lock(&reg_mutex);
    uintptr_t p = atomic_load_explicit(pw, memory_order_acquire);
    if (!init && p != 0) {
        use = p == IP_GLIBC ? NULL : ip_untag(p);
    } else {
        long i = tab_index(m);
        struct ip_mutex *old = i >= 0 ? tab_at(i) : NULL;
        int idle = 0;
        if (old && (old != ip_untag(p) || init) && IP_INPLACE(old)) {
            /* posix in place: its lock state was m's own bytes, which now
             * belong to the mutex being set up (shim.h); never try them */
            idle = 1;
        } else if (old && (old != ip_untag(p) || init) && atomic_load_explicit(&old->owner, memory_order_relaxed) == 0 &&
                   !old->hold) {
            /* left behind, or re-initialised without destroy: idle if its
             * lock is free (a lock never bound, as a lazy mutex's that
             * never engaged, was never used: binding it to find out would
             * start an RCL server for nothing) */
            if (atomic_load_explicit(&old->bind, memory_order_relaxed)) {
                idle = 1;
            } else if (w_raw_trylock(old) == 0) {
                w_raw_unlock(old);
                idle = 1;
            }
        }
        if (idle && old->algo != a) {
            /* idle, but made for another site's algorithm: replaced */
            tab_del_at((size_t)i);
            list_del_locked(old);
            drop = old;
            old = NULL;
            idle = 0;
        }
        if (!idle && !fresh) {
            fresh = mutex_new(type, a);
            if (!fresh) {
                /* Out of memory: leave this mutex to glibc rather than fail the call. */
                atomic_store_explicit(pw, IP_GLIBC, memory_order_release);
                shim_to_glibc(SG_MUTEX, SG_NOMEM);
                R.mutex_unlock(&reg_mutex);
                ip_in_setup--;
                if (drop)
                    mutex_free(drop);
                return NULL;
            }
            use = fresh;
        }
        if (idle) {
            old->type = type;
            mutex_set_fns(old);
            atomic_store_explicit(&old->owner, 0, memory_order_relaxed);
            old->count = 0;
            use = old;
        } else {
            if (old)
                tab_del_at((size_t)i); /* busy: left behind (leaked), fresh takes its place */
            fresh->addr = m;
            list_add_locked(fresh);
            tab_put(fresh);
        }
        if (init && !SHIM_GLIBC(use)) {
            memset(m, 0, sizeof *m);
            m->__data.__kind = use->type;
        }
        if (IP_INPLACE(use)) {
            /* posix in place: glibc's kind for posix's policy, as posix.c
             * gives its own mutex; no thread uses m's lock words before the
             * word below is published (shim.h "posix in place") */
            int k = ll_policy(&use->lock) == LIBLOCK_WAIT_SPIN_THEN_PARK ? PTHREAD_MUTEX_ADAPTIVE_NP : PTHREAD_MUTEX_NORMAL;
            int kind = mkind(m);
            if ((kind & IP_KIND_TYPE) != k) /* (usually already so: no write) */
                __atomic_store_n(&m->__data.__kind, (kind & ~IP_KIND_TYPE) | k, __ATOMIC_RELAXED);
        }
        if (use->lazy) /* not engaged yet (lazy.c); no thread uses m before the word below */
            atomic_store_explicit(lzw(m), 0, memory_order_relaxed);
        lp_mutex_new(use, site);
        lp_set_fast(m, use);
        atomic_store_explicit(pw, ip_word(use), memory_order_release);
    }
    R.mutex_unlock(&reg_mutex);
    ip_in_setup--;
    if (fresh && use != fresh)
        mutex_free(fresh);
    if (drop)
        mutex_free(drop);
    return use;
}

/* Glibc mode: glibc does the locking (recursion, error checks, timeouts);
 * the wrapper keeps owner/count of a RECURSIVE or ERRORCHECK mutex so the
 * profiler knows the outermost acquisition and release (a NORMAL one has
 * no relock, and glibc's owner field says who holds it). */
static inline void g_acquired(struct ip_mutex *w)
{
    if (w->type == PTHREAD_MUTEX_NORMAL)
        return; /* glibc's owner field is the record (shim.h) */
    uintptr_t me = self_tag();
    if (atomic_load_explicit(&w->owner, memory_order_relaxed) == me) {
        w->count++; /* recursive relock */
    } else {
        atomic_store_explicit(&w->owner, me, memory_order_relaxed);
        w->count = 1;
    }
}

static int g_lock(struct ip_mutex *w)
{
    int r = R.mutex_lock(GM(w));
    if (r == 0)
        g_acquired(w);
    return r;
}

static int g_trylock(struct ip_mutex *w)
{
    int r = R.mutex_trylock(GM(w));
    if (r == 0)
        g_acquired(w);
    return r;
}

static int g_unlock(struct ip_mutex *w)
{
    if (w->type == PTHREAD_MUTEX_NORMAL)
        return R.mutex_unlock(GM(w));
    uintptr_t me = self_tag();
    if (atomic_load_explicit(&w->owner, memory_order_relaxed) != me)
        return R.mutex_unlock(GM(w)); /* EPERM, or a NORMAL mutex another thread locked */
    unsigned c = w->count;
    if (c <= 1)
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
    w->count = c > 0 ? c - 1 : 0;
    int r = R.mutex_unlock(GM(w));
    if (r) {
        atomic_store_explicit(&w->owner, me, memory_order_relaxed);
        w->count = c;
    }
    return r;
}

/* Relock / owner checks for RECURSIVE and ERRORCHECK.  Returns -1 when the
 * caller must really acquire; otherwise the result of the call. */
int w_owner_check(struct ip_mutex *w, int try)
{
    if (w->type == PTHREAD_MUTEX_NORMAL ||
        atomic_load_explicit(&w->owner, memory_order_relaxed) != self_tag())
        return -1;
    if (w->type == PTHREAD_MUTEX_RECURSIVE) {
        if (w->count == UINT_MAX)
            return EAGAIN;
        w->count++;
        return 0;
    }
    return try ? EBUSY : EDEADLK;
}

int w_lock(struct ip_mutex *w)
{
    if (SHIM_GLIBC(w))
        return g_lock(w);
    int r;
    if (w->lazy && (r = lazy_lock(w)) != IP_LAZY_OFF)
        return r;
    r = w_owner_check(w, 0);
    if (r >= 0)
        return r;
    r = w_raw_lock(w);
    if (r == 0) {
        if (!IP_OWNERLESS(w))
            atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
        w->count = 1;
        w_track_acquired(w);
    }
    return r;
}

int w_trylock(struct ip_mutex *w)
{
    if (SHIM_GLIBC(w))
        return g_trylock(w);
    int r;
    if (w->lazy && (r = lazy_trylock(w)) != IP_LAZY_OFF)
        return r;
    r = w_owner_check(w, 1);
    if (r >= 0)
        return r;
    r = w_raw_trylock(w);
    if (r == 0) {
        if (!IP_OWNERLESS(w))
            atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
        w->count = 1;
        w_track_acquired(w);
    }
    return r;
}

int w_unlock(struct ip_mutex *w)
{
    if (SHIM_GLIBC(w))
        return g_unlock(w);
    int lr;
    if (w->lazy && (lr = lazy_unlock(w)) != IP_LAZY_OFF)
        return lr;
    uintptr_t me = self_tag();
    uintptr_t owner = atomic_load_explicit(&w->owner, memory_order_relaxed);
    if (w->type != PTHREAD_MUTEX_NORMAL) {
        if (owner != me)
            return EPERM;
        if (--w->count > 0)
            return 0;
    }
    /* NORMAL: whoever unlocks releases the holder's hold, as glibc does
     * (shim.h "Mutex types"); the owner field is cleared whoever held it */
    atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
    uint64_t trk = w_track_releasing(w);
    int r = w_raw_unlock(w);
    if (r) {
        atomic_store_explicit(&w->owner, owner, memory_order_relaxed);
        if (owner == me)
            w->count = 1;
        return r;
    }
    if (LL_UNLIKELY(trk == IP_TRK_LAZY)) {
        /* a proxy hold (lazy.c): counted in the lazy locker's ll_lazy_held */
        if (owner == me && ll_lazy_held)
            ll_lazy_held--;
    } else {
        w_track_released(trk);
    }
    return 0;
}


/* ---- timedlock / clocklock (shim.h "timedlock / clocklock") ---- */
static int ts_passed(clockid_t clk, const struct timespec *t, uint64_t *left_ns)
{
    struct timespec now;
    clock_gettime(clk, &now);
    if (now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec))
        return 1;
    *left_ns = (uint64_t)(t->tv_sec - now.tv_sec) * 1000000000ull + (uint64_t)t->tv_nsec - (uint64_t)now.tv_nsec;
    return 0;
}

int w_timedlock(struct ip_mutex *w, clockid_t clk, const struct timespec *abstime)
{
    LL_KEEP_ERRNO;
    if (SHIM_GLIBC(w)) {
        int g = clk == CLOCK_REALTIME ? R.mutex_timedlock(GM(w), abstime)
                : R.mutex_clocklock   ? R.mutex_clocklock(GM(w), clk, abstime)
                                      : EINVAL;
        if (g == 0)
            g_acquired(w);
        return g;
    }
    if (IP_INPLACE(w) && (!w->lazy || w_engaged(w))) /* posix in place: glibc's own timed lock on m (shim.h);
                                                      * lazy, the trylock loop below (lazy.c) */
        return clk == CLOCK_REALTIME ? R.mutex_timedlock(GM(w), abstime)
               : R.mutex_clocklock   ? R.mutex_clocklock(GM(w), clk, abstime)
                                     : EINVAL;
    int r = w_owner_check(w, 0);
    if (r >= 0)
        return r;
    r = w_trylock(w);
    if (r != EBUSY)
        return r;
    if (!ts_valid(abstime))
        return EINVAL;
    uint64_t sleep_ns = 2000;
    for (unsigned i = 0;; i++) {
        uint64_t left;
        if (ts_passed(clk, abstime, &left))
            return ETIMEDOUT;
        if (i < 8) {
            ll_yield();
        } else {
            uint64_t s = sleep_ns < left ? sleep_ns : left;
            struct timespec d = {(time_t)(s / 1000000000ull), (long)(s % 1000000000ull)};
            LL_KEEP_ERRNO; /* EINTR */
            nanosleep(&d, NULL);
            if (sleep_ns < 1000000)
                sleep_ns *= 2;
        }
        r = w_trylock(w);
        if (r != EBUSY)
            return r;
    }
}

