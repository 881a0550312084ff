/*
 * dsm-synch - DSM-Synch combining lock (Fatourou and Kallimanis, PPoPP
 * 2012): CC-Synch where every thread owns two nodes per lock and always
 * waits on one of its own nodes (local spinning without cache coherence or
 * on NUMA).
 *
 * Source: P. Fatourou and N. D. Kallimanis, "Revisiting the Combining
 * Synchronization Technique", PPoPP 2012; as given in J.-P. Lozi, "Towards
 * More Scalable Mutual Exclusion for Multicore Architectures", PhD thesis,
 * UPMC (Paris 6), 2014, section 3.8, Algorithm 8:
 *   execute(req): toggle; my = nodes[toggle]; my = {WAIT, next nil, req};
 *   pred = swap(tail, my); if pred: pred.next = my, wait on my; if my was
 *   run, return its result.  Otherwise (no pred, or handed the role) we are
 *   the combiner: tmp = my; loop { run tmp, release its owner; stop if
 *   tmp.next is nil, or tmp.next.next is nil, or MAX_COMBINER_CS ran;
 *   tmp = tmp.next } (see the change below).  If tmp.next is nil: CAS(tail, tmp, nil) frees the
 *   lock, else wait (yielding) until the thread that swapped tmp out links
 *   itself.  Hand the role to tmp.next's owner.
 *
 * Change from Algorithm 8: the paper's combiner also stops when tmp.next
 * is the last node (tmp.next.next == nil) and hands the role to its owner.
 * We run that last request too and stop only at a node without successor
 * (then CAS the tail to nil, or wait for the arriving thread to link and
 * hand over to it), as CC-Synch does.  Same safety argument (below); the
 * difference is whom the role goes to: the paper's rule hands it to a
 * thread that enqueued some time ago and, with more threads than cores, has
 * often been descheduled since (every critical section then waits for it to
 * be scheduled again, a time slice or more, against the few hundred cycles
 * of a critical section run by a running combiner), while a thread that is
 * linking itself right now is running.  Cost: one CAS when the
 * combiner empties the queue.
 *
 * The thesis's finding (its footnote to Algorithm 8): the paper resets
 * tmp.next = nil between lines 36 and 37, i.e. after the hand-over.  That
 * write can lose an update: once tmp's owner has been released it may run
 * two more operations (toggling back to tmp, which is legal as soon as its
 * operation on the other node completed, and the new combiner may complete
 * it quickly), re-insert tmp as the tail and have a successor link itself
 * with tmp.next = succ -- and then the delayed old combiner's reset erases
 * that link.  The next combiner that reaches tmp sees next == nil, its
 * CAS(tail, tmp, nil) fails (the tail is succ), and it waits at lines 34-35
 * for a link that never comes.  We do not reset next after the hand-over
 * (as the authors' official code does not): every node's next is reset by
 * its owner before it swaps the node in (line 10), which is the only reset
 * needed, and after the hand-over the combiner touches no node again.
 *
 * Why two nodes are enough: a node used in a thread's operation k is still
 * read after that operation returns only by the combiner that ran it (it
 * reads tmp.next, or waits for it to be linked, before handing over).  The
 * thread's operation k+1 uses the other node; it completes only after some
 * combiner reached it, which is after the old combiner handed over (the
 * queue is served in order, and the hand-over is that combiner's last
 * access).  So when operation k+2 reuses the first node nobody reads it.
 * A trylock that fails enqueues nothing and undoes its toggle.
 *
 * liblock_lock/liblock_unlock: lock() enqueues a LOCK marker request.  A
 * combiner never runs it: it stops before that node and hands the role to
 * its owner, so lock() returns holding the combiner role.  unlock() frees
 * the lock or hands the role to the next node's owner without running any
 * queued request (below), so delegated requests never run concurrently
 * with a lock()/unlock() section.  trylock is CAS(tail, nil, my).
 *
 * Uncontended unlock: unlock() first CASes the tail from its own node to
 * nil, when a relaxed load finds the tail still there: the CAS combine()
 * ends with when that node has no successor, without the pass's bookkeeping
 * (the combining scope and the statistics: such a pass ran no request).
 * If the tail moved, a thread swapped our node out and is linking itself or
 * waits on it, and combine() hands over as before.  The node's `seen` time
 * (below) is stored only under yield, the only policy that reads it.
 *
 * Delegation semantics (docs/api.md, "Delegated critical sections"), as in cc-synch.c change
 * 6: unlock() never runs another thread's critical section (its caller may
 * hold locks liblock cannot see, e.g. hand-over-hand with a native pthread
 * mutex), and an execute() caller combines for others only if
 * ll_may_run_foreign() holds (no liblock lock held, not itself inside a
 * delegated critical section); otherwise it runs its own request and hands
 * the role to the next node's owner.  Under yield only such a thread, or
 * the node's owner, takes an orphaned role.
 *
 * The waiting, the orphan slot and the combining pass are the shared
 * skeleton (skeleton.h, with CC-Synch and Oyama); this file keeps the two
 * nodes per thread, the nil tail and the wait for a late link.
 *
 * Invariants: tail is nil iff no thread holds the combiner role and none
 * waits; exactly one combiner while the tail is non-nil; a node's request
 * is written before the swap that publishes it; after DONE/COMBINE is
 * delivered the combiner never touches that node.
 * Orderings: the tail swap is acq_rel (release publishes the node and its
 * request to the next swapper and to the combiner that reaches it through
 * pred.next); pred.next = my is release and the combiner's loads of next
 * are acquire; DONE/COMBINE go through ll_wake (release) and ll_wait_while
 * (acquire); CAS(tail, tmp, nil) is release and the next swap acquire.
 *
 * Oversubscription: as in cc-synch.c (change 4 there), when a pass reaches
 * MAX_COMBINER_CS and the next waiter looks asleep (parked, or with yield
 * not checked in for DSM_AWAKE_NS = 5 us) the combiner runs its request
 * instead of handing it the role, up to MAX_COMBINER_CS more (a pass is at
 * most 2 x MAX_COMBINER_CS; exactly MAX with spin), and futex wake-ups of
 * served waiters are made after the hand-over.  With yield, if the waiter
 * to hand over to still looks descheduled, the role is left in an orphan
 * slot that the first waiter to run takes over (cc-synch.c change 5; the
 * taker runs the orphaned node's request first).
 *
 * Parameter: MAX_COMBINER_CS, env LIBLOCK_DSMSYNCH_MAX_COMBINER_CS (read at
 * liblock_init), default 3 x the number of online CPUs (the thesis's
 * setting, section 5.1).
 * Policies: spin, yield, spin-then-park (each waiter waits on its own
 * node's word; the short wait for a successor to link itself spins or
 * yields).  FIFO and starvation-free.
 * Memory: the two nodes live in a per-thread, per-lock record
 * (src/locks/combining/thread_records.h): orphaned at thread exit and adopted by the
 * next thread that uses the lock (the adopter continues the toggle, so the
 * argument above still holds), freed at destroy.
 * Condition variables: supported for liblock_lock holders (generic path);
 * cond_wait from inside a critical section run through execute() returns
 * EPERM (it may be running on the combiner, which must not sleep).
 */
#include "thread_records.h"
#include "skeleton.h"

#define DSM_AWAKE_NS 5000

struct dsm_node {
    struct ll_comb_node c; /* first: the tail and next hold &c (skeleton.h) */
} __attribute__((aligned(LL_CACHELINE)));

struct dsm_rec {
    struct ll_trec h;
    unsigned toggle;
    struct dsm_node nodes[2];
} __attribute__((aligned(LL_CACHELINE)));

struct dsm_lock {
    LL_ALIGNED _Atomic(struct ll_comb_node *) tail;
    LL_ALIGNED unsigned max_cs;
    uint64_t awake_cycles;
    _Atomic unsigned max_pass;
    _Atomic unsigned long passes;
    struct ll_trec_list recs;
    _Atomic(struct dsm_node *) holder; /* lock()/trylock() holder's node, for tests */
    _Atomic(void *) orphan;            /* yield: combiner role left to any taker (skeleton.h 2.) */
};

struct dsm_hold {
    struct dsm_node *my;
};
_Static_assert(sizeof(struct dsm_hold) <= LL_NODE_BYTES, "dsm-synch hold too large");

static __thread struct ll_trec_tls dsm_tls LL_TLS_IE;
static __thread const liblock_t *dsm_combining LL_TLS_IE;
LL_IDENT_SCOPE_WRAPPER(dsm_as_caller, dsm_combining)

static struct ll_trec *dsm_alloc_rec(void) { return ll_alloc_aligned(sizeof(struct dsm_rec)); }

static int dsm_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct dsm_lock *s = LL_STATE(l, struct dsm_lock);
    long dflt = 3L * ll_ncpus();
    s->max_cs = (unsigned)ll_env_long("LIBLOCK_DSMSYNCH_MAX_COMBINER_CS", dflt < 1 ? 1 : dflt, 1, 1L << 30);
    s->awake_cycles = ll_ns_to_cycles(DSM_AWAKE_NS);
    ll_trec_list_init(&s->recs);
    atomic_store_explicit(&s->tail, NULL, memory_order_release);
    return 0;
}

static int dsm_destroy(liblock_t *l)
{
    struct dsm_lock *s = LL_STATE(l, struct dsm_lock);
    if (atomic_load_explicit(&s->tail, memory_order_acquire))
        return EBUSY;
    ll_trec_list_destroy(&s->recs);
    return 0;
}

static void combine(liblock_t *l, struct dsm_lock *s, struct dsm_node *start, int mode, int foreign_ok);

/* Under yield: serve an orphaned node taken over from the slot. */
static void serve_orphan(liblock_t *l, void *o)
{
    combine(l, LL_STATE(l, struct dsm_lock), o, LL_COMB_FOREIGN, 1);
}

/* Wait for DONE or COMBINE on our node; with yield, check in before each
 * yield and take over an orphaned combiner role (skeleton.h 2.): our own
 * node always, another thread's only if foreign_ok. */
static LL_SLOW uint32_t wait_node(liblock_t *l, struct dsm_lock *s, struct dsm_node *n, int foreign_ok)
{
    return ll_comb_wait(l, &s->orphan, n, &n->c.state, &n->c.seen, foreign_ok, serve_orphan);
}

/* Combining pass from `start` (skeleton.h 3., LL_COMB_BY_LINK: a node's
 * request is published by its predecessor's link).  LL_COMB_OWN: our
 * node, request pending.  LL_COMB_OWN_DONE: our critical section already
 * ran (unlock after lock), count it and start with the hand-over test.
 * LL_COMB_FOREIGN: an orphaned node taken over with yield: run it and
 * release its owner. */
static void combine(liblock_t *l, struct dsm_lock *s, struct dsm_node *start, int mode, int foreign_ok)
{
    struct ll_comb_pass p;
    ll_comb_queue_pass(l, &dsm_combining, &p, &start->c, mode, foreign_ok ? s->max_cs : 1, foreign_ok,
                       &s->awake_cycles, LL_COMB_BY_LINK, dsm_as_caller);
    ll_comb_note_pass(&s->max_pass, &s->passes, p.count);
    if (!p.published) {
        struct ll_comb_node *tmp = p.last, *expect = tmp, *next;
        if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_release,
                                                    memory_order_relaxed)) {
            ll_wake_flush(&p.dw);
            return;
        }
        int step = ll_policy(l) == LIBLOCK_WAIT_YIELD ? LIBLOCK_WAIT_YIELD : LIBLOCK_WAIT_SPIN;
        while (!(next = atomic_load_explicit(&tmp->next, memory_order_acquire)))
            ll_wait_step(step); /* a thread swapped tmp out and is linking itself */
        /* No write to tmp here (see the header: that is the lost update). */
        ll_comb_queue_hand_over(l, &s->orphan, next, &p, 0, &s->awake_cycles); /* it is running */
        return;
    }
    /* next's owner waits; under yield, if it looks descheduled, leave the
     * role to whichever waiter runs first (cc-synch.c change 5) */
    ll_comb_queue_hand_over(l, &s->orphan, p.stop, &p, 1, &s->awake_cycles);
}

static inline struct dsm_rec *my_rec(struct dsm_lock *s)
{
    return (struct dsm_rec *)ll_trec_lookup(&dsm_tls, &s->recs, dsm_alloc_rec);
}

static inline struct dsm_node *prepare(struct dsm_rec *r, void *(*cs)(void *), void *arg, int policy)
{
    r->toggle ^= 1;
    struct dsm_node *my = &r->nodes[r->toggle];
    atomic_store_explicit(&my->c.state, LL_COMB_WAIT, memory_order_relaxed);
    atomic_store_explicit(&my->c.next, NULL, memory_order_relaxed);
    my->c.cs = cs;
    my->c.arg = arg;
    my->c.tp = ll_ident_self();
    if (policy == LIBLOCK_WAIT_YIELD) /* only asleep() under yield reads it */
        atomic_store_explicit(&my->c.seen, ll_cycles(), memory_order_relaxed);
    return my;
}

static void *dsm_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    struct dsm_lock *s = LL_STATE(l, struct dsm_lock);
    if (LL_UNLIKELY(ll_cs_held_by_caller(dsm_combining, l))) {
        errno = EDEADLK;
        return NULL;
    }
    struct dsm_rec *r = my_rec(s);
    if (LL_UNLIKELY(!r)) {
        errno = ENOMEM;
        return NULL;
    }
    int foreign_ok = ll_may_run_foreign(ll_self_tls);
    struct dsm_node *my = prepare(r, cs, arg, ll_policy(l));
    struct ll_comb_node *pred = atomic_exchange_explicit(&s->tail, &my->c, memory_order_acq_rel);
    if (pred) {
        atomic_store_explicit(&pred->next, &my->c, memory_order_release);
        if (wait_node(l, s, my, foreign_ok) == LL_COMB_DONE)
            return my->c.ret;
    }
    combine(l, s, my, LL_COMB_OWN, foreign_ok);
    return my->c.ret;
}

static int dsm_lock(liblock_t *l, void *hold)
{
    struct dsm_lock *s = LL_STATE(l, struct dsm_lock);
    if (dsm_combining == l)
        return EDEADLK;
    struct dsm_rec *r = my_rec(s);
    if (!r)
        return ENOMEM;
    struct dsm_node *my = prepare(r, ll_comb_lock_marker, NULL, ll_policy(l));
    struct ll_comb_node *pred = atomic_exchange_explicit(&s->tail, &my->c, memory_order_acq_rel);
    if (pred) {
        atomic_store_explicit(&pred->next, &my->c, memory_order_release);
        wait_node(l, s, my, 0); /* a marker is never run: COMBINE */
    }
    ((struct dsm_hold *)hold)->my = my;
    atomic_store_explicit(&s->holder, my, memory_order_relaxed);
    return 0;
}

static int dsm_trylock(liblock_t *l, void *hold)
{
    struct dsm_lock *s = LL_STATE(l, struct dsm_lock);
    if (dsm_combining == l || atomic_load_explicit(&s->tail, memory_order_relaxed))
        return EBUSY;
    struct dsm_rec *r = my_rec(s);
    if (!r)
        return ENOMEM;
    struct dsm_node *my = prepare(r, ll_comb_lock_marker, NULL, ll_policy(l));
    struct ll_comb_node *expect = NULL;
    if (!atomic_compare_exchange_strong_explicit(&s->tail, &expect, &my->c, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
        r->toggle ^= 1; /* nothing enqueued: undo the toggle */
        return EBUSY;
    }
    ((struct dsm_hold *)hold)->my = my;
    atomic_store_explicit(&s->holder, my, memory_order_relaxed);
    return 0;
}

static int dsm_unlock(liblock_t *l, void *hold)
{
    struct dsm_lock *s = LL_STATE(l, struct dsm_lock);
    struct dsm_node *my = ((struct dsm_hold *)hold)->my;
    atomic_store_explicit(&s->holder, NULL, memory_order_relaxed);
    /* Nobody queued: free the lock with the CAS combine() would end with
     * (see "Uncontended unlock" in the header). */
    struct ll_comb_node *expect = &my->c;
    if (LL_LIKELY(atomic_load_explicit(&s->tail, memory_order_relaxed) == &my->c) &&
        LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_release,
                                                          memory_order_relaxed)))
        return 0;
    combine(l, s, my, LL_COMB_OWN_DONE, 0); /* runs no queued request */
    return 0;
}

static int dsm_cond_release(liblock_t *l) { return ll_cs_cond_release(dsm_combining, l); }

static int dsm_cond_reacquire(liblock_t *l) { return ll_api_lock(l); }

static int dsm_thread_register(liblock_t *l)
{
    return my_rec(LL_STATE(l, struct dsm_lock)) ? 0 : ENOMEM;
}

/* Statistics (struct ll_ops .stats): max_pass and passes as cc-synch's;
 * records, the per-thread records the lock owns; pending, read by the
 * lock() holder: requests linked behind it (-1 when the lock is free). */
static long dsm_pending(const struct dsm_lock *s)
{
    struct dsm_node *h = atomic_load_explicit(&s->holder, memory_order_relaxed);
    if (!h)
        return -1;
    long n = 0;
    for (struct ll_comb_node *t = atomic_load_explicit(&h->c.next, memory_order_acquire); t;
         t = atomic_load_explicit(&t->next, memory_order_acquire))
        n++;
    return n;
}

static void dsm_stats(const liblock_t *l, struct ll_stats *o)
{
    struct dsm_lock *s = LL_STATE(l, struct dsm_lock);
    long recs = 0;
    for (struct ll_trec *r = atomic_load_explicit(&s->recs.head, memory_order_acquire); r; r = r->all_next)
        recs++;
    ll_stats_put(o, "max_pass", atomic_load_explicit(&s->max_pass, memory_order_relaxed));
    ll_stats_put(o, "passes", (int64_t)atomic_load_explicit(&s->passes, memory_order_relaxed));
    ll_stats_put(o, "records", recs);
    ll_stats_put(o, "pending", dsm_pending(s));
}

const struct ll_ops ll_ops_dsm_synch = {
    .name = "dsm-synch",
    .description = "DSM-Synch combining lock: CC-Synch with two local nodes per thread per lock",
    .source = "Fatourou and Kallimanis, PPoPP 2012; Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.8, Algorithm 8",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND |
             LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "execute: the running combiner serves queued requests and runs in place of a waiter that has parked; lock/unlock: FIFO hand-over to the next queued thread, at most one wake-up per hand-off",
    .state_size = sizeof(struct dsm_lock),
    .node_size = sizeof(struct dsm_hold),
    .init = dsm_init,
    .destroy = dsm_destroy,
    .lock = dsm_lock,
    .trylock = dsm_trylock,
    .unlock = dsm_unlock,
    .execute = dsm_execute,
    .cond_release = dsm_cond_release,
    .cond_reacquire = dsm_cond_reacquire,
    .thread_register = dsm_thread_register,
    .stats = dsm_stats,
};
