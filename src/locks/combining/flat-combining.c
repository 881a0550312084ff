/*
 * flat-combining - Flat Combining used as a lock (Hendler, Incze, Shavit
 * and Tzafrir, SPAA 2010).
 *
 * Source: D. Hendler, I. Incze, N. Shavit and M. Tzafrir, "Flat Combining
 * and the Synchronization-Parallelism Tradeoff", SPAA 2010; as given in
 * J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 3.7,
 * Algorithm 6:
 * Each thread owns one publication record per lock {req, ret, active, age,
 * next}; the lock is a publication list (push at the head with CAS), a
 * combiner lock word and a pass counter.
 *   execute(req): rec.req = req; loop { if !rec.active: activate and push
 *     rec; wait while (combiner lock taken and rec.req != nil and
 *     rec.active); if rec.req == nil: return rec.ret (a combiner ran it);
 *     if CAS(combiner lock, 0, 1): become combiner }.
 *   combiner: (re)activate rec if needed; count++; walk the list from the
 *     head running every pending request (req = nil, age = count after
 *     each); every CLEANUP_FREQUENCY passes unlink the records (never the
 *     head) whose age + CLEANUP_OLD_THRESHOLD < count and mark them inactive;
 *     release the combiner lock.
 * A combiner makes one pass over the list as it was when it started, so it
 * never starves (requests pushed meanwhile wait for the next combiner).
 *
 * liblock_lock/liblock_unlock: lock() takes the combiner lock itself
 * (test-and-test-and-set on the lock word, waiting per policy; under
 * spin-then-park it sleeps on barge_sleep.h's mark, fc_park.h); pending
 * requests then wait, exactly as they wait for a combiner.  unlock()
 * releases the combiner lock without a combining pass; a waiting requester
 * then takes it and combines.  So the combiner lock is the lock: delegated
 * requests only run under it.  trylock is CAS(lock word, 0, 1).
 *
 * Delegation semantics (docs/api.md, "Delegated critical sections", as in cc-synch.c change
 * 6): unlock() never runs another thread's request, because its caller may
 * hold locks liblock cannot see (hand-over-hand with a native pthread
 * mutex); an execute() caller that wins the combiner lock makes a pass only
 * if ll_may_run_foreign() (it holds no liblock lock and is not itself inside
 * a delegated critical section), and otherwise runs its own request alone
 * and releases: the pending requests stay published for the next combiner,
 * and each of their owners competes for the combiner lock itself.
 *
 * Invariants: only the holder of the combiner lock runs requests, walks the
 * list past its head, writes next of linked records or deactivates them;
 * a record is pushed only by its owner and only while inactive (so it is in
 * the list at most once); the head is never unlinked (pushers CAS it).
 * A record whose req is non-nil is either linked (active) or its owner will
 * see active == false and push it again.
 * Orderings: the owner stores req with release after arg; the combiner
 * loads req with acquire, runs it, stores ret and then req = nil with
 * release; the owner loads req with acquire before reading ret.  The push
 * CAS is release (publishes rec.next) and the combiner's head load is
 * acquire.  Deactivation (active = false) is a release store after the
 * combiner's last access to the record's next, so an owner that sees it
 * (acquire) may rewrite next.  The combiner lock is CAS acquire / store
 * release, so consecutive combiners (and lock() holders) see each other's
 * critical sections and list edits.
 *
 * Parameters (env, read at liblock_init): LIBLOCK_FC_CLEANUP_FREQUENCY
 * (default 100), LIBLOCK_FC_CLEANUP_OLD_THRESHOLD (default 10), the values
 * of the authors' code that the thesis used (its section 5.1);
 * LIBLOCK_FC_ASYM (default 1; fc_park.h).
 * Policies: spin, yield and spin-then-park (the default: docs/api.md,
 * waiting defaults).  Spin-then-park is this lock's own protocol, in
 * src/locks/combining/fc_park.h with its argument (who sleeps where, who wakes
 * them, and the asymmetric barrier that keeps locked instructions off
 * the hot path where membarrier(2) exists).
 * Guarantees: neither FIFO (a pass runs the list head to tail, and the list
 * is in push order, newest first) nor starvation-free: lock() is a
 * test-and-test-and-set loop with no queue, and a published request is run
 * by the next combiner that makes a pass, but combiners that may not run
 * foreign requests make none, so a requester may lose the combiner lock
 * indefinitely to lock() callers.
 * Memory: records are per thread and per lock (src/locks/combining/thread_records.h):
 * orphaned at thread exit and adopted by the next thread, freed at destroy.
 * Condition variables: supported for liblock_lock holders (generic path);
 * cond_wait from inside a critical section run through execute() returns
 * EPERM (it may be running on the combiner, which must not sleep).
 */
#include "thread_records.h"
#include "skeleton.h"
#include "barge_sleep.h"

struct fc_rec {
    struct ll_trec h;
    _Atomic(void *(*)(void *)) req;
    void *arg;
    uintptr_t tp; /* the owner's identity (platform/identity.h), written with arg */
    void *ret;
    _Atomic int active;
    unsigned age;
    _Atomic(struct fc_rec *) next;
    _Atomic uint32_t wake;     /* spin-then-park: FCW_* | LL_PARKED, the owner sleeps on it */
    _Atomic uint32_t sleeping; /* spin-then-park: the owner is (about to be) parked */
} __attribute__((aligned(LL_CACHELINE)));

/* rec.wake values (spin-then-park).  The owner sets WAITING before it
 * publishes a request; anyone who changes what the owner waits for
 * replaces it (exchange or CAS) and wakes the owner if LL_PARKED was set. */
enum { FCW_WAITING = 1, FCW_DONE = 2, FCW_RETRY = 3 };

struct fc_lock {
    LL_ALIGNED _Atomic(struct fc_rec *) head;
    LL_ALIGNED _Atomic uint32_t lock_word;
    _Atomic uint32_t lock_sym;     /* asym: releases swap (0: store); fc_park.h, "Asymmetric" */
    _Atomic unsigned lock_waiters; /* lock() callers waiting, for destroy's EBUSY only: relaxed, since
                                      destroy racing with a lock() in progress is undefined anyway */
    _Atomic unsigned sleepers;     /* spin-then-park requesters parked or about to park */
    _Atomic unsigned long parks;    /* futex waits by requesters and lock() callers (tests) */
    int park;                      /* policy is spin-then-park: completions wake owners */
    int asym;                      /* park, with the asymmetric barrier (fc_park.h, "Asymmetric") */
    uint64_t yield_cycles;         /* spin-then-park: FC_YIELD_NS, in cycles */
    unsigned count; /* combiner only */
    unsigned freq, old_threshold;
    _Atomic unsigned max_pass;
    _Atomic unsigned long passes;
    struct ll_trec_list recs;
    LL_ALIGNED struct barge_sleep ls; /* spin-then-park: where lock() callers sleep (fc_park.h) */
};

enum { FC_FREE = 0, FC_LOCKED = 1 }; /* lock_word */
#define FC_YIELD_NS 1000000 /* spin-then-park: yield this long before parking (fc_spin_step) */

static __thread struct ll_trec_tls fc_tls LL_TLS_IE;
static __thread const liblock_t *fc_combining LL_TLS_IE;
LL_IDENT_SCOPE_WRAPPER(fc_as_caller, fc_combining)

static struct ll_trec *fc_alloc_rec(void) { return ll_alloc_aligned(sizeof(struct fc_rec)); }

#include "fc_park.h"

static int fc_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct fc_lock *s = LL_STATE(l, struct fc_lock);
    s->freq = (unsigned)ll_env_long("LIBLOCK_FC_CLEANUP_FREQUENCY", 100, 1, 1L << 30);
    s->old_threshold = (unsigned)ll_env_long("LIBLOCK_FC_CLEANUP_OLD_THRESHOLD", 10, 0, 1L << 30);
    ll_trec_list_init(&s->recs);
    atomic_store_explicit(&s->head, NULL, memory_order_relaxed);
    s->park = ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK;
    s->asym = s->park && ll_heavy_barrier_ok() && ll_env_long("LIBLOCK_FC_ASYM", 1, 0, 1);
    s->yield_cycles = ll_ns_to_cycles(FC_YIELD_NS);
    atomic_store_explicit(&s->lock_word, 0, memory_order_release);
    return 0;
}

/* EBUSY while held, while a lock() caller waits, or while any thread has a
 * published request (every record, linked or not, is on recs). */
static int fc_destroy(liblock_t *l)
{
    struct fc_lock *s = LL_STATE(l, struct fc_lock);
    if (atomic_load_explicit(&s->lock_word, memory_order_acquire) ||
        atomic_load_explicit(&s->lock_waiters, memory_order_acquire))
        return EBUSY;
    for (struct ll_trec *t = atomic_load_explicit(&s->recs.head, memory_order_acquire); t; t = t->all_next)
        if (atomic_load_explicit(&((struct fc_rec *)t)->req, memory_order_acquire))
            return EBUSY;
    ll_trec_list_destroy(&s->recs);
    atomic_store_explicit(&s->head, NULL, memory_order_relaxed);
    return 0;
}

static void push(struct fc_lock *s, struct fc_rec *r)
{
    atomic_store_explicit(&r->active, 1, memory_order_relaxed);
    struct fc_rec *sup = atomic_load_explicit(&s->head, memory_order_relaxed);
    do
        atomic_store_explicit(&r->next, sup, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&s->head, &sup, r, memory_order_release, memory_order_relaxed));
}

/* One combining pass; the caller holds the combiner lock.  Owners to wake
 * (spin-then-park) are collected in dw, for after the release. */
static void combine(liblock_t *l, struct fc_lock *s, unsigned own, struct ll_deferred_wakes *dw)
{
    struct ll_cs_scope scope = ll_cs_enter(&fc_combining, l);
    unsigned local = ++s->count, served = own;
    uintptr_t me = ll_ident_self();
    struct fc_rec *told[FC_TELL_MAX];
    unsigned ntold = 0;
    for (struct fc_rec *cur = atomic_load_explicit(&s->head, memory_order_acquire); cur;
         cur = atomic_load_explicit(&cur->next, memory_order_acquire)) {
        void *(*req)(void *) = atomic_load_explicit(&cur->req, memory_order_acquire);
        if (req) {
            cur->ret = ll_ident_run(cur->tp, me, fc_as_caller, l, req, cur->arg, NULL);
            cur->age = local;
            served++;
            atomic_store_explicit(&cur->req, NULL, memory_order_release);
            if (s->asym) {
                if (ntold == FC_TELL_MAX) {
                    tell_served(told, ntold, dw);
                    ntold = 0;
                }
                told[ntold++] = cur;
            } else if (s->park) {
                defer_wake(dw, tell_owner(cur, FCW_DONE));
            }
        }
    }
    tell_served(told, ntold, dw);
    if (local % s->freq == 0) {
        struct fc_rec *prev = atomic_load_explicit(&s->head, memory_order_acquire);
        struct fc_rec *cur = prev ? atomic_load_explicit(&prev->next, memory_order_acquire) : NULL;
        while (cur) {
            if (cur->age + s->old_threshold < local) {
                atomic_store_explicit(&prev->next, atomic_load_explicit(&cur->next, memory_order_acquire),
                                      memory_order_relaxed);
                atomic_store_explicit(&cur->active, 0, memory_order_release);
                if (s->park)
                    defer_wake(dw, tell_owner(cur, FCW_RETRY));
            } else {
                prev = cur;
            }
            cur = atomic_load_explicit(&prev->next, memory_order_acquire);
        }
    }
    ll_cs_leave(&fc_combining, scope);
    ll_comb_note_pass(&s->max_pass, &s->passes, served);
}

static void *fc_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    struct fc_lock *s = LL_STATE(l, struct fc_lock);
    if (LL_UNLIKELY(ll_cs_held_by_caller(fc_combining, l))) {
        errno = EDEADLK;
        return NULL;
    }
    struct fc_rec *r = (struct fc_rec *)ll_trec_lookup(&fc_tls, &s->recs, fc_alloc_rec);
    if (LL_UNLIKELY(!r)) {
        errno = ENOMEM;
        return NULL;
    }
    int policy = ll_policy(l);
    r->arg = arg;
    r->tp = ll_ident_self();
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK)
        atomic_store_explicit(&r->wake, FCW_WAITING, memory_order_relaxed); /* published by req's release */
    atomic_store_explicit(&r->req, cs, memory_order_release);
    for (;;) {
        if (!atomic_load_explicit(&r->active, memory_order_acquire))
            push(s, r);
        if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
            wait_request_stp(s, r);
        } else {
            while (atomic_load_explicit(&s->lock_word, memory_order_relaxed) &&
                   atomic_load_explicit(&r->req, memory_order_relaxed) &&
                   atomic_load_explicit(&r->active, memory_order_relaxed))
                ll_wait_step(policy);
        }
        if (!atomic_load_explicit(&r->req, memory_order_acquire))
            return r->ret;
        uint32_t expect = FC_FREE;
        if (atomic_compare_exchange_strong_explicit(&s->lock_word, &expect, FC_LOCKED, memory_order_acquire,
                                                    memory_order_relaxed))
            break;
    }
    struct ll_deferred_wakes dw;
    dw.n = 0;
    if (ll_may_run_foreign(ll_self_tls)) {
        if (!atomic_load_explicit(&r->active, memory_order_acquire))
            push(s, r);
        combine(l, s, 0, &dw);
    } else {
        /* We may not run others' requests here (docs/api.md, "Delegated
         * critical sections"): run ours alone and leave the rest to the next
         * combiner.  Our record stays linked (or inactive) with req nil. */
        struct ll_cs_scope scope = ll_cs_enter(&fc_combining, l);
        r->ret = cs(arg);
        ll_cs_leave(&fc_combining, scope);
        atomic_store_explicit(&r->req, NULL, memory_order_relaxed);
    }
    release(s);
    ll_wake_flush(&dw);
    return r->ret;
}

static LL_SLOW int fc_lock_wait(struct fc_lock *s, int policy);

static int fc_lock(liblock_t *l, void *hold)
{
    (void)hold;
    struct fc_lock *s = LL_STATE(l, struct fc_lock);
    if (fc_combining == l)
        return EDEADLK;
    uint32_t expect = FC_FREE;
    if (LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->lock_word, &expect, FC_LOCKED, memory_order_acquire,
                                                          memory_order_relaxed)))
        return 0;
    return fc_lock_wait(s, ll_policy(l));
}

/* The lock word was not free. */
static int fc_lock_wait(struct fc_lock *s, int policy)
{
    uint32_t expect;
    atomic_fetch_add_explicit(&s->lock_waiters, 1, memory_order_relaxed); /* for destroy only */
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        lock_stp(s);
    } else {
        for (;;) {
            while (atomic_load_explicit(&s->lock_word, memory_order_relaxed))
                ll_wait_step(policy);
            expect = FC_FREE;
            if (atomic_compare_exchange_weak_explicit(&s->lock_word, &expect, FC_LOCKED, memory_order_acquire,
                                                      memory_order_relaxed))
                break;
        }
    }
    atomic_fetch_sub_explicit(&s->lock_waiters, 1, memory_order_relaxed);
    return 0;
}

static int fc_trylock(liblock_t *l, void *hold)
{
    (void)hold;
    struct fc_lock *s = LL_STATE(l, struct fc_lock);
    uint32_t expect = FC_FREE;
    return atomic_compare_exchange_strong_explicit(&s->lock_word, &expect, FC_LOCKED, memory_order_acquire,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

/* Releases without a combining pass: the caller may hold locks liblock
 * cannot see (see the header); pending requesters take the lock word. */
static int fc_unlock(liblock_t *l, void *hold)
{
    (void)hold;
    release(LL_STATE(l, struct fc_lock));
    return 0;
}

static int fc_cond_release(liblock_t *l) { return ll_cs_cond_release(fc_combining, l); }

static int fc_cond_reacquire(liblock_t *l) { return ll_api_lock(l); }

static int fc_thread_register(liblock_t *l)
{
    struct fc_lock *s = LL_STATE(l, struct fc_lock);
    return ll_trec_lookup(&fc_tls, &s->recs, fc_alloc_rec) ? 0 : ENOMEM;
}

/* Statistics (struct ll_ops .stats): max_pass, most critical sections run
 * in one pass; passes, their number; records, the publication records the
 * lock ever allocated; parks, futex waits so far; asym, whether the lock
 * uses the asymmetric barrier (see the header); pending, read by the
 * lock() holder: linked records with a pending request. */
static void fc_stats(const liblock_t *l, struct ll_stats *o)
{
    struct fc_lock *s = LL_STATE(l, struct fc_lock);
    long recs = 0, pending = 0;
    for (struct ll_trec *r = atomic_load_explicit(&s->recs.head, memory_order_acquire); r; r = r->all_next)
        recs++;
    for (struct fc_rec *r = atomic_load_explicit(&s->head, memory_order_acquire); r;
         r = atomic_load_explicit(&r->next, memory_order_acquire))
        if (atomic_load_explicit(&r->req, memory_order_acquire))
            pending++;
    ll_stats_put(o, "max_pass", atomic_load_explicit(&s->max_pass, memory_order_relaxed));
    ll_stats_put(o, "passes", (int64_t)atomic_load_explicit(&s->passes, memory_order_relaxed));
    ll_stats_put(o, "records", recs);
    ll_stats_put(o, "parks", (int64_t)atomic_load_explicit(&s->parks, memory_order_relaxed));
    ll_stats_put(o, "asym", s->asym);
    ll_stats_put(o, "pending", pending);
}

const struct ll_ops ll_ops_flat_combining = {
    .name = "flat-combining",
    .description = "Flat Combining: publication list of per-thread records, one combiner at a time",
    .source = "Hendler, Incze, Shavit and Tzafrir, SPAA 2010; Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 3.7, Algorithm 6",
    .props = LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "requesters pause, then yield up to 1 ms, then sleep on their own record; the combiner wakes exactly those it served; lock() callers spin for the spin budget (not while others sleep), then sleep until a release wakes one, as with glibc",
    .state_size = sizeof(struct fc_lock),
    .node_size = 0,
    .init = fc_init,
    .destroy = fc_destroy,
    .lock = fc_lock,
    .trylock = fc_trylock,
    .unlock = fc_unlock,
    .execute = fc_execute,
    .cond_release = fc_cond_release,
    .cond_reacquire = fc_cond_reacquire,
    .thread_register = fc_thread_register,
    .stats = fc_stats,
};
