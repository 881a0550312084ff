/*
 * server.c - Remote Core Locking servicing threads: the scan of the
 * request array, serving and answering a request, idle parking, leaving
 * the pool.  The management and backup threads, thread creation and a
 * server's thread start/stop are in pool.c; starting, stopping, finding
 * and counting servers, default servers, statistics and fork are in
 * registry.c.
 *
 * Source: J.-P. Lozi, "Towards More Scalable Mutual Exclusion for
 * Multicore Architectures", PhD thesis, UPMC (Paris 6), 2014, section 4.1:
 * Algorithm 9 (client), Algorithm 10 (servicing thread), Algorithm 11
 * (manager and backup threads, written here from the prose of sections
 * 4.1.2.1-4.1.2.2); the per-server statistics of section 5.3.5.1; the
 * single-server core as in J.-P. Lozi, F. David, G. Thomas, J. Lawall and
 * G. Muller, "Remote Core Locking: Migrating Critical-Section Execution to
 * Improve the Performance of Multithreaded Applications", USENIX ATC 2012,
 * and J.-P. Lozi, "Le Remote Core Lock (RCL) : une nouvelle technique de
 * verrouillage pour les architectures multi-coeur", CFSE 2011.
 *
 * ---- Threads of a server (all bound to the server's CPU) ----------------
 * Servicing threads (SCHED_FIFO) run the loop of this file; the management
 * and backup threads, thread creation, elections, degraded mode and starting
 * and stopping a server's threads are in pool.c.
 * A free servicing thread that sees another free one leaves the pool: it
 * pushes itself on the `prepared` stack and sleeps on a futex (its `wake`
 * word) until the manager or backup hands it work again.  So the pool
 * shrinks back to one thread once blocked CSs complete.
 *
 * ---- Request slots ------------------------------------------------------
 * One array of LIBLOCK_RCL_SLOTS (default 4096 = 256 KB) one-line slots per
 * server, plus one overflow slot, on the server's NUMA node.  Slot i belongs
 * to client id i (ids are shared by all servers, allocated on a thread's
 * first request, reused after it exits; ids.c); the overflow slot is
 * shared, under ovf_mutex, by threads that found every id taken (TRYLOCK
 * and UNLOCK requests only; direct.c, "Without a client id").  Client: write lock,
 * ctx, flags, then fn (release).  Server: read fn (acquire); run; release
 * the lock (I4); write ret, then clear fn (release; for a client that may
 * park, followed by the wake-up check of reply(), and a seq_cst exchange
 * instead of the store for a client that parks without the heavy barrier:
 * client.c, "Parking");
 * the client's acquire load of fn == NULL makes ret and the CS's effects
 * visible.  The scan stops at the id watermark (1 + highest id in use),
 * then looks at the overflow slot.  A scan that found nothing is followed
 * by a pause after every second scan while the server answered a request
 * recently (within RCL_HOT_PASSES empty scans), after every scan once it
 * has been idle longer (serve_loop, "Polling").  A request and a reply are
 * each, in the common case, one store to the slot's line: the client
 * writes lock, ctx and flags only when they differ from the slot's last
 * request, the server ret only when it differs from the last reply
 * (submit, reply: a second store to a line the other side is polling may
 * find it stolen by a poll in between and pay a second transfer).
 *
 * ---- Invariants and the argument for local atomics ----------------------
 * (I1) server->busy[], n_free, n_servicing, is_alive, timestamp and the
 *      statistics are written ONLY by threads bound to the server's CPU.
 *      Hence the non-LOCK cmpxchg/add of local_atomic.h is correct on them:
 *      no other CPU's write can fall between the read and the write-back of
 *      such an instruction, and the single instruction is atomic against
 *      preemption on this CPU.  lock->is_locked is among them only for a
 *      request-only lock; on a DIRECT lock (lk->direct, fixed at init)
 *      clients take and release it themselves (direct.c, "Direct
 *      lock/unlock"), so every read-modify-write of that word is a real
 *      atomic (rcl_take in rcl.h chooses by lk->direct).  Server threads that could not be bound
 *      (never the case after a successful start) would make server->local
 *      0 and every local operation a real atomic.
 * (I2) is_locked is a test-and-set lock word shared by everyone: a CS for
 *      lock L runs only while its runner set L->is_locked 0 -> 1 (CAS);
 *      a client holds L after a CAS 0 -> 2 (its own, or the server's for a
 *      LOCK/TRYLOCK request) and releases it with an exchange to 0; a
 *      servicing thread taking a lock of its own server (nesting) CASes
 *      0 -> 1 itself and yields while it is held.  So delegated CSs,
 *      lock/unlock sections and nested sections of one lock are mutually
 *      exclusive.  When a request is skipped because L is held the server
 *      sets L->want, and clears it when it takes L for a request: clients
 *      then queue behind with requests (direct.c).
 * (I3) A slot is served by at most one thread: a servicing thread first
 *      claims busy[i] (local CAS 0 -> 1), re-reads fn under the claim, and
 *      keeps the claim until it has cleared fn.  Without the claim, a
 *      thread preempted between reading a request and taking its lock could
 *      run it a second time after another thread had served it (servicing
 *      threads preempt one another: page faults, the manager's elections).
 *      The claim lives in a server-private array, not in the client's line,
 *      so it costs no coherence traffic.
 * (I4) Completion order: is_locked = 0 (and the thread's own bookkeeping:
 *      in_cs = 0, n_free), then ret, fn = NULL (the reply), then busy = 0,
 *      then (a client that parked) the futex wake of its slot.  Every
 *      request (CS, LOCK/TRYLOCK grant, UNLOCK) leaves the lock word as
 *      its caller will find it BEFORE the reply: once a caller has its
 *      answer, the server does not touch the lock again for that request,
 *      so liblock_destroy right after execute returned answers 0 and may
 *      free the lock (serve_one says why the orderings suffice).
 *      A CS's effects are released to the next holder of L by the release
 *      store of is_locked (acquired by the next holder's CAS), and to
 *      the client by the release store (or seq_cst exchange) of fn.
 *
 * ---- Idle parking ---------------------------------------------------------
 * Not in the thesis: so that an unused server does not keep a SCHED_FIFO
 * thread spinning, a lone servicing thread whose passes answered nothing
 * for LIBLOCK_RCL_IDLE_US (default 5 ms; 0 = never) swaps server->idle to
 * 1 (a full fence), rescans the array, and sleeps on the idle futex if no
 * request there can be answered now (any_servable: pending requests whose
 * lock is held by a client's lock/unlock section wait for that client's
 * UNLOCK, a new request).  A polling client checks server->idle every 64
 * polls (and before posting) and, if set, swaps it to 0 and wakes the
 * futex; a parking client checks it after its full fence (client.c).  No
 * lost wake-up: either the rescan (after the fence) sees the client's
 * request, or the client, which keeps polling until served or checks
 * after its own fence before it sleeps, loads idle == 1.  The manager and
 * backup sleep on the same futex while the server is idle.
 *
 * With a client on the server's CPU (a request flagged RCL_F_COLOC was seen
 * since the last park: coloc_recent) the servicing thread parks as soon as
 * a pass answers nothing, not after the time-out: that client runs only
 * while the server sleeps (client.c, "Colocated clients").
 *
 * A DORMANT server (the child of a fork, see "fork()" below) has no
 * threads and `idle` set, so the first client that needs it calls
 * rcl_wake_idle, which creates its threads (revive) instead of waking them.
 *
 * Waiting policies (client side, client.c): spin, spin-then-park (the
 * default), park and yield.  Servicing threads waiting for another
 * server's reply always yield, so their own server's other threads can run.
 *
 * ---- Sharing the CPU --------------------------------------------------------
 * Servers of different processes on one CPU (a forked child's, or another
 * program's) run at the same SCHED_FIFO priority, and FIFO never takes the
 * CPU from a running thread for one of equal priority: without help, a busy
 * server would keep the other waiting until it idle-parks (5 ms), and
 * their managers' elections would reorder them only every tick, so the
 * other process would see latency spikes of a tick.  So a servicing
 * thread calls sched_yield()
 * once it has run for LIBLOCK_RCL_SHARE_US (default 200 us; 0 = never)
 * since its last yield (checked every 64 passes): the other process's
 * server gets the CPU for its own slice, and when nothing else of that
 * priority is runnable the call returns at once, a system call per share.
 *
 * ---- Breathing ------------------------------------------------------------
 * sched_yield() hands the CPU only to threads of the caller's priority.  A
 * backup thread (FIFO P-1, pool.c) of another process on this CPU would
 * therefore never run while our servicing thread is busy; it runs only to
 * exit, but until it has, that process stays a zombie and its parent's
 * waitpid() waits.  So once a servicing thread has run for one round-robin
 * slice (the manager's default tick, 100 ms) since it last slept, it asks
 * whether another process runs a server on this CPU, or did and has not
 * yet gone (cpushare.c: one fcntl, and a read of /proc/PID/stat while one
 * goes) and,
 * if so, sleeps for LIBLOCK_RCL_BREATHE_US (default
 * 100 us; 0 = never) instead of that share's yield: the lower-priority
 * threads of the CPU run until the timer wakes the servicing thread, which
 * then preempts them; a breath
 * must be long enough for a dying thread to finish its exit, or it is
 * preempted at every breath and never does (tests/test_mixed.c, fork).
 * Degraded servers (CFS) do not breathe.  It changes no ordering: the
 * thread is free, between passes, holding nothing, as at a yield.
 *
 * ---- Process exit ---------------------------------------------------------
 * Servers are never stopped at exit: destructors and atexit handlers that
 * run after liblock's destructor, and threads still running while another
 * thread calls exit(), may still lock; their requests are served until the
 * process ends (rcl_at_exit only prints statistics).
 */
#include "rcl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

char rcl_op_markers[4];


/* ======================================================================
 * servicing threads
 * ====================================================================== */
static void unclaim(struct rcl_server *s, unsigned i)
{
    atomic_store_explicit(&s->busy[i], 0, memory_order_release);
}

/* Answer the request in r: store ret, clear fn.  A client that may park
 * (RCL_F_WAKE) is then looked for: read `parked`, and if the client
 * announced itself, reset the word and return 1: the caller must
 * futex-wake &r->parked (after its own bookkeeping, so the system call
 * delays no one else).  Two protocols (argument in client.c, "Parking"):
 *   asymmetric (WAKE alone, spin-then-park clients): fn is cleared with a
 *     plain release store and `parked` read after a compiler barrier only;
 *     the client issues the heavy barrier (membarrier) before it sleeps, so
 *     this path has no fence and no locked instruction;
 *   symmetric (WAKE | FENCE: park-at-once and colocated clients, or no
 *     membarrier): fn is cleared with a seq_cst exchange (a full fence)
 *     before `parked` is read.
 * flags is read before fn is cleared: after that the slot belongs to the
 * client again. */
static inline int reply(struct rcl_slot *r, void *ret)
{
    uint32_t flags = r->flags;
    if (r->ret != ret) /* (header: the reply is then fn's store alone; only servicing threads write ret) */
        r->ret = ret;
    if (LL_LIKELY(!(flags & RCL_F_FENCE))) {
        atomic_store_explicit(&r->fn, NULL, memory_order_release);
        if (LL_LIKELY(!(flags & RCL_F_WAKE)))
            return 0; /* a spin client: nobody sleeps on this slot */
        /* the light side of the asymmetric barrier: the store of fn, then
         * (in program order; the CPU may still reorder them, which the
         * client's membarrier undoes) the load of parked */
        atomic_signal_fence(memory_order_seq_cst);
        if (LL_LIKELY(atomic_load_explicit(&r->parked, memory_order_relaxed) == 0))
            return 0;
    } else {
        atomic_exchange_explicit(&r->fn, NULL, memory_order_seq_cst);
        if (atomic_load_explicit(&r->parked, memory_order_seq_cst) == 0)
            return 0;
    }
    return atomic_exchange_explicit(&r->parked, 0, memory_order_seq_cst) != 0;
}

static inline void note_coloc(struct rcl_server *s, const struct rcl_slot *r)
{
    if (LL_UNLIKELY(r->flags & RCL_F_COLOC) && !atomic_load_explicit(&s->coloc_recent, memory_order_relaxed))
        atomic_store_explicit(&s->coloc_recent, 1, memory_order_relaxed);
}

/* A delegated CS returned holding locks it took (memcached's lru_pull_tail
 * takes an item lock inside its LRU-lock section and releases it after the
 * section, on its own thread).  The servicing thread forgets them: a hold
 * record left on it would make its next CS on that lock fail with EDEADLK,
 * and the lock belongs to the caller now: an RCL lock is marked `handed`,
 * and the interposer lets the caller's unlock of such a normal mutex
 * through (rcl_unlock_handed; docs/rcl.md, "What a delegated critical
 * section may do").  Only the records go; the locks stay held.  (The
 * release store of `handed` is read, with acquire, by the caller after it
 * got the reply, which is published later by this thread.) */
static __attribute__((noinline)) void hand_over_holds(ll_thread_t *self, unsigned depth)
{
    ll_warn_once("rcl_handover", "liblock: rcl: a delegated critical section returned with a lock it took still "
                                 "held; its caller must release it (docs/rcl.md)");
    while (self->nheld > depth) {
        liblock_t *l = self->held[self->nheld - 1]->lock;
        if (LL_OPS(l)->lock == rcl_lock_lock) /* an RCL lock: its caller may unlock it (rcl_unlock_handed) */
            atomic_store_explicit(&((struct rcl_lock *)l->_state)->handed, 1, memory_order_release);
        ll_hold_pop_at(self, self->nheld - 1);
    }
}

/* A client's section run with its identity (platform/identity.h, I3).  Only
 * the client's ll_ident_tls line is written (the servicing thread's RCL
 * state and mark, for the slow paths: rcl_nested_enter), and cancellation
 * is held off (I5); both are put back before the switch back.  The
 * client's RCL state (struct rcl_tls) is left alone: the client reads it
 * on every request, and a store here would cost it a line transfer each
 * time.  A nested RCL call inside therefore starts as the client's, and
 * finds out that it is not when the client's slot on the server it wants
 * is the one being served (rcl_nested_on). */
static __attribute__((noinline)) void *rcl_as_caller(void *p)
{
    const struct ll_ident_cs *w = p;
    int cancel;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel);
    struct ll_ident_tls *it = &ll_ident_tls;
    void *runner = it->runner;
    int servicing = it->servicing;
    it->runner = w->aux;
    it->servicing = 1;
    void *ret = w->cs(w->arg);
    it->servicing = servicing;
    it->runner = runner;
    pthread_setcancelstate(cancel, NULL);
    return ret;
}

/* A nested call detected by rcl_nested_on: for its length, the servicing
 * thread's RCL state replaces the client's in this (the client's)
 * thread-local copy, but for napi_held and the exit hook, which belong to
 * the client's hold stack and life.  So the call takes the path it takes
 * on the servicing thread: the local path for a lock of that server (a
 * lock the section already runs under: EDEADLK), and the servicing
 * thread's client id for a request to another server (the client's own
 * id has this request pending).  What the call changes in that state (an
 * id taken, pacing, a condition wait's mode) is kept for the servicing
 * thread.  0: there is no servicing thread here (the caller must not go
 * on as the client: its slot is busy). */
int rcl_nested_enter(struct rcl_tls *saved)
{
    struct rcl_tls *srv = ll_ident_tls.runner;
    if (!srv)
        return 0;
    struct rcl_tls *t = &rcl_tls;
    *saved = *t;
    *t = *srv;
    t->napi_held = saved->napi_held;
    t->hook = saved->hook;
    return 1;
}

void rcl_nested_leave(struct rcl_tls *saved)
{
    struct rcl_tls *srv = ll_ident_tls.runner;
    struct rcl_tls *t = &rcl_tls;
    int napi = t->napi_held;
    struct ll_exit_hook hook = srv->hook;
    *srv = *t;
    srv->hook = hook;
    *t = *saved;
    t->napi_held = napi;
}

/* The `want` hint (rcl.h): set when a request is skipped because its lock
 * is held, cleared when the server takes the lock for a request.  Only
 * servicing threads write it; it orders nothing (direct.c, "Direct
 * lock/unlock": it only steers clients to queue behind pending requests). */
static inline void want_set(struct rcl_lock *lk)
{
    if (!atomic_load_explicit(&lk->want, memory_order_relaxed))
        atomic_store_explicit(&lk->want, 1, memory_order_relaxed);
}
static inline void want_clear(struct rcl_lock *lk)
{
    if (atomic_load_explicit(&lk->want, memory_order_relaxed))
        atomic_store_explicit(&lk->want, 0, memory_order_relaxed);
}

/* Serve slot i if possible; returns the lock of the CS it ran, or NULL
 * (then *ops is incremented if it answered a lock/trylock/unlock request). */
static struct rcl_lock *serve_one(struct rcl_server *s, struct rcl_sthread *me, unsigned i, unsigned *ops)
{
    if (!rcl_cas(s, &s->busy[i], 0, 1))
        return NULL; /* another servicing thread is serving this slot */
    struct rcl_slot *r = &s->slots[i];
    rcl_fn f = atomic_load_explicit(&r->fn, memory_order_acquire);
    if (LL_UNLIKELY(!f)) {
        unclaim(s, i);
        return NULL;
    }
    note_coloc(s, r);
    struct rcl_lock *lk = r->lock;
    int wake;
    if (LL_UNLIKELY(rcl_is_op(f))) {
        /* each answered op is counted before its reply: a client that has
         * its answer finds it counted (the reply's release store orders the
         * add before the client's acquire of the answer) */
        if (f == RCL_OP_UNLOCK) {
            /* a request-only lock (clients of a direct lock unlock it themselves) */
            atomic_store_explicit(&lk->is_locked, 0, memory_order_release);
            rcl_add(s, &s->st.lock_ops, 1);
            wake = reply(r, NULL);
        } else if (rcl_take(s, lk, RCL_HELD_CLIENT)) {
            want_clear(lk);
            rcl_add(s, &s->st.lock_ops, 1);
            wake = reply(r, NULL); /* LOCK or TRYLOCK granted: the client holds it (value 2) */
        } else if (f == RCL_OP_TRYLOCK) {
            rcl_add(s, &s->st.lock_ops, 1);
            wake = reply(r, (void *)(intptr_t)EBUSY);
        } else {
            rcl_add(s, &s->st.skipped_held, 1); /* LOCK: stays pending */
            want_set(lk);
            unclaim(s, i);
            return NULL;
        }
        unclaim(s, i);
        if (wake)
            ll_futex_wake(&r->parked, 1);
        (*ops)++;
        return NULL;
    }
    if (!rcl_take(s, lk, RCL_HELD_SERVER)) {
        rcl_add(s, &s->st.skipped_held, 1);
        want_set(lk);
        unclaim(s, i);
        return NULL;
    }
    want_clear(lk);
    /* run the critical section: this thread is busy, not free */
    atomic_store_explicit(&me->in_cs, 1, memory_order_relaxed);
    rcl_add32(s, &s->n_free, -1);
    struct rcl_tls *t = &rcl_tls;
    t->held[t->nheld++] = lk;
    ll_thread_t *self0 = ll_self_tls;
    unsigned depth = self0 ? self0->nheld : 0;
    void *ret = ll_ident_run(r->tp, ll_ident_self(), rcl_as_caller, NULL, f, r->ctx, t);
    if (LL_UNLIKELY(ll_self_tls != NULL && ll_self_tls->nheld > depth))
        hand_over_holds(ll_self_tls, depth);
    /* Everything the caller can observe about this section ends BEFORE the
     * reply (I4): the hold, in_cs (liblock_server_stop) and the lock word
     * (liblock_destroy answers EBUSY while it is nonzero).  The reply's
     * release store (or seq_cst exchange) of fn comes after them in program
     * order, so the caller's acquire load that sees fn == NULL also sees
     * is_locked == 0 (or a later holder's value: then someone else holds
     * the lock) and in_cs == 0.  Released after the reply, a caller that
     * destroyed the lock as soon as execute returned got EBUSY, and the
     * late store of 0 could land in a freed, or re-initialised and held,
     * lock.  After the reply this thread touches only its claim (busy[],
     * server-private) and the slot (parked, the futex), never the lock.
     * The extra store before the reply goes to the lock's line, which this
     * thread's CAS of rcl_take made exclusively its own at the start of
     * the CS (a direct client polling the word meanwhile costs the reply
     * one line transfer, which a store after the reply would pay too). */
    t->nheld--;
    rcl_add32(s, &s->n_free, 1);
    atomic_store_explicit(&me->in_cs, 0, memory_order_relaxed);
    atomic_store_explicit(&lk->is_locked, 0, memory_order_release);
    wake = reply(r, ret);
    unclaim(s, i);
    if (wake)
        ll_futex_wake(&r->parked, 1);
    return lk;
}

/* One scan of the request array; returns the number of requests answered. */
static unsigned serve_pass(struct rcl_server *s, struct rcl_sthread *me)
{
    unsigned ovf = s->nslots - 1;
    unsigned n = rcl_client_watermark();
    if (n > ovf)
        n = ovf;
    struct rcl_slot *slots = s->slots;
    unsigned done = 0, ndistinct = 0, ops = 0;
    struct rcl_lock *seen[4];
    for (unsigned i = 0; i <= n; i++) {
        if (LL_UNLIKELY(i == n))
            i = ovf; /* the overflow slot, last (direct.c, "Without a client id") */
        if (LL_LIKELY(atomic_load_explicit(&slots[i].fn, memory_order_relaxed) == NULL))
            continue;
        struct rcl_lock *lk = serve_one(s, me, i, &ops);
        if (!lk)
            continue;
        done++;
        unsigned k;
        for (k = 0; k < ndistinct && k < 4; k++)
            if (seen[k] == lk)
                break;
        if (k == ndistinct || k == 4) {
            if (ndistinct < 4)
                seen[ndistinct] = lk;
            ndistinct++;
        }
    }
    rcl_add(s, &s->st.passes, 1);
    if (done) {
        rcl_add(s, &s->st.cs, done);
        rcl_add(s, &s->st.active_passes, 1);
        rcl_add(s, &s->st.cs_in_active, done);
        rcl_add(s, &s->st.locks_in_active, ndistinct);
        rcl_add(s, &s->st.clients_in_active, rcl_clients_in_use());
    }
    return done + ops;
}

/* Is a request pending that a pass could answer now?  Requests for a lock
 * that is held (a LOCK request or a CS waiting for a client's lock/unlock
 * section) are not: what frees the lock is a new request (UNLOCK), which
 * wakes the server ("Idle parking").  A lock can also be held by another
 * servicing thread, but then n_servicing > 1 and the server does not park. */
static int any_servable(struct rcl_server *s)
{
    unsigned ovf = s->nslots - 1;
    unsigned n = rcl_client_watermark();
    if (n > ovf)
        n = ovf;
    for (unsigned i = 0; i <= n; i++) {
        unsigned k = i == n ? ovf : i;
        struct rcl_slot *r = &s->slots[k];
        rcl_fn f = atomic_load_explicit(&r->fn, memory_order_acquire);
        if (!f)
            continue;
        if (f == RCL_OP_UNLOCK || f == RCL_OP_TRYLOCK ||
            !atomic_load_explicit(&r->lock->is_locked, memory_order_relaxed))
            return 1;
    }
    return 0;
}


void rcl_wake_idle(struct rcl_server *s)
{
    if (LL_UNLIKELY(atomic_load_explicit(&s->dormant, memory_order_acquire))) {
        rcl_server_revive(s);
        return;
    }
    if (atomic_exchange_explicit(&s->idle, 0, memory_order_acq_rel))
        ll_futex_wake(&s->idle, 1 << 30);
}

/* The lone servicing thread found nothing to do for a while (or, with a
 * client on this CPU, at all): sleep until a client (or stop) wakes the
 * server.  See "Idle parking" above. */
static void idle_park(struct rcl_server *s)
{
    /* a seq_cst exchange: a full fence on x86, so the rescan below reads
     * the slots after idle = 1 is visible */
    atomic_exchange_explicit(&s->idle, 1, memory_order_seq_cst);
    if (any_servable(s) || atomic_load_explicit(&s->stopping, memory_order_acquire) ||
        atomic_load_explicit(&s->n_servicing, memory_order_relaxed) > 1) {
        rcl_wake_idle(s);
        return;
    }
    atomic_store_explicit(&s->coloc_recent, 0, memory_order_relaxed);
    rcl_add(s, &s->st.idle_parks, 1);
    while (atomic_load_explicit(&s->idle, memory_order_acquire) == 1 &&
           !atomic_load_explicit(&s->stopping, memory_order_acquire))
        ll_futex_wait(&s->idle, 1, NULL);
}

/* Leave the pool if another free thread exists (Algorithm 10, lines 26-29).
 * Returns 0 if it stayed, 1 after it was handed work again, -1 on exit. */
static int try_leave(struct rcl_server *s, struct rcl_sthread *me)
{
    for (;;) {
        int32_t nf = atomic_load_explicit(&s->n_free, memory_order_relaxed);
        if (nf <= 1)
            return 0;
        if (rcl_cas32s(s, &s->n_free, nf, nf - 1))
            break;
    }
    rcl_add32(s, &s->n_servicing, -1);
    pthread_mutex_lock(&s->pool_mutex);
    if (atomic_load_explicit(&s->stopping, memory_order_acquire)) {
        /* stop sets `stopping` before it walks the prepared stack under
         * this mutex: a thread pushing itself now would never be woken */
        pthread_mutex_unlock(&s->pool_mutex);
        return -1;
    }
    atomic_store_explicit(&me->wake, ST_PREPARED, memory_order_relaxed);
    me->next_prepared = s->prepared;
    s->prepared = me;
    s->nprepared++;
    pthread_mutex_unlock(&s->pool_mutex);
    rcl_add(s, &s->st.parked, 1);
    uint32_t w;
    while ((w = atomic_load_explicit(&me->wake, memory_order_acquire)) == ST_PREPARED)
        ll_futex_wait(&me->wake, ST_PREPARED, NULL);
    return w == ST_EXIT ? -1 : 1;
}

/* "Breathing" (header): sleep for the server's breath. */
static void breathe(const struct rcl_server *s)
{
    struct timespec ts = {.tv_sec = (time_t)(s->breath_ns / 1000000000ull),
                          .tv_nsec = (long)(s->breath_ns % 1000000000ull)};
    clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL);
}

/* Empty passes after the last answer that poll without a pause
 * (serve_loop, "Polling"). */
#define RCL_HOT_PASSES 256u

void rcl_serve_loop(struct rcl_server *s, struct rcl_sthread *me)
{
    uint64_t idle_since = 0, slice_start = ll_cycles(), breathed = slice_start;
    unsigned empty = 0, npass = 0;
    for (;;) {
        atomic_store_explicit(&s->is_alive, 1, memory_order_relaxed);
        atomic_store_explicit(&me->timestamp, atomic_load_explicit(&s->timestamp, memory_order_relaxed),
                              memory_order_relaxed);
        unsigned done = serve_pass(s, me);
        if (LL_UNLIKELY(atomic_load_explicit(&s->stopping, memory_order_acquire)))
            return;
        if (LL_UNLIKELY((++npass & 63) == 0) && (s->share_cycles | s->breathe_cycles)) {
            /* "Sharing the CPU" and "Breathing" above: let another
             * process's server on this CPU (same FIFO priority) have its
             * turn, and now and then every lower-priority thread */
            uint64_t now = ll_cycles();
            if (s->breathe_cycles && now - breathed > s->breathe_cycles && !s->degraded) {
                if (rcl_cpushare_others(s->cpu, &s->share_seen))
                    breathe(s);
                breathed = slice_start = ll_cycles();
            } else if (s->share_cycles && now - slice_start > s->share_cycles) {
                sched_yield();
                slice_start = ll_cycles();
            }
        }
        if (LL_UNLIKELY(atomic_load_explicit(&s->n_servicing, memory_order_relaxed) > 1)) {
            /* slow path: other servicing threads exist (some CS blocked, spun or was preempted) */
            rcl_add(s, &s->st.slow_passes, 1);
            idle_since = 0;
            if (atomic_load_explicit(&s->n_free, memory_order_relaxed) <= 1) {
                sched_yield(); /* let the busy ones finish */
            } else if (try_leave(s, me) < 0) {
                return;
            }
            continue;
        }
        if (done) {
            idle_since = 0;
            empty = 0;
            continue;
        }
        /* Polling.  Nothing was pending.  Right after an answer the next
         * request (the same client's next one, or another client's) is
         * expected within about one cross-CPU round trip, and the pass
         * that sees it first determines its latency: a pause after every
         * empty pass adds up to its own length (on some CPUs a large part
         * of that round trip) to the request's wait, depending on where in
         * the pause the request lands; no pause at all keeps the client's
         * line under a read every few cycles, which can take it back
         * between the client's fetch for its store and the store (another
         * transfer for the request).  So the first RCL_HOT_PASSES empty
         * passes after an answer pause after every second pass only (a
         * pass only loads the slots' fn words: the pause is part of no
         * ordering argument, so how often it runs changes no invariant).
         * A server idle for longer pauses once per empty pass, so it does
         * not keep reading the clients' lines, nor take the issue slots of
         * a sibling hardware thread, while nothing is expected.  A pass
         * that answered something never pauses. */
        if (++empty > RCL_HOT_PASSES || (empty & 1))
            ll_pause();
        if (LL_UNLIKELY(atomic_load_explicit(&s->coloc_recent, memory_order_relaxed))) {
            /* a client shares this CPU: it runs only while we sleep, so
             * sleep as soon as nothing can be answered (docs/rcl.md) */
            idle_park(s);
            idle_since = 0;
            breathed = ll_cycles();
            continue;
        }
        if (s->idle_cycles && (empty & 255) == 0) {
            uint64_t now = ll_cycles();
            if (!idle_since) {
                idle_since = now;
            } else if (now - idle_since > s->idle_cycles) {
                idle_park(s);
                idle_since = 0;
                breathed = ll_cycles();
            }
        }
    }
}
