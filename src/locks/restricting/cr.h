/*
 * cr.h - helpers shared by the concurrency-restricting (Malthusian) locks
 * mcscr, mcscrn, lifocr and loiter (D. Dice, "Malthusian Locks", EuroSys
 * 2017; section numbers in these files are those of the paper's extended
 * version, arXiv:1511.06035).
 *
 *  - struct cr_node / struct cr_list: the MCS-style queue node these locks
 *    use, and an owner-only doubly linked list of nodes (the passive set, or
 *    MCSCRN's remote list).  head = most recently culled, tail = eldest.
 *    Every list operation is O(1) and touches no shared atomics: the lists
 *    are protected by the lock itself (only the owner edits them), so the
 *    ownership hand-off (release/acquire through the waiting layer, or the
 *    release CAS that frees the lock and the next acquirer's acquire swap)
 *    orders one owner's list edits before the next owner's.
 *  - the fairness Bernoulli trial: probability LIBLOCK_CR_FAIRNESS
 *    (default 0.001, range [0, 1]) read when a lock is initialised, drawn on
 *    the per-thread xorshift generator ll_rand(ll_self()).
 *  - the names of the family's statistics (struct ll_ops .stats), for tests
 *    and for the fairness instrumentation.  Counters are written only by the
 *    lock owner; readers load them without synchronisation, so they are
 *    exact only once the lock is quiescent.
 */
#ifndef LIBLOCK_LOCKS_CR_H
#define LIBLOCK_LOCKS_CR_H

#include "internal.h"
#include "platform/prefetch.h"

struct cr_node {
    _Atomic(struct cr_node *) next; /* MCS link (written by the next arrival, or by the owner when grafting) */
    _Atomic uint32_t locked;        /* waiting word: 1 = wait, 0 = granted (bit 31 = policy) */
    union {                         /* announce words of the fast hand-over (src/core/fastwake.c): */
        _Atomic uint32_t succ_parked; /* mcscr, mcscrn: the waiter that linked itself behind this node parks */
        _Atomic uint32_t self_parked; /* lifocr: this node's own waiter parks (lifocr.c, "Fast hand-over") */
    };
    uint32_t relinked;              /* an owner rewrote this node's next (fast hand-over: grant with a swap) */
    int numa;                       /* mcscrn: NUMA node of the waiter when it arrived */
    unsigned takeovers;             /* mcscr: take-overs of this lock() call's pending grants */
    _Atomic int cpu;                /* CPU the thread arrived on (cr_arrive, cr_trylock, lifocr_lock): a hint, relaxed */
    _Atomic int32_t tid;            /* preempt-aware: this node's thread (cr_arrive, cr_trylock) */
    _Atomic int32_t behind;         /* preempt-aware: the predecessor's tid at arrival ("Preempt-aware" below) */
    struct cr_node *ps_prev, *ps_next; /* list links, owner-only */
    struct cr_node *seen_succ, *seen_ss; /* mcscr, mcscrn: the chain behind this node when it got the lock (cr_note_chain), owner-only */
};
_Static_assert(sizeof(struct cr_node) <= LL_NODE_BYTES, "cr node too large");

struct cr_list {
    struct cr_node *head, *tail;
    unsigned count;
};

static inline void cr_push_head(struct cr_list *L, struct cr_node *n)
{
    atomic_store_explicit(&n->behind, 0, memory_order_relaxed); /* culled: "Preempt-aware" */
    n->ps_prev = NULL;
    n->ps_next = L->head;
    if (L->head)
        L->head->ps_prev = n;
    else
        L->tail = n;
    L->head = n;
    L->count++;
}

static inline void cr_push_tail(struct cr_list *L, struct cr_node *n)
{
    atomic_store_explicit(&n->behind, 0, memory_order_relaxed); /* culled: "Preempt-aware" */
    n->ps_next = NULL;
    n->ps_prev = L->tail;
    if (L->tail)
        L->tail->ps_next = n;
    else
        L->head = n;
    L->tail = n;
    L->count++;
}

static inline void cr_remove(struct cr_list *L, struct cr_node *n)
{
    if (n->ps_prev)
        n->ps_prev->ps_next = n->ps_next;
    else
        L->head = n->ps_next;
    if (n->ps_next)
        n->ps_next->ps_prev = n->ps_prev;
    else
        L->tail = n->ps_prev;
    n->ps_prev = n->ps_next = NULL;
    L->count--;
}

static inline struct cr_node *cr_pop_head(struct cr_list *L)
{
    struct cr_node *n = L->head;
    if (n)
        cr_remove(L, n);
    return n;
}

static inline struct cr_node *cr_pop_tail(struct cr_list *L)
{
    struct cr_node *n = L->tail;
    if (n)
        cr_remove(L, n);
    return n;
}

/* Bernoulli trial with probability p: always = (p >= 1), else succeed when a
 * 64-bit xorshift draw falls below p * 2^64. */
struct cr_trial {
    uint64_t threshold;
    bool always;
};

static inline struct cr_trial cr_trial_make(double p)
{
    struct cr_trial t;
    t.always = p >= 1.0;
    t.threshold = t.always ? 0 : (uint64_t)(p * 18446744073709551616.0);
    return t;
}

static inline struct cr_trial cr_trial_from_env(void)
{
    return cr_trial_make(ll_env_double("LIBLOCK_CR_FAIRNESS", 0.001, 0.0, 1.0));
}

static inline bool cr_trial_draw(const struct cr_trial *t)
{
    if (t->always)
        return true;
    if (t->threshold == 0)
        return false;
    ll_thread_t *self = ll_self();
    return self ? ll_rand(self) < t->threshold : false;
}

/* The short wait of an unlocker for an arrival that has swapped the tail but
 * not yet linked itself: that thread is running, so never park. */
static inline void cr_link_wait_step(int policy)
{
    ll_wait_step(policy == LIBLOCK_WAIT_YIELD ? LIBLOCK_WAIT_YIELD : LIBLOCK_WAIT_SPIN);
}

/* ---- the MCS chain shared by mcscr and mcscrn ------------------------------
 * tail is the lock's MCS tail.  Orderings are MCS's (argued in mcs.c): the
 * tail swap is acq_rel (publishes the initialised node, sees the
 * predecessor's), pred->next is a release store paired with the owner's
 * acquire load of next, the grant goes through the waiting layer
 * (release/acquire), and freeing the lock is a release CAS on the tail. */

/* Waiting-word values besides 1 (wait) and 0 (granted), and cr_arrive's
 * extra return value.
 *
 * Pending grants (mcscr's reprovisioning; not in the paper).  On a
 * deficit the owner makes a passive node h the tail and stores CR_PENDING in
 * h's word instead of 0: h holds the lock, but only until it claims it.
 * Either h claims it (CAS PENDING -> 0 when it sees the value), or the first
 * arrival A that finds h as its predecessor takes it over (CAS PENDING ->
 * RETRY) before linking behind h: A then owns the lock, h's node is on no
 * list and no chain (A never linked to it, and A's swap made A the tail), and
 * h, when it runs, sees RETRY and arrives again as a new arrival.  Exactly
 * one of the two CASes succeeds.  The lock is never free (the tail is h, then
 * A), so reprovisioning stays work conserving, but a running arrival no
 * longer waits for a parked passive thread's wake-up.
 *  - Safety of A's access to h: A reads and CASes h's word after its tail
 *    swap returned h and before it links h.next.  h cannot finish an unlock
 *    (and reuse its node) before that link: the tail is no longer h, so h's
 *    unlock waits for h.next.  If h has claimed the lock, A's CAS fails and A
 *    links and waits as in MCS.
 *  - Orderings: the owner's grant (ll_wake) is a release swap of PENDING;
 *    h's claim and A's take-over are acquire CASes that read it, so either
 *    new owner sees the critical section and the owner-only state (passive
 *    set, counters) of the previous owner.  PENDING never carries the parked
 *    bit: the waiting layer sets it only on the value 1, and the grant's swap
 *    cleared it, so plain CASes on PENDING are exact.  A's CAS to RETRY needs
 *    no wake-up: the grant already woke h if it slept, and h never parks on
 *    PENDING or RETRY.
 *  - Fairness: h arrives again counting one more take-over in its node
 *    (`takeovers`, reset at the start of each lock() call; written by h's
 *    thread before its tail swap, read by an owner only after an acquire
 *    load of a link naming the node).  The owner does not cull a node that
 *    has been taken over CR_MAX_TAKEOVERS times: that lock() call then
 *    reaches the lock through the short MCS chain.  So a call is taken over
 *    at most CR_MAX_TAKEOVERS times, each time re-entering the young end of
 *    the passive set -- without the bound a thread could cycle culled ->
 *    reprovisioned -> taken over where the eldest-first fairness trial never
 *    finds it.  The alternatives are worse: exempting a node from culling
 *    after its first take-over lets every take-over add a thread to the
 *    circulating set, which then grows towards all the threads (what
 *    concurrency restriction exists to prevent); granting a taken-over node
 *    outright when it is reprovisioned again brings back the wake-up stalls
 *    that pending grants avoid.  A small bound keeps both the throughput
 *    and the small working set; a bound of 1 takes over too rarely to hide
 *    the wake-ups. */
#define CR_MAX_TAKEOVERS 8u
#define CR_RETRY 2u   /* word: your pending grant was taken over; arrive again */
#define CR_PENDING 3u /* word: you hold the lock unless an arrival takes it over first */
#define CR_STOLE 4u   /* cr_arrive's result: took the lock over from a pending grantee */

/* Same-CPU waiters park at once (not in the paper).
 * Under spin-then-park a waiter spins for about a cross-CPU wake-up before
 * it parks (wait.c), on the premise that the thread it waits for runs on
 * another CPU.  When that thread is on the waiter's own CPU, it is not
 * running (the waiter is), and it cannot run before the waiter leaves the
 * CPU: the spin only delays it, by the whole budget.  This is what
 * oversubscription does to a lock that hands over directly: the unlocker
 * grants the lock to a waiter of its own CPU, comes back for the lock and
 * queues behind it.  Each such hand-off then costs the waiter's whole spin
 * budget before the holder can run; with the rule it costs one context
 * switch.  The
 * CPU of a node is recorded when its thread arrives (ll_current_cpu:
 * sched_getcpu, which glibc reads from the thread's rseq area, a few
 * cycles) and is only a hint:
 * a thread migrated since makes the rule park where spinning would have
 * done, or spin where parking at once would have been right. */

/* Preempt-aware (src/core/wait.c, "Preemption-aware waiting"; mcscr and
 * mcscrn).  A waiter's spin ends when the thread of its predecessor at
 * arrival is preempted; it never goes on past the budget (extend false:
 * the predecessor is not known to hold the lock, and a Malthusian lock
 * relies on its surplus waiters sleeping).  The
 * tid is written before the tail swap that publishes the node, and the
 * arrival copies its predecessor's into its own node before it links, as
 * it reads pred->cpu.  The predecessor is only a hint of who hands over
 * next: an owner that grafts nodes ahead changes who does, and a wrong
 * hint costs an early sleep (woken by the grant, as any sleeper) or a spin
 * bounded by the cap.  A culled waiter may wait for many critical
 * sections while the owner it was behind keeps running (a Malthusian lock
 * restricts the lock to a few running threads on purpose), so a push onto
 * a list clears its `behind`: its thread falls back to the budget rule and
 * sleeps, as under spin-then-park (the waiter reads the field at its next
 * check; relaxed, a hint as the rest). */
static inline void cr_note_tid(struct cr_node *n) { ll_note_self_tid(&n->tid); }

/* One arrival: enqueue n and wait for the lock.  take_over: whether this
 * lock grants pending (mcscr) so that an arrival may take a pending grant
 * over.  Returns 0 when n holds the lock, CR_STOLE when n holds it by taking
 * over a pending grant (the caller, now the owner, may count it), CR_RETRY
 * when n's own pending grant was taken over (its node is then in no list
 * and on no chain: arrive again). */
static inline uint32_t cr_arrive(_Atomic(struct cr_node *) *tail, struct cr_node *n, int policy, bool take_over,
                                 bool aware)
{
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, 1, memory_order_relaxed);
    atomic_store_explicit(&n->succ_parked, 0, memory_order_relaxed);
    n->relinked = 0;
    int cpu = ll_current_cpu();
    atomic_store_explicit(&n->cpu, cpu, memory_order_relaxed);
    if (aware)
        cr_note_tid(n);
    struct cr_node *pred = atomic_exchange_explicit(tail, n, memory_order_acq_rel);
    if (!pred)
        return 0;
    /* We read pred's line and then link into it: take it exclusive at once
     * (src/platform/prefetch.h), so the read and the link store cost one
     * transfer of the line, not a shared fetch and then an upgrade. */
    ll_prefetchw(pred);
    /* Behind a thread of our own CPU, park at once ("Same-CPU waiters"
     * above).  pred's field is read before we link, so pred cannot have
     * re-armed its node yet. */
    int wpol = ll_policy_behind(policy, atomic_load_explicit(&pred->cpu, memory_order_relaxed), cpu);
    const _Atomic int32_t *who = NULL;
    if (aware) {
        atomic_store_explicit(&n->behind, atomic_load_explicit(&pred->tid, memory_order_relaxed),
                              memory_order_relaxed);
        who = &n->behind;
    }
    if (take_over && atomic_load_explicit(&pred->locked, memory_order_relaxed) == CR_PENDING) {
        uint32_t expect = CR_PENDING;
        if (atomic_compare_exchange_strong_explicit(&pred->locked, &expect, CR_RETRY, memory_order_acquire,
                                                    memory_order_relaxed))
            return CR_STOLE;
    }
    atomic_store_explicit(&pred->next, n, memory_order_release);
    /* pred's owner grants us through cr_grant_next, which reads the
     * announce word in pred's node ("Fast hand-over" below) */
    uint32_t v = ll_wait_while_announced_behind(&n->locked, 1, wpol, &pred->succ_parked, who, false);
    if (v == CR_PENDING) {
        uint32_t expect = CR_PENDING;
        if (atomic_compare_exchange_strong_explicit(&n->locked, &expect, 0, memory_order_acquire,
                                                    memory_order_acquire))
            return 0;
        v = expect; /* an arrival took it over: RETRY */
    }
    return v == CR_RETRY ? CR_RETRY : 0;
}

/* Pending grant of the lock to t, which the caller has just made the tail
 * (see above). */
static inline void cr_grant_pending(struct cr_node *t, int policy) { ll_wake(&t->locked, CR_PENDING, policy); }

/* Take the lock only if the chain is empty. */
static inline int cr_trylock(_Atomic(struct cr_node *) *tail, struct cr_node *n, bool aware)
{
    atomic_store_explicit(&n->cpu, ll_current_cpu(), memory_order_relaxed);
    if (aware)
        cr_note_tid(n);
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->locked, 0, memory_order_relaxed);
    atomic_store_explicit(&n->succ_parked, 0, memory_order_relaxed);
    n->relinked = 0;
    struct cr_node *expect = NULL;
    return atomic_compare_exchange_strong_explicit(tail, &expect, n, memory_order_acq_rel, memory_order_relaxed)
               ? 0
               : EBUSY;
}

/* Make t the owner (hand-over through the waiting layer). */
static inline void cr_grant(struct cr_node *t, int policy) { ll_wake(&t->locked, 0, policy); }

/* Fast hand-over (not in the paper; src/core/fastwake.c has the argument
 * and the measurements).  The owner's node n is the one its successor
 * succ = n.next linked itself to, unless an owner rewrote n.next (culling
 * the second waiter, a graft): succ then knew n as its predecessor, and
 * under spin-then-park it announced its parking in n.succ_parked, in the
 * line of n.next that the unlock has just read.  So the grant is a plain
 * store followed by a read of that word (ll_wake_announced) instead of a
 * swap on succ's line.  This holds for every grant to n.next that n's
 * owner did not rewrite, the one after a failed release CAS included
 * (cr_release, the raced reprovisioning: the arrival linked itself to n);
 * with two threads that path is most hand-offs, so a locked swap on the
 * spinning waiter's line there would stall most grants.  Everything else
 * -- a node whose next an owner
 * rewrote (n.relinked), grants to a passive node, pending grants -- goes
 * through cr_grant, whose swap sees LL_PARKED, which an announcing waiter
 * also sets.  n.relinked is written by the owner that rewrites n.next (cr_relink)
 * while n waits, and read by n once it owns the lock (the grant between
 * them orders it); it is reset, with succ_parked, when n arrives.  A stale
 * announcement (a waiter that announced to n's previous use, after n's
 * reset) costs one spurious futex_wake; announcements land in holds, which
 * are never freed (src/core/thread.c), so a late one is never a write to
 * freed memory, and whose node area is only ever this algorithm's
 * (internal.h, "One algorithm per node"), so never into another layout. */
static inline void cr_grant_next(struct cr_node *n, struct cr_node *succ, int policy)
{
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK && !n->relinked && ll_fastwake_on())
        ll_wake_announced(&succ->locked, 0, &n->succ_parked);
    else
        cr_grant(succ, policy);
}

/* Wait until the arrival that swapped the tail after n has linked itself. */
static inline struct cr_node *cr_await_link(struct cr_node *n, int policy)
{
    struct cr_node *succ;
    while (!(succ = atomic_load_explicit(&n->next, memory_order_acquire)))
        cr_link_wait_step(policy);
    return succ;
}

/* The owner points x.next at a waiter that did not link itself to x, so a
 * grant from x must not take the fast hand-over (cr_grant_next): that
 * waiter announces its parking in the node it linked itself to. */
static inline void cr_relink(struct cr_node *x, struct cr_node *to)
{
    x->relinked = 1;
    atomic_store_explicit(&x->next, to, memory_order_relaxed);
}

/* Put list node t right after owner node n (*succp = n.next, possibly nil)
 * so that it can be granted next.  Returns false if t could not become the
 * tail because an arrival raced into the empty chain (the CAS from n failed);
 * the caller then finds that arrival with cr_await_link. */
static inline bool cr_install_after(_Atomic(struct cr_node *) *tail, struct cr_node *n, struct cr_node *t,
                                    struct cr_node **succp)
{
    if (*succp) {
        cr_relink(t, *succp);
        return true;
    }
    atomic_store_explicit(&t->next, NULL, memory_order_relaxed);
    struct cr_node *expect = n;
    return atomic_compare_exchange_strong_explicit(tail, &expect, t, memory_order_acq_rel, memory_order_acquire);
}

/* Fairness graft (mcscr/mcscrn (F)): put passive node t right after owner
 * node n (succ = n.next, possibly nil) and grant it outright; if an arrival
 * raced into the empty chain, t goes before that arrival. */
static inline void cr_graft(_Atomic(struct cr_node *) *tail, struct cr_node *n, struct cr_node *t,
                            struct cr_node *succ, int policy)
{
    if (!cr_install_after(tail, n, t, &succ))
        cr_relink(t, cr_await_link(n, policy));
    cr_grant(t, policy);
}

/* Reprovisioning (mcscr/mcscrn (R)): the chain holds only the owner's node
 * n; put list node h after it and hand it the lock -- pending if `pending`
 * (mcscr), else outright -- counting it in *count, and a pending grant also
 * in *pend_count if not NULL, first (after the grant the lock, and so the
 * owner-only counters, is no longer ours).  If an
 * arrival raced into the chain (cr_install_after failed), h goes back on the
 * head of list L, where it was, and the arrival gets the lock: the lock is
 * not left free either way. */
static inline void cr_reprovision(_Atomic(struct cr_node *) *tail, struct cr_node *n, struct cr_node *h,
                                  struct cr_list *L, uint64_t *count, uint64_t *pend_count, bool pending,
                                  int policy)
{
    struct cr_node *succ = NULL;
    if (cr_install_after(tail, n, h, &succ)) {
        (*count)++;
        if (pending && pend_count)
            (*pend_count)++;
        if (pending)
            cr_grant_pending(h, policy);
        else
            cr_grant(h, policy);
        return;
    }
    cr_push_head(L, h);
    cr_grant_next(n, cr_await_link(n, policy), policy);
}

/* Deficit grace (not in the paper).  A deficit -- the owner unlocks and the
 * chain holds only its own node -- reprovisions a passive thread (R).  When
 * the threads circulate with short non-critical sections on few CPUs, most
 * deficits are an illusion: the other circulating thread is between its
 * unlock and its next arrival (~100 cycles) and swaps the tail a moment
 * later.  If the passive thread to be reprovisioned has parked, reprovision
 * costs a futex_wake, and the woken thread competes for a CPU with the
 * circulating threads (the scheduler favours a thread that slept), only to
 * be taken over and culled again: a churn of wake-ups that can leave the
 * lock far slower than glibc's mutex with many threads on few CPUs.  So
 * before reprovisioning a
 * *parked* passive thread h, the owner waits up to `grace` cycles for an
 * arrival: if the tail moves away from n, the arrival (running, warm) gets
 * the lock by an ordinary MCS hand-off and h stays passive and asleep;
 * otherwise the owner reprovisions h.  The lock is held throughout
 * (work conservation, I1, is kept), no waiter is stranded (the arrival is
 * granted; h stays in the passive set, from which it is reprovisioned or
 * grafted later), and the window is bounded, so a deficit costs the owner at
 * most `grace` more than an immediate reprovisioning; a passive thread that
 * has not parked yet
 * (its word lacks LL_PARKED) is reprovisioned at once, since granting it
 * costs no system call.  Orderings: the tail load is relaxed (a hint); the
 * arrival found is then linked through cr_await_link's acquire load and
 * granted through ll_wake, as in MCS.  Returns the arrival to grant, or NULL
 * to reprovision h.  `grace` comes from LIBLOCK_CR_GRACE_NS (default
 * CR_GRACE_NS_DEFAULT, 0 = off). */
#define CR_GRACE_NS_DEFAULT 1000
static inline uint64_t cr_grace_from_env(void)
{
    return ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_CR_GRACE_NS", CR_GRACE_NS_DEFAULT, 0, 1000000));
}

static inline struct cr_node *cr_deficit_grace(_Atomic(struct cr_node *) *tail, struct cr_node *n,
                                               const struct cr_node *h, uint64_t grace, int policy)
{
    if (!grace || !(atomic_load_explicit(&h->locked, memory_order_relaxed) & LL_PARKED))
        return NULL;
    uint64_t t0 = ll_cycles();
    unsigned i = 0;
    for (;;) {
        if (atomic_load_explicit(tail, memory_order_relaxed) != n)
            return cr_await_link(n, policy);
        ll_pause();
        if ((++i & 15) == 0 && ll_cycles() - t0 > grace)
            return NULL;
    }
}

/* The chain as the owner found it (mcscr, mcscrn; not in the paper).  The
 * paper's rule (C) reads succ.next at unlock to see whether the owner's
 * successor succ has a successor of its own.  That read fetches succ's
 * node line from the CPU where succ waits on it, and the unlock cannot
 * grant anyone before the answer arrives: a second line transfer on every
 * hand-off, the one plain MCS does not make.
 * So the owner looks at the chain once, right after it gets the lock
 * (cr_note_chain: n.next, and that node's next), while its critical
 * section runs; at unlock, ss is what it saw then, provided succ is the
 * node it saw (cr_seen_second).
 *  - Still true at unlock: while n owns the lock nobody changes n.next or
 *    succ.next once set (I3 of mcscr.c: a node's next is written by its own
 *    thread before its tail swap, by the one arrival that got it as pred,
 *    and otherwise only by the owner, in unlock), so a snapshot
 *    "succ.next = ss" is still the chain at unlock.  The loads are acquire,
 *    pairing with the arrivals' release link stores, as the paper's read.
 *  - May be out of date the other way only: a waiter that links itself
 *    during the critical section is not seen, and this unlock culls nothing
 *    for it.  The next owner sees it (it is in the chain by then), so
 *    surplus is culled one hand-off later; the chain stays "owner + one
 *    waiter" on average (test_malthus's working-set checks).
 *  - Cost: nothing when nobody waits behind n at acquisition, which is the
 *    steady state below saturation and, with two CPUs, most of the time above
 *    it (the next thread links during the critical section); otherwise the
 *    reads run beside the critical section instead of before the grant.
 * trylock acquires a free lock, so nobody waits behind it: cr_note_none. */
static inline void cr_note_chain(struct cr_node *n)
{
    struct cr_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
    n->seen_succ = succ;
    n->seen_ss = succ ? atomic_load_explicit(&succ->next, memory_order_acquire) : NULL;
}

static inline void cr_note_none(struct cr_node *n) { n->seen_succ = n->seen_ss = NULL; }

static inline struct cr_node *cr_seen_second(const struct cr_node *n, const struct cr_node *succ)
{
    return succ && succ == n->seen_succ ? n->seen_ss : NULL;
}

/* Culling the second waiter (mcscr/mcscrn (C), "Same-CPU culling"; not in
 * the paper).  The paper culls the owner's successor succ and grants the
 * one after it, ss.  With more threads than CPUs that grants a waiter that
 * cannot run: ss on the unlocker's CPU is not running (the unlocker is),
 * and ss on succ's CPU has parked at once behind succ ("Same-CPU waiters"),
 * so the hand-off waits for a context switch or a cross-CPU wake-up, and
 * with many threads per CPU such hand-offs are frequent enough to take a
 * large share of the time.
 * cr_ss_not_running says when the CPU hints show that; the owner then
 * culls ss and grants succ.  Unlinking ss, the owner's node being n:
 *  - ss.next != nil: succ.next = ss.next.  Nobody else writes succ.next
 *    (its successor ss linked itself long ago) and succ reads it only
 *    after the grant, whose release publishes the store.
 *  - ss is the tail: succ.next = nil, then CAS(tail, ss -> succ), acq_rel.
 *    Success: arrivals from now on get pred = succ and link succ.next;
 *    the CAS is release and their swap acquire, so the nil store happens
 *    before their link and never overwrites it.  No arrival ever got
 *    pred = ss, so ss's node is off the chain with nobody to write its
 *    next.  Failure: an arrival swapped in behind ss and will link
 *    ss.next; succ.next = ss again and the caller culls as the paper does
 *    (nobody read succ.next in between: see the first case).
 * So I3 of mcscr.c becomes: a tail node is culled only through the CAS
 * that makes its predecessor the tail. */
static inline bool cr_ss_not_running(const struct cr_node *succ, const struct cr_node *ss)
{
    int xc = atomic_load_explicit(&ss->cpu, memory_order_relaxed);
    return xc == ll_current_cpu() || xc == atomic_load_explicit(&succ->cpu, memory_order_relaxed);
}

static inline bool cr_unlink_second(_Atomic(struct cr_node *) *tail, struct cr_node *succ, struct cr_node *ss)
{
    struct cr_node *after = atomic_load_explicit(&ss->next, memory_order_acquire);
    succ->relinked = 1; /* succ.next changes hands in every case below (cr_relink) */
    if (after) {
        atomic_store_explicit(&succ->next, after, memory_order_relaxed);
        return true;
    }
    atomic_store_explicit(&succ->next, NULL, memory_order_relaxed);
    struct cr_node *expect = ss;
    if (atomic_compare_exchange_strong_explicit(tail, &expect, succ, memory_order_acq_rel, memory_order_acquire))
        return true;
    atomic_store_explicit(&succ->next, ss, memory_order_relaxed);
    return false;
}

/* The owner's rule (C') of mcscr/mcscrn: if ss (succ.next) cannot run now
 * and may still be culled (its lock() call has not been taken over
 * CR_MAX_TAKEOVERS times), unlink it, push it on passive list ps (counted
 * in *culls, owner-only like the list), grant succ and return true; else
 * change nothing and return false. */
static inline bool cr_cull_second(_Atomic(struct cr_node *) *tail, struct cr_list *ps, uint64_t *culls,
                                  struct cr_node *succ, struct cr_node *ss, int policy)
{
    if (ss->takeovers >= CR_MAX_TAKEOVERS || !cr_ss_not_running(succ, ss) || !cr_unlink_second(tail, succ, ss))
        return false;
    cr_push_head(ps, ss);
    ++*culls;
    cr_grant(succ, policy);
    return true;
}

/* Plain MCS release by owner node n: free the lock if n is the tail, else
 * grant the successor. */
static inline void cr_release(_Atomic(struct cr_node *) *tail, struct cr_node *n, int policy)
{
    struct cr_node *expect = n;
    if (atomic_compare_exchange_strong_explicit(tail, &expect, NULL, memory_order_release, memory_order_relaxed))
        return;
    cr_grant_next(n, cr_await_link(n, policy), policy);
}

/* Statistics of a concurrency-restricting lock (struct ll_ops .stats,
 * owner-written counters), by name:
 *   culls         waiters moved from the queue to the passive set
 *   grafts        eldest passive waiter admitted by the fairness trial
 *   reprovisions  passive waiter admitted because the queue was empty
 *   remote_culls  mcscrn: waiters moved to the remote list
 *   home_changes  mcscrn: changes of the home NUMA node
 *   handoffs      loiter: direct hand-offs to an impatient standby
 *   pendings      mcscr, mcscrn, lifocr: grants made pending (takeable)
 *   steals        mcscr, mcscrn, lifocr: pending grants taken over
 *   graces        mcscr, mcscrn: deficits an arrival filled within the grace window
 *   passive       current passive-set size
 *   remote        mcscrn: current remote-list size
 *   home          mcscrn: current home node
 *   fairness_ppb  the lock's fairness probability, in parts per 10^9
 *   tail          the queue tail / stack top as an address (an identity:
 *                 tests compare it to learn whether someone waits)
 * A family member fills those it keeps. */
static inline void cr_stats_fairness(struct ll_stats *o, double p) { ll_stats_put(o, "fairness_ppb", (int64_t)(p * 1e9 + 0.5)); }
static inline void cr_stats_tail(struct ll_stats *o, const void *tail) { ll_stats_put(o, "tail", (int64_t)(intptr_t)tail); }

#endif
