/*
 * hyblock - HybLock, the hybrid queue lock: lock state in shared memory,
 * hand-over by message, over the shared-memory mailboxes of
 * src/runtime/transport/mailbox.h.
 *
 * Source: D. Petrovic, "Efficient Communication and Synchronization on
 * Manycore Processors", PhD thesis no. 6552, EPFL, 2015, section 6.1.1
 * "The classic lock (HybLock)", Algorithm 3 (also Petrovic, Ropars and
 * Schiper, PPoPP 2014).  The thesis sends the messages through the
 * hardware message queues of a manycore chip; here they travel through
 * cache coherence.
 *
 * Algorithm 3, for thread id with thread-local next (initially nil):
 *   acquire: prev = SWAP(lock, id); if prev != UNLOCKED: send(prev, id);
 *            tmp = receive(1); if tmp != ALLOW: next = tmp; receive(1)
 *   release: if next: send(next, ALLOW); next = nil; return
 *            if is_msg_queue_empty() and CAS(lock, id, UNLOCKED): return
 *            send(receive(1), ALLOW)
 *
 * Nesting (the thesis's "Limitation": messages of different locks would
 * interleave in one queue; its suggested fix is message tags and a
 * per-thread stack of next values).  liblock promises several locks held
 * at once, released in any order, so each acquisition takes a LEVEL, the
 * lowest level number the thread is not using (a per-thread bitmap; a
 * level is free again when the release that used it returns), and the lock
 * word holds the pair (mailbox, level) instead of a thread id.  The level
 * is the tag: the successor sends its own (mailbox, level) to lane
 * LL_LANE_HYBLOCK(level) of the predecessor's mailbox, and the predecessor
 * sends ALLOW to lane LL_LANE_HYBLOCK(level)+1 of the successor's.  With
 * the two messages on two lanes the "tmp != ALLOW" juggling of lines 11-14
 * disappears: acquire waits on the ALLOW lane only, and the successor's id
 * stays in its lane until release reads it -- that lane IS the `next`
 * stack entry of the thesis's fix, one per level.
 *
 * Invariants.
 *  - The lock word is 0 (UNLOCKED) or the (mailbox, level) of the last
 *    thread to SWAP in; each SWAP returns each value at most once, so an
 *    acquisition has at most one successor and one predecessor.
 *  - Single writer per lane (mailbox.h's rule): the successor lane of
 *    (T, L) is written only by the thread whose SWAP returned (T, L), the
 *    ALLOW lane only by the thread whose SWAP T's SWAP returned.  One
 *    message each per acquisition.  The next acquisition at (T, L) starts
 *    after the release at (T, L) returned, which consumed both messages,
 *    so consecutive writers of a lane are ordered: writer 1's send ->
 *    T's receive (acquire) -> T's later SWAP (release, on whatever lock)
 *    -> writer 2's SWAP that returns (T, L) (acquire), through the lock
 *    word's modification order (a chain of read-modify-writes continues
 *    the release sequence).
 *  - The release of an acquisition at (T, L) may run on another thread
 *    than T (the interposer lets any thread unlock a NORMAL mutex, as glibc
 *    does): it works only from the node (T's mailbox, L, next), reads the
 *    successor lane of (T, L) -- whose one reader is whichever thread
 *    releases that acquisition -- and gives L back to T through the
 *    mailbox's levels_freed (level_release), so T's bitmap keeps one
 *    writer and T reuses L only after that release (release/acquire, see
 *    ll_mbox_levels_merge): the ordering argument above holds unchanged.
 *  - release returns only when no successor can write to (T, L) any more:
 *    either its CAS found the lock word still (T, L) (nobody swapped in
 *    behind us, and nobody can now: the word changed), or it received the
 *    successor's message.  If the CAS fails, a successor has swapped in
 *    and its message is coming: release waits for it (the thesis's line 23).
 * Orderings.
 *  - SWAP is acq_rel: acquire, so the new holder sees the previous holder's
 *    critical section when the lock was free (the CAS that freed it is a
 *    release); release, so the next arrival reading our (mailbox, level)
 *    also sees our mailbox's lanes (reserved before) and the lane history.
 *  - ALLOW is published by the mailbox's release store (or exchange) of the
 *    lane tail after the critical section; the waiter's acquire load of
 *    the tail makes the critical section visible to it.
 *  - CAS(lock, me, UNLOCKED) is release (the next SWAP is acquire).
 * Costs.  Uncontended: one SWAP to acquire, one CAS to release, no node.
 * Contended: no atomic read-modify-write on the hand-over under the spin
 * and yield policies (a store to the successor's lane); under
 * spin-then-park the lane tail is published with an exchange so that a
 * parked receiver is seen and woken.  Over cache coherence a message is a
 * cache-line transfer, so a hand-over costs what MCS's does: no gain over
 * MCS is to be expected; the lock is here for completeness and for
 * machines where messages are cheaper than coherence misses.
 *
 * Policies: spin, yield, spin-then-park (default): a waiter waits for its
 * ALLOW (and a releaser for a successor that has swapped in but not yet
 * sent) in ll_mbox_receive, which spins (or UMWAIT/MWAITX where the CPU
 * has them) for the spin budget, then parks on the lane's tail word.
 *
 * Places (spin-then-park; not in the thesis).  Each acquisition publishes
 * its place in the queue in the aux word of its ALLOW lane: granted,
 * first, second or far back.  An arrival reads its predecessor's place
 * once: behind the holder it is first, behind the first it is second, and
 * behind anyone else it sleeps at once; the holder tells its successor
 * "first" (READY1) and a new first tells its own "second" (READY2), so a
 * waiter is woken while two critical sections still run ahead of it.  The
 * place is written by whoever learns it first: the arrival itself, from
 * its predecessor's, before it sends its id (so no later write is
 * overtaken), then the sender of each READY or ALLOW, before the message
 * (send_place); an acquisition of a free lock writes "granted" itself.
 * Why the sender writes it: if the receiver wrote its own place on
 * receipt, its place would read "far back" or "second" for as long as it
 * had not run since the message -- all of a wake-up, for a sleeper -- and
 * the next arrival behind it would sleep at once; with two threads on two
 * CPUs that sustains itself, every hand-off then waiting for a wake-up
 * although both threads have a CPU.  The word is only a hint for the
 * choice between spinning and sleeping: every hand-over and promotion is
 * a message, and a stale place costs at most a spin budget or an early
 * sleep.
 * FIFO (SWAP order) and starvation-free.
 * Limits: 4096 levels per thread (locks held or being acquired at once):
 * one more is EAGAIN.  The lock word packs a mailbox address below 2^48
 * with the level in the top 16 bits.
 */
#include "internal.h"
#include "runtime/transport/mailbox.h"

#define HYB_ALLOW 1ull
#define HYB_READY1 2ull /* spin-then-park: "you are first in line" */
#define HYB_READY2 3ull /* spin-then-park: "you are second in line" */
#define HYB_LEVEL_WORDS 64 /* 4096 levels */
#define HYB_LEVEL_SHIFT 48

/* Place in the queue, published in the aux word of a level's ALLOW lane. */
enum { R_GRANTED = 0, R_FAR = 1, R_FIRST = 2, R_SECOND = 3 };

struct hyb_lock {
    _Atomic uint64_t tail; /* 0 = UNLOCKED, else mailbox | level << 48 */
};

struct hyb_node {
    ll_mbox_t *mb;
    uint64_t next; /* the successor, once its message has been taken from the lane; 0 if unknown */
    uint32_t level;
};
_Static_assert(sizeof(struct hyb_node) <= LL_NODE_BYTES, "hyblock node too large");

_Static_assert(sizeof(((ll_mbox_t *)0)->levels) * 8 == HYB_LEVEL_WORDS * 64, "level bitmap size");

/* Levels in use: a bitmap in our own mailbox (owner only, clear whenever
 * the mailbox is pooled, since a thread holding a lock keeps it).  A level
 * released by another thread (level_release) comes back through the
 * mailbox's levels_freed, merged here; the relaxed look at the summary is
 * only a hint (a level missed now is found at a later call). */
static inline int level_get(ll_mbox_t *mb, uint32_t *out)
{
    uint64_t *hyb_levels = mb->levels;
    if (LL_UNLIKELY(atomic_load_explicit(&mb->levels_freed_any, memory_order_relaxed)))
        ll_mbox_levels_merge(mb);
    for (unsigned w = 0; w < HYB_LEVEL_WORDS; w++) {
        if (~hyb_levels[w]) {
            uint32_t lv = w * 64 + (uint32_t)__builtin_ctzll(~hyb_levels[w]);
            if (LL_UNLIKELY(!ll_mbox_has_lanes(mb, LL_LANE_HYBLOCK(lv) + 2))) {
                int r = ll_mbox_reserve(mb, LL_LANE_HYBLOCK(lv) + 2);
                if (r)
                    return r;
            }
            hyb_levels[w] |= 1ull << (lv % 64);
            *out = lv;
            return 0;
        }
    }
    return EAGAIN;
}

static inline void level_put(ll_mbox_t *mb, uint32_t lv) { mb->levels[lv / 64] &= ~(1ull << (lv % 64)); }

/* Release level lv of mb after a release: the owner clears its own bit;
 * any other thread (a lock unlocked by a thread that did not acquire it,
 * which glibc allows for a NORMAL mutex) hands it back through the
 * mailbox's levels_freed (release: its reads of the level's lanes come
 * before the owner's reuse, which acquires in ll_mbox_levels_merge). */
static inline void level_release(ll_mbox_t *mb, uint32_t lv)
{
    if (LL_LIKELY(ll_mbox_tls == mb)) {
        level_put(mb, lv);
        return;
    }
    atomic_fetch_or_explicit(&mb->levels_freed[lv / 64], 1ull << (lv % 64), memory_order_release);
    atomic_fetch_or_explicit(&mb->levels_freed_any, 1ull << (lv / 64), memory_order_release);
}

static inline uint64_t enc(ll_mbox_t *mb, uint32_t lv) { return (uint64_t)(uintptr_t)mb | ((uint64_t)lv << HYB_LEVEL_SHIFT); }
static inline ll_mbox_t *dec_mb(uint64_t v) { return (ll_mbox_t *)(uintptr_t)(v & ((1ull << HYB_LEVEL_SHIFT) - 1)); }
static inline uint32_t dec_lv(uint64_t v) { return (uint32_t)(v >> HYB_LEVEL_SHIFT); }

static inline _Atomic uint32_t *rank_word(uint64_t who)
{
    return &ll_mbox_lane(dec_mb(who), LL_LANE_HYBLOCK(dec_lv(who)) + 1)->aux;
}

static inline void send_to(uint64_t who, unsigned off, uint64_t msg, int policy)
{
    ll_mbox_send1(dec_mb(who), LL_LANE_HYBLOCK(dec_lv(who)) + off, msg, policy);
}

/* Spin-then-park: send msg to who's ALLOW lane; if who had parked there,
 * write the place the message gives it (`rank`) into its rank word before
 * waking it ("Sleepers' places" in the header). */
static inline void send_place(uint64_t who, uint64_t msg, uint32_t rank)
{
    atomic_store_explicit(rank_word(who), rank, memory_order_relaxed);
    ll_mbox_send1(dec_mb(who), LL_LANE_HYBLOCK(dec_lv(who)) + 1, msg, LIBLOCK_WAIT_SPIN_THEN_PARK);
}

/* Our mailbox and a fresh level, or an errno. */
static int begin(struct hyb_node *n)
{
    ll_mbox_t *mb = ll_mbox_self();
    if (LL_UNLIKELY(!mb))
        return ENOMEM;
    if (LL_UNLIKELY((uintptr_t)mb >> HYB_LEVEL_SHIFT))
        return ENOMEM; /* cannot be packed (never seen on Linux x86-64/arm64) */
    n->mb = mb;
    n->next = 0;
    return level_get(mb, &n->level);
}

/* Early wake-up: if our successor's id has arrived, take it (it becomes
 * `next`, the thesis's variable) and tell it its place. */
static inline void tell_successor(struct hyb_node *n, uint64_t msg)
{
    if (!n->next) {
        if (ll_mbox_is_empty(n->mb, LL_LANE_HYBLOCK(n->level)))
            return;
        n->next = ll_mbox_receive1(n->mb, LL_LANE_HYBLOCK(n->level), LIBLOCK_WAIT_SPIN);
    }
    send_place(n->next, msg, msg == HYB_READY1 ? R_FIRST : R_SECOND);
}

static int hyb_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    return 0;
}

static int hyb_lock(liblock_t *l, void *vnode)
{
    struct hyb_lock *s = LL_STATE(l, struct hyb_lock);
    struct hyb_node *n = vnode;
    const int policy = ll_policy(l);
    int r = begin(n);
    if (LL_UNLIKELY(r))
        return r;
    uint64_t me = enc(n->mb, n->level);
    if (policy != LIBLOCK_WAIT_SPIN_THEN_PARK) {
        uint64_t prev = atomic_exchange_explicit(&s->tail, me, memory_order_acq_rel);
        if (prev) {
            send_to(prev, 0, me, policy); /* "I am behind you" */
            (void)ll_mbox_receive1(n->mb, LL_LANE_HYBLOCK(n->level) + 1, policy); /* ALLOW */
        }
        return 0;
    }
    _Atomic uint32_t *mine = rank_word(me);
    atomic_store_explicit(mine, R_FAR, memory_order_relaxed); /* until we know better */
    uint64_t prev = atomic_exchange_explicit(&s->tail, me, memory_order_acq_rel);
    if (prev) {
        uint32_t pr = atomic_load_explicit(rank_word(prev), memory_order_relaxed);
        uint32_t rank = pr == R_GRANTED ? R_FIRST : pr == R_FIRST ? R_SECOND : R_FAR;
        if (rank != R_FAR)
            atomic_store_explicit(mine, rank, memory_order_relaxed);
        send_to(prev, 0, me, policy);
        for (;;) {
            uint64_t m = ll_mbox_receive1(n->mb, LL_LANE_HYBLOCK(n->level) + 1,
                                          rank == R_FAR ? LIBLOCK_WAIT_PARK : policy);
            if (m == HYB_ALLOW)
                break;
            if (m == HYB_READY1) { /* the sender wrote our place (send_place) */
                rank = R_FIRST;
                tell_successor(n, HYB_READY2);
            } else if (rank == R_FAR) {
                rank = R_SECOND;
            }
        }
    } else {
        atomic_store_explicit(mine, R_GRANTED, memory_order_relaxed); /* nobody else will */
    }
    tell_successor(n, HYB_READY1);
    return 0;
}

static int hyb_trylock(liblock_t *l, void *vnode)
{
    struct hyb_lock *s = LL_STATE(l, struct hyb_lock);
    struct hyb_node *n = vnode;
    if (atomic_load_explicit(&s->tail, memory_order_relaxed))
        return EBUSY;
    int r = begin(n);
    if (LL_UNLIKELY(r))
        return r;
    uint64_t me = enc(n->mb, n->level);
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        atomic_store_explicit(rank_word(me), R_GRANTED, memory_order_relaxed);
    uint64_t expect = 0;
    if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, me, memory_order_acq_rel, memory_order_relaxed))
        return 0;
    level_put(n->mb, n->level);
    return EBUSY;
}

static int hyb_unlock(liblock_t *l, void *vnode)
{
    struct hyb_lock *s = LL_STATE(l, struct hyb_lock);
    struct hyb_node *n = vnode;
    unsigned succ_lane = LL_LANE_HYBLOCK(n->level);
    uint64_t succ = n->next;
    if (!succ) {
        if (ll_mbox_is_empty(n->mb, succ_lane)) {
            uint64_t expect = enc(n->mb, n->level);
            if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, 0, memory_order_release,
                                                        memory_order_relaxed)) {
                level_release(n->mb, n->level);
                return 0;
            }
        }
        /* A successor exists; its id is in our lane or on its way. */
        succ = ll_mbox_receive1(n->mb, succ_lane, ll_policy(l));
    }
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        send_place(succ, HYB_ALLOW, R_GRANTED);
    else
        send_to(succ, 1, HYB_ALLOW, ll_policy(l));
    level_release(n->mb, n->level);
    return 0;
}

static int hyb_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct hyb_lock)->tail, memory_order_acquire) ? EBUSY : 0;
}

const struct ll_ops ll_ops_hyblock = {
    .name = "hyblock",
    .description = "HybLock: SWAP to enqueue, hand-over by message through per-thread mailboxes, CAS release when no successor; nested via per-level lanes",
    .source = "Petrovic, Efficient Communication and Synchronization on Manycore Processors (PhD thesis, EPFL 2015), section 6.1.1, Algorithm 3; Petrovic, Ropars and Schiper, PPoPP 2014",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "only the next two waiters spin, the others sleep on their mailbox lane; a waiter is told by message when it becomes first or second in line, so its wake-up overlaps the critical sections ahead; FIFO: a hand-off to a thread that is not running costs at most one wake-up",
    .state_size = sizeof(struct hyb_lock),
    .node_size = sizeof(struct hyb_node),
    .init = hyb_init,
    .destroy = hyb_destroy,
    .lock = hyb_lock,
    .trylock = hyb_trylock,
    .unlock = hyb_unlock,
};
