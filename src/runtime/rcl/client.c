/*
 * client.c - the request path of Remote Core Locking: liblock_execute
 * (Algorithm 9 of J.-P. Lozi, "Towards More Scalable Mutual Exclusion for
 * Multicore Architectures", PhD thesis, UPMC (Paris 6), 2014, section 4.1)
 * and the posting of a request in a client's slot and the wait for its
 * reply, which direct.c's LOCK/TRYLOCK/UNLOCK requests use too.
 * liblock_lock/trylock/unlock on an RCL lock, and the overflow slot of a
 * thread without a client id, are in direct.c; binding, init, destroy and
 * the condition-variable hooks in lock.c; client ids and the fitting of a
 * client's affinity in ids.c.
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
 * A servicing thread that waits inside the runtime -- for a lock of its
 * own server held by someone else (above), or for another server's reply
 * (its requests use the yield policy) -- may be waiting for its own
 * server: the holder may be a client whose UNLOCK request must be served
 * here, and the other server's CS may nest back into a lock of ours.  The
 * waiting thread is not free, and if no other is, the thesis's manager
 * would notice only at its next tick (is_alive unset) and provide one
 * then.  So after RCL_ASK_FREE_AFTER yields such a thread asks the
 * manager for a free thread at once (rcl_ask_free, as the backup does for
 * a blocked one); the extra thread leaves the pool again when it sees
 * another free one.  The count bounds what a short wait costs: nothing.
 */
#include "client.h"
#include "platform/demote.h"

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
        if (LL_UNLIKELY(n == RCL_ASK_FREE_AFTER - 1) && rcl_tls.my_server)
            ask_free_if_none(rcl_tls.my_server); /* "Local path": our own server may be needed for the reply */
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
void rcl_submit(struct rcl_server *s, struct rcl_slot *r, struct rcl_lock *lk, rcl_fn fn, void *ctx, int policy)
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
    /* Only what differs from the slot's last request is written (server.c,
     * "Request slots": the request is then fn's store alone).  Only clients
     * write these three fields (the overflow slot's one at a time, under
     * ovf_mutex), so reading them back reads our own, or the previous
     * user's, last write; fn's release store orders whichever were
     * written before it. */
    if (r->lock != lk)
        r->lock = lk;
    if (r->ctx != ctx)
        r->ctx = ctx;
    uintptr_t tp = ll_ident_self();
    if (r->tp != tp)
        r->tp = tp;
    if (r->flags != flags)
        r->flags = flags;
    atomic_store_explicit(&r->fn, fn, memory_order_release);
    ll_demote(&r->fn); /* a hint for the server's read of it (platform/demote.h): no ordering */
    if (LL_UNLIKELY(woke))
        rcl_wake_idle(s);
    wait_reply(s, r, policy, flags);
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
    if (LL_UNLIKELY(rcl_nested_on(t, s))) {
        struct rcl_tls saved;
        if (!rcl_nested_enter(&saved)) {
            errno = EDEADLK;
            return NULL;
        }
        void *ret = rcl_execute(l, cs, arg);
        int e = errno;
        rcl_nested_leave(&saved);
        errno = e;
        return ret;
    }
    int policy = ll_policy(l);
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
