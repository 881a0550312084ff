/*
 * cna - Compact NUMA-aware lock (Dice and Kogan): an MCS lock whose
 * releaser prefers a waiter of its own NUMA node and parks the waiters of
 * other nodes it skips in a secondary queue, which it hands on with the
 * lock; the lock stays one word.
 *
 * Source: D. Dice and A. Kogan, "Compact NUMA-aware Locks", Proceedings of
 * the Fourteenth EuroSys Conference (EuroSys 2019), section 3 (the
 * algorithm and its pseudo-code: the main queue, the secondary queue, the
 * successor search, the splice) and section 3.2 (long-term fairness).
 *
 * The lock is one word, the tail of the main queue, as in MCS.  A node:
 *   next      the main-queue link (an arrival links itself to its
 *             predecessor's node, as in MCS);
 *   locked    W_WAIT (1) while its owner waits, W_HEAD (2) once raised
 *             (spin-then-park, "Early wake-up" below), 0 once granted (bit
 *             31 belongs to the waiting layer);
 *   numa      ll_cpu_node of the CPU its thread arrived on (LIBLOCK_NUMA_MAP
 *             assigns nodes to CPUs, so two "nodes" exist on any machine
 *             with two CPUs);
 *   sec, local   what the lock's holder inherits with the lock: the head of
 *             the secondary queue (NULL: empty) and the number of hand-offs
 *             made since the secondary queue last became non-empty;
 *   sec_tail  in the head node of a secondary queue: its last node.
 * The secondary queue is a chain of nodes through `next`, like the main
 * queue, but not reachable from the tail: only the holder knows it.  That
 * is how the lock stays one word: where the paper passes the secondary
 * queue's head in the successor's spin word, we write it into the
 * successor's node before the grant.
 *
 *   lock(n):   n.next = nil; n.locked = 1; n.numa = node of this CPU;
 *              n.sec = nil; n.local = 0
 *              pred = swap(tail, n); if pred: pred.next = n; wait while n.locked
 *   unlock(n): succ = n.next
 *              if succ == nil:
 *                  if n.sec == nil: if CAS(tail, n, nil): return
 *                  else: t = n.sec.sec_tail; t.next = nil
 *                        if CAS(tail, n, t): grant(n.sec, nil, 0); return
 *                                            (the secondary queue is the queue now)
 *                  succ = wait until n.next != nil
 *              if n.sec and n.local >= H: splice; return      (fairness, below)
 *              if succ.numa == n.numa: grant(succ, n.sec, n.sec ? n.local+1 : 0); return
 *              scan succ.next, succ.next.next, ... for the first node c with
 *              c.numa == n.numa, stopping at a nil link;
 *              found: move succ .. c's predecessor to the end of the
 *                     secondary queue; grant(c, sec, local + 1); return
 *              not found: if n.sec: splice; else grant(succ, nil, 0)
 *   splice:    n.sec.sec_tail.next = succ; grant(n.sec, nil, 0)
 *   grant(w, s, k): w.sec = s; w.local = k; w.locked = 0 (the hand-over)
 *   trylock(n): as lock, but CAS(tail, nil, n) instead of the swap.
 * H is LIBLOCK_CNA_THRESHOLD (default 1024, 1 to 2^20), read when the lock
 * is initialised.  The paper draws a random number at each release and
 * flushes with a small probability; a count makes the bound exact and
 * testable, and costs the holder nothing it does not already read.
 *
 * Why the owner may relink nodes.  Moving succ .. p (p the predecessor of
 * c) writes only p.next later (when the segment is appended to, or the
 * secondary queue spliced) and the previous secondary tail's next.  Those
 * nodes are not the tail (c follows them), so no arrival will ever link
 * into them: their successors linked themselves before the scan read the
 * links.  Their threads wait on `locked` and touch nothing else of their
 * node until granted.  Only the holder writes into waiting nodes, and the
 * holder is unique, so the main and secondary queues are owner-only data
 * apart from the tail and the one pending link of the newest arrival.
 * The scan stops at a nil link: a node whose successor has swapped the tail
 * but not linked yet ends the scan as if it were the tail, which only
 * makes this release less local, never wrong.
 * When the main queue is empty behind the holder but the secondary queue
 * is not, the secondary queue's tail t becomes the lock's tail by one CAS
 * from the holder's node (t.next is set to nil first; an arrival that gets
 * t from its swap links after the CAS, which the CAS's release orders).  If
 * the CAS fails an arrival is linking behind the holder, and the release
 * goes on with it as the successor.
 *
 * Invariants:
 *  - tail is nil iff no thread holds or waits for the lock; otherwise it is
 *    the last node of the main queue, whose head is the holder's node;
 *  - every waiter is in exactly one of the main queue (behind the holder)
 *    and the holder's secondary queue; a release grants exactly one node
 *    and drops none: moved nodes are appended to the secondary queue, the
 *    splice puts the whole secondary queue before the rest of the main
 *    queue, and the secondary queue is only ever emptied by a splice or by
 *    becoming the main queue;
 *  - while the secondary queue is not empty, every holder is of one node X
 *    (the secondary queue is handed on only to a waiter of the holder's
 *    own node, and emptied whenever the lock goes elsewhere), and every
 *    node in it is of another node than X;
 *  - the secondary queue's age order is kept: a segment is appended at
 *    its end and a splice keeps it in order.
 *
 * Long-term fairness: the bound.  `local` counts the hand-offs made while
 * the secondary queue was non-empty, from the one that made it non-empty
 * on; a release that finds it at H splices, whether or not a waiter of its
 * own node waits.  So a secondary queue is spliced back at most H critical
 * sections after it became non-empty, and a waiter moved into it waits
 * there through at most H critical sections of other threads; at the
 * splice the queue's eldest waiter gets the lock.  With two nodes (the
 * tests' LIBLOCK_NUMA_MAP=0,1) every node of the spliced queue is of the
 * new holder's node, so the spliced waiters are granted in turn, as local
 * hand-offs with an empty secondary queue: a waiter moved into the
 * secondary queue is admitted after at most H + (T - 2) critical sections
 * of other threads, T being the number of threads that use the lock (at
 * most T - 2 waiters are ahead of it in the secondary queue).
 * Any number of nodes: for a waiter w, let P be the number of waiters
 * ahead of w in the order "secondary queue, then main queue" (the order
 * a splice produces).  Arrivals join behind w; a move takes nodes from the
 * main queue's front to the secondary queue's end, which keeps everyone's
 * side of w; a splice keeps the order.  So P never grows, and a grant to a
 * waiter ahead of w lowers it.  A grant to a waiter behind w happens only
 * while the secondary queue is non-empty (w in it, or w skipped and moved
 * by that very release), so at most H of them come in a row before a
 * splice or a requeue grants the secondary queue's head, which is w or
 * ahead of it.  Hence w is admitted after at most P0 + (P0 + 1) H
 * hand-offs, P0 <= T - 2: starvation-free.
 * On one node every waiter is the holder's: no node is ever moved, the
 * scan never runs, and the lock is MCS (FIFO).
 *
 * Orderings:
 *  - the tail swap is acq_rel, as in MCS: release publishes our initialised
 *    node (numa included) to whoever reads it as pred; acquire makes pred's
 *    node visible before we link;
 *  - pred.next = n is a release store; the holder's loads of next (its own
 *    and the scan's) are acquire, so a node's numa is visible to the holder
 *    that reaches it;
 *  - the grant writes sec and local (relaxed), and the secondary tail's
 *    next when splicing, then ends the wait through the waiting layer
 *    (ll_wake: release), and the waiter's wait returns after an acquire
 *    load: the new holder sees the critical section, the secondary queue
 *    as the old holder left it, and its own sec and local;
 *  - the owner-only writes into waiting nodes (next, sec_tail) are ordered
 *    from one holder to the next by the same grants;
 *  - the early wake-up's CAS carries no data (relaxed): it only changes
 *    how the waiter waits, and LL_PARKED is seen by the CAS itself;
 *  - CAS(tail, n, nil) is release, for the next arrival's acquiring swap;
 *    CAS(tail, n, t) is acq_rel: release for the arrivals that will link
 *    into t after our t.next = nil, acquire for nothing (it reads our own
 *    node); trylock's CAS is acq_rel on success, as the swap.
 *
 * Policies: spin, yield, spin-then-park (default).  A waiter waits on its
 * own `locked` word with the lock's policy (ll_wait_while) and every grant
 * goes through ll_wake, which wakes it if it parked: no lost wake-up, by
 * the waiting layer's argument (src/core/wait.c).  The short wait of a
 * releaser for an arrival that swapped the tail but has not linked pauses
 * (yields under yield, and under spin-then-park after a few hundred
 * pauses, since that arrival may have been preempted).
 *
 * Early wake-up under spin-then-park (our addition, a reduced form of
 * mcs.c's).  A waiter spins for the spin budget, then sleeps.  The next
 * holder is chosen only at the release, but it is usually the holder's
 * main-queue successor when that one is of the holder's node (on one node,
 * always).  So a thread that gets the lock after waiting raises that
 * successor's word from W_WAIT to W_HEAD (a CAS from W_WAIT, with or
 * without LL_PARKED, never from the grant's 0), and wakes it if it had
 * parked; the successor, seeing W_HEAD, spins for a new budget before it
 * sleeps again, so its wake-up overlaps the critical section ahead of it.
 * The raise is only a hint: a raised waiter that is then moved to the
 * secondary queue, or passed over, sleeps again after its budget and is
 * woken by its grant, which is a swap whatever the word holds.  The
 * successor is alive while the raiser looks at it: it waits behind the
 * raiser's hold, which cannot be released before lock() returns.  A
 * futex_wake that arrives after the grant reaches a word in use again is
 * a spurious wake-up, which every waiter here absorbs.
 *
 * Holds are nodes.  Everything unlock needs (sec, local, numa) is in the
 * per-hold node the API layer and the interposer hand to both lock() and
 * unlock(), never in the thread: another thread may unlock (a NORMAL
 * mutex), the holder may exit first, and a holder relocking a NORMAL mutex
 * it holds queues behind its own first hold like any waiter.  The
 * preference is the holder's node: the node of the CPU the hold arrived
 * on, whoever unlocks it.  Hold records are never freed, so no node in
 * either queue is ever freed under the lock.  Fork: the interposer builds
 * the lock anew in the child.
 */
#include "internal.h"

struct cna_node {
    _Atomic(struct cna_node *) next; /* main-queue link (secondary-queue link once moved) */
    _Atomic uint32_t locked;         /* 1 wait, 0 granted; bit 31 the waiting layer's */
    int numa;                        /* node of the CPU the hold arrived on */
    struct cna_node *sec;            /* the holder's: head of the secondary queue, or NULL */
    uint32_t local;                  /* the holder's: hand-offs since the secondary queue became non-empty */
    struct cna_node *sec_tail;       /* head of a secondary queue: its last node */
};

struct cna_lock {
    _Atomic(struct cna_node *) tail;
    /* read-only after init, and owner-only counters (for tests), on their own line */
    LL_ALIGNED uint32_t threshold;
    uint64_t moved, splices, flushes, requeues;
};

_Static_assert(sizeof(struct cna_node) <= LL_NODE_BYTES, "cna node too large");

#define W_WAIT 1u /* queued */
#define W_HEAD 2u /* spin-then-park: raised by the holder (header, "Early wake-up") */

#define CNA_THRESHOLD_DEFAULT 1024
#define CNA_THRESHOLD_MAX (1L << 20)

static inline int parks(int policy) { return policy == LIBLOCK_WAIT_SPIN_THEN_PARK; }

static inline int my_node(void)
{
    int cpu = ll_current_cpu();
    return cpu < 0 ? 0 : ll_cpu_node(cpu);
}

static inline struct cna_node *next_of(struct cna_node *x)
{
    return atomic_load_explicit(&x->next, memory_order_acquire);
}

static int cna_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct cna_lock *s = LL_STATE(l, struct cna_lock);
    s->threshold = (uint32_t)ll_env_long("LIBLOCK_CNA_THRESHOLD", CNA_THRESHOLD_DEFAULT, 1, CNA_THRESHOLD_MAX);
    return 0; /* tail nil: free */
}

static int cna_destroy(liblock_t *l)
{
    /* a non-empty secondary queue implies a holder, so the tail says it all */
    return atomic_load_explicit(&LL_STATE(l, struct cna_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

static inline void node_init(struct cna_node *n, uint32_t locked)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, locked, memory_order_relaxed);
    n->numa = my_node();
    n->sec = NULL;
    n->local = 0;
}

/* Raise n's main-queue successor to W_HEAD if it is of n's node (header,
 * "Early wake-up"). */
static void raise_next(struct cna_node *n)
{
    struct cna_node *succ = next_of(n);
    if (!succ || succ->numa != n->numa)
        return;
    uint32_t cur = atomic_load_explicit(&succ->locked, memory_order_relaxed);
    while ((cur & ~LL_PARKED) == W_WAIT) {
        if (atomic_compare_exchange_weak_explicit(&succ->locked, &cur, W_HEAD, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            if (cur & LL_PARKED)
                ll_futex_wake(&succ->locked, 1 << 30);
            return;
        }
    }
}

static LL_SLOW int cna_lock_behind(liblock_t *l, struct cna_node *n, struct cna_node *pred)
{
    const int pol = ll_policy(l);
    atomic_store_explicit(&pred->next, n, memory_order_release);
    if (!parks(pol)) {
        ll_wait_while(&n->locked, W_WAIT, pol);
        return 0;
    }
    uint32_t v = W_WAIT;
    while ((v = ll_wait_while(&n->locked, v, pol)) != 0)
        ; /* W_HEAD: raised, spin a new budget */
    raise_next(n);
    return 0;
}

static int cna_lock(liblock_t *l, void *vnode)
{
    struct cna_lock *s = LL_STATE(l, struct cna_lock);
    struct cna_node *n = vnode;
    node_init(n, W_WAIT);
    struct cna_node *pred = atomic_exchange_explicit(&s->tail, n, memory_order_acq_rel);
    if (LL_UNLIKELY(pred != NULL))
        return cna_lock_behind(l, n, pred);
    return 0;
}

static int cna_trylock(liblock_t *l, void *vnode)
{
    struct cna_lock *s = LL_STATE(l, struct cna_lock);
    struct cna_node *n = vnode;
    node_init(n, 0);
    struct cna_node *expect = NULL;
    return atomic_compare_exchange_strong_explicit(&s->tail, &expect, n, memory_order_acq_rel,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

/* Hand the lock to w with the secondary queue sec (NULL: empty) and count k. */
static inline void grant(struct cna_node *w, struct cna_node *sec, uint32_t k, int policy)
{
    w->sec = sec;
    w->local = k;
    ll_wake(&w->locked, 0, policy);
}

/* Wait for the arrival that swapped the tail after n to link itself. */
static struct cna_node *await_link(struct cna_node *n, int policy)
{
    struct cna_node *succ;
    unsigned k = 0;
    while (!(succ = next_of(n))) {
        if (policy == LIBLOCK_WAIT_YIELD || (parks(policy) && ++k > 256))
            ll_yield(); /* the arrival may be preempted between swap and link */
        else
            ll_pause();
    }
    return succ;
}

/* The secondary queue sec goes before succ, and its head gets the lock. */
static inline void splice(struct cna_node *sec, struct cna_node *succ, int policy)
{
    atomic_store_explicit(&sec->sec_tail->next, succ, memory_order_relaxed);
    grant(sec, NULL, 0, policy);
}

/* unlock() with a successor, linked (succ) or still linking (NULL: the
 * release CAS failed), or with a secondary queue: everything but the plain
 * uncontended release. */
static LL_SLOW int cna_unlock_slow(liblock_t *l, struct cna_node *n, struct cna_node *succ)
{
    struct cna_lock *s = LL_STATE(l, struct cna_lock);
    const int pol = ll_policy(l);
    struct cna_node *sec = n->sec;
    if (!succ && sec) {
        /* nobody behind us in the main queue: the secondary queue becomes it */
        struct cna_node *t = sec->sec_tail;
        atomic_store_explicit(&t->next, NULL, memory_order_relaxed);
        struct cna_node *expect = n;
        if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, t, memory_order_acq_rel,
                                                    memory_order_relaxed)) {
            s->requeues++; /* owner-only, before the grant gives the lock away */
            grant(sec, NULL, 0, pol);
            return 0;
        }
    }
    if (!succ)
        succ = await_link(n, pol);
    if (sec && n->local >= s->threshold) {
        s->flushes++; /* long-term fairness (header) */
        splice(sec, succ, pol);
        return 0;
    }
    const int me = n->numa;
    if (succ->numa == me) {
        grant(succ, sec, sec ? n->local + 1 : 0, pol);
        return 0;
    }
    /* the first waiter of our node behind succ, if any is linked */
    struct cna_node *prev = succ, *c;
    uint64_t skipped = 1;
    while ((c = next_of(prev)) && c->numa != me) {
        prev = c;
        skipped++;
    }
    if (c) {
        /* succ .. prev go to the end of the secondary queue */
        if (sec)
            atomic_store_explicit(&sec->sec_tail->next, succ, memory_order_relaxed);
        else
            sec = succ;
        sec->sec_tail = prev;
        s->moved += skipped;
        grant(c, sec, n->local + 1, pol);
        return 0;
    }
    if (sec) {
        s->splices++; /* no waiter of our node: the secondary queue goes first */
        splice(sec, succ, pol);
        return 0;
    }
    grant(succ, NULL, 0, pol);
    return 0;
}

static int cna_unlock(liblock_t *l, void *vnode)
{
    struct cna_lock *s = LL_STATE(l, struct cna_lock);
    struct cna_node *n = vnode;
    struct cna_node *succ = next_of(n);
    if (LL_LIKELY(!succ && !n->sec)) {
        struct cna_node *expect = n;
        if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_release,
                                                    memory_order_relaxed))
            return 0;
        /* an arrival swapped in behind us: cna_unlock_slow waits for its link */
    }
    return cna_unlock_slow(l, n, succ);
}

/* Statistics (struct ll_ops .stats; owner-written counters, exact once the
 * lock is quiescent):
 *   moved      waiters moved from the main queue to the secondary queue
 *   splices    secondary queues spliced back because no waiter of the
 *              holder's node was queued
 *   flushes    secondary queues spliced back by the fairness bound
 *   requeues   secondary queues that became the main queue (nobody else
 *              queued)
 *   threshold  H (LIBLOCK_CNA_THRESHOLD)
 *   tail       the main queue's tail as an address (an identity: tests
 *              compare it to learn whether someone queued) */
static void cna_stats(const liblock_t *l, struct ll_stats *o)
{
    const struct cna_lock *s = l->_state;
    ll_stats_put(o, "moved", (int64_t)s->moved);
    ll_stats_put(o, "splices", (int64_t)s->splices);
    ll_stats_put(o, "flushes", (int64_t)s->flushes);
    ll_stats_put(o, "requeues", (int64_t)s->requeues);
    ll_stats_put(o, "threshold", (int64_t)s->threshold);
    ll_stats_put(o, "tail", (int64_t)(intptr_t)atomic_load_explicit(&s->tail, memory_order_acquire));
}

const struct ll_ops ll_ops_cna = {
    .name = "cna",
    .description = "Compact NUMA-aware lock: MCS whose releaser prefers a waiter of its own NUMA node and moves "
                   "the skipped waiters of other nodes to a secondary queue, spliced back when no local waiter "
                   "remains or after LIBLOCK_CNA_THRESHOLD hand-offs",
    .source = "Dice and Kogan, Compact NUMA-aware Locks, EuroSys 2019, section 3",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "every waiter spins for about one wake-up on its own node, then sleeps there; a thread that gets the lock wakes its queue successor if that one is of its NUMA node (on one node, always), so the likely next holder's wake-up overlaps the critical section; the others are woken by their grant; FIFO on one node",
    .state_size = sizeof(struct cna_lock),
    .node_size = sizeof(struct cna_node),
    .init = cna_init,
    .destroy = cna_destroy,
    .lock = cna_lock,
    .trylock = cna_trylock,
    .unlock = cna_unlock,
    .stats = cna_stats,
};
