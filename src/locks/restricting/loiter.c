/*
 * loiter - LOITER (Locking: Outer-Inner with ThRottling).
 *
 * Source: D. Dice, "Malthusian Locks", EuroSys 2017; extended version
 * arXiv:1511.06035, appendix A.1 "LOITER Locks".
 *
 * Structure: an outer test-and-set word, an inner MCS queue lock and at most
 * one standby thread (the holder of the inner lock).
 *   lock:  fast path -- try the outer word with a bounded arrival spin
 *          (LIBLOCK_LOITER_SPIN_NS, default 5000 ns) with randomized
 *          exponential back-off; a thread whose CAS fails 8 times gives up
 *          early ("self-culling": a busy lock is circulating well without
 *          it).  Slow path -- take the inner MCS lock (wait on one's own
 *          node under the lock's policy); the inner owner is the standby:
 *          it waits on the outer word itself (spin, then park under
 *          spin-then-park) and takes it when it sees it free, or receives
 *          it by direct hand-off.  The standby keeps the inner lock until it
 *          releases the outer one, so the inner queue is the passive set
 *          and admission from it is FIFO.
 *  unlock: an owner from the slow path first releases the inner lock (its
 *          MCS successor becomes the new standby), then, as every owner,
 *          the outer word:
 *          - direct hand-off: if a standby exists and has been bypassed
 *            PATIENCE times (it is "impatient"), the owner writes
 *            HANDOFF into the outer word instead of FREE; the lock stays
 *            held and belongs to the standby, which is woken if parked.
 *          - otherwise swap FREE in (competitive succession: arrivals may
 *            barge).  If the standby was parked (policy bit set), defer the
 *            unpark: watch the word for up to LIBLOCK_LOITER_DEFER_NS
 *            (default 1000 ns); if another thread takes the lock meanwhile,
 *            hand it the duty to wake the standby (set the parked bit on its
 *            held value) and skip the unpark; only if the lock stays free,
 *            wake the standby.
 *
 * Patience measure (the paper leaves it open): bypasses, counted in
 * admissions -- the number of outer acquisitions since the standby took the
 * inner lock.  PATIENCE = LIBLOCK_LOITER_PATIENCE if set, else
 * round(1 / LIBLOCK_CR_FAIRNESS) (default 1000, the same scale as MCSCR's
 * 1/1000 trial); LIBLOCK_CR_FAIRNESS = 0 means never hand off.  Counting
 * admissions rather than time makes the fairness bound independent of
 * preemption and machine speed: a standby is admitted after at most
 * PATIENCE + 1 admissions of others, and a thread at position k of the
 * inner queue after at most k * (PATIENCE + 2) (inner FIFO), plus whatever
 * passes while it is in its bounded arrival spin.
 *
 * Outer word values: FREE 0, HELD 1, HANDOFF 2 (held, owned by the
 * standby, which may not have noticed yet); bit 31 (LL_PARKED, the policy's
 * bit) means "the standby sleeps on this word: whoever frees it must wake
 * it".  The standby waits with ll_wait_while(outer, HELD): it parks by CAS
 * HELD -> HELD|PARKED, so the bit only ever sits on HELD.
 *
 * Invariants and the no-lost-wake-up argument
 *  I1 at most one standby: it is the inner lock's owner.
 *  I2 HANDOFF is consumed at once: the standby that reads it stores HELD
 *     before returning from lock(), so a later standby cannot mistake it
 *     for its own hand-off.
 *  I2b standby_present is 1 only between the standby's taking the inner lock
 *     and its taking the outer word (it clears it while holding the
 *     outer word).  So an owner that reads 1 knows the standby has not yet
 *     taken the outer word and will see HANDOFF.
 *  I3 if the standby sleeps in the kernel on HELD|PARKED, then either the
 *     word still carries PARKED (the next swap of FREE or HANDOFF sees it
 *     and wakes it), or exactly one deferring unlocker holds the duty (it
 *     swapped FREE in and saw PARKED).  That unlocker keeps the duty until
 *     it (a) sees HELD and CASes PARKED back onto it (the duty is back in
 *     the word), (b) sees HANDOFF -- the standby was given the lock while
 *     asleep -- and wakes it, (c) sees the word already carrying PARKED
 *     (the standby woke and parked again itself), or (d) times out and
 *     wakes it.  The owner that writes HANDOFF with ll_wake wakes the
 *     standby if the bit is in the word; if the bit was taken by a
 *     deferring unlocker, case (b) covers it.  A stray PARKED bit (the
 *     standby woke spuriously and moved on) only costs one futile
 *     futex_wake.
 *
 * Orderings: acquiring the outer word is an acquire CAS (or the standby's
 * acquire load of HANDOFF, written by ll_wake's release swap); releasing it
 * is a release swap.  The inner lock is mcs.c's protocol.  The admissions
 * counter is written only by outer owners (ordered by the lock) and read
 * racily by the standby, which only makes the patience check approximate
 * by the race window.  standby_start is written before standby_present
 * (release) and read after it (acquire).
 *
 * destroy reports EBUSY while the outer word is held, the inner queue is not
 * empty, or a thread is in the arrival spin (`arriving`, counted from its
 * first failed attempt until its node is in the inner queue; contended path
 * only).  A thread between its first failed CAS and the increment is not
 * seen (destroy racing with the start of a lock() is undefined).
 *
 * Policies: spin-then-park (default: inner waiters and the standby spin
 * about one context switch, then park), spin, yield.  Arrival spinning is
 * always a pause loop (it is bounded).  Not FIFO: arrivals barge.
 */
#include "cr.h"

#include <string.h>

#define OUT_FREE 0u
#define OUT_HELD 1u
#define OUT_HANDOFF 2u

struct lo_node {
    _Atomic(struct lo_node *) next;
    _Atomic uint32_t locked;
    int slow; /* 1 = holds the inner lock too */
};
_Static_assert(sizeof(struct lo_node) <= LL_NODE_BYTES, "loiter node too large");

struct loiter_lock {
    _Atomic uint32_t outer;
    LL_ALIGNED _Atomic(struct lo_node *) inner_tail;
    LL_ALIGNED _Atomic uint32_t standby_present;
    _Atomic uint64_t standby_start;
    _Atomic uint64_t admissions; /* outer acquisitions; written by the owner */
    LL_ALIGNED _Atomic uint32_t arriving; /* threads in the arrival spin or on their way into the inner queue */
    uint64_t handoffs;           /* owner-only */
    /* parameters, fixed at init */
    uint64_t patience;           /* 0 = never hand off */
    uint64_t spin_cycles, defer_cycles;
    double p;
};

#define LOITER_MAX_CAS_FAILS 8

static int loiter_init(liblock_t *l, const liblock_attr_t *attr)
{
    struct loiter_lock *s = LL_STATE(l, struct loiter_lock);
    s->p = ll_env_double("LIBLOCK_CR_FAIRNESS", 0.001, 0.0, 1.0);
    long dflt = s->p > 0 ? (long)(1.0 / s->p + 0.5) : 0;
    s->patience = (uint64_t)ll_env_long("LIBLOCK_LOITER_PATIENCE", dflt, 0, 1000000000L);
    s->spin_cycles = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_LOITER_SPIN_NS", 5000, 0, 1000000000L));
    s->defer_cycles = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_LOITER_DEFER_NS", 1000, 0, 1000000000L));
    return 0;
}

static inline bool outer_try(struct loiter_lock *s)
{
    uint32_t v = OUT_FREE;
    return atomic_compare_exchange_strong_explicit(&s->outer, &v, OUT_HELD, memory_order_acquire,
                                                   memory_order_relaxed);
}

static inline void admitted(struct loiter_lock *s)
{
    atomic_store_explicit(&s->admissions, atomic_load_explicit(&s->admissions, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

static void inner_lock(struct loiter_lock *s, struct lo_node *n, int pol)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, 1, memory_order_relaxed);
    struct lo_node *pred = atomic_exchange_explicit(&s->inner_tail, n, memory_order_acq_rel);
    if (pred) {
        atomic_store_explicit(&pred->next, n, memory_order_release);
        ll_wait_while(&n->locked, 1, pol);
    }
}

static void inner_unlock(struct loiter_lock *s, struct lo_node *n, int pol)
{
    struct lo_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
    if (!succ) {
        struct lo_node *expect = n;
        if (atomic_compare_exchange_strong_explicit(&s->inner_tail, &expect, NULL, memory_order_release,
                                                    memory_order_relaxed))
            return;
        while (!(succ = atomic_load_explicit(&n->next, memory_order_acquire)))
            cr_link_wait_step(pol);
    }
    ll_wake(&succ->locked, 0, pol);
}

static int loiter_lock(liblock_t *l, void *vnode)
{
    struct loiter_lock *s = LL_STATE(l, struct loiter_lock);
    struct lo_node *n = vnode;
    const int pol = ll_policy(l);
    n->slow = 0;

    /* arrival phase: bounded global spin with randomized back-off */
    if (outer_try(s)) {
        admitted(s);
        return 0;
    }
    ll_thread_t *self = ll_self();
    atomic_fetch_add_explicit(&s->arriving, 1, memory_order_relaxed);
    uint64_t start = ll_cycles();
    unsigned window = 2, fails = 0;
    while (ll_cycles() - start < s->spin_cycles) {
        uint32_t v = atomic_load_explicit(&s->outer, memory_order_relaxed);
        if (v == OUT_FREE) {
            if (outer_try(s)) {
                atomic_fetch_sub_explicit(&s->arriving, 1, memory_order_relaxed);
                admitted(s);
                return 0;
            }
            if (++fails >= LOITER_MAX_CAS_FAILS)
                break; /* self-culling */
        }
        unsigned delay = self ? (unsigned)(ll_rand(self) % window) + 1 : window;
        for (unsigned i = 0; i < delay; i++)
            ll_pause();
        if (window < 64)
            window <<= 1;
    }

    /* slow path: join the passive set (inner queue); its head is the standby */
    n->slow = 1;
    inner_lock(s, n, pol);
    atomic_store_explicit(&s->standby_start, atomic_load_explicit(&s->admissions, memory_order_relaxed),
                          memory_order_relaxed);
    atomic_store_explicit(&s->standby_present, 1, memory_order_release);
    /* inner_tail now shows us; decremented after standby_present so the
     * window between taking the inner lock and announcing the standby stays
     * as short as it was (test_malthus's patience check watches it) */
    atomic_fetch_sub_explicit(&s->arriving, 1, memory_order_relaxed);
    for (;;) {
        uint32_t v = atomic_load_explicit(&s->outer, memory_order_acquire) & ~LL_PARKED;
        if (v == OUT_HANDOFF) {
            /* Direct hand-off: the lock is ours.  Turn HANDOFF back into
             * HELD before anything else, or the next standby (ours is
             * released before the outer word) would read our HANDOFF as
             * its own.  Nobody else writes the word while it is HANDOFF:
             * arrivals CAS only FREE, deferring unlockers only HELD. */
            atomic_store_explicit(&s->outer, OUT_HELD, memory_order_relaxed);
            break;
        }
        if (v == OUT_FREE) {
            if (outer_try(s))
                break;
            continue;
        }
        ll_wait_while(&s->outer, OUT_HELD, pol);
    }
    atomic_store_explicit(&s->standby_present, 0, memory_order_relaxed);
    admitted(s);
    return 0;
}

static int loiter_trylock(liblock_t *l, void *vnode)
{
    struct loiter_lock *s = LL_STATE(l, struct loiter_lock);
    struct lo_node *n = vnode;
    n->slow = 0;
    if (!outer_try(s))
        return EBUSY;
    admitted(s);
    return 0;
}

static int loiter_unlock(liblock_t *l, void *vnode)
{
    struct loiter_lock *s = LL_STATE(l, struct loiter_lock);
    struct lo_node *n = vnode;
    const int pol = ll_policy(l);
    if (n->slow)
        inner_unlock(s, n, pol);

    if (s->patience && atomic_load_explicit(&s->standby_present, memory_order_acquire)) {
        uint64_t waited = atomic_load_explicit(&s->admissions, memory_order_relaxed) -
                          atomic_load_explicit(&s->standby_start, memory_order_relaxed);
        if (waited >= s->patience) {
            s->handoffs++;
            ll_wake(&s->outer, OUT_HANDOFF, pol); /* stays held; the standby owns it */
            return 0;
        }
    }

    uint32_t old = atomic_exchange_explicit(&s->outer, OUT_FREE, memory_order_acq_rel);
    if (!(old & LL_PARKED))
        return 0;
    /* The standby sleeps: defer the unpark, and avoid it if someone else
     * takes the lock meanwhile (I3). */
    uint64_t start = ll_cycles();
    while (ll_cycles() - start < s->defer_cycles) {
        uint32_t v = atomic_load_explicit(&s->outer, memory_order_relaxed);
        if (v & LL_PARKED)
            return 0; /* (c) the duty is in the word again */
        if (v == OUT_HELD) {
            if (atomic_compare_exchange_strong_explicit(&s->outer, &v, OUT_HELD | LL_PARKED, memory_order_relaxed,
                                                        memory_order_relaxed))
                return 0; /* (a) the new owner will wake it */
            continue;
        }
        if (v == OUT_HANDOFF)
            break; /* (b) handed to the sleeping standby: wake it */
        ll_pause();
    }
    ll_futex_wake(&s->outer, 1 << 30); /* (b) or (d) */
    return 0;
}

static int loiter_destroy(liblock_t *l)
{
    struct loiter_lock *s = LL_STATE(l, struct loiter_lock);
    if ((atomic_load_explicit(&s->outer, memory_order_acquire) & ~LL_PARKED) != OUT_FREE ||
        atomic_load_explicit(&s->inner_tail, memory_order_acquire) ||
        atomic_load_explicit(&s->arriving, memory_order_acquire))
        return EBUSY;
    return 0;
}

static void loiter_stats(const liblock_t *l, struct ll_stats *o)
{
    struct loiter_lock *s = l->_state;
    ll_stats_put(o, "handoffs", (int64_t)s->handoffs);
    cr_stats_fairness(o, s->p);
    cr_stats_tail(o, atomic_load_explicit(&s->inner_tail, memory_order_acquire));
}

const struct ll_ops ll_ops_loiter = {
    .name = "loiter",
    .description = "LOITER: outer test-and-set lock with bounded arrival spin, inner MCS spin-then-park "
                   "lock, one standby, direct hand-off to an impatient standby",
    .source = "Dice, Malthusian Locks, EuroSys 2017 (extended version, arXiv:1511.06035), appendix A.1 (LOITER)",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "arrivals spin briefly on the outer word, then queue; only the queue's head (the standby) waits for the lock, the rest sleep; the lock circulates among running threads",
    .state_size = sizeof(struct loiter_lock),
    .node_size = sizeof(struct lo_node),
    .init = loiter_init,
    .destroy = loiter_destroy,
    .lock = loiter_lock,
    .trylock = loiter_trylock,
    .unlock = loiter_unlock,
    .stats = loiter_stats,
};
