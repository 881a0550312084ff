/*
 * wait.c - waiting policies as a layer (docs/internals.md).
 *
 * An algorithm names the 32-bit word a thread waits on and the value that
 * means "keep waiting"; the policy decides how to wait:
 *   spin            pause loop;
 *   yield           sched_yield() between checks;
 *   spin-then-park  pause loop for about one context-switch round trip
 *                   (LIBLOCK_SPIN_NS, default 20 us: the Malthusian paper's
 *                   ~20,000 cycles), then sleep in the kernel on the word.
 *
 * Park protocol (see internal.h for the full argument): the waiter announces
 * itself by CAS v -> v|LL_PARKED and then futex-waits on v|LL_PARKED; the
 * waker swaps the new value in and calls futex_wake only if the old value
 * carried LL_PARKED.  The swap is a full RMW so the waker reads the bit it
 * replaces: a waiter that set the bit before the swap is seen and woken, a
 * waiter that tries after it fails its CAS (the value is no longer v).  The
 * kernel re-checks the word under its hash-bucket lock before sleeping, so
 * a swap between the CAS and the sleep makes futex_wait return EAGAIN.
 *
 * The waker may reach futex_wake after the waiter has already returned and
 * reused the word's memory (a queue node recycled at once): that is a
 * spurious wake-up for whoever waits there now, which every waiter
 * tolerates, and FUTEX_WAKE on unmapped memory fails with EFAULT and no
 * effect.
 *
 * Orderings: the waiter's final load is acquire and the waker's store (or
 * swap) is release, so everything the waker wrote before waking (typically:
 * the critical section's effects) is visible to the waiter when it returns.
 */
#include "../internal.h"

#include <time.h>

/* Cycles; 0 = not computed yet.  Relaxed is enough: the value is
 * self-contained, and racing first callers compute the same one. */
static _Atomic uint64_t spin_budget;

uint64_t ll_spin_budget_cycles(void)
{
    uint64_t b = atomic_load_explicit(&spin_budget, memory_order_relaxed);
    if (LL_LIKELY(b))
        return b;
    long ns = ll_env_long("LIBLOCK_SPIN_NS", 20000, 0, 1000000000L);
    b = ll_ns_to_cycles((uint64_t)ns);
    if (b == 0)
        b = 1;
    atomic_store_explicit(&spin_budget, b, memory_order_relaxed);
    return b;
}

static inline uint32_t load_acq(_Atomic uint32_t *w)
{
    return atomic_load_explicit(w, memory_order_acquire);
}

/* Park until the value leaves v; deadline 0 = none.  Returns 0 or ETIMEDOUT. */
static int park(_Atomic uint32_t *w, uint32_t v, uint64_t deadline_ns, uint32_t *out)
{
    for (;;) {
        uint32_t cur = load_acq(w);
        if ((cur & ~LL_PARKED) != v) {
            *out = cur & ~LL_PARKED;
            return 0;
        }
        if (!(cur & LL_PARKED)) {
            uint32_t expect = v;
            if (!atomic_compare_exchange_strong_explicit(w, &expect, v | LL_PARKED, memory_order_acq_rel,
                                                         memory_order_acquire))
                continue; /* value changed (or another waiter set the bit): re-check */
        }
        struct timespec rel, *relp = NULL;
        if (deadline_ns) {
            uint64_t now = ll_now_ns();
            if (now >= deadline_ns) {
                /* Leave the bit: the waker's swap clears it, and a stray bit
                 * only costs the waker one futex_wake call. */
                *out = v;
                return ETIMEDOUT;
            }
            uint64_t d = deadline_ns - now;
            rel.tv_sec = (time_t)(d / 1000000000ull);
            rel.tv_nsec = (long)(d % 1000000000ull);
            relp = &rel;
        }
        ll_futex_wait(w, v | LL_PARKED, relp);
    }
}

int ll_wait_while_until(_Atomic uint32_t *w, uint32_t v, int policy, uint64_t deadline_ns, uint32_t *out)
{
    uint32_t cur;
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK || policy == LIBLOCK_WAIT_PARK) {
        if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
            uint64_t start = ll_cycles(), budget = ll_spin_budget_cycles();
            unsigned n = 0;
            while (((cur = load_acq(w)) & ~LL_PARKED) == v) {
                ll_pause();
                if ((++n & 63) == 0) {
                    if (ll_cycles() - start > budget)
                        break;
                    if (deadline_ns && ll_now_ns() >= deadline_ns) {
                        *out = v;
                        return ETIMEDOUT;
                    }
                }
            }
            if ((cur & ~LL_PARKED) != v) {
                *out = cur & ~LL_PARKED;
                return 0;
            }
        }
        return park(w, v, deadline_ns, out);
    }
    unsigned n = 0;
    while (((cur = load_acq(w)) & ~LL_PARKED) == v) {
        ll_wait_step(policy);
        if (deadline_ns && (++n & 63) == 0 && ll_now_ns() >= deadline_ns) {
            *out = v;
            return ETIMEDOUT;
        }
    }
    *out = cur & ~LL_PARKED;
    return 0;
}

uint32_t ll_wait_while(_Atomic uint32_t *w, uint32_t v, int policy)
{
    uint32_t cur;
    if (policy == LIBLOCK_WAIT_SPIN) {
        while (((cur = load_acq(w)) & ~LL_PARKED) == v)
            ll_pause();
        return cur & ~LL_PARKED;
    }
    ll_wait_while_until(w, v, policy, 0, &cur);
    return cur;
}

void ll_wake(_Atomic uint32_t *w, uint32_t newval, int policy)
{
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK || policy == LIBLOCK_WAIT_PARK) {
        uint32_t old = atomic_exchange_explicit(w, newval, memory_order_acq_rel);
        if (old & LL_PARKED)
            ll_futex_wake(w, 1 << 30);
        return;
    }
    atomic_store_explicit(w, newval, memory_order_release);
}
