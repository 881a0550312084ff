/*
 * barge_sleep.h - where the barging lock() callers of the combining locks
 * sleep (oyama.c change 7, hybcomb.c change 8): an eventcount, a count of
 * sleepers and a WAKING bit, so that a release wakes at most one sleeper
 * at a time, as glibc's mutex does with its waiters mark.
 *
 * Those locks cannot put a waiters mark in their lock word (it holds a
 * stack pointer or a queue tail), so a lock() caller that has spun for its
 * budget sleeps on `seq` instead:
 *   sleeper:  s = barge_sleep_enter(b)      -- reads seq, then counts itself
 *             if the lock still looks held (a seq_cst load of its word):
 *                 barge_sleep_wait(b, s)     -- futex_wait while seq == s
 *             barge_sleep_leave(b)           -- uncounts itself, clears WAKING
 *             then looks at the lock again (takes it, or spins/sleeps/queues)
 *   releaser: after the seq_cst RMW that frees the lock (or hands it over),
 *             barge_wake(b): if sleepers are counted and WAKING is clear,
 *             set WAKING by CAS, bump seq, futex_wake one.
 * While WAKING is set releases wake nobody: a woken thread is on its way
 * and will look at the lock.  With a plain count every release made a
 * futex_wake system call while anyone slept (sqlite3 under the interposer
 * at 8 threads: oyama 3.10x glibc, hybcomb 2.84-2.99x; with WAKING
 * 1.52x and 1.75-1.99x; the callers' headers have the rest).
 *
 * No lost wake-up.  Every operation named here is seq_cst, so they fall in
 * one total order S.  Take a release D that frees the lock (its RMW on the
 * lock word, then its load of state in barge_wake) and a sleeper W (its
 * increment of state, then its load of the lock word, then futex_wait on
 * the seq it read before the increment):
 *  - D's load does not see W counted: W's increment comes after that load
 *    in S, so W's load of the word comes after D's RMW and sees the lock
 *    free (or a later owner, whose release is another D): W does not sleep;
 *  - D sees W counted and WAKING clear: D's CAS sets WAKING and bumps seq
 *    after W read it, so W's futex_wait returns at once or is woken;
 *  - D sees WAKING set: the thread V whose barge_sleep_leave clears it does
 *    so after D's load (D read a value that precedes V's RMW in state's
 *    modification order, which S respects), and V looks at the lock after
 *    that, so after D's RMW.  Such a V exists: WAKING is set only by a CAS
 *    that saw some sleeper counted, every counted sleeper leaves, and its
 *    leaving clears WAKING after its uncount, which follows that CAS.
 * A release that hands the lock over instead of freeing it may call
 * barge_wake too (the callers do, so that sleepers count their patience
 * while the lock stays busy); it is not needed for the argument.
 * barge_sleepers is a relaxed hint ("others sleep: do not spin").
 */
#ifndef LIBLOCK_BARGE_SLEEP_H
#define LIBLOCK_BARGE_SLEEP_H
#include "../internal.h"

#define BARGE_WAKING (UINT32_C(1) << 31) /* state: a sleeper has been woken and has not left yet */
#define BARGE_COUNT (BARGE_WAKING - 1)   /* state: sleepers counted */

struct barge_sleep {
    _Atomic uint32_t seq;
    _Atomic uint32_t state;
};

/* A hint: some lock() caller sleeps (or is about to). */
static inline bool barge_sleepers(struct barge_sleep *b)
{
    return (atomic_load_explicit(&b->state, memory_order_relaxed) & BARGE_COUNT) != 0;
}

/* For destroy: anyone counted, with the acquire a destroy check uses. */
static inline bool barge_anyone(struct barge_sleep *b)
{
    return (atomic_load_explicit(&b->state, memory_order_acquire) & BARGE_COUNT) != 0;
}

static inline uint32_t barge_sleep_enter(struct barge_sleep *b)
{
    uint32_t s = atomic_load_explicit(&b->seq, memory_order_seq_cst);
    atomic_fetch_add_explicit(&b->state, 1, memory_order_seq_cst);
    return s;
}

static inline void barge_sleep_wait(struct barge_sleep *b, uint32_t s) { ll_futex_wait(&b->seq, s, NULL); }

static inline void barge_sleep_leave(struct barge_sleep *b)
{
    atomic_fetch_sub_explicit(&b->state, 1, memory_order_seq_cst);
    atomic_fetch_and_explicit(&b->state, ~BARGE_WAKING, memory_order_seq_cst);
}

/* After the seq_cst RMW that freed (or handed over) the lock. */
static inline void barge_wake(struct barge_sleep *b)
{
    uint32_t v = atomic_load_explicit(&b->state, memory_order_seq_cst);
    while (LL_UNLIKELY((v & BARGE_COUNT) && !(v & BARGE_WAKING)))
        if (atomic_compare_exchange_weak_explicit(&b->state, &v, v | BARGE_WAKING, memory_order_seq_cst,
                                                  memory_order_seq_cst)) {
            atomic_fetch_add_explicit(&b->seq, 1, memory_order_seq_cst);
            ll_futex_wake(&b->seq, 1);
            return;
        }
}
#endif
