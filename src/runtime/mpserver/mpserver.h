/*
 * mpserver.h - the mp-server runtime (src/locks/delegation/mp-server.c is
 * its ops table): a dedicated server thread per lock runs every critical
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
 * future work).  Files: src/locks/delegation/mp-server.c (the ops table);
 * here, src/runtime/mpserver/: this header (the algorithm and the shared
 * data), lock.c (the operations), request.c (posting a request),
 * lifecycle.c (init, start-up, fork, destroy), server.c (the server
 * thread), client.c (how a client waits), direct.c (direct mode's lock
 * word).  docs/hybrid.md, "The optimised delegation server", says
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
#ifndef LIBLOCK_MPSERVER_H
#define LIBLOCK_MPSERVER_H

#include "internal.h"

#define MPS_CHUNK 64        /* slots per chunk (allocated on demand) */
#define MPS_MAX_CHUNKS 1024 /* => 65536 simultaneously live threads per lock */

/* Request word: seq << 2 | op.  seq counts the slot's requests (never 0
 * after the first), so a request differs from the last one served. */
enum { MPS_EXEC = 0, MPS_LOCK = 1, MPS_UNLOCK = 2, MPS_TRY = 3 };
#define MPS_OP(r) ((unsigned)((r)&3u))

/* Response word (one 64-bit word: value and flag together, section 7.1.2):
 *   tag 0: done, value = w >> 2 (values below 2^62, i.e. every pointer and
 *          every small integer)
 *   tag 1: pending: seq << 2 | 1, written by the client when posting (the
 *          seq lets a TRY reply be a CAS that cannot hit a later request)
 *   tag 3: done, value in slot.ret (the rare values >= 2^62, e.g. (void *)-1)
 * A zeroed slot reads "done, value 0": idle. */
#define MPS_PENDING 1u
#define MPS_PENDING_WORD(seq) ((seq) << 2 | MPS_PENDING)
#define MPS_OUTLINE 3u
#define MPS_INLINE_MAX (1ull << 62)
/* Direct mode (direct.c): the server claims an EXEC request before running
 * it by CAS of its PENDING word to PENDING|CLAIM (still tag 1, "pending",
 * for every reader); the client withdraws it by CAS of the same PENDING
 * word to 0.  Exactly one of the two wins.  seq < 2^61, so the bit is free. */
#define MPS_CLAIM (1ull << 63)

/* Direct mode: the lock word `locked` (direct.c).  HELD alone: a client
 * holds it; SERVER: the server holds it for a pass; SLEEPERS: clients may
 * sleep on it (futex), the releaser wakes one. */
#define MPS_W_HELD 1u
#define MPS_W_SLEEPERS 2u
#define MPS_W_SERVER 4u
#define MPS_W_EXEC 8u /* a client runs its own execute() section (fork: dropped in the child) */

/* One client's line.  req/cs/arg: written by the client only while it has
 * no request outstanding (resp not pending), published by the release store
 * of req.  resp/ret: written by the server (the client writes PENDING when
 * posting).  parked: client sets, either side clears.  Nothing else shares
 * the line, so when the client does not poll, the server is the only writer
 * of the line between a request and its reply. */
struct mps_slot {
    _Atomic uint64_t req;
    void *(*cs)(void *);
    void *arg;
    uintptr_t tp;            /* the client's identity (platform/identity.h), written with cs */
    _Atomic uint64_t resp;
    _Atomic uint64_t ret;
    _Atomic uint32_t parked; /* 1: the client sleeps on this word (futex) */
} __attribute__((aligned(LL_CACHELINE)));

/* Client-private per-slot state (a line of its own: the server never reads
 * it, so updating it after a reply costs the server nothing). */
struct mps_cpriv {
    uint64_t seq;
    uint64_t est;  /* adaptive back-off: learnt response time, cycles */
    uint64_t pad[6];
} __attribute__((aligned(LL_CACHELINE)));

struct mps_chunk {
    struct mps_slot slots[MPS_CHUNK * 2]; /* slot k at slots[k * stride] */
    struct mps_cpriv cpriv[MPS_CHUNK];
    uint64_t last[MPS_CHUNK];             /* server-private: last request word served */
};

#define MPS_BACKOFF_MAX 10000000ull /* cycles */
/* Adaptive estimates stay below this (cycles; the thesis's hand-tuned
 * delays were 1,500-5,000): a preempted server or client must not teach
 * a client to busy-wait for a scheduler time slice. */
#define MPS_ADAPTIVE_MAX 20000ull
#define MPS_RECHECK 65536u          /* cycles between fenced checks of a sleeping server */

/* Back-off modes */
enum { MPS_BO_NONE = 0, MPS_BO_FIXED = 1, MPS_BO_ADAPTIVE = 2 };

struct mps_lock {
    /* written by the server (rarely), read by every client after posting */
    LL_ALIGNED _Atomic uint32_t server_parked; /* 1: the server sleeps on it (futex) */
    _Atomic int server_cpu;                    /* direct mode: CPU of the server's last pass (-1: unknown); a relaxed hint: a stale value only sends an execute to the server or runs it here, and the word decides */
    /* written by the server, read by trylock callers only (direct mode: the
     * lock word, written by every side, MPS_W_* bits) */
    LL_ALIGNED _Atomic uint32_t locked;        /* held through liblock_lock/trylock */
    _Atomic uint32_t in_cs;                    /* the server is running a delegated section */
    _Atomic int locked_by;                     /* slot index of the holder (diagnostics) */
    /* written by clients (sleeping clients) */
    LL_ALIGNED _Atomic uint32_t sleepers;
    /* set-up, read-mostly */
    LL_ALIGNED _Atomic(_Atomic(struct mps_chunk *) *) dir; /* MPS_MAX_CHUNKS entries, allocated at first use */
    _Atomic unsigned hw;         /* 1 + highest slot index that ever posted: the scan
                                    bound (monotonic: a thread may exit right after an
                                    asynchronous UNLOCK, which must still be served) */
    _Atomic uint64_t gen;        /* fork generation the server thread runs in; 0: none */
    _Atomic uint64_t start_lock; /* generation of the thread starting the server; 0: free */
    _Atomic int stop;
    _Atomic int started;         /* the server thread has its thread record (ll_mps_server_start waits) */
    pthread_t thread;
    pid_t pid;                   /* process the server thread runs in */
    unsigned stride;             /* 1 or 2 lines per slot */
    int stream;                  /* replies with MOVNTI */
    int shuffle;                 /* random scan order (control experiment) */
    int backoff_mode;
    uint64_t backoff;            /* fixed back-off, cycles */
    int cpu;                     /* server CPU, -1: not pinned */
    int direct;                  /* direct mode (direct.c): fixed at init */
    uint64_t window;             /* direct mode: cycles a posted EXEC waits before withdrawing */
    uint64_t word_spin;          /* direct mode, spin-then-park: cycles a word waiter spins */
    liblock_t *self;             /* the liblock_t (for the server thread) */
    /* statistics, written by the server thread only */
    LL_ALIGNED _Atomic uint64_t served, passes, busy_passes, parks, wakeups;
    _Atomic uint64_t busy_cycles; /* cycles spent in passes that served something */
};

extern _Atomic uint64_t ll_mps_generation; /* bumped in every forked child */

int ll_mps_server_start(liblock_t *l, struct mps_lock *s); /* 0 or errno; caller holds start_lock */
void ll_mps_server_stop(struct mps_lock *s);               /* join; caller ensures gen is current */
void ll_mps_wake_server(struct mps_lock *s);               /* if it sleeps */

/* client.c: waiting for a reply */
void ll_mps_server_check_fenced(struct mps_lock *s);
uint64_t ll_mps_wait_reply(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp, uint64_t t0,
                           int learn);
int ll_mps_try_wait(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp, uint64_t t0,
                    uint64_t seq, uint64_t *out);

/* direct.c: direct mode (the oversubscription path, "Direct mode" above) */
int ll_mps_direct_default(int policy, int pinned);
int ll_mps_word_trylock(struct mps_lock *s, uint32_t bits);
void ll_mps_word_lock(struct mps_lock *s, int policy, uint32_t bits); /* bits: 0 or MPS_W_EXEC */
void ll_mps_word_unlock(struct mps_lock *s);
int ll_mps_server_take_word(struct mps_lock *s);
void ll_mps_server_drop_word(struct mps_lock *s);
int ll_mps_exec_wait(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp, uint64_t t0,
                     uint64_t seq, uint64_t *w);

static inline struct mps_slot *mps_slot(struct mps_lock *s, struct mps_chunk *c, unsigned k)
{
    return &c->slots[k * s->stride];
}

/* lock.c: the operations (the ops table's entries) */
extern __thread const liblock_t *ll_mps_serving LL_TLS_IE; /* lock whose sections this thread runs (ll_cs_enter) */
void *ll_mps_execute(liblock_t *l, void *(*cs)(void *), void *arg);
int ll_mps_lock_lock(liblock_t *l, void *node);
int ll_mps_lock_trylock(liblock_t *l, void *node);
int ll_mps_lock_unlock(liblock_t *l, void *node);
int ll_mps_cond_release(liblock_t *l);
int ll_mps_cond_reacquire(liblock_t *l);

/* server.c: the server counters (the ops table's .stats) */
void ll_mps_stats(const liblock_t *l, struct ll_stats *o);

/* request.c: posting a request */
#define MPS_WITHDRAWN (-1) /* ll_mps_request(): direct mode, the EXEC was withdrawn */
struct mps_chunk *ll_mps_my_chunk(struct mps_lock *s, ll_thread_t *self, unsigned *k);
int ll_mps_request(liblock_t *l, unsigned op, void *(*cs)(void *), void *arg, uint64_t *out);
void ll_mps_settle_own(liblock_t *l, struct mps_lock *s);

/* lifecycle.c: init, start-up, fork, destroy */
int ll_mps_lock_init(liblock_t *l, const liblock_attr_t *attr);
int ll_mps_lock_destroy(liblock_t *l);
int ll_mps_thread_register(liblock_t *l);
int ll_mps_ensure_server_slow(liblock_t *l, struct mps_lock *s, uint64_t g);

/* Start the lock's server thread unless it runs in this process's
 * generation (first request; in a forked child, after the fix-up). */
static inline int ll_mps_ensure_server(liblock_t *l, struct mps_lock *s)
{
    uint64_t g = atomic_load_explicit(&ll_mps_generation, memory_order_relaxed);
    if (LL_LIKELY(atomic_load_explicit(&s->gen, memory_order_acquire) == g))
        return 0;
    return ll_mps_ensure_server_slow(l, s, g);
}

/* Direct mode, lock/trylock: no server thread is needed (they send no
 * request), so none is started -- a program under the interposer has
 * many mutexes and runs execute() on none of them.  Only a forked child's
 * copy of a lock whose server ran in the parent needs ll_mps_ensure_server's
 * fix-up (the parent's server's or own-execute hold on the word). */
static inline int ll_mps_ensure_direct(liblock_t *l, struct mps_lock *s)
{
    uint64_t cur = atomic_load_explicit(&s->gen, memory_order_acquire);
    if (LL_LIKELY(cur == 0 || cur == atomic_load_explicit(&ll_mps_generation, memory_order_relaxed)))
        return 0;
    return ll_mps_ensure_server(l, s);
}

#endif /* LIBLOCK_MPSERVER_H */
