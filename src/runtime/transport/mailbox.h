/*
 * mailbox.h - per-thread mailboxes over cache coherence: the
 * message-passing model of D. Petrovic, "Efficient Communication and
 * Synchronization on Manycore Processors", PhD thesis no. 6552, EPFL,
 * 2015, section 5.2 "System Model" (send, blocking receive(k),
 * is_msg_queue_empty, per-thread FIFO queues of 64-bit words), which the
 * thesis gets from the hardware message queues of a manycore chip, built
 * here from ordinary loads and stores.  The platform for hyblock and
 * hybcomb (src/locks/hybrid/); docs/hybrid.md is the user's view.
 *
 * Shape.  Every thread owns one mailbox (created on its first call, given
 * back to a pool when it exits and reused by a later thread, never freed,
 * so a sender that still holds its address never touches freed memory).  A
 * mailbox is an array of LANES; a lane is a bounded FIFO of LL_MBOX_CAP
 * 64-bit words with ONE writer at a time and one reader, its owner.  The
 * thesis's hardware has one queue per core that any core may write; over
 * cache coherence a queue with several concurrent writers needs an atomic
 * read-modify-write per message to claim a slot, so instead the protocol
 * that uses a mailbox says which sender may write which lane (the
 * thesis's "message tags"): hyblock gives each lock a thread holds its own
 * pair of lanes, hybcomb's replies use one lane per thread because a
 * thread waits for at most one reply at a time.  Consecutive writers of
 * one lane must be ordered by happens-before (the next writer learns of
 * the lane through a chain of release/acquire operations that starts after
 * the previous writer's send); both algorithms argue it in their headers.
 *
 * A lane:     line 1 (the sender's): tail, the count of words sent mod 2^31,
 *                     and the CAP words of the ring; the receiver reads it;
 *             line 2 (the receiver's): head, the count of words received,
 *                     aux, a word the owner publishes for its senders
 *                     (what it means is up to the protocol), and parked,
 *                     the owner's announcement that it sleeps ("Parking").
 * send(k):    wait until CAP - (tail - head) >= k; write the k words into
 *             ring[(tail + i) % CAP]; publish tail + k with a release store
 *             (an exchange when the receiver may be parked symmetrically,
 *             see "Parking" below).
 * receive(k): wait until tail - head >= k (acquire load of tail), read the
 *             words, store head + k (release).
 * is_empty:   tail == head.
 * FIFO per lane follows from the ring; "per sender" is the same thing,
 * since a lane has one sender at a time.  No atomic read-modify-write is
 * needed on the fast path: each counter has a single writer.
 *
 * Orderings.  The sender's word stores happen before its release store of
 * tail; the receiver's acquire load of tail that sees it makes them
 * visible.  The receiver's loads of the words happen before its release
 * store of head; the sender's acquire load of head that sees it orders the
 * slot's reuse after those loads.
 *
 * Parking.  With spin-then-park or park the tail word is also the
 * receiver's waiting word in the sense of src/core/wait.c (bit 31 is
 * LL_PARKED, counters are 31 bits), and a send must not miss a receiver
 * that has gone to sleep on it.  Two protocols; which one a message uses
 * is the protocol's choice per message, and the sender must use the one
 * the receiver waits with (a receiver of the asymmetric one also tolerates
 * the symmetric send: it sets LL_PARKED too):
 *   - symmetric (ll_mbox_post, ll_mbox_send; ll_mbox_receive): the
 *     receiver CASes tail from its head value v to v|LL_PARKED and sleeps
 *     in futex_wait(tail, v|LL_PARKED); the sender publishes with an
 *     exchange (acq_rel) and calls futex_wake only if the old value had
 *     LL_PARKED.  Both are read-modify-writes of tail, so they are ordered
 *     there: the CAS first, and the exchange sees the bit; the exchange
 *     first, and the CAS fails (the kernel's compare catches an exchange
 *     between the CAS and the sleep).  The cost is the sender's: a locked
 *     instruction per message on a line the spinning receiver has just
 *     read.
 *   - asymmetric (ll_mbox_post_announced; ll_mbox_receive1_announced), for
 *     receivers that spin before they sleep, so that most messages find
 *     them awake: the receiver's lane has a third word, `parked`, on the
 *     receiver's line (the one with head, which the sender reads in every
 *     send anyway).  The sender publishes tail with a plain release store,
 *     then (a compiler barrier keeps the order in the program) loads
 *     `parked` (relaxed) and has futex_wake called on tail if it is set.
 *     The receiver whose spin budget has run out stores parked = 1, runs
 *     the heavy barrier (membarrier, src/platform/membarrier.c), and only
 *     then parks as the symmetric receiver does (re-check tail, CAS in
 *     LL_PARKED, futex_wait with the kernel's compare), re-checking tail
 *     after every wake-up; it stores parked = 0 once it has seen tail
 *     move, before it returns.  No lost wake-up: let B be the point of
 *     the sender's program at which the barrier ran on its CPU (a thread
 *     not running then passed a full barrier at its context switch).  If
 *     the sender's store of tail comes before B, B drains it and it is
 *     visible to every load of tail the receiver makes after the barrier
 *     returned, so the CAS fails or futex_wait returns at once; if the
 *     store comes after B, so does the sender's load of parked, which
 *     then reads the receiver's 1 or a later value, and the receiver
 *     writes parked again only after it has seen tail move: either the
 *     sender wakes it, or it is awake.  A stale 1 (read by a sender whose
 *     receiver has since woken) costs one futex_wake with nobody on the
 *     word.  The plain store may overwrite LL_PARKED: the receiver re-checks
 *     after every wake-up, and the next sleeper sets it again.  A receiver
 *     whose barrier fails does not sleep: it yields until tail moves
 *     (src/core/fastwake.c), so it is slower, never stranded.  The
 *     asymmetric protocol is the fast hand-over of src/core/fastwake.c and
 *     is on only where that is (ll_mbox_announce_ok: membarrier's private
 *     expedited command exists and LIBLOCK_FASTWAKE is not 0); a receiver
 *     that parks at once (the park policy, a waiter behind a thread of its
 *     own CPU) would pay a membarrier per message and keeps the symmetric
 *     protocol.
 * ll_mbox_post returns the word to wake instead of waking, so a sender can
 * make the system call later (hybcomb does, after handing the combiner
 * role on).  hybcomb's replies use the asymmetric protocol when its client
 * says so in its request (src/locks/hybrid/hybcomb.c); hyblock's messages may
 * reach a lane before its owner has decided how to wait there, so they
 * stay symmetric.
 *
 * Waiting.  receive waits as the given policy says: spin (pause; or the x86
 * user-mode wait instruction, UMWAIT or MWAITX, where CPUID reports one:
 * src/platform/uwait.c), yield, or spin-then-park (spin for the library's
 * budget, then sleep in futex_wait on tail).  A sender blocked on a FULL
 * lane never parks: it pauses for the spin budget and then calls
 * sched_yield between checks (pure pauses only under the spin policy).
 * So the receiver's release of a slot stays one plain store, and on an
 * oversubscribed machine the blocked sender hands its CPU to the receiver
 * that has to drain the lane.  Neither algorithm ever fills a lane
 * (hyblock sends at most two words per lane per acquisition, hybcomb one).
 *
 * Lane numbers in use (a mailbox grows its lanes on its owner's request,
 * ll_mbox_reserve): LL_LANE_REPLY (hybcomb's reply), LL_LANE_USER (free
 * for tests and other protocols), LL_LANE_HYBLOCK(level) and +1.
 */
#ifndef LIBLOCK_TRANSPORT_MAILBOX_H
#define LIBLOCK_TRANSPORT_MAILBOX_H

#include "internal.h"

#define LL_MBOX_CAP 4u               /* words per lane (a power of two) */
#define LL_MBOX_CHUNK 64u            /* lanes allocated at a time */
#define LL_MBOX_MAX_CHUNKS 256u      /* at most 16384 lanes per mailbox */
#define LL_MBOX_MAX_LANES (LL_MBOX_CHUNK * LL_MBOX_MAX_CHUNKS)
#define LL_MBOX_MASK 0x7fffffffu     /* counters are 31 bits (bit 31: LL_PARKED) */

#define LL_LANE_REPLY 0u             /* hybcomb: the reply to this thread's request */
#define LL_LANE_USER 1u              /* free for other protocols (tests) */
#define LL_LANE_HYBLOCK(level) (2u + 2u * (level)) /* +0 from the successor, +1 from the predecessor */

_Static_assert((LL_MBOX_CAP & (LL_MBOX_CAP - 1)) == 0, "LL_MBOX_CAP must be a power of two");

struct ll_lane {
    LL_ALIGNED _Atomic uint32_t tail; /* sender's line: words sent (mod 2^31) | LL_PARKED */
    uint32_t _pad;
    uint64_t ring[LL_MBOX_CAP];
    LL_ALIGNED _Atomic uint32_t head; /* receiver's line: words received (mod 2^31) */
    _Atomic uint32_t aux;             /* written by the owner, read by anyone: protocol-defined
                                         (hyblock: the owner's place in the queue) */
    _Atomic uint32_t parked;          /* owner: 1 from before its heavy barrier until it saw tail move;
                                         read by asymmetric senders after their tail store ("Parking") */
};

typedef struct ll_mbox {
    _Atomic(struct ll_lane *) chunk[LL_MBOX_MAX_CHUNKS]; /* written by the owner (release), read by senders */
    unsigned nchunks;                                    /* owner only */
    struct ll_mbox *pool_next;                           /* mailbox.c's pool */
    struct ll_exit_hook hook;
    uint64_t levels[64]; /* owner only: hyblock's levels in use (all clear when pooled) */
    /* hyblock: levels released by another thread than the owner (the
     * release of a lock another thread acquired: a NORMAL mutex unlocked by
     * a non-owner under the interposer).  Set with release RMWs by that
     * thread, taken with acquire exchanges by the owner, which clears them
     * from `levels` (ll_mbox_levels_merge): the owner's bitmap stays
     * single-writer. */
    _Atomic uint64_t levels_freed[64];
    _Atomic uint64_t levels_freed_any; /* bit w: levels_freed[w] may be non-zero */
} ll_mbox_t;

/* The owner of m: fold the levels other threads released into `levels`.
 * The acquire exchanges order the releasing thread's last reads of the
 * level's lanes before any reuse of the level by the owner. */
static inline void ll_mbox_levels_merge(ll_mbox_t *m)
{
    uint64_t any = atomic_exchange_explicit(&m->levels_freed_any, 0, memory_order_acquire);
    while (any) {
        unsigned w = (unsigned)__builtin_ctzll(any);
        any &= any - 1;
        m->levels[w] &= ~atomic_exchange_explicit(&m->levels_freed[w], 0, memory_order_acquire);
    }
}

/* The calling thread's mailbox (created on first use); NULL on ENOMEM.
 * initial-exec TLS, as ll_self_tls: one %fs-relative load. */
extern __thread ll_mbox_t *ll_mbox_tls __attribute__((tls_model("initial-exec")));
ll_mbox_t *ll_mbox_self_slow(void);
static inline ll_mbox_t *ll_mbox_self(void)
{
    ll_mbox_t *m = ll_mbox_tls;
    return LL_LIKELY(m != NULL) ? m : ll_mbox_self_slow();
}
/* Owner only: make lanes [0, nlanes) exist.  0, EINVAL (too many), ENOMEM. */
int ll_mbox_reserve(ll_mbox_t *self, unsigned nlanes);
/* Lane `lane` of mailbox m; it must exist (reserved by m's owner before
 * m's address and that lane number reached the caller). */
static inline struct ll_lane *ll_mbox_lane(ll_mbox_t *m, unsigned lane)
{
    struct ll_lane *v = atomic_load_explicit(&m->chunk[lane / LL_MBOX_CHUNK], memory_order_acquire);
    return &v[lane % LL_MBOX_CHUNK];
}
/* Owner only: do lanes [0, nlanes) exist already? */
static inline int ll_mbox_has_lanes(const ll_mbox_t *self, unsigned nlanes)
{
    return self->nchunks * LL_MBOX_CHUNK >= nlanes;
}

/* Send k words (any k; k <= LL_MBOX_CAP go in one publication) to lane
 * `lane` of mailbox `to`, blocking while the lane is full.  The caller
 * must be the lane's only sender now. */
void ll_mbox_send(ll_mbox_t *to, unsigned lane, const uint64_t *words, unsigned k, int policy);
static inline void ll_mbox_send1(ll_mbox_t *to, unsigned lane, uint64_t w, int policy)
{
    ll_mbox_send(to, lane, &w, 1, policy);
}
/* The same for k <= LL_MBOX_CAP, except that a needed futex_wake is left to
 * the caller: returns the word to wake (ll_futex_wake(w, INT_MAX)) or NULL. */
_Atomic uint32_t *ll_mbox_post(ll_mbox_t *to, unsigned lane, const uint64_t *words, unsigned k, int policy);

/* The same with the asymmetric protocol ("Parking"): a plain release store
 * of tail, then a look at the receiver's `parked`.  Only for a message whose
 * receiver waits with ll_mbox_receive1_announced (the protocol must order
 * the receiver's choice before this call). */
_Atomic uint32_t *ll_mbox_post_announced(ll_mbox_t *to, unsigned lane, const uint64_t *words, unsigned k,
                                         int policy);

/* Owner only: receive k words from one of its lanes, blocking until they
 * have all arrived; FIFO. */
void ll_mbox_receive(ll_mbox_t *self, unsigned lane, uint64_t *out, unsigned k, int policy);
static inline uint64_t ll_mbox_receive1(ll_mbox_t *self, unsigned lane, int policy)
{
    uint64_t w;
    ll_mbox_receive(self, lane, &w, 1, policy);
    return w;
}
/* May a receiver waiting with `policy` use the asymmetric protocol?  Only
 * spin-then-park, and only where the fast hand-over is on (ll_fastwake_on:
 * the heavy barrier exists, LIBLOCK_FASTWAKE is not 0; settled at its first
 * call and constant after). */
static inline int ll_mbox_announce_ok(int policy)
{
    return policy == LIBLOCK_WAIT_SPIN_THEN_PARK && ll_fastwake_on();
}
/* Owner only: receive one word, waiting with the asymmetric protocol
 * (policy: one that ll_mbox_announce_ok accepted).  Its sender must post it
 * with ll_mbox_post_announced or the symmetric post. */
uint64_t ll_mbox_receive1_announced(ll_mbox_t *self, unsigned lane, int policy);
/* Owner only: no word waiting on that lane now. */
static inline int ll_mbox_is_empty(ll_mbox_t *self, unsigned lane)
{
    struct ll_lane *ln = ll_mbox_lane(self, lane);
    return ((atomic_load_explicit(&ln->tail, memory_order_acquire) & LL_MBOX_MASK) ==
            atomic_load_explicit(&ln->head, memory_order_relaxed));
}

/* For tests and statistics: mailboxes created so far (pooled ones included). */
unsigned long ll_mbox_debug_created(void);

#endif
