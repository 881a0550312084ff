/*
 * hemlock - the Hemlock queue lock (Dice and Kogan): one word per lock, a
 * waiter spins on its predecessor's Grant word, the releaser waits for its
 * successor to acknowledge the hand-over.
 *
 * Source: D. Dice and A. Kogan, "Hemlock: Compact and Scalable Mutual
 * Exclusion", Proceedings of the 33rd ACM Symposium on Parallelism in
 * Algorithms and Architectures (SPAA 2021; extended version
 * arXiv:2102.03863): the algorithm's description and listing, and its
 * coherence traffic reduction (CTR) variant.  Each thread has one Grant word, null except during a hand-over:
 *   lock(L):   pred = swap(L.tail, self)
 *              if pred != null:
 *                  wait until pred.grant == L      -- L handed to us
 *                  pred.grant = null               -- acknowledge
 *   unlock(L): if CAS(L.tail, self, null): return  -- nobody behind us
 *              self.grant = L                      -- hand over
 *              wait until self.grant == null       -- the successor has it
 *   CTR: the waiter polls with an atomic read-modify-write instead of a
 *   load, wait until CAS(pred.grant, L, null), so the Grant word's line
 *   comes to it once, in exclusive state, and the acknowledgement needs no
 *   second transfer to upgrade a shared copy.
 * The lock is one word (the tail) and there is no queue node: the tail
 * names the last thread, a thread's Grant word is what its successor
 * watches, and the handshake makes the word free again before unlock
 * returns, so nothing is left behind for anyone to recycle (unlike CLH's
 * migrating nodes) and no successor pointer is needed (unlike MCS).  A
 * thread holding several Hemlock locks serves all their successors from
 * its one word, each waiting for its own lock's address there.
 *
 * Where the Grant word lives (our change).  Here it is in the per-hold
 * node the API layer and the interposer hand us (it stays at one address
 * from lock() to unlock()), not in the thread, because a per-thread word
 * cannot serve the interposer's NORMAL mutexes (src/shim/shim.h, "Mutex
 * types"):
 *  - a thread may lock a NORMAL mutex it holds and wait there until
 *    another thread unlocks it (a binary semaphore).  With a per-thread
 *    word its second swap returns itself as its own predecessor, and the
 *    unlock's CAS(tail, self, null) then succeeds and frees the lock while
 *    it still waits, for ever;
 *  - another thread may unlock it, concurrently with the holder releasing
 *    a second lock: both would write the holder's one word at once, and
 *    the second write would erase the first grant before its successor saw
 *    it;
 *  - the holder may exit first: its word must outlive the thread, and a
 *    new thread reusing it would be the situation above.
 * A per-hold word has one watcher (the hold's one successor) and one
 * writer of grants (whoever releases that hold), so all three are plain
 * cases; a thread holding several locks has one word per hold, so the
 * stored value need not name the lock (G_GRANT instead of L); and fork
 * needs nothing of its own (the interposer rebuilds each lock fresh in
 * the child, where a queued waiter would be a thread that does not exist,
 * and retakes a held one with a new hold).  What is kept of the
 * paper's space property: the lock is one word, no lock owns a node, none
 * is allocated, recycled or freed; a holding or waiting thread uses the
 * node of the hold record the framework already keeps per lock held.
 *
 * Waiting policies: spin, yield, spin-then-park (default).
 *
 * Spin and yield are the paper's protocol.  The grant word is G_HOLD
 * from lock() to unlock(), G_GRANT from the hand-over to the
 * acknowledgement, then G_EMPTY.  Under spin the waiter polls with
 * CAS(pred.grant, G_GRANT, G_EMPTY), the CTR variant: observing the grant
 * and acknowledging it are one step on a line the waiter already holds
 * exclusively.  Under yield it loads between yields (a poll that rare
 * saves no transfer) and acknowledges with an exchange.  The releaser
 * waits for the acknowledgement with the same policy.
 *
 * Spin-then-park (our addition).  The paper's releaser waits for its
 * successor; if the successor sleeps, that wait is a whole wake-up, and
 * with more threads than CPUs every hand-over would pay it in the
 * releaser's unlock.  So only a successor that spins is handed over the
 * paper's way; one that sleeps has said so, and is granted directly on a
 * word of its own node (as in MCS), with no acknowledgement awaited:
 *  1. Ranks.  While its owner waits or holds, a grant word says where the
 *     owner stands: G_FAR (not first in line), G_FIRST (first in line),
 *     G_HOLD (holds the lock; also the value a node starts with, so the
 *     uncontended lock writes nothing more).  An arrival reads its
 *     predecessor's word: G_HOLD makes it first (it writes G_FIRST into its
 *     own word), anything else not (G_FAR); behind G_HOLD or G_FIRST it
 *     spins on the predecessor's word for the spin budget (a grant there is
 *     taken with the acknowledging exchange), behind G_FAR it sleeps at
 *     once.  It spins again for a new budget at each change it sees.
 *     This spin loads rather than polling with CAS as under spin: here
 *     the owner also writes its rank into the word while the successor
 *     polls, and a polling read-modify-write would take the line from it
 *     each time.
 *  2. Sleeping.  A waiter that goes to sleep (behind G_FAR, or at the end
 *     of its budget) stores its own node into pred.sleeper, sets its own
 *     node's `wake` word to its place (W_FIRST, W_SECOND, W_FAR), and then
 *     adds F_ASLEEP to pred.grant by CAS from the rank it read.  If the
 *     CAS succeeds it never touches the predecessor's node again and
 *     sleeps on its own `wake`; if it fails, the word changed (a new rank,
 *     or the grant) and it goes back to 1.
 *  3. The owner's writes to its grant word (rank announcements, the
 *     grant) are exchanges, so each reads F_ASLEEP if it is there; from
 *     then on the owner keeps the sleeper's node (`asleep`, a field only
 *     the hold's current owner uses) and talks to it through its `wake`
 *     word instead: when the owner becomes first it raises the sleeper to
 *     W_SECOND, when it acquires to W_FIRST (both by CAS, only upwards,
 *     waking it if it had parked), and its unlock grants with W_GO
 *     (ll_wake: swap, then futex_wake if it had parked) and returns at
 *     once.  A grant that found no F_ASLEEP has a spinning successor, and
 *     the releaser waits for its acknowledgement (spin, then park on its
 *     own grant word; the acknowledging exchange wakes it).
 *  4. Early wake-up.  A sleeper raised to W_SECOND or W_FIRST spins on its
 *     own `wake` for a budget before it parks again, so a waiter is woken
 *     when it becomes second in line and its wake-up overlaps the critical
 *     section ahead; raised to W_FIRST, it writes G_FIRST into its own
 *     grant word (raising its own sleeper to W_SECOND in turn).
 *  5. Far sleepers.  A sleeper's grant word says G_FAR while it sleeps and
 *     wakes, so the next arrival would sleep at once behind a waiter that
 *     is first in line; with two threads that sustains itself (each sleeps
 *     behind the other, waking for every hand-over, as src/locks/queue/clh.c
 *     "Far sleepers" describes).  So the owner that raises its sleeper to
 *     W_FIRST first changes the sleeper's own grant word from G_FAR to
 *     G_FIRST on its behalf (CAS, keeping F_ASLEEP), and arrivals behind it
 *     spin.
 * At most the holder's next two waiters spin; a hand-over to a thread that
 * is not running costs at most one wake-up, usually overlapped, and no
 * unlock waits for a thread that sleeps.  FIFO and starvation-free: every
 * grant goes to the unique successor in the tail's swap order.
 *
 * Values.  grant: G_EMPTY (acknowledged), G_GRANT (handed over), G_FAR,
 * G_FIRST, G_HOLD (ranks), plus F_ASLEEP (bit 30, set by the successor)
 * and LL_PARKED (bit 31, set by the releaser waiting for the
 * acknowledgement: the waiting layer's).  wake: W_FAR < W_SECOND <
 * W_FIRST < W_GO, plus LL_PARKED.
 *
 * Invariants:
 *  - tail is null iff no thread holds or waits for the lock; otherwise it
 *    names the node of the last thread in line, and each node in line has
 *    exactly one successor: the thread whose tail swap returned it;
 *  - a waiter proceeds only on G_GRANT in its predecessor's grant word or
 *    W_GO in its own wake word, each written only by the release of its
 *    predecessor's hold, which writes exactly one of them: G_GRANT if no
 *    F_ASLEEP was there before its exchange, else W_GO;
 *  - once F_ASLEEP is in a grant word its successor never accesses that
 *    node again; without it, the successor accesses it until its
 *    acknowledgement, which its releaser awaits; so when unlock returns no
 *    thread will read or write the node (a futex_wake may still reach its
 *    address: a spurious wake-up for whoever waits there next, which every
 *    waiter of this library absorbs; hold records are never freed);
 *  - ranks only move up once a waiter has written its own (G_FAR ->
 *    G_FIRST -> G_HOLD), wake words only up to W_GO; the CASes that raise
 *    a rank or a place on another thread's behalf never overwrite G_GRANT,
 *    G_EMPTY or W_GO.  Ranks and places only choose between spinning and
 *    sleeping: a stale one costs time, never exclusion or progress.
 * Orderings:
 *  - the tail swap is acq_rel: release publishes our initialised node to
 *    the successor that reads it as pred; acquire makes pred's node (and,
 *    on a free lock, the last critical section, through the releasing CAS)
 *    visible;
 *  - CAS(tail, self, null) in unlock is release, the trylock CAS acq_rel,
 *    for the same reason;
 *  - the grant (G_GRANT: release store or acq_rel exchange; W_GO: ll_wake)
 *    is read by the successor with acquire, so it sees the critical
 *    section;
 *  - the acknowledgement is a release exchange and the releaser's wait
 *    returns after an acquire load, so everything the successor did to the
 *    node happens before its reuse (by any algorithm, plain writes
 *    included);
 *  - the sleeper stores pred.sleeper and its own wake word before its
 *    F_ASLEEP CAS (release); the owner reads them after the exchange
 *    (acq_rel) that returns the flag; the CASes and exchanges on a grant
 *    word are read-modify-writes, so the release sequence of the sleeper's
 *    CAS reaches every later exchange;
 *  - rank and place changes carry no data; they are read-modify-writes only
 *    so that each sees F_ASLEEP or LL_PARKED where it must (the waiting
 *    layer's argument for LL_PARKED, src/core/wait.c).
 */
#include "internal.h"

#define G_EMPTY 0u
#define G_GRANT 1u
#define G_FAR 2u
#define G_FIRST 3u
#define G_HOLD 4u
#define F_ASLEEP 0x40000000u

#define W_FAR 1u
#define W_SECOND 2u
#define W_FIRST 3u
#define W_GO 4u

struct hem_node {
    _Atomic uint32_t grant;             /* the Grant word: what our successor watches */
    _Atomic(struct hem_node *) sleeper; /* our successor's node, stored before it sets F_ASLEEP */
    struct hem_node *asleep;            /* the hold's owner's: sleeper once F_ASLEEP was seen */
    LL_ALIGNED _Atomic uint32_t wake;   /* spin-then-park: where we sleep once we said so (own line) */
};

struct hem_lock {
    _Atomic(struct hem_node *) tail;
};

_Static_assert(sizeof(struct hem_node) <= LL_NODE_BYTES, "hemlock node too large");

static inline int parks(int policy) { return policy == LIBLOCK_WAIT_SPIN_THEN_PARK; }

static inline uint32_t load_acq(_Atomic uint32_t *w) { return atomic_load_explicit(w, memory_order_acquire); }

static int hem_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)l;
    (void)attr;
    return 0; /* tail null: free */
}

static int hem_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct hem_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

/* ---- spin-then-park: places and ranks on another thread's behalf (header 3-5) ---- */

/* Raise s's place to `to` unless it is there or beyond; wake it if it had parked. */
static void raise_place(struct hem_node *s, uint32_t to)
{
    uint32_t cur = atomic_load_explicit(&s->wake, memory_order_relaxed);
    while ((cur & ~LL_PARKED) < to) {
        if (atomic_compare_exchange_weak_explicit(&s->wake, &cur, to, memory_order_release, memory_order_relaxed)) {
            if (cur & LL_PARKED)
                ll_futex_wake(&s->wake, 1 << 30);
            return;
        }
    }
}

/* s is first in line now: its grant word G_FAR -> G_FIRST (header 5). */
static void raise_rank(struct hem_node *s)
{
    uint32_t cur = atomic_load_explicit(&s->grant, memory_order_relaxed);
    while ((cur & ~F_ASLEEP) == G_FAR &&
           !atomic_compare_exchange_weak_explicit(&s->grant, &cur, G_FIRST | (cur & F_ASLEEP), memory_order_relaxed,
                                                  memory_order_relaxed))
        ;
}

/* The owner of n stands at `rank` now: say so to its successor, in n's
 * grant word or, if the successor sleeps, in its wake word. */
static void announce(struct hem_node *n, uint32_t rank)
{
    struct hem_node *s = n->asleep;
    if (!s) {
        uint32_t old = atomic_exchange_explicit(&n->grant, rank, memory_order_acq_rel);
        if (LL_LIKELY(!(old & F_ASLEEP)))
            return;
        s = n->asleep = atomic_load_explicit(&n->sleeper, memory_order_relaxed);
    }
    if (rank == G_HOLD) {
        raise_rank(s); /* before it wakes, so that arrivals behind it spin */
        raise_place(s, W_FIRST);
    } else if (rank == G_FIRST) {
        raise_place(s, W_SECOND);
    }
}

/* Acknowledge the grant in p's word (the releaser may have parked). */
static inline void acknowledge(struct hem_node *p)
{
    uint32_t old = atomic_exchange_explicit(&p->grant, G_EMPTY, memory_order_acq_rel);
    if (old & LL_PARKED)
        ll_futex_wake(&p->grant, 1 << 30);
}

/* Spin on p's grant word while it reads v, for at most `budget` cycles;
 * returns what it reads then (v if the budget ran out). */
static uint32_t spin_while(_Atomic uint32_t *w, uint32_t v, uint64_t budget)
{
    uint64_t start = ll_cycles();
    unsigned k = 0;
    uint32_t cur;
    while ((cur = load_acq(w) & ~LL_PARKED) == v) {
        ll_pause();
        if ((++k & 63) == 0 && ll_cycles() - start > budget)
            break;
    }
    return cur;
}

/* Asleep on our own wake word (header 2, 4) from place w until W_GO;
 * `rank` is what our grant word says. */
static void wait_own(struct hem_node *n, uint32_t w, uint32_t rank)
{
    int policy = LIBLOCK_WAIT_PARK; /* we come here to sleep */
    for (;;) {
        w = ll_wait_while(&n->wake, w, policy);
        if (w == W_GO)
            return;
        if (w == W_FIRST && rank != G_FIRST) {
            announce(n, G_FIRST);
            rank = G_FIRST;
        }
        policy = LIBLOCK_WAIT_SPIN_THEN_PARK; /* raised: spin a budget first */
    }
}

/* lock() behind p under spin-then-park (header 1-2). */
static void wait_parking(struct hem_node *n, struct hem_node *p)
{
    const uint64_t budget = ll_spin_budget_cycles();
    uint32_t rank = G_HOLD; /* what our own word says (the initial value) */
    uint32_t v = load_acq(&p->grant) & ~LL_PARKED;
    for (;;) {
        if (v == G_GRANT) {
            acknowledge(p);
            return;
        }
        /* our rank: replace the initial G_HOLD, then only upwards */
        uint32_t want = v == G_HOLD ? G_FIRST : G_FAR;
        if (rank == G_HOLD || want > rank) {
            announce(n, want);
            rank = want;
        }
        if (v != G_FAR) {
            uint32_t nv = spin_while(&p->grant, v, budget);
            if (nv != v) {
                v = nv;
                continue;
            }
        }
        /* go to sleep on our own word */
        uint32_t place = v == G_HOLD ? W_FIRST : v == G_FIRST ? W_SECOND : W_FAR;
        atomic_store_explicit(&n->wake, place, memory_order_relaxed);
        atomic_store_explicit(&p->sleeper, n, memory_order_relaxed);
        uint32_t expect = v;
        if (atomic_compare_exchange_strong_explicit(&p->grant, &expect, v | F_ASLEEP, memory_order_release,
                                                    memory_order_acquire)) {
            wait_own(n, place, rank);
            return;
        }
        v = expect & ~LL_PARKED; /* changed meanwhile: a new rank, or the grant */
    }
}

static LL_SLOW int hem_lock_behind(liblock_t *l, struct hem_node *n, struct hem_node *p)
{
    const int policy = ll_policy(l);
    if (parks(policy)) {
        wait_parking(n, p);
        announce(n, G_HOLD);
        return 0;
    }
    if (policy == LIBLOCK_WAIT_SPIN) {
        /* CTR: poll with the acknowledging CAS itself */
        unsigned k = 0;
        uint64_t start = 0;
        int counted = 0;
        uint32_t expect = G_GRANT;
        while (!atomic_compare_exchange_weak_explicit(&p->grant, &expect, G_EMPTY, memory_order_acq_rel,
                                                      memory_order_relaxed)) {
            expect = G_GRANT;
            ll_pause();
            if (LL_UNLIKELY((++k & LL_SPIN_CHECK_MASK) == 0))
                ll_spin_note_slow(&start, &counted);
        }
        return 0;
    }
    ll_wait_while(&p->grant, G_HOLD, policy);
    acknowledge(p);
    return 0;
}

static int hem_lock(liblock_t *l, void *vnode)
{
    struct hem_lock *s = LL_STATE(l, struct hem_lock);
    struct hem_node *n = vnode;
    atomic_store_explicit(&n->grant, G_HOLD, memory_order_relaxed);
    n->asleep = NULL;
    struct hem_node *p = atomic_exchange_explicit(&s->tail, n, memory_order_acq_rel);
    if (LL_UNLIKELY(p != NULL))
        return hem_lock_behind(l, n, p);
    return 0;
}

static int hem_trylock(liblock_t *l, void *vnode)
{
    struct hem_lock *s = LL_STATE(l, struct hem_lock);
    struct hem_node *n = vnode;
    atomic_store_explicit(&n->grant, G_HOLD, memory_order_relaxed);
    n->asleep = NULL;
    struct hem_node *expect = NULL;
    return atomic_compare_exchange_strong_explicit(&s->tail, &expect, n, memory_order_acq_rel,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

/* unlock() with a successor (header 3). */
static LL_SLOW int hem_unlock_handoff(liblock_t *l, struct hem_node *n)
{
    const int policy = ll_policy(l);
    if (!parks(policy)) {
        atomic_store_explicit(&n->grant, G_GRANT, memory_order_release);
        ll_wait_while(&n->grant, G_GRANT, policy);
        return 0;
    }
    struct hem_node *s = n->asleep;
    if (!s) {
        uint32_t old = atomic_exchange_explicit(&n->grant, G_GRANT, memory_order_acq_rel);
        if (!(old & F_ASLEEP)) {
            ll_wait_while(&n->grant, G_GRANT, policy); /* the spinning successor's acknowledgement */
            return 0;
        }
        s = atomic_load_explicit(&n->sleeper, memory_order_relaxed);
    }
    ll_wake(&s->wake, W_GO, policy);
    return 0;
}

static int hem_unlock(liblock_t *l, void *vnode)
{
    struct hem_lock *s = LL_STATE(l, struct hem_lock);
    struct hem_node *n = vnode;
    struct hem_node *expect = n;
    if (LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_release,
                                                          memory_order_relaxed)))
        return 0;
    return hem_unlock_handoff(l, n);
}

const struct ll_ops ll_ops_hemlock = {
    .name = "hemlock",
    .description = "Hemlock queue lock: one word per lock, each waiter spins on its predecessor's grant word, "
                   "the releaser waits for the successor's acknowledgement",
    .source = "Dice and Kogan, Hemlock: Compact and Scalable Mutual Exclusion, SPAA 2021 (arXiv:2102.03863), the "
              "algorithm's listing and its CTR variant",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "only the next two waiters spin (on their predecessor's grant word), the others sleep on their own node; each waiter is woken when it becomes second in line, so its wake-up overlaps the critical sections ahead; a sleeping waiter is granted directly, so no unlock waits for a thread that is not running; FIFO: a hand-off to a thread that is not running costs at most one wake-up",
    .state_size = sizeof(struct hem_lock),
    .node_size = sizeof(struct hem_node),
    .init = hem_init,
    .destroy = hem_destroy,
    .lock = hem_lock,
    .trylock = hem_trylock,
    .unlock = hem_unlock,
};
