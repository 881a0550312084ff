/*
 * hooks.h - the profiler's measurement hooks on the shim's lock paths
 * (included by src/shim/shim.h when compiled with LL_SHIM_PROFILE).
 *
 * What is recorded (docs/profile-runtime.md; the raw dump format is the
 * contract in src/profile/dump.c):
 *  - per lock instance and call site (return address of
 *    pthread_mutex_lock/trylock/timedlock or mtx_*), in a table of the
 *    calling thread (struct lp_cs): acquisitions, contended ones (the mutex
 *    had another owner when asked for), wait and hold time with log2
 *    histograms, cache misses inside critical sections when the kernel
 *    gives a counter.  The report sums them per call site and per instance.
 *    Keeping them per thread means the holder writes only its own memory:
 *    no counter's cache line moves between CPUs with the lock;
 *  - per instance (struct lp_inst): condition waits, recursive relocks,
 *    trylocks and their failures (rarer events).
 *
 * No lock of the profiler's own is ever taken on the program's lock path:
 *  P1 An instance's counters other than trylocks/try_fail (and its
 *     fallback counts, used only when a thread table cannot be mapped) are
 *     written only by the thread that holds the mutex (after its
 *     acquisition, before its release), so the mutex itself orders those
 *     writes like any data it protects; they are relaxed atomic loads and
 *     stores (not read-modify-write) only so that a report written while
 *     the program runs reads them without a data race.
 *  P2 trylocks/try_fail are counted by threads that may not hold the mutex:
 *     relaxed fetch_add.
 *  P3 A call-site entry is written by the thread whose table holds it (its
 *     locker), and its hold time by the holder at release (the same thread,
 *     except for a NORMAL mutex unlocked by another thread, which POSIX
 *     leaves undefined); entries never move once made.
 *  Instances and sites are made and registered when a mutex is set up
 *  (pthread_mutex_init or first use), under a glibc mutex, never on the
 *  lock path.
 *
 * Timing: the TSC (rdtsc), converted to ns with a multiplier calibrated at
 * start-up against CLOCK_MONOTONIC.  wait = lock call -> acquisition;
 * hold = acquisition -> the unlock call, minus time blocked in condition
 * waits.
 */
#ifndef LL_PROFILE_HOOKS_H
#define LL_PROFILE_HOOKS_H

#include <stdint.h>

#define LP_BUCKETS 40

struct lp_site;

struct lp_counts {
    uint64_t acq, contended, wait_ns, hold_ns, misses;
    uint64_t wait_hist[LP_BUCKETS], hold_hist[LP_BUCKETS];
};

struct lp_inst {
    /* P1: written by the holder only */
    uint64_t relocks, cond_waits, cond_wait_ns;
    struct lp_counts fallback;     /* when no call-site entry could be made */
    /* P2: any thread */
    _Atomic uint64_t trylocks, try_fail;
    /* set when made */
    struct lp_site *site;
    const void *addr;
    int type;                      /* PTHREAD_MUTEX_* */
    int glibc;                     /* runs on glibc's mutex */
    int c11;                       /* made by mtx_init */
    struct lp_inst *next;          /* the site's list */
};

struct lp_cs {
    const struct lp_inst *inst;
    const void *ra;
    struct lp_counts c;            /* P3 */
};

struct lp_tok {
    uint64_t t0;
    int on;                        /* begin saw a recorded instance */
    int cont;
};

extern uint64_t lp_mult;           /* ns = cycles * lp_mult >> 24 */
extern int lp_perf_ok;             /* cache-miss counters available */
struct lp_cs *lp_cs_get(const struct lp_inst *in, const void *ra);
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

static inline unsigned lp_bucket(uint64_t ns)
{
    unsigned b = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0u;
    return b < LP_BUCKETS ? b : LP_BUCKETS - 1;
}

/* The outermost acquisition (not a recursive relock): the thread holds w
 * once.  NORMAL mutexes cannot be relocked, and the direct path does not
 * keep count. */
static inline int lp_outermost(const struct ip_mutex *w) { return w->type == PTHREAD_MUTEX_NORMAL || w->count == 1; }

/* Contended: the mutex was held by another thread when asked for: glibc's
 * own lock word for a glibc mutex, the owner tag for ours. */
static inline __attribute__((always_inline)) void lp_lock_begin(struct lp_tok *t, struct ip_mutex *w)
{
    t->on = w->prof != NULL;
    t->cont = 0;
    t->t0 = 0;
    if (!t->on)
        return;
    uintptr_t o = atomic_load_explicit(&w->owner, memory_order_relaxed);
    if (SHIM_GLIBC(w))
        t->cont = __atomic_load_n(&((pthread_mutex_t *)(uintptr_t)w->addr)->__data.__lock, __ATOMIC_RELAXED) != 0 &&
                  o != self_tag();
    else
        t->cont = o != 0 && o != self_tag();
    t->t0 = lp_cycles();
}

static inline __attribute__((always_inline)) void lp_acquired(struct ip_mutex *w, uint64_t t0, uint64_t now, int cont,
                                                             void *ra)
{
    struct lp_inst *in = w->prof;
    uint64_t wn = lp_ns(now - t0);
    uintptr_t me = self_tag();
    struct lp_cs *cs = w->cur_cs; /* the last holder's entry: mine if it was me, from the same call site */
    if (LL_UNLIKELY(!cs || w->cs_tag != me || cs->ra != ra)) {
        cs = lp_cs_get(in, ra);
        w->cur_cs = cs;
        w->cs_tag = me;
    }
    struct lp_counts *c = LL_LIKELY(cs != NULL) ? &cs->c : &in->fallback;
    LP_ADD(c->acq, 1);
    if (cont)
        LP_ADD(c->contended, 1);
    LP_ADD(c->wait_ns, wn);
    LP_ADD(c->wait_hist[lp_bucket(wn)], 1);
    w->hold_acc = 0;
    if (LL_UNLIKELY(lp_perf_ok))
        w->miss_acq = lp_perf_read();
    w->t_acq = now;
}

static inline __attribute__((always_inline)) void lp_lock_end(struct lp_tok *t, struct ip_mutex *w, int r, void *ra)
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
    lp_acquired(w, t->t0, t->cont ? lp_cycles() : t->t0, t->cont, ra);
}

static inline __attribute__((always_inline)) void lp_trylock_end(struct ip_mutex *w, int r, void *ra)
{
    struct lp_inst *in = w->prof;
    if (!in)
        return;
    atomic_fetch_add_explicit(&in->trylocks, 1, memory_order_relaxed);
    if (r) {
        atomic_fetch_add_explicit(&in->try_fail, 1, memory_order_relaxed);
        return;
    }
    if (!lp_outermost(w)) {
        LP_ADD(in->relocks, 1);
        return;
    }
    uint64_t now = lp_cycles();
    lp_acquired(w, now, now, 0, ra);
}

static inline __attribute__((always_inline)) void lp_unlock_begin(struct ip_mutex *w)
{
    struct lp_inst *in = w->prof;
    if (!in || atomic_load_explicit(&w->owner, memory_order_relaxed) != self_tag() || !lp_outermost(w))
        return;
    uint64_t h = w->hold_acc + lp_ns(lp_cycles() - w->t_acq);
    struct lp_counts *c = LL_LIKELY(w->cur_cs != NULL) ? &w->cur_cs->c : &in->fallback;
    LP_ADD(c->hold_ns, h);
    LP_ADD(c->hold_hist[lp_bucket(h)], 1);
    if (LL_UNLIKELY(lp_perf_ok))
        LP_ADD(c->misses, lp_perf_read() - w->miss_acq);
}

static inline __attribute__((always_inline)) void lp_cond_begin(struct lp_tok *t, struct ip_mutex *w)
{
    t->on = w->prof != NULL;
    t->t0 = 0;
    if (!t->on)
        return;
    t->t0 = lp_cycles();
    w->hold_acc += lp_ns(t->t0 - w->t_acq);
}

static inline __attribute__((always_inline)) void lp_cond_end(struct lp_tok *t, struct ip_mutex *w)
{
    if (!t->on)
        return;
    uint64_t now = lp_cycles();
    LP_ADD(w->prof->cond_waits, 1);
    LP_ADD(w->prof->cond_wait_ns, lp_ns(now - t->t0));
    w->t_acq = now;
}

#endif
