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
    LIBLOCK_WAIT__COUNT
};

/* Properties of an algorithm (see liblock_algorithm_info). */
enum {
    LIBLOCK_PROP_FIFO = 1u << 0,       /* grants the lock in arrival order       */
    LIBLOCK_PROP_DELEGATES = 1u << 1,  /* execute() may run cs on another thread */
    LIBLOCK_PROP_COND = 1u << 2,       /* condition variables supported          */
    LIBLOCK_PROP_STARVATION_FREE = 1u << 3,
    LIBLOCK_PROP_DETECTS_UNLOCK = 1u << 4 /* unlock by a non-holder -> EPERM     */
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

/* Name of the algorithm and effective waiting policy of an initialised lock. */
const char *liblock_algorithm(const liblock_t *lock);
int liblock_getwait(const liblock_t *lock, int *policy);

/* Per-thread registration is never required; this call lets a thread set up
 * its per-thread state for a lock up front and learn whether execute() could
 * run (e.g. EAGAIN when an RCL server has no client slot left). */
int liblock_thread_register(liblock_t *lock);

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
int liblock_server_stop(liblock_server_t *server);

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
