/*
 * mcscr - MCS with concurrency restriction (the paper's MCSCR).
 *
 * Source: D. Dice, "Malthusian Locks", EuroSys 2017; extended version
 * arXiv:1511.06035, section 4 "The MCSCR lock algorithm".
 *
 * Idea: when more threads circulate over a lock than it needs to stay
 * saturated, the surplus only adds cache, pipeline and CPU pressure.  MCSCR
 * keeps an explicit passive set (PS) of culled waiters next to the MCS
 * chain; the active circulating set (owner, at most about one waiter,
 * threads in their non-critical sections) is implicit.  The acquire path is
 * plain MCS; everything happens in unlock, by the owner, under the lock:
 *
 *   unlock(n):   succ = n.next
 *   (F) fairness: with probability P (LIBLOCK_CR_FAIRNESS, default 1/1000,
 *       a Bernoulli trial on the unlocking thread's xorshift generator), this
 *       unlock is a "fair" one: it culls nothing, and if the PS is not empty
 *       its eldest member T (PS tail) is grafted right after the owner's node
 *       and receives the lock (T.next = succ, or T becomes the tail if the
 *       chain is empty -- see "races" below).  With an empty PS a fair
 *       unlock is a plain MCS hand-off.  So P = 1 is exactly MCS (FIFO);
 *       P = 0 gives no long-term fairness guarantee beyond reprovisioning.
 *   (C) culling: if succ exists and succ.next exists, succ is an
 *       intermediate node (the chain holds owner, succ, and at least one
 *       more): it is surplus.  (Not in the paper: succ.next is the one the
 *       owner saw right after it got the lock, not re-read at unlock, so the
 *       read is not on the hand-off's path; a waiter that linked during the
 *       critical section is culled one unlock later -- cr.h, "The chain as
 *       the owner found it".)  Surplus (unless it is a lock() call taken over
 *       CR_MAX_TAKEOVERS times, below).  Unlink it, push it on the PS
 *       head, and hand the lock to succ.next.  At most one node is culled per unlock, so
 *       unlock stays O(1); the chain shrinks by two per unlock (one culled,
 *       one admitted) while arrivals add at most about one, so it converges
 *       to "owner + one waiter", the paper's ideal steady state.  Culling
 *       the owner's immediate successor (rather than a later node) is the
 *       paper's O(1) choice and leaves the most recent arrivals -- the ones
 *       most likely still spinning rather than parked -- in the chain.
 *  (C') not in the paper: when the CPU hints say succ.next cannot run now
 *       (it arrived on the unlocker's CPU, or on succ's, where it parked at
 *       once), that one is culled instead and succ gets the lock, also
 *       O(1) (cr.h, "Culling the second waiter", which has the argument
 *       for unlinking it, a tail included).
 *   (R) reprovisioning (work conservation): if the chain holds only the
 *       owner's node and the PS is not empty, pop the PS head (the most
 *       recently culled, warmest thread), make it the tail and hand it the
 *       lock (a pending grant, below).  Hence the lock is never released
 *       (tail = nil) while a passive thread waits.
 *   (M) otherwise plain MCS.
 *
 * Pending grants (not in the paper; cr.h has the full argument).  Under
 * spin-then-park a passive thread has usually gone to sleep by the time it
 * is reprovisioned; granting it the lock outright makes the lock wait, held
 * but idle, for its wake-up (a cross-CPU wake-up, or a whole time slice
 * when the CPUs are oversubscribed) while running threads queue behind
 * it.  So (R) grants the
 * PS head *pending*: it holds the lock unless the first arrival behind it
 * takes it over first, in which case the arrival owns the lock and the
 * passive thread, once it runs, arrives again as a new arrival.  The lock
 * is never free meanwhile (work conservation holds) and no passive thread
 * is stranded (the grant woke it, and it either claims the lock or
 * re-enqueues).  A lock() call that has been taken over CR_MAX_TAKEOVERS
 * (8) times is no longer culled, so it reaches the lock through the MCS
 * chain (cr.h: fairness).
 * Fairness grafts (F) grant outright: the eldest thread is admitted, not
 * raced.
 *
 * A waiter whose predecessor arrived on the same CPU parks at once under
 * spin-then-park instead of spinning out its budget (not in the paper; cr.h,
 * "Same-CPU waiters").
 *
 * Culled threads are not told: their `locked` word simply stays 1, so they
 * keep waiting under the lock's policy (spin: MCSCR-S; spin-then-park:
 * MCSCR-STP, where they time out of spinning and sleep in the kernel).
 *
 * Invariants
 *  I1 tail == nil  <=>  lock free  =>  PS empty.  The owner only CASes the
 *     tail to nil in (M), which runs only with an empty PS, and only the
 *     owner edits the PS.  (work conservation)
 *  I2 every waiting thread's node is in exactly one of: the MCS chain after
 *     the owner, the PS.  Culling moves an intermediate node chain -> PS;
 *     (F)/(R) move a PS node back into the chain before granting it.  The
 *     one exception is a thread whose pending grant was taken over: its node
 *     is in neither, and the thread is not waiting but on its way back into
 *     lock() (it was woken by the grant).
 *  I3 a node's `next` is written by (a) its own thread (nil, before the tail
 *     swap), (b) the single arrival that obtained it as pred from the tail
 *     swap, (c) the owner while the node is off the chain (in the PS) or is
 *     about to become the owner.  Culling only intermediate nodes keeps (b)
 *     and (c) apart: an intermediate node's successor has already linked
 *     itself (succ.next != nil was observed), so nobody else will write
 *     succ.next again; a tail node is culled only by (C'), through the
 *     CAS that makes its predecessor the tail (cr.h).
 *
 * Races of putting a PS node T into an empty chain (graft in (F), or (R)),
 * which the paper leaves open.  The owner's node n is the tail.  The owner
 * writes T.next = nil and then CAS(tail, n -> T):
 *   - success: T is the last node.  Arrivals that swap the tail from now on
 *     get pred = T and link T.next; since the CAS is release and their swap
 *     acquire, our T.next = nil happens-before their store, so their link is
 *     never overwritten.  Then the owner grants T.  T is linked into no one
 *     else's `next` (n is being released): T is now the head of the chain.
 *   - failure: an arrival A swapped the tail after n (pred = n) and is about
 *     to store n.next = A.  The owner waits for that link (A is running: it
 *     is between two instructions of lock(), so this wait is a short spin,
 *     never a park).  Then the chain is n -> A [-> ...] and the owner
 *     proceeds as in the non-empty case: graft T.next = A and grant T (F),
 *     or push T back on the PS head and grant A (R) -- A is running and
 *     warm, and the lock is not left free, so work conservation holds.
 *   A third party cannot interfere: trylock only CASes nil -> node, which
 *   fails while n is the tail; the PS is owner-only; T's thread only reads
 *   its `locked` word until granted.
 *
 * Orderings
 *  - Acquire path and MCS hand-off: as in mcs.c (acq_rel tail swap, release
 *    link store, hand-off through ll_wake/ll_wait_while: release/acquire).
 *    Under spin-then-park the grant to the successor that linked itself is
 *    cr_grant_next's plain release store, read by the waiter's acquire
 *    load; why no wake-up is lost without the swap is argued in
 *    src/core/fastwake.c (an asymmetric fence on the parking side), and
 *    which grants may use it in cr.h, "Fast hand-over".  Not in the paper.
 *  - The owner's loads of succ.next and n.next (at unlock, and in
 *    cr_note_chain after it got the lock) are acquire, pairing with the
 *    arrivals' release link stores, so the owner sees initialised nodes.
 *  - T.next written by the owner before the grant is published by the
 *    grant's release (ll_wake), which T's acquire wait reads.
 *  - PS fields and counters are owner-only: every change of owner is a
 *    release/acquire hand-off (grant, or release CAS to nil followed by the
 *    next acquirer's acq_rel swap or CAS), so they need no atomics.
 *  - The tail CASes in (F)/(R) are acq_rel: release for the graft argument
 *    above, acquire for symmetry with the link wait.
 *
 * Policies: spin (MCSCR-S), spin-then-park (MCSCR-STP; the default, as in
 * the paper's best configuration), yield, preempt-aware (cr.h,
 * "Preempt-aware").  Passive threads wait on their own
 * node, so under spin-then-park they park after ~LIBLOCK_SPIN_NS and cost
 * nothing until admitted.  Not FIFO (unless P = 1); starvation-free in
 * expectation: the eldest passive thread is admitted after a geometric
 * number of unlocks of mean 1/P, so a thread at depth d of the PS waits
 * about d/P unlocks.
 */
#include "cr.h"

#include <string.h>

struct mcscr_lock {
    _Atomic(struct cr_node *) tail;
    /* owner-only from here on */
    LL_ALIGNED struct cr_list ps;
    struct cr_trial fair;
    double p;
    uint64_t grace; /* deficit grace window, cycles (cr.h) */
    uint64_t culls, grafts, reprovisions, steals, graces;
};

static int mcscr_init(liblock_t *l, const liblock_attr_t *attr)
{
    struct mcscr_lock *s = LL_STATE(l, struct mcscr_lock);
    s->p = ll_env_double("LIBLOCK_CR_FAIRNESS", 0.001, 0.0, 1.0);
    s->fair = cr_trial_make(s->p);
    s->grace = cr_grace_from_env();
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        (void)ll_fastwake_on(); /* settle it now, not in a hand-over */
    return 0;
}

static int mcscr_lock(liblock_t *l, void *vnode)
{
    struct mcscr_lock *s = LL_STATE(l, struct mcscr_lock);
    struct cr_node *n = vnode;
    uint32_t r;
    n->takeovers = 0;
    while ((r = cr_arrive(&s->tail, n, ll_policy(l), true, ll_aware(l))) == CR_RETRY)
        n->takeovers++; /* our pending grant was taken over: arrive again */
    if (r == CR_STOLE)
        s->steals++; /* we own the lock: owner-only counter */
    cr_note_chain(n); /* for (C) at unlock (cr.h, "The chain as the owner found it") */
    return 0;
}

static int mcscr_trylock(liblock_t *l, void *vnode)
{
    cr_note_none(vnode);
    return cr_trylock(&LL_STATE(l, struct mcscr_lock)->tail, vnode, ll_aware(l));
}

static int mcscr_unlock(liblock_t *l, void *vnode)
{
    struct mcscr_lock *s = LL_STATE(l, struct mcscr_lock);
    struct cr_node *n = vnode;
    const int pol = ll_policy(l);
    struct cr_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
    struct cr_node *ss = cr_seen_second(n, succ); /* succ.next when n got the lock */

    /* The trial is drawn only when the unlock could differ from MCS. */
    if ((s->ps.head || ss) && cr_trial_draw(&s->fair)) {
        /* (F) fair unlock: no culling; admit the eldest passive thread. */
        struct cr_node *t = cr_pop_tail(&s->ps);
        if (t) {
            s->grafts++;
            cr_graft(&s->tail, n, t, succ, pol);
            return 0;
        }
        if (!succ)
            goto plain;
        cr_grant_next(n, succ, pol);
        return 0;
    }

    if (succ) {
        if (ss && cr_cull_second(&s->tail, &s->ps, &s->culls, succ, ss, pol))
            return 0; /* (C') ss could not run now: culled, succ granted (cr.h) */
        if (ss && succ->takeovers < CR_MAX_TAKEOVERS) {
            /* (C) succ is intermediate: cull it (unless taken over too
             * often in this lock() call: cr.h, fairness). */
            cr_push_head(&s->ps, succ);
            s->culls++;
            cr_grant(ss, pol);
            return 0;
        }
        cr_grant_next(n, succ, pol);
        return 0;
    }

    if (s->ps.head) {
        /* (R) deficit: reprovision from the PS head -- unless it has parked
         * and a running arrival comes within the grace window (cr.h). */
        struct cr_node *a = cr_deficit_grace(&s->tail, n, s->ps.head, s->grace, pol);
        if (a) {
            s->graces++;
            cr_grant_next(n, a, pol); /* a = n.next, linked by itself */
            return 0;
        }
        cr_reprovision(&s->tail, n, cr_pop_head(&s->ps), &s->ps, &s->reprovisions, NULL, true, pol);
        return 0;
    }

plain:
    cr_release(&s->tail, n, pol);
    return 0;
}

static int mcscr_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct mcscr_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

static void mcscr_stats(const liblock_t *l, struct ll_stats *o)
{
    const struct mcscr_lock *s = l->_state;
    ll_stats_put(o, "culls", (int64_t)s->culls);
    ll_stats_put(o, "grafts", (int64_t)s->grafts);
    ll_stats_put(o, "reprovisions", (int64_t)s->reprovisions);
    ll_stats_put(o, "pendings", (int64_t)s->reprovisions); /* every reprovisioning grant is pending */
    ll_stats_put(o, "steals", (int64_t)s->steals);
    ll_stats_put(o, "graces", (int64_t)s->graces);
    ll_stats_put(o, "passive", (int64_t)s->ps.count);
    cr_stats_fairness(o, s->p);
    cr_stats_tail(o, atomic_load_explicit(&((struct mcscr_lock *)l->_state)->tail, memory_order_acquire));
}

const struct ll_ops ll_ops_mcscr = {
    .name = "mcscr",
    .description = "MCS with concurrency restriction: culls surplus waiters into a passive set, "
                   "admits the eldest with probability LIBLOCK_CR_FAIRNESS",
    .source = "Dice, Malthusian Locks, EuroSys 2017 (extended version, arXiv:1511.06035), section 4 (MCSCR)",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) | LL_POLICY_BIT(LIBLOCK_WAIT_PREEMPT_AWARE),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "surplus waiters are culled to a passive set where they sleep; a few running threads circulate the lock, the eldest passive one is re-admitted now and then; a waiter behind a thread of its own CPU sleeps at once, and a waiter that cannot run now (on the unlocker's CPU) is culled rather than granted",
    .state_size = sizeof(struct mcscr_lock),
    .node_size = sizeof(struct cr_node),
    .init = mcscr_init,
    .destroy = mcscr_destroy,
    .lock = mcscr_lock,
    .trylock = mcscr_trylock,
    .unlock = mcscr_unlock,
    .stats = mcscr_stats,
};
