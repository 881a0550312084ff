/*
 * cc-synch - CC-Synch combining lock (Fatourou and Kallimanis, PPoPP 2012).
 *
 * Source: P. Fatourou and N. D. Kallimanis, "Revisiting the Combining
 * Synchronization Technique", PPoPP 2012; as given in J.-P. Lozi, "Towards
 * More Scalable Mutual Exclusion for Multicore Architectures", PhD thesis,
 * UPMC (Paris 6), 2014, section 3.8, Algorithm 7:
 *   execute(req): swap a fresh node in as the new tail; the previous tail,
 *   cur, becomes ours: write req into cur, link cur.next = fresh, wait on
 *   cur.wait.  If cur.completed, return cur.ret.  Otherwise we are the
 *   combiner: walk from cur, running each request whose node has a
 *   successor (a node's request is published once its next is set), marking
 *   it completed and releasing its owner, until the node has no successor or
 *   MAX_COMBINER_CS requests ran; then release the owner of the node where
 *   we stopped without completing it: that thread is the next combiner.
 *   Nodes migrate: a thread leaves with `cur`, which nobody references any
 *   more, as its node for next time.
 *
 * Changes from Algorithm 7, and why:
 *  1. Free bit in the tail.  In the paper the lock is "free" when the tail
 *     dummy's wait flag is false, which cannot be tested and claimed in one
 *     atomic step (a trylock that reads the flag and then CASes the tail is
 *     exposed to ABA: nodes are recycled, so the tail can leave and come back
 *     with wait = true and the CAS would enqueue us behind a combiner).  Here
 *     a combiner that finds its stopping node t without a successor CASes
 *     tail t -> t|FREE.  An arriving thread whose swap returns a tagged
 *     pointer is the combiner at once; trylock is CAS(tail, t|FREE, fresh).
 *     If that CAS fails the tail moved, so somebody has enqueued behind t and
 *     waits on t: the combiner hands over to it as in the paper.  Cost: one
 *     CAS per combining pass that empties the queue (DSM-Synch pays the
 *     same), none while the queue stays non-empty.
 *  2. One state word instead of {wait, completed}: WAIT, DONE (request run)
 *     or COMBINE (you are the combiner).  One store wakes the owner, which
 *     lets the waiting layer park on it (spin-then-park).
 *  3. liblock_lock/liblock_unlock.  lock() enqueues like execute() with a
 *     LOCK marker as its request.  A combiner never runs a marker: it stops
 *     at that node and hands the combiner role to its owner, so lock()
 *     returns holding the combiner role -- the lock.  Nobody else can run
 *     a critical section until that thread's unlock(), which hands the
 *     role to the next node's owner (or frees the lock) without running any
 *     queued request (change 6), so delegated requests are never run
 *     concurrently with a lock()/unlock() section.
 *
 * The waiting, the orphan slot (change 5) and the combining pass are the
 * shared skeleton (skeleton.h, with DSM-Synch and Oyama); this file keeps
 * the free bit, the node migration and the enqueue.
 *
 * Invariants: the tail always holds a node (tagged FREE iff no thread holds
 * the combiner role and none waits); exactly one thread holds the combiner
 * role while the tail is untagged; a node's request fields are written by its
 * owner before its next pointer (release) and read by the combiner after
 * (acquire); a node in the queue is referenced only by its owner and the
 * combiner; after DONE/COMBINE is delivered the combiner never touches the
 * node again (it read next before).
 * Orderings: the tail swap is acq_rel (release publishes the fresh node's
 * reset fields to the thread that swaps after us; acquire gives us the
 * previous tail's contents).  cur.next is stored with release after the
 * request, read with acquire by the combiner.  DONE and COMBINE go through
 * ll_wake (release) and the waiter's ll_wait_while returns after an acquire
 * load, so the owner sees cur.ret and every critical section run before the
 * hand-off.  The FREE CAS is release and the next swap is acquire, so the
 * next combiner also sees the previous pass.
 *
 *  4. Oversubscription (more threads than cores).  With yield or
 *     spin-then-park, handing the role to a waiter that is not running
 *     stalls every queued request until the scheduler runs it again (the
 *     thesis notes this weakness).  So when a pass reaches MAX_COMBINER_CS
 *     and the next waiter looks asleep -- parked (its word carries the
 *     waiting layer's LL_PARKED bit) or, with yield, not checked in for
 *     CCS_AWAKE_NS = 5 us (a yield-waiter stores the time before each
 *     sched_yield) -- the combiner runs that request instead and looks at
 *     the next one, up to MAX_COMBINER_CS more: a pass is at most
 *     2 x MAX_COMBINER_CS.  With spin the bound is exactly MAX_COMBINER_CS.
 *  5. Orphaned combiner role (yield only).  When a pass must stop (2 x
 *     MAX reached) and the next waiter still looks descheduled, the
 *     combiner sets that node ORPHAN and publishes it in the lock's orphan
 *     slot instead of handing the role to that one thread.  Every
 *     yield-waiter checks the slot each time it is scheduled; the first to
 *     CAS it to nil is the combiner, starting at the orphaned node (running
 *     its request and releasing its owner with DONE like any other).  The
 *     owner itself may be that first taker (then it simply combines from
 *     its own node); if it is not, it waits until its state leaves ORPHAN
 *     (DONE).  The state is stored before the slot, so a taker's DONE is
 *     never overwritten; the slot is empty whenever a combiner exists (only
 *     a combiner fills it, and it stops being one by doing so), so there is
 *     still exactly one combiner.  Lock markers are never orphaned (only
 *     their owner can take the role they ask for).
 *     Also, with spin-then-park, the futex_wake calls for served waiters
 *     that parked are made after the hand-over (deferred_wake.h), not on
 *     the lock's critical path.
 *
 *  6. Delegation semantics (docs/api.md, "Delegated critical sections").  A foreign
 *     critical section runs only on a thread where that cannot be told
 *     apart from running it on its owner's thread.  unlock() never runs one:
 *     its caller may hold other locks, including native pthread mutexes that
 *     liblock cannot see (hand-over-hand: lock L, lock P, unlock L), and a
 *     queued request that takes P would deadlock on it, or take a liblock
 *     lock the caller holds and see a spurious EDEADLK or release it.
 *     The condition-variable machinery releases the lock through unlock(),
 *     so no foreign critical section runs inside it either.  An execute()
 *     caller combines for others only if ll_may_run_foreign() (it holds no
 *     liblock lock and is not itself running a delegated critical section,
 *     e.g. a nested execute on another combining lock); otherwise it runs
 *     its own request and hands the role to the next node's owner, exactly
 *     as a combiner whose pass reached its bound does: nothing is dropped
 *     or reordered.  Under yield, only such a thread (or the node's owner)
 *     takes an orphaned role.  Progress: the role always goes to the owner
 *     of the next published node, which is waiting for it, and every owner
 *     can at least run its own request.
 *
 *  7. Uncontended unlock.  unlock() first CASes the tail from the node its
 *     lock() swapped in (cur.next) to that node|FREE, when a relaxed load
 *     finds the tail still there: the CAS combine() ends with when that node
 *     has no successor, without the pass's bookkeeping (the combining scope
 *     and the statistics: such a pass ran no request).  If the tail moved,
 *     somebody waits on that node (or is publishing into it), and combine()
 *     hands over as before.  cur.next was written by the lock() of this
 *     hold, on this thread or on one the program ordered before this unlock
 *     (a NORMAL mutex under the interposer), so the relaxed load sees it.
 *     The `seen` time (change 4) is stored only under yield, the only
 *     policy whose asleep() reads it.
 *
 * Parameter: MAX_COMBINER_CS, env LIBLOCK_CCSYNCH_MAX_COMBINER_CS (read at
 * liblock_init), default 3 x the number of online CPUs (the thesis's
 * setting, section 5.1).  A combiner hands over after at most that many
 * critical sections
 * (2x with yield/spin-then-park when the successors sleep, see 4.).
 * Policies: spin, yield, spin-then-park (each waiter waits on its own node's
 * word).  FIFO (requests run in queue order) and starvation-free (a combiner
 * serves at most 2 x MAX_COMBINER_CS requests).
 * Per-thread storage: every thread keeps a small stack of spare nodes
 * (normally one; one more per nesting level), freed at thread exit by an
 * ll_thread_on_exit hook.  The lock owns the node in its tail; destroy frees
 * it.
 * Condition variables: supported for threads that hold the lock through
 * liblock_lock (true ownership of the combiner role; the generic path in
 * src/core/cond.c releases with unlock, which hands over).  A
 * critical section run through execute() runs on whichever thread combines,
 * which does not own the lock in the API's sense: cond_wait from it returns
 * EPERM instead of putting the combiner to sleep.
 */
#include "skeleton.h"

#include <stdlib.h>

#define CCS_AWAKE_NS 5000
#define CCS_FREE ((uintptr_t)1)

struct ccs_node {
    struct ll_comb_node c;       /* first: the tail and next hold &c (skeleton.h) */
    struct ccs_node *spare_next; /* per-thread spare stack link */
} __attribute__((aligned(LL_CACHELINE)));

struct ccs_lock {
    LL_ALIGNED _Atomic uintptr_t tail; /* struct ccs_node * | CCS_FREE */
    LL_ALIGNED unsigned max_cs;        /* read-only after init */
    uint64_t awake_cycles;             /* "checked in recently": AWAKE_NS in cycles */
    _Atomic unsigned max_pass;         /* statistics: longest pass seen */
    _Atomic unsigned long passes;
    _Atomic(struct ccs_node *) holder; /* lock()/trylock() holder's node, for tests */
    _Atomic(void *) orphan;            /* yield: combiner role left to any taker (skeleton.h 2.) */
};

struct ccs_hold {
    struct ccs_node *cur;
};
_Static_assert(sizeof(struct ccs_hold) <= LL_NODE_BYTES, "cc-synch hold too large");

static __thread struct {
    struct ccs_node *spares;
    const liblock_t *combining; /* lock whose delegated CSs this thread is running */
    int hooked;
    struct ll_exit_hook hook;
} ccs_tls LL_TLS_IE;
LL_IDENT_SCOPE_WRAPPER(ccs_as_caller, ccs_tls.combining)

static void ccs_thread_exit(ll_thread_t *self, void *arg)
{
    (void)self;
    (void)arg;
    struct ccs_node *n = ccs_tls.spares;
    while (n) {
        struct ccs_node *nx = n->spare_next;
        free(n);
        n = nx;
    }
    ccs_tls.spares = NULL;
    ccs_tls.hooked = 0;
}

static LL_SLOW struct ccs_node *spare_new(void);

static inline struct ccs_node *spare_pop(void)
{
    struct ccs_node *n = ccs_tls.spares;
    if (LL_LIKELY(n != NULL)) {
        ccs_tls.spares = n->spare_next;
        return n;
    }
    return spare_new();
}

/* No spare: register the exit hook if needed, allocate one. */
static struct ccs_node *spare_new(void)
{
    if (!ccs_tls.hooked) {
        ll_thread_t *self = ll_self();
        if (!self)
            return NULL;
        ccs_tls.hook.fn = ccs_thread_exit;
        ccs_tls.hook.arg = NULL;
        ll_thread_on_exit(self, &ccs_tls.hook);
        ccs_tls.hooked = 1;
    }
    return ll_alloc_aligned(sizeof(struct ccs_node));
}

static void spare_push(struct ccs_node *n)
{
    n->spare_next = ccs_tls.spares;
    ccs_tls.spares = n;
}

static int ccs_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct ccs_lock *s = LL_STATE(l, struct ccs_lock);
    struct ccs_node *dummy = ll_alloc_aligned(sizeof *dummy);
    if (!dummy)
        return ENOMEM;
    long dflt = 3L * ll_ncpus();
    s->max_cs = (unsigned)ll_env_long("LIBLOCK_CCSYNCH_MAX_COMBINER_CS", dflt < 1 ? 1 : dflt, 1, 1L << 30);
    s->awake_cycles = ll_ns_to_cycles(CCS_AWAKE_NS);
    atomic_store_explicit(&s->tail, (uintptr_t)dummy | CCS_FREE, memory_order_release);
    return 0;
}

static int ccs_destroy(liblock_t *l)
{
    struct ccs_lock *s = LL_STATE(l, struct ccs_lock);
    uintptr_t t = atomic_load_explicit(&s->tail, memory_order_acquire);
    if (!(t & CCS_FREE))
        return EBUSY;
    free((void *)(t & ~CCS_FREE));
    atomic_store_explicit(&s->tail, 0, memory_order_relaxed);
    return 0;
}

static void combine(liblock_t *l, struct ccs_lock *s, struct ccs_node *start, int mode, int foreign_ok);

/* Under yield: serve an orphaned node taken over from the slot (change 5). */
static void serve_orphan(liblock_t *l, void *o)
{
    combine(l, LL_STATE(l, struct ccs_lock), o, LL_COMB_FOREIGN, 1);
}

/* Wait for DONE or COMBINE on our node (skeleton.h 2.): with yield, check
 * in before every yield so a combiner can tell we are being scheduled, and
 * take over an orphaned combiner role: our own node always; another
 * thread's only if foreign_ok (change 6). */
static LL_SLOW uint32_t wait_node(liblock_t *l, struct ccs_lock *s, struct ccs_node *n, int foreign_ok)
{
    return ll_comb_wait(l, &s->orphan, n, &n->c.state, &n->c.seen, foreign_ok, serve_orphan);
}

/* Combining pass starting at `start` (skeleton.h 3., LL_COMB_BY_NEXT: a
 * node's request is published by its next).  LL_COMB_OWN: start is the
 * combiner's own node with its pending request.  LL_COMB_OWN_DONE: the
 * combiner's own critical section already ran (unlock after lock): start
 * from its successor and count it as the first.  LL_COMB_FOREIGN: start is
 * an orphaned node taken over with yield (change 5): run it and release
 * its owner. */
static void combine(liblock_t *l, struct ccs_lock *s, struct ccs_node *start, int mode, int foreign_ok)
{
    struct ll_comb_pass p;
    ll_comb_queue_pass(l, &ccs_tls.combining, &p, &start->c, mode, foreign_ok ? s->max_cs : 1, foreign_ok,
                       &s->awake_cycles, LL_COMB_BY_NEXT, ccs_as_caller);
    ll_comb_note_pass(&s->max_pass, &s->passes, p.count);
    struct ll_comb_node *tmp = p.stop; /* not run; its owner waits on it */
    if (!p.published) {
        uintptr_t expect = (uintptr_t)tmp;
        if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, (uintptr_t)tmp | CCS_FREE,
                                                    memory_order_release, memory_order_relaxed)) {
            ll_wake_flush(&p.dw); /* queue empty: lock free */
            return;
        }
        /* somebody swapped tmp out and waits on it: hand over */
        ll_comb_queue_hand_over(l, &s->orphan, tmp, &p, 0, &s->awake_cycles);
        return;
    }
    /* tmp's owner waits; under yield, if it looks descheduled, leave the
     * role to whichever waiter runs first (change 5) */
    ll_comb_queue_hand_over(l, &s->orphan, tmp, &p, 1, &s->awake_cycles);
}

/* Enqueue with request (cs, arg); returns our node, and whether the lock was
 * free (we are the combiner without waiting).  NULL on ENOMEM. */
static inline __attribute__((always_inline)) struct ccs_node *enqueue(struct ccs_lock *s, void *(*cs)(void *), void *arg, int policy, int *was_free)
{
    struct ccs_node *n = spare_pop();
    if (LL_UNLIKELY(!n))
        return NULL;
    atomic_store_explicit(&n->c.next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->c.state, LL_COMB_WAIT, memory_order_relaxed);
    uintptr_t p = atomic_exchange_explicit(&s->tail, (uintptr_t)n, memory_order_acq_rel);
    struct ccs_node *cur = (struct ccs_node *)(p & ~CCS_FREE);
    cur->c.cs = cs;
    cur->c.arg = arg;
    cur->c.tp = ll_ident_self();
    if (policy == LIBLOCK_WAIT_YIELD) /* only asleep() under yield reads it */
        atomic_store_explicit(&cur->c.seen, ll_cycles(), memory_order_relaxed);
    atomic_store_explicit(&cur->c.next, &n->c, memory_order_release);
    *was_free = (p & CCS_FREE) != 0;
    return cur;
}

static void *ccs_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    struct ccs_lock *s = LL_STATE(l, struct ccs_lock);
    if (LL_UNLIKELY(ll_cs_held_by_caller(ccs_tls.combining, l))) {
        errno = EDEADLK;
        return NULL;
    }
    int was_free;
    struct ccs_node *cur = enqueue(s, cs, arg, ll_policy(l), &was_free);
    if (LL_UNLIKELY(!cur)) {
        errno = ENOMEM;
        return NULL;
    }
    int foreign_ok = ll_may_run_foreign(ll_self_tls);
    if (!was_free && wait_node(l, s, cur, foreign_ok) == LL_COMB_DONE) {
        void *r = cur->c.ret;
        spare_push(cur);
        return r;
    }
    combine(l, s, cur, LL_COMB_OWN, foreign_ok);
    void *r = cur->c.ret;
    spare_push(cur);
    return r;
}

static int ccs_lock(liblock_t *l, void *hold)
{
    struct ccs_lock *s = LL_STATE(l, struct ccs_lock);
    if (ccs_tls.combining == l)
        return EDEADLK; /* called from a delegated CS of this lock */
    int was_free;
    struct ccs_node *cur = enqueue(s, ll_comb_lock_marker, NULL, ll_policy(l), &was_free);
    if (LL_UNLIKELY(!cur))
        return ENOMEM;
    if (!was_free)
        wait_node(l, s, cur, 0); /* a marker is never run: COMBINE */
    ((struct ccs_hold *)hold)->cur = cur;
    atomic_store_explicit(&s->holder, cur, memory_order_relaxed);
    return 0;
}

static int ccs_trylock(liblock_t *l, void *hold)
{
    struct ccs_lock *s = LL_STATE(l, struct ccs_lock);
    if (ccs_tls.combining == l)
        return EBUSY;
    uintptr_t p = atomic_load_explicit(&s->tail, memory_order_relaxed);
    if (!(p & CCS_FREE))
        return EBUSY;
    struct ccs_node *n = spare_pop();
    if (!n)
        return ENOMEM;
    atomic_store_explicit(&n->c.next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->c.state, LL_COMB_WAIT, memory_order_relaxed);
    if (!atomic_compare_exchange_strong_explicit(&s->tail, &p, (uintptr_t)n, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
        spare_push(n);
        return EBUSY;
    }
    struct ccs_node *cur = (struct ccs_node *)(p & ~CCS_FREE);
    cur->c.cs = ll_comb_lock_marker;
    cur->c.arg = NULL;
    atomic_store_explicit(&cur->c.next, &n->c, memory_order_release);
    ((struct ccs_hold *)hold)->cur = cur;
    atomic_store_explicit(&s->holder, cur, memory_order_relaxed);
    return 0;
}

static int ccs_unlock(liblock_t *l, void *hold)
{
    struct ccs_lock *s = LL_STATE(l, struct ccs_lock);
    struct ccs_node *cur = ((struct ccs_hold *)hold)->cur;
    atomic_store_explicit(&s->holder, NULL, memory_order_relaxed);
    /* Nobody queued (change 7): the tail is still the node our lock() swapped
     * in, so free the lock with the CAS combine() would end with. */
    struct ll_comb_node *n = atomic_load_explicit(&cur->c.next, memory_order_relaxed);
    uintptr_t expect = (uintptr_t)n;
    if (LL_LIKELY(atomic_load_explicit(&s->tail, memory_order_relaxed) == expect) &&
        LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->tail, &expect, expect | CCS_FREE, memory_order_release,
                                                          memory_order_relaxed))) {
        spare_push(cur);
        return 0;
    }
    combine(l, s, cur, LL_COMB_OWN_DONE, 0); /* never runs others' requests (change 6) */
    spare_push(cur);
    return 0;
}

/* Condition variables: allowed for lock() holders, refused inside a
 * delegated critical section (see the header). */
static int ccs_cond_release(liblock_t *l) { return ll_cs_cond_release(ccs_tls.combining, l); }

static int ccs_cond_reacquire(liblock_t *l) { return ll_api_lock(l); }

/* Statistics (struct ll_ops .stats): max_pass, the longest combining pass
 * (critical sections run by one combiner before handing over or freeing
 * the lock); passes, their number; pending, read by the thread that holds
 * the lock through lock(): requests published (linked) behind it (-1 when
 * the lock is free). */
static long ccs_pending(const struct ccs_lock *s)
{
    struct ccs_node *h = atomic_load_explicit(&s->holder, memory_order_relaxed);
    if (!h)
        return -1;
    long n = 0;
    struct ll_comb_node *t = atomic_load_explicit(&h->c.next, memory_order_acquire);
    while (t) {
        struct ll_comb_node *nx = atomic_load_explicit(&t->next, memory_order_acquire);
        if (!nx)
            break;
        n++;
        t = nx;
    }
    return n;
}

static void ccs_stats(const liblock_t *l, struct ll_stats *o)
{
    struct ccs_lock *s = LL_STATE(l, struct ccs_lock);
    ll_stats_put(o, "max_pass", atomic_load_explicit(&s->max_pass, memory_order_relaxed));
    ll_stats_put(o, "passes", (int64_t)atomic_load_explicit(&s->passes, memory_order_relaxed));
    ll_stats_put(o, "pending", ccs_pending(s));
}

const struct ll_ops ll_ops_cc_synch = {
    .name = "cc-synch",
    .description = "CC-Synch combining lock: swap-based request queue, combiner hands over after MAX_COMBINER_CS",
    .source = "Fatourou and Kallimanis, PPoPP 2012; Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.8, Algorithm 7",
    .props = LIBLOCK_PROP_FIFO | LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND |
             LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "execute: the running combiner serves queued requests and runs in place of a waiter that has parked; lock/unlock: FIFO hand-over to the next queued thread, at most one wake-up per hand-off",
    .state_size = sizeof(struct ccs_lock),
    .node_size = sizeof(struct ccs_hold),
    .init = ccs_init,
    .destroy = ccs_destroy,
    .lock = ccs_lock,
    .trylock = ccs_trylock,
    .unlock = ccs_unlock,
    .execute = ccs_execute,
    .cond_release = ccs_cond_release,
    .cond_reacquire = ccs_cond_reacquire,
    .stats = ccs_stats,
};
