/*
 * clh - the CLH queue lock (Craig; Landin and Hagersten), with a free tag on
 * the tail and early wake-up of the successor under spin-then-park.
 *
 * Source: T. S. Craig, "Building FIFO and Priority-Queuing Spin Locks from
 * Atomic Swap", TR 93-02-02, University of Washington, 1993; P. Magnusson,
 * A. Landin and E. Hagersten, "Queue Locks on Cache Coherent
 * Multiprocessors", IPPS 1994; as given in J.-P. Lozi, "Towards More
 * Scalable Mutual Exclusion for Multicore Architectures", PhD thesis, UPMC
 * (Paris 6), 2014, section 3.3, Algorithm 2:
 *   lock:   mine.wait = 1; pred = swap(tail, mine); wait while pred.wait
 *   unlock: mine.wait = 0; the thread now owns pred (recycles it)
 * The queue always holds one node: the lock's initial dummy node or the last
 * released one.
 *
 * Our changes to the textbook protocol:
 *  1. The tail carries a FREE tag (bit 0; nodes are cache-line aligned):
 *     tail == q|FREE means "the lock is free and q is the released node".
 *     unlock first tries CAS(tail, mine, mine|FREE): it succeeds iff nobody
 *     queued behind us, and then nobody ever reads mine.wait again (a later
 *     locker that swaps the tail sees FREE and takes the lock without
 *     looking at q).  Only if the CAS fails (a successor swapped the tail)
 *     do we hand over through mine.wait.  This is what makes trylock safe:
 *     trylock reads the tail and, only if it carries FREE, CASes it from
 *     q|FREE to mine; it never dereferences q before owning it and never
 *     waits.  Why a trylock without the tag is wrong: reading t = tail,
 *     then t->wait, then CAS(tail, t, mine), t can be recycled by its
 *     successor and freed (qnode_give, thread exit) between the load and
 *     the read (use after free), or recycled and re-enqueued as a waiting
 *     node (ABA) so that the CAS makes it our genuine, still-held
 *     predecessor and trylock has to wait a whole critical section.  With
 *     the tag, a CAS that succeeds after any ABA still finds the lock free
 *     (the tail is q|FREE at the CAS, so no holder and no waiter exists).
 *  2. Under spin-then-park a node's word says where its owner stands, for
 *     the successor that watches it: 1 far back (the successor sleeps at
 *     once), 3 first in line, 2 holding (the successor spins for the
 *     budget, then sleeps), 0 released.  Each change is an atomic swap on
 *     one's own node that wakes the successor if it had parked.  A thread
 *     that acquires swaps 2 in; a waiter that reads 2 on its predecessor's
 *     node (it is first in line) swaps 3 into its own node, which wakes its
 *     successor while it still waits: so each waiter is woken when it
 *     becomes second in line, and its wake-up overlaps the critical
 *     sections ahead of it; when its predecessor then acquires, the swap to
 *     2 finds it running and costs no system call in the critical path
 *     (unless it has spun out its budget and parked again).  An arrival
 *     reads its predecessor's word: 2 or 3 means spin, 1 means sleep (but
 *     see 3 for a 1 read at arrival).
 *     At most the holder's next two waiters spin; a hand-off to a thread
 *     that is not running costs at most one wake-up, usually overlapped.
 *  3. Far sleepers are promoted by the thread that acquires before them
 *     (spin-then-park).  A node says 1 until its owner runs and announces
 *     otherwise, so a waiter that slept far back and has just been woken
 *     still shows 1 for the whole of its wake-up, and the next arrival
 *     behind it reads "far back" and sleeps at once.  With two threads on
 *     two CPUs that is self-sustaining: one glimpse of 1 (an arrival on a
 *     free lock, between its swap and its announcement) and from then on
 *     each thread sleeps behind the other and every hand-off waits for a
 *     wake-up, although both threads have a CPU.  So a
 *     waiter about to sleep at once writes its node into its
 *     predecessor's `waiter`; the predecessor, when its swap to 2 finds
 *     the parked bit, first changes that node's 1 to 3 (keeping the parked
 *     bit: the node's own owner still wakes its sleeper when it announces)
 *     and then wakes it.  Arrivals behind it then read "first in
 *     line" and spin.  The node is live: its owner waits behind the
 *     promoter, who holds the lock.  `waiter` is reset before the tail
 *     swap, which publishes the reset to the one successor that can write
 *     it; the sleeper's store is published by its parking CAS (acq_rel),
 *     which the promoter's swap reads.  The promoter does not also wake
 *     the promoted node's own sleeper: with more threads than CPUs that
 *     would wake two threads per acquisition, which then compete for the
 *     CPUs the holder needs.
 *     The glimpse itself is common: the owner of a node that found the lock
 *     free stores 1, swaps the tail and then announces 2, and each of those
 *     may wait for a line transfer (its node was another thread's), so an
 *     arrival close behind reads 1 for about a cross-CPU round trip.  Taken
 *     at once for "far back", that made 1-19 % of two-thread hand-offs on
 *     a 2-CPU VM a sleep and a wake-up (tests/test_handoff_sleep.c).  So an
 *     arrival that reads 1 re-reads it for an eighth of the spin budget
 *     (settle_far) and sleeps only if it still reads 1; a waiter that is
 *     really far back pays that much spinning once per acquisition.  The
 *     re-reads are plain acquire loads of the word it waits on anyway: no
 *     ordering argument changes, only when the sleep starts.
 *
 * Node word values: 1 the owner waits for the lock (or holds it without
 * having announced), 3 the owner is first in line, 2 the owner holds it
 * (3 and 2: spin-then-park only), 0 released; bit 31 is the waiting layer's
 * LL_PARKED.
 *
 * Node ownership: between acquisitions each thread owns one spare qnode
 * (ll_thread_t.clh_spare, freed at thread exit); a lock owns the node in its
 * tail (freed by destroy).  Acquiring consumes the spare as `mine`;
 * releasing hands `mine` to the successor (or leaves it as the tail) and
 * takes `pred`, which nobody references any more: its owner released it and
 * we, its only successor, are done reading it.  A thread holding several CLH
 * locks may end up with two recyclable nodes; it keeps one and frees the
 * other.  The per-hold node (the API layer's) stores {mine, pred} so unlock
 * can be called from another call site and holds can be released in any
 * order.
 *
 * Invariants: tail always points to a node; tail is tagged FREE iff no
 * thread holds or waits for the lock; each node has at most one successor,
 * which is the only thread that reads its word and the one that recycles it.
 * Orderings: the tail swap is acq_rel (release publishes mine.wait = 1 to the
 * successor that reads mine as pred; acquire makes pred visible and, when
 * pred is tagged FREE, synchronises with the releasing CAS); the releasing
 * CAS(mine -> mine|FREE) is release and the trylock CAS acq_rel, for the
 * same reason; the hand-off mine.wait = 0 is a release (ll_wake) paired with
 * the waiter's acquire load (ll_wait_while), so the successor sees the
 * critical section.  The announcement (2) carries no data: it is an atomic
 * swap only so that it reads a parker's LL_PARKED bit (wait.c's argument).
 * The arrival's read of the predecessor's word only chooses spin or park:
 * a stale value costs time, never correctness, since every wait loops
 * until the word reads 0.
 * Policies: spin, yield, spin-then-park (default).  FIFO, starvation-free.
 */
#include "internal.h"

#include <stdlib.h>

#define CLH_FREE ((uintptr_t)1)
#define W_RELEASED 0u
#define W_WAITING 1u
#define W_HOLDING 2u
#define W_FIRST 3u

struct clh_qnode {
    _Atomic uint32_t wait;
    _Atomic(struct clh_qnode *) waiter; /* spin-then-park: the successor's node, set when it sleeps far back */
} __attribute__((aligned(LL_CACHELINE)));

struct clh_lock {
    _Atomic uintptr_t tail; /* struct clh_qnode *, bit 0 = CLH_FREE */
};

struct clh_hold {
    struct clh_qnode *mine, *pred;
};

_Static_assert(sizeof(struct clh_hold) <= LL_NODE_BYTES, "clh hold too large");

static inline int parks(int policy) { return policy == LIBLOCK_WAIT_SPIN_THEN_PARK; }

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
    atomic_store_explicit(&LL_STATE(l, struct clh_lock)->tail, (uintptr_t)dummy | CLH_FREE, memory_order_release);
    return 0;
}

static int clh_destroy(liblock_t *l)
{
    uintptr_t t = atomic_load_explicit(&LL_STATE(l, struct clh_lock)->tail, memory_order_acquire);
    if (!(t & CLH_FREE))
        return EBUSY; /* held, or a waiter's node is the tail */
    free((void *)(t & ~CLH_FREE));
    return 0;
}

/* The successor w of a thread that has just acquired slept far back: it is
 * first in line now, so say so in its node for it (header, item 3).  w's
 * node is live: its owner waits behind us, the holder.  The parked bit is
 * kept: w's owner still wakes its own sleeper when it announces. */
static void promote_first(struct clh_qnode *w)
{
    uint32_t cur = atomic_load_explicit(&w->wait, memory_order_relaxed);
    while ((cur & ~LL_PARKED) == W_WAITING &&
           !atomic_compare_exchange_weak_explicit(&w->wait, &cur, W_FIRST | (cur & LL_PARKED), memory_order_release,
                                                  memory_order_relaxed))
        ;
}

/* Tell our successor where we stand (spin-then-park only), waking it if it
 * parked on our node; on acquiring (W_HOLDING), first promote it if it
 * slept far back.  The swap is acq_rel: its acquire reads the successor's
 * parking CAS (acq_rel, in the waiting layer), which follows its store of
 * `waiter`, so the node we promote is the one it left. */
static inline void announce(struct clh_qnode *mine, uint32_t state)
{
    uint32_t old = atomic_exchange_explicit(&mine->wait, state, memory_order_acq_rel);
    if (LL_UNLIKELY(old & LL_PARKED)) {
        struct clh_qnode *w = state == W_HOLDING ? atomic_load_explicit(&mine->waiter, memory_order_relaxed) : NULL;
        if (w)
            promote_first(w);
        ll_futex_wake(&mine->wait, 1 << 30);
    }
}

static LL_SLOW void clh_wait(struct clh_qnode *mine, struct clh_qnode *pred, int policy);

/* An arrival that reads 1 on its predecessor: re-read it for an eighth of
 * the spin budget before taking it for "far back" (header, "Far sleepers",
 * the unannounced holder).  Returns the last value read, without LL_PARKED. */
static uint32_t settle_far(const struct clh_qnode *pred)
{
    uint64_t end = ll_cycles() + ll_spin_budget_cycles() / 8;
    uint32_t v;
    do {
        ll_pause();
        v = atomic_load_explicit(&pred->wait, memory_order_acquire) & ~LL_PARKED;
    } while (v == W_WAITING && ll_cycles() < end);
    return v;
}

static int clh_lock(liblock_t *l, void *vnode)
{
    struct clh_lock *s = LL_STATE(l, struct clh_lock);
    struct clh_hold *h = vnode;
    const int policy = ll_policy(l);
    ll_thread_t *self = ll_self_tls;
    struct clh_qnode *mine = qnode_take(self);
    if (!mine)
        return ENOMEM;
    atomic_store_explicit(&mine->wait, W_WAITING, memory_order_relaxed);
    atomic_store_explicit(&mine->waiter, NULL, memory_order_relaxed);
    uintptr_t p = atomic_exchange_explicit(&s->tail, (uintptr_t)mine, memory_order_acq_rel);
    struct clh_qnode *pred = (struct clh_qnode *)(p & ~CLH_FREE);
    if (LL_UNLIKELY(!(p & CLH_FREE)))
        clh_wait(mine, pred, policy);
    if (parks(policy))
        announce(mine, W_HOLDING);
    h->mine = mine;
    h->pred = pred;
    return 0;
}

/* Wait behind pred (the lock was not free). */
static void clh_wait(struct clh_qnode *mine, struct clh_qnode *pred, int policy)
{
    if (!parks(policy)) {
        ll_wait_while(&pred->wait, W_WAITING, policy);
    } else {
        uint32_t v = atomic_load_explicit(&pred->wait, memory_order_acquire) & ~LL_PARKED;
        if (v == W_WAITING)
            v = settle_far(pred);
        int told = 0;
        while (v != W_RELEASED) {
            if (v == W_HOLDING && !told) {
                announce(mine, W_FIRST); /* wakes our successor: it is second now */
                told = 1;
            }
            if (v == W_WAITING) /* we sleep at once: let pred promote us when it acquires */
                atomic_store_explicit(&pred->waiter, mine, memory_order_relaxed);
            v = ll_wait_while(&pred->wait, v, v == W_WAITING ? LIBLOCK_WAIT_PARK : policy);
        }
    }
}

static int clh_trylock(liblock_t *l, void *vnode)
{
    struct clh_lock *s = LL_STATE(l, struct clh_lock);
    struct clh_hold *h = vnode;
    uintptr_t t = atomic_load_explicit(&s->tail, memory_order_relaxed);
    if (!(t & CLH_FREE))
        return EBUSY; /* no dereference of t: it may be recycled or freed */
    ll_thread_t *self = ll_self_tls;
    struct clh_qnode *mine = qnode_take(self);
    if (!mine)
        return ENOMEM;
    atomic_store_explicit(&mine->wait, parks(ll_policy(l)) ? W_HOLDING : W_WAITING, memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&s->tail, &t, (uintptr_t)mine, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
        qnode_give(self, mine);
        return EBUSY;
    }
    h->mine = mine;
    h->pred = (struct clh_qnode *)(t & ~CLH_FREE); /* ours now: the lock's released node */
    return 0;
}

static int clh_unlock(liblock_t *l, void *vnode)
{
    struct clh_lock *s = LL_STATE(l, struct clh_lock);
    struct clh_hold *h = vnode;
    uintptr_t expect = (uintptr_t)h->mine;
    if (!atomic_compare_exchange_strong_explicit(&s->tail, &expect, (uintptr_t)h->mine | CLH_FREE,
                                                 memory_order_release, memory_order_relaxed))
        ll_wake(&h->mine->wait, W_RELEASED, ll_policy(l)); /* a successor queued behind us */
    qnode_give(ll_self_tls, h->pred);
    return 0;
}

const struct ll_ops ll_ops_clh = {
    .name = "clh",
    .description = "CLH queue lock: each waiter spins on its predecessor's node",
    .source = "Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.3, Algorithm 2; Craig, UW TR 93-02-02, 1993; Magnusson, Landin and Hagersten, IPPS 1994",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "only the next two waiters spin, the others sleep; each waiter is woken when it becomes second in line, so its wake-up overlaps the critical sections ahead; FIFO: a hand-off to a thread that is not running costs at most one wake-up",
    .state_size = sizeof(struct clh_lock),
    .node_size = sizeof(struct clh_hold),
    .init = clh_init,
    .destroy = clh_destroy,
    .lock = clh_lock,
    .trylock = clh_trylock,
    .unlock = clh_unlock,
};
