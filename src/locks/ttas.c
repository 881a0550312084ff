/*
 * ttas - test-and-test-and-set spinlock with bounded exponential back-off.
 *
 * Source: seed 000 section 3.2 (the variant that reads before the CAS) and
 * section 3.10 (back-off locks); Anderson 1990 for the back-off.
 *
 * Invariant: word == 1 exactly while a thread holds the lock.
 * Waiting: a thread reads the word (a shared, cached copy: no coherence
 * traffic while the holder keeps it) and attempts the exchange only when it
 * reads 0.  After a failed exchange it backs off for a random number of
 * pauses below a window that doubles on each failure, from TTAS_MIN to
 * TTAS_MAX (LIBLOCK_TTAS_MAX_BACKOFF overrides the cap), which spreads the
 * retries of the threads that all saw the release.
 * Orderings: as for spin: acquire exchange, release store.  The test read is
 * relaxed; it only decides whether to try, the exchange decides ownership.
 * Policies: spin, yield (yield replaces the back-off pause loop).
 */
#include "../internal.h"

#define TTAS_MIN 4u
#define TTAS_MAX_DEFAULT 1024u

struct ttas_lock {
    _Atomic uint32_t word;
    uint32_t max_backoff; /* read-only after init */
};

static int ttas_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    LL_STATE(l, struct ttas_lock)->max_backoff =
        (uint32_t)ll_env_long("LIBLOCK_TTAS_MAX_BACKOFF", TTAS_MAX_DEFAULT, TTAS_MIN, 1 << 20);
    return 0;
}

static int ttas_lock(liblock_t *l, void *node)
{
    (void)node;
    struct ttas_lock *s = LL_STATE(l, struct ttas_lock);
    int policy = l->_wait;
    uint32_t window = TTAS_MIN;
    for (;;) {
        while (atomic_load_explicit(&s->word, memory_order_relaxed))
            ll_wait_step(policy);
        if (!atomic_exchange_explicit(&s->word, 1, memory_order_acquire))
            return 0;
        if (policy == LIBLOCK_WAIT_YIELD) {
            ll_yield();
            continue;
        }
        ll_thread_t *self = ll_self_tls; /* set by the API layer before ->lock */
        uint32_t n = self ? (uint32_t)(ll_rand(self) % window) + 1 : window;
        while (n--)
            ll_pause();
        if (window < s->max_backoff)
            window *= 2;
    }
}

static int ttas_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct ttas_lock *s = LL_STATE(l, struct ttas_lock);
    if (atomic_load_explicit(&s->word, memory_order_relaxed))
        return EBUSY;
    return atomic_exchange_explicit(&s->word, 1, memory_order_acquire) ? EBUSY : 0;
}

static int ttas_unlock(liblock_t *l, void *node)
{
    (void)node;
    atomic_store_explicit(&LL_STATE(l, struct ttas_lock)->word, 0, memory_order_release);
    return 0;
}

static int ttas_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct ttas_lock)->word, memory_order_acquire) ? EBUSY : 0;
}

const struct ll_ops ll_ops_ttas = {
    .name = "ttas",
    .description = "test-and-test-and-set spinlock with bounded exponential back-off",
    .source = "seed 000 sections 3.2 and 3.10; Anderson 1990",
    .props = LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD),
    .default_policy = LIBLOCK_WAIT_SPIN,
    .state_size = sizeof(struct ttas_lock),
    .init = ttas_init,
    .destroy = ttas_destroy,
    .lock = ttas_lock,
    .trylock = ttas_trylock,
    .unlock = ttas_unlock,
};
