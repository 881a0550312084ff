/*
 * client.c - the client side of Remote Core Locking: the request path of
 * liblock_execute (Algorithm 9 of J.-P. Lozi, "Towards More Scalable Mutual
 * Exclusion for Multicore Architectures", PhD thesis, UPMC (Paris 6), 2014,
 * section 4.1), lock/trylock/unlock on an RCL lock, the condition-variable
 * hooks, and the binding of a lock to its server.  Client ids and the
 * fitting of a client's affinity are in ids.c.
 *
 * Without a client id.  When every id is taken (ids.c; a one-line message
 * is printed once):
 *   - liblock_execute fails with EAGAIN before touching any slot (the
 *     documented contract; liblock_thread_register reports it up front);
 *   - lock/trylock/unlock go through the server's OVERFLOW slot (one extra
 *     slot after the client slots, always scanned), one thread at a time
 *     under ovf_mutex.  Only TRYLOCK and UNLOCK are sent there: both are
 *     answered at once, so the slot is never held while its user waits
 *     for a lock (a pending LOCK there could wait for an UNLOCK queued
 *     behind it on the same slot: deadlock).  lock() is a TRYLOCK loop
 *     that, between tries, holds nothing and polls is_locked (read only)
 *     with back-off.  So lock/unlock never fail for want of an id (the
 *     interposer's pthread_mutex_lock cannot return EAGAIN), they stay
 *     mutually exclusive with everything else through is_locked (I2 of
 *     server.c), and they are slower and not fair (a looping TRYLOCK can
 *     be overtaken).
 *
 * Remote path (ordinary threads, and servicing threads calling a lock of
 * ANOTHER server): write lock, ctx and flags, then fn with a release store;
 * wait until the server clears fn (acquire), and read ret.  How the client
 * waits is the lock's policy:
 *   spin            pause loop on fn (a LOCK request yields after 1024
 *                   polls: it waits for another client's section, which
 *                   may need this CPU);
 *   spin-then-park  (the default) the pause loop for about
 *                   ll_spin_budget_cycles(), then park ("Parking" below);
 *   park            park at once;
 *   yield           sched_yield between polls.
 * Every 64 polls a polling client checks whether the server parked itself
 * for idleness and wakes it (server.c, "Idle parking"); after a wake the
 * interval doubles (up to 64K polls), since the server can only have
 * parked again without answering if the request is not answerable yet (its
 * lock is held).  A client that finds the server idle before posting wakes
 * it right after posting.  A servicing thread always yields while it waits
 * for another server, so its own server's other threads can run.
 *
 * Parking (not in the thesis).  The client announces itself in its slot's
 * `parked` word and sleeps on it (futex); a request that may park carries
 * RCL_F_WAKE, and the server answers it with reply() (server.c) in one of
 * two ways, chosen by the client per request and carried in its flags:
 *   asymmetric (spin-then-park requests but LOCK, where membarrier(2)
 *   has the private expedited command; LIBLOCK_RCL_ASYM=0 turns it off):
 *     server:  fn := NULL (release store); compiler barrier;
 *              if parked: parked := 0 (exchange), then futex_wake(parked)
 *     client:  parked := 1 (seq_cst exchange); if fn == NULL: done;
 *              heavy barrier (src/platform/membarrier.c); if fn == NULL: done;
 *              if server idle: wake it; futex_wait(parked, 1);
 *              if fn == NULL: done; repeat;
 *   symmetric (RCL_F_FENCE too: park-at-once requests, which sleep every
 *   time, colocated clients, LOCK requests, which wait for another
 *   client's section and often sleep, and every parking request without
 *   membarrier):
 *     server:  fn := NULL (seq_cst exchange); if parked (seq_cst load):
 *              parked := 0 (exchange), then futex_wake(parked)
 *     client:  the same loop without the heavy barrier.
 * A client that got its reply stores parked := 0 on its way out (relaxed),
 * so the next replies do not find a stale 1.
 * Why two: on the hot path of a spin-then-park client the reply comes long
 * before the spin budget runs out and the client never parks, yet the
 * seq_cst exchange is a locked instruction that waits until the slot's
 * line, which the polling client has just read, is exclusively the
 * server's: a cost on the server's path of every reply that only the rare
 * sleeper needs.  Such clients park only after the spin budget, so the
 * cost moves to them, as flat combining's requesters do
 * (src/locks/combining/fc_park.h, "Asymmetric").
 * No lost wake-up: the client sleeps only if futex_wait finds parked == 1.
 * Take its last `parked := 1` (Sc) and its last load of fn before that
 * sleep (Lc: after the heavy barrier B in the asymmetric protocol), which
 * saw the request still pending; let Ws be the server's clear of fn for
 * this request and Ls its load of parked after Ws.  Ls reads Sc's value or
 * a later write:
 *   symmetric: Lc precedes Ws in the seq_cst order (Lc did not see it),
 *     Sc precedes Lc, and Ls is a seq_cst load after Ws;
 *   asymmetric: B made every thread of the process pass a full barrier
 *     (or a context switch) while it ran, and made Sc visible before it
 *     returned.  Had the server thread executed Ws before that point, Ws
 *     would be visible to Lc, which follows B; so Ws, and Ls after it in
 *     program order (the compiler barrier keeps them there), come after
 *     that point, and Ls sees Sc or a later write.
 * Later writes of `parked` are only resets to 0 by servers (and the
 * client's own withdrawal, which comes after its sleep).  If Ls reads 1
 * the server resets it and wakes: a client already queued in futex_wait
 * is woken, one that checks later sees 0 and does not sleep.  If Ls reads a
 * 0 written after Sc, that reset (a server thread's, for this or an
 * earlier request of the slot, which read 1 = Sc's value) is followed by
 * its futex_wake: same two cases.  A reset or wake that arrives late,
 * after the client has already returned or posted its next request, is a
 * spurious wake-up or makes futex_wait return at once: the loop
 * re-announces itself and re-checks fn, so it costs one iteration (and in
 * the asymmetric protocol one more heavy barrier) and never a sleep past
 * the reply.  A heavy barrier that fails (it cannot after the check at the
 * first request, but the call may) leaves the client waking every 1 ms:
 * slower, never stranded.  The slot's memory lives as long as the server,
 * so a late futex_wake never touches freed memory.  The exchange of
 * `parked := 1` also orders the request (fn, stored before it) before the
 * load of server->idle, which with the server's exchange of idle before
 * its rescan (server.c) means a parked client never sleeps on a server
 * that parked without seeing its request (Dekker; on x86 the exchanges
 * are LOCK XCHG, full fences).  Spin-policy requests do not carry
 * RCL_F_WAKE: the server answers them with the plain release store and
 * never looks at `parked`.
 * tests/test_release_race.c ("reply against a parking client") races one
 * reply against one client going to sleep, in both protocols.
 *
 * Colocated clients.  A client that shares the server's CPU can run only
 * while the server sleeps (its threads are SCHED_FIFO), so spinning there
 * is useless and a server that keeps polling until its idle time-out
 * (LIBLOCK_RCL_IDLE_US) makes every request cost that time-out.  A client
 * is colocated when every CPU it may run on is a server CPU (found when
 * its affinity is fitted, see fit_affinity), or when it finds the server
 * idle-parked and sched_getcpu() is the server's CPU.  Its requests carry
 * RCL_F_COLOC and it parks at once; a server that sees such a request
 * parks as soon as a pass finds nothing it can answer (server.c).  A
 * request then costs a wake-up and two context switches.
 *
 * Pacing (not in the thesis).  A spin or spin-then-park client of
 * execute() (not a servicing thread: those are scheduled by their server)
 * calls sched_yield() once every rcl_yield_every (LIBLOCK_RCL_YIELD_EVERY,
 * 1024) completed requests, after the reply, so never with a request
 * pending.  Alone on its CPU the call returns at once (a system call per
 * 1024 CSs); with other spinning clients on the CPU it hands the CPU over,
 * so they take turns every ~1024 CSs instead of every scheduler slice, and
 * their CS counts over short intervals stay balanced instead of following
 * whichever client the scheduler happens to run.  The count is
 * thread-local: no shared write.
 *
 * Local path (a servicing thread calling a lock of its OWN server:
 * nesting): local CAS on is_locked, sched_yield() while it is held so that
 * the holder (another servicing thread) can finish, run inline, release.
 * Only threads bound to the server CPU take this path, which is what makes
 * the local CAS correct (server.c, invariant I1).
 *
 * Direct lock/unlock (not in the thesis).  On a DIRECT lock
 * (lk->direct, fixed at init: every mutex under the interposer, which sets
 * rcl_direct_default, or any lock with LIBLOCK_RCL_DIRECT=1), liblock_lock/
 * trylock/unlock from an ordinary thread do not cost a request round trip
 * each.  A lock that is not direct keeps the request path described next
 * (RCL_OP_LOCK/TRYLOCK/UNLOCK; only server threads write its word, so the
 * server keeps its local CAS on it: rcl_take in rcl.h).  The lock word
 * is_locked is a real atomic lock word, written by clients and servicing
 * threads alike, with values (rcl.h)
 *     0 free, 1 held by a servicing thread (a delegated or nested CS),
 *     2 held by a client, 3 held by a client and clients may sleep on it.
 *   lock:    if `want` is clear, CAS 0 -> 2 (acquire): done, no request.
 *            Contended (lock_slow): 0 -> CAS again (0 -> 3 after a sleep);
 *            1 -> poll with back-off until it changes (a servicing thread
 *            holds it; nobody wakes a client for it); 2/3 -> the policy:
 *            spin-then-park polls for LIBLOCK_RCL_LOCK_SPIN_NS (default the
 *            library's spin budget; no spin at all for a thread that may
 *            run on one CPU only, e.g. every application thread on a 2-CPU
 *            machine once the server CPU is taken out of its affinity: the
 *            holder then shares that CPU and cannot release the lock while
 *            we spin), then CAS 2 -> 3 and futex_wait(3);
 *            spin polls (yields after 1024 polls), yield yields, park
 *            sleeps at once.  If `want` is set: a LOCK request, which the
 *            server grants (CAS 0 -> 2) in its scan order.
 *   trylock: if `want` is clear, CAS 0 -> 2; else a TRYLOCK request.
 *   unlock:  exchange(0) (seq_cst); if it returned 3, futex_wake one
 *            sleeper; then if the server is idle-parked, wake it (a
 *            request for this lock may wait there).
 * Exclusion with delegated CSs (I2 of server.c): a servicing thread runs a
 * CS of L only after its own CAS 0 -> 1 on L->is_locked succeeded and
 * clears it after; a client holds L only after a CAS 0 -> 2 (its own, or
 * the server's on its behalf for a LOCK/TRYLOCK request) succeeded, and
 * clears it at unlock; nobody else stores 0 into a held lock (the 2 -> 3
 * CAS of a waiter keeps it held).  So it is a test-and-set lock among all
 * of them: at most one of {a delegated CS, a nested section, a client's
 * lock/unlock section} holds L at a time.  Because clients now write the
 * word, the server's CASes on it are real (LOCK-prefixed) atomics, not
 * local_atomic.h ones (server.c I1: a non-LOCK cmpxchg could write back a
 * stale value over a client's store).  Orderings: every acquisition is an
 * acquire CAS and every release a release store (server) or seq_cst
 * exchange (client), so a CS's effects are visible to the next holder,
 * whichever side it is on.
 * No lost wake-up: a client sleeps only in futex_wait(w, 3), which the
 * kernel lets sleep only while w == 3.  Value 3 is written only by a
 * waiter's CAS (2 -> 3, or 0 -> 3 when it takes the lock after a sleep) and
 * removed only by the holder's exchange, which then sees 3 and wakes one
 * sleeper.  A woken sleeper takes the lock as 3 (CAS 0 -> 3, or after a
 * LOCK grant of 2, CAS 2 -> 3), so other sleepers still queued are woken
 * at its unlock (Drepper's "Futexes are tricky" mutex 2).  Servicing
 * threads hold with value 1 and never produce 3, so a client never sleeps
 * on a servicing thread's hold: it polls with back-off instead, and the
 * server's release after a CS stays a plain release store (no fence, no
 * system call on the server's critical path).
 * Pending requests (`want`): the server sets `want` when it skips a
 * request because the lock is held, and clears it when it takes the lock
 * for a request.  While it is set, clients queue behind those requests
 * (LOCK/TRYLOCK requests) instead of taking the lock directly, so a stream
 * of direct lock/unlock cannot starve a delegated CS.  It is only a hint:
 * exclusion never depends on it.  A server that idle-parked with such a
 * request pending (any_servable: its lock was held) is woken by the unlock:
 * the unlocker's exchange (a full fence) precedes its load of `idle`, the
 * server's exchange of `idle` precedes its rescan of is_locked (Dekker).
 * Affinity: lock/trylock still call rcl_client_index() (a thread-local check
 * after the first call), so a thread that locks is kept off the server
 * CPUs, even if it never sends a request.
 * Why direct: with lock/unlock as requests (RCL_OP_LOCK / RCL_OP_UNLOCK,
 * still used on locks that are not DIRECT), each costs a round trip, the
 * server grants a waiter's LOCK even when its client is preempted or
 * parked (the lock then stays held until that client runs), and waiters
 * spin on the application CPUs with the holder; with more threads than
 * CPUs, programs whose critical sections are short then run many times
 * slower than on glibc's mutex (docs/rcl.md, "Speed").
 *
 * Condition variables (src/core/cond.c calls cond_release/cond_reacquire
 * around the POSIX wait):
 *   - the caller holds the lock through liblock_lock (API hold stack):
 *     release = the API unlock, reacquire = the API lock (remote requests,
 *     or the local path on a servicing thread);
 *   - the caller is a servicing thread running a CS of this lock (delegated
 *     or nested): release = is_locked = 0 (local), so other CSs of the lock
 *     can run on other servicing threads while this one sleeps; reacquire =
 *     local CAS + yield.  The thread stays "busy" (not free) meanwhile, so
 *     the backup/manager provide another servicing thread.
 *   - anything else: EPERM.
 */
#include "rcl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread struct rcl_tls rcl_tls __attribute__((tls_model("initial-exec")));

/* ---- requests ---------------------------------------------------------------- */
/* A LOCK request waits for another client's lock/unlock section, which may
 * need this very CPU to finish: spin about one round trip's worth of polls,
 * then yield (spin policy only; yield always yields). */
#define RCL_WAIT_LOCK (LIBLOCK_WAIT__COUNT + 1)

/* a sleeper whose heavy barrier failed wakes up in steps of this ("Parking") */
static const struct timespec rcl_timed_wait = {0, 1000000};

/* Sleep until the reply is in (see "Parking" above).  fence: the request
 * carries RCL_F_FENCE (the server clears fn with a seq_cst exchange), so
 * no heavy barrier is needed. */
static __attribute__((noinline)) void park_reply(struct rcl_server *s, struct rcl_slot *r, int fence)
{
    int timed = 0;
    for (;;) {
        /* a seq_cst RMW: a full fence, so the request (fn) is visible
         * before `idle` is read and `parked` before fn is re-read */
        atomic_exchange_explicit(&r->parked, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&r->fn, memory_order_seq_cst) == NULL)
            break;
        if (!fence) {
            /* the heavy side of the asymmetric barrier: after it, a reply
             * whose server did not see parked = 1 is visible to the load
             * below; a failed barrier leaves us waking every 1 ms */
            if (ll_heavy_barrier() != 0)
                timed = 1;
            if (atomic_load_explicit(&r->fn, memory_order_acquire) == NULL)
                break;
        }
        if (atomic_load_explicit(&s->idle, memory_order_seq_cst))
            rcl_wake_idle(s);
        ll_futex_wait(&r->parked, 1, timed ? &rcl_timed_wait : NULL);
        if (atomic_load_explicit(&r->fn, memory_order_acquire) == NULL)
            break;
    }
    /* The reply is in: withdraw the announcement, so that the replies to
     * our next requests do not find a stale 1 and make a useless
     * futex_wake.  Only this thread writes 1 here, and a server's reset of
     * it (this request's, or a late one) writes 0 too. */
    atomic_store_explicit(&r->parked, 0, memory_order_relaxed);
}

static inline void wait_reply(struct rcl_server *s, struct rcl_slot *r, int policy, uint32_t flags)
{
    if (LL_UNLIKELY(policy == LIBLOCK_WAIT_PARK)) {
        park_reply(s, r, 1);
        return;
    }
    unsigned n = 0, idle_mask = 63;
    uint64_t start = 0;
    while (atomic_load_explicit(&r->fn, memory_order_acquire) != NULL) {
        if (policy == LIBLOCK_WAIT_YIELD || (policy == RCL_WAIT_LOCK && n >= 1024))
            ll_yield();
        else
            ll_pause();
        if (LL_UNLIKELY((++n & idle_mask) == 0)) {
            if (atomic_load_explicit(&s->idle, memory_order_relaxed)) {
                rcl_wake_idle(s);
                /* waking it again at once would only help if it parked
                 * without seeing this request (a held lock): back off */
                if (idle_mask < 0xffff)
                    idle_mask = idle_mask * 2 + 1;
            }
            if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
                uint64_t now = ll_cycles();
                if (!start) {
                    start = now; /* the first 64 polls are not timed: no rdtsc on the fast path */
                } else if (now - start > ll_spin_budget_cycles()) {
                    park_reply(s, r, (flags & RCL_F_FENCE) != 0);
                    return;
                }
            }
        }
    }
}

/* Post a request in slot r and wait for the reply. */
static inline void submit(struct rcl_server *s, struct rcl_slot *r, struct rcl_lock *lk, rcl_fn fn, void *ctx,
                          int policy)
{
    struct rcl_tls *t = &rcl_tls;
    uint32_t flags = 0;
    int woke = 0;
    if (LL_UNLIKELY(t->my_server != NULL)) {
        policy = LIBLOCK_WAIT_YIELD; /* a servicing thread: let its own server's threads run */
    } else {
        if (fn == RCL_OP_LOCK && policy == LIBLOCK_WAIT_SPIN)
            policy = RCL_WAIT_LOCK;
        if (LL_UNLIKELY(t->coloc) || LL_UNLIKELY(atomic_load_explicit(&s->idle, memory_order_relaxed))) {
            /* the server sleeps (or cannot run while we do): wake it right
             * after posting; if we share its CPU, sleep until the reply */
            woke = 1;
            if (t->coloc || ll_current_cpu() == s->cpu) {
                flags = RCL_F_COLOC;
                policy = LIBLOCK_WAIT_PARK;
            }
        }
        /* requests that will probably sleep -- park at once, or a LOCK,
         * which waits for another client's section -- and, without
         * membarrier, every parking request use the symmetric protocol
         * ("Parking"): a heavy barrier per sleep would cost them more
         * than the exchange costs the server */
        if (policy == LIBLOCK_WAIT_PARK ||
            (policy == LIBLOCK_WAIT_SPIN_THEN_PARK && (!rcl_park_asym || fn == RCL_OP_LOCK)))
            flags |= RCL_F_WAKE | RCL_F_FENCE;
        else if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK)
            flags |= RCL_F_WAKE;
    }
    r->lock = lk;
    r->ctx = ctx;
    r->flags = flags;
    atomic_store_explicit(&r->fn, fn, memory_order_release);
    if (LL_UNLIKELY(woke))
        rcl_wake_idle(s);
    wait_reply(s, r, policy, flags);
}

/* Post a request in this thread's slot and wait for it; returns the slot
 * (for ret), or NULL with errno = EAGAIN when no client id is available. */
static inline struct rcl_slot *post(struct rcl_server *s, struct rcl_lock *lk, rcl_fn fn, void *ctx, int policy)
{
    int id = rcl_client_index();
    if (LL_UNLIKELY(id < 0))
        return NULL;
    struct rcl_slot *r = &s->slots[id];
    submit(s, r, lk, fn, ctx, policy);
    return r;
}

/* A TRYLOCK or UNLOCK request through the server's overflow slot, for a
 * thread without a client id ("Without a client id" above).  Both are answered at
 * once, so the slot is held for one round trip.  Returns 0 or EBUSY. */
static int ovf_request(struct rcl_server *s, struct rcl_lock *lk, rcl_fn fn, int policy)
{
    pthread_mutex_lock(&s->ovf_mutex);
    struct rcl_slot *r = &s->slots[s->nslots - 1];
    submit(s, r, lk, fn, NULL, policy);
    int ret = (int)(intptr_t)r->ret;
    pthread_mutex_unlock(&s->ovf_mutex);
    return ret;
}

/* Step n of a wait that nobody ends with a wake-up: a pause while
 * n < spin_until (if may_spin), a yield while n < yield_until, then sleeps
 * of 1 us doubling to 1 ms (*ns: the next sleep, start at 1000). */
static void poll_backoff(unsigned n, int may_spin, unsigned spin_until, unsigned yield_until, uint64_t *ns)
{
    if (n < spin_until && may_spin) {
        ll_pause();
    } else if (n < yield_until) {
        ll_yield();
    } else {
        LL_KEEP_ERRNO; /* nanosleep may fail with EINTR */
        struct timespec d = {0, (long)*ns};
        nanosleep(&d, NULL);
        if (*ns < 1000000)
            *ns *= 2;
    }
}

/* liblock_lock without a client id: TRYLOCK through the overflow slot until
 * it succeeds, waiting between tries (holding nothing) until the lock looks
 * free: a few polls, a few yields, then sleeps of 1 us doubling to 1 ms.
 * The read of is_locked is only a hint of when to try again. */
static int ovf_lock(struct rcl_server *s, struct rcl_lock *lk, int policy)
{
    for (;;) {
        if (ovf_request(s, lk, RCL_OP_TRYLOCK, policy) == 0)
            return 0;
        uint64_t ns = 1000;
        int may_spin = policy != LIBLOCK_WAIT_PARK && !rcl_tls.coloc;
        for (unsigned n = 0; atomic_load_explicit(&lk->is_locked, memory_order_relaxed); n++)
            poll_backoff(n, may_spin, 64, 72, &ns);
    }
}

static int held_locally(struct rcl_tls *t, struct rcl_lock *lk)
{
    for (int i = 0; i < t->nheld; i++)
        if (t->held[i] == lk)
            return 1;
    return 0;
}

static void local_acquire(struct rcl_server *s, struct rcl_lock *lk)
{
    while (!rcl_take(s, lk, RCL_HELD_SERVER))
        sched_yield(); /* the holder is another thread of this CPU (or a client): let it run */
}

void *rcl_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    struct rcl_server *s = rcl_server_of_lock(l);
    if (LL_UNLIKELY(!s))
        return NULL;
    struct rcl_lock *lk = l->_state;
    struct rcl_tls *t = &rcl_tls;
    if (LL_UNLIKELY(t->my_server == s)) {
        /* nested CS of a lock of our own server (Algorithm 9, local path) */
        ll_thread_t *self = ll_self_tls;
        if (held_locally(t, lk) || (self && ll_hold_find(self, l))) {
            errno = EDEADLK;
            return NULL;
        }
        if (t->nheld >= RCL_MAX_HELD) {
            errno = EAGAIN;
            return NULL;
        }
        local_acquire(s, lk);
        t->held[t->nheld++] = lk;
        void *ret = cs(arg);
        t->nheld--;
        atomic_store_explicit(&lk->is_locked, 0, memory_order_release);
        return ret;
    }
    if (LL_UNLIKELY(t->napi_held > 0)) {
        ll_thread_t *self = ll_self_tls;
        if (self && ll_hold_find(self, l)) {
            errno = EDEADLK; /* the caller holds it through liblock_lock */
            return NULL;
        }
    }
    int policy = l->_wait;
    struct rcl_slot *r = post(s, lk, cs, arg, policy);
    if (LL_UNLIKELY(!r))
        return NULL;
    void *ret = r->ret;
    /* Pacing of spinning clients (see "Pacing" above): every
     * rcl_yield_every completed requests, give the CPU to another runnable
     * thread, if there is one. */
    if (policy != LIBLOCK_WAIT_YIELD && LL_UNLIKELY(++t->since_yield >= rcl_yield_every) && !t->my_server) {
        t->since_yield = 0;
        ll_yield();
    }
    return ret;
}

int rcl_direct_default; /* set to 1 by the interposer's configuration (src/shim/config.c) */

static inline int t_is_server(void) { return rcl_tls.my_server != NULL; }

/* Spin phase of a client waiting for a lock another client holds
 * (LIBLOCK_RCL_LOCK_SPIN_NS; default: the library's spin budget). */
static uint64_t lock_spin_cycles(void)
{
    static _Atomic uint64_t c; /* 0 = not read yet; the value + 1 */
    uint64_t v = atomic_load_explicit(&c, memory_order_relaxed);
    if (LL_LIKELY(v))
        return v - 1;
    long ns = ll_env_long("LIBLOCK_RCL_LOCK_SPIN_NS", -1, 0, 1000000000L);
    v = ns < 0 ? ll_spin_budget_cycles() : ll_ns_to_cycles((uint64_t)ns);
    atomic_store_explicit(&c, v + 1, memory_order_relaxed);
    return v;
}

/* Wait while a servicing thread holds the lock (a delegated or nested CS:
 * short unless it blocks; nobody wakes us, so poll with back-off). */
static void wait_server_hold(struct rcl_lock *lk, int policy)
{
    uint64_t ns = 1000;
    int may_spin = policy != LIBLOCK_WAIT_PARK && policy != LIBLOCK_WAIT_YIELD && !rcl_tls.coloc;
    unsigned yield_until = 264 + (policy == LIBLOCK_WAIT_YIELD ? 1u << 30 : 0);
    for (unsigned n = 0; atomic_load_explicit(&lk->is_locked, memory_order_acquire) == RCL_HELD_SERVER; n++)
        poll_backoff(n, may_spin, 256, yield_until, &ns);
}

/* A LOCK request: the server grants the lock (value RCL_HELD_CLIENT) in
 * its scan order, after the requests that made it set `want`. */
static void lock_by_request(struct rcl_server *s, struct rcl_lock *lk, int policy)
{
    if (LL_UNLIKELY(!post(s, lk, RCL_OP_LOCK, NULL, policy)))
        ovf_lock(s, lk, policy); /* no client id: never fails for want of one */
}

/* liblock_lock from a client, contended (see "Direct lock/unlock"). */
static __attribute__((noinline)) void lock_slow(struct rcl_server *s, struct rcl_lock *lk, int policy)
{
    int slept = 0; /* consumed a wake-up: acquire as SLEEPERS (other sleepers may remain) */
    uint64_t spin_start = 0;
    unsigned polls = 0;
    for (;;) {
        uint32_t v = atomic_load_explicit(&lk->is_locked, memory_order_relaxed);
        if (v == 0) {
            if (LL_UNLIKELY(atomic_load_explicit(&lk->want, memory_order_relaxed))) {
                lock_by_request(s, lk, policy);
                if (slept) /* fails only if a waiter already marked it SLEEPERS */
                    (void)rcl_lock_cas(&lk->is_locked, RCL_HELD_CLIENT, RCL_HELD_SLEEPERS);
                return;
            }
            if (rcl_lock_cas(&lk->is_locked, 0, slept ? RCL_HELD_SLEEPERS : RCL_HELD_CLIENT))
                return;
            continue;
        }
        if (v == RCL_HELD_SERVER) {
            wait_server_hold(lk, policy);
            continue;
        }
        /* held by a client */
        if (policy == LIBLOCK_WAIT_SPIN || policy == LIBLOCK_WAIT_YIELD || t_is_server()) {
            if (policy == LIBLOCK_WAIT_YIELD || t_is_server() || ++polls >= 1024)
                ll_yield();
            else
                ll_pause();
            continue;
        }
        if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK && !rcl_tls.coloc && !rcl_tls.one_cpu) {
            uint64_t now = ll_cycles();
            if (!spin_start)
                spin_start = now;
            if (now - spin_start < lock_spin_cycles()) {
                ll_pause();
                continue;
            }
        }
        if (v == RCL_HELD_CLIENT && !rcl_lock_cas(&lk->is_locked, RCL_HELD_CLIENT, RCL_HELD_SLEEPERS))
            continue;
        ll_futex_wait(&lk->is_locked, RCL_HELD_SLEEPERS, NULL);
        slept = 1;
        spin_start = 0;
    }
}

int rcl_lock_lock(liblock_t *l, void *node)
{
    (void)node;
    struct rcl_server *s = rcl_server_of_lock(l);
    if (LL_UNLIKELY(!s))
        return errno;
    struct rcl_lock *lk = l->_state;
    struct rcl_tls *t = &rcl_tls;
    if (t->my_server == s) {
        if (held_locally(t, lk))
            return EDEADLK;
        local_acquire(s, lk);
        return 0;
    }
    if (!lk->direct) {
        lock_by_request(s, lk, l->_wait);
        t->napi_held++;
        return 0;
    }
    (void)rcl_client_index(); /* fits this thread's affinity (off the server CPUs) on first use */
    if (LL_UNLIKELY(atomic_load_explicit(&lk->want, memory_order_relaxed)))
        lock_by_request(s, lk, l->_wait);
    else if (LL_UNLIKELY(!rcl_lock_cas(&lk->is_locked, 0, RCL_HELD_CLIENT)))
        lock_slow(s, lk, l->_wait);
    t->napi_held++;
    return 0;
}

int rcl_lock_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct rcl_server *s = rcl_server_of_lock(l);
    if (LL_UNLIKELY(!s))
        return errno;
    struct rcl_lock *lk = l->_state;
    struct rcl_tls *t = &rcl_tls;
    if (t->my_server == s)
        return rcl_take(s, lk, RCL_HELD_SERVER) ? 0 : EBUSY;
    if (lk->direct)
        (void)rcl_client_index();
    int ret;
    if (lk->direct && LL_LIKELY(!atomic_load_explicit(&lk->want, memory_order_relaxed))) {
        ret = rcl_lock_cas(&lk->is_locked, 0, RCL_HELD_CLIENT) ? 0 : EBUSY;
    } else {
        struct rcl_slot *r = post(s, lk, RCL_OP_TRYLOCK, NULL, l->_wait);
        if (LL_LIKELY(r != NULL))
            ret = (int)(intptr_t)r->ret;
        else if (errno == EAGAIN)
            ret = ovf_request(s, lk, RCL_OP_TRYLOCK, l->_wait);
        else
            return errno;
    }
    if (ret == 0)
        t->napi_held++;
    return ret;
}

int rcl_lock_unlock(liblock_t *l, void *node)
{
    (void)node;
    struct rcl_server *s = __atomic_load_n((struct rcl_server **)&l->_aux, __ATOMIC_ACQUIRE);
    if (LL_UNLIKELY(!s))
        return EPERM; /* never used, so not locked */
    struct rcl_lock *lk = l->_state;
    struct rcl_tls *t = &rcl_tls;
    if (t->my_server == s) {
        atomic_store_explicit(&lk->is_locked, 0, memory_order_release);
        return 0;
    }
    if (!lk->direct) {
        if (LL_UNLIKELY(!post(s, lk, RCL_OP_UNLOCK, NULL, l->_wait))) {
            if (errno != EAGAIN)
                return errno;
            ovf_request(s, lk, RCL_OP_UNLOCK, l->_wait); /* locked through the overflow slot */
        }
        if (t->napi_held > 0)
            t->napi_held--;
        return 0;
    }
    /* a seq_cst exchange: a full fence, so that the loads of `idle` below
     * and the sleepers' bit it returns are ordered after the release */
    if (atomic_exchange_explicit(&lk->is_locked, 0, memory_order_seq_cst) == RCL_HELD_SLEEPERS)
        ll_futex_wake(&lk->is_locked, 1);
    if (LL_UNLIKELY(atomic_load_explicit(&s->idle, memory_order_seq_cst)))
        rcl_wake_idle(s); /* requests for this lock may wait on a parked server */
    if (t->napi_held > 0) /* 0: a lock handed over by a delegated CS (server.c, hand_over_holds) */
        t->napi_held--;
    return 0;
}

/* Unlock an RCL lock this thread does not hold but a delegated CS left held
 * for its caller (server.c, hand_over_holds): memcached's lru_pull_tail
 * takes an item lock inside its delegated section and releases it after.
 * Only a lock marked `handed` is unlocked (the mark is cleared first, so
 * one hand-over allows one unlock); any other answers EPERM. */
int rcl_unlock_handed(liblock_t *l)
{
    struct rcl_lock *lk = l->_state;
    if (!atomic_load_explicit(&lk->handed, memory_order_acquire) ||
        !atomic_exchange_explicit(&lk->handed, 0, memory_order_acq_rel))
        return EPERM;
    return rcl_lock_unlock(l, NULL);
}

/* The server of a lock that is bound (held or used), without binding. */
static inline struct rcl_server *bound_server(liblock_t *l)
{
    return __atomic_load_n((struct rcl_server **)&l->_aux, __ATOMIC_ACQUIRE);
}

int rcl_cond_release(liblock_t *l)
{
    struct rcl_tls *t = &rcl_tls;
    ll_thread_t *self = ll_self_tls;
    if (self && ll_hold_find(self, l)) {
        int r = ll_api_unlock(l);
        if (r == 0)
            t->cond_mode = 1;
        return r;
    }
    struct rcl_lock *lk = l->_state;
    if (t->my_server && t->my_server == bound_server(l) && held_locally(t, lk)) {
        t->cond_mode = 2;
        atomic_store_explicit(&lk->is_locked, 0, memory_order_release);
        return 0;
    }
    return EPERM;
}

int rcl_cond_reacquire(liblock_t *l)
{
    struct rcl_tls *t = &rcl_tls;
    int mode = t->cond_mode;
    t->cond_mode = 0;
    if (mode == 1)
        return ll_api_lock(l);
    if (mode == 2) {
        local_acquire(bound_server(l), l->_state);
        return 0;
    }
    return EPERM;
}

int rcl_thread_register(liblock_t *l)
{
    struct rcl_server *s = rcl_server_of_lock(l);
    if (!s)
        return errno;
    if (rcl_tls.my_server == s)
        return 0;
    return rcl_client_id() < 0 ? errno : 0;
}

/* ---- lock life cycle ------------------------------------------------------------
 * A lock given a server (liblock_attr_setserver) is bound to it at init.
 * Otherwise it is bound on first use (any request, liblock_thread_register
 * or liblock_server_of) to a default server, which is started then if
 * needed: initialising locks starts nothing, so a process that never
 * locks (a shell under the interposer) never has a server.  Racing first
 * users each bind (count the lock on) a server, one CAS on l->_aux wins,
 * the others unbind theirs.  _aux changes only NULL -> server; every
 * reader loads it with acquire, so the server record is seen initialised. */
struct rcl_server *rcl_lock_bind(liblock_t *l)
{
    struct rcl_server *s = NULL;
    for (int tries = 0; tries < 4 && !s; tries++) {
        s = rcl_default_server();
        if (!s) {
            if (!errno)
                errno = EAGAIN;
            return NULL;
        }
        if (rcl_server_bind(s) != 0)
            s = NULL; /* stopped meanwhile: get it again */
    }
    if (!s) {
        errno = EAGAIN;
        return NULL;
    }
    struct rcl_server *cur = NULL;
    if (!__atomic_compare_exchange_n((struct rcl_server **)&l->_aux, &cur, s, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        rcl_server_unbind(s); /* another thread bound it first */
        return cur;
    }
    return s;
}

int rcl_lock_init(liblock_t *l, const liblock_attr_t *attr)
{
    struct rcl_server *s = attr ? attr->_server : NULL;
    if (s) {
        int r = rcl_server_bind(s);
        if (r)
            return r;
    }
    struct rcl_lock *lk = l->_state;
    atomic_store_explicit(&lk->is_locked, 0, memory_order_relaxed);
    atomic_store_explicit(&lk->handed, 0, memory_order_relaxed);
    atomic_store_explicit(&lk->want, 0, memory_order_relaxed);
    int e = errno; /* a lazy init inside pthread_mutex_lock must not change errno */
    lk->direct = (uint32_t)ll_env_long("LIBLOCK_RCL_DIRECT", rcl_direct_default, 0, 1);
    errno = e;
    l->_aux = s; /* NULL: bound on first use */
    return 0;
}

int rcl_lock_destroy(liblock_t *l)
{
    struct rcl_lock *lk = l->_state;
    if (atomic_load_explicit(&lk->is_locked, memory_order_acquire))
        return EBUSY;
    struct rcl_server *s = bound_server(l);
    if (s)
        rcl_server_unbind(s);
    return 0;
}
