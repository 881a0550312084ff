/*
 * interpose_mutexes.h - what the children of the interposer's mutex
 * programs (ip_topics in interpose_driver.h) share: a mutex of every type,
 * static and dynamic (normal, recursive, errorcheck, adaptive, default,
 * robust, PI, pshared), and a way to make the lazy ones engage their
 * algorithm; a helper thread that tries, locks or unlocks a mutex; and
 * KEEP_ERRNO, which counts the interposed calls that changed errno.
 */
#ifndef LIBLOCK_TEST_INTERPOSE_MUTEXES_H
#define LIBLOCK_TEST_INTERPOSE_MUTEXES_H

#include "harness.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>

#define NTHREADS 4

static inline int scale(int n) { return th_scale_small() ? n / 10 : n; }

/* ---------------------------------------------------------------- helpers */
typedef struct {
    pthread_mutex_t *m;
    int op;          /* 0 trylock, 1 unlock, 2 lock+hold until released, 3 lock-then-unlock, 4 lock and exit */
    int result;
    volatile int *release;
    volatile int started;
} helper_t;

static inline void *helper_main(void *arg)
{
    helper_t *h = arg;
    h->started = 1;
    switch (h->op) {
    case 0:
        h->result = pthread_mutex_trylock(h->m);
        if (h->result == 0)
            pthread_mutex_unlock(h->m);
        break;
    case 1:
        h->result = pthread_mutex_unlock(h->m);
        break;
    case 2:
        h->result = pthread_mutex_lock(h->m);
        while (!*h->release)
            usleep(1000);
        pthread_mutex_unlock(h->m);
        break;
    case 3:
        h->result = pthread_mutex_lock(h->m);
        if (h->result == 0)
            pthread_mutex_unlock(h->m);
        break;
    case 4: /* lock and exit holding it */
        h->result = pthread_mutex_lock(h->m);
        break;
    }
    return NULL;
}

static inline int in_thread(pthread_mutex_t *m, int op)
{
    helper_t h = {.m = m, .op = op};
    pthread_t t;
    pthread_create(&t, NULL, helper_main, &h);
    pthread_join(t, NULL);
    return h.result;
}

/* ---------------------------------------------------------------- mutexes */
static pthread_mutex_t s_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t s_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

enum { K_S_NORMAL, K_S_RECURSIVE, K_S_ERRORCHECK, K_S_ADAPTIVE, K_D_DEFAULT, K_D_NORMAL, K_D_RECURSIVE,
       K_D_ERRORCHECK, K_D_ROBUST, K_D_PI, K_D_PSHARED, K_COUNT };
static const char *const k_names[K_COUNT] = {"static normal", "static recursive", "static errorcheck",
                                             "static adaptive", "default", "normal", "recursive",
                                             "errorcheck", "robust", "prio-inherit", "pshared"};
static pthread_mutex_t d_mutex[K_COUNT];
static pthread_mutex_t *k_mutex[K_COUNT];

/* The dynamic mutexes initialised, k_mutex[] pointing to every mutex. */
static inline void init_dynamic(void)
{
    for (int k = K_D_DEFAULT; k < K_COUNT; k++) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        switch (k) {
        case K_D_NORMAL: pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL); break;
        case K_D_RECURSIVE: pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE); break;
        case K_D_ERRORCHECK: pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK); break;
        case K_D_ROBUST: pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST); break;
        case K_D_PI: pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT); break;
        case K_D_PSHARED: pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED); break;
        default: break;
        }
        CHECK_EQ(pthread_mutex_init(&d_mutex[k], k == K_D_DEFAULT ? NULL : &a), 0);
        pthread_mutexattr_destroy(&a);
        k_mutex[k] = &d_mutex[k];
    }
    k_mutex[K_S_NORMAL] = &s_normal;
    k_mutex[K_S_RECURSIVE] = &s_recursive;
    k_mutex[K_S_ERRORCHECK] = &s_errorcheck;
    k_mutex[K_S_ADAPTIVE] = &s_adaptive;
}

static inline int is_recursive(int k) { return k == K_S_RECURSIVE || k == K_D_RECURSIVE; }

/* Every mutex of k_mutex[] that runs in lazy mode (docs/interpose.md, "Lazy
 * engagement") made to engage its algorithm as contention does: another
 * thread locks it while this one holds it.  The checks of a topic then run
 * on the algorithm's paths, as they did when every topic ran in one process
 * after the counters' contention; the test_lazy_*.c programs (tests/lazy_driver.h)
 * cover lazy mode. */
static inline void engage_mutexes(void)
{
    long (*engaged)(pthread_mutex_t *) =
        (long (*)(pthread_mutex_t *))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_engaged");
    th_context = "engage";
    CHECK(engaged != NULL, "liblock_interpose_debug_engaged not exported");
    if (!engaged)
        return;
    for (int k = 0; k < K_COUNT; k++) {
        pthread_mutex_t *m = k_mutex[k];
        CHECK_EQ(pthread_mutex_lock(m), 0);
        if (engaged(m) != 0) { /* engaged already, or never lazy (-1) */
            pthread_mutex_unlock(m);
            continue;
        }
        helper_t h = {.m = m, .op = 3};
        pthread_t t;
        pthread_create(&t, NULL, helper_main, &h);
        uint64_t end = th_now_ns() + 10000000000ull; /* only a hang reaches it */
        while (engaged(m) == 0 && th_now_ns() < end)
            usleep(200);
        CHECK(engaged(m) == 1, "%s: not engaged by a thread locking it while held", k_names[k]);
        pthread_mutex_unlock(m);
        pthread_join(t, NULL);
        CHECK_EQ(h.result, 0);
    }
}

/* ---------------------------------------------------------------- errno */
/* errno across interposed calls: glibc's pthread and C11 calls leave it
 * alone, and programs rely on that (CPython reads errno after readdir()
 * across its GIL's lock and condition calls), so the interposer must too,
 * even when its waits made system calls that failed (a futex wait that
 * found the word changed: EAGAIN).  KEEP_ERRNO(call) sets a sentinel, makes
 * the call and counts a change. */
#define ERRNO_SENTINEL 4242
static _Atomic long errno_changes;
static _Atomic int errno_last;
#define KEEP_ERRNO(call)                                                                                               \
    ({                                                                                                                 \
        errno = ERRNO_SENTINEL;                                                                                        \
        __typeof__(call) r_ = (call);                                                                                  \
        if (errno != ERRNO_SENTINEL) {                                                                                 \
            atomic_fetch_add(&errno_changes, 1);                                                                       \
            atomic_store(&errno_last, errno);                                                                          \
        }                                                                                                              \
        r_;                                                                                                            \
    })

static inline void check_errno_kept(const char *what)
{
    long n = atomic_exchange(&errno_changes, 0);
    int e = atomic_load(&errno_last);
    CHECK(n == 0, "%s: %ld interposed calls changed errno (last to %d, %s)", what, n, e, strerror(e));
}

#endif
