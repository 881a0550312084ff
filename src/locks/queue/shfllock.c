/*
 * shfllock - ShflLock (Kashyap, Calciu, Cheng, Min and Kim): a test-and-set
 * word that any thread may take in one CAS (the fast path), backed by an
 * MCS queue whose waiters, while they wait, reorder the queue behind them
 * ("shuffling") so that waiters of the shuffler's NUMA node are admitted in
 * a row.
 *
 * Source: S. Kashyap, I. Calciu, X. Cheng, C. Min and T. Kim, "Scalable and
 * Practical Locking with Shuffling", Proceedings of the 27th ACM Symposium
 * on Operating Systems Principles (SOSP 2019): section 3 (shuffling: the
 * queue reordered by its waiters, off the critical path, under a policy),
 * section 4.1 (the non-blocking ShflLock: TAS word, MCS queue, the queue's
 * head spinning on the word, NUMA grouping by the shuffler with a bound on
 * a batch) and section 4.2 (the blocking variant: waiters far from the head
 * park, and are woken before their turn).
 *
 *   lock:   if CAS(word: free -> locked): return                 (fast path)
 *           n.next = nil; n.nid = my NUMA node; pred = swap(tail, n)
 *           if pred: pred.next = n; wait until n.status == HEAD
 *           while the word is locked: shuffle (below), wait for a change
 *           CAS(word: free -> locked, barge count 0)             (admission)
 *           leave the queue: CAS(tail: n -> nil), or wait for n.next and
 *           make it HEAD
 *   unlock: word = tail ? (word without LOCKED) : 0      (store, or swap)
 * The holder is out of the queue, so unlock needs no node: a hold may be
 * released by another thread than its locker, or after its locker exited,
 * as the interposer's NORMAL mutexes must be, and fork needs nothing of its
 * own (the interposer rebuilds each lock in the child).  The node is the
 * per-hold node the API layer hands to lock(); nothing refers to it once
 * lock() has returned.
 *
 * The word: bit 0 LOCKED, bits 1-7 the barge count (fast-path admissions
 * since the last queue admission, or since an unlock that found the queue
 * empty), bit 31 the waiting layer's LL_PARKED (the head asleep on it).
 * The fast path (lock and trylock) takes the word only if it is unlocked
 * and the count is below SHFL_BARGES, and raises the count; a queue
 * admission resets it; an unlock resets it when no node is queued.  So a
 * running thread may overtake the queue's head (the paper's lock stealing),
 * but only SHFL_BARGES times before the head's next admission.  trylock is
 * the fast path alone: EBUSY when held, or when the head is owed the lock.
 *
 * Shuffling (our choice of who: the paper passes the shuffler role among
 * waiters near the head; here it is the head itself, the waiter that spins
 * on the word, so there is one shuffler per lock by construction).  While
 * the word is locked the head walks the queue behind it: once it has a
 * successor, and again when a node has linked behind the node whose nil
 * next ended its last walk (under spin and yield it looks every 64 polls of
 * the word; under spin-then-park when it wakes with the word still locked).
 * A walk that stopped at the cap is not repeated.  A batch is a run
 * of waiters of one NUMA node right behind the head; `batch` numbers its
 * members 1, 2, ... (0: in no batch).  A head with batch 0 starts a batch
 * of its node (batch = 1).  Walking from the batch's last member, a waiter
 * of the same node right behind it joins the batch; one further back is
 * moved to right behind the batch's last member (prev.next = cur.next;
 * cur.next = last.next; last.next = cur) and joins it.  The walk stops at
 * the end of the queue, when the lock is free (the head then takes it), or
 * when the batch has `max_batch` members (LIBLOCK_SHFL_BATCH, default 16).
 * The tail node is never moved (a node with next == nil may be the tail,
 * or its successor may be linking), so arrivals, which only write the next
 * word of the node they swapped out of the tail, never meet the shuffler:
 * it writes only next words that are not nil.  Nodes behind the head never
 * leave the queue while it walks (only the head leaves).  When the head is
 * admitted, its successor becomes head and shuffler; if it is in the batch
 * it extends the same batch, up to the same cap.
 *
 * Bound on being passed over.  Let w wait, with k nodes ahead of it in the
 * queue when it swaps the tail.  A node gets ahead of w only by a move, and
 * a moved node gets batch > 0.  The nodes with batch > 0 are a run
 * beginning at the head (a batch is built right behind the head and the
 * head leaves first), so a head with batch 0 starts a new batch only after
 * every earlier batch has left, and such a head is one of the k (a node
 * moved ahead of w has batch > 0).  Each batch moves at most max_batch - 1
 * nodes; the batch in progress when w arrived has its head among the k
 * too.  So at most k (max_batch - 1) nodes are moved past w, and at most
 * k * max_batch queue admissions precede w's.  Barging: the count resets
 * at each queue admission, and at an unlock that found the tail nil; the
 * tail load, the tail swap and the word CASes are seq_cst, so an unlock
 * whose load reads nil precedes w's swap in their total order and a thread
 * makes at most one such unlock after w's swap whose acquisition followed
 * it.  So at most SHFL_BARGES * (k * max_batch + T) fast-path admissions
 * precede w's, with T threads using the lock; w waits for at most
 * (T - 1) * max_batch * (1 + SHFL_BARGES) + SHFL_BARGES * T critical
 * sections.  Starvation-free; not FIFO.  tests/test_shfllock.c checks the
 * cap on a batch and the barging cap in admission orders.
 *
 * Waiting policies: spin, yield, spin-then-park (default).  A node's
 * status: ST_WAIT (arrived), ST_NEXT (second in line: spin), ST_HEAD (the
 * head: wait on the word), plus LL_PARKED.  Under spin and yield a waiter
 * waits with the policy on its status, the head on the word.  Under
 * spin-then-park (the paper's blocking variant, section 4.2) an arrival
 * behind the head spins for the spin budget and then parks, any other
 * arrival parks at once; the head, after each shuffle pass and before it
 * waits, makes its successor (after the pass: the first member it moved, if
 * any) ST_NEXT by a CAS that wakes it if it had parked, so the waiter that
 * is admitted next after the head is running by then; the head spins for
 * the budget on the word and then parks on it, and the unlock is then a
 * swap that wakes it.  A rank only chooses between spinning and parking:
 * a stale one costs time, never exclusion or progress.
 *
 * Invariants:
 *  - tail is nil iff no node is queued; the queue is a list from the head
 *    to the tail; only the head's thread writes the next words of queued
 *    nodes other than the tail's, and only to another queued node;
 *  - the word is LOCKED iff a thread holds the lock; exactly the head may
 *    set it from the queue, and the fast path only while the count is
 *    below SHFL_BARGES;
 *  - a node's status becomes ST_HEAD once, by the head that leaves the
 *    queue before it; promotions only raise ST_WAIT to ST_NEXT.
 * Orderings:
 *  - the tail swap is seq_cst (acq_rel suffices for the queue: release
 *    publishes the node's fields to the predecessor's successor and to the
 *    shuffler reading the link; acquire makes pred's node visible); seq_cst
 *    for the barging bound above, as are the tail CAS, the unlock's tail
 *    load and the word's CASes (on x86 a plain load and locked
 *    instructions, as they are anyway);
 *  - the link pred.next = n is a release store; the shuffler reads next
 *    words with acquire, so a node's nid and batch are visible to it; the
 *    moves are relaxed stores, published to the next shuffler by the
 *    grant of HEAD (release store or acq_rel swap; its wait returns after
 *    an acquire load), which follows them in the shuffler's program order;
 *  - admission is a CAS on the word (acquire) reading the release of the
 *    unlock's store or swap, so the previous critical section is visible;
 *  - promotions carry no data (release CAS, for the waiter's acquire);
 *  - the leaving head's acquire load of n.next sees the successor's link,
 *    after which no thread touches n (the arrival that linked read pred's
 *    status before its link store).
 */
#include "internal.h"

#define W_LOCKED 1u
#define W_BARGE 2u           /* one fast-path admission in the count */
#define W_COUNT(w) (((w) >> 1) & 0x7fu)
#define SHFL_BARGES 4u       /* fast-path admissions before the head is owed the lock */
#define SHFL_BATCH_DEFAULT 16

#define ST_WAIT 1u
#define ST_NEXT 2u
#define ST_HEAD 3u

struct shfl_node {
    _Atomic(struct shfl_node *) next;
    _Atomic uint32_t status; /* the waiter's own wait word */
    uint32_t batch;          /* 0: in no batch; written by shufflers (header) */
    int nid;                 /* NUMA node of the waiter, written before the tail swap */
};

struct shfl_lock {
    _Atomic uint32_t word;
    _Atomic(struct shfl_node *) tail; /* same line: unlock reads both */
    uint32_t max_batch;
    _Atomic uint64_t passes, moves, closed; /* test probes (written by the head, and failed trylocks) */
};

_Static_assert(sizeof(struct shfl_node) <= LL_NODE_BYTES, "shfllock node too large");

static inline int parks(int policy) { return policy == LIBLOCK_WAIT_SPIN_THEN_PARK; }

static inline void bump(_Atomic uint64_t *c)
{
    atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + 1, memory_order_relaxed);
}

static int shfl_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    LL_STATE(l, struct shfl_lock)->max_batch =
        (uint32_t)ll_env_long("LIBLOCK_SHFL_BATCH", SHFL_BATCH_DEFAULT, 1, 1 << 20);
    return 0; /* word 0, tail nil: free */
}

static int shfl_destroy(liblock_t *l)
{
    struct shfl_lock *s = LL_STATE(l, struct shfl_lock);
    if (atomic_load_explicit(&s->tail, memory_order_acquire) ||
        (atomic_load_explicit(&s->word, memory_order_acquire) & W_LOCKED))
        return EBUSY;
    return 0;
}

/* The fast path: take an unlocked word whose barge count is below the cap. */
static inline int try_barge(struct shfl_lock *s, uint32_t w)
{
    for (;;) {
        if ((w & W_LOCKED) || W_COUNT(w) >= SHFL_BARGES)
            return 0;
        if (atomic_compare_exchange_weak_explicit(&s->word, &w, (w + W_BARGE) | W_LOCKED, memory_order_seq_cst,
                                                  memory_order_relaxed))
            return 1;
    }
}

static inline int my_node(void)
{
    int cpu = ll_current_cpu();
    return cpu < 0 ? 0 : ll_cpu_node(cpu);
}

/* Raise s from ST_WAIT to ST_NEXT, waking it if it had parked. */
static void promote(struct shfl_node *s)
{
    uint32_t cur = atomic_load_explicit(&s->status, memory_order_relaxed);
    while ((cur & ~LL_PARKED) == ST_WAIT) {
        if (atomic_compare_exchange_weak_explicit(&s->status, &cur, ST_NEXT, memory_order_release,
                                                  memory_order_relaxed)) {
            if (cur & LL_PARKED)
                ll_futex_wake(&s->status, 1 << 30);
            return;
        }
    }
}

static inline int word_locked(struct shfl_lock *s)
{
    return atomic_load_explicit(&s->word, memory_order_relaxed) & W_LOCKED;
}

/* One shuffle pass by the head h (header, "Shuffling").  Returns the node
 * whose nil next ended the walk (the end of the queue as the pass saw it),
 * or nil if it stopped for the cap or a free word. */
static struct shfl_node *shuffle(struct shfl_lock *s, struct shfl_node *h)
{
    const int nid = h->nid;
    const uint32_t cap = s->max_batch;
    uint64_t moved = 0;
    if (h->batch == 0)
        h->batch = 1; /* a new batch of our node */
    struct shfl_node *last = h, *prev = h, *end = NULL;
    while (last->batch < cap && word_locked(s)) {
        struct shfl_node *cur = atomic_load_explicit(&prev->next, memory_order_acquire);
        if (!cur) {
            end = prev;
            break;
        }
        struct shfl_node *nx = atomic_load_explicit(&cur->next, memory_order_acquire);
        if (cur->nid != nid) {
            if (!nx) {
                end = cur;
                break;
            }
            prev = cur;
            continue;
        }
        if (prev == last) { /* right behind the batch: joins it where it stands */
            if (cur->batch == 0)
                cur->batch = last->batch + 1;
            last = prev = cur;
            continue;
        }
        if (!nx) {
            end = cur; /* maybe the tail: never moved */
            break;
        }
        atomic_store_explicit(&prev->next, nx, memory_order_relaxed);
        atomic_store_explicit(&cur->next, atomic_load_explicit(&last->next, memory_order_relaxed),
                              memory_order_relaxed);
        atomic_store_explicit(&last->next, cur, memory_order_relaxed);
        cur->batch = last->batch + 1;
        last = cur;
        moved++;
    }
    if (moved)
        atomic_store_explicit(&s->moves, atomic_load_explicit(&s->moves, memory_order_relaxed) + moved,
                              memory_order_relaxed);
    bump(&s->passes);
    return end;
}

/* Is there something new for a pass?  Before the first one: a successor;
 * after one: a node linked behind the end it saw (it is still queued: no
 * node behind the head leaves before it). */
static inline int new_arrival(struct shfl_node *n, int passed, struct shfl_node *end)
{
    if (!passed)
        return atomic_load_explicit(&n->next, memory_order_relaxed) != NULL;
    return end && atomic_load_explicit(&end->next, memory_order_relaxed) != NULL;
}

/* The head: shuffle while the word is locked, wait on it, take it. */
static void head_wait(struct shfl_lock *s, struct shfl_node *n, int policy)
{
    struct shfl_node *end = NULL; /* where our last pass ended */
    int passed = 0;
    for (;;) {
        uint32_t w = atomic_load_explicit(&s->word, memory_order_relaxed) & ~LL_PARKED;
        if (!(w & W_LOCKED)) {
            if (atomic_compare_exchange_weak_explicit(&s->word, &w, W_LOCKED, memory_order_seq_cst,
                                                      memory_order_relaxed))
                return;
            continue;
        }
        if (new_arrival(n, passed, end)) {
            end = shuffle(s, n);
            passed = 1;
        }
        if (parks(policy)) {
            struct shfl_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
            if (succ)
                promote(succ);
            ll_wait_while(&s->word, w, policy);
            continue;
        }
        /* spin, yield: until the word changes, or a new arrival is there to shuffle */
        unsigned k = 0;
        uint64_t start = 0;
        int counted = 0;
        while ((atomic_load_explicit(&s->word, memory_order_acquire) & ~LL_PARKED) == w) {
            ll_wait_step(policy);
            if ((++k & 63) == 0 && new_arrival(n, passed, end))
                break;
            if (policy == LIBLOCK_WAIT_SPIN && LL_UNLIKELY((k & LL_SPIN_CHECK_MASK) == 0))
                ll_spin_note_slow(&start, &counted);
        }
    }
}

/* Wait until our predecessor's leaving makes us the head. */
static void wait_turn(struct shfl_node *n, uint32_t v, int policy)
{
    while (v != ST_HEAD) {
        if (parks(policy) && v == ST_WAIT)
            v = ll_wait_while(&n->status, v, LIBLOCK_WAIT_PARK);
        else
            v = ll_wait_while(&n->status, v, policy);
    }
}

static LL_SLOW int shfl_lock_slow(liblock_t *l, struct shfl_lock *s, struct shfl_node *n)
{
    const int policy = ll_policy(l);
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&n->status, ST_WAIT, memory_order_relaxed);
    n->batch = 0;
    n->nid = my_node();
    struct shfl_node *pred = atomic_exchange_explicit(&s->tail, n, memory_order_seq_cst);
    if (pred) {
        uint32_t v = ST_WAIT;
        if (parks(policy) && (atomic_load_explicit(&pred->status, memory_order_relaxed) & ~LL_PARKED) == ST_HEAD) {
            v = ST_NEXT; /* behind the head: spin first */
            atomic_store_explicit(&n->status, v, memory_order_relaxed);
        }
        atomic_store_explicit(&pred->next, n, memory_order_release);
        wait_turn(n, v, policy);
    } else {
        atomic_store_explicit(&n->status, ST_HEAD, memory_order_relaxed); /* a rank for arrivals */
    }
    head_wait(s, n, policy);
    /* admitted: leave the queue, making the successor the head */
    struct shfl_node *succ = atomic_load_explicit(&n->next, memory_order_acquire);
    if (!succ) {
        struct shfl_node *expect = n;
        if (atomic_compare_exchange_strong_explicit(&s->tail, &expect, NULL, memory_order_seq_cst,
                                                    memory_order_relaxed))
            return 0;
        unsigned k = 0;
        while (!(succ = atomic_load_explicit(&n->next, memory_order_acquire))) {
            /* the arrival swapped the tail and is linking; it may have been preempted */
            if (policy == LIBLOCK_WAIT_YIELD || (parks(policy) && ++k > 256))
                ll_yield();
            else
                ll_pause();
        }
    }
    ll_wake(&succ->status, ST_HEAD, policy);
    return 0;
}

static int shfl_lock(liblock_t *l, void *vnode)
{
    struct shfl_lock *s = LL_STATE(l, struct shfl_lock);
    uint32_t w = 0;
    if (LL_LIKELY(atomic_compare_exchange_strong_explicit(&s->word, &w, W_BARGE | W_LOCKED, memory_order_seq_cst,
                                                          memory_order_relaxed)))
        return 0;
    if (try_barge(s, w))
        return 0;
    return shfl_lock_slow(l, s, vnode);
}

static int shfl_trylock(liblock_t *l, void *vnode)
{
    (void)vnode;
    struct shfl_lock *s = LL_STATE(l, struct shfl_lock);
    if (try_barge(s, atomic_load_explicit(&s->word, memory_order_relaxed) & ~LL_PARKED))
        return 0;
    if (!word_locked(s))
        bump(&s->closed); /* free, but owed to the head (a probe; racy by design) */
    return EBUSY;
}

static int shfl_unlock(liblock_t *l, void *vnode)
{
    (void)vnode;
    struct shfl_lock *s = LL_STATE(l, struct shfl_lock);
    /* we hold the word: only the head's parking bit may change under us */
    uint32_t w = atomic_load_explicit(&s->word, memory_order_relaxed) & ~(LL_PARKED | W_LOCKED);
    if (!atomic_load_explicit(&s->tail, memory_order_seq_cst))
        w = 0; /* nobody queued: the fast path is open again */
    ll_wake(&s->word, w, ll_policy(l));
    return 0;
}

/* Test probes: `word` (the lock word), `tail` (0 iff no node is queued,
 * else the tail node's address), `passes` (shuffle passes), `moves`
 * (waiters moved forward by them), `closed` (trylocks that found the word
 * unlocked but the barge count at its cap); `max_batch`. */
static void shfl_stats(const liblock_t *l, struct ll_stats *o)
{
    const struct shfl_lock *s = LL_STATE(l, const struct shfl_lock);
    ll_stats_put(o, "word", atomic_load_explicit(&s->word, memory_order_relaxed));
    ll_stats_put(o, "tail", (int64_t)(intptr_t)atomic_load_explicit(&s->tail, memory_order_relaxed));
    ll_stats_put(o, "passes", (int64_t)atomic_load_explicit(&s->passes, memory_order_relaxed));
    ll_stats_put(o, "moves", (int64_t)atomic_load_explicit(&s->moves, memory_order_relaxed));
    ll_stats_put(o, "closed", (int64_t)atomic_load_explicit(&s->closed, memory_order_relaxed));
    ll_stats_put(o, "max_batch", s->max_batch);
}

const struct ll_ops ll_ops_shfllock = {
    .name = "shfllock",
    .description = "ShflLock: test-and-set word with a bounded fast path, MCS queue whose head shuffles waiters of "
                   "its NUMA node forward into batches (LIBLOCK_SHFL_BATCH); bounded bypass",
    .source = "Kashyap, Calciu, Cheng, Min and Kim, Scalable and Practical Locking with Shuffling, SOSP 2019, "
              "sections 3, 4.1 and 4.2",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "only the queue's head (on the lock word) and the waiter behind it spin, then sleep; the others sleep at once; the head, while the lock is held, shuffles the queue and wakes the waiter that will follow it, so that waiter is running by its turn; a running thread may take a free lock in one CAS, at most 4 times before the head's next turn; not FIFO, bypass bounded",
    .state_size = sizeof(struct shfl_lock),
    .node_size = sizeof(struct shfl_node),
    .init = shfl_init,
    .destroy = shfl_destroy,
    .lock = shfl_lock,
    .trylock = shfl_trylock,
    .unlock = shfl_unlock,
    .stats = shfl_stats,
};
