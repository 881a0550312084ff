/*
 * liblock.h - the one public header of liblock.
 *
 * liblock puts many mutual-exclusion algorithms (classic spin and queue locks,
 * combining locks, concurrency-restricting locks and Remote Core Locking)
 * behind one pthread-shaped API.  Every call returns 0 or an errno value and
 * never aborts on bad input; a failed call leaves the lock as it was.
 *
 * See docs/api.md for the full reference.
 */
#ifndef LIBLOCK_H
#define LIBLOCK_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LIBLOCK_VERSION_MAJOR 0
#define LIBLOCK_VERSION_MINOR 1

/* Waiting policies: how a thread waits where the algorithm makes it wait. */
enum {
    LIBLOCK_WAIT_DEFAULT = 0,        /* the algorithm's own default           */
    LIBLOCK_WAIT_SPIN = 1,           /* pause loop                            */
    LIBLOCK_WAIT_SPIN_THEN_PARK = 2, /* spin ~one context-switch, then futex  */
    LIBLOCK_WAIT_YIELD = 3,          /* sched_yield() loop                    */
    LIBLOCK_WAIT_PARK = 4,           /* block in the kernel at once (posix)   */
    LIBLOCK_WAIT_PREEMPT_AWARE = 5,  /* spin while the thread waited for runs,
                                        park as soon as it does not            */
    LIBLOCK_WAIT__COUNT
};

/* Properties of an algorithm (see liblock_algorithm_info). */
enum {
    LIBLOCK_PROP_FIFO = 1u << 0,       /* grants the lock in arrival order       */
    LIBLOCK_PROP_DELEGATES = 1u << 1,  /* execute() may run cs on another thread */
    LIBLOCK_PROP_COND = 1u << 2,       /* condition variables supported          */
    LIBLOCK_PROP_STARVATION_FREE = 1u << 3,
    LIBLOCK_PROP_DETECTS_UNLOCK = 1u << 4, /* unlock by a non-holder -> EPERM    */
    LIBLOCK_PROP_COND_IN_EXECUTE = 1u << 5, /* a cs run by execute() on another thread
                                              may wait on a condition with the lock  */
    LIBLOCK_PROP_SERVER = 1u << 6 /* cs run on an RCL server: liblock_attr_setserver
                                     applies (without it the attribute is ignored) */
};

/* The lock object: a complete type so it can be static or a struct member.
 * Its fields are private; use the functions below. */
typedef struct liblock {
    const void *_ops;    /* algorithm ops table                   */
    void *_state;        /* algorithm state, cache-line aligned   */
    uint32_t _magic;     /* set by liblock_init, cleared by destroy */
    int32_t _wait;       /* effective waiting policy              */
    void *_aux;          /* algorithm-private (e.g. RCL server)   */
    void *_stats;        /* optional instrumentation, NULL = off  */
} liblock_t;

typedef struct liblock_attr {
    uint32_t _magic;
    int32_t _wait;
    struct liblock_server *_server;
    void *_reserved[4];
    int32_t _fairness;         /* 1: record the admission history (docs/fairness.md) */
} liblock_attr_t;

typedef struct liblock_condattr {
    uint32_t _magic;
    uint32_t _kind;            /* 0 = POSIX-backed; 1 = mostly-LIFO queue (set by setfifo); see docs */
    double _fifo_probability;  /* for mostly-LIFO condition variables */
    void *_reserved[2];
} liblock_condattr_t;

/* A condition variable usable with every algorithm that sets LIBLOCK_PROP_COND. */
typedef struct liblock_cond {
    uint32_t _magic;
    uint32_t _kind;
    void *_impl;
    _Alignas(16) unsigned char _storage[128];
} liblock_cond_t;

/* A counting semaphore with a mostly-LIFO waiter list (docs/malthusian.md). */
typedef struct liblock_sem {
    uint32_t _magic;
    uint32_t _reserved;
    _Alignas(16) unsigned char _storage[64];
} liblock_sem_t;

typedef struct liblock_server liblock_server_t; /* an RCL server bound to one CPU */

/* ---- attributes ------------------------------------------------------- */
int liblock_attr_init(liblock_attr_t *attr);
int liblock_attr_destroy(liblock_attr_t *attr);
int liblock_attr_setwait(liblock_attr_t *attr, int policy);
int liblock_attr_getwait(const liblock_attr_t *attr, int *policy);
int liblock_attr_setserver(liblock_attr_t *attr, liblock_server_t *server);

/* ---- locks ------------------------------------------------------------ */
int liblock_init(liblock_t *lock, const char *algorithm, const liblock_attr_t *attr);
int liblock_destroy(liblock_t *lock);   /* EBUSY while held or waited on */
int liblock_lock(liblock_t *lock);      /* EDEADLK if the caller holds it */
int liblock_trylock(liblock_t *lock);   /* EBUSY when held */
int liblock_unlock(liblock_t *lock);    /* EPERM if the caller does not hold it */
/* Runs cs(arg) under the lock, possibly on another core; returns cs's value.
 * If cs cannot be run at all, returns NULL with errno set and does not run it. */
void *liblock_execute(liblock_t *lock, void *(*cs)(void *arg), void *arg);

/* Runs cs(ctx) under a pthread mutex; returns cs's value (what `liblock
 * transform` emits, docs/transform.md).  Linked normally: glibc's
 * pthread_mutex_lock, cs, pthread_mutex_unlock; if the lock fails, returns
 * NULL with errno set and does not run cs.  Under the interposer (`liblock
 * run`): liblock_execute on the algorithm chosen for m, so cs is shipped to
 * the RCL server on `rcl` and combined on the combining locks; mutually
 * exclusive with pthread_mutex_lock/unlock of the same mutex.
 * liblock_execute_mutex_cond is the same for a cs that may call
 * pthread_cond_wait/timedwait with m: it is delegated only to algorithms
 * whose delegated sections may wait (LIBLOCK_PROP_COND_IN_EXECUTE: rcl), and
 * runs on the calling thread (lock, call, unlock) on the others. */
void *liblock_execute_mutex(pthread_mutex_t *m, void *(*cs)(void *ctx), void *ctx);
void *liblock_execute_mutex_cond(pthread_mutex_t *m, void *(*cs)(void *ctx), void *ctx);

/* Name of the algorithm and effective waiting policy of an initialised lock. */
const char *liblock_algorithm(const liblock_t *lock);
int liblock_getwait(const liblock_t *lock, int *policy);

/* Per-thread registration is never required; this call lets a thread set up
 * its per-thread state for a lock up front and learn whether execute() could
 * run (e.g. EAGAIN when an RCL server has no client slot left). */
int liblock_thread_register(liblock_t *lock);

/* ---- fairness instrumentation (docs/fairness.md) ------------------------ *
 * Off by default and free when off.  When on for a lock (attribute, or
 * LIBLOCK_FAIRNESS=1 in the environment for every lock), each admission
 * (successful lock, trylock, execute, condition-wait reacquisition) is
 * recorded, and these short- and long-term fairness metrics are kept: */
typedef struct liblock_fairness {
    uint64_t acquisitions;  /* admissions recorded since init or reset          */
    uint64_t threads;       /* distinct threads admitted at least once          */
    uint64_t window;        /* W, admissions per LWSS window (default 1000)     */
    uint64_t windows;       /* complete windows so far                          */
    double avg_lwss;        /* mean distinct threads per complete window
                               (the current partial window if none complete)   */
    double mttr;            /* median time to reacquire, in admissions; -1 when
                               no thread has reacquired yet                     */
    uint64_t reacquisitions;/* admissions that had a previous one (MTTR sample) */
    double gini;            /* Gini coefficient of per-thread admission counts  */
    double rstddev;         /* relative standard deviation of the same counts   */
    uint64_t min_count, max_count; /* fewest / most admissions of one thread    */
    uint64_t untracked;     /* admissions not attributable (out of memory)      */
} liblock_fairness_t;

int liblock_attr_setfairness(liblock_attr_t *attr, int on);
int liblock_attr_getfairness(const liblock_attr_t *attr, int *on);
/* Snapshot of the metrics: ENOTSUP when the lock was not initialised with
 * fairness on.  Safe to call while other threads use the lock (the values
 * may then be a few admissions out of step with each other). */
int liblock_fairness(const liblock_t *lock, liblock_fairness_t *out);
/* Forget the history (takes the lock briefly unless the caller holds it). */
int liblock_fairness_reset(liblock_t *lock);

/* ---- condition variables ---------------------------------------------- */
int liblock_condattr_init(liblock_condattr_t *attr);
int liblock_condattr_setfifo(liblock_condattr_t *attr, double fifo_probability);
int liblock_cond_init(liblock_cond_t *cond, const void *attr); /* attr: liblock_condattr_t* or NULL */
int liblock_cond_wait(liblock_cond_t *cond, liblock_t *lock);
int liblock_cond_timedwait(liblock_cond_t *cond, liblock_t *lock, const struct timespec *abstime); /* CLOCK_REALTIME */
int liblock_cond_signal(liblock_cond_t *cond);
int liblock_cond_broadcast(liblock_cond_t *cond);
int liblock_cond_destroy(liblock_cond_t *cond);

/* ---- semaphores (mostly-LIFO waiter list) -------------------------------
 * fifo_probability: probability that a waiter is queued at the tail (FIFO)
 * rather than the head; 1 = FIFO, 0 = LIFO, 0.001 = the Malthusian paper's
 * mostly-LIFO.  post wakes the head waiter and hands it the unit. */
int liblock_sem_init(liblock_sem_t *sem, unsigned value, double fifo_probability); /* EINVAL value > INT_MAX */
int liblock_sem_destroy(liblock_sem_t *sem);  /* EBUSY while threads wait */
int liblock_sem_wait(liblock_sem_t *sem);
int liblock_sem_trywait(liblock_sem_t *sem);  /* EAGAIN when the value is 0 */
int liblock_sem_timedwait(liblock_sem_t *sem, const struct timespec *abstime); /* CLOCK_REALTIME; ETIMEDOUT */
int liblock_sem_post(liblock_sem_t *sem);     /* EOVERFLOW at INT_MAX */
int liblock_sem_getvalue(liblock_sem_t *sem, int *value);

/* ---- RCL servers ------------------------------------------------------- */
liblock_server_t *liblock_server_start(int cpu); /* NULL + errno on failure */
int liblock_server_stop(liblock_server_t *server); /* EBUSY while RCL locks are bound to it */
/* The default server (started on first use, on the first CPU listed in
 * LIBLOCK_SERVERS, else the last CPU); NULL + errno on failure. */
liblock_server_t *liblock_server_default(void);
/* The server an RCL lock is bound to; NULL + EINVAL for other locks. */
liblock_server_t *liblock_server_of(const liblock_t *lock);

/* Per-server statistics (those of Lozi's RCL thesis, "Towards More Scalable
 * Mutual Exclusion for Multicore Architectures", UPMC 2014, section
 * 5.3.5.1); see docs/rcl.md. */
typedef struct liblock_server_stats {
    int cpu;                  /* the server's CPU                                   */
    int degraded;             /* 1 = running without SCHED_FIFO (degraded mode)      */
    int running;              /* 0 once stopped                                     */
    unsigned pool_size;       /* servicing threads in the pool now (free + busy)     */
    unsigned prepared;        /* parked servicing threads ready for reuse            */
    unsigned threads_total;   /* servicing threads ever created                      */
    unsigned clients;         /* client ids in use now (all servers share the ids)   */
    unsigned client_watermark;/* 1 + highest client id in use (the scan bound)       */
    unsigned slots;           /* capacity of the request array                       */
    uint64_t cs_executed;     /* delegated critical sections run by servicing threads */
    uint64_t lock_ops;        /* lock/trylock/unlock requests served                 */
    uint64_t passes;          /* scans of the request array                          */
    uint64_t active_passes;   /* scans that ran at least one critical section        */
    uint64_t slow_path_passes;/* scans that ended in the slow path (pool > 1)        */
    uint64_t skipped_held;    /* requests skipped because their lock was held        */
    uint64_t manager_wakeups; /* management thread time-outs                         */
    uint64_t alive_misses;    /* wake-ups that found is_alive unset                  */
    uint64_t elections;       /* forced elections (priority lower/raise rounds)      */
    uint64_t backup_runs;     /* times the backup thread asked the manager for one   */
    uint64_t threads_created, threads_woken, threads_parked, idle_parks;
    double use_rate;          /* CSs per active pass / clients                       */
    double false_serialisation_rate; /* distinct locks per active pass / clients    */
    double slow_path_rate;    /* slow_path_passes / passes                           */
} liblock_server_stats_t;
int liblock_server_stats(liblock_server_t *server, liblock_server_stats_t *stats);

/* ---- the catalogue ------------------------------------------------------ */
const char *const *liblock_algorithms(void); /* NULL-terminated */

typedef struct liblock_algorithm_info {
    const char *name;
    const char *description;
    const char *source;        /* seed and section, or paper */
    unsigned properties;       /* LIBLOCK_PROP_* */
    unsigned policies;         /* bit (1u << LIBLOCK_WAIT_x) per supported policy */
    int default_policy;
    size_t lock_bytes;         /* memory per lock */
    size_t waiter_bytes;       /* memory per waiting/holding thread */
} liblock_algorithm_info_t;

int liblock_algorithm_info(const char *name, liblock_algorithm_info_t *info);

/* Names <-> waiting policies ("spin", "spin-then-park", "yield", "park"). */
const char *liblock_wait_name(int policy);
int liblock_wait_parse(const char *name, int *policy);

#ifdef __cplusplus
}
#endif
#endif /* LIBLOCK_H */
