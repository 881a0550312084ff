/*
 * lazy.c - lazy engagement: a mutex runs on its algorithm only from its
 * first contention on.
 *
 * Most mutexes of most programs are never contended, and for them every
 * algorithm's lock and unlock is pure overhead over glibc's: a queue
 * lock's node bookkeeping, a combining lock's request fields, a delegating
 * lock's server binding.  So a NORMAL (or DEFAULT, ADAPTIVE) mutex starts
 * as a test-and-set lock on one word of the program's own pthread_mutex_t,
 * the lazy word (__data.__list.__next, unused by glibc outside robust
 * mutexes; shim.h lzw), and the algorithm the configuration chose ENGAGES
 * at the first lock() that finds the mutex held, at its first condition
 * wait, or at its first delegated section (liblock_execute_mutex), and
 * keeps it until destroy.  Up to that moment no thread has ever waited for
 * the mutex, so no admission order, fairness or hand-off of any algorithm
 * could have been observed; from it on, the algorithm orders every
 * acquisition.  A failed trylock or a timed lock (a trylock loop,
 * wrapper.c) waits in no algorithm and engages nothing.  An RCL lock binds
 * to its server, and starts it, only when it engages.
 *
 * Not lazy: RECURSIVE and ERRORCHECK mutexes (owner checks on the
 * wrapper), the profiler's builds (their hooks time the algorithm's path),
 * LIBLOCK_INTERPOSE_API=1, and every mutex under LIBLOCK_LAZY=0 (wrapper.c
 * mutex_set_fns).  posix in place is lazy too: its L is glibc's lock on
 * the program's own mutex (shim.h), which lives in other words of the
 * same pthread_mutex_t than the lazy word, so the lazy path saves even
 * the extra call level into glibc; once engaged, it is glibc's code.
 *
 * ---- The lazy word W and the algorithm's lock L -------------------------
 *   W = 0                free, not engaged
 *   W = T (a thread tag) held lazily by thread T (self_tag: its thread
 *                        pointer, never 0 or 1)
 *   W = IP_LAZY_ENGAGED  engaged: L is the lock; W never changes again
 *                        until destroy or re-initialisation
 * Lazy lock: CAS W 0 -> T (acquire).  Lazy unlock: CAS W T -> 0 (release);
 * any thread may unlock a NORMAL mutex, as on glibc, so the slow path
 * CASes whatever tag is there.  Trylock: the same CAS, EBUSY on a tag.
 *
 * Engaging (lazy_engage): the engager E first holds L (lock, or for a
 * caller that holds m itself trylock, below), then CASes W from its
 * current value v to ENGAGED:
 *   v = 0: nobody held m; E holds L for nothing and releases it;
 *   v = T: m is held lazily by T; E leaves L held ON T'S BEHALF (a proxy
 *          hold: w->hold is E's node, w->owner T, w->count 1, written
 *          before the CAS), and whoever unlocks m next - T, or any thread
 *          for a NORMAL mutex - finds W engaged and releases L through the
 *          algorithm's unlock with that node;
 *   v = ENGAGED: another engager won; E holds L itself and releases it.
 * Then the pointer word gets the algorithm's own fast-path tag.  A
 * contended lock() engages and then takes the algorithm's path, where it
 * waits behind the proxy hold; a lock() by the lazy holder itself (the
 * NORMAL relock) waits there for ever, as POSIX says it must.
 * A thread that holds m lazily and engages it (a condition wait) must not
 * wait for L: another engager may hold L and be about to make a proxy
 * hold for it, which only its own unlock would release.  So it trylocks L
 * and, while that fails, yields until W is engaged (that engager's CAS
 * then gave the proxy hold to it).  An engager holding L only runs the
 * CAS loop, so the yield loop ends.
 *
 * ---- Invariants ------------------------------------------------------------
 *  L1 While W != ENGAGED, L is free or held by an engager between its
 *     acquisition of L and its CAS on W; no thread waits in L but other
 *     engagers.
 *  L2 W changes to ENGAGED exactly once (CAS), by a thread holding L; the
 *     proxy hold's fields are written by that thread while it holds L and
 *     before the CAS, and read only by a thread that loaded ENGAGED.
 *  L3 Exactly one of W's tag and L's hold stands for a holder of m: before
 *     the CAS the tag (L held by the engager is not a hold of m), after it
 *     L's hold (the tag is gone: ENGAGED carries none).
 *
 * ---- Why the orderings suffice ---------------------------------------------
 * Lazy mode: the holder's CAS 0 -> T is an acquire and the release CAS
 * T -> 0 a release, on the one word, so each critical section happens
 * before the next, exactly as glibc's lock word orders them.  A failed
 * fast CAS is relaxed: the slow path re-reads W with acquire.
 * Engaging: E's CAS on W is acq_rel.  With v = 0 it reads the last lazy
 * unlock's release, so the sections before it happen before E's (E then
 * releases L and takes it again through the algorithm: program order).
 * With v = T it releases the proxy hold's fields (L2) to the unlocker,
 * whose CAS on W fails with acquire (or whose load of W is an acquire)
 * before it reads w->hold; T's section then reaches the next holder
 * through L's release and acquire, which the algorithm orders.  A thread
 * that saw ENGAGED with acquire also sees the fields written before the
 * CAS.  The new pointer-word tag is published with a release store after
 * the CAS; a reader that takes the algorithm's fast path from it touches
 * only L and the wrapper fields the holder writes (I2, I3 of shim.h).
 * Tracked holds (a delegating algorithm, or a mixed configuration: shim.h
 * w_track_acquired) are counted in lazy mode as in engaged mode, never
 * below the mutexes a thread holds: in the locker's own thread-local
 * ll_lazy_held (internal.h), incremented after its CAS and decremented
 * only by an unlock that CASes the caller's own tag out (another thread's
 * unlock leaves the locker's count, which then only declines combining).
 * A proxy hold is not counted again: w->trk = IP_TRK_LAZY says the count
 * is in the ll_lazy_held of the thread w->owner names, and that thread's
 * unlock takes it back (wrapper.c w_unlock).  All of it is thread-local
 * or written under the mutex (I3 of shim.h): no ordering of its own.
 */
#include "shim.h"

/* A tracked lazy hold is counted in the locker's ll_lazy_held
 * (internal.h), not in a record or w->trk: the lazy word names the
 * locker, and only the unlock that CASes the caller's own tag out takes
 * the count back. */
static inline void lazy_track_acquired(struct ip_mutex *w)
{
    if (w->track)
        ll_lazy_held++;
}

/* Lazy lock of w's mutex (the general path: wrapper.c w_lock).  0: held;
 * IP_LAZY_OFF: engaged (now, or long ago): the caller takes the
 * algorithm's path, where a contended lock waits. */
int lazy_lock(struct ip_mutex *w)
{
    _Atomic uintptr_t *lw = w_lzw(w);
    uintptr_t v = 0;
    if (atomic_load_explicit(lw, memory_order_relaxed) == IP_LAZY_ENGAGED)
        return IP_LAZY_OFF; /* (no failed CAS on every call of an engaged mutex's general path) */
    if (atomic_compare_exchange_strong_explicit(lw, &v, self_tag(), memory_order_acquire, memory_order_acquire)) {
        lazy_track_acquired(w);
        return 0;
    }
    if (v != IP_LAZY_ENGAGED) {
        int r = lazy_engage(w, 0); /* held: the first contention */
        if (r)
            return r;
    }
    return IP_LAZY_OFF;
}

/* 0: taken; EBUSY: held; IP_LAZY_OFF: engaged, ask the algorithm. */
int lazy_trylock(struct ip_mutex *w)
{
    uintptr_t v = 0;
    if (atomic_load_explicit(w_lzw(w), memory_order_relaxed) == IP_LAZY_ENGAGED)
        return IP_LAZY_OFF;
    if (atomic_compare_exchange_strong_explicit(w_lzw(w), &v, self_tag(), memory_order_acquire, memory_order_acquire)) {
        lazy_track_acquired(w);
        return 0;
    }
    return v == IP_LAZY_ENGAGED ? IP_LAZY_OFF : EBUSY;
}

/* 0: released (or it was not locked: glibc's unlock of a free NORMAL
 * mutex answers 0 too); IP_LAZY_OFF: engaged, release L. */
int lazy_unlock(struct ip_mutex *w)
{
    _Atomic uintptr_t *lw = w_lzw(w);
    uintptr_t v = atomic_load_explicit(lw, memory_order_acquire);
    for (;;) {
        if (v == IP_LAZY_ENGAGED)
            return IP_LAZY_OFF;
        if (v == 0)
            return 0;
        if (atomic_compare_exchange_weak_explicit(lw, &v, 0, memory_order_release, memory_order_acquire))
            break;
    }
    if (w->track && v == self_tag())
        ll_lazy_held--; /* our own hold: its count back (another thread's
                         * unlock leaves the locker's count, as in engaged
                         * mode: shim.h w_track_acquired) */
    return 0;
}

/* Engage w's algorithm (see the header).  held: the caller holds the
 * mutex (or acts as if it did: a condition wait), so it must not wait for
 * L.  0, or the error of the algorithm's lock (m then stays lazy: its
 * holder, if any, keeps it). */
static int engage(struct ip_mutex *w, int held);

int lazy_engage(struct ip_mutex *w, int held)
{
    if (atomic_load_explicit(w_lzw(w), memory_order_acquire) == IP_LAZY_ENGAGED)
        return 0;
    /* Engaging may start what the algorithm needs (an RCL server's
     * threads, the machine's topology and calibration), whose set-up
     * calls cancellation points; pthread_mutex_lock is not one, so a
     * pending cancellation request must not act there. */
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    int r = engage(w, held);
    pthread_setcancelstate(old, NULL);
    return r;
}

static int engage(struct ip_mutex *w, int held)
{
    _Atomic uintptr_t *lw = w_lzw(w);
    for (;;) {
        int r = held ? w_raw_trylock(w) : w_raw_lock(w);
        if (r == 0)
            break;
        if (held && atomic_load_explicit(lw, memory_order_acquire) == IP_LAZY_ENGAGED)
            return 0; /* an engager holding L gave us its proxy hold */
        if (r != ENOMEM && r != EBUSY)
            return r;
        ll_yield(); /* EBUSY: an engager holds L (L1); ENOMEM: try again */
    }
    uintptr_t v = atomic_load_explicit(lw, memory_order_relaxed);
    for (;;) {
        if (v == IP_LAZY_ENGAGED)
            break;
        if (v != 0) {
            /* the proxy hold for the lazy holder v (L2; w->hold is ours);
             * its count is in v's ll_lazy_held already, taken back by the
             * unlock of v itself (w_unlock: IP_TRK_LAZY).  posix in place
             * keeps no owner word (glibc's __owner names the engager) */
            if (!IP_OWNERLESS(w))
                atomic_store_explicit(&w->owner, v, memory_order_relaxed);
            w->count = 1;
            if (w->track)
                w->trk = IP_TRK_LAZY;
        }
        if (atomic_compare_exchange_weak_explicit(lw, &v, IP_LAZY_ENGAGED, memory_order_acq_rel, memory_order_relaxed))
            break;
    }
    if (v != IP_LAZY_ENGAGED) {
        pthread_mutex_t *m = (pthread_mutex_t *)(uintptr_t)w->addr;
        atomic_store_explicit(mptr(m), (uintptr_t)w | (uintptr_t)w->fast, memory_order_release);
    }
    if (v == 0 || v == IP_LAZY_ENGAGED) {
        if (!IP_OWNERLESS(w))
            atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
        w_raw_unlock(w); /* nobody held m: L was ours for nothing */
    }
    return 0;
}

/* For tests: 1 engaged (also: a mutex of a lazy kind under
 * LIBLOCK_LAZY=0, engaged from its first use), 0 lazy (not engaged yet),
 * -1 no lazy mode for m (glibc's, not set up yet, or a type or algorithm
 * that is never lazy). */
LL_EXPORT long liblock_interpose_debug_engaged(pthread_mutex_t *m)
{
    struct ip_mutex *w = mutex_fast(m);
    if (!w || !mutex_lazy_kind(w))
        return -1;
    return w->lazy ? w_engaged(w) : 1;
}
