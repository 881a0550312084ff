/*
 * lockcount - an LD_PRELOAD library that counts a program's lock
 * acquisitions, for `liblock bench apps` (the hand-off bound of FIFO locks).
 *
 * Counted: pthread_mutex_lock calls, successful pthread_mutex_trylock calls,
 * condition waits (pthread_cond_wait/timedwait/clockwait: each one retakes
 * the mutex on its way out) and semaphore waits (sem_wait/timedwait/
 * clockwait, which CPython's locks use).  Each call is passed on to the next
 * definition (dlsym RTLD_NEXT): preload it *before* liblock-interpose.so so
 * that the interposer still handles the call.  At exit one line goes to
 * stderr:
 *     lockcount: mutex_lock N trylock_ok N cond_waits N sem_waits N
 * A program killed by a signal prints nothing.  The counters are relaxed
 * atomics on one cache line: each count costs a line transfer when threads
 * on two CPUs lock at once, small against a hand-off to a sleeping thread
 * (tens of microseconds), which is what the count is used to explain.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

static _Atomic unsigned long n_lock, n_try, n_wait, n_sem;

#define NEXT(var, name) ({ if (!(var)) (var) = dlsym(RTLD_NEXT, name); (var); })
#define BUMP(c) atomic_fetch_add_explicit(&(c), 1, memory_order_relaxed)

static int (*r_lock)(pthread_mutex_t *);
static int (*r_try)(pthread_mutex_t *);
static int (*r_cw)(pthread_cond_t *, pthread_mutex_t *);
static int (*r_ctw)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*r_ccw)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
static int (*r_sw)(sem_t *);
static int (*r_stw)(sem_t *, const struct timespec *);
static int (*r_scw)(sem_t *, clockid_t, const struct timespec *);

int pthread_mutex_lock(pthread_mutex_t *m)
{
    BUMP(n_lock);
    return NEXT(r_lock, "pthread_mutex_lock")(m);
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
    int r = NEXT(r_try, "pthread_mutex_trylock")(m);
    if (r == 0)
        BUMP(n_try);
    return r;
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    BUMP(n_wait);
    return NEXT(r_cw, "pthread_cond_wait")(c, m);
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
    BUMP(n_wait);
    return NEXT(r_ctw, "pthread_cond_timedwait")(c, m, t);
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k, const struct timespec *t)
{
    BUMP(n_wait);
    return NEXT(r_ccw, "pthread_cond_clockwait")(c, m, k, t);
}

int sem_wait(sem_t *s)
{
    BUMP(n_sem);
    return NEXT(r_sw, "sem_wait")(s);
}

int sem_timedwait(sem_t *s, const struct timespec *t)
{
    BUMP(n_sem);
    return NEXT(r_stw, "sem_timedwait")(s, t);
}

int sem_clockwait(sem_t *s, clockid_t k, const struct timespec *t)
{
    BUMP(n_sem);
    return NEXT(r_scw, "sem_clockwait")(s, k, t);
}

__attribute__((destructor)) static void lockcount_report(void)
{
    fprintf(stderr, "lockcount: mutex_lock %lu trylock_ok %lu cond_waits %lu sem_waits %lu\n",
            atomic_load(&n_lock), atomic_load(&n_try), atomic_load(&n_wait), atomic_load(&n_sem));
}
