/*
 * oyama - the Oyama, Taura and Yonezawa lock (1999): a global word that is
 * FREE, LOCKED, or a pointer to a stack of pending (function, argument)
 * requests; the thread that holds the lock runs the pending requests before
 * it releases.
 *
 * Source: Y. Oyama, K. Taura and A. Yonezawa, "Executing Parallel Programs
 * with Synchronization Bottlenecks Efficiently", PDSIA 1999; as described
 * in J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 3.6:
 *   execute(cs): if CAS(word, FREE, LOCKED): run cs, then release.
 *                else push a request node onto the stack held in the word
 *                (CAS word: LOCKED or top -> our node) and wait until run.
 *   release:     loop { if CAS(word, LOCKED, FREE) return;
 *                       detach the stack (swap word -> LOCKED) and run it }
 *
 * Changes from the description, and why:
 *  1. Each detached batch is reversed before it runs, so requests within a
 *     batch run in arrival order instead of LIFO (the thesis lists LIFO
 *     order as a drawback; reversing costs one pass over a list the holder
 *     walks anyway).  Batches run in detach order.  Not strictly FIFO: a
 *     thread that finds the word FREE takes it at once.
 *  2. Bounded combining.  In the original a holder may run other threads'
 *     requests for ever while new ones keep arriving (the combiner starves,
 *     section 3.6).  Here a holder that has run MAX_COMBINER_CS critical
 *     sections hands the lock, with the rest of the batch, to the owner of
 *     the next pending request, which runs its own critical section, then
 *     the rest, then releases in the same way.
 *  3. liblock_lock/liblock_unlock.  lock() is CAS FREE -> LOCKED; if that
 *     fails it pushes a request whose function is a LOCK marker and waits.
 *     A holder never runs a marker: it hands the lock (and the rest of its
 *     batch) to that thread, so lock() returns owning the lock and pending
 *     requests wait until its unlock(), which is the release path above (it
 *     hands the lock to the first pending requester, see change 5).
 *     Delegated requests and lock()/unlock() sections are thus mutually
 *     exclusive: exactly one thread owns the word's LOCKED state.
 *
 * Invariants: the word is FREE only when no thread holds the lock; every
 * pushed request is in exactly one detached batch, which its holder (or the
 * holder it hands to) runs completely before the lock can become FREE; a
 * request node is read by the holder only before its owner is woken (the
 * holder reads next first).
 * Orderings: CAS FREE -> LOCKED is acquire and CAS LOCKED -> FREE is
 * release, so consecutive holders see each other's critical sections; the
 * push CAS is release (publishes the request fields) and the detaching swap
 * is acquire; DONE/OWNER go through ll_wake (release) and the waiter's
 * acquire load, so the requester sees the result and everything before it.
 *
 *  4. Oversubscription: when the holder reaches MAX_COMBINER_CS and the
 *     next requester looks asleep (parked, or with yield not checked in for
 *     OY_AWAKE_NS = 5 us), it runs that request too, up to 2 x
 *     MAX_COMBINER_CS; with yield, if it must stop and the next requester
 *     still looks asleep, it leaves the lock (with the rest of the batch)
 *     in an orphan slot that the first waiter to run takes over, as
 *     cc-synch.c change 5 describes.  Lock markers are always handed to
 *     their owner.
 *
 *  5. Delegation semantics (docs/api.md, "Delegated critical sections"), as in cc-synch.c
 *     change 6: unlock() never runs another thread's request (its caller
 *     may hold locks liblock cannot see, e.g. hand-over-hand with a native
 *     pthread mutex): it hands the lock, with the rest of the batch, to the
 *     first pending requester, which runs its own request first.  An
 *     execute() caller runs others' requests only if ll_may_run_foreign()
 *     (no liblock lock held, not itself inside a delegated critical
 *     section); otherwise it behaves like unlock() after its own.  Under
 *     yield only such a thread, or the request's owner, takes an orphaned
 *     lock.  Every requester can run at least its own request, so a
 *     hand-over always makes progress.
 *
 *  6. Hand-over to a parked waiter (spin-then-park).  When the lock must
 *     go to the first waiter in line and that waiter has parked, the
 *     holder gives it to the first waiter of the batch that is still awake
 *     (spinning) instead -- if the whole batch sleeps, it first detaches
 *     the requests pushed since (as the release loop does) and appends
 *     them -- and keeps the parked one first in line for the next holder; a waiter is passed over at most OY_MAX_SKIPS = 8 times,
 *     then it gets the lock (and the wake-up) whatever it costs.  With more
 *     threads than CPUs this avoids a futex wake-up on most hand-overs.
 *     The batch is private to the holder, so relinking it needs no atomic;
 *     the chosen waiter's node is alive (it waits for OWNER).  Oyama is not
 *     FIFO, and a passed-over waiter's wait stays bounded (8 hand-overs).
 *
 *  7. lock() under spin-then-park (the default) first tries to take a FREE
 *     word like glibc's mutex (lock_barging: spin, pausing then yielding,
 *     for the spin budget, but not at all while other lock() callers
 *     sleep, as tas_park.h argues; then sleep, barge_sleep.h), and queues
 *     a lock marker as above only after OY_LOCK_PATIENCE = 4 sleeps.
 *     Every release (word freed, or lock handed over) that finds the
 *     sleepers mark set clears it and wakes one sleeper, which sets it
 *     again before it looks at the word again (glibc's protocol on a side
 *     word).  The release that frees the word does so by a seq_cst CAS,
 *     as barge_sleep.h's no-lost-wake-up argument requires (a hand-over's
 *     wake-up only lets sleepers count their patience).  Why barge: with a
 *     queue, every lock()/unlock() hand-over with more threads than CPUs
 *     goes to a parked thread and costs a wake-up, far longer than the
 *     critical section; barging lets the running threads take the lock,
 *     as posix does.  Why one wake-up at a time: with a plain count of
 *     sleepers every release would make a futex_wake system call while
 *     anyone slept (barge_sleep.h).  The price is posix's: no order among
 *     lock() callers, bounded only by the patience.  The first attempt is
 *     a CAS before any clock read: a clock read (rdtsc) costs several
 *     nanoseconds, which is much of an uncontended lock() that programs
 *     such as sqlite3 call many times per operation.
 *
 *  8. Uncontended unlock.  When no batch was handed to the holder (its
 *     node's rest is nil) unlock() first tries what oy_release would do
 *     first, CAS(word, LOCKED, FREE) (seq_cst, change 7), then the wake-up
 *     check of change 7; if the word holds a stack, oy_release as before.
 *     It skips oy_release's statistics (such a release serves nobody).
 *     A request's `seen` time (change 4) is stored only under yield, the
 *     only policy whose asleep() reads it, and lock() fills in its marker
 *     request only when it is about to push it.
 *
 * The waiting on the request word and the orphaned lock under yield are
 * the shared skeleton of the combining locks (skeleton.h).
 *
 * Parameter: MAX_COMBINER_CS, env LIBLOCK_OYAMA_MAX_COMBINER_CS (read at
 * liblock_init), default 3 x the number of online CPUs.  With
 * spin-then-park the futex wake-ups of served requesters are made at the
 * end of the release, after the lock is free or handed over
 * (deferred_wake.h).
 * Policies: spin, yield, spin-then-park (a requester waits on its own
 * node's word; lock() callers that find the word LOCKED wait the same way).
 * Starvation-free (every request is in the next batch detached; a holder
 * runs at most MAX_COMBINER_CS before handing over), not FIFO.
 * Memory: request nodes live on the requester's stack (execute) or in the
 * per-hold node (lock), so there is no per-thread state to clean up.
 * Condition variables: supported for liblock_lock holders (generic path);
 * cond_wait from inside a critical section run through execute() returns
 * EPERM (it may be running on another thread, which must not sleep).
 */
#include "skeleton.h"
#include "barge_sleep.h"

#define OY_FREE ((uintptr_t)0)
#define OY_LOCKED ((uintptr_t)1)

/* the request word of skeleton.h (OWNER: the lock is ours) */
enum { OY_WAIT = LL_COMB_WAIT, OY_DONE = LL_COMB_DONE, OY_OWNER = LL_COMB_ROLE };
#define OY_AWAKE_NS 5000
#define OY_MAX_SKIPS 8
#define OY_LOCK_PATIENCE 4

struct oy_req {
    struct oy_req *next;
    void *(*cs)(void *);
    void *arg;
    uintptr_t tp; /* the requester's identity (platform/identity.h) */
    void *ret;
    struct oy_req *rest; /* with OY_OWNER: the rest of the batch to run */
    unsigned skips;      /* times passed over for a waiter that was awake (change 6) */
    _Atomic uint64_t seen; /* yield: last time the requester checked in (cycles) */
    _Atomic uint32_t state;
};
_Static_assert(sizeof(struct oy_req) <= LL_NODE_BYTES, "oyama node too large");

struct oy_lock {
    LL_ALIGNED _Atomic uintptr_t word;
    LL_ALIGNED unsigned max_cs;
    uint64_t awake_cycles;
    _Atomic unsigned max_pass;
    _Atomic unsigned long passes;
    _Atomic(void *) orphan;            /* yield: lock left to any waiter (skeleton.h 2.) */
    LL_ALIGNED struct barge_sleep ls;  /* where spin-then-park lock() callers sleep (change 7) */
    uint64_t spin_cycles;              /* spin budget of those callers */
};

static void *oy_lock_marker(void *arg) { return arg; }

static __thread const liblock_t *oy_combining LL_TLS_IE;
LL_IDENT_SCOPE_WRAPPER(oy_as_caller, oy_combining)

static int oy_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct oy_lock *s = LL_STATE(l, struct oy_lock);
    long dflt = 3L * ll_ncpus();
    s->max_cs = (unsigned)ll_env_long("LIBLOCK_OYAMA_MAX_COMBINER_CS", dflt < 1 ? 1 : dflt, 1, 1L << 30);
    s->awake_cycles = ll_ns_to_cycles(OY_AWAKE_NS);
    s->spin_cycles = ll_spin_budget_cycles();
    atomic_store_explicit(&s->word, OY_FREE, memory_order_release);
    return 0;
}

static int oy_destroy(liblock_t *l)
{
    struct oy_lock *s = LL_STATE(l, struct oy_lock);
    return atomic_load_explicit(&s->word, memory_order_acquire) != OY_FREE ||
                   barge_anyone(&s->ls)
               ? EBUSY
               : 0;
}

static struct oy_req *reverse(struct oy_req *n)
{
    struct oy_req *r = NULL;
    while (n) {
        struct oy_req *nx = n->next;
        n->next = r;
        r = n;
        n = nx;
    }
    return r;
}

static inline int asleep(struct oy_lock *s, struct oy_req *n, int policy)
{
    return ll_waiter_asleep(&n->state, &n->seen, s->awake_cycles, policy);
}

/* Run cs(arg) as a delegated critical section of l on this thread (own or
 * another thread's, whose identity is tp: then with that identity):
 * EDEADLK for a nested lock(l), and the thread counts as running one
 * (ll_may_run_foreign). */
static void *oy_run(liblock_t *l, void *(*cs)(void *), void *arg, uintptr_t tp)
{
    struct ll_cs_scope scope = ll_cs_enter(&oy_combining, l);
    void *r = ll_ident_run(tp, ll_ident_self(), oy_as_caller, l, cs, arg, NULL);
    ll_cs_leave(&oy_combining, scope);
    return r;
}

/* Unlink and return the first waiter of the list at *pp that is awake, or
 * NULL; *pp is left pointing at the list's terminating NULL link. */
static struct oy_req *unlink_awake(struct oy_lock *s, struct oy_req ***pp, int policy)
{
    for (; **pp; *pp = &(**pp)->next) {
        struct oy_req *m = **pp;
        if (!asleep(s, m, policy)) {
            **pp = m->next;
            return m;
        }
    }
    return NULL;
}

/* n (first in line) is parked: find the first waiter after it in *pending
 * that is awake and unlink it, unless n has been passed over OY_MAX_SKIPS
 * times already or none is awake; then return n itself.  If the whole
 * batch sleeps, the requests pushed since it was detached (the latest
 * arrivals, usually still spinning) are detached too and appended in
 * arrival order.  We hold the lock, so the word is LOCKED or a stack, and
 * the batch is private to us. */
static struct oy_req *pick_awake(struct oy_lock *s, struct oy_req *n, struct oy_req **pending, int policy)
{
    if (n->skips >= OY_MAX_SKIPS)
        return n;
    struct oy_req **pp = pending, *m = unlink_awake(s, &pp, policy);
    if (m)
        return m;
    uintptr_t top = atomic_exchange_explicit(&s->word, OY_LOCKED, memory_order_acquire);
    if (top == OY_LOCKED)
        return n;
    *pp = reverse((struct oy_req *)top);
    m = unlink_awake(s, &pp, policy);
    return m ? m : n;
}

/* Called by the holder after its own critical section (served = 1): run
 * `pending`, then release or run what arrived meanwhile.  Unless foreign_ok
 * (change 5), run nothing: hand the lock with the rest of the batch to the
 * first pending requester, or release. */
static void oy_release(liblock_t *l, struct oy_lock *s, struct oy_req *pending, unsigned served, int foreign_ok)
{
    int policy = ll_policy(l);
    unsigned max = foreign_ok ? s->max_cs : 0;
    struct ll_deferred_wakes dw;
    dw.n = 0;
    for (;;) {
        while (pending) {
            struct oy_req *n = pending;
            pending = n->next;
            int marker = n->cs == oy_lock_marker;
            if (marker || served >= max) {
                int sleepy = !marker && asleep(s, n, policy);
                if (sleepy && foreign_ok && served < 2 * max)
                    goto run; /* do not hand the lock to a sleeper: run it */
                if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK && asleep(s, n, policy)) {
                    /* change 6: hand to a waiter that is awake, if any */
                    struct oy_req *m = pick_awake(s, n, &pending, policy);
                    if (m != n) {
                        n->skips++;
                        n->next = pending;
                        pending = n; /* n stays first in line for the next holder */
                        n = m;
                    }
                }
                n->rest = pending;
                if (sleepy && policy == LIBLOCK_WAIT_YIELD) {
                    /* leave the lock to whichever waiter runs first
                     * (skeleton.h 2.) */
                    ll_comb_leave_orphan(&n->state, &s->orphan, n);
                } else {
                    ll_wake(&n->state, OY_OWNER, policy);
                }
                goto out;
            }
        run:
            n->ret = oy_run(l, n->cs, n->arg, n->tp);
            served++;
            ll_wake_deferred(&dw, &n->state, OY_DONE, policy);
        }
        uintptr_t expect = OY_LOCKED;
        if (atomic_compare_exchange_strong_explicit(&s->word, &expect, OY_FREE, memory_order_seq_cst,
                                                    memory_order_relaxed))
            goto out;
        uintptr_t top = atomic_exchange_explicit(&s->word, OY_LOCKED, memory_order_acquire);
        pending = reverse((struct oy_req *)top);
    }
out:
    barge_wake(&s->ls); /* after the seq_cst CAS that freed the word, or the hand-over (change 7) */
    ll_wake_flush(&dw);
    ll_comb_note_pass(&s->max_pass, &s->passes, served);
}

/* Under yield, an orphaned lock taken over (another thread's request):
 * run that request, release its owner and run the rest of its batch. */
static void serve_orphan(liblock_t *l, void *orphan)
{
    struct oy_req *o = orphan;
    struct oy_req *rest = o->rest; /* read o before releasing its owner */
    o->ret = oy_run(l, o->cs, o->arg, o->tp);
    ll_wake(&o->state, OY_DONE, ll_policy(l));
    oy_release(l, LL_STATE(l, struct oy_lock), rest, 1, 1);
}

/* Wait until our request ran (DONE) or we own the lock (OWNER).  With
 * yield, check in before each yield, and take over an orphaned lock
 * (skeleton.h 2.): if it is our own request, we own the lock; otherwise
 * serve it (serve_orphan), then keep waiting for ours. */
static uint32_t oy_wait(liblock_t *l, struct oy_lock *s, struct oy_req *n, int foreign_ok)
{
    return ll_comb_wait(l, &s->orphan, n, &n->state, &n->seen, foreign_ok, serve_orphan);
}

/* Take the lock or push `n`; returns 1 if we own the lock, 0 if pushed. */
static int oy_acquire_or_push(struct oy_lock *s, struct oy_req *n, int policy)
{
    n->skips = 0;
    if (policy == LIBLOCK_WAIT_YIELD) /* only asleep() under yield reads it */
        atomic_store_explicit(&n->seen, ll_cycles(), memory_order_relaxed);
    uintptr_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
    for (;;) {
        if (w == OY_FREE) {
            if (atomic_compare_exchange_weak_explicit(&s->word, &w, OY_LOCKED, memory_order_acquire,
                                                      memory_order_relaxed))
                return 1;
            continue;
        }
        n->next = (w == OY_LOCKED) ? NULL : (struct oy_req *)w;
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, (uintptr_t)n, memory_order_release,
                                                  memory_order_relaxed))
            return 0;
    }
}

static void *oy_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    struct oy_lock *s = LL_STATE(l, struct oy_lock);
    ll_thread_t *self = ll_self(); /* NULL (ENOMEM) only means: combine for nobody */
    if (LL_UNLIKELY(oy_combining == l || (self && self->nheld && ll_hold_find(self, l)))) {
        errno = EDEADLK;
        return NULL;
    }
    struct oy_req n;
    n.cs = cs;
    n.arg = arg;
    n.tp = ll_ident_self();
    n.rest = NULL;
    atomic_store_explicit(&n.state, OY_WAIT, memory_order_relaxed);
    int foreign_ok = ll_may_run_foreign(self);
    if (!oy_acquire_or_push(s, &n, ll_policy(l)) && oy_wait(l, s, &n, foreign_ok) == OY_DONE)
        return n.ret;
    /* we own the lock (took it, or were handed it with the rest of a
     * batch): run ours, then what is pending if we may */
    void *r = oy_run(l, cs, arg, 0);
    oy_release(l, s, n.rest, 1, foreign_ok);
    return r;
}

/* change 7: lock() under spin-then-park takes a free word like glibc's
 * mutex: spin (pausing, then yielding) until the word is FREE, but not
 * while others sleep; sleep (barge_sleep.h) when the budget is spent, try
 * again when woken.  After
 * OY_LOCK_PATIENCE sleeps it queues a marker instead, as lock() does under
 * the other policies, so a stream of execute() requests (which keeps the
 * word from ever being FREE) cannot starve it.  Returns 1 if it got the
 * lock, 0 if the caller must queue. */
static LL_SLOW int lock_barging_slow(struct oy_lock *s);

static inline int lock_barging(struct oy_lock *s)
{
    uintptr_t w0 = OY_FREE; /* the uncontended case first: no clock read */
    if (LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->word, &w0, OY_LOCKED, memory_order_acquire,
                                                          memory_order_relaxed)))
        return 1;
    return lock_barging_slow(s);
}

static int lock_barging_slow(struct oy_lock *s)
{
    for (int sleeps = 0; sleeps < OY_LOCK_PATIENCE; sleeps++) {
        uint64_t start = ll_cycles();
        unsigned n = 0;
        for (;;) {
            uintptr_t w = atomic_load_explicit(&s->word, memory_order_relaxed);
            if (w == OY_FREE && atomic_compare_exchange_weak_explicit(&s->word, &w, OY_LOCKED, memory_order_acquire,
                                                                      memory_order_relaxed))
                return 1;
            if (barge_sleepers(&s->ls, 0, 0))
                break; /* others sleep: sleep now (tas_park.h) */
            if (++n < 128)
                ll_pause();
            else if (ll_cycles() - start > s->spin_cycles)
                break;
            else
                ll_yield();
        }
        uint32_t seq = barge_sleep_enter(&s->ls);
        if (atomic_load_explicit(&s->word, memory_order_seq_cst) != OY_FREE)
            barge_sleep_wait(&s->ls, seq);
        barge_sleep_leave(&s->ls); /* before we look at the word again (the loop, or oy_acquire_or_push) */
    }
    return 0;
}

static int oy_lock(liblock_t *l, void *hold)
{
    struct oy_lock *s = LL_STATE(l, struct oy_lock);
    if (oy_combining == l)
        return EDEADLK;
    struct oy_req *n = hold;
    n->rest = NULL; /* what unlock hands on: nothing, unless a holder hands us a batch */
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK && lock_barging(s))
        return 0;
    n->cs = oy_lock_marker; /* the request, read only once pushed */
    n->arg = NULL;
    atomic_store_explicit(&n->state, OY_WAIT, memory_order_relaxed);
    if (!oy_acquire_or_push(s, n, ll_policy(l)))
        oy_wait(l, s, n, 0); /* a marker is never run: OWNER */
    return 0;
}

static int oy_trylock(liblock_t *l, void *hold)
{
    struct oy_lock *s = LL_STATE(l, struct oy_lock);
    struct oy_req *n = hold;
    n->rest = NULL;
    uintptr_t expect = OY_FREE;
    return atomic_compare_exchange_strong_explicit(&s->word, &expect, OY_LOCKED, memory_order_acquire,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

static int oy_unlock(liblock_t *l, void *hold)
{
    struct oy_req *n = hold;
    struct oy_lock *s = LL_STATE(l, struct oy_lock);
    if (LL_LIKELY(n->rest == NULL)) {
        /* change 8: nothing handed to us; oy_release's first step */
        uintptr_t expect = OY_LOCKED;
        if (LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->word, &expect, OY_FREE, memory_order_seq_cst,
                                                              memory_order_relaxed))) {
            barge_wake(&s->ls);
            return 0;
        }
    }
    oy_release(l, s, n->rest, 1, 0); /* runs no queued request */
    return 0;
}

static int oy_cond_release(liblock_t *l) { return ll_cs_cond_release(oy_combining, l); }

static int oy_cond_reacquire(liblock_t *l) { return ll_api_lock(l); }

/* Statistics (struct ll_ops .stats): max_pass and passes as cc-synch's;
 * pending, read by the holder: requests pushed while it holds (-1 when the
 * lock is free). */
static void oy_stats(const liblock_t *l, struct ll_stats *o)
{
    struct oy_lock *s = LL_STATE(l, struct oy_lock);
    ll_stats_put(o, "max_pass", atomic_load_explicit(&s->max_pass, memory_order_relaxed));
    ll_stats_put(o, "passes", (int64_t)atomic_load_explicit(&s->passes, memory_order_relaxed));
    uintptr_t w = atomic_load_explicit(&s->word, memory_order_acquire);
    long n = -1;
    if (w != OY_FREE) {
        n = 0;
        for (struct oy_req *r = w == OY_LOCKED ? NULL : (struct oy_req *)w; r; r = r->next)
            n++;
    }
    ll_stats_put(o, "pending", n);
}

const struct ll_ops ll_ops_oyama = {
    .name = "oyama",
    .description = "Oyama lock: FREE/LOCKED/stack-of-requests word; the holder runs pending requests",
    .source = "Oyama, Taura and Yonezawa, PDSIA 1999; Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.6",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "execute: the holder runs pending requests; lock: barges like glibc's mutex (spins, not while others sleep; sleeps, one woken at a time; queues after 4 sleeps); a hand-over skips parked waiters for awake ones, at most 8 times per waiter",
    .state_size = sizeof(struct oy_lock),
    .node_size = sizeof(struct oy_req),
    .init = oy_init,
    .destroy = oy_destroy,
    .lock = oy_lock,
    .trylock = oy_trylock,
    .unlock = oy_unlock,
    .execute = oy_execute,
    .cond_release = oy_cond_release,
    .cond_reacquire = oy_cond_reacquire,
    .stats = oy_stats,
};
