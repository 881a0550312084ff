/*
 * mp-server - a dedicated server thread per lock runs every critical
 * section, requested through one cache line per client, with the two x86
 * optimisations of Petrovic's thesis: client back-off between polls and
 * streaming-store (MOVNTI) replies.
 *
 * Source: D. Petrovic, "Efficient Communication and Synchronization on
 * Manycore Processors", PhD thesis no. 6552, EPFL, 2015, chapter 7:
 * section 7.1.1, Algorithm 5 "Baseline delegation algorithm"; section
 * 7.1.2 (the server's remote memory references per request); section 7.1.3
 * "Backoff with local spinning" and "Streaming stores"; the server approach
 * itself is section 6.1.2 (MP-Server).  Adaptive back-off is ours
 * (the thesis tunes the delay by hand and leaves run-time adaptation as
 * future work).  Files: this one (ops, requests, start-up, fork),
 * src/runtime/mpserver/server.c (the server thread), src/runtime/mpserver/client.c (how a
 * client waits).  docs/hybrid.md, "The optimised delegation server", says
 * when to use it and why it is a separate algorithm and not RCL options.
 *
 * Algorithm 5, as here:
 *   client i:  slot[i].{cs,arg} <- request; slot[i].resp <- PENDING;
 *              slot[i].req <- seq<<2|op           (release: publishes the rest)
 *              wait until slot[i].resp != PENDING (polling policy below)
 *   server:    loop over the slots in index order (or a random permutation,
 *              the thesis's control experiment): if slot[k].req differs from
 *              the last request word served for k (server-private last[k]),
 *              serve it and write the reply word.
 * The request flag of Algorithm 5 is a sequence number here, so the server
 * never writes a slot except for its reply: with streaming replies it never
 * takes a client's line in M state (section 7.1.2's point).
 *
 * Operations (op field of the request word):
 *   EXEC   run cs(arg) on the server thread, reply its return value;
 *   LOCK   liblock_lock: grant when `locked` is 0 (set it), else leave the
 *          request pending and look again at the next pass;
 *   TRY    liblock_trylock: grant (set `locked`) or reply "busy" at once;
 *   UNLOCK liblock_unlock: clear `locked`.  Asynchronous: the client posts
 *          it and returns; its next request on this lock first waits for
 *          the UNLOCK's reply (usually already in).  An unlock has returned
 *          before the server serves it, so trylock treats a holder whose
 *          UNLOCK is in flight as gone and waits for the server instead of
 *          failing (held_for_real); lock and execute simply wait.  The
 *          server publishes locked_by before setting `locked` and clears
 *          `locked` before locked_by, so a reader that sees locked with
 *          locked_by == -1 knows a release is under way.
 * EXEC requests are not served while `locked` is set, so delegated critical
 * sections and lock()/unlock() sections exclude one another; the server is
 * the only thread that runs delegated sections and the only writer of
 * `locked`, so it needs no atomic read-modify-write at all.
 *
 * Invariants:
 *  I1 a slot has at most one outstanding request (its client posts only
 *     when resp is not PENDING), and the server serves each request word
 *     exactly once (it records it in last[k] before replying);
 *  I2 `locked` is 1 exactly from the grant of a LOCK/TRY to the service of
 *     the holder's UNLOCK; while it is 1 no EXEC and no other grant is
 *     served: mutual exclusion between every kind of critical section;
 *  I3 the slot scan is round-robin: a pending EXEC waits at most one pass
 *     once the lock is free; a pending LOCK is overtaken only by requests
 *     between the last UNLOCK's slot and its own in scan order, so each grant
 *     moves the holder strictly closer to it: starvation-free (not FIFO);
 *  I4 a client sleeps only after announcing it (parked=1, sleepers++); the
 *     server looks for sleepers after every pass and, fenced, before it
 *     sleeps itself; the server sleeps only after announcing it
 *     (server_parked=1) and a fenced rescan; every posted request is followed
 *     by a fenced read of server_parked before its client sleeps or, for an
 *     UNLOCK (nobody waits for it), at once.
 *
 * Memory ordering (x86-TSO and C11):
 *  - Request: cs/arg/resp=PENDING are stored before req (release); the
 *    server's acquire load of req sees them.  TSO: stores are not reordered.
 *  - Reply, normal mode: every store of the critical section, then resp
 *    (release); the client's acquire load of resp sees them (C11
 *    release/acquire; TSO: stores in order).  The next request of any client
 *    is served by the same thread, after in program order.
 *  - Reply, streaming mode: ONE MOVNTI of the word holding value and flag
 *    (aligned 8-byte stores are single-copy atomic, so value and flag arrive
 *    together; no fence, which is the point: the store drains from the
 *    write-combining buffer while the server works on the next request).  A
 *    MOVNTI may become visible BEFORE the ordinary stores that precede it,
 *    so the client may see the reply before the critical section's writes.
 *    That is harmless only while no thread but the server reads the
 *    protected data: the thesis's condition ("data the server touches is
 *    never accessed by another thread").  liblock keeps it true for lock()
 *    holders by an SFENCE before every LOCK/TRY grant (the holder then sees
 *    everything earlier critical sections wrote), and for the rare return
 *    values >= 2^62 by an SFENCE between the out-of-line value and the word.
 *    It cannot keep it for data the caller reads after execute() returns
 *    (a pointer into memory the critical section just wrote) nor for data
 *    another server writes (the two-lock queue): streaming is therefore off
 *    by default and turned on per process with LIBLOCK_MPSERVER_STREAM=1.
 *    The server also SFENCEs at its first empty pass after replying (so a
 *    reply never waits in a write-combining buffer while it idles), before
 *    it sleeps and when it stops.  C11 has no non-temporal store: it is
 *    modelled as a relaxed store, correct only under the condition above.
 *  - UNLOCK: the holder's critical-section stores precede its req
 *    (release); the server's acquire of req precedes every later section.
 *  - Sleeping client (I4): client: parked=1 (seq_cst exchange), sleepers++
 *    (seq_cst), reload resp, futex_wait(parked, 1).  Server: after a pass,
 *    a relaxed read of sleepers; if non-zero, for each slot whose parked is
 *    1 and whose reply is in: exchange parked 1->0 and futex_wake.  The
 *    relaxed read may miss a sleeper announced concurrently, but the server
 *    reads again after the next pass, and before sleeping itself it runs a
 *    seq_cst exchange (full fence, drains streaming stores) and a full
 *    sweep: Dekker between (reply; fence; read parked) and (parked=1; fence;
 *    read reply) -- one side sees the other.
 *  - Sleeping server (I4): server: SFENCE; server_parked=1 (seq_cst
 *    exchange); rescan the slots; futex_wait.  Client: after posting, a
 *    relaxed read of server_parked (fast path: wake it if set); the Dekker
 *    half is a seq_cst fence and a re-read, done before the client sleeps
 *    and every ~2^16 cycles of polling, so a post that raced with the
 *    server's announcement delays the reply by at most that long.
 *
 * Back-off (section 7.1.3): LIBLOCK_MPSERVER_BACKOFF=N waits N cycles
 * (rdtsc) before each poll of the reply, so the client does not pull its
 * line back to S while the server's prefetcher has it (the "spinning-
 * prefetching collision").  LIBLOCK_MPSERVER_BACKOFF=adaptive learns, per
 * client slot, the server's response time: first poll after est - est/8,
 * then every est/8; a hit at the first poll lowers est by 1/16 (probe
 * down), a miss moves it a quarter of the way to the measured time, by at
 * most est/8 + 128 cycles (one slow reply must not set the next delays); a wait
 * that ended asleep or went through sched_yield teaches nothing, and est
 * stays below 20,000 cycles and half the spin phase (a preempted server
 * must not teach clients to busy-wait for milliseconds).
 * Applies to EXEC and TRY replies (LOCK waits for another holder: no
 * learning).  Other options, read at liblock_init: LIBLOCK_MPSERVER_STRIDE
 * (1 or 2 lines per slot: 2 defeats the adjacent-line prefetcher, as on the
 * thesis's Xeon), LIBLOCK_MPSERVER_SHUFFLE=1 (random scan order: the control
 * experiment), LIBLOCK_MPSERVER_CPU (pin the server thread).
 *
 * Delegation semantics (docs/api.md "Delegated critical sections"): a
 * delegated section runs on the lock's server thread, which holds no lock
 * and runs nothing else, so it may take other locks in its caller's order,
 * signal and broadcast condition variables; liblock_lock/execute of the same
 * lock inside it return EDEADLK, trylock EBUSY, cond_wait EPERM (it would
 * stop the lock's only servicing thread).  Thread-local state is the server
 * thread's.
 * Oversubscription: the server spins one futex round trip
 * (ll_spin_budget_cycles) with nothing to serve, then sleeps; clients poll
 * (spin, yield) or poll then sleep (spin-then-park, default) or sleep at
 * once (park).  With the explicit spin policy that is all (the thesis's
 * dedicated-core configuration), and so it is for a server pinned by
 * LIBLOCK_MPSERVER_CPU (a core given to it: `liblock bench delegation`
 * reproduces the thesis's setting so).  Otherwise the lock is in direct
 * mode (below).
 *
 * Direct mode (ours; src/runtime/mpserver/direct.c has the lock word and
 * its no-lost-wake-up argument).  Why: delegation pays only while the
 * server thread is on a CPU.  With more threads than CPUs it is an ordinary
 * thread that the scheduler runs 1/(threads on its CPU) of the time; a
 * request posted while it is off-CPU waits for it to be scheduled (or,
 * asleep, for a cross-CPU futex wake-up), and a client polling for the
 * reply on the server's own CPU keeps it off.  Each critical section then
 * costs a scheduling delay or a wake-up instead of a cache-line round
 * trip, and lock()/unlock() under the interposer would cost a server round
 * trip per lock.  Raising the server's scheduling weight or making clients
 * on the server's CPU yield is not enough: the cross-CPU round trip itself
 * is slower than the section run locally by a thread that already has its
 * lines, so the server must get out of the way when it cannot be on a CPU
 * of its own.
 * What: a lock word (mps_lock.locked, MPS_W_* bits) that every critical
 * section holds, whichever thread runs it:
 *   lock/trylock/unlock: a futex mutex on the word (CAS 0 -> HELD, spin as
 *     the policy says -- spin-then-park: an eighth of the spin budget,
 *     LIBLOCK_MPSERVER_WORD_SPIN_NS, because in this mode the holder is
 *     often off its CPU, and a waiter spinning the whole budget for it only
 *     keeps a CPU from it -- then sleep; unlock = exchange(0), wake one
 *     sleeper)
 *     -- no request at all, like rcl's direct lock/unlock, and no server
 *     thread either until the first execute (ensure_direct);
 *   execute: if the server sleeps (server_parked) or last ran a pass on the
 *     caller's CPU (server_cpu, so it is not running now), take the word and
 *     run cs on the calling thread (ll_mps_serving set around it: EDEADLK
 *     etc. as inside a delegated section); on the server's CPU with the
 *     word taken, wait for the word; asleep with the word taken (contention)
 *     post the request and wake the server.  Otherwise post the request; if
 *     no reply within the window (LIBLOCK_MPSERVER_WINDOW_NS, default an
 *     eighth of the spin budget: a running server answers in a pass), try
 *     to withdraw it (CAS PENDING -> 0) and run cs under the word here.
 *   server: takes the word (CAS 0 -> HELD|SERVER) at the first EXEC of a
 *     pass, claims each request (CAS PENDING -> PENDING|CLAIM; a withdrawn
 *     one is skipped), runs them, drops the word at the end of the pass.
 *     If the word is held by a client it leaves the requests pending; if it
 *     sleeps so, it announces server_parked = 2 and the word's next release
 *     wakes it.
 * Invariants in direct mode (in place of I2/I3): D1 every critical section
 * (delegated, run by its caller, or between lock and unlock) runs while its
 * thread holds the word, taken by a CAS from 0: mutual exclusion; D2 a
 * request is run at most once and then replied to: claim and withdrawal
 * are CASes from the same PENDING word (exactly one wins), the server runs
 * only what it claimed, the client runs only what it withdrew; D3 a request
 * left pending because the word was held is served after the word's next
 * release (the server rescans every pass; asleep, it is woken, direct.c),
 * unless its client has withdrawn it first (and then runs it itself).
 * Fairness is the futex word's: barging, not starvation-free (a section
 * posted to a running server is served in scan order, as in request mode;
 * one whose
 * client withdrew competes for the word like a lock() caller).  Thread-
 * local state in a section that its caller runs itself is the caller's
 * (allowed by docs/api.md: a delegated section "may run on another
 * thread").  Cost when not oversubscribed: one CAS per pass and one per
 * request on the server, ll_current_cpu per pass and per execute.
 * LIBLOCK_MPSERVER_DIRECT=0 turns direct mode off (the request path for
 * every policy); =1 turns it on for a pinned server
 * too (never for the spin policy).
 * fork: the child has no server thread; the first request in the child
 * (ll_mps_generation differs from the lock's) starts one, after applying
 * the UNLOCKs still pending in the parent's slots and dropping other
 * pending requests (their threads do not exist in the child).  A lock held
 * by the forking thread stays held by it.  Direct mode: a word held by the
 * parent's server (MPS_W_SERVER) or by a parent thread running its own
 * execute() section (MPS_W_EXEC) is released in the child (fork_fixup, run
 * by the child's first lock/trylock/execute through ensure_direct or
 * ensure_server); a lock() holder other than the forking thread keeps it
 * held, as with glibc.  exit: the server is not stopped,
 * so exit handlers and other threads are served until the process ends.
 */
#include "runtime/mpserver/mpserver.h"
#include "platform/nt_store.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__thread const liblock_t *ll_mps_serving LL_TLS_IE;
_Atomic uint64_t ll_mps_generation = 1;


/* The generation is bumped in every forked child.  The handler is
 * registered by an early constructor, so it runs before the child handlers
 * registered later (the interposer's rebuilds locks in its own); and a
 * server whose recorded pid is the caller's is never restarted, whatever
 * the order (ensure_server). */
static void mps_child(void) { atomic_fetch_add_explicit(&ll_mps_generation, 1, memory_order_relaxed); }
static pthread_once_t mps_once = PTHREAD_ONCE_INIT;
static void mps_once_init(void) { pthread_atfork(NULL, NULL, mps_child); }
__attribute__((constructor(101))) static void mps_ctor(void) { pthread_once(&mps_once, mps_once_init); }

static int mps_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    pthread_once(&mps_once, mps_once_init);
    s->self = l;
    s->stride = (unsigned)ll_env_long("LIBLOCK_MPSERVER_STRIDE", 1, 1, 2);
    s->stream = (int)ll_env_long("LIBLOCK_MPSERVER_STREAM", 0, 0, 1);
    s->shuffle = (int)ll_env_long("LIBLOCK_MPSERVER_SHUFFLE", 0, 0, 1);
    s->cpu = (int)ll_env_long("LIBLOCK_MPSERVER_CPU", -1, -1, 1 << 20);
    s->direct = ll_mps_direct_default(l->_wait, s->cpu >= 0);
    long win = ll_env_long("LIBLOCK_MPSERVER_WINDOW_NS", 0, 0, 60000000000L);
    s->window = win ? ll_ns_to_cycles((uint64_t)win) : 0; /* 0: an eighth of the spin budget */
    long ws = ll_env_long("LIBLOCK_MPSERVER_WORD_SPIN_NS", -1, -1, 1000000000L);
    s->word_spin = ws > 0 ? ll_ns_to_cycles((uint64_t)ws) : ws == 0 ? 1 : 0; /* 0: an eighth of the budget */
    atomic_store_explicit(&s->server_cpu, -1, memory_order_relaxed);
    const char *b = getenv("LIBLOCK_MPSERVER_BACKOFF");
    if (b && strcmp(b, "adaptive") == 0) {
        s->backoff_mode = MPS_BO_ADAPTIVE;
    } else {
        s->backoff = (uint64_t)ll_env_long("LIBLOCK_MPSERVER_BACKOFF", 0, 0, (long)MPS_BACKOFF_MAX);
        s->backoff_mode = s->backoff ? MPS_BO_FIXED : MPS_BO_NONE;
    }
    atomic_store_explicit(&s->locked_by, -1, memory_order_relaxed);
    return 0;
}

/* ---- start-up, fork ---------------------------------------------------- */

/* The start lock's value is the generation of its holder, so a holder that
 * was another thread of the parent (it does not exist in a forked child) is
 * recognised and overtaken. */
static void start_lock(struct mps_lock *s, uint64_t g)
{
    for (;;) {
        uint64_t v = atomic_load_explicit(&s->start_lock, memory_order_relaxed);
        if ((v == 0 || v != g) &&
            atomic_compare_exchange_weak_explicit(&s->start_lock, &v, g, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        ll_yield();
    }
}

/* In a forked child, before its server starts: apply the UNLOCKs pending in
 * the parent's slots, drop every other pending request (its thread does
 * not exist here), wake nobody (no thread sleeps). */
static void fork_fixup(struct mps_lock *s)
{
    atomic_store_explicit(&s->sleepers, 0, memory_order_relaxed);
    atomic_store_explicit(&s->server_parked, 0, memory_order_relaxed);
    /* held by the parent's server for a pass, or by a client running its
     * own execute() section: neither thread exists here (a lock() holder
     * other than the forking thread keeps it held, as with glibc) */
    if (s->direct && (atomic_load_explicit(&s->locked, memory_order_relaxed) & (MPS_W_SERVER | MPS_W_EXEC)))
        atomic_store_explicit(&s->locked, 0, memory_order_relaxed);
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_relaxed);
    if (!dir)
        return;
    for (unsigned j = 0; j < MPS_MAX_CHUNKS; j++) {
        struct mps_chunk *c = atomic_load_explicit(&dir[j], memory_order_relaxed);
        if (!c)
            continue;
        for (unsigned k = 0; k < MPS_CHUNK; k++) {
            struct mps_slot *p = mps_slot(s, c, k);
            uint64_t r = atomic_load_explicit(&p->req, memory_order_relaxed);
            atomic_store_explicit(&p->parked, 0, memory_order_relaxed);
            /* unserved, or served without its reply (the parent's server
             * was between the two when fork copied memory) */
            int unreplied = (atomic_load_explicit(&p->resp, memory_order_relaxed) & 3u) == MPS_PENDING;
            if (r == c->last[k] && !unreplied)
                continue;
            int release = MPS_OP(r) == MPS_UNLOCK ||
                          (MPS_OP(r) != MPS_EXEC && r == c->last[k] &&
                           atomic_load_explicit(&s->locked_by, memory_order_relaxed) == (int)(j * MPS_CHUNK + k));
            if (release) { /* an unlock, or a grant nobody received */
                atomic_store_explicit(&s->locked, 0, memory_order_relaxed);
                atomic_store_explicit(&s->locked_by, -1, memory_order_relaxed);
            }
            c->last[k] = r;
            atomic_store_explicit(&p->resp, 0, memory_order_relaxed);
        }
    }
}

static int ensure_server(liblock_t *l, struct mps_lock *s)
{
    uint64_t g = atomic_load_explicit(&ll_mps_generation, memory_order_relaxed);
    if (LL_LIKELY(atomic_load_explicit(&s->gen, memory_order_acquire) == g))
        return 0;
    start_lock(s, g);
    int e = 0;
    uint64_t cur = atomic_load_explicit(&s->gen, memory_order_relaxed);
    if (cur != g && cur != 0 && s->pid == getpid()) {
        /* our server was started in this process before the generation
         * was bumped (a fork handler that ran before ours): keep it */
        atomic_store_explicit(&s->gen, g, memory_order_release);
    } else if (cur != g) {
        if (cur != 0)
            fork_fixup(s); /* state copied from the parent; its server is not here */
        if (!atomic_load_explicit(&s->dir, memory_order_relaxed)) {
            void *d = calloc(MPS_MAX_CHUNKS, sizeof(_Atomic(struct mps_chunk *)));
            if (!d)
                e = ENOMEM;
            else
                atomic_store_explicit(&s->dir, d, memory_order_release);
        }
        if (!e)
            e = ll_mps_server_start(l, s);
        if (!e) {
            s->pid = getpid();
            atomic_store_explicit(&s->gen, g, memory_order_release);
        }
    }
    atomic_store_explicit(&s->start_lock, 0, memory_order_release);
    return e;
}

/* Direct mode, lock/trylock: no server thread is needed (they send no
 * request), so none is started -- a program under the interposer has
 * many mutexes and runs execute() on none of them.  Only a forked child's
 * copy of a lock whose server ran in the parent needs ensure_server's
 * fix-up (the parent's server's or own-execute hold on the word). */
static inline int ensure_direct(liblock_t *l, struct mps_lock *s)
{
    uint64_t cur = atomic_load_explicit(&s->gen, memory_order_acquire);
    if (LL_LIKELY(cur == 0 || cur == atomic_load_explicit(&ll_mps_generation, memory_order_relaxed)))
        return 0;
    return ensure_server(l, s);
}

/* The calling thread's slot (its chunk allocated on first use). */
static struct mps_chunk *my_chunk(struct mps_lock *s, ll_thread_t *self, unsigned *k)
{
    unsigned id = self->id;
    if (LL_UNLIKELY(id >= MPS_CHUNK * MPS_MAX_CHUNKS))
        return NULL;
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    _Atomic(struct mps_chunk *) *e = &dir[id / MPS_CHUNK];
    struct mps_chunk *c = atomic_load_explicit(e, memory_order_acquire);
    if (LL_UNLIKELY(!c)) {
        struct mps_chunk *n = ll_alloc_aligned(sizeof *n);
        if (!n)
            return NULL;
        if (atomic_compare_exchange_strong_explicit(e, &c, n, memory_order_acq_rel, memory_order_acquire))
            c = n;
        else
            free(n);
    }
    unsigned hw = atomic_load_explicit(&s->hw, memory_order_relaxed);
    while (hw <= id && !atomic_compare_exchange_weak_explicit(&s->hw, &hw, id + 1, memory_order_release,
                                                              memory_order_relaxed))
        ;
    *k = id % MPS_CHUNK;
    return c;
}

static inline uint64_t reply_value(struct mps_slot *p, uint64_t w)
{
    if ((w & 3u) == MPS_OUTLINE)
        return atomic_load_explicit(&p->ret, memory_order_relaxed); /* ordered by the word (see reply()) */
    return w >> 2;
}

#define MPS_WITHDRAWN (-1) /* request(): direct mode, the EXEC was withdrawn */

/* Post one request and (unless it is an UNLOCK) wait for its reply.
 * Returns 0 and the reply value, or an errno, or (direct mode, EXEC)
 * MPS_WITHDRAWN: the caller runs the section itself. */
static int request(liblock_t *l, unsigned op, void *(*cs)(void *), void *arg, uint64_t *out)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    ll_thread_t *self = ll_self();
    if (LL_UNLIKELY(!self))
        return ENOMEM;
    int e = ensure_server(l, s);
    if (LL_UNLIKELY(e))
        return e;
    unsigned k;
    struct mps_chunk *c = my_chunk(s, self, &k);
    if (LL_UNLIKELY(!c))
        return self->id >= MPS_CHUNK * MPS_MAX_CHUNKS ? EAGAIN : ENOMEM;
    struct mps_slot *p = mps_slot(s, c, k);
    struct mps_cpriv *cp = &c->cpriv[k];
    /* I1: a previous asynchronous UNLOCK must have been served */
    if (LL_UNLIKELY((atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) == MPS_PENDING))
        ll_mps_wait_reply(l, s, p, cp, ll_cycles(), 0);
    p->cs = cs;
    p->arg = arg;
    uint64_t seq = ++cp->seq;
    atomic_store_explicit(&p->resp, MPS_PENDING_WORD(seq), memory_order_relaxed);
    uint64_t r = (seq << 2) | op;
    uint64_t t0 = ll_cycles();
    atomic_store_explicit(&p->req, r, memory_order_release);
    if (op == MPS_UNLOCK) {
        /* Nobody waits on this request, so the Dekker half of I4 is done
         * now: a server that went to sleep because the lock was held must
         * see the UNLOCK or be woken. */
        ll_mps_server_check_fenced(s);
        return 0;
    }
    if (atomic_load_explicit(&s->server_parked, memory_order_relaxed))
        ll_mps_wake_server(s);
    if (op == MPS_TRY)
        return ll_mps_try_wait(l, s, p, cp, t0, seq, out);
    uint64_t w;
    if (s->direct) {
        if (ll_mps_exec_wait(l, s, p, cp, t0, seq, &w))
            return MPS_WITHDRAWN;
    } else {
        w = ll_mps_wait_reply(l, s, p, cp, t0, op != MPS_LOCK);
    }
    *out = reply_value(p, w);
    return 0;
}

/* Wait until the calling thread's previous request on l (an asynchronous
 * UNLOCK) has been served. */
static void settle_own(liblock_t *l, struct mps_lock *s)
{
    ll_thread_t *self = ll_self_tls;
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    if (!self || !dir || self->id >= MPS_CHUNK * MPS_MAX_CHUNKS)
        return;
    struct mps_chunk *c = atomic_load_explicit(&dir[self->id / MPS_CHUNK], memory_order_acquire);
    if (!c)
        return;
    unsigned k = self->id % MPS_CHUNK;
    struct mps_slot *p = mps_slot(s, c, k);
    if ((atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) == MPS_PENDING &&
        ensure_server(l, s) == 0)
        ll_mps_wait_reply(l, s, p, &c->cpriv[k], ll_cycles(), 0);
}

/* ---- ops ----------------------------------------------------------------- */

static int held_by_caller(const liblock_t *l)
{
    if (ll_mps_serving == l)
        return 1;
    ll_thread_t *self = ll_self_tls;
    return self && self->nheld && ll_hold_find(self, l);
}

/* Direct mode: run cs on the calling thread under the lock word. */
static void *run_own(liblock_t *l, struct mps_lock *s, void *(*cs)(void *), void *arg)
{
    struct ll_cs_scope sc = ll_cs_enter(&ll_mps_serving, l);
    void *ret = cs(arg);
    ll_cs_leave(&ll_mps_serving, sc);
    ll_mps_word_unlock(s);
    return ret;
}

/* Direct mode (header, "Direct mode"): the server is asleep or cannot be
 * running (it last ran on our CPU): take the word and run cs here if it is
 * free; on our CPU, wait for the word (the server is not running anyway).
 * Otherwise post the request; withdrawn after the window: take the word. */
static void *exec_direct(liblock_t *l, struct mps_lock *s, void *(*cs)(void *), void *arg)
{
    int e = ensure_server(l, s);
    if (LL_UNLIKELY(e)) {
        errno = e;
        return NULL;
    }
    uint32_t parked = atomic_load_explicit(&s->server_parked, memory_order_relaxed);
    if (parked || ll_current_cpu() == atomic_load_explicit(&s->server_cpu, memory_order_relaxed)) {
        if (ll_mps_word_trylock(s, MPS_W_EXEC))
            return run_own(l, s, cs, arg);
        if (!parked) {
            ll_mps_word_lock(s, l->_wait, MPS_W_EXEC);
            return run_own(l, s, cs, arg);
        }
        /* asleep and the word is taken: contention, delegation pays again */
    }
    uint64_t v = 0;
    e = request(l, MPS_EXEC, cs, arg, &v);
    if (e == MPS_WITHDRAWN) {
        ll_mps_word_lock(s, l->_wait, MPS_W_EXEC);
        return run_own(l, s, cs, arg);
    }
    if (LL_UNLIKELY(e)) {
        errno = e;
        return NULL;
    }
    return (void *)(uintptr_t)v;
}

static void *mps_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    if (LL_UNLIKELY(held_by_caller(l))) {
        errno = EDEADLK;
        return NULL;
    }
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (s->direct)
        return exec_direct(l, s, cs, arg);
    uint64_t v = 0;
    int e = request(l, MPS_EXEC, cs, arg, &v);
    if (LL_UNLIKELY(e)) {
        errno = e;
        return NULL;
    }
    return (void *)(uintptr_t)v;
}

static int mps_lock(liblock_t *l, void *node)
{
    (void)node;
    if (ll_mps_serving == l)
        return EDEADLK;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (s->direct) {
        int e = ensure_direct(l, s);
        if (LL_UNLIKELY(e))
            return e;
        ll_mps_word_lock(s, l->_wait, 0);
        return 0;
    }
    uint64_t v = 0;
    return request(l, MPS_LOCK, NULL, NULL, &v);
}

/* Is the lock held by a thread that has not asked to release it?  (Held,
 * and the holder's slot has no UNLOCK in flight.)  An asynchronous UNLOCK
 * still in flight has already returned to its caller, so for trylock the
 * lock is free: a trylock that happens after an unlock (in any thread)
 * must not fail because the server has not served that unlock yet.
 * The answer "held" must be true at one instant, but locked, locked_by and
 * the slot are read at different times: a reader delayed between them
 * could see locked == 1 and locked_by == h from before the server served
 * h's UNLOCK, and the slot's reply from after it (the server stores locked
 * = 0, locked_by = -1, then the reply), and call a free lock held -- a
 * trylock then failed after the unlocking thread had been joined (seen
 * once under load: test_interpose, "cancel in wait").  So "held" is
 * confirmed by reading locked and locked_by again after the slot: if both
 * are unchanged, then either no release was served in between (the lock
 * was held by h, with no UNLOCK in flight, when the slot was read) or h was
 * granted the lock again in between (held by h, before its next UNLOCK
 * was posted, at some instant of the window); either way it was held for
 * real during the call.  Anything else answers "not held" and the caller
 * looks again. */
static int held_for_real(struct mps_lock *s)
{
    if (!atomic_load_explicit(&s->locked, memory_order_acquire))
        return 0;
    int h = atomic_load_explicit(&s->locked_by, memory_order_acquire);
    if (h < 0)
        return 0; /* a release under way (server.c stores locked before locked_by): look again */
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    if (!dir)
        return 1;
    struct mps_chunk *c = atomic_load_explicit(&dir[(unsigned)h / MPS_CHUNK], memory_order_acquire);
    if (!c)
        return 1;
    struct mps_slot *p = mps_slot(s, c, (unsigned)h % MPS_CHUNK);
    uint64_t r = atomic_load_explicit(&p->req, memory_order_acquire);
    if (MPS_OP(r) == MPS_UNLOCK && (atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) == MPS_PENDING)
        return 0;
    /* confirm (see above); acquire loads keep these after the slot's */
    return atomic_load_explicit(&s->locked, memory_order_acquire) &&
           atomic_load_explicit(&s->locked_by, memory_order_acquire) == h;
}

static int mps_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (ll_mps_serving == l)
        return EBUSY;
    if (s->direct) {
        int e = ensure_direct(l, s);
        return e ? e : ll_mps_word_trylock(s, 0) ? 0 : EBUSY;
    }
    int e = ensure_server(l, s); /* (in a forked child: first applies the parent's pending UNLOCKs) */
    if (LL_UNLIKELY(e))
        return e;
    settle_own(l, s); /* our own UNLOCK first */
    /* Fail only on a real holder (or a running delegated section, see
     * try_wait); a release in flight is waited for and we try again.
     * Each retry follows a release by somebody, so a bounded number of
     * them is enough; after that the lock was taken by others during the
     * call, and EBUSY is a correct answer. */
    for (int tries = 0; tries < 64; tries++) {
        for (unsigned spins = 0; atomic_load_explicit(&s->locked, memory_order_acquire); spins++) {
            if (held_for_real(s))
                return EBUSY;
            if (spins < 64) /* the server serves the UNLOCK within a scan */
                ll_pause();
            else
                ll_yield();
        }
        uint64_t v = 0;
        e = request(l, MPS_TRY, NULL, NULL, &v);
        if (e || v)
            return e;
        if (atomic_load_explicit(&s->in_cs, memory_order_relaxed) || held_for_real(s))
            return EBUSY;
    }
    return EBUSY;
}

static int mps_unlock(liblock_t *l, void *node)
{
    (void)node;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (s->direct) {
        ll_mps_word_unlock(s);
        return 0;
    }
    /* An unlock of a lock another thread's slot holds (a NORMAL mutex
     * unlocked by another thread, which glibc allows: the interposer passes
     * it on) waits until the server has served it: held_for_real looks for
     * an UNLOCK in flight only in the holder's slot, so a trylock after this
     * unlock, in any thread, would otherwise fail.  locked_by names this
     * thread's slot when it holds the lock (the server wrote it before the
     * reply this thread acquired); any other value makes the wait happen,
     * which is always correct. */
    ll_thread_t *self = ll_self();
    int foreign = !self || atomic_load_explicit(&s->locked_by, memory_order_relaxed) != (int)self->id;
    uint64_t v;
    int e = request(l, MPS_UNLOCK, NULL, NULL, &v);
    if (!e && foreign)
        settle_own(l, s);
    return e;
}

/* Any request pending?  UNLOCKs in flight are waited for (they are served
 * within a pass: "unlock; destroy" must work). */
static int busy(struct mps_lock *s)
{
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    if (!dir)
        return 0;
    for (unsigned j = 0; j < MPS_MAX_CHUNKS; j++) {
        struct mps_chunk *c = atomic_load_explicit(&dir[j], memory_order_acquire);
        if (!c)
            continue;
        for (unsigned k = 0; k < MPS_CHUNK; k++) {
            struct mps_slot *p = mps_slot(s, c, k);
            for (;;) {
                uint64_t r = atomic_load_explicit(&p->req, memory_order_acquire);
                if ((atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) != MPS_PENDING)
                    break;
                if (MPS_OP(r) != MPS_UNLOCK)
                    return 1;
                ll_yield();
            }
        }
    }
    return 0;
}

static int mps_destroy(liblock_t *l)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (ll_mps_serving == l)
        return EBUSY;
    uint64_t g = atomic_load_explicit(&ll_mps_generation, memory_order_relaxed);
    uint64_t cur = atomic_load_explicit(&s->gen, memory_order_acquire);
    int ours = cur == g || (cur != 0 && s->pid == getpid());
    if (ours && busy(s))
        return EBUSY;
    if (atomic_load_explicit(&s->locked, memory_order_acquire))
        return EBUSY; /* (in a forked child: held by a thread of the parent) */
    if (ours)
        ll_mps_server_stop(s);
    atomic_store_explicit(&s->gen, 0, memory_order_relaxed);
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_relaxed);
    if (dir) {
        for (unsigned j = 0; j < MPS_MAX_CHUNKS; j++)
            free(atomic_load_explicit(&dir[j], memory_order_relaxed));
        free(dir);
        atomic_store_explicit(&s->dir, NULL, memory_order_relaxed);
    }
    return 0;
}

static int mps_cond_release(liblock_t *l)
{
    if (ll_mps_serving == l)
        return EPERM; /* inside a delegated section: would stop the server */
    ll_thread_t *self = ll_self_tls;
    if (!self || !ll_hold_find(self, l))
        return EPERM;
    return ll_api_unlock(l);
}

static int mps_cond_reacquire(liblock_t *l) { return ll_api_lock(l); }

static int mps_thread_register(liblock_t *l)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    ll_thread_t *self = ll_self();
    if (!self)
        return ENOMEM;
    int e = ensure_server(l, s);
    if (e)
        return e;
    unsigned k;
    return my_chunk(s, self, &k) ? 0 : self->id >= MPS_CHUNK * MPS_MAX_CHUNKS ? EAGAIN : ENOMEM;
}

/* Statistics (struct ll_ops .stats), for `liblock bench delegation`:
 * served, requests the server ran; passes, its passes over the client
 * lines; busy_passes, those that found a request; busy_cycles, cycles
 * spent in them; parks, client sleeps; stream, streaming-store replies on
 * (1) and available (ll_nt_available).  served / busy_passes is the
 * thesis's "combining rate" analogue, busy_cycles / served the server's
 * cycles per request while busy. */
static void mps_stats(const liblock_t *l, struct ll_stats *o)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    ll_stats_put(o, "served", (int64_t)atomic_load_explicit(&s->served, memory_order_relaxed));
    ll_stats_put(o, "passes", (int64_t)atomic_load_explicit(&s->passes, memory_order_relaxed));
    ll_stats_put(o, "busy_passes", (int64_t)atomic_load_explicit(&s->busy_passes, memory_order_relaxed));
    ll_stats_put(o, "busy_cycles", (int64_t)atomic_load_explicit(&s->busy_cycles, memory_order_relaxed));
    ll_stats_put(o, "parks", (int64_t)atomic_load_explicit(&s->parks, memory_order_relaxed));
    ll_stats_put(o, "stream", s->stream);
    ll_stats_put(o, "stream_available", ll_nt_available());
}

const struct ll_ops ll_ops_mp_server = {
    .name = "mp-server",
    .description = "dedicated server thread per lock, one line per client; optional client back-off and streaming-store replies",
    .source = "Petrovic, Efficient Communication and Synchronization on Manycore Processors (PhD thesis, EPFL 2015), sections 6.1.2 and 7.1, Algorithm 5 with back-off and streaming stores",
    .props = LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) |
                LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) | LL_POLICY_BIT(LIBLOCK_WAIT_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "direct mode (every policy but spin, server not pinned): lock/unlock are a futex mutex on the lock word, no request; execute runs the section on the caller's thread under that word when the server sleeps or last ran on the caller's CPU, or when a posted request is not answered within an eighth of the spin budget (withdrawn); otherwise the server runs it, its clients polling, then sleeping",
    .state_size = sizeof(struct mps_lock),
    .node_size = 0,
    .init = mps_init,
    .destroy = mps_destroy,
    .lock = mps_lock,
    .trylock = mps_trylock,
    .unlock = mps_unlock,
    .execute = mps_execute,
    .cond_release = mps_cond_release,
    .cond_reacquire = mps_cond_reacquire,
    .thread_register = mps_thread_register,
    .stats = mps_stats,
};
