/*
 * rcl.h - internal interface of the Remote Core Locking runtime (src/runtime/rcl/).
 * The design argument is in the header comment of src/runtime/rcl/server.c; the
 * client side is src/runtime/rcl/client.c (requests), direct.c (lock/trylock/unlock) and lock.c
 * (binding, init, destroy, condition variables); src/locks/delegation/rcl.c is the registry adapter.
 */
#ifndef LIBLOCK_RCL_H
#define LIBLOCK_RCL_H

#include "internal.h"
#include "platform/local_atomic.h"
#include "platform/identity.h"

/* The public opaque liblock_server_t is the runtime's server record. */
#define rcl_server liblock_server

#define RCL_MAX_HELD 16    /* locks a servicing thread can hold at once (nesting depth) */
#define RCL_ELECT_MAX 1024 /* upper bound of LIBLOCK_RCL_MAX_THREADS */

typedef void *(*rcl_fn)(void *);

/* One request slot = one cache line, written by one client, served by the
 * server.  fn is written last by the client (release) and cleared by the
 * server (release) after it has stored ret: request and reply share a line.
 * flags is written by the client before fn and read by the server while fn
 * is set.  parked is the client's futex word while it sleeps for its reply
 * (client.c "Parking"); the server resets it and wakes the client, and the
 * client clears it once it has its reply. */
struct rcl_slot {
    _Atomic(rcl_fn) fn;       /* NULL = no request; else the CS or an RCL_OP_* marker */
    void *ctx;                /* argument of fn */
    struct rcl_lock *lock;    /* the lock the request is for */
    void *ret;                /* fn's return value (or an errno for trylock) */
    uintptr_t tp;             /* the client's identity (platform/identity.h), written like ctx */
    _Atomic uint32_t parked;  /* 1: the client sleeps (or is about to) until the reply */
    uint32_t flags;           /* RCL_F_* of the pending request */
    char pad[LL_CACHELINE - 5 * sizeof(void *) - 2 * sizeof(uint32_t)];
} __attribute__((aligned(LL_CACHELINE)));
_Static_assert(sizeof(struct rcl_slot) == LL_CACHELINE, "slot must be one line");

#define RCL_F_WAKE 1u  /* the client may park: after the reply the server looks at `parked` (client.c, "Parking") */
#define RCL_F_COLOC 2u /* the client shares the server's CPU: the server parks as soon as it is idle */
#define RCL_F_FENCE 4u /* with WAKE: the client sleeps without the heavy barrier, so the reply's clear of fn is
                          a seq_cst exchange (the symmetric protocol of client.c, "Parking") */

/* Markers for the lock/trylock/unlock requests of liblock_lock & co. */
extern char rcl_op_markers[4];
#define RCL_OP_LOCK ((rcl_fn)(void *)&rcl_op_markers[0])
#define RCL_OP_TRYLOCK ((rcl_fn)(void *)&rcl_op_markers[1])
#define RCL_OP_UNLOCK ((rcl_fn)(void *)&rcl_op_markers[2])
static inline int rcl_is_op(rcl_fn f) { return (uintptr_t)(void *)f - (uintptr_t)rcl_op_markers < 4; }

/* Per-lock state (liblock_t._state).  is_locked is the lock word (server.c
 * I1-I2, direct.c "Direct lock/unlock"): 0 free; RCL_HELD_SERVER held by a
 * servicing thread (a delegated or nested CS); RCL_HELD_CLIENT held by a
 * client through liblock_lock; RCL_HELD_SLEEPERS the same, and clients may
 * sleep on the word.  Every read-modify-write of it is a real atomic (it
 * is written from several CPUs).  `want` is a hint written only by the
 * server: a request for this lock was skipped because the lock was held,
 * so clients should queue behind it (a request) rather than take the lock
 * directly.  The server is in l->_aux (lock.c, "lock life cycle"). */
struct rcl_lock {
    _Atomic uint32_t is_locked;
    _Atomic uint32_t handed; /* left held by a delegated CS for its caller (server.c, hand_over_holds) */
    _Atomic uint32_t want;   /* server: a request waits for this lock (hint, direct.c) */
    uint32_t direct;         /* set at init, never changed: clients lock/unlock directly (direct.c) */
};
extern int rcl_direct_default; /* 1 under the interposer; LIBLOCK_RCL_DIRECT overrides (lock.c, direct.c) */
#define RCL_HELD_SERVER 1u
#define RCL_HELD_CLIENT 2u
#define RCL_HELD_SLEEPERS 3u

/* The lock word's read-modify-writes by clients: real atomics. */
static inline bool rcl_lock_cas(_Atomic uint32_t *p, uint32_t e, uint32_t d)
{
    return atomic_compare_exchange_strong_explicit(p, &e, d, memory_order_acq_rel, memory_order_acquire);
}

/* A servicing thread. */
enum { ST_SERVICING = 1, ST_PREPARED = 2, ST_EXIT = 3 };
struct rcl_sthread {
    pthread_t th;
    struct rcl_server *server;
    _Atomic uint32_t wake;      /* futex word: ST_* state; the parked thread waits while PREPARED */
    _Atomic uint32_t in_cs;     /* executing a critical section (local) */
    _Atomic uint64_t timestamp; /* server->timestamp at its last pass */
    uint64_t cpu_at_election;   /* thread CPU time at the last forced election (manager) */
    struct rcl_sthread *next_prepared;
    int index;
    int started;
};

struct rcl_stats_ctr {
    _Atomic uint64_t cs, lock_ops, passes, active_passes, slow_passes;
    _Atomic uint64_t cs_in_active, clients_in_active, locks_in_active, skipped_held;
    _Atomic uint64_t mgr_wakeups, alive_misses, backup_runs, created, woken, parked, idle_parks, elections;
};

/* Clients read the first pair of lines on every request (slots, nslots:
 * line 0; idle: line 1); the server writes the lines from is_alive on on
 * every pass (n_free, statistics) and request, so they start a pair of
 * their own (LL_PAIR in internal.h: sharing one, a client's read of idle
 * pulled in the line of n_free, whose store before the reply then waited
 * for it, and the reply after it in store order; the struct is allocated
 * pair-aligned, registry.c). */
struct rcl_server {
    /* read-mostly (clients and server) */
    LL_PAIR_ALIGNED struct rcl_slot *slots;
    unsigned nslots;     /* client slots + 1: slots[nslots - 1] is the overflow slot */
    int cpu;
    int node;
    int degraded;    /* no SCHED_FIFO: CFS policies, no forced elections */
    int local;       /* all server threads bound to `cpu`: local atomics are correct */
    int prio_serv, prio_mgr, prio_backup;

    /* written by clients to wake an idle-parked server; written by the server on park */
    LL_ALIGNED _Atomic uint32_t idle;
    _Atomic uint32_t dormant;    /* no threads (fork child): the first client starts them (server.c) */

    /* written only by threads on the server CPU */
    LL_PAIR_ALIGNED _Atomic uint32_t is_alive;
    _Atomic int32_t n_free;      /* servicing threads not executing a CS */
    _Atomic int32_t n_servicing; /* threads in the pool (free + busy) */
    _Atomic uint64_t timestamp;  /* bumped by the manager at each wake-up */
    _Atomic uint32_t coloc_recent; /* a request of a client on this CPU was seen since the last park */
    _Atomic uint32_t *busy;      /* per slot: claimed by a servicing thread */
    struct rcl_stats_ctr st;

    /* pool management (manager, backup, leaving threads; PI mutex) */
    LL_ALIGNED pthread_mutex_t pool_mutex;
    struct rcl_sthread **threads; /* every servicing thread ever created */
    int nthreads, maxthreads;
    struct rcl_sthread *prepared; /* stack of parked threads */
    int nprepared;
    pthread_t manager, backup;
    int have_manager, have_backup;
    _Atomic uint32_t mgr_word;    /* futex: the manager sleeps here (poked by backup, stop) */
    _Atomic uint32_t bkp_word;    /* futex: the backup naps here */
    _Atomic uint32_t backup_req;  /* the backup asks the manager for a free thread */
    _Atomic uint32_t stopping;
    _Atomic long nlocks;          /* RCL locks bound to this server */
    pthread_mutex_t ovf_mutex;    /* one user of the overflow slot at a time (direct.c) */
    uint64_t tick_ns, idle_cycles;
    uint64_t share_cycles;        /* a busy servicing thread yields after this long (0 = never) */
    uint64_t breathe_cycles, breath_ns; /* ... and sleeps breath_ns after this long (0 = never; server.c, "Breathing") */
    _Atomic int share_seen;       /* the other process last seen on this CPU (cpushare.c) */
    struct rcl_server *next_all;  /* list of every started server */
};

/* server.c: the servicing loop */
void rcl_wake_idle(struct rcl_server *s);              /* a client found the server idle-parked (or dormant) */
void rcl_serve_loop(struct rcl_server *s, struct rcl_sthread *me); /* a servicing thread's life (pool.c) */
/* pool.c: a server's threads */
int rcl_threads_start(struct rcl_server *s);           /* create its threads (servers_mutex held); an errno */
void rcl_ask_free(struct rcl_server *s);               /* a servicing thread waits: get a free one now (pool.c) */
void rcl_cpushare_join(int cpu);                      /* this process runs a server's threads on cpu (cpushare.c) */
void rcl_cpushare_leave(int cpu);                     /* ... no longer */
int rcl_cpushare_others(int cpu, _Atomic int *seen);  /* another process does, or did and is not gone (or cannot tell): 1 */
void rcl_threads_stop(struct rcl_server *s);           /* end and join them (servers_mutex held) */
void rcl_server_free_arrays(struct rcl_server *s);

/* registry.c: servers as objects */
struct rcl_server *rcl_default_server(void);          /* start on first use; NULL + errno */
int rcl_server_bind(struct rcl_server *s);             /* count a lock on a running server; EINVAL */
void rcl_server_unbind(struct rcl_server *s);
void rcl_server_revive(struct rcl_server *s);          /* first use of a server dormant since fork */

/* client.c, direct.c, lock.c and ids.c */
struct rcl_tls {
    int id;                       /* client id + 1 = slot index + 1; 0 = none yet */
    unsigned affinity_gen;        /* server-CPU set generation this thread was fitted to */
    int napi_held;                /* RCL locks held through liblock_lock (not on a server) */
    struct rcl_server *my_server; /* non-NULL on a servicing thread */
    struct rcl_sthread *me;
    struct rcl_lock *held[RCL_MAX_HELD]; /* locks held locally (servicing thread) */
    int nheld;
    int cond_mode;                /* how cond_release released: 1 api hold, 2 local held */
    unsigned since_yield;         /* spin requests completed since this thread last yielded */
    int coloc;                    /* every CPU this thread may run on is a server CPU */
    int one_cpu;                  /* this thread may run on one CPU only (fit_affinity) */
    struct ll_exit_hook hook;
};
extern __thread struct rcl_tls rcl_tls __attribute__((tls_model("initial-exec")));

void rcl_ids_fork_prepare(void);
void rcl_ids_fork_parent(void);
void rcl_ids_fork_child(void);
unsigned rcl_slot_capacity(void);
extern unsigned rcl_yield_every;      /* pacing of spin clients (LIBLOCK_RCL_YIELD_EVERY) */
extern int rcl_park_asym;             /* spin-then-park requests use the asymmetric protocol (LIBLOCK_RCL_ASYM) */
unsigned rcl_client_watermark(void);  /* 1 + highest client id in use */
unsigned rcl_clients_in_use(void);
int rcl_client_id(void);              /* this thread's id, allocating it; -1 + EAGAIN when full */
extern _Atomic unsigned rcl_cpus_gen; /* bumped when a server CPU starts or stops (ids.c) */
int rcl_client_slow(struct rcl_tls *t); /* first request of a thread, or after rcl_cpus_gen moved (ids.c) */
/* A delegated section running with its caller's identity (platform/identity.h)
 * makes an RCL call for server s, and the caller's own request to s is the
 * one pending: the call must be made as the servicing thread running it
 * (server.c, rcl_nested_enter).  Only a thread whose request is being
 * served has its slot pending while it runs code. */
static inline int rcl_nested_on(const struct rcl_tls *t, const struct rcl_server *s)
{
    return t->id > 0 && atomic_load_explicit(&s->slots[t->id - 1].fn, memory_order_relaxed) != NULL;
}
int rcl_nested_enter(struct rcl_tls *saved); /* 0: no servicing thread state to take */
void rcl_nested_leave(struct rcl_tls *saved);
void rcl_servicing_id_release(void);  /* a servicing thread leaving gives back its client id, if it took one (ids.c) */

/* This thread's slot index (its client id), allocating the id and fitting
 * the affinity on first use (ids.c); -1 + errno when every id is taken. */
static inline int rcl_client_index(void)
{
    struct rcl_tls *t = &rcl_tls;
    if (LL_LIKELY(t->id > 0 && t->affinity_gen == atomic_load_explicit(&rcl_cpus_gen, memory_order_relaxed)))
        return t->id - 1;
    return rcl_client_slow(t);
}
void rcl_server_cpus_changed(void);   /* a server started or stopped: refit clients' affinity */
int rcl_cpu_is_server(int cpu);

int rcl_lock_init(liblock_t *l, const liblock_attr_t *attr);
int rcl_lock_destroy(liblock_t *l);
int rcl_lock_lock(liblock_t *l, void *node);
int rcl_lock_trylock(liblock_t *l, void *node);
int rcl_lock_unlock(liblock_t *l, void *node);
int rcl_unlock_handed(liblock_t *l); /* unlock a lock a delegated CS left held; EPERM if it was not */
void *rcl_execute(liblock_t *l, void *(*cs)(void *), void *arg);
int rcl_cond_release(liblock_t *l);
int rcl_cond_reacquire(liblock_t *l);
int rcl_thread_register(liblock_t *l);
struct rcl_server *rcl_lock_bind(liblock_t *l);       /* bind to a default server on first use; NULL + errno */
extern const struct ll_ops ll_ops_rcl;

/* The server of an RCL lock, binding it on first use (lock.c). */
static inline struct rcl_server *rcl_server_of_lock(liblock_t *l)
{
    struct rcl_server *s = __atomic_load_n((struct rcl_server **)&l->_aux, __ATOMIC_ACQUIRE);
    if (LL_LIKELY(s != NULL))
        return s;
    return rcl_lock_bind(l);
}

/* server-CPU operations: local when the server's threads are all bound */
static inline bool rcl_cas(const struct rcl_server *s, _Atomic uint32_t *p, uint32_t e, uint32_t d)
{
    if (LL_LIKELY(s->local))
        return ll_local_cas32(p, e, d);
    return atomic_compare_exchange_strong_explicit(p, &e, d, memory_order_acq_rel, memory_order_acquire);
}
static inline void rcl_add(const struct rcl_server *s, _Atomic uint64_t *p, uint64_t v)
{
    if (LL_LIKELY(s->local))
        ll_local_add64(p, v);
    else
        atomic_fetch_add_explicit(p, v, memory_order_relaxed);
}
static inline bool rcl_cas32s(const struct rcl_server *s, _Atomic int32_t *p, int32_t e, int32_t d)
{
    if (LL_LIKELY(s->local))
        return ll_local_cas32s(p, e, d);
    return atomic_compare_exchange_strong_explicit(p, &e, d, memory_order_acq_rel, memory_order_acquire);
}
/* A servicing thread takes lock word lk (0 -> v).  A direct lock is written
 * by clients too, so its CAS must be a real atomic; a request-only lock is
 * written only on the server CPU (server.c I1), so the local CAS is correct
 * and cheaper.  lk->direct never changes after init, so every thread makes
 * the same choice for the lock's whole life. */
static inline bool rcl_take(const struct rcl_server *s, struct rcl_lock *lk, uint32_t v)
{
    if (lk->direct)
        return rcl_lock_cas(&lk->is_locked, 0, v);
    return rcl_cas(s, &lk->is_locked, 0, v);
}
static inline void rcl_add32(const struct rcl_server *s, _Atomic int32_t *p, int32_t v)
{
    if (LL_LIKELY(s->local))
        ll_local_add32(p, v);
    else
        atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
}

#endif
