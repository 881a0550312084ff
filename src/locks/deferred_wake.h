/*
 * deferred_wake.h - let a combiner release many waiters now and make the
 * futex_wake system calls later, after it has handed over the combiner role
 * (or freed the lock), so the syscalls are not on the lock's critical path.
 * Source: ours.
 *
 * Follows the waiting layer's protocol (src/internal.h): the waker swaps the
 * new value in (release) and, if the old value carried LL_PARKED, the
 * waiter is (or is about to be) asleep in futex_wait and must be woken.
 * Waking later is safe: the waiter cannot miss the value (it is already
 * stored), it only sleeps a little longer.  If it woke up by itself
 * meanwhile and reused or freed the word's memory, the late FUTEX_WAKE is a
 * spurious wake-up for whoever waits there now (every waiter re-checks) or
 * fails with EFAULT on unmapped memory: see src/core/wait.c.
 * Only spin-then-park defers; other policies store as ll_wake does.
 */
#ifndef LIBLOCK_DEFERRED_WAKE_H
#define LIBLOCK_DEFERRED_WAKE_H

#include "internal.h"

#define LL_DEFER_MAX 32

struct ll_deferred_wakes {
    unsigned n;
    _Atomic uint32_t *w[LL_DEFER_MAX];
};

static inline void ll_wake_deferred(struct ll_deferred_wakes *d, _Atomic uint32_t *w, uint32_t v, int policy)
{
    if (policy != LIBLOCK_WAIT_SPIN_THEN_PARK) {
        ll_wake(w, v, policy);
        return;
    }
    uint32_t old = atomic_exchange_explicit(w, v, memory_order_acq_rel);
    if (old & LL_PARKED) {
        if (d->n < LL_DEFER_MAX)
            d->w[d->n++] = w;
        else
            ll_futex_wake(w, 1 << 30);
    }
}

static inline void ll_wake_flush(struct ll_deferred_wakes *d)
{
    for (unsigned i = 0; i < d->n; i++)
        ll_futex_wake(d->w[i], 1 << 30);
    d->n = 0;
}

/* Does the waiter on word `state` look unlikely to be running?  Under
 * spin-then-park: it has parked (the policy's LL_PARKED bit is on its word).
 * Under yield: it has not checked in (`seen`, cycles, refreshed before each
 * yield) for more than awake_cycles.  A heuristic for combiners deciding
 * whether to hand their role on; both loads are relaxed because a wrong
 * answer costs time, never correctness. */
static inline int ll_waiter_asleep(_Atomic uint32_t *state, _Atomic uint64_t *seen, uint64_t awake_cycles, int policy)
{
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK)
        return (atomic_load_explicit(state, memory_order_relaxed) & LL_PARKED) != 0;
    if (policy == LIBLOCK_WAIT_YIELD)
        return (int64_t)(ll_cycles() - atomic_load_explicit(seen, memory_order_relaxed)) > (int64_t)awake_cycles;
    return 0;
}

#endif
