/*
 * hooks.h - the profiler's measurement hooks on the shim's lock paths: the
 * profiler's implementation of the observer contract of src/shim/observer.h
 * (force-included into every object of the profiler build by the
 * Makefile, with LL_SHIM_PROFILE).
 *
 * What is recorded (docs/profile-runtime.md; the raw dump format is the
 * contract in src/profile/report.c):
 *  - per thread (struct lp_table, mmap'd, reached through one thread-local
 *    pointer): per lock instance, by the instance's id, acquisitions, hold
 *    time and successful trylocks (struct lp_islot); per (lock site, call
 *    site) -- call site = return address of pthread_mutex_lock/trylock/
 *    timedlock or mtx_* -- acquisitions, wait and hold (struct lp_crec);
 *    log2 histograms of wait and hold per lock site; and the stack of
 *    mutexes it holds with their acquisition times.  The report sums the
 *    threads' records;
 *  - per instance (struct lp_inst), the rarer events: contended
 *    acquisitions (the mutex had another owner when asked for) and their
 *    wait, condition waits, recursive relocks, failed trylocks, cache misses
 *    inside critical sections (when the kernel gives a counter).
 *
 * Cost (docs/profile-runtime.md, "Cost"): what a profiled program pays is
 * mostly cache lines, not instructions.  A program with thousands of locks
 * taken by threads on different CPUs (memcached's item and LRU locks) pays
 * a miss for every line an acquisition touches and a transfer between CPUs
 * for every shared line it writes.  An uncontended acquisition of a NORMAL
 * mutex on glibc writes glibc's mutex (as without the profiler) and
 * otherwise only the thread's own records: with a descriptor (below, "the
 * fast path") it reads no wrapper at all; without one it reads lines 1
 * and 2 of the wrapper (shim.h), which stay shared.  A contended one also
 * writes its instance record.
 *
 * No lock of the profiler's own is ever taken on the program's lock path:
 *  P1 An instance record's fields other than try_fail are written only by
 *     the thread that holds the mutex (after its acquisition, before its
 *     release), so the mutex itself orders those writes like any data it
 *     protects; they are relaxed atomic loads and stores (not
 *     read-modify-write) only so that a report written while the program
 *     runs reads them without a data race.
 *  P2 try_fail is counted by threads that do not hold the mutex: relaxed
 *     fetch_add (rare; a successful trylock is counted by its thread, P3).
 *  P3 A thread's table is written only by its thread; the report reads it
 *     with relaxed/acquire loads; records, slots and histograms never move
 *     once made (arrays that grow are published before their new size).
 *  A NORMAL mutex unlocked by a thread that did not lock it (undefined in
 *  POSIX) is not timed: the release is not its holder's.
 *  Instances and sites are made and registered when a mutex is set up
 *  (pthread_mutex_init or first use), under a glibc mutex, never on the
 *  lock path; a wrapper reused for another mutex gets a new instance.
 *
 * Timing: the TSC (rdtsc), converted to ns with a multiplier calibrated at
 * start-up against CLOCK_MONOTONIC.  wait = lock call -> acquisition;
 * hold = acquisition -> the unlock call, minus time blocked in condition
 * waits.
 *
 * Sampled timing (LIBLOCK_PROFILE_TIME_EVERY=N, N > 1; docs/profile-runtime.md,
 * "Cost"): every count stays exact, and so does every wait (an uncontended
 * acquisition waits 0 by definition; a contended one is always timed), but
 * the hold of an uncontended acquisition is timed with probability 1/N,
 * drawn from a per-thread xorshift generator (not every N-th acquisition,
 * which would alias with a program's own period), and then counts N times
 * in the hold sums and the hold histogram (the Horvitz-Thompson estimator:
 * unbiased for every sum).  An untimed acquisition reads no clock at all:
 * on machines where rdtsc waits for earlier instructions as lfence does,
 * the clock reads are most of what profiling costs (bench/timer_cost.c).
 */
#ifndef LL_PROFILE_HOOKS_H
#define LL_PROFILE_HOOKS_H

#define SHIM_OBSERVER 1 /* the hooks of shim/observer.h are defined here */
#include "shim/shim.h"

#include <stdint.h>

#define LP_BUCKETS 40

struct lp_site;

/* One thread's counts of one call site of one lock site (P3). */
struct lp_crec {
    const void *ra;                /* the call site (return address) */
    int site;                      /* the lock site's index */
    uint64_t acq, wait_ns, hold_ns;
    struct lp_hist *h;             /* the thread's histograms of the lock site (NULL: none yet) */
};

/* One thread's histograms of one lock site (all its instances and call
 * sites): per site and thread, so that they stay in the thread's cache
 * however many instances the site has. */
struct lp_hist {
    uint64_t wait[LP_BUCKETS], hold[LP_BUCKETS];
};

/* One thread's counts of one lock instance (P3), by instance id. */
struct lp_islot {
    uint64_t acq, hold_ns, try_ok, unused;
};
#define LP_IPAGE 128               /* slots per page (4 KiB) */

/* A mutex the thread holds (outermost acquisition). */
struct lp_held {
    const pthread_mutex_t *m;
    struct lp_crec *rec;
    struct lp_islot *is;
    uint32_t weight;               /* acquisitions its hold stands for (0: not timed; sampled timing) */
    uint64_t t_acq;                /* cycle count at acquisition (moved later by condition waits) */
    uint64_t miss_acq;             /* cache-miss counter then */
};
#define LP_HELD_MAX 64

/* Everything a thread records (mmap'd; a thread-local pointer). */
struct lp_table {
    struct lp_table *next;         /* every thread's, for the report */
    /* the mutexes it holds, innermost last */
    int nheld;
    struct lp_held held[LP_HELD_MAX];
    struct lp_crec *last;          /* the record used last */
    /* records by (site, ra): open addressing; records never move */
    struct lp_crec **slots;
    size_t cap, n;
    struct lp_crec *chunk;
    size_t chunk_used, chunk_cap;
    /* per-instance counts: pages of LP_IPAGE slots by instance id / LP_IPAGE */
    struct lp_islot **ipages;
    size_t nipages;
    /* histograms by site index; NULL: no acquisition there yet */
    struct lp_hist **hists;
    size_t nhists;
    struct lp_hist *hchunk;
    size_t hchunk_used, hchunk_cap;
};

/* Per instance, what is not on the uncontended path (acquisitions, hold
 * time and successful trylocks are in the threads' slots). */
struct lp_inst {
    /* P1: written by the holder only */
    uint64_t contended, wait_ns;   /* contended acquisitions and their waits */
    uint64_t relocks, cond_waits, cond_wait_ns, misses;
    /* P2: any thread */
    _Atomic uint64_t try_fail;
    /* set when made */
    uint32_t id;                   /* index of its slots in the threads' tables */
    struct lp_site *site;
    const void *addr;
    const void *lock;              /* its liblock_t (the wrapper's): how auto's switch log names it */
    int type;                      /* PTHREAD_MUTEX_* */
    int glibc;                     /* runs on glibc's mutex */
    int c11;                       /* made by mtx_init */
    struct lp_inst *next;          /* the site's list */
};

struct lp_tok {
    uint64_t t0;
    int on;                        /* begin saw a recorded instance */
    int cont;
    uint32_t weight;               /* 0: not timed (sampled timing), else acquisitions it stands for */
};

extern uint64_t lp_mult;           /* ns = cycles * lp_mult >> 24 */
extern uint32_t lp_every;          /* time 1 in lp_every uncontended acquisitions (1: all) */
#define LP_EVERY_MAX 65536u          /* LIBLOCK_PROFILE_TIME_EVERY's largest value */
extern __thread uint64_t lp_rng __attribute__((tls_model("initial-exec")));
extern int lp_perf_ok;             /* cache-miss counters available */
extern __thread struct lp_table *lp_my __attribute__((tls_model("initial-exec")));

struct lp_table *lp_table_slow(void);
struct lp_crec *lp_crec_slow(struct lp_table *t, int site, const void *ra);
struct lp_hist *lp_hist_slow(struct lp_table *t, int site);
struct lp_islot *lp_islot_slow(struct lp_table *t, uint32_t id);
extern __thread int lp_tid __attribute__((tls_model("initial-exec")));
int lp_tid_slow(void);
void lp_fallback_hist(const struct ip_mutex *w, int hold, unsigned bucket, uint64_t n);
uint64_t lp_perf_read(void);
void lp_mutex_new(struct ip_mutex *w, const struct shim_site *s);
void lp_start(void);
void lp_fork_child(void);

#define LP_LD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define LP_ADD(x, v) __atomic_store_n(&(x), LP_LD(x) + (v), __ATOMIC_RELAXED)

static inline uint64_t lp_cycles(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t lp_ns(uint64_t cyc) { return (uint64_t)(((unsigned __int128)cyc * lp_mult) >> 24); }

/* The weight of an uncontended acquisition's timing: 1 without sampling;
 * with it, lp_every with probability 1/lp_every, else 0 (not timed). */
static inline __attribute__((always_inline)) uint32_t lp_sample(void)
{
    uint32_t n = lp_every;
    if (LL_LIKELY(n <= 1))
        return 1;
    uint64_t x = lp_rng;
    if (LL_UNLIKELY(!x))
        x = ((uintptr_t)&lp_rng * 0x9e3779b97f4a7c15ull) | 1; /* per thread, never 0 */
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    lp_rng = x;
    return ((uint64_t)(uint32_t)(x >> 32) * n) >> 32 == 0 ? n : 0;
}

static inline unsigned lp_bucket(uint64_t ns)
{
    unsigned b = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0u;
    return b < LP_BUCKETS ? b : LP_BUCKETS - 1;
}

/* The outermost acquisition (not a recursive relock): the thread holds w
 * once.  NORMAL mutexes cannot be relocked, and the direct path does not
 * keep count. */
static inline int lp_outermost(const struct ip_mutex *w) { return w->type == PTHREAD_MUTEX_NORMAL || w->count == 1; }

/* The wrapper of m, when a path that did not need it does (rare events). */
static inline struct ip_mutex *lp_w(struct ip_mutex *w, pthread_mutex_t *m)
{
    return w ? w : ip_untag(atomic_load_explicit(mptr(m), memory_order_relaxed));
}

static inline __attribute__((always_inline)) void lp_hist_add(struct lp_table *t, struct lp_crec *r, int hidx,
                                                             struct ip_mutex *w, pthread_mutex_t *m, int hold, uint64_t ns,
                                                             uint64_t n)
{
    unsigned b = lp_bucket(ns);
    struct lp_hist *h = LL_LIKELY(r != NULL) ? r->h : NULL;
    if (LL_UNLIKELY(!h) && !(h = lp_hist_slow(t, hidx))) {
        lp_fallback_hist(lp_w(w, m), hold, b, n);
        return;
    }
    if (hold)
        LP_ADD(h->hold[b], n);
    else
        LP_ADD(h->wait[b], n);
}

static inline __attribute__((always_inline)) struct lp_islot *lp_islot_of(struct lp_table *t, uint32_t id)
{
    size_t p = id / LP_IPAGE;
    if (LL_LIKELY(p < t->nipages && t->ipages[p]))
        return &t->ipages[p][id % LP_IPAGE];
    return lp_islot_slow(t, id);
}

/* Glibc records the owner's thread id in every mutex it locks (NORMAL
 * included): whether the calling thread holds m, without a field of ours. */
static inline __attribute__((always_inline)) int lp_glibc_mine(const pthread_mutex_t *m)
{
    int tid = lp_tid;
    if (LL_UNLIKELY(!tid))
        tid = lp_tid_slow();
    return __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED) == tid;
}

/* ---- the fast path: a recorded NORMAL mutex on glibc (shim.h) -----------------
 * Its instance id and site index are kept in the word glibc leaves unused in
 * a mutex that is not robust (__data.__list.__next), next to glibc's lock
 * word, so that its lock and unlock touch neither the wrapper nor the
 * instance record: only glibc's mutex and the thread's own records. */
#define LP_FAST_TAG ((uintptr_t)1)
static inline uintptr_t lp_fast_desc(const pthread_mutex_t *m)
{
    return __atomic_load_n((const uintptr_t *)(const void *)&m->__data.__list.__next, __ATOMIC_RELAXED);
}
static inline int lp_desc_hidx(uintptr_t d) { return (int)((d >> 1) & 0xffffu); }
static inline uint32_t lp_desc_iid(uintptr_t d) { return (uint32_t)(d >> 17); }
/* Install (or clear) m's descriptor for w (at set-up, under the registry mutex). */
static inline void lp_set_fast(pthread_mutex_t *m, const struct ip_mutex *w)
{
    uintptr_t d = 0;
    if (w && w->prof && SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL && w->lp_hidx <= 0xffff)
        d = LP_FAST_TAG | (uintptr_t)w->lp_hidx << 1 | (uintptr_t)w->lp_iid << 17;
    __atomic_store_n((uintptr_t *)(void *)&m->__data.__list.__next, d, __ATOMIC_RELAXED);
}

/* The thread's entry for m (innermost first); NULL if it has none. */
static inline __attribute__((always_inline)) struct lp_held *lp_held_of(struct lp_table *t, const pthread_mutex_t *m)
{
    for (int i = t->nheld - 1; i >= 0; i--)
        if (t->held[i].m == m)
            return &t->held[i];
    return NULL;
}

/* An outermost acquisition of m (instance iid, lock site hidx; w: its
 * wrapper, or NULL on the fast path).  weight 0: its hold is not timed (t0
 * and now are then 0); a contended acquisition is always timed. */
static inline __attribute__((always_inline)) void lp_acq_core(pthread_mutex_t *m, uint32_t iid, int hidx,
                                                             struct ip_mutex *w, uint64_t t0, uint64_t now, int cont,
                                                             void *ra, uint32_t weight)
{
    struct lp_table *t = lp_my;
    if (LL_UNLIKELY(!t) && !(t = lp_table_slow()))
        return; /* no memory for the thread's records: not recorded */
    struct lp_islot *is = lp_islot_of(t, iid);
    if (LL_UNLIKELY(!is))
        return;
    LP_ADD(is->acq, 1);
    uint64_t wn = 0;
    if (cont) {
        struct lp_inst *in = lp_w(w, m)->prof;
        wn = lp_ns(now - t0);
        LP_ADD(in->contended, 1);
        LP_ADD(in->wait_ns, wn);
    }
    struct lp_crec *r = t->last;
    if (LL_UNLIKELY(!r || r->ra != ra || r->site != hidx))
        r = t->last = lp_crec_slow(t, hidx, ra);
    if (LL_LIKELY(r != NULL)) {
        LP_ADD(r->acq, 1);
        if (cont)
            LP_ADD(r->wait_ns, wn);
    }
    /* the wait histogram counts contended acquisitions only: the report
     * puts the others (wait 0) in bucket 0 (report.c) */
    if (cont)
        lp_hist_add(t, r, hidx, w, m, 0, wn, 1);
    /* An entry for m is left over only when another thread released it (a
     * NORMAL mutex unlocked by a thread that did not lock it): reused. */
    struct lp_held *e = lp_held_of(t, m);
    if (LL_LIKELY(!e)) {
        if (LL_UNLIKELY(t->nheld == LP_HELD_MAX)) { /* 64 held at once: the oldest is dropped */
            memmove(&t->held[0], &t->held[1], (LP_HELD_MAX - 1) * sizeof t->held[0]);
            t->nheld--;
        }
        e = &t->held[t->nheld++];
    }
    e->m = m;
    e->rec = r;
    e->is = is;
    e->weight = weight;
    e->t_acq = now;
    if (LL_UNLIKELY(lp_perf_ok))
        e->miss_acq = lp_perf_read();
}

/* The release of m by the thread that acquired it. */
static inline __attribute__((always_inline)) void lp_rel_core(struct lp_table *t, pthread_mutex_t *m, int hidx,
                                                             struct ip_mutex *w)
{
    struct lp_held *e = lp_held_of(t, m);
    if (LL_UNLIKELY(!e))
        return; /* acquired before the profiler saw it */
    uint32_t k = e->weight;
    if (LL_LIKELY(k != 0)) {
        uint64_t h = lp_ns(lp_cycles() - e->t_acq);
        LP_ADD(e->is->hold_ns, h * k);
        if (LL_LIKELY(e->rec != NULL))
            LP_ADD(e->rec->hold_ns, h * k);
        lp_hist_add(t, e->rec, hidx, w, m, 1, h, k);
    }
    if (LL_UNLIKELY(lp_perf_ok))
        LP_ADD(lp_w(w, m)->prof->misses, lp_perf_read() - e->miss_acq);
    struct lp_held *last = &t->held[--t->nheld];
    if (e != last)
        *e = *last;                /* order does not matter: searched by m */
}

/* Fast path, lock: before and after glibc's lock. */
static inline __attribute__((always_inline)) void lp_fast_begin(struct lp_tok *t, const pthread_mutex_t *m)
{
    t->on = 1;
    t->cont = __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0; /* NORMAL: held by another, or a deadlock */
    t->weight = t->cont ? 1 : lp_sample();
    t->t0 = t->weight ? lp_cycles() : 0;
}

static inline __attribute__((always_inline)) void lp_fast_end(struct lp_tok *t, uintptr_t d, pthread_mutex_t *m, int r,
                                                             void *ra)
{
    if (LL_LIKELY(r == 0))
        lp_acq_core(m, lp_desc_iid(d), lp_desc_hidx(d), NULL, t->t0, t->cont ? lp_cycles() : t->t0, t->cont, ra,
                    t->weight);
}

static inline __attribute__((always_inline)) void lp_fast_trylock_end(uintptr_t d, pthread_mutex_t *m, int r, void *ra)
{
    if (r) {
        atomic_fetch_add_explicit(&lp_w(NULL, m)->prof->try_fail, 1, memory_order_relaxed);
        return;
    }
    struct lp_table *t = lp_my;
    if (LL_UNLIKELY(!t) && !(t = lp_table_slow()))
        return;
    struct lp_islot *is = lp_islot_of(t, lp_desc_iid(d));
    if (LL_LIKELY(is != NULL))
        LP_ADD(is->try_ok, 1);
    uint32_t k = lp_sample();
    uint64_t now = k ? lp_cycles() : 0;
    lp_acq_core(m, lp_desc_iid(d), lp_desc_hidx(d), NULL, now, now, 0, ra, k);
}

static inline __attribute__((always_inline)) void lp_fast_unlock(uintptr_t d, pthread_mutex_t *m)
{
    struct lp_table *t = lp_my;
    if (t && lp_glibc_mine(m))
        lp_rel_core(t, m, lp_desc_hidx(d), NULL);
}

/* ---- every other recorded mutex: through its wrapper -------------------------- */
/* Contended: the mutex was held by another thread when asked for: glibc's
 * own lock word (of m) for a glibc mutex, the owner tag for ours. */
static inline __attribute__((always_inline)) void lp_lock_begin(struct lp_tok *t, struct ip_mutex *w, pthread_mutex_t *m)
{
    t->on = w->prof != NULL;
    t->cont = 0;
    t->t0 = 0;
    t->weight = 0;
    if (!t->on)
        return;
    if (SHIM_GLIBC(w)) {
        /* NORMAL: glibc mode keeps no owner of its own (a locked NORMAL mutex
         * is another thread's, or a deadlock) */
        t->cont = __atomic_load_n(&m->__data.__lock, __ATOMIC_RELAXED) != 0 &&
                  (w->type == PTHREAD_MUTEX_NORMAL || atomic_load_explicit(&w->owner, memory_order_relaxed) != self_tag());
    } else {
        uintptr_t o = atomic_load_explicit(&w->owner, memory_order_relaxed);
        t->cont = o != 0 && o != self_tag();
    }
    t->weight = t->cont ? 1 : lp_sample();
    t->t0 = t->weight ? lp_cycles() : 0;
}

static inline __attribute__((always_inline)) void lp_lock_end(struct lp_tok *t, struct ip_mutex *w, pthread_mutex_t *m,
                                                             int r, void *ra)
{
    if (!t->on || r)
        return;
    if (!lp_outermost(w)) {
        LP_ADD(w->prof->relocks, 1);
        return;
    }
    /* An acquisition that found the mutex free has wait 0 and no second
     * timestamp: the few ns of its atomic instruction count in its hold
     * (both are in the share of time in critical sections). */
    lp_acq_core(m, w->lp_iid, w->lp_hidx, w, t->t0, t->cont ? lp_cycles() : t->t0, t->cont, ra, t->weight);
}

static inline __attribute__((always_inline)) void lp_trylock_end(struct ip_mutex *w, pthread_mutex_t *m, int r, void *ra)
{
    struct lp_inst *in = w->prof;
    if (!in)
        return;
    if (r) {
        atomic_fetch_add_explicit(&in->try_fail, 1, memory_order_relaxed);
        return;
    }
    struct lp_table *t = lp_my;
    if (LL_UNLIKELY(!t) && !(t = lp_table_slow()))
        return;
    struct lp_islot *is = lp_islot_of(t, w->lp_iid);
    if (LL_LIKELY(is != NULL))
        LP_ADD(is->try_ok, 1);
    if (!lp_outermost(w)) {
        LP_ADD(in->relocks, 1);
        return;
    }
    uint32_t k = lp_sample();
    uint64_t now = k ? lp_cycles() : 0;
    lp_acq_core(m, w->lp_iid, w->lp_hidx, w, now, now, 0, ra, k);
}

/* Before the release of w (pthread_mutex_t m): the holder's hold. */
static inline __attribute__((always_inline)) void lp_unlock_begin(struct ip_mutex *w, pthread_mutex_t *m)
{
    struct lp_table *t = lp_my;
    if (!w->prof || !t)
        return;
    if (SHIM_GLIBC(w) && w->type == PTHREAD_MUTEX_NORMAL) {
        if (!lp_glibc_mine(m))
            return; /* not ours: glibc answers */
    } else if (atomic_load_explicit(&w->owner, memory_order_relaxed) != self_tag() || !lp_outermost(w)) {
        return;
    }
    lp_rel_core(t, m, w->lp_hidx, w);
}

/* A condition wait: the hold pauses; the thread's entry is its own. */
static inline __attribute__((always_inline)) void lp_cond_begin(struct lp_tok *t, struct ip_mutex *w)
{
    t->on = w->prof != NULL;
    t->t0 = t->on ? lp_cycles() : 0;
}

static inline __attribute__((always_inline)) void lp_cond_end(struct lp_tok *t, struct ip_mutex *w, pthread_mutex_t *m)
{
    if (!t->on)
        return;
    struct lp_inst *in = w->prof;
    uint64_t now = lp_cycles();
    LP_ADD(in->cond_waits, 1);
    LP_ADD(in->cond_wait_ns, lp_ns(now - t->t0));
    struct lp_table *tb = lp_my;
    struct lp_held *e = tb ? lp_held_of(tb, m) : NULL;
    if (e && e->weight) /* an untimed hold has no start to move */
        e->t_acq += now - t->t0;
}

#endif
