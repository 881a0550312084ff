/*
 * lifocr - LIFO lock with concurrency restriction (the paper's LIFO-CR).
 *
 * Source: seed 001 (Dice, "Malthusian Locks"), appendix A.2 "LIFO-CR";
 * digest shared/notes/001 section 2.3.
 *
 * The lock word `top` is the stack pointer of an explicit stack of waiting
 * nodes:  FREE (nil) = unlocked;  HELD (1) = held, no waiter;  otherwise
 * the most recently pushed waiter (held, with waiters).
 *   lock:    if top == FREE: CAS(FREE -> HELD) and own the lock;
 *            else n.next = top; CAS(top -> n) (push) and wait on n.locked.
 *   unlock:  if top == HELD: CAS(HELD -> FREE) and done;
 *            (F) with probability P (LIBLOCK_CR_FAIRNESS, default 1/1000,
 *                Bernoulli trial on the thread's xorshift) walk to the eldest
 *                waiter E (the node whose next is HELD), unlink it (its
 *                predecessor's next := HELD) and grant it;
 *            otherwise pop: CAS(top, h -> h.next) and grant h.  If that CAS
 *            fails, newer threads have pushed; the constant-time variant
 *            (the default, LIBLOCK_LIFOCR_CONSTANT_TIME=1) does not retry:
 *            with v the top the failed CAS returned, it unlinks w = v.next
 *            (v.next := w.next) and grants w -- "plausibly LIFO", as the
 *            paper puts it: w is the second most recent waiter.  With
 *            LIBLOCK_LIFOCR_CONSTANT_TIME=0 the pop retries on the new top
 *            (strict LIFO, unbounded retries under a flood of arrivals).
 * The active circulating set is the owner, the threads in their
 * non-critical sections and the top of the stack; the passive set is the
 * deeper stack.  P = 1 always grants the eldest: FIFO.  P = 0: pure LIFO,
 * no long-term fairness (a deep waiter can starve while arrivals continue).
 * The eldest walk is O(depth), done once per 1/P unlocks on average.
 *
 * Invariants
 *  I1 only the owner pops or unlinks (single consumer), so there is no ABA:
 *     a node cannot leave the stack and come back while the owner looks at
 *     it, because its thread cannot re-push before it has been granted and
 *     has released the lock, i.e. after this owner's unlock.
 *  I2 a node's `next` is written by its own thread before the push CAS,
 *     and afterwards only by the owner (unlink of the eldest or of w).
 *     Arrivals read only `top`, never an existing node's `next`, so the
 *     owner's unlink writes race with nobody.
 *  I3 top != FREE while the lock is held: a grant never changes `top`
 *     except by the pop CAS, which replaces h by h.next (a node or HELD).
 *     So the lock is released only from HELD, with no waiter: work
 *     conserving.
 *  I4 in the constant-time variant v != h and h is still somewhere below v
 *     (only the owner removes nodes), so w = v.next is a node, never HELD.
 *
 * Orderings: pushes are release CASes, and the owner reads `top` with an
 * acquire load (or a CAS whose failure ordering is acquire): the pushes
 * form a release sequence of RMWs on `top`, so the owner sees every pushed
 * node's `next` and initial `locked`.  The grant is ll_wake (release) and
 * the waiter's ll_wait_while returns after an acquire load.  The release
 * CAS HELD -> FREE pairs with the next acquirer's acquire CAS FREE -> HELD.
 *
 * Policies: spin, yield, spin-then-park (default; the paper notes LIFO-CR
 * suits spin-then-park because the top of the stack, which runs next, is
 * the thread most likely to be still spinning).  Not FIFO (unless P = 1).
 */
#include "cr.h"

#include <string.h>

#define LIFO_FREE ((struct cr_node *)0)
#define LIFO_HELD ((struct cr_node *)1)

struct lifocr_lock {
    _Atomic(struct cr_node *) top;
    /* owner-only */
    LL_ALIGNED struct cr_trial fair;
    double p;
    bool constant_time;
    uint64_t grafts, bypass_unlinks;
};

static int lifocr_init(liblock_t *l, const liblock_attr_t *attr)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    s->p = ll_env_double("LIBLOCK_CR_FAIRNESS", 0.001, 0.0, 1.0);
    s->fair = cr_trial_make(s->p);
    s->constant_time = ll_env_long("LIBLOCK_LIFOCR_CONSTANT_TIME", 1, 0, 1) != 0;
    return 0;
}

static int lifocr_lock(liblock_t *l, void *vnode)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    struct cr_node *n = vnode;
    atomic_store_explicit(&n->locked, 1, memory_order_relaxed);
    struct cr_node *h = atomic_load_explicit(&s->top, memory_order_relaxed);
    for (;;) {
        if (h == LIFO_FREE) {
            if (atomic_compare_exchange_weak_explicit(&s->top, &h, LIFO_HELD, memory_order_acquire,
                                                      memory_order_relaxed))
                return 0;
            continue;
        }
        atomic_store_explicit(&n->next, h, memory_order_relaxed);
        if (atomic_compare_exchange_weak_explicit(&s->top, &h, n, memory_order_release, memory_order_relaxed))
            break;
    }
    ll_wait_while(&n->locked, 1, l->_wait);
    return 0;
}

static int lifocr_trylock(liblock_t *l, void *vnode)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    struct cr_node *expect = LIFO_FREE;
    return atomic_compare_exchange_strong_explicit(&s->top, &expect, LIFO_HELD, memory_order_acquire,
                                                   memory_order_relaxed)
               ? 0
               : EBUSY;
}

static inline struct cr_node *next_of(struct cr_node *n)
{
    return atomic_load_explicit(&n->next, memory_order_relaxed);
}

static int lifocr_unlock(liblock_t *l, void *vnode)
{
    struct lifocr_lock *s = LL_STATE(l, struct lifocr_lock);
    const int pol = l->_wait;
    struct cr_node *h = atomic_load_explicit(&s->top, memory_order_acquire);
    if (h == LIFO_HELD) {
        if (atomic_compare_exchange_strong_explicit(&s->top, &h, LIFO_FREE, memory_order_release,
                                                    memory_order_acquire))
            return 0;
        /* h is now the node an arrival pushed */
    }
    if (cr_trial_draw(&s->fair)) {
        /* (F) eldest hand-off: walk to the bottom of the stack. */
        struct cr_node *prev = NULL, *e = h;
        for (struct cr_node *x; (x = next_of(e)) != LIFO_HELD;) {
            prev = e;
            e = x;
        }
        if (prev) {
            atomic_store_explicit(&prev->next, LIFO_HELD, memory_order_relaxed);
            s->grafts++;
            ll_wake(&e->locked, 0, pol);
            return 0;
        }
        /* the only waiter is the eldest: an ordinary pop */
    }
    for (;;) {
        struct cr_node *v = h;
        if (atomic_compare_exchange_strong_explicit(&s->top, &v, next_of(h), memory_order_acq_rel,
                                                    memory_order_acquire)) {
            ll_wake(&h->locked, 0, pol);
            return 0;
        }
        if (s->constant_time) {
            struct cr_node *w = next_of(v);
            atomic_store_explicit(&v->next, next_of(w), memory_order_relaxed);
            s->bypass_unlinks++;
            ll_wake(&w->locked, 0, pol);
            return 0;
        }
        h = v;
    }
}

static int lifocr_destroy(liblock_t *l)
{
    return atomic_load_explicit(&LL_STATE(l, struct lifocr_lock)->top, memory_order_acquire) ? EBUSY : 0;
}

extern const struct ll_ops ll_ops_lifocr;

int ll_lifocr_stats(const liblock_t *l, struct ll_cr_stats *out)
{
    if (!l || l->_magic != LL_LOCK_MAGIC || l->_ops != &ll_ops_lifocr || !out)
        return EINVAL;
    struct lifocr_lock *s = l->_state;
    memset(out, 0, sizeof *out);
    out->grafts = s->grafts;
    out->fairness = s->p;
    out->tail = atomic_load_explicit(&s->top, memory_order_acquire);
    return 0;
}

const struct ll_ops ll_ops_lifocr = {
    .name = "lifocr",
    .description = "LIFO stack lock with concurrency restriction: most recent waiter first, eldest with "
                   "probability LIBLOCK_CR_FAIRNESS, constant-time unlock",
    .source = "seed 001 appendix A.2 (LIFO-CR); Dice, Malthusian Locks, EuroSys 2017",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .state_size = sizeof(struct lifocr_lock),
    .node_size = sizeof(struct cr_node),
    .init = lifocr_init,
    .destroy = lifocr_destroy,
    .lock = lifocr_lock,
    .trylock = lifocr_trylock,
    .unlock = lifocr_unlock,
};
