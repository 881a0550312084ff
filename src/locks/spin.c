/*
 * spin - test-and-set spinlock with PAUSE.
 *
 * Source: seed 000 section 3.2, Algorithm 1: lock spins on CAS(l, 0, 1) with
 * pause() between attempts; unlock stores 0.  (We use an atomic exchange,
 * which is the same test-and-set and never fails spuriously.)
 *
 * Invariant: word == 1 exactly while some thread is between a successful
 * exchange and its releasing store.
 * Orderings: the successful exchange is acquire, so the critical section
 * cannot move above it and sees everything the previous holder wrote before
 * its release store; the unlock store is release.  Nothing else is needed:
 * the word is the only shared state.
 * Policies: spin (pause between attempts), yield (sched_yield between
 * attempts).  Not FIFO, starvation possible; every attempt is a write, so
 * the line ping-pongs under contention (the reason TTAS exists).
 */
#include "../internal.h"

struct spin_lock {
    _Atomic uint32_t word;
};

static int spin_lock(liblock_t *l, void *node)
{
    (void)node;
    struct spin_lock *s = LL_STATE(l, struct spin_lock);
    int policy = l->_wait;
    while (atomic_exchange_explicit(&s->word, 1, memory_order_acquire))
        ll_wait_step(policy);
    return 0;
}

static int spin_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct spin_lock *s = LL_STATE(l, struct spin_lock);
    return atomic_exchange_explicit(&s->word, 1, memory_order_acquire) ? EBUSY : 0;
}

static int spin_unlock(liblock_t *l, void *node)
{
    (void)node;
    atomic_store_explicit(&LL_STATE(l, struct spin_lock)->word, 0, memory_order_release);
    return 0;
}

static int spin_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct spin_lock)->word, memory_order_acquire) ? EBUSY : 0;
}

const struct ll_ops ll_ops_spin = {
    .name = "spin",
    .description = "test-and-set spinlock with pause",
    .source = "seed 000 section 3.2, Algorithm 1",
    .props = LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD),
    .default_policy = LIBLOCK_WAIT_SPIN,
    .state_size = sizeof(struct spin_lock),
    .destroy = spin_destroy,
    .lock = spin_lock,
    .trylock = spin_trylock,
    .unlock = spin_unlock,
};
