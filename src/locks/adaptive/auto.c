/*
 * auto - a lock that chooses its algorithm while it runs: it starts on a
 * barging futex lock (ttas under spin-then-park: glibc's protocol) and
 * moves, per lock, to mcs, mcscr or loiter when its own contention says
 * so, and back.
 *
 * Sources.  The candidates are the files of this catalogue (ttas, mcs,
 * mcscr, loiter; their headers cite theirs).  Choosing per lock from the share of
 * time its threads spend contending for it is what the profiler of
 * J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC 2014, sections 4.2.1 and 5.3.1, does
 * offline; adapting a lock between spinning, queueing and blocking from its
 * own contention while it runs is GLS (J. Antic, G. Chatzopoulos,
 * R. Guerraoui and V. Trigonakis, "Locking Made Easy", Middleware 2016).
 * The switch protocol and the sampling below are ours.
 *
 * State: `mode`, the index of the candidate that is the lock now; one
 * candidate state each (their own layout, behind a shadow liblock_t whose
 * _state points into this state and whose policy is this lock's); the
 * decision's counters, written only by a holder.  A hold node carries the
 * candidate's node and `which`, the candidate the hold was taken on.
 *
 * The switch protocol (a lock never changes algorithm in a way that loses
 * exclusion):
 *  lock:   m = mode (acquire); take candidate m (its trylock, else its
 *          lock); if mode is still m, hold it (node.which = m); else
 *          release candidate m and start again.
 *  unlock: release candidate node.which.
 *  switch: only by a thread holding candidate m with mode == m, inside its
 *          lock() before it returns (before its critical section): store
 *          mode = k (release), release candidate m, and start its lock()
 *          again, which now takes k.
 * Invariant (E): a thread is in its critical section only while it holds
 *   candidate c where c was `mode` when it checked, after taking c.
 * Exclusion: let X and Y be in their critical sections at once, X on c and
 *   Y on d.  If c == d, the candidate excludes them.  Else mode went from
 *   c to d (through a chain c -> e -> ... -> d) between X's check and Y's.
 *   The step c -> e was made by a thread S holding c with mode == c.  X's
 *   check saw mode == c, so X took c either before S did -- then X
 *   released c before S took it, so X left its critical section before
 *   S's store, and every later step and Y's check come after that store --
 *   or after S released c, when X's acquire of c (which synchronises with
 *   S's release, after S's store) would have shown X mode == e, not c.
 *   So X's critical section ends before any check against e succeeds, and
 *   by induction before Y's check against d: they do not overlap.  The
 *   switcher is not in its critical section between its store and its new
 *   check: it is a thread in lock() like any other.
 * Waiters in the old candidate: a thread waiting in candidate c when the
 *   switch happens is granted c in the end (every candidate is a complete
 *   lock: its waiters, parked or spinning, are served by its own
 *   releases), sees mode != c and leaves c for the new candidate; nothing
 *   is lost, a waiter pays one more acquisition.  A trylock tries the
 *   current candidate once and answers EBUSY if the mode moved meanwhile
 *   (the lock was held: a switch is made by a holder); the API's timed
 *   lock is a trylock loop; a condition wait releases with unlock and
 *   takes the lock back with lock, which follow the protocol; a delegated
 *   section runs on its caller (lock, section, unlock).  The hold's node
 *   area carries one candidate node at a time: a switcher releases m
 *   before it takes k.
 * The candidates share the hold's node area: a thread queued behind a
 *   node of mcs or mcscr may store 1 into its predecessor's announce word
 *   (offset 12 in both layouts, mcs.c "fast hand-over") after the node's
 *   owner has released and moved to another candidate.  So each candidate
 *   has a place in the area (node_off): mcs and mcscr at its start, where
 *   that word is the same one, which each resets before use, so such a
 *   late store costs at most a futex wake; ttas keeps nothing in a node;
 *   loiter, whose node keeps plain state at offset 12 (under
 *   ThreadSanitizer the late store raced with loiter_trylock's when it
 *   shared the start), at offset 16, past every word another thread may
 *   store into late.  loiter's own waiters store only into nodes whose
 *   owners still wait (its inner MCS queue has no fast hand-over), so
 *   they store late into no one's node.  (Outside auto a record's node
 *   area is only ever one algorithm's -- internal.h, "One algorithm per
 *   node" -- and auto's records are auto's, so this sharing among its
 *   candidates is the only one.)  A candidate joins only with a place
 *   disjoint from every late store of the others.
 * The barging candidate's uncontended acquire and release are ttas.h's
 * inline functions (the same instructions as its ops table's), not calls,
 * and a failed first attempt goes straight to ttas's own wait
 * (ttas_lock_slow), as ttas's lock does: the steps are ttas's, in the same
 * order, so its argument covers them.
 * Orderings: the mode store is release and both loads of mode in lock
 *   (and trylock) are acquire.  The re-check must be: the mode can come
 *   back to c through a chain c -> e -> ... -> c while a thread waits in
 *   c, and then the value the re-check reads is the last switcher's store,
 *   not one ordered by c's own hand-over.  Acquire on that load makes the
 *   last switcher's release (after which it released its candidate, so
 *   after every critical section under that candidate) happen before the
 *   new holder's critical section; the candidate's acquire covers the
 *   holders of c itself.  On x86 an acquire load is a plain load.
 *
 * The decision (docs/auto.md has the rules and the measurements behind
 * them).  One acquisition in AUTO_BATCH of each thread (a thread-local
 * count over every auto lock: no shared line is written on the other
 * acquisitions) is a sample: its holder adds AUTO_BATCH to the lock's
 * acquisitions and, if that acquisition found the lock held (the
 * candidate's trylock failed), to its contended ones; a retake after a
 * condition wait (cond_reacquire) is counted exactly, by its holder; those
 * counters are touched only under the lock.  Every AUTO_WINDOW acquisitions so
 * estimated, the holder computes the contended share of the window and a
 * target: the
 * barging lock below LIBLOCK_AUTO_LOW (default 0.05), the calibrated
 * choice at or above LIBLOCK_AUTO_HIGH (default 0.5) -- LIBLOCK_AUTO_UNDER
 * while the threads using liblock are at most the CPUs, LIBLOCK_AUTO_OVER
 * beyond, or LIBLOCK_AUTO_OVER_COND (default loiter) beyond when at least
 * LIBLOCK_AUTO_COND (default 0.01) of the window's acquisitions were
 * retakes after a condition wait -- and no change in between.  It switches when `need` windows
 * in a row agree on a target other than the current candidate: 2, doubled
 * (up to 64) by a switch that returns, within 64 windows, to the candidate
 * the previous switch left, and back to 2 after 64 windows without a
 * switch (damping: a lock whose share on one candidate says "leave" and on
 * the other "come back" does not pay a switch every two windows).
 * LIBLOCK_AUTO_START names the candidate a lock starts on (default ttas);
 * LIBLOCK_AUTO_SWITCH_EVERY=N (tests) instead moves to another candidate
 * every N estimated acquisitions.  LIBLOCK_AUTO_LOG=FILE appends one line
 * per switch with its reason.
 */
#include "internal.h"
#include "locks/classic/ttas.h"

#include <fcntl.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern const struct ll_ops ll_ops_ttas, ll_ops_mcs, ll_ops_mcscr, ll_ops_loiter;

enum { C_TTAS, C_MCS, C_MCSCR, C_LOITER, C__N };
static const struct ll_ops *const cand[C__N] = {&ll_ops_ttas, &ll_ops_mcs, &ll_ops_mcscr, &ll_ops_loiter};
/* each candidate's place in the hold's node area (header) */
static const uint8_t node_off[C__N] = {0, 0, 0, 16};

#define AUTO_STATE_MAX 256
#define AUTO_BATCH 16u
#define AUTO_WINDOW 1024u
#define AUTO_NEED_MIN 2u   /* windows in a row that must agree on a switch */
#define AUTO_NEED_MAX 64u  /* ... at most, after a run of reversals */
#define AUTO_DAMP 64u      /* a reversal within this many windows doubles need */

struct auto_node {
    uint32_t which;
    _Alignas(16) unsigned char sub[LL_NODE_BYTES - 16];
};
_Static_assert(sizeof(struct auto_node) <= LL_NODE_BYTES, "auto node too large");

struct auto_lock {
    /* read by every acquirer, written only at a switch (mode) or at init */
    LL_ALIGNED _Atomic uint32_t mode;
    liblock_t sub[C__N];
    /* holder-only (header), on lines of their own */
    LL_ALIGNED uint64_t acq, cont, cretake;
    uint32_t agree, want, need;
    int32_t left;      /* the candidate the last switch left (-1: none yet) */
    uint64_t last_win; /* windows at the last switch */
    uint64_t switches, windows, forced_every, forced_n, forced_k;
    uint8_t under, over, over_cond;
    float low, high, cond_min;
    int cpus; /* online CPUs at init (sysconf reads a file: not per window) */
    LL_ALIGNED unsigned char st[C__N][AUTO_STATE_MAX];
};

/* candidate c's node in the hold's node area */
static inline void *cnode(struct auto_node *n, int c)
{
    return n->sub + node_off[c];
}

/* the barging candidate's state: the same pointer as s->sub[C_TTAS]._state, at a
 * constant offset, so the fast path needs no load to find it */
#define TTAS_OF(s) ((struct ttas_lock *)(void *)(s)->st[C_TTAS])

/* the calling thread's acquisitions of auto locks, any of them (header) */
static __thread uint32_t auto_tick LL_TLS_IE;

static int cand_index(const char *name, int dflt)
{
    for (int i = 0; i < C__N; i++)
        if (name && strcmp(name, cand[i]->name) == 0)
            return i;
    return dflt;
}

static int auto_init(liblock_t *l, const liblock_attr_t *attr)
{
    LL_KEEP_ERRNO;
    struct auto_lock *s = LL_STATE(l, struct auto_lock);
    for (int i = 0; i < C__N; i++) {
        if (cand[i]->state_size > AUTO_STATE_MAX || node_off[i] + cand[i]->node_size > sizeof(((struct auto_node *)0)->sub))
            return EINVAL;
        s->sub[i] = (liblock_t){._ops = cand[i], ._state = s->st[i], ._magic = LL_LOCK_MAGIC, ._wait = l->_wait};
        int r = cand[i]->init ? cand[i]->init(&s->sub[i], attr) : 0;
        if (r) {
            for (int j = 0; j < i; j++)
                if (cand[j]->destroy)
                    cand[j]->destroy(&s->sub[j]);
            return r;
        }
    }
    int start = cand_index(getenv("LIBLOCK_AUTO_START"), C_TTAS);
    atomic_init(&s->mode, (uint32_t)start);
    s->low = (float)ll_env_double("LIBLOCK_AUTO_LOW", 0.05, 0.0, 1.0);
    s->high = (float)ll_env_double("LIBLOCK_AUTO_HIGH", 0.5, 0.0, 1.0);
    s->under = (uint8_t)cand_index(getenv("LIBLOCK_AUTO_UNDER"), C_TTAS);
    s->over = (uint8_t)cand_index(getenv("LIBLOCK_AUTO_OVER"), C_TTAS);
    s->over_cond = (uint8_t)cand_index(getenv("LIBLOCK_AUTO_OVER_COND"), C_LOITER);
    s->cond_min = (float)ll_env_double("LIBLOCK_AUTO_COND", 0.01, 0.0, 1.0);
    s->forced_every = (uint64_t)ll_env_long("LIBLOCK_AUTO_SWITCH_EVERY", 0, 0, 1L << 30);
    s->want = (uint32_t)start;
    s->need = AUTO_NEED_MIN;
    s->left = -1;
    s->cpus = ll_ncpus();
    return 0;
}

static int auto_destroy(liblock_t *l)
{
    struct auto_lock *s = LL_STATE(l, struct auto_lock);
    for (int i = 0; i < C__N; i++)
        if (cand[i]->destroy && cand[i]->destroy(&s->sub[i]) != 0)
            return EBUSY;
    return 0;
}

/* LIBLOCK_AUTO_LOG: one line per switch (the holder writes it: rare); the
 * lock is named by its liblock_t, which the profiler records per instance */
static void log_switch(const liblock_t *l, int from, int to, const char *why)
{
    LL_KEEP_ERRNO;
    LL_NO_CANCEL;
    const char *path = getenv("LIBLOCK_AUTO_LOG");
    if (!path || !*path)
        return;
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    char line[320];
    uint64_t t = ll_now_ns();
    int n = snprintf(line, sizeof line, "%llu.%09llu pid %d lock %p %s -> %s: %s\n",
                     (unsigned long long)(t / 1000000000ull), (unsigned long long)(t % 1000000000ull), (int)getpid(),
                     (const void *)l, cand[from]->name, cand[to]->name, why);
    if (n > 0) {
        ssize_t w = write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
        (void)w;
    }
    close(fd);
}

/* The holder's decision at the end of one of its batches (header): the
 * candidate to move to, or -1.  The caller holds candidate m, mode == m. */
static int decide(struct auto_lock *s, int m, const char **why, char *buf, size_t bn)
{
    if (s->forced_every) {
        if ((s->forced_n += AUTO_BATCH) < s->forced_every)
            return -1;
        s->forced_n = 0;
        *why = "LIBLOCK_AUTO_SWITCH_EVERY";
        /* a circuit through every ordered pair of candidates (each of the
         * 12 arcs of the complete directed graph on 4 once), from ttas */
        static const uint8_t tour[12] = {C_TTAS, C_MCS,   C_TTAS, C_MCSCR, C_TTAS,  C_LOITER,
                                         C_MCS,  C_MCSCR, C_MCS,  C_LOITER, C_MCSCR, C_LOITER};
        _Static_assert(C__N == 4, "the forced tour covers 4 candidates");
        return tour[++s->forced_k % 12];
    }
    if (s->acq < AUTO_WINDOW)
        return -1;
    double share = (double)s->cont / (double)s->acq, cshare = (double)s->cretake / (double)s->acq;
    unsigned threads = ll_thread_max_id();
    int cpus = s->cpus;
    s->acq = s->cont = s->cretake = 0;
    s->windows++;
    int over = cshare >= s->cond_min ? s->over_cond : s->over;
    int target = share < s->low ? C_TTAS : share >= s->high ? ((int)threads > cpus ? over : s->under) : m;
    if (target == m) {
        s->agree = 0;
        return -1;
    }
    if (s->want != (uint32_t)target) {
        s->want = (uint32_t)target;
        s->agree = 0;
    }
    if (++s->agree < s->need)
        return -1;
    s->agree = 0;
    unsigned agreed = s->need;
    uint64_t since = s->windows - s->last_win;
    if (target == s->left && since < AUTO_DAMP)
        s->need = s->need * 2 > AUTO_NEED_MAX ? AUTO_NEED_MAX : s->need * 2;
    else if (since >= AUTO_DAMP)
        s->need = AUTO_NEED_MIN;
    s->left = m;
    s->last_win = s->windows;
    snprintf(buf, bn, "contended share %.2f, after a condition wait %.3f, in %u windows of %u acquisitions, %u threads, %d CPUs",
             share, cshare, agreed, AUTO_WINDOW, threads, cpus);
    *why = buf;
    return target;
}

/* A switch by the holder of m (header): 1 when it moved the lock to
 * another candidate and released m (the caller then starts again). */
static LL_SLOW int batch_end(const liblock_t *l, struct auto_lock *s, struct auto_node *n, int m)
{
    const char *why = "";
    char buf[160];
    int k = decide(s, m, &why, buf, sizeof buf);
    if (k < 0 || k == m)
        return 0;
    log_switch(l, m, k, why);
    s->switches++;
    atomic_store_explicit(&s->mode, (uint32_t)k, memory_order_release);
    cand[m]->unlock(&s->sub[m], cnode(n, m));
    return 1;
}

/* One acquisition in AUTO_BATCH of the calling thread is a sample
 * (header), counted here by the holder; 1 when the window is full (or a
 * forced switch is due) and batch_end must decide. */
static inline int sample_due(struct auto_lock *s, int contended)
{
    if (LL_LIKELY((++auto_tick & (AUTO_BATCH - 1)) != 0))
        return 0;
    s->acq += AUTO_BATCH;
    s->cont += contended ? AUTO_BATCH : 0;
    return LL_UNLIKELY(s->forced_every != 0 || s->acq >= AUTO_WINDOW);
}

/* The lock after the first attempt: any candidate, any number of rounds
 * (header). */
static LL_SLOW int auto_lock_slow(const liblock_t *l, struct auto_lock *s, struct auto_node *n)
{
    for (;;) {
        int m = (int)atomic_load_explicit(&s->mode, memory_order_acquire);
        liblock_t *sl = &s->sub[m];
        int contended = 0;
        if (cand[m]->trylock(sl, cnode(n, m)) != 0) {
            contended = 1;
            cand[m]->lock(sl, cnode(n, m));
        }
        if (LL_LIKELY((int)atomic_load_explicit(&s->mode, memory_order_acquire) == m)) {
            n->which = (uint32_t)m;
            if (sample_due(s, contended) && batch_end(l, s, n, m))
                continue;
            return 0;
        }
        cand[m]->unlock(sl, cnode(n, m)); /* the lock moved on while we waited (header) */
    }
}

/* The barging candidate taken after mode read C_TTAS (the protocol's steps,
 * as in auto_lock_slow): the re-check, the sample, and the general path
 * when the lock moved on or this holder switched it. */
static inline __attribute__((always_inline)) int ttas_taken(const liblock_t *l, struct auto_lock *s,
                                                           struct auto_node *n, int contended)
{
    if (LL_LIKELY(atomic_load_explicit(&s->mode, memory_order_acquire) == C_TTAS)) {
        n->which = C_TTAS;
        if (!sample_due(s, contended) || !batch_end(l, s, n, C_TTAS))
            return 0;
    } else {
        ttas_release_on(TTAS_OF(s), l); /* the lock moved on (header) */
    }
    return auto_lock_slow(l, s, n);
}

/* The first attempt on the barging candidate failed: ttas's own wait (no
 * second attempt, no call through its ops table), then as after a success. */
static LL_SLOW int auto_lock_ttas_wait(const liblock_t *l, struct auto_lock *s, struct auto_node *n)
{
    ttas_lock_slow(l, TTAS_OF(s), ll_policy(l));
    return ttas_taken(l, s, n, 1);
}

/* The first attempt, on the barging candidate, inline (ttas.h). */
static int auto_lock(liblock_t *l, void *vnode)
{
    struct auto_lock *s = LL_STATE(l, struct auto_lock);
    struct auto_node *n = vnode;
    if (LL_UNLIKELY(atomic_load_explicit(&s->mode, memory_order_acquire) != C_TTAS))
        return auto_lock_slow(l, s, n);
    if (LL_UNLIKELY(ttas_try_on(TTAS_OF(s), l) != 0))
        return auto_lock_ttas_wait(l, s, n);
    return ttas_taken(l, s, n, 0);
}

/* A condition wait takes the lock back (src/core/cond.c; the interposer's
 * condition variables too): an acquisition like any other, counted exactly
 * (not sampled: waits are rare and slow) by the holder it made. */
static int auto_cond_reacquire(liblock_t *l)
{
    int r = ll_api_lock(l);
    if (r == 0)
        LL_STATE(l, struct auto_lock)->cretake++;
    return r;
}

static int auto_trylock(liblock_t *l, void *vnode)
{
    struct auto_lock *s = LL_STATE(l, struct auto_lock);
    struct auto_node *n = vnode;
    int m = (int)atomic_load_explicit(&s->mode, memory_order_acquire);
    liblock_t *sl = &s->sub[m];
    if (cand[m]->trylock(sl, cnode(n, m)) != 0)
        return EBUSY;
    if ((int)atomic_load_explicit(&s->mode, memory_order_acquire) != m) {
        cand[m]->unlock(sl, cnode(n, m));
        return EBUSY;
    }
    n->which = (uint32_t)m;
    return 0;
}

static int auto_unlock(liblock_t *l, void *vnode)
{
    struct auto_lock *s = LL_STATE(l, struct auto_lock);
    struct auto_node *n = vnode;
    if (LL_LIKELY(n->which == C_TTAS)) {
        ttas_release_on(TTAS_OF(s), l);
        return 0;
    }
    return cand[n->which]->unlock(&s->sub[n->which], cnode(n, (int)n->which));
}

static void auto_stats(const liblock_t *l, struct ll_stats *o)
{
    const struct auto_lock *s = LL_STATE(l, struct auto_lock);
    ll_stats_put(o, "mode", (int64_t)atomic_load_explicit(&s->mode, memory_order_relaxed));
    ll_stats_put(o, "switches", (int64_t)s->switches);
    ll_stats_put(o, "windows", (int64_t)s->windows);
}

const struct ll_ops ll_ops_auto = {
    .name = "auto",
    .description = "chooses its algorithm per lock while it runs: starts on the barging futex lock (ttas), moves to "
                   "the calibrated choice (LIBLOCK_AUTO_UNDER, LIBLOCK_AUTO_OVER: ttas, mcs, mcscr or loiter; beyond "
                   "the CPUs, for a lock retaken after condition waits, LIBLOCK_AUTO_OVER_COND: loiter) when its "
                   "contended share stays high, and back when it falls (docs/auto.md)",
    .source = "Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), "
              "sections 4.2.1 and 5.3.1; Antic, Chatzopoulos, Guerraoui and Trigonakis, Locking Made Easy, "
              "Middleware 2016",
    .props = LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) | LL_POLICY_BIT(LIBLOCK_WAIT_PREEMPT_AWARE),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK, /* docs/auto.md: preempt-aware measured no better here */
    .oversubscribed = "as its current candidate: on the barging lock, waiters spin about one futex round trip (not "
                      "while others sleep), then sleep; on mcscr or loiter, surplus waiters sleep in its passive set",
    .state_size = sizeof(struct auto_lock),
    .node_size = sizeof(struct auto_node),
    .init = auto_init,
    .destroy = auto_destroy,
    .lock = auto_lock,
    .trylock = auto_trylock,
    .unlock = auto_unlock,
    .cond_reacquire = auto_cond_reacquire,
    .stats = auto_stats,
};
