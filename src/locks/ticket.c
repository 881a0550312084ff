/*
 * ticket - ticket lock (Mellor-Crummey and Scott 1991).
 *
 * Source: seed 000 section 3.10 (mentioned, after David et al.: best at low
 * contention).  A thread takes next++ as its ticket and waits until
 * serving == ticket; unlock increments serving.
 *
 * Invariants: serving <= next (mod 2^32); the holder is the thread whose
 * ticket equals serving; next - serving is the number of threads holding or
 * waiting.  FIFO by ticket order; starvation-free.
 * Orderings: the fetch-add on next is relaxed (it only hands out tickets);
 * the waiter's load of serving that sees its ticket is acquire and the
 * holder's increment of serving is a release store (only the holder writes
 * serving, so load+store is enough), so the critical sections are ordered.
 * Trylock CASes next from serving to serving+1, which succeeds only when
 * nobody holds or waits.
 * Policies: spin (proportional pause: wait ~ (ticket - serving) pauses
 * between reads), yield.  Spin-then-park is not offered: every waiter
 * watches the same word, so a park would need a broadcast wake per release.
 */
#include "../internal.h"

struct ticket_lock {
    _Atomic uint32_t next;
    _Atomic uint32_t serving;
};

static int ticket_lock(liblock_t *l, void *node)
{
    (void)node;
    struct ticket_lock *s = LL_STATE(l, struct ticket_lock);
    uint32_t me = atomic_fetch_add_explicit(&s->next, 1, memory_order_relaxed);
    int policy = l->_wait;
    for (;;) {
        uint32_t cur = atomic_load_explicit(&s->serving, memory_order_acquire);
        if (cur == me)
            return 0;
        if (policy == LIBLOCK_WAIT_YIELD) {
            ll_yield();
        } else {
            uint32_t ahead = me - cur;
            for (uint32_t i = 0; i < ahead * 8 && i < 4096; i++)
                ll_pause();
        }
    }
}

static int ticket_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct ticket_lock *s = LL_STATE(l, struct ticket_lock);
    /* Acquire: if the CAS below succeeds, the value read here was stored by
     * the previous holder's releasing increment, so we see its writes. */
    uint32_t cur = atomic_load_explicit(&s->serving, memory_order_acquire);
    uint32_t expect = cur;
    /* next == serving means nobody holds or waits; taking ticket cur makes
     * us the holder. */
    if (atomic_compare_exchange_strong_explicit(&s->next, &expect, cur + 1, memory_order_acquire,
                                                memory_order_relaxed))
        return 0;
    return EBUSY;
}

static int ticket_unlock(liblock_t *l, void *node)
{
    (void)node;
    struct ticket_lock *s = LL_STATE(l, struct ticket_lock);
    uint32_t cur = atomic_load_explicit(&s->serving, memory_order_relaxed);
    atomic_store_explicit(&s->serving, cur + 1, memory_order_release);
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
    .description = "ticket lock with proportional back-off",
    .source = "seed 000 section 3.10; Mellor-Crummey and Scott 1991",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD),
    .default_policy = LIBLOCK_WAIT_SPIN,
    .state_size = sizeof(struct ticket_lock),
    .destroy = ticket_destroy,
    .lock = ticket_lock,
    .trylock = ticket_trylock,
    .unlock = ticket_unlock,
};
