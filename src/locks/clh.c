/*
 * clh - the CLH queue lock (Craig; Landin and Hagersten).
 *
 * Source: seed 000 section 3.3, Algorithm 2.
 *   lock:   mine.wait = 1; pred = swap(tail, mine); wait while pred.wait
 *   unlock: mine.wait = 0; the thread now owns pred (recycles it)
 * The queue always holds one node: the lock's initial dummy node (wait 0)
 * or the last released one.
 *
 * Node ownership: between acquisitions each thread owns one spare qnode
 * (ll_thread_t.clh_spare, freed at thread exit); a lock owns the node in its
 * tail (freed by destroy).  Acquiring consumes the spare as `mine`; releasing
 * hands `mine` to the successor (or leaves it as the tail) and takes `pred`,
 * which nobody references any more: its owner released it and we, its only
 * successor, are done reading it.  A thread holding several CLH locks may
 * end up with two recyclable nodes; it keeps one and frees the other.
 * The per-hold node (the API layer's) stores {mine, pred} so unlock can be
 * called from another call site and holds can be released in any order.
 *
 * Invariants: tail always points to a node; a node with wait == 0 is never
 * written again by the thread that released it; each node has at most one
 * successor spinning on it.
 * Orderings: the tail swap is acq_rel (release publishes mine.wait = 1 to
 * the successor that reads mine as pred; acquire makes pred visible); the
 * hand-off mine.wait = 0 is a release (ll_wake) paired with the waiter's
 * acquire load (ll_wait_while), so the successor sees the critical section.
 * Trylock: read tail t; if t.wait == 0 the lock is free, so CAS(tail, t,
 * mine).  If t was recycled and re-enqueued between the read and the CAS
 * (ABA), the CAS still makes t our genuine predecessor, so we wait for it:
 * trylock can then wait for one critical section.  Documented in docs/api.md.
 * Policies: spin, yield, spin-then-park (one waiter per node word).  FIFO,
 * starvation-free.
 */
#include "../internal.h"

#include <stdlib.h>

struct clh_qnode {
    _Atomic uint32_t wait;
} __attribute__((aligned(LL_CACHELINE)));

struct clh_lock {
    _Atomic(struct clh_qnode *) tail;
};

struct clh_hold {
    struct clh_qnode *mine, *pred;
};

_Static_assert(sizeof(struct clh_hold) <= LL_NODE_BYTES, "clh hold too large");

static struct clh_qnode *qnode_take(ll_thread_t *self)
{
    struct clh_qnode *q = self->clh_spare;
    if (q) {
        self->clh_spare = NULL;
        return q;
    }
    return ll_alloc_aligned(sizeof *q);
}

static void qnode_give(ll_thread_t *self, struct clh_qnode *q)
{
    if (!self->clh_spare)
        self->clh_spare = q;
    else
        free(q);
}

static int clh_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct clh_qnode *dummy = ll_alloc_aligned(sizeof *dummy);
    if (!dummy)
        return ENOMEM;
    atomic_store_explicit(&LL_STATE(l, struct clh_lock)->tail, dummy, memory_order_release);
    return 0;
}

static int clh_destroy(liblock_t *l)
{
    struct clh_qnode *t = atomic_load_explicit(&LL_STATE(l, struct clh_lock)->tail, memory_order_acquire);
    if (atomic_load_explicit(&t->wait, memory_order_acquire) & ~LL_PARKED)
        return EBUSY;
    free(t);
    return 0;
}

static int clh_lock(liblock_t *l, void *vnode)
{
    struct clh_lock *s = LL_STATE(l, struct clh_lock);
    struct clh_hold *h = vnode;
    ll_thread_t *self = ll_self_tls;
    struct clh_qnode *mine = qnode_take(self);
    if (!mine)
        return ENOMEM;
    atomic_store_explicit(&mine->wait, 1, memory_order_relaxed);
    struct clh_qnode *pred = atomic_exchange_explicit(&s->tail, mine, memory_order_acq_rel);
    ll_wait_while(&pred->wait, 1, l->_wait);
    h->mine = mine;
    h->pred = pred;
    return 0;
}

static int clh_trylock(liblock_t *l, void *vnode)
{
    struct clh_lock *s = LL_STATE(l, struct clh_lock);
    struct clh_hold *h = vnode;
    struct clh_qnode *t = atomic_load_explicit(&s->tail, memory_order_acquire);
    if (atomic_load_explicit(&t->wait, memory_order_acquire) & ~LL_PARKED)
        return EBUSY;
    ll_thread_t *self = ll_self_tls;
    struct clh_qnode *mine = qnode_take(self);
    if (!mine)
        return ENOMEM;
    atomic_store_explicit(&mine->wait, 1, memory_order_relaxed);
    struct clh_qnode *expect = t;
    if (!atomic_compare_exchange_strong_explicit(&s->tail, &expect, mine, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
        qnode_give(self, mine);
        return EBUSY;
    }
    ll_wait_while(&t->wait, 1, l->_wait); /* returns at once unless ABA (see top) */
    h->mine = mine;
    h->pred = t;
    return 0;
}

static int clh_unlock(liblock_t *l, void *vnode)
{
    struct clh_hold *h = vnode;
    ll_wake(&h->mine->wait, 0, l->_wait);
    qnode_give(ll_self_tls, h->pred);
    return 0;
}

const struct ll_ops ll_ops_clh = {
    .name = "clh",
    .description = "CLH queue lock: each waiter spins on its predecessor's node",
    .source = "seed 000 section 3.3, Algorithm 2; Craig 1993, Magnusson, Landin and Hagersten 1994",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN,
    .state_size = sizeof(struct clh_lock),
    .node_size = sizeof(struct clh_hold),
    .init = clh_init,
    .destroy = clh_destroy,
    .lock = clh_lock,
    .trylock = clh_trylock,
    .unlock = clh_unlock,
};
