/*
 * mcscrn - NUMA-aware MCSCR (the paper's MCSCRN).
 *
 * Source: D. Dice, "Malthusian Locks", EuroSys 2017; extended version
 * arXiv:1511.06035, section 9.1 "Future Work" (described in prose only).
 * Built on
 * mcscr.c: read its header first; the races of putting a list node into an
 * empty chain and the ordering argument are the same and are not repeated.
 *
 * Added state: the current home NUMA node and a remote list (owner-only,
 * like the passive set).  A waiter records its node, ll_cpu_node of the CPU
 * it arrives on (LIBLOCK_NUMA_MAP can assign nodes to CPUs, so the
 * behaviour can be exercised on a one-node machine), in its queue node.
 * The home node is the node of the first owner that unlocks with waiters.
 *
 * unlock(n), chain n -> succ -> ss -> ...:
 *   (F) with probability P (LIBLOCK_CR_FAIRNESS, default 1/1000):
 *       - if the remote list is not empty, its eldest member T decides the
 *         new home node (T's node): switch_home, then graft T after the
 *         owner and grant it (long-term fairness between nodes);
 *       - else as mcscr: graft the eldest passive thread, or hand over as
 *         MCS.
 *   (C) culling, at most one node per unlock, with ss as the owner saw it
 *       when it got the lock (as in mcscr; cr.h, "The chain as the owner
 *       found it"):
 *       - succ remote and intermediate: move succ to the remote list, grant
 *         ss;
 *       - succ home, ss remote and intermediate: move ss to the remote list
 *         (succ.next := ss.next -- safe by mcscr's I3: ss's successor has
 *         already linked itself, so only the owner writes succ.next now),
 *         grant succ;
 *       - succ home, ss home: surplus, as mcscr: succ to the passive set,
 *         grant ss;
 *       - succ is a remote tail (no ss seen) and the passive set holds a home
 *         waiter: CAS the tail back from succ to the owner's node (after
 *         n.next := nil); on success succ goes to the remote list and the
 *         unlock continues as a deficit (R), which admits the home waiter;
 *         if the CAS fails an arrival is linking behind succ and succ is
 *         granted;
 *       - otherwise grant succ.
 *   (R) deficit (the chain holds only the owner): reprovision from the
 *       passive set head (home, most recent); if the passive set is empty,
 *       from the remote list head (most recent remote waiter), switching
 *       home to its node.  Never release while either list holds a waiter.
 *   (M) otherwise plain MCS.
 * switch_home(H): the passive set (waiters of the old home) is spliced onto
 * the remote list's newest end (O(1)); then the remote list is walked once
 * (O(remote)) and the waiters of node H move to the passive set, in age
 * order.  This walk is the only non-constant step; it happens once per 1/P
 * unlocks on average, or on a deficit with an empty passive set.
 *
 * Reprovisioning grants: pending (mcscr's, cr.h) while the remote list is
 * empty, outright (the paper's) while it holds a waiter.
 *  - With one node, or every waiter on the home node, there is no locality
 *    to keep, and an outright grant makes the lock wait, held but idle, for
 *    a parked passive thread's wake-up while running threads queue behind
 *    it; with short critical sections and more threads than CPUs that
 *    stall dominates.  A pending grant lets the first arrival take the lock
 *    over instead, exactly as in mcscr, so on one node mcscrn is mcscr, in
 *    the code as in the algorithm.
 *  - While waiters of another node exist (the remote list is not empty), a
 *    pending grant would let whichever thread runs next -- of either node --
 *    take the lock over (even with take-overs keyed to the home node): that
 *    removes the wake-up stalls that let waiters of one node queue up to be
 *    culled, and successions within a node, which tests/test_mcscrn_numa.c
 *    checks, stop being the rule.  So then the grant is outright, as in the
 *    paper: mcscrn's purpose is that locality.
 *    The remote list is emptied only by a home switch that finds no other
 *    node's waiter, so with two nodes contending the grants stay outright.
 *  - An arrival may take over a pending grant whatever its node (it cannot
 *    read the owner-only home); the owner it becomes runs the same unlock,
 *    and its node's waiters are culled to the remote list as usual.
 *  - Take-overs are bounded as in mcscr (cr.h, fairness): a lock() call
 *    taken over CR_MAX_TAKEOVERS times is culled neither to the passive set
 *    nor to the remote list; it is granted when it is the owner's successor.
 * Fairness grafts (F) grant outright, as in mcscr.
 *
 * With one node (or every thread on the home node) MCSCRN is MCSCR.
 * P = 1: every unlock is fair; no list is ever filled: plain MCS (FIFO).
 *
 * Invariants (in addition to mcscr's): every waiter is in exactly one of
 * the chain, the passive set (all of the home node, except waiters whose
 * thread has since migrated) or the remote list (all of other nodes); the
 * lock is released only when both lists are empty.
 *
 * Policies: spin, yield, spin-then-park (default), preempt-aware, as mcscr;
 * as there, a
 * waiter behind a predecessor of its own CPU parks at once (cr.h,
 * "Same-CPU waiters").
 */
#include "cr.h"

#include <string.h>

struct mcscrn_lock {
    _Atomic(struct cr_node *) tail;
    /* owner-only from here on */
    LL_ALIGNED struct cr_list ps;
    struct cr_list remote;
    int home; /* -1 until the first contended unlock */
    struct cr_trial fair;
    double p;
    uint64_t grace; /* deficit grace window, cycles (cr.h) */
    uint64_t culls, remote_culls, grafts, reprovisions, home_changes, pendings, steals, graces;
};

static int mcscrn_init(liblock_t *l, const liblock_attr_t *attr)
{
    struct mcscrn_lock *s = LL_STATE(l, struct mcscrn_lock);
    s->p = ll_env_double("LIBLOCK_CR_FAIRNESS", 0.001, 0.0, 1.0);
    s->fair = cr_trial_make(s->p);
    s->grace = cr_grace_from_env();
    s->home = -1;
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        (void)ll_fastwake_on(); /* settle it now, not in a hand-over */
    return 0;
}

static inline int my_node(void)
{
    int cpu = ll_current_cpu();
    return cpu < 0 ? 0 : ll_cpu_node(cpu);
}

static int mcscrn_lock(liblock_t *l, void *vnode)
{
    struct mcscrn_lock *s = LL_STATE(l, struct mcscrn_lock);
    struct cr_node *n = vnode;
    uint32_t r;
    n->takeovers = 0;
    n->numa = my_node();
    while ((r = cr_arrive(&s->tail, n, ll_policy(l), true, ll_aware(l))) == CR_RETRY) {
        n->takeovers++; /* our pending grant was taken over: arrive again */
        n->numa = my_node();
    }
    if (r == CR_STOLE)
        s->steals++; /* we own the lock: owner-only counter */
    cr_note_chain(n); /* for the culling rules at unlock (cr.h, "The chain as the owner found it") */
    return 0;
}

static int mcscrn_trylock(liblock_t *l, void *vnode)
{
    struct cr_node *n = vnode;
    n->numa = my_node();
    cr_note_none(n);
    return cr_trylock(&LL_STATE(l, struct mcscrn_lock)->tail, n, ll_aware(l));
}

static inline struct cr_node *nxt(struct cr_node *n) { return atomic_load_explicit(&n->next, memory_order_acquire); }

static void switch_home(struct mcscrn_lock *s, int home)
{
    if (home == s->home)
        return;
    s->home = home;
    s->home_changes++;
    /* old home's passive waiters are remote now: splice them on the newest end */
    if (s->ps.head) {
        if (s->remote.head) {
            s->ps.tail->ps_next = s->remote.head;
            s->remote.head->ps_prev = s->ps.tail;
        } else {
            s->remote.tail = s->ps.tail;
        }
        s->remote.head = s->ps.head;
        s->remote.count += s->ps.count;
        s->ps.head = s->ps.tail = NULL;
        s->ps.count = 0;
    }
    /* the new home's remote waiters become passive, eldest first */
    for (struct cr_node *x = s->remote.tail, *prev; x; x = prev) {
        prev = x->ps_prev;
        if (x->numa == home) {
            cr_remove(&s->remote, x);
            cr_push_head(&s->ps, x);
        }
    }
}

static int mcscrn_unlock(liblock_t *l, void *vnode)
{
    struct mcscrn_lock *s = LL_STATE(l, struct mcscrn_lock);
    struct cr_node *n = vnode;
    const int pol = ll_policy(l);
    struct cr_node *succ = nxt(n);
    struct cr_node *ss = cr_seen_second(n, succ); /* succ.next when n got the lock */
    if (LL_UNLIKELY(s->home < 0))
        s->home = n->numa;

    if ((s->ps.head || s->remote.head || ss) && cr_trial_draw(&s->fair)) {
        /* (F) fair unlock */
        struct cr_node *t = cr_pop_tail(&s->remote);
        if (t)
            switch_home(s, t->numa);
        else
            t = cr_pop_tail(&s->ps);
        if (t) {
            s->grafts++;
            cr_graft(&s->tail, n, t, succ, pol);
            return 0;
        }
        if (succ) {
            cr_grant_next(n, succ, pol);
            return 0;
        }
        goto plain;
    }

    if (succ) {
        if (ss && succ->takeovers < CR_MAX_TAKEOVERS) {
            if (succ->numa != s->home) {
                cr_push_head(&s->remote, succ);
                s->remote_culls++;
                cr_grant(ss, pol);
                return 0;
            }
            if (ss->numa != s->home) {
                struct cr_node *sss = nxt(ss);
                if (sss && ss->takeovers < CR_MAX_TAKEOVERS) {
                    cr_relink(succ, sss); /* sss linked itself to ss */
                    cr_push_head(&s->remote, ss);
                    s->remote_culls++;
                }
                cr_grant(succ, pol);
                return 0;
            }
            if (cr_cull_second(&s->tail, &s->ps, &s->culls, succ, ss, pol))
                return 0; /* ss could not run now: culled, succ granted (cr.h, "Culling the second waiter") */
            cr_push_head(&s->ps, succ);
            s->culls++;
            cr_grant(ss, pol);
            return 0;
        }
        if (!ss && s->ps.head && succ->numa != s->home && succ->takeovers < CR_MAX_TAKEOVERS) {
            /* succ is a remote tail and a home waiter is passive: take
             * succ off the chain by moving the tail back to our node
             * (n.next := nil first: nobody else writes it until an arrival
             * gets n from the tail, which the release CAS orders after),
             * then reprovision the home waiter as on a deficit. */
            atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
            struct cr_node *expect = succ;
            if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, n, memory_order_acq_rel,
                                                        memory_order_acquire)) {
                cr_push_head(&s->remote, succ);
                s->remote_culls++;
                succ = NULL;
                goto deficit;
            }
            /* an arrival queued behind succ meanwhile: n.next is still
             * ours to restore (n is not the tail), and succ goes next */
            atomic_store_explicit(&n->next, succ, memory_order_relaxed);
        }
        cr_grant_next(n, succ, pol); /* succ linked itself to n */
        return 0;
    }

deficit:
    if (s->ps.head || s->remote.head) {
        /* (R) deficit: reprovision, preferring the home node -- unless the
         * home candidate has parked and a running arrival comes within the
         * grace window (cr.h; only while no remote waiter is known, as for
         * pending grants: with two nodes contending the paper's order holds) */
        if (s->ps.head && !s->remote.head) {
            struct cr_node *a = cr_deficit_grace(&s->tail, n, s->ps.head, s->grace, pol);
            if (a) {
                s->graces++;
                cr_grant_next(n, a, pol); /* a = n.next, linked by itself */
                return 0;
            }
        }
        struct cr_node *h = cr_pop_head(&s->ps);
        if (!h) {
            h = cr_pop_head(&s->remote);
            switch_home(s, h->numa);
        }
        /* pending only while no other node's waiter is known (header);
         * if an arrival races in, h goes to the passive set: it is home now */
        cr_reprovision(&s->tail, n, h, &s->ps, &s->reprovisions, &s->pendings, !s->remote.head, pol);
        return 0;
    }

plain:
    cr_release(&s->tail, n, pol);
    return 0;
}

static int mcscrn_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct mcscrn_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

static void mcscrn_stats(const liblock_t *l, struct ll_stats *o)
{
    struct mcscrn_lock *s = l->_state;
    ll_stats_put(o, "culls", (int64_t)s->culls);
    ll_stats_put(o, "remote_culls", (int64_t)s->remote_culls);
    ll_stats_put(o, "grafts", (int64_t)s->grafts);
    ll_stats_put(o, "reprovisions", (int64_t)s->reprovisions);
    ll_stats_put(o, "home_changes", (int64_t)s->home_changes);
    ll_stats_put(o, "pendings", (int64_t)s->pendings);
    ll_stats_put(o, "steals", (int64_t)s->steals);
    ll_stats_put(o, "graces", (int64_t)s->graces);
    ll_stats_put(o, "passive", (int64_t)s->ps.count);
    ll_stats_put(o, "remote", (int64_t)s->remote.count);
    ll_stats_put(o, "home", (int64_t)s->home);
    cr_stats_fairness(o, s->p);
    cr_stats_tail(o, atomic_load_explicit(&s->tail, memory_order_acquire));
}

const struct ll_ops ll_ops_mcscrn = {
    .name = "mcscrn",
    .description = "NUMA-aware MCSCR: culls waiters of other NUMA nodes into a remote list, "
                   "changes home node with probability LIBLOCK_CR_FAIRNESS",
    .source = "Dice, Malthusian Locks, EuroSys 2017 (extended version, arXiv:1511.06035), section 9.1 (MCSCRN)",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) | LL_POLICY_BIT(LIBLOCK_WAIT_PREEMPT_AWARE),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "surplus waiters are culled to a passive set where they sleep; a few running threads circulate the lock, the eldest passive one is re-admitted now and then; a waiter behind a thread of its own CPU sleeps at once, and a waiter that cannot run now (on the unlocker's CPU) is culled rather than granted",
    .state_size = sizeof(struct mcscrn_lock),
    .node_size = sizeof(struct cr_node),
    .init = mcscrn_init,
    .destroy = mcscrn_destroy,
    .lock = mcscrn_lock,
    .trylock = mcscrn_trylock,
    .unlock = mcscrn_unlock,
    .stats = mcscrn_stats,
};
