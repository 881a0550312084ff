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
 *     lockcount: mutex_lock N trylock_ok N cond_waits N sem_waits N owner_changes N
 * A program killed by a signal prints nothing.
 *
 * owner_changes: acquisitions of a mutex (lock, successful trylock, the
 * re-acquisition at the end of a condition wait) by a thread other than
 * the one that acquired that mutex last.  N / (acquisitions) is the
 * fraction of acquisitions that moved the lock (and the data it protects)
 * to another thread: near 1 for a lock that hands over at every unlock
 * while threads queue (direct succession), small for one whose owner
 * re-takes it in batches (glibc's barging mutex).  Each mutex address gets
 * a slot in a fixed open-addressing table (LC_SLOTS, claimed by CAS on the
 * address); the slot's last-owner field is written only by the thread that
 * has just acquired that mutex, so the mutex itself orders those writes
 * (relaxed atomics suffice).  A recursive re-entry finds itself as the
 * last owner and is no change.  Mutexes beyond the table are not counted;
 * a destroyed mutex's slot is inherited by a new one at the same address
 * (at most one spurious change).  The counters are relaxed
 * atomics on one cache line: each count costs a line transfer when threads
 * on two CPUs lock at once, small against a hand-off to a sleeping thread
 * (tens of microseconds), which is what the count is used to explain.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

static _Atomic unsigned long n_lock, n_try, n_wait, n_sem, n_change;

#define NEXT(var, name) ({ if (!(var)) (var) = dlsym(RTLD_NEXT, name); (var); })
#define BUMP(c) atomic_fetch_add_explicit(&(c), 1, memory_order_relaxed)

#define LC_SLOTS 4096
static struct {
    _Atomic(void *) m;
    _Atomic(void *) last;
} slots[LC_SLOTS];
static _Thread_local char me; /* its address identifies the thread */

/* Count an owner change of m, acquired just now by this thread. */
static void owner_note(void *m)
{
    size_t h = ((uintptr_t)m >> 4) * 0x9E3779B97F4A7C15ull >> 52; /* 12 bits */
    for (unsigned i = 0; i < 64; i++) {
        size_t k = (h + i) & (LC_SLOTS - 1);
        void *cur = atomic_load_explicit(&slots[k].m, memory_order_relaxed);
        if (cur == NULL) {
            void *z = NULL;
            if (!atomic_compare_exchange_strong_explicit(&slots[k].m, &z, m, memory_order_relaxed,
                                                         memory_order_relaxed) &&
                z != m)
                continue;
            cur = m;
        }
        if (cur != m)
            continue;
        if (atomic_load_explicit(&slots[k].last, memory_order_relaxed) != (void *)&me) {
            atomic_store_explicit(&slots[k].last, (void *)&me, memory_order_relaxed);
            BUMP(n_change);
        }
        return;
    }
}

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
    int r = NEXT(r_lock, "pthread_mutex_lock")(m);
    if (r == 0)
        owner_note(m);
    return r;
}

int pthread_mutex_trylock(pthread_mutex_t *m)
{
    int r = NEXT(r_try, "pthread_mutex_trylock")(m);
    if (r == 0) {
        BUMP(n_try);
        owner_note(m);
    }
    return r;
}

int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m)
{
    BUMP(n_wait);
    int r = NEXT(r_cw, "pthread_cond_wait")(c, m);
    owner_note(m);
    return r;
}

int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t)
{
    BUMP(n_wait);
    int r = NEXT(r_ctw, "pthread_cond_timedwait")(c, m, t);
    owner_note(m);
    return r;
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k, const struct timespec *t)
{
    BUMP(n_wait);
    int r = NEXT(r_ccw, "pthread_cond_clockwait")(c, m, k, t);
    owner_note(m);
    return r;
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
    fprintf(stderr, "lockcount: mutex_lock %lu trylock_ok %lu cond_waits %lu sem_waits %lu owner_changes %lu\n",
            atomic_load(&n_lock), atomic_load(&n_try), atomic_load(&n_wait), atomic_load(&n_sem),
            atomic_load(&n_change));
}
