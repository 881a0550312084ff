/*
 * hapax - Hapax Locks (Dice and Kogan): a FIFO queue lock with no queue of
 * pointers.  Each acquisition takes a value never used before (a "hapax");
 * a waiter learns its predecessor's value from the lock's Arrive word and
 * waits for that value to appear in the lock's Depart word.
 *
 * Source: D. Dice and A. Kogan, "Hapax Locks: Scalable Value-Based Mutual
 * Exclusion", ACM PPoPP 2026 (extended version "Hapax Locks: Value-Based
 * Mutual Exclusion", arXiv:2511.14608): the basic algorithm as described
 * publicly (the Arrive and Depart words, values from a global block
 * allocator, a waiting array hashed from values).  We could not check it
 * against the paper's listings, so we cite no section or listing, and what
 * goes beyond the basic algorithm below is our own construction, marked as
 * such:
 *   lock(L):   h = NextHapax()                  -- unique, never 0
 *              pred = swap(L.Arrive, h)         -- the doorway: total order
 *              wait until L.Depart == pred      -- our predecessor has left
 *   unlock(L): L.Depart = h
 * The lock is two 64-bit words and nothing else; no pointer passes between
 * threads, a waiter waits on a value (its predecessor's hapax) and not on
 * another thread's memory, and both the doorway and unlock are constant
 * time.  Arrive == Depart iff nobody holds or waits (both 0 at init).
 *
 * Hapax values.  A value must never be taken twice while a waiter could
 * still be waiting for it, or a waiter behind a value reused by a later
 * holder could enter with its real predecessor still inside.  We make
 * values unique in the process for its lifetime with a global block
 * allocator, as the paper is described to do: a global 64-bit counter hands out blocks of 2^16 values
 * (block b is [b << 16, (b + 1) << 16)); a thread takes values from its
 * current block with a private increment and a new block (one fetch-add on
 * the global counter) when the low 16 bits wrap to 0.  The first value of
 * each block (low 16 bits 0) is skipped, so 0 is never a hapax and block 0
 * is never handed out.  Values are unique across threads (disjoint blocks),
 * within a thread (increasing), across thread exit (a new thread starts a
 * new block; the rest of an exited thread's block is never used) and
 * across locks.  The 48-bit block counter does not wrap in a program's
 * life (2^48 blocks).  After fork() the child continues its parent's
 * counters: the same values exist in both processes, which share no lock
 * (the interposer rebuilds each lock in the child, and leaves
 * process-shared mutexes to glibc); uniqueness is per process, so a hapax
 * lock must not be shared between processes.
 *
 * The hold (our change).  The holder's hapax is kept in the per-hold node
 * the API layer and the interposer hand to lock() and unlock() (it stays
 * put from one to the other), not in the thread: whoever calls unlock with
 * that node publishes the right value, so another thread can unlock a
 * NORMAL mutex, a holder can exit holding, and a thread can wait on a lock
 * it holds (its second lock() has its own node, and its predecessor is its
 * own first hold).  unlock clears the node's value before it publishes, and
 * an unlock of a node without a value is ignored (a second unlock of one
 * hold).
 *
 * Waiting (our construction, after the waiting array the source is
 * described to use and that of D. Dice and A. Kogan, "TWA -- Ticket Locks
 * Augmented with a Waiting Array", Euro-Par 2019).  Polling Depart would make every waiter's cache miss on every
 * release, as in a ticket lock.  Instead a waiter behind pred waits on
 * slot(L, pred), one word of a global array of 1024 cache-line words,
 * hashed from the lock's address and pred: consecutive waiters of one lock
 * wait on different slots, each watched by its one waiter (unless two
 * values collide).  A slot holds a 31-bit change counter, not a value (so
 * that a waiter can sleep on it): the releaser of h, after its store to
 * Depart, bumps slot(L, h) (ll_bump_wake: +1, wakes its sleepers), and a
 * waiter re-reads Depart each time its slot changes:
 *   waiter:   loop { v = slot; if Depart == pred: done;
 *                    wait while slot == v (spin, yield, or spin then park) }
 *   releaser: Depart = h; if Arrive != h: bump(slot(L, h))
 * A release whose Arrive is still h has no successor (see "No lost
 * wake-up"), so an uncontended unlock writes no slot.  A collision (another
 * lock or value bumping the same slot) costs the waiter a re-read of
 * Depart, never a missed release.
 *
 * Waiting policies: spin, yield, spin-then-park (default).  Under spin the
 * waiter polls its slot, under yield it yields between reads, under
 * spin-then-park it spins for the spin budget (ll_spin_budget_cycles), then
 * sets LL_PARKED on the slot by CAS, re-reads Depart, and sleeps in
 * futex_wait.  Early wake-up (our addition): a waiter that has just been
 * admitted with hapax h, if someone arrived behind it and slot(L, h) says
 * LL_PARKED, bumps that slot at once, so its successor wakes during the
 * critical section, finds Depart not yet h, and spins its budget again
 * instead of sleeping through the hand-over.  Only the next waiter is
 * woken early: a holder knows its successor's slot, not the one after.
 *
 * Invariants:
 *  - the values swapped into Arrive are distinct and non-zero; each is
 *    returned by exactly one later swap (its successor's pred) or by none
 *    (the last arrival); so each hold has at most one successor, and the
 *    swap order is the admission order (FIFO, starvation-free);
 *  - Depart holds the value of the last hold released (0 initially); it
 *    changes only in the unlock of the current hold; a waiter behind pred is
 *    admitted when Depart == pred, and Depart cannot pass pred before that
 *    waiter has itself been admitted and released, so the wait is exact;
 *  - Arrive == Depart iff the lock is free with nobody waiting: every
 *    arrival changes Arrive to a value Depart has not held, and Depart
 *    reaches it only when that hold is released.  trylock CASes Arrive from
 *    the Depart it read to its own value, which succeeds only then (a value
 *    never comes back, so no ABA);
 *  - slots only count: their values choose when to re-read Depart, never
 *    who enters.
 * No lost wake-up.  Every access to Arrive, Depart and the slots on these
 * paths is seq_cst, so they lie in one total order S.  Suppose the waiter
 * behind pred waits for good on slot value v: its last read of Depart did
 * not see pred, so it precedes the releaser's store of pred in S, and so
 * does its read of v (and its CAS setting LL_PARKED).  The releaser's
 * bump follows its store in S: it is later in the slot's modification order
 * than v, so the waiter sees the slot change while it spins, or its CAS
 * fails, or futex_wait finds another value, or the bump sees LL_PARKED and
 * wakes all sleepers of the slot.  The bump is skipped only when the
 * releaser reads Arrive == h after its store; then the successor's swap
 * follows that read in S, and its read of Depart, later still, sees h
 * (Depart moves on from h only when that successor releases): it does not
 * wait.
 * Orderings otherwise: the store to Depart is a release (seq_cst) and the
 * admitting read of it an acquire (seq_cst), so a critical section sees the
 * previous one; trylock's CAS reads Arrive == Depart == the previous value
 * after an acquire of Depart, so it sees the last release too.  The hapax
 * in the node is written and read only by the hold's own lock()/unlock()
 * callers, whom the API layer or the interposer order among themselves.
 */
#include "internal.h"

#define HAPAX_SLOTS 1024u   /* global waiting array: one word per cache line, 64 KiB */
#define HAPAX_BLOCK_BITS 16 /* values a thread takes per visit to the global counter: 2^16 - 1 */

struct hapax_lock {
    _Atomic uint64_t arrive; /* the last arrival's hapax (0: none yet) */
    _Atomic uint64_t depart; /* the last released hold's hapax */
};

struct hapax_node {
    uint64_t hapax; /* this hold's value; 0 when not held */
};

struct hapax_slot {
    LL_ALIGNED _Atomic uint32_t seq; /* change counter, plus LL_PARKED */
};

_Static_assert(sizeof(struct hapax_node) <= LL_NODE_BYTES, "hapax node too large");

static struct hapax_slot slots[HAPAX_SLOTS];
static LL_ALIGNED _Atomic uint64_t next_block; /* the last block handed out */
static __thread uint64_t next_hapax;           /* this thread's next value; low bits 0: take a block */

static uint64_t take_hapax(void)
{
    uint64_t h = next_hapax++;
    if (LL_UNLIKELY((h & ((1ull << HAPAX_BLOCK_BITS) - 1)) == 0)) {
        h = (atomic_fetch_add_explicit(&next_block, 1, memory_order_relaxed) + 1) << HAPAX_BLOCK_BITS;
        h++; /* skip the block's first value: 0 is no hapax */
        next_hapax = h + 1;
    }
    return h;
}

static inline _Atomic uint32_t *slot_of(const struct hapax_lock *s, uint64_t h)
{
    uint64_t x = ((uint64_t)(uintptr_t)s >> 4) ^ (h * 0x9E3779B97F4A7C15ull);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    return &slots[(x >> 40) & (HAPAX_SLOTS - 1)].seq;
}

static inline uint64_t load_sc(_Atomic uint64_t *w) { return atomic_load_explicit(w, memory_order_seq_cst); }

static int hapax_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)l;
    (void)attr;
    return 0; /* Arrive == Depart == 0: free (state zeroed) */
}

static int hapax_destroy(liblock_t *l)
{
    struct hapax_lock *s = LL_STATE(l, struct hapax_lock);
    return load_sc(&s->arrive) != load_sc(&s->depart) ? EBUSY : 0;
}

/* Sleep on w while it reads v (LL_PARKED aside) and Depart is not pred. */
static void park_on(struct hapax_lock *s, _Atomic uint32_t *w, uint32_t v, uint64_t pred)
{
    uint32_t cur = v;
    if (!(cur & LL_PARKED)) {
        if (!atomic_compare_exchange_strong_explicit(w, &cur, cur | LL_PARKED, memory_order_seq_cst,
                                                     memory_order_seq_cst))
            return; /* bumped meanwhile: the caller re-reads */
        cur |= LL_PARKED;
    }
    if (load_sc(&s->depart) == pred)
        return;
    ll_parks_tls++;
    ll_futex_wait(w, cur, NULL);
}

/* Wait until Depart == pred (header: "Waiting"). */
static LL_SLOW void hapax_wait(struct hapax_lock *s, uint64_t pred, int policy)
{
    _Atomic uint32_t *w = slot_of(s, pred);
    const int parks = policy == LIBLOCK_WAIT_SPIN_THEN_PARK;
    const uint64_t budget = parks ? ll_spin_budget_cycles() : 0;
    uint64_t slow_start = 0;
    int slow_counted = 0;
    for (;;) {
        uint32_t v = atomic_load_explicit(w, memory_order_seq_cst);
        if (load_sc(&s->depart) == pred)
            return;
        uint64_t start = parks ? ll_cycles() : 0;
        unsigned k = 0;
        int changed = 0;
        for (;;) {
            if (((atomic_load_explicit(w, memory_order_seq_cst) ^ v) & ~LL_PARKED) != 0) {
                changed = 1;
                break;
            }
            if (policy == LIBLOCK_WAIT_YIELD) {
                ll_yield();
                continue;
            }
            ll_pause();
            ++k;
            if (parks) {
                if ((k & 63) == 0 && ll_cycles() - start > budget)
                    break;
            } else if (LL_UNLIKELY((k & LL_SPIN_CHECK_MASK) == 0)) {
                ll_spin_note_slow(&slow_start, &slow_counted);
            }
        }
        if (!changed)
            park_on(s, w, v, pred);
    }
}

/* Admitted with hapax h after a wait: wake our successor if it sleeps. */
static inline void wake_next_early(struct hapax_lock *s, uint64_t h)
{
    if (atomic_load_explicit(&s->arrive, memory_order_relaxed) == h)
        return; /* nobody behind us yet */
    _Atomic uint32_t *w = slot_of(s, h);
    if (atomic_load_explicit(w, memory_order_relaxed) & LL_PARKED)
        ll_bump_wake(w);
}

static int hapax_lock(liblock_t *l, void *vnode)
{
    struct hapax_lock *s = LL_STATE(l, struct hapax_lock);
    struct hapax_node *n = vnode;
    uint64_t h = take_hapax();
    n->hapax = h;
    uint64_t pred = atomic_exchange_explicit(&s->arrive, h, memory_order_seq_cst);
    if (LL_LIKELY(load_sc(&s->depart) == pred))
        return 0;
    hapax_wait(s, pred, ll_policy(l));
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        wake_next_early(s, h);
    return 0;
}

static int hapax_trylock(liblock_t *l, void *vnode)
{
    struct hapax_lock *s = LL_STATE(l, struct hapax_lock);
    struct hapax_node *n = vnode;
    uint64_t d = load_sc(&s->depart);
    uint64_t expect = d;
    if (atomic_load_explicit(&s->arrive, memory_order_relaxed) != d)
        return EBUSY;
    uint64_t h = take_hapax();
    if (!atomic_compare_exchange_strong_explicit(&s->arrive, &expect, h, memory_order_seq_cst,
                                                 memory_order_relaxed))
        return EBUSY; /* h is never used: values need only be unique, not dense */
    n->hapax = h;
    return 0;
}

static int hapax_unlock(liblock_t *l, void *vnode)
{
    struct hapax_lock *s = LL_STATE(l, struct hapax_lock);
    struct hapax_node *n = vnode;
    uint64_t h = n->hapax;
    if (LL_UNLIKELY(h == 0))
        return 0; /* this hold was released already */
    n->hapax = 0;
    atomic_store_explicit(&s->depart, h, memory_order_seq_cst);
    if (LL_UNLIKELY(load_sc(&s->arrive) != h))
        ll_bump_wake(slot_of(s, h)); /* a successor: its slot changes (header) */
    return 0;
}

/* Test probes: the lock's two words (both < 2^63: 2^47 blocks at most). */
static void hapax_stats(const liblock_t *l, struct ll_stats *out)
{
    struct hapax_lock *s = LL_STATE(l, struct hapax_lock);
    ll_stats_put(out, "arrive", (int64_t)load_sc(&s->arrive));
    ll_stats_put(out, "depart", (int64_t)load_sc(&s->depart));
}

const struct ll_ops ll_ops_hapax = {
    .name = "hapax",
    .description = "Hapax lock: each acquisition takes a value never used before, swaps it into Arrive and waits "
                   "for its predecessor's value in Depart; no pointer passes between threads; waiters watch a "
                   "hashed slot of a global waiting array",
    .source = "Dice and Kogan, Hapax Locks: Scalable Value-Based Mutual Exclusion, PPoPP 2026 (arXiv:2511.14608), "
              "the basic algorithm as described publicly (not checked against the listings); the waiting array's protocol here is ours",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "waiters spin on their own slot of the waiting array for the spin budget, then sleep there; "
                      "a new holder wakes its successor if it sleeps, so that wake-up overlaps the critical section; "
                      "FIFO: a hand-off to a thread that is not running costs at most one wake-up",
    .state_size = sizeof(struct hapax_lock),
    .node_size = sizeof(struct hapax_node),
    .init = hapax_init,
    .destroy = hapax_destroy,
    .lock = hapax_lock,
    .trylock = hapax_trylock,
    .unlock = hapax_unlock,
    .stats = hapax_stats,
};
