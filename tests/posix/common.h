/*
 * common.h - helpers for the POSIX conformance programs of tests/posix/
 * (plain pthread/C11 programs: no liblock header).  Each program prints a
 * transcript of results - return codes by errno name, values - which must
 * be the same natively and under the interposer (tests/test_posix.sh).
 * Only facts POSIX or glibc fix go into a transcript, never timings: a wait
 * that must not end early is checked against its deadline (a lower bound no
 * slow machine can break), and "X never returns" is observed as "had not
 * returned when the program ended".  Every program has a watchdog.
 */
#ifndef POSIX_COMMON_H
#define POSIX_COMMON_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline const char *en(int e)
{
    static char buf[32];
    switch (e) {
    case 0: return "0";
#define E(x) case x: return #x;
    E(EPERM) E(ENOENT) E(ESRCH) E(EINTR) E(EAGAIN) E(ENOMEM) E(EBUSY) E(EINVAL) E(EDEADLK) E(ENOSYS)
    E(ETIMEDOUT) E(EOWNERDEAD) E(ENOTRECOVERABLE) E(EOVERFLOW) E(ENOTSUP) E(ERANGE)
#undef E
    default:
        snprintf(buf, sizeof buf, "errno %d", e);
        return buf;
    }
}

/* a pthread-style call: the return value is the error */
#define SHOW(label, expr) printf("%s: %s\n", (label), en(expr))
/* a -1/errno-style call (sem_*) */
#define SHOWE(label, expr)                                                        \
    do {                                                                          \
        errno = 0;                                                                \
        int r_ = (expr);                                                          \
        printf("%s: %s\n", (label), r_ == 0 ? "0" : r_ == -1 ? en(errno) : "?"); \
    } while (0)

static inline void ms_sleep(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&d, &d) != 0 && errno == EINTR)
        ;
}

/* now on clock c, plus ms (may be negative) */
static inline struct timespec deadline(clockid_t c, long ms)
{
    struct timespec t;
    clock_gettime(c, &t);
    long long ns = (long long)t.tv_sec * 1000000000LL + t.tv_nsec + (long long)ms * 1000000LL;
    t.tv_sec = (time_t)(ns / 1000000000LL);
    t.tv_nsec = (long)(ns % 1000000000LL);
    return t;
}

/* 1 if the clock c has reached t */
static inline int reached(clockid_t c, const struct timespec *t)
{
    struct timespec n;
    clock_gettime(c, &n);
    return n.tv_sec > t->tv_sec || (n.tv_sec == t->tv_sec && n.tv_nsec >= t->tv_nsec);
}

/* wait until *f >= v (no lock involved: the programs test the locks) */
static inline void wait_for(atomic_int *f, int v)
{
    while (atomic_load(f) < v)
        ms_sleep(1);
}

static inline pthread_t spawn(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    int r = pthread_create(&t, NULL, fn, arg);
    if (r) {
        printf("pthread_create: %s\n", en(r));
        exit(3);
    }
    return t;
}

/* Join t if it ends within ms; 1 if it did (*ret set), 0 if not.  Used only
 * where a correct implementation ends the thread at once (a cancelled wait):
 * the bound is generous and a miss is reported in the transcript. */
static inline int join_within(pthread_t t, long ms, void **ret)
{
    struct timespec d = deadline(CLOCK_REALTIME, ms);
    return pthread_timedjoin_np(t, ret, &d) == 0;
}

static void watchdog_fired(int sig)
{
    (void)sig;
    static const char m[] = "watchdog: the program did not finish in 20 s\n";
    if (write(1, m, sizeof m - 1) < 0)
        _exit(98);
    _exit(98);
}

/* every program: unbuffered output (forked children, _exit) and a watchdog */
__attribute__((constructor)) static void posix_common_init(void)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    signal(SIGALRM, watchdog_fired);
    alarm(20);
}

/* end now with what was printed (other threads may be blocked for ever) */
static inline void finish(int status)
{
    fflush(stdout);
    _exit(status);
}

/* A thread that locks m and holds it until hold_end (or hold_release). */
struct holder {
    pthread_mutex_t *m;
    atomic_int locked, release;
    int lock_r, unlock_r;
    pthread_t t;
};

static void *holder_fn(void *a)
{
    struct holder *h = a;
    h->lock_r = pthread_mutex_lock(h->m);
    atomic_store(&h->locked, 1);
    wait_for(&h->release, 1);
    h->unlock_r = pthread_mutex_unlock(h->m);
    return NULL;
}

static inline void hold_start(struct holder *h, pthread_mutex_t *m)
{
    memset(h, 0, sizeof *h);
    h->m = m;
    h->t = spawn(holder_fn, h);
    wait_for(&h->locked, 1);
}

/* let the holder unlock after ms, without waiting for it */
struct hold_later { struct holder *h; long ms; };
static void *hold_later_fn(void *a)
{
    struct hold_later *l = a;
    ms_sleep(l->ms);
    atomic_store(&l->h->release, 1);
    return NULL;
}

static inline void hold_end(struct holder *h)
{
    atomic_store(&h->release, 1);
    pthread_join(h->t, NULL);
}

/* run fn(arg) on another thread; its result */
struct in_thread_call { int (*fn)(void *); void *arg; int r; };
static void *in_thread_fn(void *a)
{
    struct in_thread_call *c = a;
    c->r = c->fn(c->arg);
    return NULL;
}
static inline int in_thread(int (*fn)(void *), void *arg)
{
    struct in_thread_call c = {fn, arg, -1};
    pthread_join(spawn(in_thread_fn, &c), NULL);
    return c.r;
}
static inline int trylock_fn(void *m) { return pthread_mutex_trylock(m); }
static inline int unlock_fn(void *m) { return pthread_mutex_unlock(m); }
static inline int lock_fn(void *m) { return pthread_mutex_lock(m); }

/* a mutex of a type (-1: no attribute) */
static inline int mutex_of(pthread_mutex_t *m, int type)
{
    if (type < 0)
        return pthread_mutex_init(m, NULL);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, type);
    int r = pthread_mutex_init(m, &a);
    pthread_mutexattr_destroy(&a);
    return r;
}

static const struct { int type; const char *name; } mutex_types[] = {
    {-1, "attr-null"},
    {PTHREAD_MUTEX_NORMAL, "normal"},
    {PTHREAD_MUTEX_DEFAULT, "default"},
    {PTHREAD_MUTEX_ERRORCHECK, "errorcheck"},
    {PTHREAD_MUTEX_RECURSIVE, "recursive"},
    {PTHREAD_MUTEX_ADAPTIVE_NP, "adaptive"},
};
#define N_MUTEX_TYPES (int)(sizeof mutex_types / sizeof mutex_types[0])

#endif
