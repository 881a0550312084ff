/*
 * tas_park.h - the parking half of the test-and-set locks (spin, ttas):
 * a three-state word and a futex, as glibc's mutex and Drepper's
 * "Futexes are tricky" (2011), mutex #2.
 *
 * Word values: 0 free, 1 held, 2 held and a thread may sleep on the word.
 *   spinning acquire: CAS 0 -> 1 (never an exchange: swapping 1 over a 2
 *                     would erase the sleepers' mark);
 *   parking acquire:  loop { if exchange(word, 2) == 0: acquired;
 *                            futex_wait(word, 2) }
 *                     (a thread that acquires this way leaves 2: there may
 *                     be other sleepers, so its release must wake);
 *   release:          if exchange(word, 0) == 2: futex_wake(word, 1).
 * No lost wake-up: a sleeper sleeps only while the word is 2 (the kernel
 * re-checks it under its bucket lock); the word becomes 2 only by a
 * sleeper's exchange, and any release after that exchange reads 2 (the
 * exchange is an RMW, so nothing between can swallow it except a release,
 * which then reads 2 and wakes).  A woken thread that loses the race again
 * exchanges 2 back in, so the mark survives as long as someone sleeps.
 * Under the pure spin and yield policies the word never reaches 2 and the
 * release is a plain store.
 *
 * Spinning only while nobody sleeps (tas_sleepers_seen): a spin-then-park
 * waiter that reads 2 stops spinning and parks at once, as Rust's
 * parking_lot and WebKit's WTF::Lock do (Pizlo 2016, "Locking in WebKit").
 * 2 means the lock has had more waiters than a spin budget covers, which on
 * a machine with fewer CPUs than threads is oversubscription: a spinner
 * then holds a CPU the holder or a runnable thread could use, and when it
 * wins it moves the lock's lines to its CPU.  Parking at once leaves the
 * running threads to take the lock in long runs on one CPU, as glibc's
 * mutex does.  Correctness does not depend on it: tas_park_acquire is a
 * complete acquisition from any state.  With no more waiters than CPUs the
 * word never reaches 2 (a waiter gets the lock within its budget), so this
 * changes nothing there.
 * Orderings: acquiring CAS/exchange acquire, releasing exchange/store
 * release; the futex calls carry no data.
 *
 * waiters counts threads between their first failed attempt and their
 * acquisition, so destroy can report EBUSY for a lock that is waited on
 * even at an instant when it is free (a woken sleeper about to retry).  It
 * is touched only on the contended path.  It cannot see a thread in the few
 * instructions between its first failed attempt and its increment; destroy
 * racing with a lock() that has not yet begun to wait is undefined, as for
 * pthread_mutex_destroy.
 */
#ifndef LIBLOCK_TAS_PARK_H
#define LIBLOCK_TAS_PARK_H
#include "internal.h"

#define TAS_FREE 0u
#define TAS_HELD 1u
#define TAS_SLEEPERS 2u

static inline bool tas_try_cas(_Atomic uint32_t *w)
{
    uint32_t v = TAS_FREE;
    return atomic_compare_exchange_strong_explicit(w, &v, TAS_HELD, memory_order_acquire, memory_order_relaxed);
}

/* A spin-then-park waiter that reads w should stop spinning and park. */
static inline bool tas_sleepers_seen(uint32_t w)
{
    return w == TAS_SLEEPERS;
}

static inline void tas_park_acquire(_Atomic uint32_t *w)
{
    while (atomic_exchange_explicit(w, TAS_SLEEPERS, memory_order_acquire) != TAS_FREE)
        ll_futex_wait(w, TAS_SLEEPERS, NULL);
}

static inline void tas_release(_Atomic uint32_t *w, int policy)
{
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        if (atomic_exchange_explicit(w, TAS_FREE, memory_order_release) == TAS_SLEEPERS)
            ll_futex_wake(w, 1);
    } else {
        atomic_store_explicit(w, TAS_FREE, memory_order_release);
    }
}
#endif
