/*
 * ttas - test-and-test-and-set spinlock with bounded exponential back-off,
 * and a futex under spin-then-park.
 *
 * Source: J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 3.2 (the
 * variant that reads before the CAS) and section 3.10 (back-off locks);
 * T. E. Anderson, "The Performance of Spin Lock Alternatives for
 * Shared-Memory Multiprocessors", IEEE TPDS 1(1), 1990, for the back-off;
 * U. Drepper, "Futexes Are Tricky", 2011, for the futex protocol
 * (tas_park.h, which argues it).
 *
 * Invariant: word != 0 exactly while a thread holds the lock (2 = held and
 * a thread may sleep on the word: spin-then-park only).
 * Waiting: a thread reads the word (a shared, cached copy: no coherence
 * traffic while the holder keeps it) and attempts to take it only when it
 * reads 0.  After a failed attempt it backs off for a random number of
 * pauses below a window that doubles on each failure, from TTAS_MIN to
 * TTAS_MAX (LIBLOCK_TTAS_MAX_BACKOFF overrides the cap), which spreads the
 * retries of the threads that all saw the release.  Under spin-then-park
 * the attempt is CAS(0 -> 1) and, once the spin budget is spent or the word
 * says others sleep, the thread sleeps on the word (tas_park.h).
 * Orderings: as for spin: acquire exchange/CAS, release store/exchange.  The
 * test read is relaxed; it only decides whether to try, the atomic decides
 * ownership.
 * Policies: spin-then-park (default), spin, yield (yield replaces the
 * back-off pause loop), preempt-aware: spin-then-park whose spin ends when
 * the holder is off its CPU and goes on past the budget while it runs
 * (src/core/wait.c, "Preemption-aware waiting").  Under it each
 * acquisition stores its thread's tid in `holder` (relaxed, after the
 * acquiring atomic; never cleared), which waiters read at their periodic
 * check.  The value may be stale (a new holder has not stored its tid
 * yet, or the lock was released): it only decides between spinning and
 * sleeping, and the word alone decides ownership, so a stale tid costs at
 * most an early sleep or a longer spin.
 */
#include "ttas.h"

#define TTAS_MIN 4u
#define TTAS_MAX_DEFAULT 1024u

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
    if (LL_LIKELY(ttas_try(l) == 0))
        return 0;
    return ttas_lock_slow(l, LL_STATE(l, struct ttas_lock), ll_policy(l));
}

/* The first attempt failed (ttas.h). */
LL_SLOW int ttas_lock_slow(const liblock_t *l, struct ttas_lock *s, int policy)
{
    int parks = policy == LIBLOCK_WAIT_SPIN_THEN_PARK;
    const _Atomic int32_t *who = ll_behind(l, &s->holder);
    atomic_fetch_add_explicit(&s->waiters, 1, memory_order_relaxed);
    uint64_t start = parks ? ll_cycles() : 0, budget = parks ? ll_spin_budget_cycles() : 0;
    struct ll_aware_spin sp = {.start = start, .extend = true}; /* waiting for the holder itself */
    uint64_t slow_start = 0;
    int counted = 0;
    unsigned n = 0;
    uint32_t window = TTAS_MIN;
    for (;;) {
        uint32_t w;
        while ((w = atomic_load_explicit(&s->word, memory_order_relaxed))) {
            if (parks && tas_sleepers_seen(w))
                goto park; /* others sleep: park now (tas_park.h) */
            ll_wait_step(policy);
            if (LL_UNLIKELY((++n & 63) == 0)) {
                if (parks && (who ? ll_aware_should_park(who, &sp, budget) : ll_cycles() - start > budget))
                    goto park;
                if (policy == LIBLOCK_WAIT_SPIN && (n & LL_SPIN_CHECK_MASK) == 0)
                    ll_spin_note_slow(&slow_start, &counted);
            }
        }
        if (ttas_attempt(s, parks))
            break;
        if (policy == LIBLOCK_WAIT_YIELD) {
            ll_yield();
            continue;
        }
        if (parks && !who && ll_cycles() - start > budget)
            goto park; /* (preempt-aware decides in the loop above only: the holder is known there) */
        ll_thread_t *self = ll_self_tls; /* set by the API layer before ->lock */
        uint32_t k = self ? (uint32_t)(ll_rand(self) % window) + 1 : window;
        while (k--)
            ll_pause();
        if (window < s->max_backoff)
            window *= 2;
    }
    atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
    if (who)
        ttas_note_holder(s);
    return 0;
park:
    tas_park_acquire(&s->word);
    atomic_fetch_sub_explicit(&s->waiters, 1, memory_order_relaxed);
    if (who)
        ttas_note_holder(s);
    return 0;
}

static int ttas_trylock(liblock_t *l, void *node)
{
    (void)node;
    return ttas_try(l);
}

static int ttas_unlock(liblock_t *l, void *node)
{
    (void)node;
    ttas_release(l);
    return 0;
}

static int ttas_destroy(liblock_t *l)
{
    struct ttas_lock *s = LL_STATE(l, struct ttas_lock);
    return atomic_load_explicit(&s->word, memory_order_acquire) ||
                   atomic_load_explicit(&s->waiters, memory_order_acquire)
               ? EBUSY
               : 0;
}

const struct ll_ops ll_ops_ttas = {
    .name = "ttas",
    .description = "test-and-test-and-set spinlock with bounded exponential back-off; futex sleep under spin-then-park",
    .source = "Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), sections 3.2 and 3.10; Anderson, IEEE TPDS 1990; Drepper, Futexes Are Tricky, 2011",
    .props = LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) | LL_POLICY_BIT(LIBLOCK_WAIT_PREEMPT_AWARE),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "waiters spin (with back-off) about one futex round trip (not at all once others sleep), then sleep on the lock word; a release wakes one sleeper; not FIFO, so a running thread takes the lock while a woken one is on its way (near posix throughput)",
    .state_size = sizeof(struct ttas_lock),
    .init = ttas_init,
    .destroy = ttas_destroy,
    .lock = ttas_lock,
    .trylock = ttas_trylock,
    .unlock = ttas_unlock,
};
