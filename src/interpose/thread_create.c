/*
 * thread_create.c - pthread_create under the interposer: application threads
 * counted, and threads created inside a delegated critical section reset.
 *
 * A critical section delegated to an RCL server (`liblock_execute_mutex` in a
 * program transformed by `liblock transform`, run with `--lock rcl`) runs on
 * one of the server's servicing threads: SCHED_FIFO, bound to the server CPU
 * (docs/rcl.md).  A thread it creates with the default attributes would
 * inherit both (PTHREAD_INHERIT_SCHED, and Linux copies the affinity), so a
 * program's ordinary worker - memcached starts its LRU crawler and LRU
 * maintainer inside critical sections - would run as a real-time thread on
 * the server's CPU: competing with the servicing threads at their own
 * priority, and, as an RCL client confined to a server CPU, colocated (a
 * wake-up and two context switches per request).  The thread is the
 * program's, not the server's: it gets what its caller would have given it.
 *
 * So when the caller is a servicing thread (ll_servicing_tls), the new
 * thread is created SCHED_OTHER (priority 0) with the CPUs the process
 * could use when the interposer was loaded; the application-side affinity
 * narrowing (docs/rcl.md, "Keeping application threads off the server
 * CPU") then applies to it like to any client.  Attributes the caller set
 * explicitly are kept: an explicit scheduling policy (PTHREAD_EXPLICIT_SCHED)
 * and an explicit affinity.  Its signal mask, which it would inherit from
 * the servicing thread (which blocks every signal: src/core/thread.c), is
 * the one the process had when the interposer was loaded, set by the new
 * thread itself first thing.  With attributes given, the reset is done by the
 * new thread itself before it calls the start routine (a trampoline); with
 * none, through attributes, so the thread never runs on the server CPU.
 * Threads created anywhere else get the caller's attributes untouched.
 *
 * Every application thread (these and all others, and C11 thrd_create's)
 * is also counted, so that the process ends when its last one does and
 * never earlier, whatever the library's own threads do (src/core/thread.c,
 * "the end of the process").
 */
#include "internal.h"
#include "platform/identity.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static create_fn real_create;
static cpu_set_t start_mask; /* the process's CPUs when the interposer was loaded */
static int have_mask;
static sigset_t start_sigs; /* the loading thread's signal mask then */
static int have_sigs;

__attribute__((constructor)) static void ip_thread_mask(void)
{
    have_mask = sched_getaffinity(0, sizeof start_mask, &start_mask) == 0;
    have_sigs = pthread_sigmask(SIG_SETMASK, NULL, &start_sigs) == 0;
}

/* The start records go through glibc's own allocator, never the
 * program's: a program may call pthread_create holding the mutex its own
 * malloc takes (an allocator built on pthread mutexes), where glibc's
 * pthread_create calls no malloc of the program's, so ours must not either. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

struct ip_start {
    void *(*fn)(void *);
    void *arg;
    int sched, affinity; /* reset these in the new thread */
    int sigs;            /* and the signal mask (a servicing thread blocks every signal) */
};

/* Every application thread starts here: counted (src/core/thread.c, "the
 * end of the process"), then, if made by a servicing thread, reset. */
static void *ip_start(void *p)
{
    struct ip_start s = *(struct ip_start *)p;
    __libc_free(p);
    ll_app_thread_begin();
    if (s.sched) {
        struct sched_param sp = {0};
        pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
    }
    if (s.affinity && have_mask)
        pthread_setaffinity_np(pthread_self(), sizeof start_mask, &start_mask);
    if (s.sigs && have_sigs)
        pthread_sigmask(SIG_SETMASK, &start_sigs, NULL);
    return s.fn(s.arg);
}

static create_fn real_fn(void)
{
    create_fn real = __atomic_load_n(&real_create, __ATOMIC_ACQUIRE);
    if (LL_UNLIKELY(!real)) {
        real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
        if (real)
            __atomic_store_n(&real_create, real, __ATOMIC_RELEASE);
    }
    return real;
}

/* glibc's pthread_create with the start routine wrapped; counted. */
static int create_counted(pthread_t *th, const pthread_attr_t *attr, struct ip_start *s)
{
    create_fn real = real_fn();
    if (!real) {
        __libc_free(s);
        return EAGAIN;
    }
    ll_app_thread_created();
    int r = real(th, attr, ip_start, s);
    if (r) {
        ll_app_thread_create_failed();
        __libc_free(s);
    }
    return r;
}

LL_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    LL_KEEP_ERRNO;
    struct ip_start *s = __libc_malloc(sizeof *s);
    if (!s)
        return EAGAIN;
    *s = (struct ip_start){fn, arg, 0, 0, 0};
    /* ll_ident_tls: a section running on a servicing thread with its
     * caller's identity (platform/identity.h) */
    if (LL_LIKELY(!ll_servicing_tls) && LL_LIKELY(!ll_ident_tls.servicing))
        return create_counted(th, attr, s);
    s->sigs = 1;
    if (!attr) {
        pthread_attr_t a;
        if (pthread_attr_init(&a) != 0) {
            __libc_free(s);
            return EAGAIN;
        }
        struct sched_param sp = {0};
        pthread_attr_setinheritsched(&a, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&a, SCHED_OTHER);
        pthread_attr_setschedparam(&a, &sp);
        if (have_mask)
            pthread_attr_setaffinity_np(&a, sizeof start_mask, &start_mask);
        int r = create_counted(th, &a, s);
        pthread_attr_destroy(&a);
        return r;
    }
    int inherit = PTHREAD_INHERIT_SCHED;
    cpu_set_t m;
    pthread_attr_getinheritsched(attr, &inherit);
    /* glibc reports every CPU for attributes without an affinity */
    int aff_set = pthread_attr_getaffinity_np(attr, sizeof m, &m) == 0 && CPU_COUNT(&m) < CPU_SETSIZE;
    s->sched = inherit == PTHREAD_INHERIT_SCHED;
    s->affinity = !aff_set;
    return create_counted(th, attr, s);
}

/* C11 threads: glibc's thrd_create calls its pthread_create internally,
 * which the one above never sees; the thread must be counted all the same. */
struct ip_thrd {
    int (*fn)(void *);
    void *arg;
};

static void *ip_thrd_start(void *p)
{
    struct ip_thrd t = *(struct ip_thrd *)p;
    __libc_free(p);
    return (void *)(intptr_t)t.fn(t.arg); /* what glibc's thrd_create does with the result */
}

LL_EXPORT int thrd_create(thrd_t *thr, int (*fn)(void *), void *arg)
{
    struct ip_thrd *t = __libc_malloc(sizeof *t);
    if (!t)
        return thrd_nomem;
    t->fn = fn;
    t->arg = arg;
    int r = pthread_create((pthread_t *)thr, NULL, ip_thrd_start, t);
    if (r)
        __libc_free(t);
    return r == 0 ? thrd_success : r == ENOMEM ? thrd_nomem : thrd_error;
}

/* main is an application thread too (counted from the start). */
__attribute__((constructor)) static void ip_main_thread(void) { ll_app_main_begin(); }
