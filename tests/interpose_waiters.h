/*
 * interpose_waiters.h - what the children of the interposer's
 * condition-variable and semaphore programs (IP_COND_KINDS in
 * interpose_driver.h: test_interpose_cancel, test_interpose_destroy,
 * test_interpose_deadline, test_interpose_pshared) share: a thread blocked
 * in a condition wait of one kind (pthread_cond_wait, timedwait, clockwait
 * on either clock, cnd_timedwait) or in sem_wait / sem_timedwait, started
 * and known to be blocked, joined within a bound (a thread that does not
 * end is reported and woken); a waiter cancelled in its condition wait;
 * and the two condition variables most checks wait on.  The child is a
 * plain pthread program, run natively and under the interposer.
 * A waiter counts as blocked once the main thread has taken the mutex it
 * released inside the wait and /proc shows the thread asleep.  No timing
 * thresholds: every bound is a watchdog that only a hang reaches.
 */
#ifndef LIBLOCK_TEST_INTERPOSE_WAITERS_H
#define LIBLOCK_TEST_INTERPOSE_WAITERS_H

#include "interpose_driver.h"

#include <semaphore.h>
#include <stdatomic.h>
#include <threads.h>

/* Whether the semaphore checks run here (LIBLOCK_TEST_SEM: the
 * interposer's semaphores, or glibc's natively). */
static inline int test_sems(void) { return getenv("LIBLOCK_TEST_SEM") != NULL; }

/* The condition variables most checks wait on: c with the default clock,
 * cm with CLOCK_MONOTONIC; destroyed at the end of the child. */
static inline void conds_init(pthread_cond_t *c, pthread_cond_t *cm)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    CHECK_EQ(pthread_cond_init(c, NULL), 0);
    CHECK_EQ(pthread_cond_init(cm, &ca), 0);
    pthread_condattr_destroy(&ca);
}

static inline void conds_destroy(pthread_cond_t *c, pthread_cond_t *cm)
{
    th_context = "end";
    CHECK_EQ(pthread_cond_destroy(c), 0);
    CHECK_EQ(pthread_cond_destroy(cm), 0);
}

#define JOIN_S 5 /* watchdog per join: only a hang reaches it */

static inline int join_within(pthread_t t, void **ret, int seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    return pthread_timedjoin_np(t, ret, &ts);
}

/* Wait until thread tid sleeps in the kernel ('S' in /proc), at most ~5 s. */
static inline int wait_asleep(pid_t tid)
{
    for (int i = 0; i < 25000; i++) {
        int st = th_task_sleeping(tid);
        if (st != 0)
            return st > 0 ? 0 : -1; /* -1: the thread has ended: its wait failed */
        usleep(200);
    }
    return -1;
}

/* ------------------------------------------------- one waiter on a condition */
enum { W_WAIT, W_TIMED, W_CLOCK_MONO, W_CLOCK_REAL, W_CND };

struct waiter {
    pthread_mutex_t *m;
    pthread_cond_t *c;
    int how;
    struct timespec deadline; /* timed kinds */
    int *pred;                /* wait while *pred == 0; then (*pred)-- */
    _Atomic pid_t tid;
    _Atomic int entered;      /* set under m just before the first wait */
    _Atomic int handler_ran;
    _Atomic int unlock_rc;
    _Atomic int result;       /* the last wait's result */
    _Atomic int got;          /* took a job */
};

static inline void waiter_cleanup(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->unlock_rc, pthread_mutex_unlock(w->m)); /* must be ours: we were cancelled in the wait */
    atomic_store(&w->handler_ran, 1);
}

static inline int wait_once(struct waiter *w)
{
    switch (w->how) {
    case W_TIMED:
        return pthread_cond_timedwait(w->c, w->m, &w->deadline);
    case W_CLOCK_MONO:
        return pthread_cond_clockwait(w->c, w->m, CLOCK_MONOTONIC, &w->deadline);
    case W_CLOCK_REAL:
        return pthread_cond_clockwait(w->c, w->m, CLOCK_REALTIME, &w->deadline);
    case W_CND: {
        int r = cnd_timedwait((cnd_t *)w->c, (mtx_t *)w->m, &w->deadline);
        return r == thrd_success ? 0 : r == thrd_timedout ? ETIMEDOUT : EINVAL;
    }
    default:
        return pthread_cond_wait(w->c, w->m);
    }
}

static inline void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->tid, gettid());
    pthread_mutex_lock(w->m);
    pthread_cleanup_push(waiter_cleanup, w);
    atomic_store(&w->entered, 1);
    int r = 0;
    while (*w->pred == 0) {
        r = wait_once(w);
        if (r)
            break; /* an error or a timeout: report it, never spin holding the mutex */
    }
    atomic_store(&w->result, r);
    if (r == 0) {
        (*w->pred)--;
        atomic_store(&w->got, 1);
    }
    pthread_cleanup_pop(0);
    pthread_mutex_unlock(w->m);
    return NULL;
}

/* Start w and return once it is blocked in its wait (0), or -1. */
static inline int start_waiter(pthread_t *t, struct waiter *w)
{
    atomic_store(&w->entered, 0);
    atomic_store(&w->tid, 0);
    atomic_store(&w->handler_ran, 0);
    atomic_store(&w->unlock_rc, -1);
    atomic_store(&w->result, -1);
    atomic_store(&w->got, 0);
    if (pthread_create(t, NULL, waiter_main, w))
        return -1;
    for (int i = 0; i < 25000 && !atomic_load(&w->entered); i++)
        usleep(200);
    pthread_mutex_lock(w->m); /* free again only once the waiter released it inside the wait */
    pthread_mutex_unlock(w->m);
    return atomic_load(&w->entered) ? wait_asleep(atomic_load(&w->tid)) : -1;
}

/* A waiter that did not end: wake everything and give up on this process. */
static inline void rescue(pthread_t t, struct waiter *w, const char *what)
{
    fprintf(stderr, "FAIL [%s] %s: the thread did not end within %d s\n", th_context, what, JOIN_S);
    th_failures++;
    pthread_mutex_lock(w->m);
    *w->pred += 100;
    pthread_cond_broadcast(w->c);
    pthread_mutex_unlock(w->m);
    if (join_within(t, NULL, JOIN_S)) {
        th_report(ip_prog);
        fflush(NULL);
        _exit(1);
    }
}


static inline const char *how_name(int how)
{
    static const char *const n[] = {"pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait(MONOTONIC)",
                                    "pthread_cond_clockwait(REALTIME)", "cnd_timedwait"};
    return n[how];
}

static inline void deadline_for(struct waiter *w, long ms)
{
    ts_after(w->how == W_CLOCK_MONO ? CLOCK_MONOTONIC : CLOCK_REALTIME, &w->deadline, ms);
}

/* A waiter blocked in c (wait kind how, on a mutex of type type)
 * cancelled: pthread_join returns PTHREAD_CANCELED and its cleanup handler
 * ran holding the mutex; the mutex is free afterwards. */
static inline void cancel_blocked(pthread_cond_t *c, int how, int type)
{
    char ctx[128];
    snprintf(ctx, sizeof ctx, "cancel in %s, %s mutex", how_name(how),
             type == PTHREAD_MUTEX_ERRORCHECK ? "ERRORCHECK" : "NORMAL");
    th_context = ctx;
    pthread_mutex_t m;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, type);
    pthread_mutex_init(&m, &ma);
    pthread_mutexattr_destroy(&ma);
    int pred = 0;
    struct waiter w = {.m = &m, .c = c, .how = how, .pred = &pred};
    deadline_for(&w, 60000);
    pthread_t t;
    CHECK_EQ(start_waiter(&t, &w), 0);
    CHECK_EQ(pthread_cancel(t), 0);
    void *ret = NULL;
    if (join_within(t, &ret, JOIN_S)) {
        rescue(t, &w, "cancelled waiter");
    } else {
        CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        CHECK_EQ(atomic_load(&w.handler_ran), 1);
        CHECK_EQ(atomic_load(&w.unlock_rc), 0); /* the cleanup handler held the mutex */
    }
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ---- semaphores */
struct semw {
    sem_t *s;
    int timed;
    _Atomic pid_t tid;
    _Atomic int handler_ran, got, result;
};

static inline void semw_cleanup(void *arg) { atomic_store(&((struct semw *)arg)->handler_ran, 1); }

static inline void *semw_main(void *arg)
{
    struct semw *w = arg;
    atomic_store(&w->tid, gettid());
    pthread_cleanup_push(semw_cleanup, w);
    int r;
    if (w->timed) {
        struct timespec d;
        ts_after(CLOCK_REALTIME, &d, 60000);
        r = sem_timedwait(w->s, &d);
    } else {
        r = sem_wait(w->s);
    }
    atomic_store(&w->result, r ? errno : 0);
    atomic_store(&w->got, r == 0);
    pthread_cleanup_pop(0);
    return NULL;
}

static inline int start_semw(pthread_t *t, struct semw *w)
{
    atomic_store(&w->tid, 0);
    atomic_store(&w->handler_ran, 0);
    atomic_store(&w->got, 0);
    atomic_store(&w->result, -1);
    if (pthread_create(t, NULL, semw_main, w))
        return -1;
    for (int i = 0; i < 25000 && !atomic_load(&w->tid); i++)
        usleep(200);
    return atomic_load(&w->tid) ? wait_asleep(atomic_load(&w->tid)) : -1;
}

static inline void sem_rescue(pthread_t t, sem_t *s, const char *what)
{
    fprintf(stderr, "FAIL [%s] %s: the thread did not end within %d s\n", th_context, what, JOIN_S);
    th_failures++;
    sem_post(s);
    if (join_within(t, NULL, JOIN_S)) {
        th_report(ip_prog);
        fflush(NULL);
        _exit(1);
    }
}


#endif
