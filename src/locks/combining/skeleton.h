/*
 * skeleton.h - the parts the combining locks (cc-synch.c, dsm-synch.c and
 * oyama.c; the statistics also flat-combining.c) have in common, written
 * once.  Each algorithm file keeps what differs: where a request lives, how
 * it is published, how the lock is freed and who runs what.
 *
 * 1. Delegated-section bookkeeping, shared by every delegating algorithm
 *    (these, flat-combining, hybcomb, mp-server): ll_cs_enter,
 *    ll_cs_held_by_caller and ll_cs_cond_release in src/internal.h.
 *
 * 2. The request word and the orphaned role (cc-synch, dsm-synch, oyama).
 *    A waiter waits on its own word for LL_COMB_DONE (its request ran;
 *    ret is valid) or LL_COMB_ROLE (it now holds the combiner role, or the
 *    lock).  The value is delivered by ll_wake or ll_wake_deferred (a
 *    release store or swap) and read by ll_wait_while or the acquire load
 *    in ll_comb_wait, so the waiter sees every write made before the
 *    delivery (its result, every critical section run before a hand-over).
 *    Under yield a combiner that must hand the role to a waiter that looks
 *    descheduled leaves it instead (ll_comb_leave_orphan): the node's word
 *    becomes LL_COMB_ORPHAN (release), then the node goes into the lock's
 *    orphan slot (release).  The state is stored before the slot, so a
 *    taker that runs the node at once and delivers DONE is never
 *    overwritten.  A yield-waiter looks at the slot each time it runs
 *    (ll_comb_wait) and the first to CAS it to NULL (acq_rel: acquire pairs
 *    with the leaver's release, so the taker sees the node's request and
 *    every earlier critical section; release orders nothing more but keeps
 *    the slot's read-modify-writes one chain) is the combiner.  The slot is
 *    non-NULL only while no thread holds the role (only a combiner fills
 *    it and it stops being one by doing so), so there is still exactly one
 *    combiner.  The owner of the orphaned node takes it as its own role;
 *    another thread only if it may run foreign critical sections
 *    (ll_may_run_foreign), and then serves it through the algorithm's
 *    callback.  The check-in time `seen` is relaxed: it feeds only the
 *    ll_waiter_asleep heuristic (deferred_wake.h).
 *
 * 3. The request queue of cc-synch and dsm-synch (ll_comb_queue_pass,
 *    ll_comb_queue_hand_over).  Both keep a singly linked queue of
 *    struct ll_comb_node swapped in at a tail; the thread holding the
 *    combiner role walks it from its start node running each published
 *    request and delivering DONE (deferred, deferred_wake.h), and stops at
 *    a lock() marker (never run: its owner gets the role), at the first
 *    unpublished request, or after `max` requests -- or 2 x max when the
 *    next waiter looks asleep and the caller may run foreign sections.
 *    They differ in when a request counts as published: cc-synch writes
 *    its request into the node it takes over from the previous tail and
 *    publishes it by linking next (release) (LL_COMB_BY_NEXT: a node runs
 *    once its next is non-NULL, read with acquire before its fields);
 *    dsm-synch writes its request into its own node before the swap and
 *    publishes it by the predecessor's link (LL_COMB_BY_LINK: a node runs
 *    once it is reachable, the acquire load of the link having made its
 *    fields visible).  The pass reports the node it stopped at and whether
 *    that node's request was published; the algorithm then frees the lock
 *    (its own tail protocol) or hands the role to that node's owner through
 *    ll_comb_queue_hand_over (ROLE by ll_wake, or, under yield, the orphan
 *    slot if the owner looks descheduled), and finally makes the deferred
 *    futex wake-ups.  After the hand-over the combiner touches no node of
 *    the queue again (every next it needed was read before).
 *
 * 4. Pass statistics (cc-synch, dsm-synch, oyama, flat-combining): longest
 *    pass and number of passes, written only by the thread holding the role
 *    (or the lock), one at a time; relaxed because readers (tests) need no
 *    ordering and a racy maximum is fine.
 */
#ifndef LIBLOCK_COMBINING_SKELETON_H
#define LIBLOCK_COMBINING_SKELETON_H

#include "internal.h"
#include "locks/deferred_wake.h"
#include "platform/identity.h"

/* ---- 2. the request word and the orphaned role ---------------------------- */

enum { LL_COMB_WAIT = 1, LL_COMB_DONE = 2, LL_COMB_ROLE = 3, LL_COMB_ORPHAN = 4 };

/* Serve the orphaned node `orphan` of lock l (another thread's request). */
typedef void (*ll_comb_serve_fn)(liblock_t *l, void *orphan);

/* ll_comb_wait under yield: out of line, as the waits of the other
 * policies are, so that the lock paths stay small. */
static __attribute__((noinline, unused)) uint32_t
ll_comb_wait_yield(liblock_t *l, _Atomic(void *) *slot, void *mine, _Atomic uint32_t *state,
                   _Atomic uint64_t *seen, int foreign_ok, ll_comb_serve_fn serve)
{
    for (;;) {
        uint32_t v = atomic_load_explicit(state, memory_order_acquire) & ~LL_PARKED;
        if (v == LL_COMB_DONE || v == LL_COMB_ROLE)
            return v;
        void *o = atomic_load_explicit(slot, memory_order_relaxed);
        if (o && (o == mine || foreign_ok) &&
            atomic_compare_exchange_strong_explicit(slot, &o, NULL, memory_order_acq_rel, memory_order_relaxed)) {
            if (o == mine)
                return LL_COMB_ROLE; /* our own request is next: we hold the role */
            serve(l, o);
            continue;
        }
        atomic_store_explicit(seen, ll_cycles(), memory_order_relaxed);
        ll_yield();
    }
}

/* Wait on `state` (the caller's own node `mine`) for DONE or ROLE.  Under
 * yield, check in (`seen`) before every yield and take an orphaned role
 * from `slot`: our own node's always (returns ROLE), another's only if
 * foreign_ok (serve it, then keep waiting). */
static inline uint32_t ll_comb_wait(liblock_t *l, _Atomic(void *) *slot, void *mine, _Atomic uint32_t *state,
                                    _Atomic uint64_t *seen, int foreign_ok, ll_comb_serve_fn serve)
{
    int policy = ll_policy(l);
    if (policy != LIBLOCK_WAIT_YIELD)
        return ll_wait_while(state, LL_COMB_WAIT, policy);
    return ll_comb_wait_yield(l, slot, mine, state, seen, foreign_ok, serve);
}

/* Leave the role to whichever yield-waiter runs first: the node's word
 * before the slot (see 2.). */
static inline void ll_comb_leave_orphan(_Atomic uint32_t *state, _Atomic(void *) *slot, void *node)
{
    atomic_store_explicit(state, LL_COMB_ORPHAN, memory_order_release);
    atomic_store_explicit(slot, node, memory_order_release);
}

/* ---- 4. pass statistics ----------------------------------------------------- */

static inline void ll_comb_note_pass(_Atomic unsigned *max_pass, _Atomic unsigned long *passes, unsigned count)
{
    if (count > atomic_load_explicit(max_pass, memory_order_relaxed))
        atomic_store_explicit(max_pass, count, memory_order_relaxed);
    atomic_store_explicit(passes, atomic_load_explicit(passes, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* ---- 3. the request queue of cc-synch and dsm-synch -------------------------- */

struct ll_comb_node {
    _Atomic uint32_t state; /* LL_COMB_* (| LL_PARKED), its owner waits on it */
    _Atomic(struct ll_comb_node *) next;
    void *(*cs)(void *);
    void *arg;
    uintptr_t tp; /* the requester's identity (platform/identity.h), written with cs */
    void *ret;
    _Atomic uint64_t seen; /* yield policy: last time the waiter checked in (cycles) */
};

/* The request value that means "hand me the combiner role" (lock()).  Each
 * translation unit compares against its own copy's address. */
static inline void *ll_comb_lock_marker(void *arg) { return arg; }

/* Is the owner of n (waiting on it) unlikely to be running? */
static inline int ll_comb_asleep(struct ll_comb_node *n, const uint64_t *awake_cycles, int policy)
{
    return ll_waiter_asleep(&n->state, &n->seen, *awake_cycles, policy);
}

/* Where a pass starts.  OWN: the combiner's own node, request pending.
 * OWN_DONE: the combiner's own critical section already ran (unlock after
 * lock): count it and start with its successor.  FOREIGN: an orphaned node
 * taken over under yield: run it and release its owner. */
enum { LL_COMB_OWN = 0, LL_COMB_OWN_DONE = 1, LL_COMB_FOREIGN = 2 };
/* When a node's request is published (see 3.). */
enum { LL_COMB_BY_LINK = 0, LL_COMB_BY_NEXT = 1 };

struct ll_comb_pass {
    struct ll_comb_node *last; /* last node run (or start) */
    struct ll_comb_node *stop; /* first node not run (BY_LINK: NULL if none linked) */
    int published;             /* stop's request was published (and is not run) */
    unsigned count;            /* critical sections of this pass, own included */
    struct ll_deferred_wakes dw;
};

/* One combining pass over the queue from `start`, as a delegated section of
 * l (`running`: the algorithm's thread-local, see 1.; `wrap`: its
 * LL_IDENT_SCOPE_WRAPPER over the same thread-local, which runs another
 * thread's request with that thread's identity).  max: requests after
 * which to stop (2 x max while the next waiter looks asleep, if
 * foreign_ok); *awake_cycles: ll_waiter_asleep's bound, read only when
 * needed. */
static inline void ll_comb_queue_pass(liblock_t *l, const liblock_t **running, struct ll_comb_pass *p,
                                      struct ll_comb_node *start, int mode, unsigned max, int foreign_ok,
                                      const uint64_t *awake_cycles, int by_next, void *(*wrap)(void *))
{
    struct ll_cs_scope scope = ll_cs_enter(running, l);
    uintptr_t me = ll_ident_self();
    int policy = ll_policy(l);
    struct ll_comb_node *c = start, *last = start, *next = NULL;
    unsigned count = 0;
    p->dw.n = 0;
    if (mode == LL_COMB_OWN_DONE) {
        c = atomic_load_explicit(&start->next, memory_order_acquire); /* BY_NEXT: set by our lock() */
        count = 1;
    }
    for (;;) {
        if (by_next) {
            next = atomic_load_explicit(&c->next, memory_order_acquire);
            if (!next)
                break;
        } else if (!c) {
            break;
        }
        if (c != start && c->cs == ll_comb_lock_marker)
            break;
        if (count >= max && (!foreign_ok || count >= 2 * max || !ll_comb_asleep(c, awake_cycles, policy)))
            break;
        c->ret = ll_ident_run(c->tp, me, wrap, l, c->cs, c->arg, NULL);
        count++;
        if (c != start || mode == LL_COMB_FOREIGN)
            ll_wake_deferred(&p->dw, &c->state, LL_COMB_DONE, policy);
        last = c;
        c = by_next ? next : atomic_load_explicit(&c->next, memory_order_acquire);
    }
    ll_cs_leave(running, scope);
    p->last = last;
    p->stop = c;
    p->published = by_next ? next != NULL : c != NULL;
    p->count = count;
}

/* Hand the combiner role to n's owner (ROLE), or, if may_orphan, under
 * yield, when n is not a lock() marker and its owner looks descheduled,
 * leave it in `slot`; then make the pass's deferred wake-ups. */
static inline void ll_comb_queue_hand_over(liblock_t *l, _Atomic(void *) *slot, struct ll_comb_node *n,
                                           struct ll_comb_pass *p, int may_orphan, const uint64_t *awake_cycles)
{
    int policy = ll_policy(l);
    if (may_orphan && policy == LIBLOCK_WAIT_YIELD && n->cs != ll_comb_lock_marker &&
        ll_comb_asleep(n, awake_cycles, policy))
        ll_comb_leave_orphan(&n->state, slot, n);
    else
        ll_wake(&n->state, LL_COMB_ROLE, policy);
    ll_wake_flush(&p->dw);
}

#endif
