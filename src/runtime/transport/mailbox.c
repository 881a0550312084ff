/*
 * mailbox.c - per-thread mailboxes over cache coherence; the protocol, its
 * orderings and the waiting rules are in mailbox.h.
 *
 * Life cycle.  A thread's mailbox is made on its first ll_mbox_self() (from
 * the pool of mailboxes left by exited threads when there is one) and an
 * ll_thread_on_exit hook gives it back to the pool when the thread exits,
 * provided every lane is empty (head == tail).  A thread that exits with a
 * word still queued, or while a sender may still be about to write (which a
 * correct use of hyblock or hybcomb never leaves behind), or while it holds
 * a lock (a hyblock lock word may name its mailbox; a hyblock level still
 * in use), keeps its mailbox
 * out of the pool for ever: nobody else will read that lane, and reusing it
 * could hand the new owner a stranger's message.  Mailboxes are never
 * freed, so a sender that is still finishing a send (its futex_wake after
 * publishing) never touches freed memory; the memory is
 * bounded by the largest number of threads alive at once.
 */
#include "mailbox.h"

#include <limits.h>
#include <stdlib.h>

__thread ll_mbox_t *ll_mbox_tls __attribute__((tls_model("initial-exec")));
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static ll_mbox_t *pool;
static _Atomic unsigned long created;

unsigned long ll_mbox_debug_created(void) { return atomic_load_explicit(&created, memory_order_relaxed); }

/* The pool's mutex, taken with a bounded number of attempts
 * (ll_mutex_lock_bounded): when it cannot be had, a pop allocates afresh
 * and a push leaves the item out of the pool. */
static int pool_lock(void) { return ll_mutex_lock_bounded(&pool_mu); }

static int all_empty(ll_mbox_t *m)
{
    for (unsigned c = 0; c < m->nchunks; c++) {
        struct ll_lane *v = atomic_load_explicit(&m->chunk[c], memory_order_relaxed);
        for (unsigned i = 0; i < LL_MBOX_CHUNK; i++)
            if ((atomic_load_explicit(&v[i].tail, memory_order_acquire) & LL_MBOX_MASK) !=
                atomic_load_explicit(&v[i].head, memory_order_relaxed))
                return 0;
    }
    return 1;
}

static void mbox_thread_exit(ll_thread_t *self, void *arg)
{
    ll_mbox_t *m = arg;
    ll_mbox_tls = NULL;
    /* A thread that exits holding a lock may still be named in a hyblock
     * lock word, so a waiter may write to it later: keep it too (a hyblock
     * level still in use says so even for holds the API's stack does not
     * see: the interposer's). */
    ll_mbox_levels_merge(m);
    int levels_in_use = 0;
    for (unsigned w = 0; w < sizeof m->levels / sizeof *m->levels; w++)
        levels_in_use |= m->levels[w] != 0;
    if (self->nheld || levels_in_use || !all_empty(m))
        return; /* kept out of the pool for ever (see the header) */
    if (!pool_lock())
        return;
    m->pool_next = pool;
    pool = m;
    pthread_mutex_unlock(&pool_mu);
}

int ll_mbox_reserve(ll_mbox_t *m, unsigned nlanes)
{
    if (nlanes > LL_MBOX_MAX_LANES)
        return EINVAL;
    while (m->nchunks * LL_MBOX_CHUNK < nlanes) {
        struct ll_lane *v = ll_alloc_aligned(LL_MBOX_CHUNK * sizeof *v);
        if (!v)
            return ENOMEM;
        atomic_store_explicit(&m->chunk[m->nchunks], v, memory_order_release);
        m->nchunks++;
    }
    return 0;
}

ll_mbox_t *ll_mbox_self_slow(void)
{
    ll_mbox_t *m;
    ll_thread_t *self = ll_self();
    if (!self)
        return NULL;
    m = NULL;
    if (pool_lock()) {
        m = pool;
        if (m)
            pool = m->pool_next;
        pthread_mutex_unlock(&pool_mu);
    }
    if (!m) {
        m = ll_alloc_aligned(sizeof *m);
        if (!m)
            return NULL;
        if (ll_mbox_reserve(m, LL_MBOX_CHUNK)) {
            free(m);
            return NULL;
        }
        atomic_fetch_add_explicit(&created, 1, memory_order_relaxed);
    }
    m->hook.fn = mbox_thread_exit;
    m->hook.arg = m;
    ll_thread_on_exit(self, &m->hook);
    ll_mbox_tls = m;
    return m;
}

static inline int parks(int policy) { return policy == LIBLOCK_WAIT_SPIN_THEN_PARK || policy == LIBLOCK_WAIT_PARK; }

/* Sender: wait until the lane has room for k words after tail t.  Pause for
 * the spin budget (for ever under spin), then yield between checks: never
 * park (mailbox.h, "Waiting"). */
static void wait_space(struct ll_lane *ln, uint32_t t, unsigned k, int policy)
{
    if (LL_MBOX_CAP - ((t - atomic_load_explicit(&ln->head, memory_order_acquire)) & LL_MBOX_MASK) >= k)
        return;
    uint64_t start = ll_cycles();
    uint64_t budget = policy == LIBLOCK_WAIT_SPIN ? UINT64_MAX
                      : policy == LIBLOCK_WAIT_SPIN_THEN_PARK ? ll_spin_budget_cycles()
                                                              : 0;
    unsigned n = 0;
    uint64_t slow_start = 0;
    int counted = 0;
    while (LL_MBOX_CAP - ((t - atomic_load_explicit(&ln->head, memory_order_acquire)) & LL_MBOX_MASK) < k) {
        if (budget == UINT64_MAX) {
            ll_pause();
            if (LL_UNLIKELY((++n & LL_SPIN_CHECK_MASK) == 0))
                ll_spin_note_slow(&slow_start, &counted);
        } else if (budget && ll_cycles() - start < budget) {
            ll_pause();
        } else {
            ll_yield();
        }
    }
}

/* Claim room for k words and write them; returns the new tail value. */
static inline uint32_t fill(struct ll_lane *ln, const uint64_t *words, unsigned k, int policy)
{
    /* We are the lane's only writer of the counter (the receiver only adds
     * LL_PARKED), and the protocol ordered us after the previous writer. */
    uint32_t t = atomic_load_explicit(&ln->tail, memory_order_relaxed) & LL_MBOX_MASK;
    wait_space(ln, t, k, policy);
    for (unsigned i = 0; i < k; i++)
        ln->ring[(t + i) % LL_MBOX_CAP] = words[i];
    return (t + k) & LL_MBOX_MASK;
}

_Atomic uint32_t *ll_mbox_post(ll_mbox_t *to, unsigned lane, const uint64_t *words, unsigned k, int policy)
{
    struct ll_lane *ln = ll_mbox_lane(to, lane);
    uint32_t nt = fill(ln, words, k, policy);
    if (parks(policy)) {
        /* symmetric ("Parking" in mailbox.h): ordered with the receiver's CAS on tail */
        uint32_t old = atomic_exchange_explicit(&ln->tail, nt, memory_order_acq_rel);
        return (old & LL_PARKED) ? &ln->tail : NULL;
    }
    atomic_store_explicit(&ln->tail, nt, memory_order_release);
    return NULL;
}

_Atomic uint32_t *ll_mbox_post_announced(ll_mbox_t *to, unsigned lane, const uint64_t *words, unsigned k,
                                         int policy)
{
    struct ll_lane *ln = ll_mbox_lane(to, lane);
    uint32_t nt = fill(ln, words, k, policy);
    /* asymmetric ("Parking" in mailbox.h): the light side of the barrier.
     * The release store publishes the words; the compiler barrier keeps
     * the load of parked after it in program order, which is all the
     * receiver's heavy barrier needs (the CPU may still load early: the
     * barrier's argument covers that).  Relaxed is enough for the load: it
     * only decides whether to call futex_wake. */
    atomic_store_explicit(&ln->tail, nt, memory_order_release);
    atomic_signal_fence(memory_order_seq_cst);
    return atomic_load_explicit(&ln->parked, memory_order_relaxed) ? &ln->tail : NULL;
}

void ll_mbox_send(ll_mbox_t *to, unsigned lane, const uint64_t *words, unsigned k, int policy)
{
    while (k) {
        unsigned n = k < LL_MBOX_CAP ? k : LL_MBOX_CAP;
        _Atomic uint32_t *w = ll_mbox_post(to, lane, words, n, policy);
        if (w)
            ll_futex_wake(w, INT_MAX);
        words += n;
        k -= n;
    }
}

/* Receiver: wait until tail != head.  Where the CPU has a user-mode wait
 * instruction, the spin phase (all of it under spin) sleeps on the tail
 * line instead of pausing, in slices of at most UWAIT_SLICE_NS.
 * announce: NULL (symmetric), or the lane's `parked` (asymmetric: the
 * waiting layer sets it and runs the heavy barrier before it parks,
 * src/core/fastwake.c; we clear it once tail has moved, mailbox.h). */
#define UWAIT_SLICE_NS 50000
static void wait_nonempty(struct ll_lane *ln, uint32_t head, int policy, _Atomic uint32_t *announce)
{
    if ((atomic_load_explicit(&ln->tail, memory_order_acquire) & LL_MBOX_MASK) != head)
        return;
    int k = ll_uwait_kind();
    if ((k == LL_UWAIT_WAITPKG || k == LL_UWAIT_MONITORX) &&
        (policy == LIBLOCK_WAIT_SPIN || policy == LIBLOCK_WAIT_SPIN_THEN_PARK)) {
        uint64_t start = ll_cycles();
        uint64_t budget = policy == LIBLOCK_WAIT_SPIN ? UINT64_MAX : ll_spin_budget_cycles();
        uint64_t slice = ll_ns_to_cycles(UWAIT_SLICE_NS);
        for (;;) {
            if ((atomic_load_explicit(&ln->tail, memory_order_acquire) & LL_MBOX_MASK) != head)
                return;
            uint64_t now = ll_cycles();
            if (now - start >= budget)
                break;
            uint64_t dl = now + slice;
            if (budget != UINT64_MAX && start + budget < dl)
                dl = start + budget;
            ll_uwait_change(&ln->tail, head, dl);
        }
        policy = LIBLOCK_WAIT_PARK; /* the spin phase is over */
    }
    if (announce) {
        (void)ll_wait_while_announced(&ln->tail, head, policy, announce);
        /* tail has moved: withdraw the announcement (only we store 1), so
         * that later messages do not make a futex_wake for nobody */
        if (atomic_load_explicit(announce, memory_order_relaxed))
            atomic_store_explicit(announce, 0, memory_order_relaxed);
        return;
    }
    ll_wait_while(&ln->tail, head, policy);
}

static void receive(ll_mbox_t *self, unsigned lane, uint64_t *out, unsigned k, int policy, int announced)
{
    struct ll_lane *ln = ll_mbox_lane(self, lane);
    uint32_t head = atomic_load_explicit(&ln->head, memory_order_relaxed);
    while (k) {
        wait_nonempty(ln, head, policy, announced ? &ln->parked : NULL);
        uint32_t t = atomic_load_explicit(&ln->tail, memory_order_acquire) & LL_MBOX_MASK;
        unsigned n = (t - head) & LL_MBOX_MASK;
        if (n > k)
            n = k;
        for (unsigned i = 0; i < n; i++)
            out[i] = ln->ring[(head + i) % LL_MBOX_CAP];
        head = (head + n) & LL_MBOX_MASK;
        atomic_store_explicit(&ln->head, head, memory_order_release);
        out += n;
        k -= n;
    }
}

void ll_mbox_receive(ll_mbox_t *self, unsigned lane, uint64_t *out, unsigned k, int policy)
{
    receive(self, lane, out, k, policy, 0);
}

uint64_t ll_mbox_receive1_announced(ll_mbox_t *self, unsigned lane, int policy)
{
    uint64_t w;
    receive(self, lane, &w, 1, policy, 1);
    return w;
}
