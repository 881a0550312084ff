/*
 * mcs-tp - MCS with time-published waiters (He, Scherer and Scott, HiPC
 * 2005): a queue lock whose waiters publish timestamps, so that a releaser
 * skips waiters that look preempted and waiters that waited too long leave
 * the queue instead of forming a convoy.
 *
 * Source: B. He, W. N. Scherer III and M. L. Scott, "Preemption Adaptivity
 * in Time-Published Queue-Based Spin Locks", HiPC 2005; as given in
 * J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 3.5,
 * Algorithms 4 (lock/trylock) and 5 (unlock), including the thesis's
 * line 38 fix (last_lock = lock on a time-out, below).  The release below
 * is written from the algorithm's description in section 3.5 and the
 * states Algorithm 4 expects (FAILED = "you were removed from the queue").
 * The spin-then-park policy (parked waiters and the parked list) is ours.
 *
 * Node {next, time, status, last_lock, plink, parked_at}; status is INIT,
 * AVAILABLE (you hold the lock), WAITING, TIMED_OUT (left the queue by
 * itself, node still linked), FAILED (removed by a releaser, node
 * unlinked), or WAITING|PARKED (spin-then-park: asleep, skip me).  Lock
 * {tail, cs_start, parked list head/tail}.
 *   one attempt (Algorithm 4's trylock; lock() repeats it until it wins):
 *     if not (status == TIMED_OUT and last_lock == this lock and
 *             CAS(status, TIMED_OUT, WAITING)):       -- reclaim our place
 *         status = WAITING; next = nil; pred = swap(tail, node)
 *         if no pred: cs_start = now; return acquired
 *         pred.next = node
 *     loop: AVAILABLE -> cs_start = now; return acquired
 *           FAILED    -> yield if the holder looks preempted
 *                        (now - cs_start > MAX_CS_TIME); last_lock = lock;
 *                        return failed
 *           WAITING   -> publish time;
 *                        spin/yield: after PATIENCE, CAS(WAITING ->
 *                        TIMED_OUT); yield if the holder looks preempted;
 *                        last_lock = lock   <- line 38, the thesis's fix;
 *                        return failed
 *                        spin-then-park: after the spin budget
 *                        (LIBLOCK_SPIN_NS), CAS(WAITING -> WAITING|PARKED)
 *                        and sleep on the status word until a holder
 *                        replaces it (no time-out while parked)
 *   unlock: (spin-then-park) if the oldest parked node has slept more than
 *     MAX_PARK, take it off the parked list and tell it FAILED (it wakes
 *     and tries again).  Then walk the successors from node.next: a WAITING
 *     node whose time is fresh (now - time <= UPDATE_DELAY) gets
 *     CAS(WAITING -> AVAILABLE): the hand-over.  Every node passed over
 *     (TIMED_OUT, parked, WAITING with a stale time, or whose CAS failed) is
 *     unlinked as soon as the releaser has read its non-nil next: a parked
 *     one goes to the tail of the parked list (its owner sleeps on), any
 *     other is told FAILED.  A node without successor is passed over only
 *     by freeing the lock, CAS(tail, node, nil): just before it the
 *     releaser takes the oldest parked node off the list (put back if the
 *     CAS fails), and after it tells that one and the last node FAILED
 *     (waking them if parked); if the CAS fails it waits for the successor
 *     to link itself (spin-then-park: yielding after a few hundred pauses,
 *     in case the enqueuer was preempted between its swap and its link).
 *     The futex_wake calls are made after the hand-over or the free
 *     (deferred_wake.h).
 *
 * Why line 38 matters here: a node that timed out is still linked in the
 * queue.  The next attempt must reclaim that place (TIMED_OUT -> WAITING)
 * instead of swapping the node in again.  It recognises its own leftover
 * place by last_lock == lock.  Without the fix last_lock keeps an older
 * value (nil for a new node), the attempt enqueues the node a second time
 * while it is still linked, and the queue gets a cycle (with one waiter,
 * swap returns the node itself and node.next = node): the next unlock walks
 * it for ever (unless, by luck, the owner sees the FAILED that the walking
 * releaser writes into the node, re-inserts it and the releaser finds the
 * lock free in that window).  tests/test_mcstp.c shows this with the fix
 * disabled by LIBLOCK_MCSTP_UNSAFE_DISABLE_FIX=1 (for that test only; never
 * set it): the lock deadlocks or, when it escapes, reports the double
 * insertion (a swap that returned the node itself; counted, never happens
 * with the fix).
 *
 * Why spin-then-park: with more threads than cores, a spin or yield
 * waiter is mostly not running.  Under yield each hand-over goes to a
 * thread that still has to be scheduled (about one yield round of its
 * CPU), and once the threads per CPU times the cost of a yield exceed
 * UPDATE_DELAY most published times are stale: releasers remove most of
 * the queue at every unlock and the removed waiters re-enqueue, so each
 * critical section pays for tens of removals.  A parked waiter instead
 * says so in its status word: a
 * releaser moves it off the queue in O(1) and it does not come back until
 * a holder wakes it, so the queue holds only waiters that are running, the
 * hand-over goes to one of them, and each parked node costs one pass and
 * one wake-up per park.
 *
 * Invariants: tail is nil iff the lock is free; the nodes reachable from the
 * holder's node are WAITING, TIMED_OUT or WAITING|PARKED; a node is linked
 * in at most one queue position (that is what last_lock protects); only
 * the holder walks the queue, and a passed-over node is never the tail
 * (its next was non-nil) nor reachable from the new holder, so telling its
 * owner FAILED before the hand-over is safe; a node's owner rewrites its
 * next only after seeing FAILED (unlinked) or AVAILABLE (head) or at a
 * fresh insertion when the node is in no queue.
 * Parked list: read and written only by the lock holder (and by a
 * releaser before it gives the lock away: hand-over CAS or free CAS);
 * every node on it is WAITING|PARKED, out of the queue, its owner asleep
 * in lock(); only a holder changes such a status (the owner's CASes all
 * expect WAITING or TIMED_OUT, the hand-over CAS expects WAITING).
 * No lost waiter: a queued node is eventually passed over or handed the
 * lock, since each release either frees the lock after passing every
 * queued node or hands over to a node behind all the ones it passed.  A
 * parked node leaves the list only by a holder's FAILED + wake.  The list
 * can be non-empty while the lock is free only right after a free that
 * woke its oldest node W: W's owner is in lock() and re-enqueues, so either
 * it takes the free lock or there is a holder; whoever holds next inherits
 * the list, and every later free wakes one more node, every release after
 * MAX_PARK the oldest.  So a parked waiter is woken while the lock is in
 * use, within MAX_PARK of reaching the list's head.  When no thread is in
 * lock() the list is empty (its nodes are threads asleep in lock()).
 * Orderings: the tail swap is acq_rel and pred.next = node is release,
 * paired with the releaser's acquire loads of next (as in MCS); the
 * hand-over CAS is acq_rel and the waiter's status load is acquire, so the
 * new holder sees the critical section and the parked list; FAILED is a
 * release RMW after the releaser's last read of that node's next, paired
 * with the owner's acquire load; CAS(tail, node, nil) is release, after
 * every write to the parked list, so the next holder (whose swap or
 * trylock CAS on tail is acq_rel) sees both.  The park announcement is a
 * CAS (acq_rel) on the status word, so a releaser either sees PARKED and
 * must wake, or its own CAS/RMW wins and the owner never sleeps; the wake
 * follows the waiting layer's protocol (internal.h): the owner sleeps in
 * futex_wait(status, WAITING|PARKED), and the kernel re-checks the word.
 * Timestamps (time, cs_start, parked_at) are heuristics: relaxed.
 *
 * Publishing (our change to the paper's loop, which publishes at every
 * iteration).  The time shares a line with the status word the releaser
 * reads and then CASes, so a store at every pause would take the line away
 * from the releaser between its read and its CAS.  A waiter publishes when
 * its last published time is a quarter of UPDATE_DELAY old: while it runs
 * a releaser never finds it stale, and one that stops running still goes
 * stale within UPDATE_DELAY.  The releaser prefetches the node's line for
 * writing before it reads it (platform/prefetch.h), so its read and its
 * CAS cost one transfer of the line, not two.
 *
 * Parameters (env, read at liblock_init; nanoseconds):
 *   LIBLOCK_MCSTP_MAX_CS_TIME_NS    10,000,000 (10 ms)  holder looks preempted
 *   LIBLOCK_MCSTP_UPDATE_DELAY_NS       10,000 (10 us)  waiter looks preempted
 *   LIBLOCK_MCSTP_PATIENCE_NS           50,000 (50 us)  time in queue before
 *                                                       timing out (spin, yield)
 *   LIBLOCK_MCSTP_MAX_PARK_NS        1,000,000 (1 ms)   a parked waiter older
 *                                                       than this is woken to
 *                                                       try again
 *   LIBLOCK_MCSTP_GRACE_NS               1,000 (1 us)   a release that would
 *                                                       free the lock and wake
 *                                                       a parked waiter first
 *                                                       waits this long for an
 *                                                       arrival (try_free)
 *   and the library's spin budget (a measured futex round trip, or
 *   LIBLOCK_SPIN_NS): spin phase before parking.
 * Policies: spin-then-park (default: the one for more threads than cores),
 * spin, yield.  Neither FIFO nor starvation-free: waiters that look
 * preempted are passed over, and under spin-then-park running waiters get
 * the lock before parked ones (MAX_PARK bounds how long one sleeps at the
 * head of the parked list, not how often it is passed over).
 * liblock_trylock is a single CAS(tail, nil, node) (EBUSY if held or
 * queued), not Algorithm 4's patient attempt.  lock() returns only when it
 * holds the lock, so the node (the API's per-hold node) is never left in a
 * queue or on the parked list after the call: no per-thread state outlives
 * a call.
 * Condition variables: supported (it is an ordinary lock; generic path).
 */
#include "internal.h"
#include "locks/deferred_wake.h"
#include "platform/prefetch.h"

#include <stdlib.h>

enum { TP_INIT = 0, TP_AVAILABLE = 1, TP_WAITING = 2, TP_TIMED_OUT = 3, TP_FAILED = 4 };

struct tp_node {
    _Atomic(struct tp_node *) next;
    _Atomic uint64_t time; /* cycles */
    _Atomic uint32_t status; /* TP_*, LL_PARKED added by a parked waiter */
    const void *last_lock;
    /* parked list (spin-then-park); written and read by lock holders only */
    struct tp_node *plink;
    uint64_t parked_at; /* cycles, when a holder took it off the queue */
};
_Static_assert(sizeof(struct tp_node) <= LL_NODE_BYTES, "mcs-tp node too large");

struct tp_lock {
    LL_ALIGNED _Atomic(struct tp_node *) tail;
    /* second line: written once per acquisition, read by waiters */
    LL_ALIGNED _Atomic uint64_t cs_start;               /* cycles */
    uint64_t max_cs, update_delay, patience, max_park;  /* cycles, read-only after init */
    uint64_t grace;                                     /* free grace, cycles (try_free) */
    int fix;
    /* parked list, oldest first: the lock holder's (see the header) */
    struct tp_node *park_head, *park_tail;
    _Atomic unsigned long timeouts, failed, parks, wakes; /* statistics, for tests */
    _Atomic unsigned long self_pred; /* a node swapped in behind itself: only without the fix */
};

static inline int64_t since(uint64_t now, uint64_t t) { return (int64_t)(now - t); }

static int tp_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct tp_lock *s = LL_STATE(l, struct tp_lock);
    s->max_cs = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_MCSTP_MAX_CS_TIME_NS", 10000000L, 1, 1L << 40));
    s->update_delay = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_MCSTP_UPDATE_DELAY_NS", 10000L, 1, 1L << 40));
    s->patience = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_MCSTP_PATIENCE_NS", 50000L, 1, 1L << 40));
    s->max_park = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_MCSTP_MAX_PARK_NS", 1000000L, 1, 1L << 40));
    s->grace = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_MCSTP_GRACE_NS", 1000L, 0, 1000000L));
    s->fix = ll_env_long("LIBLOCK_MCSTP_UNSAFE_DISABLE_FIX", 0, 0, 1) ? 0 : 1;
    if (!s->fix)
        ll_warn_once("mcstp-nofix", "liblock: mcs-tp: LIBLOCK_MCSTP_UNSAFE_DISABLE_FIX=1: the last_lock fix is off "
                                    "(test use only; the lock can deadlock)");
    s->park_head = s->park_tail = NULL;
    atomic_store_explicit(&s->tail, NULL, memory_order_release);
    return 0;
}

static int tp_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct tp_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

static inline void holder_check(struct tp_lock *s, uint64_t now)
{
    if (since(now, atomic_load_explicit(&s->cs_start, memory_order_relaxed)) > (int64_t)s->max_cs)
        ll_yield(); /* the holder looks preempted: let it run */
}

/* Algorithm 4's trylock: 1 = acquired, 0 = failed (timed out or removed). */
static int tp_attempt(liblock_t *l, struct tp_lock *s, struct tp_node *n)
{
    int policy = ll_policy(l);
    uint64_t start = ll_cycles();
    uint32_t expect = TP_TIMED_OUT;
    atomic_store_explicit(&n->time, start, memory_order_relaxed);
    /* acquire: if a releaser's FAILED is what we read here, its reads of
     * our node (next) happen before we rewrite it below */
    if (!(atomic_load_explicit(&n->status, memory_order_acquire) == TP_TIMED_OUT && n->last_lock == (const void *)s &&
          atomic_compare_exchange_strong_explicit(&n->status, &expect, TP_WAITING, memory_order_acquire,
                                                  memory_order_acquire))) {
        atomic_store_explicit(&n->status, TP_WAITING, memory_order_relaxed);
        atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
        struct tp_node *pred = atomic_exchange_explicit(&s->tail, n, memory_order_acq_rel);
        if (LL_UNLIKELY(pred == n)) /* inserted twice (see line 38 above): counted for the test */
            atomic_fetch_add_explicit(&s->self_pred, 1, memory_order_relaxed);
        if (!pred) {
            atomic_store_explicit(&n->status, TP_AVAILABLE, memory_order_relaxed);
            atomic_store_explicit(&s->cs_start, start, memory_order_relaxed); /* a few ns ago: no second clock read */
            return 1;
        }
        atomic_store_explicit(&pred->next, n, memory_order_release);
    }
    for (;;) {
        uint32_t st = atomic_load_explicit(&n->status, memory_order_acquire);
        if (st == TP_AVAILABLE) {
            atomic_store_explicit(&s->cs_start, ll_cycles(), memory_order_relaxed);
            return 1;
        }
        if (st == TP_FAILED) {
            atomic_fetch_add_explicit(&s->failed, 1, memory_order_relaxed);
            holder_check(s, ll_cycles());
            n->last_lock = s;
            return 0;
        }
        uint64_t published = start;
        while (atomic_load_explicit(&n->status, memory_order_acquire) == TP_WAITING) {
            uint64_t now = ll_cycles();
            /* "Publishing" in the header */
            if (since(now, published) > (int64_t)(s->update_delay / 4)) {
                atomic_store_explicit(&n->time, now, memory_order_relaxed);
                published = now;
            }
            if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
                if (since(now, start) <= (int64_t)ll_spin_budget_cycles()) {
                    ll_pause();
                    continue;
                }
                /* Park: announce it in the status word, so that releasers
                 * skip this node, and sleep until a holder replaces the
                 * word (FAILED: try again; AVAILABLE if a releaser handed
                 * over just before the CAS).  No time-out while parked. */
                uint32_t w = TP_WAITING;
                if (!atomic_compare_exchange_strong_explicit(&n->status, &w, TP_WAITING | LL_PARKED,
                                                             memory_order_acq_rel, memory_order_acquire))
                    break; /* handed over or removed meanwhile */
                atomic_fetch_add_explicit(&s->parks, 1, memory_order_relaxed);
                ll_wait_while(&n->status, TP_WAITING, LIBLOCK_WAIT_PARK);
                break;
            }
            if (since(now, start) <= (int64_t)s->patience) {
                ll_wait_step(policy);
                continue;
            }
            uint32_t w = TP_WAITING;
            if (!atomic_compare_exchange_strong_explicit(&n->status, &w, TP_TIMED_OUT, memory_order_acq_rel,
                                                         memory_order_acquire))
                break; /* handed over or removed meanwhile: re-examine */
            atomic_fetch_add_explicit(&s->timeouts, 1, memory_order_relaxed);
            holder_check(s, now);
            if (s->fix)
                n->last_lock = s; /* line 38 */
            return 0;
        }
    }
}

static int tp_lock(liblock_t *l, void *vnode)
{
    struct tp_lock *s = LL_STATE(l, struct tp_lock);
    struct tp_node *n = vnode;
    /* The per-hold node is recycled between algorithms: start from INIT. */
    atomic_store_explicit(&n->status, TP_INIT, memory_order_relaxed);
    while (!tp_attempt(l, s, n))
        ;
    return 0;
}

static int tp_trylock(liblock_t *l, void *vnode)
{
    struct tp_lock *s = LL_STATE(l, struct tp_lock);
    struct tp_node *n = vnode;
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->status, TP_AVAILABLE, memory_order_relaxed);
    struct tp_node *expect = NULL;
    if (!atomic_compare_exchange_strong_explicit(&s->tail, &expect, n, memory_order_acq_rel, memory_order_relaxed))
        return EBUSY;
    atomic_store_explicit(&s->cs_start, ll_cycles(), memory_order_relaxed);
    return 0;
}

/* ---- the parked list (holder only) ---- */
static void park_push(struct tp_lock *s, struct tp_node *m, uint64_t now)
{
    m->plink = NULL;
    m->parked_at = now;
    if (s->park_tail)
        s->park_tail->plink = m;
    else
        s->park_head = m;
    s->park_tail = m;
}

static struct tp_node *park_pop(struct tp_lock *s)
{
    struct tp_node *m = s->park_head;
    if (m && !(s->park_head = m->plink))
        s->park_tail = NULL;
    return m;
}

static void park_unpop(struct tp_lock *s, struct tp_node *m)
{
    if (!(m->plink = s->park_head))
        s->park_tail = m;
    s->park_head = m;
}

/* Tell m's owner that its node is out of the queue (FAILED: try again),
 * waking it if it parked; the futex_wake is deferred.  Release: the
 * caller's reads of m (its next) come before the owner reuses it. */
static void tell_failed(struct tp_lock *s, struct tp_node *m, struct ll_deferred_wakes *dw)
{
    uint32_t old = atomic_exchange_explicit(&m->status, TP_FAILED, memory_order_acq_rel);
    if (old & LL_PARKED) {
        atomic_fetch_add_explicit(&s->wakes, 1, memory_order_relaxed);
        if (dw->n < LL_DEFER_MAX)
            dw->w[dw->n++] = &m->status;
        else
            ll_futex_wake(&m->status, 1 << 30);
    }
}

/* m was passed over, its next has been read and it is not the tail: it is
 * out of the queue.  A parked owner stays asleep and its node goes to the
 * parked list; any other owner is told FAILED.  The owner may turn WAITING
 * into PARKED or TIMED_OUT (or TIMED_OUT back into WAITING) meanwhile:
 * retry the CAS on the value seen. */
static void pass_over(struct tp_lock *s, struct tp_node *m)
{
    for (;;) {
        uint32_t st = atomic_load_explicit(&m->status, memory_order_acquire);
        if (st & LL_PARKED) {
            park_push(s, m, ll_cycles());
            return;
        }
        if (atomic_compare_exchange_weak_explicit(&m->status, &st, TP_FAILED, memory_order_release,
                                                  memory_order_relaxed))
            return;
    }
}

/* cur has no successor: try to free the lock (CAS tail cur -> nil).  The
 * parked list must be left as the next holder will find it before that
 * CAS, so the oldest parked node (if any) is taken off first and, once the
 * lock is free, woken to try again (it is put back if the CAS fails).
 * Free grace (our addition): a free with parked waiters costs a wake-up,
 * and with short non-critical sections on few CPUs the queue is usually
 * empty only for the moment a running thread spends between its unlock and
 * its next lock().  So with the parked list not empty the releaser first
 * waits up to `grace` (LIBLOCK_MCSTP_GRACE_NS, default 1 us; 0 = off) for
 * an arrival to swap the tail; if one does, there is no free (return 0: the
 * caller waits for the link and hands over as usual) and no parked waiter
 * is woken.  The lock stays held meanwhile, so nothing changes for the
 * invariants above; the tail load is a relaxed hint, the hand-over path
 * reads the link with acquire as before. */
static int try_free(struct tp_lock *s, struct tp_node *cur, struct ll_deferred_wakes *dw)
{
    if (s->park_head && s->grace) {
        uint64_t t0 = ll_cycles();
        unsigned i = 0;
        while (atomic_load_explicit(&s->tail, memory_order_relaxed) == cur) {
            ll_pause();
            if ((++i & 15) == 0 && ll_cycles() - t0 > s->grace)
                break;
        }
        if (atomic_load_explicit(&s->tail, memory_order_relaxed) != cur)
            return 0;
    }
    struct tp_node *w = park_pop(s);
    struct tp_node *expect = cur;
    if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_release,
                                                memory_order_relaxed)) {
        if (w)
            tell_failed(s, w, dw);
        return 1;
    }
    if (w)
        park_unpop(s, w);
    return 0;
}

static struct tp_node *wait_link(struct tp_node *cur, int policy)
{
    struct tp_node *nx;
    unsigned spins = 0;
    while (!(nx = atomic_load_explicit(&cur->next, memory_order_acquire))) {
        /* the enqueuer is between its tail swap and its link; if it was
         * preempted there, spinning would burn the rest of our slice */
        if (policy == LIBLOCK_WAIT_YIELD || (policy == LIBLOCK_WAIT_SPIN_THEN_PARK && ++spins > 256))
            ll_yield();
        else
            ll_pause();
    }
    return nx;
}

static int tp_unlock(liblock_t *l, void *vnode)
{
    struct tp_lock *s = LL_STATE(l, struct tp_lock);
    struct tp_node *n = vnode;
    int policy = ll_policy(l);
    struct ll_deferred_wakes dw;
    dw.n = 0;
    /* rotation: the oldest parked waiter has slept MAX_PARK: let it try
     * again (before the lock changes hands: the list is the holder's) */
    if (s->park_head && since(ll_cycles(), s->park_head->parked_at) > (int64_t)s->max_park)
        tell_failed(s, park_pop(s), &dw);
    struct tp_node *cur = atomic_load_explicit(&n->next, memory_order_acquire);
    if (!cur) {
        if (try_free(s, n, &dw))
            goto out;
        cur = wait_link(n, policy);
    }
    for (;;) {
        ll_prefetchw(cur); /* we read its status and time and then CAS the status (platform/prefetch.h) */
        uint32_t st = atomic_load_explicit(&cur->status, memory_order_acquire);
        if (st == TP_WAITING &&
            since(ll_cycles(), atomic_load_explicit(&cur->time, memory_order_relaxed)) <= (int64_t)s->update_delay) {
            uint32_t w = TP_WAITING;
            if (atomic_compare_exchange_strong_explicit(&cur->status, &w, TP_AVAILABLE, memory_order_acq_rel,
                                                        memory_order_relaxed))
                goto out; /* handed over */
        }
        /* pass over cur */
        struct tp_node *nx = atomic_load_explicit(&cur->next, memory_order_acquire);
        if (!nx) {
            if (try_free(s, cur, &dw)) {
                tell_failed(s, cur, &dw); /* the lock is free: a parked owner is woken */
                goto out;
            }
            nx = wait_link(cur, policy);
        }
        pass_over(s, cur);
        cur = nx;
    }
out:
    ll_wake_flush(&dw);
    return 0;
}

/* Statistics (struct ll_ops .stats): timeouts, attempts that timed out
 * (PATIENCE); failed, those removed by a releaser (FAILED);
 * double_inserts, times a node was swapped into the queue while it was
 * already its tail (the double insertion that the line 38 fix prevents);
 * parks, times a waiter parked (spin-then-park); wakes, times a releaser
 * woke a parked waiter to try again. */
static void tp_stats(const liblock_t *l, struct ll_stats *o)
{
    struct tp_lock *s = LL_STATE(l, struct tp_lock);
    ll_stats_put(o, "timeouts", (int64_t)atomic_load_explicit(&s->timeouts, memory_order_relaxed));
    ll_stats_put(o, "failed", (int64_t)atomic_load_explicit(&s->failed, memory_order_relaxed));
    ll_stats_put(o, "double_inserts", (int64_t)atomic_load_explicit(&s->self_pred, memory_order_relaxed));
    ll_stats_put(o, "parks", (int64_t)atomic_load_explicit(&s->parks, memory_order_relaxed));
    ll_stats_put(o, "wakes", (int64_t)atomic_load_explicit(&s->wakes, memory_order_relaxed));
}

const struct ll_ops ll_ops_mcs_tp = {
    .name = "mcs-tp",
    .description = "MCS-TP: MCS queue lock with time-published waiters that skips preempted threads",
    .source = "He, Scherer and Scott, HiPC 2005; Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.5, Algorithms 4-5 with the thesis's last_lock fix",
    .props = LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "waiters publish a timestamp, spin about one futex round trip, then sleep; a releaser skips waiters that look preempted or asleep, so the lock goes to a running thread (not FIFO)",
    .state_size = sizeof(struct tp_lock),
    .node_size = sizeof(struct tp_node),
    .init = tp_init,
    .destroy = tp_destroy,
    .lock = tp_lock,
    .trylock = tp_trylock,
    .unlock = tp_unlock,
    .stats = tp_stats,
};
