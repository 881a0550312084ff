/*
 * lifocr - LIFO lock with concurrency restriction (the paper's LIFO-CR).
 *
 * Source: D. Dice, "Malthusian Locks", EuroSys 2017; extended version
 * arXiv:1511.06035, appendix A.2 "LIFO-CR".
 *
 * The lock word `top` is the stack pointer of an explicit stack of waiting
 * nodes:  FREE (nil) = unlocked;  HELD (1) = held, no waiter;  otherwise
 * the most recently pushed waiter (held, with waiters).
 *   lock:    if top == FREE: CAS(FREE -> HELD) and own the lock;
 *            else n.next = top; CAS(top -> n) (push) and wait on n.locked.
 *   unlock:  if top == HELD: CAS(HELD -> FREE) and done;
 *            (F) with probability P (LIBLOCK_CR_FAIRNESS, default 1/1000,
 *                Bernoulli trial on the thread's xorshift) walk to the eldest
 *                waiter E (the node whose next is HELD), unlink it (its
 *                predecessor's next := HELD) and grant it;
 *            otherwise pop: CAS(top, h -> h.next) and grant h.  If that CAS
 *            fails, newer threads have pushed; the constant-time variant
 *            (the default, LIBLOCK_LIFOCR_CONSTANT_TIME=1) does not retry:
 *            with v the top the failed CAS returned, it unlinks w = v.next
 *            (v.next := w.next) and grants w -- "plausibly LIFO", as the
 *            paper puts it: w is the second most recent waiter.  With
 *            LIBLOCK_LIFOCR_CONSTANT_TIME=0 the pop retries on the new top
 *            (strict LIFO, unbounded retries under a flood of arrivals).
 * The active circulating set is the owner, the threads in their
 * non-critical sections and the top of the stack; the passive set is the
 * deeper stack.  P = 1 always grants the eldest: FIFO.  P = 0: pure LIFO,
 * no long-term fairness (a deep waiter can starve while arrivals continue).
 * The eldest walk is O(depth), done once per 1/P unlocks on average.
 *
 * Invariants
 *  I1 only the owner pops or unlinks (single consumer), so there is no ABA:
 *     a node cannot leave the stack and come back while the owner looks at
 *     it, because its thread cannot re-push before it has been granted and
 *     has released the lock, i.e. after this owner's unlock.
 *  I2 a node's `next` is written by its own thread before the push CAS,
 *     and afterwards only by the owner (unlink of the eldest or of w).
 *     Arrivals read only `top`, never an existing node's `next`, so the
 *     owner's unlink writes race with nobody.
 *  I3 top != FREE while the lock is held: a grant never changes `top`
 *     except by the pop CAS, which replaces h by h.next (a node or HELD).
 *     So the lock is released only from HELD, with no waiter: work
 *     conserving.
 *  I4 in the constant-time variant v != h and h is still somewhere below v
 *     (only the owner removes nodes), so w = v.next is a node, never HELD.
 *
 * Orderings: pushes are release CASes, and the owner reads `top` with an
 * acquire load (or a CAS whose failure ordering is acquire): the pushes
 * form a release sequence of RMWs on `top`, so the owner sees every pushed
 * node's `next` and initial `locked`.  The grant is ll_wake (release) and
 * the waiter's ll_wait_while returns after an acquire load.  The release
 * CAS HELD -> FREE pairs with the next acquirer's acquire CAS FREE -> HELD.
 *
 * Pending grants (not in the paper; the same idea as mcscr's, cr.h).  With
 * more threads than CPUs the popped waiter has usually parked, and an
 * outright grant makes the lock wait, held but idle, for its wake-up while
 * running threads pile up behind it.  So when the
 * waiter w the owner takes off the stack sleeps (its word carries the
 * parked bit), the owner publishes w in `pend` (release) and wakes w with
 * LIFO_CHECK instead of 0.  Ownership then belongs to whoever first CASes
 * pend from w to nil (acquire): w itself when it runs, or an arrival that
 * finds pend set on its slow path before pushing (take_pending).  The loser
 * w pushes its node again (it is on no list: the owner removed it).  A
 * spinning w is granted outright (it takes the lock at once; with two
 * threads the hand-off stays alternating), and so is a lock() call taken
 * over CR_MAX_TAKEOVERS times (bounded, as in mcscr).
 *  - The lock is never free meanwhile: top is not touched by a pending
 *    grant or a take-over (it stays HELD or a stack), and pend != nil only
 *    while the lock is held pending.  Arrivals' fast path (FREE -> HELD)
 *    fails, so they reach take_pending.  Work conserving, as I3 says.
 *  - No ABA on pend: only nodes are stored there and the CAS compares the
 *    word itself, never a node's memory, so a stale read of pend is
 *    harmless: if the CAS finds the same node pending again, that is a
 *    current pending grant, and taking it over is legitimate.
 *  - Orderings: the owner's release store of pend follows its critical
 *    section and owner-only edits (counters, unlinks), and both possible
 *    new owners read pend with an acquire CAS.  w learns it lost only
 *    through its own failed CAS, so the take-over needs no wake-up; the
 *    owner's ll_wake (swap, so the parked bit is seen) woke w already.
 *  - The thread that made a pending grant does not take it over itself
 *    (pend_by): otherwise an unlocker that comes straight back would take
 *    back every grant it made to a sleeping waiter, and two threads would
 *    no longer alternate.  pend_by is a hint read without synchronisation:
 *    a stale value can only make an arrival skip or make a take-over,
 *    and either is safe, because ownership is decided by the CAS on pend.
 *  - trylock does not take over (EBUSY while the lock is held pending).
 *
 * Fast hand-over (not in the paper; src/core/fastwake.c has the argument).
 * Under spin-then-park the grant to a waiter w that has not said it parks
 * is a plain store of 0 followed by a read of w's announce word
 * (n.self_parked, in the line of w.locked): a waiter that comes to park
 * sets it and runs the asymmetric fence first (ll_wait_while_announced),
 * so either it sees the grant or the owner sees the announcement and wakes
 * it.  The word is also what the owner reads to choose between an outright
 * and a pending grant, instead of the parked bit.  A waiter that will park
 * at once (the same-CPU rule below) sets it before it pushes, with no
 * fence: the owner then always takes the pending path, a swap that sees
 * the parked bit, or, for a call taken over CR_MAX_TAKEOVERS times, the
 * plain store followed by a futex_wake it cannot skip (it read the word
 * as 1).  The word is reset before every push, and the push's release CAS
 * and the owner's acquire load of top order the reset before the owner's
 * read.  The owner's read comes after its grant, when w may already have
 * taken the lock, left and reused its node: a stale read, which costs at
 * most a spurious futex_wake, and which reads a node of this algorithm
 * (internal.h, "One algorithm per node").  Everything else (the eldest
 * hand-off, pending grants, the spin and yield policies,
 * LIBLOCK_FASTWAKE=0) keeps the swap.  The plain store
 * spares the owner a locked instruction on the line the spinning waiter
 * holds, so the grant does not stall for that line's transfer.
 *
 * Same CPU (not in the paper; cr.h, "Same-CPU waiters", has the
 * argument).  An unlocker that grants the lock to a waiter of its own CPU
 * remembers it (granted_same_cpu, thread-local); its next lock() of the
 * same lock, if it must wait, parks at once under spin-then-park instead of
 * spinning: the grantee cannot run on that CPU while the unlocker spins
 * there, and the unlocker, pushed on top of the stack, is the next to be
 * granted.  Each node records its thread's CPU when it pushes (a hint).
 *
 * Policies: spin, yield, spin-then-park (default; the paper notes LIFO-CR
 * suits spin-then-park because the top of the stack, which runs next, is
 * the thread most likely to be still spinning).  Not FIFO (unless P = 1).
 */
#include "cr.h"

#include <string.h>

#define LIFO_FREE ((struct cr_node *)0)
#define LIFO_HELD ((struct cr_node *)1)

struct lifocr_lock {
    _Atomic(struct cr_node *) top;
    _Atomic(struct cr_node *) pend; /* pending grantee, or nil (same line as top: arrivals read both) */
    _Atomic(void *) pend_by;        /* the thread that made the pending grant (a hint, see header) */
    /* owner-only */
    LL_ALIGNED struct cr_trial fair;
    double p;
    bool constant_time;
    uint64_t grafts, bypass_unlinks, pendings, steals;
};

#define LIFO_CHECK 2u /* waiting word: you were granted pending: claim through pend */

static int lifocr_init(liblock_t *l, const liblock_attr_t *attr)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    s->p = ll_env_double("LIBLOCK_CR_FAIRNESS", 0.001, 0.0, 1.0);
    s->fair = cr_trial_make(s->p);
    s->constant_time = ll_env_long("LIBLOCK_LIFOCR_CONSTANT_TIME", 1, 0, 1) != 0;
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        (void)ll_fastwake_on(); /* settle it now, not in a hand-over */
    return 0;
}

/* Take over a pending grant, if there is one and we did not make it: the
 * lock is then ours. */
static inline bool take_pending(struct lifocr_lock *s)
{
    struct cr_node *p = atomic_load_explicit(&s->pend, memory_order_relaxed);
    return p && atomic_load_explicit(&s->pend_by, memory_order_relaxed) != (void *)ll_self() &&
           atomic_compare_exchange_strong_explicit(&s->pend, &p, NULL, memory_order_acquire, memory_order_relaxed);
}

/* The lock this thread last granted to a waiter of its own CPU (see
 * "Same CPU" in the header); a hint, cleared by the next lock(). */
static __thread const struct lifocr_lock *granted_same_cpu LL_TLS_IE;

static int lifocr_lock(liblock_t *l, void *vnode)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    struct cr_node *n = vnode;
    n->takeovers = 0;
    atomic_store_explicit(&n->cpu, ll_current_cpu(), memory_order_relaxed);
    int wpol = ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK && granted_same_cpu == s ? LIBLOCK_WAIT_PARK : ll_policy(l);
    granted_same_cpu = NULL;
    /* Fast hand-over (header): a waiter that will park at once says so in
     * advance, so the owner grants it pending without looking further; one
     * that spins first announces only if it comes to park. */
    const bool announced = wpol == LIBLOCK_WAIT_SPIN_THEN_PARK && ll_fastwake_on();
    for (;;) {
        atomic_store_explicit(&n->locked, 1, memory_order_relaxed);
        atomic_store_explicit(&n->self_parked, wpol == LIBLOCK_WAIT_PARK, memory_order_relaxed);
        struct cr_node *h = atomic_load_explicit(&s->top, memory_order_relaxed);
        for (;;) {
            if (h == LIFO_FREE) {
                if (atomic_compare_exchange_weak_explicit(&s->top, &h, LIFO_HELD, memory_order_acquire,
                                                          memory_order_relaxed))
                    return 0;
                continue;
            }
            if (take_pending(s)) {
                s->steals++; /* we own the lock: owner-only counter */
                return 0;
            }
            atomic_store_explicit(&n->next, h, memory_order_relaxed);
            if (atomic_compare_exchange_weak_explicit(&s->top, &h, n, memory_order_release, memory_order_relaxed))
                break;
        }
        if ((announced ? ll_wait_while_announced(&n->locked, 1, wpol, &n->self_parked)
                       : ll_wait_while(&n->locked, 1, wpol)) != LIFO_CHECK)
            return 0; /* granted outright */
        struct cr_node *me = n;
        if (atomic_compare_exchange_strong_explicit(&s->pend, &me, NULL, memory_order_acquire,
                                                    memory_order_relaxed))
            return 0; /* claimed our pending grant */
        n->takeovers++; /* an arrival took it over: push again */
    }
}

static int lifocr_trylock(liblock_t *l, void *vnode)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    struct cr_node *expect = LIFO_FREE;
    return atomic_compare_exchange_strong_explicit(&s->top, &expect, LIFO_HELD, memory_order_acquire,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

static inline struct cr_node *next_of(struct cr_node *n)
{
    return atomic_load_explicit(&n->next, memory_order_relaxed);
}

/* Hand the lock to w, which the owner has just taken off the stack: pending
 * (an arrival may take it over until w claims it) if w sleeps, outright if
 * it is still spinning (it takes the lock at once: with two threads the
 * hand-off alternates, as the paper's LIFO-CR does) or if its lock() call
 * has been taken over CR_MAX_TAKEOVERS times already. */
static inline void grant_popped(struct lifocr_lock *s, struct cr_node *w, int pol)
{
    if (ll_policy_behind(pol, atomic_load_explicit(&w->cpu, memory_order_relaxed), ll_current_cpu()) !=
        pol)
        granted_same_cpu = s; /* w shares our CPU (only noted under spin-then-park, the only user) */
    if (pol == LIBLOCK_WAIT_SPIN_THEN_PARK && ll_fastwake_on()) {
        if (!atomic_load_explicit(&w->self_parked, memory_order_relaxed) || w->takeovers >= CR_MAX_TAKEOVERS) {
            ll_wake_announced(&w->locked, 0, &w->self_parked);
            return;
        }
    } else if (!(atomic_load_explicit(&w->locked, memory_order_relaxed) & LL_PARKED) ||
               w->takeovers >= CR_MAX_TAKEOVERS) {
        ll_wake(&w->locked, 0, pol);
        return;
    }
    s->pendings++; /* before the grant: then the lock is no longer ours */
    atomic_store_explicit(&s->pend_by, (void *)ll_self(), memory_order_relaxed);
    atomic_store_explicit(&s->pend, w, memory_order_release);
    ll_wake(&w->locked, LIFO_CHECK, pol);
}

static int lifocr_unlock(liblock_t *l, void *vnode)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    const int pol = ll_policy(l);
    struct cr_node *h = atomic_load_explicit(&s->top, memory_order_acquire);
    if (h == LIFO_HELD) {
        if (atomic_compare_exchange_strong_explicit(&s->top, &h, LIFO_FREE, memory_order_release,
                                                    memory_order_acquire))
            return 0;
        /* h is now the node an arrival pushed */
    }
    if (cr_trial_draw(&s->fair)) {
        /* (F) eldest hand-off: walk to the bottom of the stack. */
        struct cr_node *prev = NULL, *e = h;
        for (struct cr_node *x; (x = next_of(e)) != LIFO_HELD;) {
            prev = e;
            e = x;
        }
        if (prev) {
            atomic_store_explicit(&prev->next, LIFO_HELD, memory_order_relaxed);
            s->grafts++;
            ll_wake(&e->locked, 0, pol);
            return 0;
        }
        /* the only waiter is the eldest: an ordinary pop */
    }
    for (;;) {
        struct cr_node *v = h;
        if (atomic_compare_exchange_strong_explicit(&s->top, &v, next_of(h), memory_order_acq_rel,
                                                    memory_order_acquire)) {
            grant_popped(s, h, pol);
            return 0;
        }
        if (s->constant_time) {
            struct cr_node *w = next_of(v);
            atomic_store_explicit(&v->next, next_of(w), memory_order_relaxed);
            s->bypass_unlinks++;
            grant_popped(s, w, pol);
            return 0;
        }
        h = v;
    }
}

static int lifocr_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct lifocr_lock)->top, memory_order_acquire) ? EBUSY : 0;
}

static void lifocr_stats(const liblock_t *l, struct ll_stats *o)
{
    struct lifocr_lock *s = l->_state;
    ll_stats_put(o, "grafts", (int64_t)s->grafts);
    ll_stats_put(o, "pendings", (int64_t)s->pendings);
    ll_stats_put(o, "steals", (int64_t)s->steals);
    cr_stats_fairness(o, s->p);
    cr_stats_tail(o, atomic_load_explicit(&s->top, memory_order_acquire));
}

const struct ll_ops ll_ops_lifocr = {
    .name = "lifocr",
    .description = "LIFO stack lock with concurrency restriction: most recent waiter first, eldest with "
                   "probability LIBLOCK_CR_FAIRNESS, constant-time unlock",
    .source = "Dice, Malthusian Locks, EuroSys 2017 (extended version, arXiv:1511.06035), appendix A.2 (LIFO-CR)",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "the most recent waiters circulate the lock (LIFO); older waiters sleep; the eldest gets a hand-off now and then; an unlocker that granted a waiter of its own CPU sleeps at once in its next lock",
    .state_size = sizeof(struct lifocr_lock),
    .node_size = sizeof(struct cr_node),
    .init = lifocr_init,
    .destroy = lifocr_destroy,
    .lock = lifocr_lock,
    .trylock = lifocr_trylock,
    .unlock = lifocr_unlock,
    .stats = lifocr_stats,
};
