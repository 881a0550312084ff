/*
 * direct.c - liblock_lock/trylock/unlock on a Remote Core Locking lock (the
 * RCL of J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 4.1): directly
 * on the lock word for a DIRECT lock, as LOCK/TRYLOCK/UNLOCK requests
 * (client.c) otherwise, and through the server's overflow slot for a
 * thread without a client id.
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
 * Direct lock/unlock (not in the thesis).  On a DIRECT lock
 * (lk->direct, fixed at init: every mutex under the interposer, which sets
 * rcl_direct_default, or any lock with LIBLOCK_RCL_DIRECT=1), liblock_lock/
 * trylock/unlock from an ordinary thread do not cost a request round trip
 * each.  A lock that is not direct keeps the request path of client.c
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
 */
#include "client.h"

#include <time.h>

/* A TRYLOCK or UNLOCK request through the server's overflow slot, for a
 * thread without a client id ("Without a client id" above).  Both are answered at
 * once, so the slot is held for one round trip.  Returns 0 or EBUSY. */
static int ovf_request(struct rcl_server *s, struct rcl_lock *lk, rcl_fn fn, int policy)
{
    pthread_mutex_lock(&s->ovf_mutex);
    struct rcl_slot *r = &s->slots[s->nslots - 1];
    rcl_submit(s, r, lk, fn, NULL, policy);
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

static int lock_nested(liblock_t *l, void *node);

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
        if (LL_UNLIKELY(rcl_nested_on(t, s)))
            return lock_nested(l, node);
        lock_by_request(s, lk, ll_policy(l));
        t->napi_held++;
        return 0;
    }
    (void)rcl_client_index(); /* fits this thread's affinity (off the server CPUs) on first use */
    if (LL_UNLIKELY(atomic_load_explicit(&lk->want, memory_order_relaxed))) {
        if (LL_UNLIKELY(rcl_nested_on(t, s)))
            return lock_nested(l, node);
        lock_by_request(s, lk, ll_policy(l));
    } else if (LL_UNLIKELY(!rcl_lock_cas(&lk->is_locked, 0, RCL_HELD_CLIENT))) {
        if (LL_UNLIKELY(rcl_nested_on(t, s)))
            return lock_nested(l, node);
        lock_slow(s, lk, ll_policy(l));
    }
    t->napi_held++;
    return 0;
}

/* rcl_lock_lock from a section running with its caller's identity on a
 * servicing thread of the lock's server (rcl.h, rcl_nested_on): as that
 * servicing thread, which may be the lock's holder (EDEADLK, not a wait
 * for itself). */
static __attribute__((noinline)) int lock_nested(liblock_t *l, void *node)
{
    struct rcl_tls saved;
    if (!rcl_nested_enter(&saved))
        return EDEADLK;
    int r = rcl_lock_lock(l, node);
    rcl_nested_leave(&saved);
    return r;
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
    } else if (LL_UNLIKELY(rcl_nested_on(t, s))) {
        struct rcl_tls saved; /* as the servicing thread (rcl_lock_lock, lock_nested) */
        if (!rcl_nested_enter(&saved))
            return EBUSY;
        ret = rcl_lock_trylock(l, node);
        rcl_nested_leave(&saved);
        return ret;
    } else {
        struct rcl_slot *r = post(s, lk, RCL_OP_TRYLOCK, NULL, ll_policy(l));
        if (LL_LIKELY(r != NULL))
            ret = (int)(intptr_t)r->ret;
        else if (errno == EAGAIN)
            ret = ovf_request(s, lk, RCL_OP_TRYLOCK, ll_policy(l));
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
        if (LL_UNLIKELY(rcl_nested_on(t, s))) {
            struct rcl_tls saved; /* as the servicing thread that took it (rcl_lock_lock) */
            if (!rcl_nested_enter(&saved))
                return EPERM;
            int r = rcl_lock_unlock(l, node);
            rcl_nested_leave(&saved);
            return r;
        }
        if (LL_UNLIKELY(!post(s, lk, RCL_OP_UNLOCK, NULL, ll_policy(l)))) {
            if (errno != EAGAIN)
                return errno;
            ovf_request(s, lk, RCL_OP_UNLOCK, ll_policy(l)); /* locked through the overflow slot */
        }
        if (t->napi_held > 0)
            t->napi_held--;
        return 0;
    }
    /* a seq_cst exchange: a full fence, so that the loads of `idle` below
     * and the sleepers' bit it returns are ordered after the release */
    uint32_t old = atomic_exchange_explicit(&lk->is_locked, 0, memory_order_seq_cst);
    if (old == RCL_HELD_SLEEPERS)
        ll_futex_wake(&lk->is_locked, 1);
    if (LL_UNLIKELY(atomic_load_explicit(&s->idle, memory_order_seq_cst)))
        rcl_wake_idle(s); /* requests for this lock may wait on a parked server */
    /* 0: a lock handed over by a delegated CS (server.c, hand_over_holds);
     * HELD_SERVER: taken on the local path by a section running with this
     * thread's identity (lock_nested), which did not count it */
    if (t->napi_held > 0 && old != RCL_HELD_SERVER)
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
