/*
 * mcs - the MCS queue lock (Mellor-Crummey and Scott 1991).
 *
 * Source: J. M. Mellor-Crummey and M. L. Scott, "Algorithms for Scalable
 * Synchronization on Shared-Memory Multiprocessors", ACM TOCS 9(1), 1991;
 * as given in J.-P. Lozi, "Towards More Scalable Mutual Exclusion for
 * Multicore Architectures", PhD thesis, UPMC (Paris 6), 2014, section 3.4,
 * Algorithm 3:
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
 * Policies: spin, yield, spin-then-park (default), preempt-aware (below).  The short wait in
 * unlock for a successor that has swapped the tail but not yet linked itself
 * pauses (yield under yield); under spin-then-park it yields after a few
 * hundred pauses, since that successor may have been preempted.  FIFO and
 * starvation-free.
 *
 * Early wake-up under spin-then-park (our addition, as in clh.c).  A node
 * word says where its owner stands: 1 far back (sleep at once), 3 second in
 * line, 2 first in line (both spin for the budget, then sleep), 0 granted;
 * bit 31 is the waiting layer's LL_PARKED.  Ranks only move forward
 * (1 -> 3 -> 2 -> 0, possibly skipping), each by a CAS that wakes the owner
 * if it had parked:
 *  - a thread that acquires the lock promotes its successor to 2 (first);
 *  - a waiter promoted to 2 promotes its own successor to 3 (second) while
 *    it waits, so the second waiter's wake-up overlaps the critical section
 *    ahead; when that waiter later acquires, the CAS 3 -> 2 finds its
 *    successor already running and costs no system call in the critical
 *    path (unless the successor has spun out its budget and parked again);
 *  - an arrival reads its predecessor's word before linking itself (the
 *    predecessor cannot finish unlock before we link, so its node is
 *    alive): 0 (the predecessor holds the lock) makes it first, 2 second,
 *    anything else far; it stores that rank into its own word before
 *    linking, so its own successor reads it in turn.
 * Nodes touched are alive: a successor waits for us, and the successor's
 * successor waits for it.  The promotions never overwrite the hand-off's 0
 * (they CAS only from a lower rank) and a waiter's loop waits until it
 * reads 0, whatever ranks it reads on the way; a stale rank only costs time
 * (a waiter that parks when it should spin is woken by the next promotion
 * or the hand-off).  A thread that acquires without a predecessor stores 0
 * into its word (relaxed: an arrival that misses it ranks itself far and is
 * woken by a promotion).  So at most about three threads per lock spin
 * (the holder's next two), and a hand-off to a waiter that is not running
 * costs at most one wake-up, usually overlapped with the critical sections
 * ahead of it.
 *
 * Fast hand-over under spin-then-park (not in the paper; the argument is
 * src/core/fastwake.c's, as for mcscr in src/locks/restricting/cr.h).  A
 * grant by swap on the successor's word, to see whether it had parked,
 * is a locked instruction on a line the spinning successor holds, so the
 * releaser would stall for the transfer at every hand-off.  Instead the
 * successor says where it may sleep in the node it links behind,
 * `succ_parked`, in the
 * line of `next` that the releaser reads anyway:
 *  - a far waiter, which sleeps at once, stores 1 there before its link
 *    store (no fence: the releaser reads it after the acquire load of
 *    `next` that returns the link), and the releaser then grants with the
 *    swap; so does a waiter whose thread slept in its last
 *    contended wait (`slept_last`, from the waiting layer's count of this
 *    thread's sleeps), since with more threads than CPUs it will probably
 *    sleep again, and announcing then would cost a membarrier, an
 *    interrupt on the CPU that runs the holder;
 *  - a first or second waiter, which spins for the budget, announces only
 *    if it comes to park (ll_wait_while_announced: 1, then the asymmetric
 *    fence, then it parks as usual), and the releaser that read 0 grants
 *    with a plain store followed by a read of the word, and calls
 *    futex_wake if it is set by then (ll_wake_announced).
 * Where the waiter announces is remembered in its node (`announce`, NULL
 * for "said in advance"), written by whoever links the node (the waiter
 * itself, or the signaller of a requeue, before promote()'s release CAS or
 * the link store that makes the node reachable).  `succ_parked` is reset
 * by the node's own thread before its tail swap (and by trylock and the
 * requeue preparation), which the successor's swap orders before the
 * successor's store.  A waiter that comes to park may announce after the
 * hand-off, when the node's owner has left and may reuse the node: a late
 * 1 there makes that next use grant with the swap, and the node is this
 * algorithm's whatever the lock (internal.h, "One algorithm per node").
 * Only the holder writes its successor's word once linked (promotions and
 * the grant), so the plain store races only with the waiter's own parking
 * CAS, which the announcement covers.
 *
 * Preempt-aware (src/core/wait.c, "Preemption-aware waiting"): the
 * spin-then-park protocol above, unchanged, with each first or second
 * waiter's spin ending when its predecessor (who hands over to it next,
 * or who is waiting for the holder that does) is preempted, and a first
 * waiter's (whose predecessor holds the lock) going on past the budget
 * while the holder runs.  Each node carries its thread's tid
 * (`tid`, written before the tail swap, which publishes it with the node);
 * an arrival copies its predecessor's into its own `behind` before it
 * links (pred is alive then, as for the rank), so the waiting layer reads
 * only the waiter's own node.  A requeue copies it on the waiter's behalf
 * before its link store, as it writes the rank.
 *
 * Condition-variable requeue (src/core/cond.c; under spin-then-park only).
 * A thread waiting on a condition prepares its next node for this lock as
 * "far" (word 1, next nil) and sleeps on that word, as a far waiter does.
 * A signal enqueues the node on the waiter's behalf (mcs_requeue): the same
 * tail swap, rank and link as mcs_lock, done by the signaller, which never
 * waits.  A far rank is left as it is -- the sleeper is not woken, it will be
 * woken by a promotion like any far waiter; a first or second rank is
 * installed by promote() (a CAS that wakes the sleeper), and an empty queue
 * grants the node at once (ll_wake: swap 0, wake).  Everything the
 * signaller writes to the node (the rank) is written before its link store
 * makes the node reachable to the holder, because after the link the node
 * can be granted, and its thread return and reuse it; the final ll_wake of
 * the empty-queue case may call futex_wake on a reused word, a spurious
 * wake-up every waiter of this library absorbs.  The waiter (mcs_requeue_wait)
 * then runs mcs_lock's waiting loop.  The node was initialised by its own
 * thread and published to the signaller through the condition's mutex
 * (release/acquire), so the signaller's swap publishes an initialised node
 * exactly as an arrival's swap does; orderings are otherwise mcs_lock's.
 * FIFO order is that of the requeues: a signalled waiter queues behind the
 * threads already waiting for the lock, as if it had called lock() at the
 * signal, without having to be scheduled first.
 */
#include "internal.h"

struct mcs_node {
    _Atomic(struct mcs_node *) next;
    _Atomic uint32_t locked;
    _Atomic uint32_t succ_parked; /* fast hand-over: our successor announces its parking here (header) */
    _Atomic uint32_t *announce;   /* where we announce ours: pred's succ_parked, or NULL (said in advance) */
    _Atomic int32_t tid;          /* preempt-aware: this node's thread (header) */
    _Atomic int32_t behind;       /* preempt-aware: pred's tid, copied before the link */
};

/* preempt-aware: the node's thread (the API layer sets ll_self_tls before ->lock) */
static inline void note_tid(struct mcs_node *n) { ll_note_self_tid(&n->tid); }
static inline void copy_behind(struct mcs_node *n, struct mcs_node *pred)
{
    atomic_store_explicit(&n->behind, atomic_load_explicit(&pred->tid, memory_order_relaxed), memory_order_relaxed);
}

struct mcs_lock {
    _Atomic(struct mcs_node *) tail;
};

_Static_assert(sizeof(struct mcs_node) <= LL_NODE_BYTES, "mcs node too large");

static inline int parks(int policy) { return policy == LIBLOCK_WAIT_SPIN_THEN_PARK; }

static int mcs_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    if (parks(ll_policy(l)))
        (void)ll_fastwake_on(); /* settle this now, not in a hand-over */
    return 0;
}

#define R_GRANTED 0u
#define R_FAR 1u
#define R_FIRST 2u
#define R_SECOND 3u

/* Raise succ's rank to `to` (R_FIRST or R_SECOND) unless it is already
 * there or beyond; wake it if it had parked.  (Out of line: the
 * uncontended lock only tests for a successor.) */
static __attribute__((noinline)) void promote(struct mcs_node *succ, uint32_t to)
{
    uint32_t cur = atomic_load_explicit(&succ->locked, memory_order_relaxed);
    for (;;) {
        uint32_t c = cur & ~LL_PARKED;
        if (!(c == R_FAR || (c == R_SECOND && to == R_FIRST)))
            return;
        if (atomic_compare_exchange_weak_explicit(&succ->locked, &cur, to, memory_order_release,
                                                  memory_order_relaxed)) {
            if (cur & LL_PARKED)
                ll_futex_wake(&succ->locked, 1 << 30);
            return;
        }
    }
}

/* n's successor, if linked, gets rank `to`. */
static inline void promote_next(struct mcs_node *n, uint32_t to)
{
    struct mcs_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
    if (succ)
        promote(succ, to);
}

/* The rank of a node that links behind pred (read before linking: pred
 * cannot finish its unlock before the link, so its node is alive). */
static inline uint32_t rank_behind(struct mcs_node *pred)
{
    uint32_t pv = atomic_load_explicit(&pred->locked, memory_order_relaxed) & ~LL_PARKED;
    return pv == R_GRANTED ? R_FIRST : pv == R_FIRST ? R_SECOND : R_FAR;
}

/* This thread slept in its last contended wait for an mcs lock (a hint;
 * "Fast hand-over" in the header). */
static __thread bool slept_last LL_TLS_IE;

/* Link n behind pred with rank v (before the link store, everything the
 * holder may read: the announcement; see "Fast hand-over" in the header).
 * sleepy: the waiter will probably sleep, so it says so in advance. */
static inline void link_behind(struct mcs_node *pred, struct mcs_node *n, uint32_t v, bool sleepy)
{
    if (v == R_FAR || sleepy) {
        atomic_store_explicit(&pred->succ_parked, 1, memory_order_relaxed); /* we sleep at once */
        n->announce = NULL;
    } else {
        n->announce = &pred->succ_parked;
    }
}

/* The waiting loop of a linked node whose last rank read is v (parking
 * policy): wait for the hand-off, telling the successor it is second once
 * we are first; on the hand-off make the successor first. */
static void wait_granted(struct mcs_node *n, uint32_t v, int policy, const _Atomic int32_t *who)
{
    int told = 0;
    while (v != R_GRANTED) {
        if (v == R_FIRST && !told) {
            promote_next(n, R_SECOND);
            told = 1;
        }
        if (v == R_FAR)
            v = ll_wait_while(&n->locked, v, LIBLOCK_WAIT_PARK);
        else if (n->announce)
            v = ll_wait_while_announced_behind(&n->locked, v, policy, n->announce, who, v == R_FIRST);
        else
            v = ll_wait_while_behind(&n->locked, v, policy, who, v == R_FIRST);
    }
    promote_next(n, R_FIRST);
}

/* lock() behind a predecessor (the queued path; out of line, so that the
 * uncontended lock below saves no registers). */
static __attribute__((noinline)) int mcs_lock_behind(liblock_t *l, struct mcs_node *n, struct mcs_node *pred)
{
    const int policy = ll_policy(l);
    if (!parks(policy)) {
        atomic_store_explicit(&pred->next, n, memory_order_release);
        ll_wait_while(&n->locked, 1, policy);
        return 0;
    }
    uint32_t v = rank_behind(pred);
    if (v != R_FAR)
        atomic_store_explicit(&n->locked, v, memory_order_relaxed);
    const _Atomic int32_t *who = ll_behind(l, &n->behind);
    if (who)
        copy_behind(n, pred);
    link_behind(pred, n, v, slept_last);
    atomic_store_explicit(&pred->next, n, memory_order_release);
    unsigned long parks = ll_parks_tls;
    wait_granted(n, v, policy, who);
    slept_last = ll_parks_tls != parks;
    return 0;
}

static int mcs_lock(liblock_t *l, void *vnode)
{
    struct mcs_lock *s = LL_STATE(l, struct mcs_lock);
    struct mcs_node *n = vnode;
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, 1, memory_order_relaxed);
    atomic_store_explicit(&n->succ_parked, 0, memory_order_relaxed);
    if (ll_aware(l))
        note_tid(n);
    struct mcs_node *pred = atomic_exchange_explicit(&s->tail, n, memory_order_acq_rel);
    if (LL_UNLIKELY(pred != NULL))
        return mcs_lock_behind(l, n, pred);
    if (parks(ll_policy(l))) {
        atomic_store_explicit(&n->locked, R_GRANTED, memory_order_relaxed);
        promote_next(n, R_FIRST); /* an arrival may have linked already (and parked) */
    }
    return 0;
}

/* ---- condition-variable requeue (header) ---- */
static int mcs_requeue_prepare(liblock_t *l, void *vnode)
{
    if (!parks(ll_policy(l)))
        return ENOTSUP;
    struct mcs_node *n = vnode;
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, R_FAR, memory_order_relaxed);
    atomic_store_explicit(&n->succ_parked, 0, memory_order_relaxed);
    if (ll_aware(l))
        note_tid(n);
    return 0;
}

static void mcs_requeue(liblock_t *l, void *vnode)
{
    struct mcs_lock *s = LL_STATE(l, struct mcs_lock);
    struct mcs_node *n = vnode;
    struct mcs_node *pred = atomic_exchange_explicit(&s->tail, n, memory_order_acq_rel);
    if (!pred) {
        ll_wake(&n->locked, R_GRANTED, LIBLOCK_WAIT_SPIN_THEN_PARK); /* its thread promotes its successor */
        return;
    }
    uint32_t v = rank_behind(pred);
    if (ll_aware(l))
        copy_behind(n, pred); /* before the link, as the rank */
    link_behind(pred, n, v, false); /* before promote(), whose release publishes n->announce to the sleeper */
    if (v != R_FAR)
        promote(n, v); /* before the link: afterwards the node may be granted and reused */
    atomic_store_explicit(&pred->next, n, memory_order_release);
}

static int mcs_requeue_wait(liblock_t *l, void *vnode, uint64_t deadline_ns)
{
    struct mcs_node *n = vnode;
    uint32_t v;
    if (deadline_ns) {
        if (ll_wait_while_until(&n->locked, R_FAR, LIBLOCK_WAIT_PARK, deadline_ns, &v) == ETIMEDOUT)
            return ETIMEDOUT; /* maybe not requeued yet: the condition decides */
    } else {
        v = ll_wait_while(&n->locked, R_FAR, LIBLOCK_WAIT_PARK);
    }
    wait_granted(n, v, ll_policy(l), ll_behind(l, &n->behind));
    return 0;
}

static int mcs_trylock(liblock_t *l, void *vnode)
{
    struct mcs_lock *s = LL_STATE(l, struct mcs_lock);
    struct mcs_node *n = vnode;
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, 0, memory_order_relaxed);
    atomic_store_explicit(&n->succ_parked, 0, memory_order_relaxed);
    if (ll_aware(l))
        note_tid(n);
    struct mcs_node *expect = NULL;
    return atomic_compare_exchange_strong_explicit(&s->tail, &expect, n, memory_order_acq_rel,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

/* unlock() with a successor, linked (succ) or about to link (NULL); out of
 * line, as mcs_lock_behind. */
static __attribute__((noinline)) int mcs_unlock_handoff(liblock_t *l, struct mcs_node *n, struct mcs_node *succ)
{
    if (!succ) {
        unsigned k = 0;
        while (!(succ = atomic_load_explicit(&n->next, memory_order_acquire))) {
            if (ll_policy(l) == LIBLOCK_WAIT_YIELD || (parks(ll_policy(l)) && ++k > 256))
                ll_yield(); /* the successor may be preempted between swap and link */
            else
                ll_pause();
        }
    }
    if (parks(ll_policy(l)) && !atomic_load_explicit(&n->succ_parked, memory_order_relaxed) && ll_fastwake_on())
        ll_wake_announced(&succ->locked, R_GRANTED, &n->succ_parked); /* "Fast hand-over" */
    else
        ll_wake(&succ->locked, R_GRANTED, ll_policy(l));
    return 0;
}

static int mcs_unlock(liblock_t *l, void *vnode)
{
    struct mcs_lock *s = LL_STATE(l, struct mcs_lock);
    struct mcs_node *n = vnode;
    struct mcs_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
    if (LL_LIKELY(!succ)) {
        struct mcs_node *expect = n;
        if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_release,
                                                    memory_order_relaxed))
            return 0;
    }
    return mcs_unlock_handoff(l, n, succ);
}

static int mcs_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct mcs_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

const struct ll_ops ll_ops_mcs = {
    .name = "mcs",
    .description = "MCS queue lock: each waiter spins on its own node",
    .source = "Mellor-Crummey and Scott, ACM TOCS 1991; Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.4, Algorithm 3",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) | LL_POLICY_BIT(LIBLOCK_WAIT_PREEMPT_AWARE),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "only the next two waiters spin, the others sleep; each waiter is woken when it becomes second in line, so its wake-up overlaps the critical sections ahead; FIFO: a hand-off to a thread that is not running costs at most one wake-up",
    .state_size = sizeof(struct mcs_lock),
    .node_size = sizeof(struct mcs_node),
    .init = mcs_init,
    .destroy = mcs_destroy,
    .lock = mcs_lock,
    .trylock = mcs_trylock,
    .unlock = mcs_unlock,
    .requeue_prepare = mcs_requeue_prepare,
    .requeue = mcs_requeue,
    .requeue_wait = mcs_requeue_wait,
};
