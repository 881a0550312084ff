/*
 * mcs - the MCS queue lock (Mellor-Crummey and Scott 1991).
 *
 * Source: seed 000 section 3.4, Algorithm 3.
 *   lock:   node.next = nil; node.locked = 1; pred = swap(tail, node);
 *           if pred: pred.next = node; wait while node.locked
 *   unlock: if node.next == nil: if CAS(tail, node, nil) return;
 *                                 wait until node.next != nil
 *           node.next.locked = 0
 *
 * The node is the per-hold node the API layer hands us: it stays at one
 * address from lock() to unlock(), so lock and unlock can be called from
 * different call sites and a thread can hold several MCS locks at once and
 * release them in any order.
 *
 * Invariants: tail is nil iff the lock is free with no waiters; otherwise it
 * is the last node of a queue whose head is the holder's node; a node's
 * `locked` is 0 once its predecessor has handed over, and only the holder
 * writes its successor's `locked`.
 * Orderings:
 *  - the tail swap is acq_rel: release publishes our initialised node to the
 *    thread that will read it as pred (through the swap's modification
 *    order); acquire makes pred's node contents visible before we write
 *    pred->next;
 *  - pred->next = node is a release store, paired with the holder's acquire
 *    load of next in unlock, so the holder sees node->locked = 1 written
 *    before and cannot have its hand-off overwritten;
 *  - the hand-off goes through the waiting layer (ll_wake: release store or
 *    swap) and the wait returns after an acquire load, so the successor sees
 *    the critical section's writes;
 *  - CAS(tail, node, nil) is release so a later locker that finds tail nil
 *    and swaps in (acquire) sees our critical section.
 * Policies: spin, yield, spin-then-park (a waiter parks on its own node's
 * word; the holder's ll_wake swaps 0 in and wakes it if it parked).  The
 * short wait in unlock for a successor that has swapped the tail but not yet
 * linked itself uses pause (or yield); it never parks, because the
 * successor is running.  FIFO and starvation-free.
 */
#include "../internal.h"

struct mcs_node {
    _Atomic(struct mcs_node *) next;
    _Atomic uint32_t locked;
};

struct mcs_lock {
    _Atomic(struct mcs_node *) tail;
};

_Static_assert(sizeof(struct mcs_node) <= LL_NODE_BYTES, "mcs node too large");

static int mcs_lock(liblock_t *l, void *vnode)
{
    struct mcs_lock *s = LL_STATE(l, struct mcs_lock);
    struct mcs_node *n = vnode;
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, 1, memory_order_relaxed);
    struct mcs_node *pred = atomic_exchange_explicit(&s->tail, n, memory_order_acq_rel);
    if (pred) {
        atomic_store_explicit(&pred->next, n, memory_order_release);
        ll_wait_while(&n->locked, 1, l->_wait);
    }
    return 0;
}

static int mcs_trylock(liblock_t *l, void *vnode)
{
    struct mcs_lock *s = LL_STATE(l, struct mcs_lock);
    struct mcs_node *n = vnode;
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, 0, memory_order_relaxed);
    struct mcs_node *expect = NULL;
    return atomic_compare_exchange_strong_explicit(&s->tail, &expect, n, memory_order_acq_rel,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

static int mcs_unlock(liblock_t *l, void *vnode)
{
    struct mcs_lock *s = LL_STATE(l, struct mcs_lock);
    struct mcs_node *n = vnode;
    struct mcs_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
    if (!succ) {
        struct mcs_node *expect = n;
        if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_release,
                                                    memory_order_relaxed))
            return 0;
        while (!(succ = atomic_load_explicit(&n->next, memory_order_acquire)))
            ll_wait_step(l->_wait == LIBLOCK_WAIT_YIELD ? LIBLOCK_WAIT_YIELD : LIBLOCK_WAIT_SPIN);
    }
    ll_wake(&succ->locked, 0, l->_wait);
    return 0;
}

static int mcs_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct mcs_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

const struct ll_ops ll_ops_mcs = {
    .name = "mcs",
    .description = "MCS queue lock: each waiter spins on its own node",
    .source = "seed 000 section 3.4, Algorithm 3; Mellor-Crummey and Scott 1991",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN,
    .state_size = sizeof(struct mcs_lock),
    .node_size = sizeof(struct mcs_node),
    .destroy = mcs_destroy,
    .lock = mcs_lock,
    .trylock = mcs_trylock,
    .unlock = mcs_unlock,
};
