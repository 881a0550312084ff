/*
 * hybcomb - HybComb, hybrid combining: combiner identity in shared memory,
 * requests and replies by message, over the shared-memory transport of
 * src/runtime/transport/mailbox.h.
 *
 * Source: D. Petrovic, "Efficient Communication and Synchronization on
 * Manycore Processors", PhD thesis no. 6552, EPFL, 2015, section 6.1.3
 * "The combiner approach (HybComb)", Algorithm 4 and its correctness
 * sketch (also D. Petrovic, T. Ropars and A. Schiper, "Leveraging
 * Hardware Message Passing for Efficient Thread Synchronization", PPoPP
 * 2014).  The thesis sends requests and replies through the hardware
 * message queues of a manycore chip; here they travel through cache
 * coherence (below).
 *
 * Algorithm 4 (thread id, node my_node = {id, n_ops = MAX_OPS, done = false};
 * lock = {last_registered_combiner, departed_combiner}, both first pointing
 * to a dummy node {-, MAX_OPS, done = true}):
 *   loop: last = lock.last_reg
 *         if FAA(last.n_ops, 1) < MAX_OPS: send(last.id, req); return receive(1)
 *         elif CAS(lock.last_reg, last, my_node): my_node.n_ops = 0;
 *              wait until last.done; break
 *   ret = f(args)                                   -- own operation first
 *   while queue not empty: serve one request        -- optional pre-close drain
 *   total = min(SWAP(my_node.n_ops, MAX_OPS), MAX_OPS)   -- close registration
 *   serve requests until `total` have been served
 *   my_node <-> lock.departed (swap); my_node.done = false;
 *   lock.departed.done = true                       -- hand the role over
 *
 * How messages travel here (our adaptation).  On x86 the FAA on n_ops returns
 * a unique index i < MAX_OPS, so the request needs no shared queue: the
 * client writes it into slot req[i] of the combiner's node (one cache line
 * per slot, one writer per slot per epoch), and the combiner sweeps
 * req[0..total) in order, which the hardware prefetcher likes.  A slot is
 * full when its seq equals the node's current epoch (the node's count of
 * openings; 64 bits, so a stale slot never matches).  The reply is one
 * 64-bit word sent to lane LL_LANE_REPLY of the client's mailbox: a thread
 * waits for at most one reply at a time, so that lane has one writer, the
 * combiner that runs its request.
 *
 * Changes from Algorithm 4, and why:
 *  1. CLOSED instead of MAX_OPS.  Registration is closed by storing
 *     CLOSED = 2^62 (not MAX_OPS), and a FAA result r registers only if
 *     r < CLOSED and r < the epoch's MAX_OPS.  Nodes are shared by all
 *     hybcomb locks (change 3) and MAX_OPS is per lock, so a closed value
 *     of "MAX_OPS" could be below the next opening's limit.  total =
 *     min(SWAP(n_ops, CLOSED), MAX_OPS) as in the thesis.  The opening
 *     stores n_ops = MAX_OPS << 32 (count 0 in the low 32 bits), so a FAA
 *     result carries the limit of the very opening it registered with:
 *     a client that reads no field of the node after a FAA that did not
 *     register it cannot race with the node's next opening (reading
 *     node.open_max instead would race with the owner rewriting it for the
 *     next opening, and a node moving to a lock with a larger MAX_OPS
 *     could then give two clients one slot).  The
 *     count cannot reach 2^32 in one opening: a call FAAs the node it
 *     read from last_reg, and its failed CAS means last_reg has moved past
 *     that node, so one opening sees at most a few FAAs per thread.
 *  2. FREE tag.  A departing combiner that finds no successor CASes
 *     last_reg from its node X to X|FREE instead of setting X.done (it
 *     tests before handing over, so the CAS cannot hit a recycled node).
 *     An arrival that registers behind a FREE-tagged node does not wait
 *     (the thesis's "dummy with done = true"), a FAA is skipped on it (it is
 *     closed anyway), trylock is CAS(last_reg, X|FREE, mine) -- exact:
 *     the tag is set only on the tail of an empty queue and removed by any
 *     registration, so trylock never queues behind a combiner -- and
 *     destroy knows the lock is idle.  Cost: one CAS per pass that empties
 *     the queue.
 *  3. Nodes are per thread, not per lock: a thread keeps a small stack of
 *     spare nodes (one per nesting level) and a departing combiner pushes
 *     the old dummy it takes; nodes migrate between locks.  A node is never
 *     freed (stale clients may still FAA it; exited threads give theirs to
 *     a global pool), and a client that registered (r < MAX_OPS) on a node
 *     that is by now open for ANOTHER lock (it read last_reg of our lock,
 *     the node moved on) sees node.lock != ours, writes its slot as
 *     cancelled (fn = NULL, skipped by that combiner, which waits for it
 *     like any registered slot) and tries again.
 *  4. Starvation freedom (the middle ground the thesis suggests in section
 *     6.1.3, "use SWAP only if CAS fails several times"): after
 *     LIBLOCK_HYBCOMB_CAS_TRIES failed registration CASes in one call the
 *     thread registers with SWAP, which always succeeds and inserts it at
 *     the tail of the combiner queue, so every call finishes in a bounded
 *     number of its own steps plus the queue ahead of it (FIFO).
 *  5. lock/unlock (liblock_lock is promised on every algorithm and must
 *     exclude delegated sections).  lock() registers a node like a combiner
 *     but never opens it (n_ops stays >= CLOSED, so no client can register
 *     with it), waits for its predecessor, and returns holding the combiner
 *     role; unlock() departs as a combiner does.  Requests registered with
 *     combiners queued behind it wait; nothing runs concurrently with it.
 *  6. Delegation semantics (docs/api.md, "Delegated critical sections";
 *     docs/combining.md).  A combiner opens its
 *     node only if ll_may_run_foreign(self) at the call (it holds no
 *     liblock lock and is not inside a delegated critical section);
 *     otherwise it registers closed, runs its own request and departs, as
 *     lock/cs/unlock would.  unlock() never runs a foreign critical
 *     section (it never opened).  Every critical section run in the
 *     combiner role runs between ll_cs_enter/ll_cs_leave, so a nested
 *     lock/execute of the same lock returns EDEADLK (trylock EBUSY) and the
 *     thread counts as running delegated work.  A client (FAA path) runs
 *     nothing while it waits; its own thread may hold other locks, as with
 *     cc-synch.
 *  7. Waiting: the next combiner waits on its predecessor's done word
 *     through the waiting layer (ll_wait_while / ll_wake); a client waits
 *     for its reply in ll_mbox_receive (spin budget, UMWAIT/MWAITX where
 *     present, then park); the combiner waits for a registered slot that
 *     is not written yet (its client was preempted between FAA and store)
 *     by pausing for the spin budget and then yielding, so on an
 *     oversubscribed CPU the client gets to run.  The futex_wake calls for
 *     parked clients are made after the hand-over (deferred_wake.h).  A
 *     client whose combiner opened its node on the client's own CPU parks
 *     at once under spin-then-park (node.cpu, a hint written before the
 *     opening store like node.lock, and read, like node.lock, before the
 *     client publishes its slot): that combiner is not running while
 *     the client is, and spinning only keeps it off the CPU (cr.h,
 *     "Same-CPU waiters"; tests/test_same_cpu.c).
 *
 *  8. lock() barges under spin-then-park (the default), as oyama's does
 *     (oyama.c change 7).  Through the queue, every lock()/unlock()
 *     hand-over with more threads than CPUs goes to a thread that has
 *     parked and costs it a wake-up, so an unmodified program under the
 *     interposer whose critical sections are short would spend most of its
 *     time in wake-ups that glibc's barging mutex avoids.
 *     So lock() first takes the lock the way trylock does -- CAS of a
 *     FREE-tagged last_reg to its own node, exact as change 2 says -- and
 *     while the queue is not empty it spins for the spin budget (not at
 *     all while other lock() callers sleep, as tas_park.h argues) and then
 *     sleeps (barge_sleep.h).  After HC_LOCK_PATIENCE
 *     sleeps it registers in the queue as change 5 says, and from there it
 *     is FIFO like any combiner, so its wait stays bounded.
 *     Sleeping is barge_sleep.h's: glibc's mutex protocol on a side word
 *     (a sleepers mark and an eventcount), with the no-lost-wake-up
 *     argument.  A departure (unlock, or a combiner leaving) that finds
 *     the mark set clears it and wakes one sleeper, which sets it again
 *     before it looks at the lock again (the CAS at the top of the loop,
 *     or register_node, which takes a FREE-tagged tail at once).  The
 *     departure that puts the FREE tag in does so by a seq_cst CAS, as
 *     barge_sleep.h requires.  One wake-up at a time (the mark), not one
 *     per departure, and not spinning while others sleep, keep the
 *     departures' system calls and the spinners off the CPUs the running
 *     threads need; a thread woken less than two spin budgets ago also
 *     counts as a sleeper (barge_sleep.h's window), so a departure does not
 *     wake a second thread while the first is on its way.
 *     A departure that hands over wakes too, only so that sleepers count
 *     their patience while the queue stays busy.  The price is posix's:
 *     among lock() callers that barge there is no order.  execute() is
 *     unchanged (its callers register at once).
 *  9. Replies under spin-then-park are a plain store where they can be
 *     (not in the thesis, whose hardware queues need no parking).  The
 *     transport's symmetric protocol makes each reply an exchange of the
 *     client's lane tail, a locked instruction on the combiner's path that
 *     waits for a line the spinning client has just read.  A client that
 *     waits with spin-then-park says so in its slot (`announced`, written
 *     before the release store of seq, so the combiner's acquire load of
 *     seq orders it before the reply); it then waits with the transport's
 *     asymmetric protocol (mailbox.h, "Parking", which has the
 *     no-lost-wake-up argument: the client pays a membarrier before each
 *     sleep), and the combiner replies with ll_mbox_post_announced: a
 *     release store and a relaxed look at the client's `parked`.  Clients
 *     that park at once (their combiner runs on their CPU) would pay the
 *     membarrier on every request: they leave `announced` clear and get
 *     the exchange, as do all clients where the asymmetric protocol is off
 *     (ll_mbox_announce_ok: no membarrier, LIBLOCK_FASTWAKE=0; or
 *     LIBLOCK_HYBCOMB_ASYM=0, read at init).  The choice is per request,
 *     so the two kinds mix freely in one pass.
 *
 * Proof sketch (the thesis's, section 6.1.3, adapted).
 *   CS_queue: the nodes from the dummy (lock.departed, done = 1) to the
 *   tail lock.last_reg, each registered node's predecessor being the value
 *   its CAS/SWAP replaced.  Insertion = a successful CAS or a SWAP on
 *   last_reg (each returns a distinct previous value: modification order of
 *   one word), removal = departure.  L1: the structure is maintained (the
 *   FREE tag only marks "tail == dummy").  P1 (mutual exclusion): a thread
 *   runs critical sections in the combiner role only after reading
 *   done = 1 on its predecessor, or after its registration replaced a
 *   FREE-tagged value (the previous combiner had left and nobody was
 *   queued); a node's done is set, or its tag put in, once per
 *   registration of that node, by its departing owner, and a registration
 *   replaces a given value only once: one combiner at a time.  L2: n_ops
 *   < CLOSED only between an opening (store MAX_OPS << 32) and the closing
 *   SWAP, both by the node's owner while it is in CS_queue.
 *   L3/L4: a client whose FAA returned r < CLOSED with count (low 32
 *   bits) below the limit (high bits) did so between
 *   that opening and closing, so r < total and the combiner waits for slot
 *   r before departing; with change 3 the client's slot is on the node of
 *   the right lock or cancelled.  L5: a client's reply lane receives only
 *   its reply (one request outstanding per thread).  L6: every registered
 *   request is answered (the combiner sweeps 0..total and every slot
 *   below total is eventually written).  P2: deadlock-free, and with
 *   change 4 starvation-free.
 * Orderings, argued for C11 (x86-TSO gives each of them for free: every
 *   locked RMW is a full fence and plain stores are released in order, so
 *   on x86 the only cost is the RMWs themselves).
 *  - Opening: the owner writes lock, epoch, open_max, cpu and req, then
 *    stores n_ops = MAX_OPS << 32 with release.  A client's FAA (acq_rel)
 *    that returns r < CLOSED read from that store or a later FAA in its
 *    release sequence, so it synchronises with the opening and sees those
 *    fields; it reads them only if the FAA registered it, since only then
 *    does the next opening wait for it (for its slot's seq, written after
 *    those reads).  A client that is not registered reads none of them.
 *  - Request: the client writes fn/arg/reply, then seq = epoch with
 *    release; the combiner's acquire load of seq sees them.
 *  - Reply: the mailbox's release store (or exchange) of the lane tail
 *    after the critical section; the client's acquire load of it (mailbox.h).
 *    Which of the two (change 9) travels in the slot, ordered like fn.
 *  - Hand-over: the departing combiner's writes (every critical section it
 *    ran, lock.departed, the reset of the node it takes) happen before
 *    ll_wake(done = 1) (release exchange); the successor's ll_wait_while
 *    returns after an acquire load.  The FREE-tag CAS is release (seq_cst
 *    only for change 8's sleepers) and every
 *    registration (CAS/SWAP) is acq_rel, so a thread registering behind a
 *    FREE tag sees the previous pass too.
 *  - Node reuse: the departing thread resets done = 0 on the node it takes
 *    from lock.departed: it was that node's only waiter and has already
 *    returned from the wait.  The reset is published to whoever waits on
 *    the node next by the release of the registration that inserts it.
 *  - A closed node's slot array may be replaced (a lock with a larger
 *    MAX_OPS): every client of earlier openings has written its slot,
 *    which the combiner read (acquire) before closing, so nobody writes
 *    the old array any more.
 *
 * Parameters (read at liblock_init; docs/hybrid.md):
 *   LIBLOCK_HYBCOMB_MAX_OPS   requests of other threads one combiner takes
 *                             (default 200, the thesis's; 1..1000000);
 *   LIBLOCK_HYBCOMB_DRAIN     1: serve requests already written before
 *                             closing (the thesis's optional loop), 0: close
 *                             right after the own operation (default 1);
 *   LIBLOCK_HYBCOMB_CAS_TRIES failed CASes before the SWAP fallback
 *                             (default 8; 0 = always SWAP);
 *   LIBLOCK_HYBCOMB_ASYM      0: every spin-then-park reply is the
 *                             symmetric exchange (change 9; default 1).
 * Policies: spin, yield, spin-then-park (default).  FIFO among combiners
 * (queue order) and starvation-free (change 4); requests are run in slot
 * order within an opening, which is FAA order.
 * Condition variables: for lock() holders (the generic src/core/cond.c,
 * unlock hands over); inside a critical section run by execute() on the
 * combiner role, cond_wait returns EPERM, as on cc-synch.
 */
#include "internal.h"
#include "runtime/transport/mailbox.h"
#include "locks/combining/barge_sleep.h"
#include "locks/deferred_wake.h"
#include "platform/identity.h"

#include <stdlib.h>

#define HC_CLOSED (INT64_C(1) << 62)
/* n_ops while open: the opening's limit in bits 32.., the count below */
#define HC_OPEN(max) ((int64_t)(max) << 32)
#define HC_COUNT(v) ((uint32_t)(v))
#define HC_LIMIT(v) ((uint32_t)((uint64_t)(v) >> 32))
#define HC_FREE ((uintptr_t)1)
#define HC_MAX_OPS_DEFAULT 200
#define HC_CAS_TRIES_DEFAULT 8
#define HC_LOCK_PATIENCE 4 /* sleeps of a barging lock() before it queues (change 8) */

struct hc_req {
    _Atomic uint64_t seq; /* = the node's epoch when the slot holds a request of that opening */
    void *(*fn)(void *);  /* NULL: cancelled (change 3) */
    void *arg;
    uintptr_t tp;         /* the client's identity (platform/identity.h) */
    ll_mbox_t *reply;
    int announced; /* 1: the client waits with the asymmetric protocol (change 9) */
} __attribute__((aligned(LL_CACHELINE)));

struct hc_node {
    LL_ALIGNED _Atomic int64_t n_ops; /* clients' FAA; >= HC_CLOSED when not accepting */
    LL_ALIGNED _Atomic uint32_t done; /* combining_done: the next combiner's waiting word */
    /* Written by the owner while the node is closed, read by clients after
     * a registering FAA (synchronised by the opening store). */
    const void *lock;
    uint64_t epoch;
    uint32_t open_max;
    int cpu;          /* the combiner's CPU when it opened the node (a hint; see hc_execute) */
    uint32_t req_cap; /* owner only */
    struct hc_req *req;
    struct hc_node *spare_next; /* per-thread spare stack / global pool */
};

struct hc_lock {
    LL_ALIGNED _Atomic uintptr_t last_reg; /* struct hc_node * | HC_FREE */
    LL_ALIGNED struct hc_node *departed;   /* the dummy; read and written in the combiner role only */
    unsigned max_ops, cas_tries;
    int drain;
    /* statistics written in the combiner role (plain) */
    uint64_t passes, own, served, cancelled_seen, max_pass;
    /* registration statistics (relaxed atomics, registration path only) */
    LL_ALIGNED _Atomic uint64_t cas, cas_failed, swaps, cancelled;
    LL_ALIGNED struct barge_sleep ls; /* change 8: where barging lock() callers sleep */
    uint64_t spin_cycles; /* their spin budget, read-only after init */
    int asym;             /* change 9: spin-then-park replies may be announced; read-only after init */
};

struct hc_hold {
    struct hc_node *node;
};
_Static_assert(sizeof(struct hc_hold) <= LL_NODE_BYTES, "hybcomb hold too large");

static __thread struct {
    struct hc_node *spares;
    const liblock_t *combining; /* lock whose critical sections this thread runs now */
    int hooked;
    struct ll_exit_hook hook;
} hc_tls __attribute__((tls_model("initial-exec"))); /* one %fs-relative access per call, as ll_self_tls */

/* A client's section run with its identity (platform/identity.h, I3): the
 * combining scope on the client's copies, and, for a nested hybcomb call
 * inside, the combiner's mailbox (aux) in place of the client's, on whose
 * reply lane the client itself is waiting; the combiner, busy here, has no
 * request of its own outstanding, so its lane has one writer at a time. */
static __attribute__((noinline)) void *hc_as_caller(void *p)
{
    const struct ll_ident_cs *w = p;
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    ll_mbox_t *saved = ll_mbox_tls;
    ll_mbox_tls = w->aux;
    struct ll_cs_scope sc = ll_cs_enter(&hc_tls.combining, w->l);
    void *r = w->cs(w->arg);
    ll_cs_leave(&hc_tls.combining, sc);
    ll_mbox_tls = saved;
    pthread_setcancelstate(cancel, NULL);
    return r;
}

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hc_node *pool; /* nodes of exited threads and destroyed locks; never freed */

/* The pool's mutex, taken with a bounded number of attempts
 * (ll_mutex_lock_bounded): when it cannot be had, a pop allocates afresh
 * and a push leaves the item out of the pool. */
static int pool_lock(void) { return ll_mutex_lock_bounded(&pool_mu); }

static void pool_push_list(struct hc_node *first)
{
    if (!first)
        return;
    struct hc_node *last = first;
    while (last->spare_next)
        last = last->spare_next;
    if (!pool_lock())
        return; /* left out of the pool (never freed: stale clients may FAA them) */
    last->spare_next = pool;
    pool = first;
    pthread_mutex_unlock(&pool_mu);
}

static void hc_thread_exit(ll_thread_t *self, void *arg)
{
    (void)self;
    (void)arg;
    pool_push_list(hc_tls.spares);
    hc_tls.spares = NULL;
    hc_tls.hooked = 0;
}

/* A node with n_ops >= CLOSED and done = 0, or NULL (ENOMEM). */
static struct hc_node *node_get(void)
{
    struct hc_node *n = hc_tls.spares;
    if (LL_LIKELY(n != NULL)) {
        hc_tls.spares = n->spare_next;
        return n;
    }
    if (!hc_tls.hooked) {
        ll_thread_t *self = ll_self();
        if (!self)
            return NULL;
        hc_tls.hook.fn = hc_thread_exit;
        hc_tls.hook.arg = NULL;
        ll_thread_on_exit(self, &hc_tls.hook);
        hc_tls.hooked = 1;
    }
    n = NULL;
    if (pool_lock()) {
        n = pool;
        if (n)
            pool = n->spare_next;
        pthread_mutex_unlock(&pool_mu);
    }
    if (!n) {
        n = ll_alloc_aligned(sizeof *n);
        if (!n)
            return NULL;
        atomic_store_explicit(&n->n_ops, HC_CLOSED, memory_order_relaxed);
    }
    atomic_store_explicit(&n->done, 0, memory_order_relaxed);
    return n;
}

static inline void node_put(struct hc_node *n)
{
    n->spare_next = hc_tls.spares;
    hc_tls.spares = n;
}

static int hc_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct hc_lock *s = LL_STATE(l, struct hc_lock);
    s->max_ops = (unsigned)ll_env_long("LIBLOCK_HYBCOMB_MAX_OPS", HC_MAX_OPS_DEFAULT, 1, 1000000);
    s->cas_tries = (unsigned)ll_env_long("LIBLOCK_HYBCOMB_CAS_TRIES", HC_CAS_TRIES_DEFAULT, 0, 1000000);
    s->drain = (int)ll_env_long("LIBLOCK_HYBCOMB_DRAIN", 1, 0, 1);
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        s->spin_cycles = ll_spin_budget_cycles();
        s->asym = ll_env_long("LIBLOCK_HYBCOMB_ASYM", 1, 0, 1) && ll_mbox_announce_ok(ll_policy(l));
    }
    struct hc_node *d = NULL;
    if (pool_lock()) {
        d = pool;
        if (d)
            pool = d->spare_next;
        pthread_mutex_unlock(&pool_mu);
    }
    if (!d) {
        d = ll_alloc_aligned(sizeof *d);
        if (!d)
            return ENOMEM;
        atomic_store_explicit(&d->n_ops, HC_CLOSED, memory_order_relaxed);
    }
    atomic_store_explicit(&d->done, 1, memory_order_relaxed);
    s->departed = d;
    atomic_store_explicit(&s->last_reg, (uintptr_t)d | HC_FREE, memory_order_release);
    return 0;
}

static int hc_destroy(liblock_t *l)
{
    struct hc_lock *s = LL_STATE(l, struct hc_lock);
    uintptr_t lr = atomic_load_explicit(&s->last_reg, memory_order_acquire);
    if (!(lr & HC_FREE) || barge_anyone(&s->ls))
        return EBUSY; /* held, or a lock() caller sleeps on it (change 8) */
    struct hc_node *d = (struct hc_node *)(lr & ~HC_FREE);
    atomic_store_explicit(&d->done, 0, memory_order_relaxed);
    d->spare_next = NULL;
    pool_push_list(d); /* stale clients of this lock may still FAA it: never freed */
    atomic_store_explicit(&s->last_reg, 0, memory_order_relaxed);
    return 0;
}

/* Insert `mine` at the tail of the combiner queue (CAS, then SWAP after
 * cas_tries failures counted in *fails).  Returns the predecessor value,
 * or 0 if the CAS failed and the caller should look again. */
static uintptr_t try_register(struct hc_lock *s, struct hc_node *mine, uintptr_t seen, unsigned *fails)
{
    if (*fails >= s->cas_tries) {
        atomic_fetch_add_explicit(&s->swaps, 1, memory_order_relaxed);
        return atomic_exchange_explicit(&s->last_reg, (uintptr_t)mine, memory_order_acq_rel);
    }
    atomic_fetch_add_explicit(&s->cas, 1, memory_order_relaxed);
    if (atomic_compare_exchange_strong_explicit(&s->last_reg, &seen, (uintptr_t)mine, memory_order_acq_rel,
                                                memory_order_acquire))
        return seen;
    atomic_fetch_add_explicit(&s->cas_failed, 1, memory_order_relaxed);
    ++*fails;
    return 0;
}

/* Wait until the predecessor (value replaced by our registration) hands
 * the combiner role over. */
static inline void wait_turn(liblock_t *l, uintptr_t pred)
{
    if (pred & HC_FREE)
        return; /* the queue was empty */
    ll_wait_while(&((struct hc_node *)pred)->done, 0, ll_policy(l));
}

/* Register `mine` for the combiner role without accepting requests
 * (lock(), and execute() by a thread that may not run foreign sections)
 * and wait for our turn. */
static void register_node(liblock_t *l, struct hc_lock *s, struct hc_node *mine)
{
    unsigned fails = 0;
    uintptr_t pred;
    do {
        uintptr_t seen = atomic_load_explicit(&s->last_reg, memory_order_relaxed);
        pred = try_register(s, mine, seen, &fails);
    } while (!pred);
    wait_turn(l, pred);
}

/* change 8: lock() under spin-then-park.  Take a FREE-tagged last_reg as
 * trylock does; spin for the budget while the queue is busy (not while
 * other lock() callers sleep), then sleep until a departure; after
 * HC_LOCK_PATIENCE sleeps, register in the queue. */
static LL_SLOW void lock_barging_slow(liblock_t *l, struct hc_lock *s, struct hc_node *mine);

static inline void lock_barging(liblock_t *l, struct hc_lock *s, struct hc_node *mine)
{
    /* the uncontended case first: the loop's first attempt, inline */
    uintptr_t lr = atomic_load_explicit(&s->last_reg, memory_order_relaxed);
    if (LL_LIKELY(lr & HC_FREE) && LL_LIKELY(atomic_compare_exchange_strong_explicit(
                                       &s->last_reg, &lr, (uintptr_t)mine, memory_order_acq_rel, memory_order_relaxed)))
        return;
    lock_barging_slow(l, s, mine);
}

static void lock_barging_slow(liblock_t *l, struct hc_lock *s, struct hc_node *mine)
{
    for (int sleeps = 0; sleeps < HC_LOCK_PATIENCE; sleeps++) {
        uint64_t start = 0;
        for (;;) {
            uintptr_t lr = atomic_load_explicit(&s->last_reg, memory_order_relaxed);
            if ((lr & HC_FREE) && atomic_compare_exchange_weak_explicit(&s->last_reg, &lr, (uintptr_t)mine,
                                                                        memory_order_acq_rel, memory_order_relaxed))
                return;
            uint64_t now = ll_cycles();
            if (barge_sleepers(&s->ls, 2 * s->spin_cycles, now))
                break; /* others sleep, or one is on its way back: sleep now (barge_sleep.h) */
            if (!start)
                start = now;
            else if (now - start > s->spin_cycles)
                break;
            ll_pause();
        }
        uint32_t seq = barge_sleep_enter(&s->ls);
        if (!(atomic_load_explicit(&s->last_reg, memory_order_seq_cst) & HC_FREE))
            barge_sleep_wait(&s->ls, seq);
        barge_sleep_leave(&s->ls); /* before we look at the lock again (barge_sleep.h) */
    }
    register_node(l, s, mine);
}

/* Leave the combiner role: take the dummy, make our node the dummy, and
 * either mark the queue empty (no successor) or hand over.  The empty test
 * comes BEFORE the hand-over: until our done is set (or the tag is in)
 * nobody can take our node from lock.departed and register it again, so
 * the CAS cannot succeed on a recycled node (ABA).  A tagged node's done
 * is never waited on, so it is left as it is. */
static void depart(liblock_t *l, struct hc_lock *s, struct hc_node *mine)
{
    struct hc_node *d = s->departed;
    s->departed = mine;
    atomic_store_explicit(&d->done, 0, memory_order_relaxed); /* we were its only waiter */
    node_put(d);
    uintptr_t expect = (uintptr_t)mine;
    if (atomic_load_explicit(&s->last_reg, memory_order_relaxed) == expect &&
        atomic_compare_exchange_strong_explicit(&s->last_reg, &expect, expect | HC_FREE, memory_order_seq_cst,
                                                memory_order_relaxed)) {
        barge_wake(&s->ls); /* after the seq_cst CAS: change 8 */
        return;
    }
    ll_wake(&mine->done, 1, ll_policy(l)); /* a successor registered behind us */
    barge_wake(&s->ls);
}

/* Open `mine` for requests of lock l: returns 1, or 0 if the slot array
 * could not be allocated (then the node stays closed). */
static int open_node(struct hc_lock *s, struct hc_node *mine, const liblock_t *l)
{
    if (mine->req_cap < s->max_ops) {
        struct hc_req *v = ll_alloc_aligned((size_t)s->max_ops * sizeof *v);
        if (!v)
            return 0;
        free(mine->req); /* closed, every earlier client has written its slot */
        mine->req = v;
        mine->req_cap = s->max_ops;
    }
    mine->lock = l;
    mine->epoch++;
    mine->open_max = s->max_ops;
    mine->cpu = ll_current_cpu();
    atomic_store_explicit(&mine->n_ops, HC_OPEN(mine->open_max), memory_order_release);
    return 1;
}

/* Wait for slot i of the current opening to be written: its client did
 * the FAA and is about to store (maybe preempted in between). */
static struct hc_req *wait_slot(liblock_t *l, struct hc_node *mine, uint32_t i)
{
    struct hc_req *r = &mine->req[i];
    if (LL_LIKELY(atomic_load_explicit(&r->seq, memory_order_acquire) == mine->epoch))
        return r;
    uint64_t start = ll_cycles();
    uint64_t budget = ll_policy(l) == LIBLOCK_WAIT_SPIN ? UINT64_MAX
                      : ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK ? ll_spin_budget_cycles()
                                                                : 0;
    while (atomic_load_explicit(&r->seq, memory_order_acquire) != mine->epoch) {
        if (budget && ll_cycles() - start < budget)
            ll_pause();
        else
            ll_yield();
    }
    return r;
}

static inline void serve(liblock_t *l, struct hc_lock *s, struct hc_req *r, struct ll_deferred_wakes *dw)
{
    if (LL_UNLIKELY(!r->fn)) {
        s->cancelled_seen++;
        return;
    }
    int announced = r->announced; /* read, like fn, after the acquire of seq */
    uint64_t ret = (uint64_t)(uintptr_t)ll_ident_run(r->tp, ll_ident_self(), hc_as_caller, l, r->fn, r->arg,
                                                     ll_mbox_tls);
    /* change 9: a plain store for clients that announce their sleep, the
     * exchange for the others (mailbox.h, "Parking") */
    _Atomic uint32_t *w = announced ? ll_mbox_post_announced(r->reply, LL_LANE_REPLY, &ret, 1, ll_policy(l))
                                    : ll_mbox_post(r->reply, LL_LANE_REPLY, &ret, 1, ll_policy(l));
    if (w) {
        if (dw->n < LL_DEFER_MAX)
            dw->w[dw->n++] = w;
        else
            ll_futex_wake(w, 1 << 30);
    }
    s->served++;
}

/* The combiner role, reached through execute(): own request, then (if the
 * node was opened) the registered ones, then depart. */
static void *combine(liblock_t *l, struct hc_lock *s, struct hc_node *mine, int opened, void *(*cs)(void *),
                     void *arg)
{
    struct ll_cs_scope sc = ll_cs_enter(&hc_tls.combining, l);
    void *ret = cs(arg);
    struct ll_deferred_wakes dw;
    dw.n = 0;
    uint32_t done = 0;
    if (opened) {
        uint32_t max = mine->open_max;
        if (s->drain)
            while (done < max && atomic_load_explicit(&mine->req[done].seq, memory_order_acquire) == mine->epoch)
                serve(l, s, &mine->req[done++], &dw);
        /* only the owner closes, so the old value is open: a count */
        uint32_t total = HC_COUNT(atomic_exchange_explicit(&mine->n_ops, HC_CLOSED, memory_order_acq_rel));
        if (total > max)
            total = max;
        while (done < total)
            serve(l, s, wait_slot(l, mine, done++), &dw);
    }
    s->passes++;
    s->own++;
    if (done > s->max_pass)
        s->max_pass = done;
    ll_cs_leave(&hc_tls.combining, sc);
    depart(l, s, mine);
    ll_wake_flush(&dw);
    return ret;
}

static void *hc_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    struct hc_lock *s = LL_STATE(l, struct hc_lock);
    if (LL_UNLIKELY(ll_cs_held_by_caller(hc_tls.combining, l))) {
        errno = EDEADLK;
        return NULL;
    }
    ll_mbox_t *mb = ll_mbox_self();
    if (LL_UNLIKELY(!mb)) {
        errno = ENOMEM;
        return NULL;
    }
    int foreign_ok = ll_may_run_foreign(ll_self_tls);
    struct hc_node *mine = NULL;
    unsigned fails = 0;
    uintptr_t pred;
    for (;;) {
        uintptr_t lr = atomic_load_explicit(&s->last_reg, memory_order_acquire);
        if (!(lr & HC_FREE)) {
            struct hc_node *last = (struct hc_node *)lr;
            int64_t v = atomic_fetch_add_explicit(&last->n_ops, 1, memory_order_acq_rel);
            uint32_t i = HC_COUNT(v);
            /* registered: decided from v alone (change 1) */
            if (v < HC_CLOSED && i < HC_LIMIT(v)) {
                struct hc_req *r = &last->req[i];
                int ours = last->lock == l;
                /* read before our slot is published: once it is, the
                 * combiner may finish the pass and open the node again */
                int combiner_cpu = last->cpu;
                /* A combiner of our own CPU is not running while we are:
                 * spinning for its reply only keeps it off the CPU, so
                 * park at once (as cr.h's "Same-CPU waiters").  Decided
                 * before the slot is published, because the combiner
                 * must learn from the slot how to reply (change 9). */
                int policy = ours ? ll_policy_behind(ll_policy(l), combiner_cpu, ll_current_cpu()) : ll_policy(l);
                int announced = s->asym && policy == LIBLOCK_WAIT_SPIN_THEN_PARK;
                r->fn = ours ? cs : NULL;
                r->arg = arg;
                r->tp = ll_ident_self();
                r->reply = mb;
                r->announced = announced;
                atomic_store_explicit(&r->seq, last->epoch, memory_order_release);
                if (ours) {
                    if (mine)
                        node_put(mine);
                    return (void *)(uintptr_t)(announced ? ll_mbox_receive1_announced(mb, LL_LANE_REPLY, policy)
                                                         : ll_mbox_receive1(mb, LL_LANE_REPLY, policy));
                }
                atomic_fetch_add_explicit(&s->cancelled, 1, memory_order_relaxed);
                continue; /* that node is open for another lock now (change 3) */
            }
        }
        if (!mine && !(mine = node_get())) {
            errno = ENOMEM;
            return NULL;
        }
        if ((pred = try_register(s, mine, lr, &fails)) != 0)
            break;
    }
    int opened = foreign_ok && open_node(s, mine, l);
    wait_turn(l, pred);
    return combine(l, s, mine, opened, cs, arg);
}

static int hc_lock(liblock_t *l, void *hold)
{
    struct hc_lock *s = LL_STATE(l, struct hc_lock);
    if (hc_tls.combining == l)
        return EDEADLK; /* called from a critical section of this lock */
    struct hc_node *mine = node_get();
    if (!mine)
        return ENOMEM;
    if (ll_policy(l) == LIBLOCK_WAIT_SPIN_THEN_PARK)
        lock_barging(l, s, mine); /* change 8 */
    else
        register_node(l, s, mine);
    s->passes++;
    ((struct hc_hold *)hold)->node = mine;
    return 0;
}

static int hc_trylock(liblock_t *l, void *hold)
{
    struct hc_lock *s = LL_STATE(l, struct hc_lock);
    if (hc_tls.combining == l)
        return EBUSY;
    uintptr_t lr = atomic_load_explicit(&s->last_reg, memory_order_relaxed);
    if (!(lr & HC_FREE))
        return EBUSY;
    struct hc_node *mine = node_get();
    if (!mine)
        return ENOMEM;
    if (!atomic_compare_exchange_strong_explicit(&s->last_reg, &lr, (uintptr_t)mine, memory_order_acq_rel,
                                                 memory_order_relaxed)) {
        node_put(mine);
        return EBUSY;
    }
    s->passes++;
    ((struct hc_hold *)hold)->node = mine;
    return 0;
}

static int hc_unlock(liblock_t *l, void *hold)
{
    depart(l, LL_STATE(l, struct hc_lock), ((struct hc_hold *)hold)->node); /* never runs others' requests */
    return 0;
}

static int hc_cond_release(liblock_t *l) { return ll_cs_cond_release(hc_tls.combining, l); }

static int hc_cond_reacquire(liblock_t *l) { return ll_api_lock(l); }

static int hc_thread_register(liblock_t *l)
{
    (void)l;
    return ll_mbox_self() ? 0 : ENOMEM;
}

/* Statistics (struct ll_ops .stats), for tests and `liblock bench
 * delegation` (combining rate, CAS per operation).  Counters are kept by
 * the thread in the combiner role (no atomics) except the registration
 * counters, relaxed atomic increments on the registration path only; a
 * snapshot taken while the lock is in use may be a few operations out of
 * step.  By name:
 *   max_ops     MAX_OPS of this lock
 *   cas_tries   failed CASes before the SWAP fallback
 *   drain       pre-close drain on (1) or off
 *   passes      times a thread held the combiner role (execute or lock)
 *   own         critical sections run by their own thread as combiner
 *   served      requests of other threads run by a combiner
 *   cancelled   request slots written as "cancelled" (node reused by another lock)
 *   cas         registration CASes attempted
 *   cas_failed  of which failed
 *   swaps       registrations by the SWAP fallback
 *   max_pass    most requests served in one pass (own excluded)
 *   tail_ops    the n_ops of the last registered combiner's node (requests
 *               registered with it so far, failed FAAs beyond MAX_OPS
 *               included) if that node is open for requests, else -1 */
static void hc_stats(const liblock_t *l, struct ll_stats *o)
{
    const struct hc_lock *s = LL_STATE(l, const struct hc_lock);
    ll_stats_put(o, "max_ops", s->max_ops);
    ll_stats_put(o, "cas_tries", s->cas_tries);
    ll_stats_put(o, "drain", s->drain);
    ll_stats_put(o, "passes", (int64_t)s->passes);
    ll_stats_put(o, "own", (int64_t)s->own);
    ll_stats_put(o, "served", (int64_t)s->served);
    ll_stats_put(o, "cancelled", (int64_t)atomic_load_explicit(&s->cancelled, memory_order_relaxed));
    ll_stats_put(o, "cas", (int64_t)atomic_load_explicit(&s->cas, memory_order_relaxed));
    ll_stats_put(o, "cas_failed", (int64_t)atomic_load_explicit(&s->cas_failed, memory_order_relaxed));
    ll_stats_put(o, "swaps", (int64_t)atomic_load_explicit(&s->swaps, memory_order_relaxed));
    ll_stats_put(o, "max_pass", (int64_t)s->max_pass);
    uintptr_t lr = atomic_load_explicit(&s->last_reg, memory_order_acquire);
    int64_t n = lr & HC_FREE ? HC_CLOSED : atomic_load_explicit(&((struct hc_node *)lr)->n_ops, memory_order_acquire);
    ll_stats_put(o, "tail_ops", n < HC_CLOSED ? (int64_t)HC_COUNT(n) : -1);
}

const struct ll_ops ll_ops_hybcomb = {
    .name = "hybcomb",
    .description = "HybComb: combiner identity in shared memory (CAS, SWAP fallback), requests in FAA-indexed slots of the combiner's node, replies through per-thread mailboxes",
    .source = "Petrovic, Efficient Communication and Synchronization on Manycore Processors (PhD thesis, EPFL 2015), section 6.1.3, Algorithm 4; Petrovic, Ropars and Schiper, PPoPP 2014",
    .props = LIBLOCK_PROP_STARVATION_FREE | LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) |
                LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "execute: clients wait for their reply on their own mailbox lane and sleep after the spin budget (at once if the combiner runs on their CPU); the combiner yields while a registered client that was preempted has not written its request; lock() barges like glibc's mutex when the queue is empty (spins, not while others sleep; sleeps; queues after 4 sleeps); combiner hand-over: FIFO",
    .state_size = sizeof(struct hc_lock),
    .node_size = sizeof(struct hc_hold),
    .init = hc_init,
    .destroy = hc_destroy,
    .lock = hc_lock,
    .trylock = hc_trylock,
    .unlock = hc_unlock,
    .execute = hc_execute,
    .cond_release = hc_cond_release,
    .cond_reacquire = hc_cond_reacquire,
    .thread_register = hc_thread_register,
    .stats = hc_stats,
};
