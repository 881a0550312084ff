/*
 * fc_park.h - Flat Combining's spin-then-park protocol (included by
 * flat-combining.c after its types; not a public header).
 *
 * Source: ours.  Hendler, Incze, Shavit and Tzafrir (SPAA 2010) only spin;
 * the lock() callers' sleeping is glibc's mutex protocol (U. Drepper,
 * "Futexes Are Tricky", 2011, mutex #2) on barge_sleep.h's side word.
 *
 * Policies: spin, yield and spin-then-park (the default: docs/api.md,
 * waiting defaults).  A waiter watches three things (combiner lock, its request,
 * its active flag), which the waiting layer's one-word park cannot
 * express, so spin-then-park is this file's own.
 *   - lock() callers take a free word as glibc's mutex does: they spin
 *     (pausing, then yielding) for the library's spin budget, but not while
 *     others sleep, then sleep on the sleepers' mark and eventcount of
 *     barge_sleep.h (its no-lost-wake-up argument: the mark is set, then
 *     the word is read, seq_cst; the release reads the mark after the
 *     seq_cst exchange that frees the word); a woken caller sets the mark
 *     again and tries the word.  At most about one wake-up is on its way at
 *     a time, and the word holds only FREE and LOCKED.
 *   - A requester sleeps on its own record's wake word (FCW_WAITING, set
 *     before it publishes the request, | LL_PARKED once it sleeps), after
 *     setting `sleeping` and incrementing the lock's `sleepers`.  Whoever
 *     changes what it waits for tells it (tell_owner: CAS WAITING[|PARKED]
 *     -> DONE or RETRY, futex_wake if it was parked): the combiner after
 *     running its request (DONE; the wake-up is made after the release) or
 *     deactivating its record (RETRY), and the releaser of the lock, which,
 *     if `sleepers` is non-zero, gives RETRY to one requester whose request
 *     is still pending so that it takes the lock and combines for the
 *     others.  No lost wake-up: the owner's CAS to PARKED and the teller's
 *     CAS are ordered on the same word (see tell_owner), and the releaser's
 *     swap of the lock word and its load of `sleepers` are seq_cst, as are
 *     the requester's increment and its load of the lock word, so either
 *     the requester sees the lock free or the releaser sees it counted.
 *   A combiner thus wakes exactly the requesters it served, and a release
 *   wakes at most one lock() caller and one requester.  The combiner lock's
 *   release is an exchange (it must read the old value); its acquiring CAS
 *   and exchange are acquire.
 * Asymmetric (not in the paper; the default under spin-then-park where
 * membarrier(2) has the private expedited command; LIBLOCK_FC_ASYM=0
 * turns it off).  The exchange at every release and the CAS per served
 * request above are locked instructions; each waits until the lines the
 * pass wrote (served records, read at that moment by their owners on the
 * other CPU) are exclusively ours again, a stall of a line transfer per
 * served request on every pass.  Requesters sleep rarely (after 1 ms of
 * yielding), lock()
 * callers once per spin budget at most, so the cost moves to the sleepers
 * (src/platform/membarrier.c):
 *   - lock() callers: the first one about to sleep switches the lock's
 *     releases to the symmetric exchange for good (lock_sym), so that its
 *     sleepers need no heavy barrier each (one per sleep, an interrupt on
 *     every CPU that runs the process, costs more than the releases'
 *     exchanges once lock() callers sleep often): lock_sym goes 0 -> 1
 *     (CAS), the caller issues the heavy
 *     barrier (after setting the mark), then stores 2 (release).  Releases
 *     load lock_sym (relaxed) and swap FREE in unless it is 0.  Sleepers
 *     that read 2 (acquire) need no barrier; those that read 0 or 1 issue
 *     their own.  Why no wake-up is lost: take the first barrier B.  A
 *     release that read lock_sym = 0 before B reached its CPU stores FREE
 *     and then loads the mark; the lock is held until that store, so no
 *     other release clears the issuer's mark between B and that load (one
 *     that cleared it earlier bumped the eventcount after the issuer read
 *     it, so the issuer does not sleep: it looks at the word again, and
 *     whoever takes the lock from then on releases with the exchange).  If
 *     that load comes after B's fence on its CPU, it sees the mark and
 *     wakes one sleeper (barge_sleep.h's chain then wakes the rest, each
 *     later release being an exchange); if it comes before,
 *     the store of FREE precedes the fence too and is visible to every read
 *     of the word after B returned, which includes the barrier's issuer
 *     and every sleeper that read 2 (stored after B returned).  A release
 *     that reads lock_sym after B's fence on its CPU swaps: barge_sleep.h's
 *     seq_cst argument.  Programs that only execute() never switch.
 *   - a requester about to sleep sets `sleeping`, increments `sleepers`,
 *     issues the heavy barrier and only then loads the word and its req
 *     for the last time.  The combiner stores req = nil (release) for each
 *     request of a pass, then (compiler barrier) loads `sleeping` of each
 *     served record and tells only those (signal_owner's CAS, as above);
 *     the releaser loads `sleepers` after its store of FREE, as the
 *     symmetric mode does after its exchange.  Same argument: the sleeper
 *     either sees req = nil / FREE, or is seen.
 *   - no heavy barrier (a failed call) leaves that sleeper on 1 ms timed
 *     waits: slower, never stranded.
 * tests/test_fc_park.c checks both modes.
 */
#ifndef LIBLOCK_LOCKS_FC_PARK_H
#define LIBLOCK_LOCKS_FC_PARK_H

/* a sleeper whose heavy barrier failed waits in steps of this (Asymmetric) */
static const struct timespec fc_timed_wait = {0, 1000000};

/* Tell the owner of r that what it waits for changed (its request ran:
 * DONE; its record was deactivated or the lock became free: RETRY), after
 * that change is stored.  The CAS only replaces WAITING (parked or not):
 * the owner's own CAS WAITING -> WAITING|PARKED and this one are ordered on
 * the word, so either the owner sees the change before it parks, or this
 * CAS sees PARKED and the owner is woken.  Returns the word to futex_wake
 * (NULL if the owner was not parked), so a combiner can wake after it has
 * released the lock.  If the word is already DONE/RETRY the owner has not
 * re-armed it yet and re-checks everything after it does.  A DONE that
 * lands on the owner's next request costs it one more look, nothing else. */
static inline void defer_wake(struct ll_deferred_wakes *dw, _Atomic uint32_t *w)
{
    if (!w)
        return;
    if (dw->n < LL_DEFER_MAX)
        dw->w[dw->n++] = w;
    else
        ll_futex_wake(w, 1);
}

/* CAS r's wake word from WAITING (parked or not) to why.  0 if the word
 * was not WAITING; else 1, *parked saying whether the owner sleeps. */
static inline int signal_owner(struct fc_rec *r, uint32_t why, int *parked)
{
    uint32_t w = FCW_WAITING | LL_PARKED;
    for (;;) {
        if (atomic_compare_exchange_strong_explicit(&r->wake, &w, why, memory_order_acq_rel, memory_order_relaxed)) {
            *parked = (w & LL_PARKED) != 0;
            return 1;
        }
        if ((w & ~LL_PARKED) != FCW_WAITING)
            return 0;
    }
}

static inline _Atomic uint32_t *tell_owner(struct fc_rec *r, uint32_t why)
{
    int parked;
    return signal_owner(r, why, &parked) && parked ? &r->wake : NULL;
}

/* The lock became free while requesters sleep: wake one whose request is
 * still pending, so that it takes the lock and combines for the others.
 * Its wake word goes from WAITING (parked or not yet) to RETRY, so one that
 * is just about to park sees the change instead of sleeping.
 * Why the scan finds it: the requester stores `sleeping` (relaxed) before
 * its seq_cst increment of `sleepers`; our seq_cst load of `sleepers` that
 * saw the increment read it from that RMW, so the store of `sleeping`
 * happens before our load of it.  The walk runs without the combiner lock:
 * records are never freed while the lock exists (thread_records.h), but a
 * concurrent combiner may unlink one and its owner push it again, so the
 * walk can skip a record.  That only happens while another requester is
 * running (the one that pushed), and it will take the lock and release it,
 * scanning again, so a sleeper is not forgotten. */
static void wake_one_requester(struct fc_lock *s)
{
    for (struct fc_rec *r = atomic_load_explicit(&s->head, memory_order_acquire); r;
         r = atomic_load_explicit(&r->next, memory_order_acquire)) {
        if (!atomic_load_explicit(&r->sleeping, memory_order_relaxed) ||
            !atomic_load_explicit(&r->req, memory_order_acquire))
            continue;
        int parked;
        if (signal_owner(r, FCW_RETRY, &parked)) {
            if (parked)
                ll_futex_wake(&r->wake, 1);
            return;
        }
    }
}

/* Release the combiner lock.  lock() callers that sleep on the mark
 * (barge_sleep.h) are woken one at a time, as with glibc's mutex; requesters
 * that sleep on their records are counted in `sleepers`, and one of them is
 * woken to take the lock (the exchange and the load of sleepers are
 * seq_cst, against the requester's increment and its load of the word). */
static void release(struct fc_lock *s)
{
    if (!s->park) { /* spin, yield: nobody sleeps, a plain release store */
        atomic_store_explicit(&s->lock_word, FC_FREE, memory_order_release);
        return;
    }
    if (s->asym && !atomic_load_explicit(&s->lock_sym, memory_order_relaxed)) {
        /* the light side of the asymmetric barrier (header): a plain store,
         * then the counters, which sleepers raise before their heavy one */
        atomic_store_explicit(&s->lock_word, FC_FREE, memory_order_release);
        atomic_signal_fence(memory_order_seq_cst);
        barge_wake(&s->ls);
        if (LL_UNLIKELY(atomic_load_explicit(&s->sleepers, memory_order_relaxed) != 0))
            wake_one_requester(s);
        return;
    }
    (void)atomic_exchange_explicit(&s->lock_word, FC_FREE, memory_order_seq_cst);
    barge_wake(&s->ls);
    if (LL_UNLIKELY(atomic_load_explicit(&s->sleepers, memory_order_seq_cst) != 0))
        wake_one_requester(s);
}

/* One step of the waiting phase of spin-then-park before it parks: pause
 * for the first FC_PAUSES polls, then yield, so that a combiner or holder
 * preempted on this CPU gets it back (with more threads than CPUs that is
 * the usual reason for a long wait), and park only after `budget` cycles of
 * that (a holder that is blocked, not preempted): FC_YIELD_NS for
 * requesters, the library's spin budget for lock() callers.  Returns 1 then.
 * Parking after the library's spin budget (about one futex round trip)
 * would be much slower: with several threads per CPU a requester's wait is
 * a few scheduler rounds, so nearly every requester would park, and every
 * park then costs a futex wake-up on the path of the next combining
 * pass. */
#define FC_PAUSES 128
static inline int fc_spin_step(unsigned *n, uint64_t start, uint64_t budget)
{
    if (++*n < FC_PAUSES) {
        ll_pause();
        return 0;
    }
    ll_yield();
    return ll_cycles() - start > budget;
}

/* spin-then-park wait of a requester: until the lock word is free, our
 * request has run, or our record was deactivated.  Spin for the spin
 * budget, then sleep on the record's wake word (see the header). */
static void wait_request_stp(struct fc_lock *s, struct fc_rec *r)
{
    uint64_t start = ll_cycles(), budget = s->yield_cycles;
    unsigned n = 0;
    for (;;) {
        if (atomic_load_explicit(&s->lock_word, memory_order_relaxed) == FC_FREE ||
            !atomic_load_explicit(&r->req, memory_order_acquire) ||
            !atomic_load_explicit(&r->active, memory_order_acquire))
            return;
        if (fc_spin_step(&n, start, budget))
            break;
    }
    atomic_store_explicit(&r->sleeping, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->sleepers, 1, memory_order_seq_cst);
    /* the heavy side (header): `sleeping` and the count before our loads of
     * the lock word and req; a failed barrier leaves us waking every 1 ms */
    int timed = s->asym && ll_heavy_barrier() != 0;
    for (;;) {
        if (atomic_load_explicit(&s->lock_word, memory_order_seq_cst) == FC_FREE ||
            !atomic_load_explicit(&r->req, memory_order_acquire) ||
            !atomic_load_explicit(&r->active, memory_order_acquire))
            break;
        uint32_t w = atomic_load_explicit(&r->wake, memory_order_acquire);
        if (w == FCW_WAITING &&
            !atomic_compare_exchange_strong_explicit(&r->wake, &w, FCW_WAITING | LL_PARKED, memory_order_acq_rel,
                                                     memory_order_acquire))
            continue; /* changed: look again */
        if ((w & ~LL_PARKED) != FCW_WAITING)
            break; /* DONE or RETRY: look at the lock and the request again */
        atomic_fetch_add_explicit(&s->parks, 1, memory_order_relaxed);
        ll_futex_wait(&r->wake, FCW_WAITING | LL_PARKED, timed ? &fc_timed_wait : NULL);
    }
    atomic_fetch_sub_explicit(&s->sleepers, 1, memory_order_relaxed);
    atomic_store_explicit(&r->sleeping, 0, memory_order_relaxed);
    atomic_store_explicit(&r->wake, FCW_WAITING, memory_order_relaxed); /* re-arm (only we wait on it) */
}

/* spin-then-park lock() (the lock was taken): glibc's protocol with the
 * sleepers' mark of barge_sleep.h (header).  Spin for the spin budget,
 * pausing, then yielding (a holder preempted on this CPU gets it back), but
 * not while others sleep: then the running threads take the lock in long
 * runs on one CPU, as with glibc's mutex and tas_park.h.  Yielding for
 * 1 ms before sleeping, as requesters do, would keep every waiter runnable:
 * with many threads per CPU the yields then cost a context switch each and
 * keep every CPU busy with threads that cannot take the lock. */
static void lock_stp(struct fc_lock *s)
{
    for (;;) {
        uint64_t start = ll_cycles(), budget = ll_spin_budget_cycles();
        unsigned n = 0;
        for (;;) {
            uint32_t expect = FC_FREE;
            if (atomic_load_explicit(&s->lock_word, memory_order_relaxed) == FC_FREE &&
                atomic_compare_exchange_weak_explicit(&s->lock_word, &expect, FC_LOCKED, memory_order_acquire,
                                                      memory_order_relaxed))
                return;
            if (barge_sleepers(&s->ls, 0, 0) || fc_spin_step(&n, start, budget))
                break; /* others sleep, or the budget is spent: sleep now */
        }
        uint32_t seq = barge_sleep_enter(&s->ls);
        /* asym: switch the releases to the exchange (header); a failed
         * barrier leaves us, and the sleepers after us, waking every 1 ms */
        int timed = 0;
        if (s->asym && atomic_load_explicit(&s->lock_sym, memory_order_acquire) != 2) {
            uint32_t z = 0;
            (void)atomic_compare_exchange_strong_explicit(&s->lock_sym, &z, 1, memory_order_relaxed,
                                                          memory_order_relaxed);
            timed = ll_heavy_barrier() != 0;
            if (!timed)
                atomic_store_explicit(&s->lock_sym, 2, memory_order_release);
        }
        if (atomic_load_explicit(&s->lock_word, memory_order_seq_cst) != FC_FREE) {
            atomic_fetch_add_explicit(&s->parks, 1, memory_order_relaxed);
            ll_futex_wait(&s->ls.seq, seq, timed ? &fc_timed_wait : NULL);
        }
        barge_sleep_leave(&s->ls); /* others may sleep; then look at the word again */
    }
}

/* Tell the owners of records a pass served (asym) that their requests ran:
 * only those that sleep or are about to (`sleeping`, set before their heavy
 * barrier), after a compiler barrier that keeps these loads after the
 * pass's req = nil stores.  The others see req = nil while they spin.
 * Telling each with a CAS, as the symmetric mode does, is a locked
 * instruction per request on the combiner's path: it waits for the
 * record's line, which the owner has just read. */
#define FC_TELL_MAX 64
static void tell_served(struct fc_rec **served, unsigned n, struct ll_deferred_wakes *dw)
{
    if (!n)
        return;
    atomic_signal_fence(memory_order_seq_cst);
    for (unsigned i = 0; i < n; i++)
        if (LL_UNLIKELY(atomic_load_explicit(&served[i]->sleeping, memory_order_relaxed)))
            defer_wake(dw, tell_owner(served[i], FCW_DONE));
}

#endif
