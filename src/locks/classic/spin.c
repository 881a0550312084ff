/*
 * spin - test-and-set spinlock with PAUSE, and a futex under spin-then-park.
 *
 * Source: J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 3.2,
 * Algorithm 1 (basic spinlock): lock spins on CAS(l, 0, 1) with
 * pause() between attempts; unlock stores 0.  (Under spin and yield we use
 * an atomic exchange, which is the same test-and-set and never fails
 * spuriously.)  Under spin-then-park (the default) a waiter retries with
 * CAS(0 -> 1) for the spin budget, then sleeps on the word with glibc's
 * three-state protocol (tas_park.h, which argues it); it stops spinning at
 * once when the word says others sleep.
 *
 * Invariant: (word & 3) != 0 exactly while some thread is between a
 * successful acquire and its releasing store or exchange.
 * Orderings: the successful exchange/CAS is acquire, so the critical section
 * cannot move above it and sees everything the previous holder wrote before
 * its release; the unlock is a release.  Nothing else is needed: the word
 * is the only shared state (waiters is a count for destroy, tas_park.h).
 * Policies: spin-then-park (default), spin (pause between attempts), yield
 * (sched_yield between attempts).  Not FIFO, starvation possible; every
 * attempt is a write, so the line ping-pongs under contention (the reason
 * TTAS exists).  An unlock of a free lock stores 0 again: harmless.
 */
#include "tas_park.h"

struct spin_lock {
    _Atomic uint32_t word;
    _Atomic uint32_t waiters; /* contended path only; for destroy */
};

static int spin_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    return 0;
}

static LL_SLOW int spin_lock_slow(struct spin_lock *s, int policy);

static int spin_lock(liblock_t *l, void *node)
{
    (void)node;
    struct spin_lock *s = LL_STATE(l, struct spin_lock);
    int policy = ll_policy(l);
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        if (LL_LIKELY(tas_try_cas(&s->word)))
            return 0;
    } else if (LL_LIKELY(!atomic_exchange_explicit(&s->word, TAS_HELD, memory_order_acquire))) {
        return 0;
    }
    return spin_lock_slow(s, policy);
}

/* The first attempt failed. */
static int spin_lock_slow(struct spin_lock *s, int policy)
{
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        atomic_fetch_add_explicit(&s->waiters, 1, memory_order_relaxed);
        uint64_t start = ll_cycles(), budget = ll_spin_budget_cycles();
        do {
            ll_pause();
            uint32_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
            if (w == TAS_FREE && tas_try_cas(&s->word))
                goto out;
            if (tas_sleepers_seen(w))
                break; /* others sleep: park now (tas_park.h) */
        } while (ll_cycles() - start < budget);
        tas_park_acquire(&s->word);
    out:
        atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
        return 0;
    }
    atomic_fetch_add_explicit(&s->waiters, 1, memory_order_relaxed);
    unsigned n = 0;
    uint64_t start = 0;
    int counted = 0;
    do {
        ll_wait_step(policy);
        if (policy == LIBLOCK_WAIT_SPIN && LL_UNLIKELY((++n & LL_SPIN_CHECK_MASK) == 0))
            ll_spin_note_slow(&start, &counted);
    } while (atomic_exchange_explicit(&s->word, TAS_HELD, memory_order_acquire));
    atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
    return 0;
}

static int spin_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct spin_lock *s = LL_STATE(l, struct spin_lock);
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        return tas_try_cas(&s->word) ? 0 : EBUSY;
    return atomic_exchange_explicit(&s->word, TAS_HELD, memory_order_acquire) ? EBUSY : 0;
}

static int spin_unlock(liblock_t *l, void *node)
{
    (void)node;
    tas_release(&LL_STATE(l, struct spin_lock)->word, ll_policy(l));
    return 0;
}

static int spin_destroy(liblock_t *l)
{
    struct spin_lock *s = LL_STATE(l, struct spin_lock);
    return atomic_load_explicit(&s->word, memory_order_acquire) ||
                   atomic_load_explicit(&s->waiters, memory_order_acquire)
               ? EBUSY
               : 0;
}

const struct ll_ops ll_ops_spin = {
    .name = "spin",
    .description = "test-and-set spinlock with pause; futex sleep under spin-then-park",
    .source = "Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.2, Algorithm 1; Drepper, Futexes Are Tricky, 2011",
    .props = LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "waiters spin about one futex round trip (not at all once others sleep), then sleep on the lock word; a release wakes one sleeper; not FIFO, so a running thread takes the lock while a woken one is on its way (near posix throughput)",
    .state_size = sizeof(struct spin_lock),
    .init = spin_init,
    .destroy = spin_destroy,
    .lock = spin_lock,
    .trylock = spin_trylock,
    .unlock = spin_unlock,
};
