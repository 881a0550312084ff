/*
 * mpserver.h - data shared by the mp-server algorithm's client side
 * (src/locks/delegation/mp-server.c: the ops table, requests, waiting) and its server
 * thread (src/runtime/mpserver/server.c).  The algorithm, its invariants and the
 * memory-ordering argument are in the header of src/locks/delegation/mp-server.c.
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

/* client.c: waiting for a reply (see mp-server.c) */
void ll_mps_server_check_fenced(struct mps_lock *s);
uint64_t ll_mps_wait_reply(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp, uint64_t t0,
                           int learn);
int ll_mps_try_wait(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp, uint64_t t0,
                    uint64_t seq, uint64_t *out);

/* direct.c: direct mode (the oversubscription path, see mp-server.c) */
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

#endif /* LIBLOCK_MPSERVER_H */
