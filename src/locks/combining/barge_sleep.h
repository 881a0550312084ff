/*
 * barge_sleep.h - where the barging lock() callers of the combining locks
 * sleep (oyama.c change 7, hybcomb.c change 8): an eventcount `seq` and a
 * sleepers mark, glibc's mutex protocol (Drepper, "Futexes are tricky",
 * mutex #2) moved out of a lock word that has no room for the mark (it
 * holds a stack pointer or a queue tail).
 *
 *   sleeper:  s = barge_sleep_enter(b)     -- reads seq, then sets the mark
 *             if the lock still looks held (a seq_cst load of its word):
 *                 barge_sleep_wait(b, s)    -- futex_wait while seq == s
 *             barge_sleep_leave(b)          -- sets the mark again
 *             then looks at the lock again (takes it, or spins/sleeps/queues)
 *   releaser: after the seq_cst RMW that frees the lock (or hands it over),
 *             barge_wake(b): if the mark is set, clear it by exchange and,
 *             if this exchange cleared it, bump seq and futex_wake one.
 * A release clears the mark when it wakes, so the releases after it wake
 * nobody until the woken thread has set the mark again (on its way back to
 * the lock, "there may be others", as glibc's woken waiter swaps 2 in): at
 * most about one wake-up is on its way at a time.  With a plain count of
 * sleepers every release would make a futex_wake system call while anyone
 * slept, a system call on the lock's critical path at almost every
 * release under oversubscription.  Nothing is counted, so a process forked
 * while threads slept here starts with at most a stale mark, which its
 * first release clears (a count would keep the parent's sleepers counted
 * in the child, where they do not exist, and a "waking" bit set in the
 * parent would stay set for ever, so the child's own sleepers would never
 * be woken; tests/test_parking_fork.c, fork case).
 *
 * No lost wake-up.  Every operation named here is seq_cst, so they fall in
 * one total order S.  Take a release D that frees the lock (its RMW on the
 * lock word, then its load of the mark) and a sleeper W (its exchange of
 * the mark to 1, then its load of the lock word, then futex_wait on the
 * seq it read before the exchange):
 *  - D's load precedes W's exchange in S: W's load of the word comes after
 *    D's RMW and sees the lock free (or a later owner, whose release is
 *    another D): W does not sleep;
 *  - D's load reads W's mark (or a later set) and D's exchange clears it:
 *    D bumps seq after W read it, so a sleeper's futex_wait returns at once
 *    or one sleeper is woken.  It may be another sleeper V than W; V sets
 *    the mark again before it looks at the lock, so the lock is later
 *    released with the mark set (V took it, or the owner V found there),
 *    or V sleeps with the mark set: either way a later release wakes one
 *    more, and so on until W;
 *  - D's exchange finds the mark already cleared: another release D2
 *    cleared it after D's load, and woke a thread V (or, with nobody in
 *    the kernel yet, made the futex_wait of every sleeper that had read
 *    seq before its bump return at once, each such V).
 *    V's setting of the mark comes after D's exchange in the mark's
 *    modification order (else D's exchange would have read it), hence
 *    after D's RMW on the lock word in S, so V's next look sees the lock
 *    free or a later owner.
 * barge_sleepers is a relaxed hint ("others sleep: do not spin").  The
 * mark is clear while a woken thread is on its way back, so a caller can
 * also count a wake-up less than `window` cycles old (woke_at, a relaxed
 * store after the futex_wake; stale values only make a spin shorter or
 * longer, and expire, forked process included).  hybcomb passes two spin
 * budgets: a woken thread then does not find the mark clear and spin in
 * front of it; oyama passes 0, since for it the window costs more on
 * producer-consumer programs than it saves on the others.
 * barge_anyone is destroy's check.
 */
#ifndef LIBLOCK_BARGE_SLEEP_H
#define LIBLOCK_BARGE_SLEEP_H
#include "internal.h"

struct barge_sleep {
    _Atomic uint32_t seq;
    _Atomic uint32_t mark;     /* 1: a lock() caller may sleep on seq */
    _Atomic uint64_t woke_at;  /* cycle count of the last wake-up (a hint) */
};

/* A hint: some lock() caller sleeps, or (window != 0) one was woken less
 * than `window` cycles before `now` (the caller's ll_cycles()) and is on
 * its way back. */
static inline bool barge_sleepers(struct barge_sleep *b, uint64_t window, uint64_t now)
{
    return atomic_load_explicit(&b->mark, memory_order_relaxed) != 0 ||
           (window && now - atomic_load_explicit(&b->woke_at, memory_order_relaxed) < window);
}

/* For destroy: a lock() caller may sleep on the lock. */
static inline bool barge_anyone(struct barge_sleep *b)
{
    return atomic_load_explicit(&b->mark, memory_order_acquire) != 0;
}

static inline uint32_t barge_sleep_enter(struct barge_sleep *b)
{
    uint32_t s = atomic_load_explicit(&b->seq, memory_order_seq_cst);
    (void)atomic_exchange_explicit(&b->mark, 1, memory_order_seq_cst);
    return s;
}

static inline void barge_sleep_wait(struct barge_sleep *b, uint32_t s) { ll_futex_wait(&b->seq, s, NULL); }

/* After the wait (or instead of it): others may still sleep. */
static inline void barge_sleep_leave(struct barge_sleep *b)
{
    (void)atomic_exchange_explicit(&b->mark, 1, memory_order_seq_cst);
}

/* After the seq_cst RMW that freed (or handed over) the lock. */
static inline void barge_wake(struct barge_sleep *b)
{
    if (LL_UNLIKELY(atomic_load_explicit(&b->mark, memory_order_seq_cst) != 0) &&
        atomic_exchange_explicit(&b->mark, 0, memory_order_seq_cst) != 0) {
        atomic_fetch_add_explicit(&b->seq, 1, memory_order_seq_cst);
        ll_futex_wake(&b->seq, 1);
        atomic_store_explicit(&b->woke_at, ll_cycles(), memory_order_relaxed);
    }
}
#endif
