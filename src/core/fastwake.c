/*
 * fastwake.c - a hand-over that needs no read-modify-write: announced
 * parking with an asymmetric fence (membarrier).
 *
 * The waiting layer's hand-over (wait.c) is a swap: the waker must learn
 * whether the waiter has parked, and the waiter says so with a bit in the
 * word the waker replaces.  That swap is a locked instruction on a line
 * the waiter holds, so the releasing thread stalls until the line has come
 * over -- a cache-line transfer on every hand-off, which the pure spin
 * policy, whose hand-over is a plain store, does not pay.  A plain store
 * alone would lose wake-ups.
 *
 * The way out is Dekker's with the fence moved to the rare side.  The
 * waiter, before it parks, announces it in a word the waker reads anyway
 * (the announce word), then runs membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED),
 * which makes every running thread of the process execute a full memory
 * barrier before it returns; then it parks as usual (CAS v -> v|LL_PARKED,
 * futex_wait).  The waker stores the new value with a plain release store
 * and then loads the announce word (a compiler barrier keeps the load after
 * the store in program order; the CPU may still perform it early) and calls
 * futex_wake if it is set.  No lost wake-up: let B be the point where the
 * membarrier's barrier ran on the waker's CPU, in the waker's program order
 * (a thread that was not running passed one at its context switch).
 *  - The store is before B: B drains it, so it is visible before the
 *    membarrier returns and the waiter's re-check (its CAS, or the
 *    kernel's compare in futex_wait) sees the new value and does not sleep.
 *  - The store is after B: so is the load, which then sees the announcement
 *    (stored before the membarrier, which orders the caller's own accesses
 *    too), and the waker wakes the waiter (futex_wake after the store, so
 *    the woken waiter re-checks and sees the value).
 * The cost moves to parking: one membarrier call, an IPI to the CPUs that
 * run threads of the process, a few microseconds on top of a park that
 * costs a context switch anyway.
 *
 * Who may use it: a lock whose waker reads, on its hand-over path anyway,
 * a word the waiter can find when it parks (the argument above holds for
 * whichever thread the waker turns out to be: the barrier reaches every
 * CPU).  mcscr, mcscrn: the waiter's MCS predecessor's node, whose `next`
 * shares the line (src/locks/restricting/cr.h, "Fast hand-over"; mcs likewise,
 * src/locks/queue/mcs.c); lifocr: the waiter's own node, which the owner that
 * pops it reads (src/locks/restricting/lifocr.c); the mailbox transport's asymmetric
 * messages (hybcomb's replies): the receiver's lane, whose line the sender
 * reads in every send (src/runtime/transport/mailbox.h, "Parking").
 * Every other hand-over keeps the swap, which sees LL_PARKED: the
 * announcing waiter still sets it.
 *
 * State: on (LIBLOCK_FASTWAKE unset or 1 and the asymmetric barrier exists
 * here: src/platform/membarrier.c, which registers the process), off, or
 * not yet known.  Wakers use the fast hand-over only when the state is on,
 * and a waiter that finds it not yet known settles it before it parks, so a
 * waiter parks unannounced only when no waker can be using the fast path.
 * A forked child inherits "on"; its first barrier registers it again
 * (membarrier.c).  If a barrier fails all the same, the waiter does not
 * park: it yields until the value changes (never a lost wake-up, only CPU
 * time).
 */
#include "internal.h"

static _Atomic int state; /* 0 unknown, 1 on, -1 off */

static int settle(void)
{
    int s = ll_env_long("LIBLOCK_FASTWAKE", 1, 0, 1) && ll_heavy_barrier_ok() ? 1 : -1;
    atomic_store_explicit(&state, s, memory_order_release); /* every settler stores the same */
    return s > 0;
}

int ll_fastwake_on(void)
{
    int s = atomic_load_explicit(&state, memory_order_acquire);
    return LL_LIKELY(s) ? s > 0 : settle();
}

int ll_fastwake_announce(_Atomic uint32_t *announce)
{
    /* relaxed is enough: the barrier is a full one for the caller too
     * (membarrier.c), so the store is visible to any waker that loads after
     * the barrier point on its CPU */
    atomic_store_explicit(announce, 1, memory_order_relaxed);
    return ll_heavy_barrier() == 0;
}
