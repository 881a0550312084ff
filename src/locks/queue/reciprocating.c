/*
 * reciprocating - Reciprocating Locks (Dice and Kogan): waiters push
 * themselves onto an arrival stack; when the segment being served is
 * exhausted, the holder detaches the whole stack, which becomes the next
 * entry segment, served from its most recent arrival down.
 *
 * Source: D. Dice and A. Kogan, "Reciprocating Locks", ACM SIGPLAN
 * Symposium on Principles and Practice of Parallel Programming (PPoPP)
 * 2025; extended version arXiv:2501.02380: the algorithm's description
 * and its Acquire/Release listing (arrival word, wait element with its
 * Gate, the end-of-segment marker passed down the entry segment).
 *
 * The lock is one word, `arrivals`:
 *   nil          free: no holder, no waiter;
 *   LOCKEDEMPTY  (1) held, arrival stack empty;
 *   a node       held; the most recent arrival (the stack's top), or the
 *                holder's own node while nobody has arrived since the
 *                holder took the free lock with it (the holder's token).
 * A node's `succ` is what its arrival swap returned (LOCKEDEMPTY read as
 * nil): the node below it on the stack, so the stack is linked by values
 * the waiters already hold and a push is one swap.
 *   lock(n):    n.gate = WAITING; tail = swap(arrivals, n)
 *               if tail == nil: n.succ = nil; n.eos = n; return  (uncontended)
 *               n.succ = (tail == LOCKEDEMPTY ? nil : tail)
 *               wait until n.gate == GRANTED; e = n.eos_in
 *               if n.succ == e: n.succ = nil; e = LOCKEDEMPTY   (last of the segment)
 *               n.eos = e
 *   unlock(n):  if n.succ != nil: grant(n.succ, n.eos); return   (next in the segment)
 *               if CAS(arrivals, n.eos -> nil): return          (nobody arrived: free)
 *               top = swap(arrivals, LOCKEDEMPTY)               (detach the arrival stack)
 *               grant(top, n.eos)
 *   grant(w, e): w.eos_in = e; w.gate = GRANTED
 *   trylock(n): if CAS(arrivals, nil -> LOCKEDEMPTY): n.succ = nil;
 *                   n.eos = LOCKEDEMPTY; return 0
 *               return EBUSY
 * `eos` is the end-of-segment marker: the value the bottom of the segment's
 * stack read from `arrivals` when it pushed, which is also the value the
 * holder that detached the stack expected in its release CAS (LOCKEDEMPTY,
 * or that holder's token).  It travels down the segment with each grant;
 * the member whose succ equals it is the segment's last (its succ is not a
 * member but the marker), and the last member expects LOCKEDEMPTY in its
 * own release CAS, since arrivals was set to LOCKEDEMPTY by the detach.
 *
 * The wait element is the per-hold node, not one element per thread as in
 * the paper, for three reasons.  (1) unlock needs the holder's succ and
 * eos, which the paper keeps in the acquiring thread's frame between
 * Acquire and Release; under the interposer a NORMAL mutex may be unlocked
 * by another thread than its locker, also after the locker has exited, so
 * they live in the node the framework hands to both calls.  (2) After its
 * thread acquires, the paper's element serves as an address only (the
 * token in `arrivals`, the marker in eos); if that thread exited while
 * holding, its element's memory could be reused for a new thread's element
 * that arrives at this lock, and the release CAS(arrivals, token -> nil)
 * would then succeed on the newcomer's push and strand it and the waiters
 * behind it.  A per-hold node belongs to one hold from lock() to unlock()
 * and is never freed (a pool takes the nodes of exited threads), so while
 * a hold lasts no other push can put its address in `arrivals`.  (3) A
 * fork child's threads are new; the interposer rebuilds the lock in the
 * child, and nothing here refers to a thread record.  What the paper's
 * single element buys, constant memory per thread however many locks it
 * holds, becomes one node per lock held or awaited: the node area the
 * API layer and the interposer already give every hold, so no memory is
 * added.  Kept: one lock word (beside it only a counter for tests),
 * constant-time arrival (one swap) and release (a store; or one CAS; or a
 * failed CAS, a swap and a store), waiting on the waiter's own node, LIFO
 * order within a segment, segments served in order, and the bypass bound
 * below.
 *
 * Why the marker identifies the segment's end with per-hold nodes.  The
 * members of a segment are the nodes pushed after the previous detach (or
 * after the detaching holder h took the free lock) and before this detach.
 * Their succ values are the nodes pushed just before them, i.e. other
 * members, except the bottom's, which is the marker: either LOCKEDEMPTY,
 * which is no node, or the token n of a holder h that took the free lock
 * with its node n.  In that case the stack began with h's own swap, so
 * every member was pushed during h's hold, while n was h's and no other
 * hold's: no member is n.  So "succ == eos" is true of the bottom only.
 * Once h has released, its node may be reused by any hold, of this lock
 * too, and pushed again; it is then a member of a later stack, whose
 * members compare against that stack's own marker (LOCKEDEMPTY: the detach
 * left LOCKEDEMPTY in arrivals), so an old marker value never ends a later
 * segment early.  The release CAS compares arrivals with the holder's own
 * eos: with LOCKEDEMPTY it succeeds iff nobody pushed since the detach; with
 * the token n it succeeds iff nobody pushed since n was swapped in, since
 * no other push can put n there while the hold lasts.
 *
 * Invariants.  arrivals == nil iff no thread holds the lock or waits for
 * it (the release CAS frees the lock only when its segment is exhausted and
 * the stack is empty).  The holder's entry segment is its succ chain up to
 * the marker; the holder detaches only when its succ is nil, so a segment
 * is served completely before the next is detached.  Every waiting node is
 * granted exactly once: by the node above it in its segment, or by the
 * detacher if it is the top.  Trylock succeeds only on a free lock, i.e.
 * with nobody waiting.
 *
 * Orderings.
 *  - The arrival swap is acq_rel.  Release: the node's initial gate is
 *    published to whoever writes into the node next: the node pushed above
 *    it (its swap reads ours), the detacher (its swap reads ours or a later
 *    push, and pushes are RMWs, so ours heads a release sequence), the
 *    holder's look at the top (below; an acquire load).  Acquire: when it
 *    returns nil, it reads the releasing CAS (release) of the previous
 *    holder, so the previous critical section is visible; when it returns a
 *    node, that node's initialisation is visible before we grant or
 *    promote it.
 *  - grant writes eos_in (relaxed) and then the gate through the waiting
 *    layer (ll_wake: a release store, or an acq_rel swap under the parking
 *    policies); the waiter's wait returns after an acquire load of the
 *    gate, so it sees eos_in and the critical section.
 *  - The release CAS(eos -> nil) is release, for the next acquirer's swap.
 *    The detaching swap is acq_rel (acquire: the top's initialisation,
 *    before we grant it).  A failed release CAS is relaxed: the swap that
 *    follows does the reading.  Trylock's CAS is acquire on success.
 *  - succ and eos are the hold's own, written by lock() and read by
 *    unlock() (an unlock from another thread is ordered after the lock by
 *    the program, as for every algorithm), so they are plain fields.
 *
 * Bounded bypass.  Let w push at time t.  It stays on the arrival stack
 * until the next detach D, which happens when the segment in progress at t
 * (S0) is exhausted, and D makes w a member of the segment S.  The threads
 * that enter between t and w's entry are the members of S0 that had not
 * entered yet, once each, then the members of S above w -- those that
 * pushed after w and before D -- once each; a thread that arrives after D
 * is on a later stack, served after S.  A thread has at most one pending
 * arrival per lock (it waits in lock() until granted).  So while w waits,
 * any other thread enters at most twice (once in S0, once in S), and at
 * most once after arriving later than w; with T threads using the lock,
 * at most 2(T - 1) critical sections run while w waits.  Trylock never
 * bypasses a waiter.  The waiting policies (below) change how a thread
 * waits, never which node is granted, so the bound holds under each.
 *
 * Policies: spin, yield, park, spin-then-park (default).  Under spin,
 * yield and park a waiter waits for its gate with that policy and grants
 * go through ll_wake.  Under spin-then-park (our addition, in the manner of
 * mcs.c's early wake-up) the gate also carries a rank that says how soon
 * its owner will be granted: WAITING (as it arrived), SECOND, FIRST,
 * then GRANTED; bit 31 is the waiting layer's LL_PARKED.
 *  - An arrival is the top of the stack, i.e. the first of the next
 *    segment, so it spins for the spin budget, and every 64 pauses
 *    looks at arrivals (relaxed: a hint): once two looks in a row do not
 *    find its node there, a newer arrival covers it (it is at best second
 *    of the next segment) or the stack was detached (if it was the top,
 *    its grant follows the detach at once, hence two looks), and it
 *    sleeps.  So on the stack only the top spins.
 *  - promote(w, rank, e) writes e into w.eos_in (relaxed) and raises w's
 *    rank by a release CAS, never lowering it and never touching GRANTED,
 *    and wakes w if it had parked.  (a) A waiter granted inside a segment
 *    promotes its succ, the next member, to FIRST; (b) a FIRST waiter
 *    promotes its succ, unless that is the marker, to SECOND, so the
 *    second member wakes while the first still waits; (c) a waiter granted
 *    as the last of its segment reads arrivals (acquire) and, if the top
 *    there has parked, promotes it to FIRST, since its own release will
 *    grant that top unless a newer arrival covers it first.
 *  - Each node promoted is alive: (a) and (b) promote a node that waits for
 *    the promoter's own grant, and the promoter has not released; (c) a
 *    node on the stack waits for the detach, which the promoter, the
 *    holder with an exhausted segment, will do.  Every promotion of w
 *    happens before w's grant, so none reaches a later use of the node.
 *  - Every writer of w.eos_in writes w's segment's marker: in (a) and (b)
 *    the promoter is in w's segment (same marker); in (c) the promoter will
 *    detach w's stack, whose marker is the promoter's own eos.  So
 *    concurrent writes agree.
 *  - A rank is a hint: the grant is what ends a wait, and a stale rank
 *    only costs spinning (a waiter that sleeps when it would be granted
 *    soon is woken by the grant's swap, which sees LL_PARKED).
 * With more threads than CPUs this leaves spinning the top of the stack,
 * covered waiters until their next look, and the two next members of the
 * segment being served; a grant to a sleeper costs one wake-up, usually
 * begun a critical section ahead by a promotion.
 */
#include "internal.h"

#define LOCKEDEMPTY ((struct recip_node *)(uintptr_t)1)

/* Gate values; under spin-then-park the waiting ones are ranks (header). */
#define G_GRANTED 0u
#define G_WAITING 1u /* arrived; under spin-then-park: spins while on top of the stack */
#define G_SECOND 2u  /* promoted: next but one to be granted */
#define G_FIRST 3u   /* promoted: next to be granted */

struct recip_node {
    _Atomic uint32_t gate;               /* the wait word */
    _Atomic(struct recip_node *) eos_in; /* the segment's marker, from a grant or a promotion */
    struct recip_node *succ;             /* hold state: next member of our segment (nil: last) */
    struct recip_node *eos;              /* hold state: our segment's marker */
};

struct recip_lock {
    _Atomic(struct recip_node *) arrivals;
    _Atomic uint64_t segments; /* arrival stacks detached; written by the holder only */
};

_Static_assert(sizeof(struct recip_node) <= LL_NODE_BYTES, "reciprocating node too large");

static inline int parks(int policy) { return policy == LIBLOCK_WAIT_SPIN_THEN_PARK; }

static int recip_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)l;
    (void)attr;
    return 0; /* arrivals nil: free (state zeroed) */
}

static int recip_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct recip_lock)->arrivals, memory_order_acquire) ? EBUSY : 0;
}

/* Raise w's rank to `to` unless it is there or beyond (or granted); tell it
 * its segment's marker first; wake it if it had parked. */
static void promote(struct recip_node *w, uint32_t to, struct recip_node *eos)
{
    atomic_store_explicit(&w->eos_in, eos, memory_order_relaxed);
    uint32_t cur = atomic_load_explicit(&w->gate, memory_order_relaxed);
    for (;;) {
        uint32_t c = cur & ~LL_PARKED;
        if (c == G_GRANTED || c >= to)
            return;
        if (atomic_compare_exchange_weak_explicit(&w->gate, &cur, to, memory_order_release, memory_order_relaxed)) {
            if (cur & LL_PARKED)
                ll_futex_wake(&w->gate, 1 << 30);
            return;
        }
    }
}

static inline void grant(struct recip_node *w, struct recip_node *eos, int policy)
{
    atomic_store_explicit(&w->eos_in, eos, memory_order_relaxed);
    ll_wake(&w->gate, G_GRANTED, policy);
}

/* Spin-then-park, rank WAITING: spin while n is the top of the arrival stack,
 * at most for the spin budget, then sleep (header).  Returns the gate's new
 * value. */
static uint32_t wait_arrived(struct recip_lock *s, struct recip_node *n)
{
    const uint64_t start = ll_cycles(), budget = ll_spin_budget_cycles();
    unsigned k = 0, covered = 0;
    uint32_t cur;
    while (((cur = atomic_load_explicit(&n->gate, memory_order_acquire)) & ~LL_PARKED) == G_WAITING) {
        ll_pause();
        if ((++k & 63) == 0) {
            if (ll_cycles() - start > budget)
                break;
            if (atomic_load_explicit(&s->arrivals, memory_order_relaxed) != n) {
                if (++covered >= 2)
                    break;
            } else {
                covered = 0;
            }
        }
    }
    if ((cur & ~LL_PARKED) != G_WAITING)
        return cur & ~LL_PARKED;
    return ll_wait_while(&n->gate, G_WAITING, LIBLOCK_WAIT_PARK);
}

/* lock() behind others: wait for the grant, then take up the segment. */
static LL_SLOW int recip_wait(liblock_t *l, struct recip_node *n, struct recip_node *tail)
{
    struct recip_lock *s = LL_STATE(l, struct recip_lock);
    const int policy = ll_policy(l);
    n->succ = tail == LOCKEDEMPTY ? NULL : tail;
    if (!parks(policy)) {
        ll_wait_while(&n->gate, G_WAITING, policy);
    } else {
        uint32_t v = wait_arrived(s, n);
        int told = 0;
        while (v != G_GRANTED) {
            if (v == G_FIRST && !told) { /* (b): the second member wakes while we wait */
                struct recip_node *e = atomic_load_explicit(&n->eos_in, memory_order_relaxed);
                if (n->succ && n->succ != e)
                    promote(n->succ, G_SECOND, e);
                told = 1;
            }
            v = ll_wait_while(&n->gate, v, policy);
        }
    }
    struct recip_node *eos = atomic_load_explicit(&n->eos_in, memory_order_relaxed);
    if (n->succ == eos) { /* our succ is the marker: we are the segment's last */
        n->succ = NULL;
        eos = LOCKEDEMPTY;
    }
    n->eos = eos;
    if (parks(policy)) {
        if (n->succ) {
            promote(n->succ, G_FIRST, eos); /* (a) */
        } else {
            /* (c): our release will detach the stack; wake its top now if it sleeps */
            struct recip_node *top = atomic_load_explicit(&s->arrivals, memory_order_acquire);
            if (top != eos && top != LOCKEDEMPTY &&
                (atomic_load_explicit(&top->gate, memory_order_relaxed) & LL_PARKED))
                promote(top, G_FIRST, eos);
        }
    }
    return 0;
}

static int recip_lock(liblock_t *l, void *vnode)
{
    struct recip_lock *s = LL_STATE(l, struct recip_lock);
    struct recip_node *n = vnode;
    atomic_store_explicit(&n->gate, G_WAITING, memory_order_relaxed);
    struct recip_node *tail = atomic_exchange_explicit(&s->arrivals, n, memory_order_acq_rel);
    if (LL_LIKELY(tail == NULL)) {
        n->succ = NULL;
        n->eos = n; /* our token: arrivals still says n if nobody arrives */
        return 0;
    }
    return recip_wait(l, n, tail);
}

static int recip_trylock(liblock_t *l, void *vnode)
{
    struct recip_lock *s = LL_STATE(l, struct recip_lock);
    struct recip_node *n = vnode;
    struct recip_node *expect = NULL;
    if (!atomic_compare_exchange_strong_explicit(&s->arrivals, &expect, LOCKEDEMPTY, memory_order_acquire,
                                                 memory_order_relaxed))
        return EBUSY;
    n->succ = NULL;
    n->eos = LOCKEDEMPTY;
    return 0;
}

/* unlock() with an exhausted segment and new arrivals: detach the stack. */
static LL_SLOW void recip_detach(liblock_t *l, struct recip_lock *s, struct recip_node *eos)
{
    struct recip_node *top = atomic_exchange_explicit(&s->arrivals, LOCKEDEMPTY, memory_order_acq_rel);
    atomic_store_explicit(&s->segments, atomic_load_explicit(&s->segments, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    grant(top, eos, ll_policy(l));
}

static int recip_unlock(liblock_t *l, void *vnode)
{
    struct recip_lock *s = LL_STATE(l, struct recip_lock);
    struct recip_node *n = vnode;
    struct recip_node *succ = n->succ, *eos = n->eos;
    if (succ) {
        grant(succ, eos, ll_policy(l));
        return 0;
    }
    struct recip_node *expect = eos;
    if (LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->arrivals, &expect, NULL, memory_order_release,
                                                          memory_order_relaxed)))
        return 0;
    recip_detach(l, s, eos);
    return 0;
}

/* Test probes: `arrivals`, the lock word (0 free, 1 held with an empty
 * arrival stack, else the address of the top node or of the holder's
 * token); `segments`, the arrival stacks detached so far. */
static void recip_stats(const liblock_t *l, struct ll_stats *o)
{
    const struct recip_lock *s = LL_STATE(l, const struct recip_lock);
    ll_stats_put(o, "arrivals", (int64_t)(intptr_t)atomic_load_explicit(&s->arrivals, memory_order_relaxed));
    ll_stats_put(o, "segments", (int64_t)atomic_load_explicit(&s->segments, memory_order_relaxed));
}

const struct ll_ops ll_ops_reciprocating = {
    .name = "reciprocating",
    .description = "Reciprocating lock: arrivals push onto a stack that the holder detaches as the next "
                   "segment once the current one is served; LIFO within a segment, bounded bypass",
    .source = "Dice and Kogan, Reciprocating Locks, PPoPP 2025 (extended version, arXiv:2501.02380), the "
              "algorithm's Acquire/Release listing",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) | LL_POLICY_BIT(LIBLOCK_WAIT_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "only the newest waiter (the top of the arrival stack, first of the next segment) and the next two of the segment being served spin, the others sleep; each member of a segment is woken by the one ahead of it, a critical section before its turn, and a holder that ends its segment wakes the stack's top if it sleeps; a hand-off to a thread that is not running costs at most one wake-up; not FIFO, bypass bounded",
    .state_size = sizeof(struct recip_lock),
    .node_size = sizeof(struct recip_node),
    .init = recip_init,
    .destroy = recip_destroy,
    .lock = recip_lock,
    .trylock = recip_trylock,
    .unlock = recip_unlock,
    .stats = recip_stats,
};
