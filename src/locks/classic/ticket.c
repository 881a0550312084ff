/*
 * ticket - ticket lock (Mellor-Crummey and Scott 1991) with a robust
 * release and, under spin-then-park, a waiting array for parked waiters
 * (after TWA, Dice and Kogan 2019) that wakes the next two in line.
 *
 * Source: J. M. Mellor-Crummey and M. L. Scott, "Algorithms for Scalable
 * Synchronization on Shared-Memory Multiprocessors", ACM TOCS 9(1), 1991
 * (the ticket lock); as surveyed in J.-P. Lozi, "Towards More
 * Scalable Mutual Exclusion for Multicore Architectures", PhD thesis, UPMC
 * (Paris 6), 2014, section 3.10, which reports David et al. (SOSP 2013)
 * finding it best at low contention; D. Dice and A. Kogan, "TWA -- Ticket
 * Locks Augmented with a Waiting Array", Euro-Par 2019, for the waiting
 * array.  A thread takes next++ as its ticket and waits until
 * serving == ticket; unlock increments serving.  The waiting array is our
 * adaptation of TWA's: TWA lets far waiters spin on a hashed slot of a
 * global array instead of on the grant word; we let them sleep there.
 *
 * Invariants: serving <= next (mod 2^32, next - serving < 2^31); the holder
 * is the thread whose ticket equals serving; next - serving is the number of
 * threads holding or waiting.  FIFO by ticket order; starvation-free.
 *
 * Robust release.  unlock reads serving s and next n; if n == s the lock is
 * free and the call is a stray unlock (a pthread_mutex_unlock too many under
 * the interposer), which is ignored; otherwise it CASes serving from s to
 * s+1, and a failed CAS means a concurrent unlock already released it.
 * So serving never passes next: the CAS only succeeds while serving is
 * still s, and then next >= n > s (next only grows, and n was read after s,
 * when serving <= next held).  A plain increment would let one extra
 * unlock push serving past next, after which no ticket would come up again
 * (the lock would be dead for 2^32 acquisitions).  An unlock by a
 * non-holder while another thread holds the lock releases it, as glibc's
 * does for a normal mutex.
 *
 * Parking (spin-then-park only).  A waiter with ticket t spins on serving
 * (proportional pause) for the spin budget if it is one of the next two in
 * line (t - serving <= 2); otherwise, or once the budget is spent, it sleeps
 * on slot(t), a 32-bit counter in the global array `slots` (hashed from the
 * lock and t, so consecutive tickets of a lock use different slots).  The
 * releaser of ticket s, after advancing serving to s+1, bumps the slots of
 * tickets s+1 (the new holder: needed) and s+2 (an early wake-up: that
 * thread then spins while s+1 runs its critical section, so its own turn
 * costs no wake-up when the critical section is longer than one), but only
 * if they carry LL_PARKED and only if those tickets were handed out.
 *   waiter:   v = slot; if serving == t: done; CAS slot v -> v|PARKED;
 *             if serving == t: done; futex_wait(slot, v|PARKED)
 *   releaser: CAS serving s -> s+1; n = next; for u in s+1, s+2 with
 *             u - s <= n - s - 1: if slot(u) has PARKED: bump(slot(u))
 * No lost wake-up: every one of these accesses is seq_cst, so they have one
 * total order S.  Suppose waiter t sleeps for good: it read serving != t
 * after its CAS set PARKED, so that read precedes the releaser's
 * CAS(serving -> t) in S, and therefore so do the waiter's fetch-add on next
 * and its PARKED CAS.  The releaser's later read of next then sees ticket t
 * handed out, and its read of slot(t) sees PARKED or a later value; a later
 * value is a bump (only bumps clear the bit), which changed the counter.
 * Either way the slot no longer holds the value the waiter sleeps on, or
 * the releaser bumps it and wakes all its sleepers.  A slot shared with
 * another lock or ticket only causes spurious wake-ups (every waiter
 * re-checks serving); ll_bump_wake's CAS loop never loses an increment.
 * Orderings otherwise: the waiter's load of serving that sees its ticket is
 * seq_cst (acquire) and the release CAS is seq_cst (release), so the
 * critical sections are ordered.  Trylock CASes next from serving to
 * serving+1, which succeeds only when nobody holds or waits.
 * Policies: spin-then-park (default), spin (proportional pause: about
 * (ticket - serving) * 8 pauses between reads), yield.
 */
#include "internal.h"

#define TICKET_SLOTS 4096u /* global waiting array, 16 KiB */
#define TICKET_NEAR 2u     /* waiters this close to the head spin before parking */

struct ticket_lock {
    _Atomic uint32_t next;
    _Atomic uint32_t serving;
};

static LL_ALIGNED _Atomic uint32_t slots[TICKET_SLOTS];

static inline _Atomic uint32_t *slot_of(struct ticket_lock *s, uint32_t t)
{
    uint32_t h = (uint32_t)(((uintptr_t)s >> 4) * 0x9E3779B1u);
    return &slots[(h + t) & (TICKET_SLOTS - 1)];
}

static int ticket_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    return 0;
}

static inline void prop_pause(uint32_t ahead)
{
    for (uint32_t i = 0; i < ahead * 8 && i < 4096; i++)
        ll_pause();
}

/* Sleep on me's slot unless serving reaches me; returns when woken (maybe
 * spuriously) or when it is our turn. */
static void park_on_slot(struct ticket_lock *s, uint32_t me)
{
    _Atomic uint32_t *w = slot_of(s, me);
    uint32_t v = atomic_load_explicit(w, memory_order_seq_cst);
    if (atomic_load_explicit(&s->serving, memory_order_seq_cst) == me)
        return;
    if (!(v & LL_PARKED)) {
        if (!atomic_compare_exchange_strong_explicit(w, &v, v | LL_PARKED, memory_order_seq_cst,
                                                     memory_order_seq_cst))
            return; /* bumped meanwhile: re-check */
        v |= LL_PARKED;
    }
    if (atomic_load_explicit(&s->serving, memory_order_seq_cst) == me)
        return;
    ll_futex_wait(w, v, NULL);
}

static void wait_parking(struct ticket_lock *s, uint32_t me)
{
    uint64_t budget = ll_spin_budget_cycles();
    for (;;) {
        uint64_t start = ll_cycles();
        for (;;) {
            uint32_t cur = atomic_load_explicit(&s->serving, memory_order_seq_cst);
            if (cur == me)
                return;
            uint32_t ahead = me - cur;
            if (ahead > TICKET_NEAR || ll_cycles() - start > budget)
                break;
            prop_pause(ahead);
        }
        park_on_slot(s, me);
    }
}

static LL_SLOW int ticket_wait(struct ticket_lock *s, uint32_t me, int policy);

static int ticket_lock(liblock_t *l, void *node)
{
    (void)node;
    struct ticket_lock *s = LL_STATE(l, struct ticket_lock);
    uint32_t me = atomic_fetch_add_explicit(&s->next, 1, memory_order_seq_cst);
    int policy = ll_policy(l);
    if (LL_LIKELY(atomic_load_explicit(&s->serving, memory_order_seq_cst) == me))
        return 0;
    return ticket_wait(s, me, policy);
}

/* Our ticket is not served yet. */
static int ticket_wait(struct ticket_lock *s, uint32_t me, int policy)
{
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        wait_parking(s, me);
        return 0;
    }
    unsigned n = 0;
    uint64_t start = 0;
    int counted = 0;
    for (;;) {
        uint32_t cur = atomic_load_explicit(&s->serving, memory_order_acquire);
        if (cur == me)
            return 0;
        if (policy == LIBLOCK_WAIT_YIELD) {
            ll_yield();
        } else {
            prop_pause(me - cur);
            if (LL_UNLIKELY((++n & (LL_SPIN_CHECK_MASK >> 6)) == 0))
                ll_spin_note_slow(&start, &counted);
        }
    }
}

static int ticket_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct ticket_lock *s = LL_STATE(l, struct ticket_lock);
    /* If the CAS below succeeds, the value read here was stored by the
     * previous holder's releasing CAS, so we see its writes. */
    uint32_t cur = atomic_load_explicit(&s->serving, memory_order_seq_cst);
    uint32_t expect = cur;
    /* next == serving means nobody holds or waits; taking ticket cur makes
     * us the holder. */
    if (atomic_compare_exchange_strong_explicit(&s->next, &expect, cur + 1, memory_order_seq_cst,
                                                memory_order_relaxed))
        return 0;
    return EBUSY;
}

static inline void wake_if_parked(struct ticket_lock *s, uint32_t t)
{
    _Atomic uint32_t *w = slot_of(s, t);
    if (atomic_load_explicit(w, memory_order_seq_cst) & LL_PARKED)
        ll_bump_wake(w);
}

static int ticket_unlock(liblock_t *l, void *node)
{
    (void)node;
    struct ticket_lock *s = LL_STATE(l, struct ticket_lock);
    uint32_t cur = atomic_load_explicit(&s->serving, memory_order_acquire); /* before next */
    uint32_t n = atomic_load_explicit(&s->next, memory_order_relaxed);
    if (LL_UNLIKELY(n == cur))
        return 0; /* free: a stray unlock, ignored (see top) */
    if (LL_UNLIKELY(!atomic_compare_exchange_strong_explicit(&s->serving, &cur, cur + 1, memory_order_seq_cst,
                                                             memory_order_relaxed)))
        return 0; /* a concurrent unlock released it */
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        uint32_t waiting = atomic_load_explicit(&s->next, memory_order_seq_cst) - cur - 1;
        if (waiting >= 1)
            wake_if_parked(s, cur + 1);
        if (waiting >= 2)
            wake_if_parked(s, cur + 2);
    }
    return 0;
}

static int ticket_destroy(liblock_t *l)
{
    struct ticket_lock *s = LL_STATE(l, struct ticket_lock);
    return atomic_load_explicit(&s->next, memory_order_acquire) !=
                   atomic_load_explicit(&s->serving, memory_order_acquire)
               ? EBUSY
               : 0;
}

const struct ll_ops ll_ops_ticket = {
    .name = "ticket",
    .description = "ticket lock with proportional back-off and a parking array",
    .source = "Mellor-Crummey and Scott, ACM TOCS 1991; Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.10; Dice and Kogan, TWA, Euro-Par 2019",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "only the next two tickets spin, the others sleep in a waiting array; each release wakes the next two in line, so the next holder is usually awake at its turn; FIFO: a hand-off to a thread that is not running costs one wake-up",
    .state_size = sizeof(struct ticket_lock),
    .init = ticket_init,
    .destroy = ticket_destroy,
    .lock = ticket_lock,
    .trylock = ticket_trylock,
    .unlock = ticket_unlock,
};
