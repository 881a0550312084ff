/*
 * interpose.c - run unmodified programs on any liblock algorithm
 * (LD_PRELOAD=build/lib/liblock-interpose.so, or `liblock run`).
 *
 * Source: the deployment method of seed 001 (Malthusian locks: every lock of
 * an unmodified program replaced through interposition of the pthread mutex
 * API) and LiTL (Guiroux et al., USENIX ATC'16), which made it a library.
 * Written here from those descriptions; no code taken from either.
 *
 * What is replaced: pthread_mutex_{init,destroy,lock,trylock,timedlock,
 * clocklock,unlock} and pthread_cond_{init,destroy,wait,timedwait,clockwait,
 * signal,broadcast}, and the C11 mtx_* and cnd_* calls on top of them.  (clocklock/clockwait are replaced too because
 * libstdc++'s std::timed_mutex and std::condition_variable::wait_for call
 * them; leaving them to glibc would hand glibc a mutex it does not own.)
 * With LIBLOCK_SEM=fifo|mostly-lifo also sem_{init,destroy,wait,trywait,
 * timedwait,clockwait,post,getvalue} for private semaphores, on liblock's
 * semaphores (seed 001 section 6.11; see "sem_*" below).  Without it every
 * sem_* call goes to glibc untouched.
 *
 * ---- Where the state lives (the cheap path) --------------------------------
 * A pthread_mutex_t (40 bytes on x86-64) cannot hold an arbitrary algorithm's
 * state, and a static initializer is all zeros (except __kind for the _NP
 * recursive/errorcheck/adaptive initializers).  We keep a pointer to a heap
 * `struct ip_mutex` (the liblock_t plus owner bookkeeping) in the mutex's
 * __data.__list.__prev word, which glibc uses only for robust mutexes.  The
 * uncontended path is: load __kind and that pointer (one line), call the
 * algorithm's lock through a pointer cached in the wrapper, store the owner.
 * No hash table, no global lookup on that path (an address table is used
 * only when a lock is set up or destroyed; see "the registry" below).
 *
 *   pointer word  __kind pass bits   meaning
 *   any           set                glibc's mutex (robust/PI/PP/pshared)
 *   0             clear              not set up yet: set up lazily
 *   1 (IP_GLIBC)  clear              glibc's mutex (see bootstrap below)
 *   other         clear              ours: pointer to struct ip_mutex
 *
 * Lazy set-up is race-free: every thread that finds 0 builds a wrapper and
 * CASes it in; the losers free theirs and use the winner's.  The CAS is
 * acq_rel and every reader loads the word with acquire, so a reader that
 * sees the pointer sees the initialised wrapper.
 *
 * ---- Invariants and memory ordering -------------------------------------------
 *  I1 The pointer word of a mutex changes only 0 -> W or 0 -> IP_GLIBC (CAS,
 *     acq_rel), W -> 0 (pthread_mutex_destroy, when POSIX allows no other
 *     use) or by pthread_mutex_init (release store).  Readers load it with
 *     acquire, so whoever sees W sees W fully built (algorithm state included).
 *  I2 w->owner equals thread T's tag (address of a TLS byte) only while T
 *     holds w, for RECURSIVE/ERRORCHECK: it is stored after the acquire and
 *     cleared before the release, and a thread compares it only with its own
 *     tag, which no other thread stores; so relaxed accesses suffice.  For
 *     NORMAL it is bookkeeping for fork only.
 *  I3 w->count and w->hold are read and written only by the holder, between
 *     its acquire and its release: the algorithm's own acquire/release
 *     ordering (every algorithm's contract) orders them like any data the
 *     mutex protects.
 *  I4 A sem_t is ours iff its marker word holds IP_SEM_MAGIC and the
 *     struct ip_sem its pointer word names has home == that sem_t; the
 *     marker is written (release, after the pointer) only by sem_init and
 *     cleared only by sem_destroy or a pass-through sem_init.
 *  The critical sections themselves are ordered by the algorithm's lock
 *  (acquire) and unlock (release); the interposer adds no ordering of its own
 *  on the lock path.
 *
 * ---- Waiting ---------------------------------------------------------------------
 * Threads wait where the algorithm makes them wait, with the policy from
 * LIBLOCK_WAIT (else the algorithm's default).  The interposer itself waits
 * only in timedlock (yield, then nanosleep back-off) and in condition
 * variables (liblock_cond_*, or glibc's futex-based condvar for glibc's
 * mutexes and the generic protocol).
 *
 * ---- Mutex types -------------------------------------------------------------
 *  - NORMAL, DEFAULT, ADAPTIVE: the selected algorithm.  Relocking a
 *    NORMAL mutex deadlocks as POSIX says; unlocking one that another thread
 *    locked releases it, as glibc does (POSIX leaves that undefined).
 *  - RECURSIVE and ERRORCHECK: implemented HERE on top of the selected
 *    algorithm (owner tag + count in the wrapper), with POSIX semantics:
 *    recursive relock counts (EAGAIN at overflow), errorcheck relock EDEADLK,
 *    unlock by a non-owner or of an unlocked mutex EPERM, trylock by the
 *    owner EBUSY (errorcheck) or a count (recursive).
 *  - ROBUST, PRIO_INHERIT, PRIO_PROTECT, PROCESS_SHARED: passed to glibc
 *    untouched (glibc's fields are never written by us; the kind bits
 *    route every call to glibc).  pshared state cannot contain a pointer
 *    into one process's heap, and robust/PI semantics are kernel-assisted.
 *
 * ---- timedlock / clocklock -----------------------------------------------------
 * The liblock API has no timed acquire.  We try, then loop: yield a few
 * times, then sleep with exponential back-off (2 us .. 1 ms, never past the
 * deadline) and retry, returning ETIMEDOUT once the deadline (on the given
 * clock) has passed.  Correct for every algorithm (trylock never queues), but
 * not fair: a timed waiter can be overtaken by lock() callers.
 *
 * ---- Condition variables --------------------------------------------------------
 * A pthread_cond_t (48 bytes) gets a pointer (in __data.__wseq) to a heap
 * `struct ip_cond` holding a liblock_cond_t (used when the mutex is ours and
 * the algorithm has LIBLOCK_PROP_COND), a real glibc condvar (used when the
 * mutex is glibc's, e.g. robust) and an inner glibc mutex (the fallback for
 * algorithms without LIBLOCK_PROP_COND: the same inner-mutex protocol as
 * src/core/cond.c, releasing our lock with its plain unlock).  Process-shared
 * condvars (bit 0 of __wrefs) go to glibc.  A condvar that no thread has
 * waited on has a null pointer, and signal/broadcast on it is a no-op: a
 * waiter installs the pointer and sets its "used" flag before releasing the
 * mutex, so a signaller that changed the predicate under that mutex sees
 * them (mutex release/acquire).  Clock attributes are honoured: deadlines on
 * CLOCK_MONOTONIC are converted to CLOCK_REALTIME for liblock_cond_timedwait
 * at the time of the call (a realtime clock jump during the wait moves it).
 * LIBLOCK_COND=mostly-lifo makes every liblock_cond_t with
 * liblock_condattr_setfifo(LIBLOCK_COND_FIFO_PROB) (seed 001 section 6.10:
 * queued at the tail with that probability, else at the head; signal wakes
 * the head; src/core/cond_lifo.c).  It applies to waits that use the
 * liblock_cond_t (our mutex, algorithm with LIBLOCK_PROP_COND); the glibc
 * condvar kept beside it (glibc mutexes, LIBLOCK_COND_GENERIC) keeps glibc's
 * order.  config_load checks once that the library really gives that kind
 * (_kind != 0); if not, one line and FIFO, or exit under LIBLOCK_STRICT=1.
 *
 * ---- fork ---------------------------------------------------------------------------
 * Every wrapper is on a registry list (touched only at set-up/destroy/fork,
 * never on the lock path).  pthread_atfork handlers: prepare takes the
 * registry mutex, parent releases it, child rebuilds every lock and condvar
 * in place: a lock held by the forking thread is rebuilt held by it (same
 * owner and recursion count, so the child can unlock it - the
 * pthread_atfork "lock in prepare, unlock in child" pattern); every other
 * lock is rebuilt free.  Rebuilding matters for queue locks: a waiter queued
 * at fork time is a thread that does not exist in the child, and handing the
 * lock to its node would hang the child.  This differs from glibc for locks
 * held by OTHER threads at fork time: glibc leaves them locked forever, we
 * free them (POSIX leaves their use in the child undefined).  Old algorithm
 * states are leaked in the child (other threads may have pointed into them).
 *
 * ---- Bootstrap --------------------------------------------------------------------------
 * The real functions are found with dlsym(RTLD_NEXT) in a constructor and,
 * if a library's constructor reaches us first, on first use.  glibc's dlsym
 * does not allocate on success, so it does not re-enter us; if an allocator
 * that takes pthread mutexes re-enters anyway while we resolve, the
 * re-entrant mutex calls return 0 without locking (the process is still in
 * its constructors; we make no claim about threads there).  Set-up (of
 * the configuration or of a wrapper) allocates; a mutex first used or
 * initialised *while* this thread is setting something up (an allocator's
 * own mutex) is marked IP_GLIBC and stays with glibc for its life, and a
 * configuration check re-entered from the configuration's own set-up sees
 * "inactive" instead of waiting for itself, so neither recursion nor
 * self-deadlock is possible (tests/test_interpose_malloc.c).
 * The liblock objects linked into this .so (src/core, src/locks/posix.c ...)
 * call pthread_mutex_* themselves; the Makefile links them with
 * -Wl,--wrap=<fn> so those calls reach __wrap_<fn> below, which calls glibc.
 *
 * ---- Configuration (docs/interpose.md "Configuration") ------------------------
 * LIBLOCK_LOCK (unset: interposer inactive, everything goes to glibc; an
 * unknown name: one line on stderr listing the valid names, then glibc, or
 * exit status 127 under LIBLOCK_STRICT=1), LIBLOCK_WAIT, LIBLOCK_COND,
 * LIBLOCK_COND_FIFO_PROB, LIBLOCK_SEM, LIBLOCK_SEM_FIFO_PROB (independent
 * of LIBLOCK_LOCK), LIBLOCK_COND_GENERIC and LIBLOCK_INTERPOSE_API
 * (testing), LIBLOCK_STRICT.
 * Falling back rather than exiting is
 * the default because the variables are inherited by every child process
 * (shells, helpers) and killing all of them is worse than one warning;
 * `liblock run` validates names before starting the program and sets
 * LIBLOCK_STRICT=1.
 *
 * ---- Algorithms under interposition ----------------------------------------------
 * Generic over liblock_algorithms(): the program calls lock/unlock, never
 * execute, so for delegation/combining algorithms the critical section runs
 * on the calling thread under the algorithm's lock/unlock path, which the
 * liblock contract requires to exclude delegated sections.  Mutual exclusion
 * holds for every algorithm; delegation's speed-up does not apply.
 * Classic algorithms are called through their ops table, not through the
 * API's per-thread hold stack (too slow for the uncontended target):
 * algorithms with per-hold nodes (node_size > 0) get a node from the
 * thread's free list (see "per-thread nodes" below), the others a NULL node;
 * such an algorithm must not depend on the hold stack (none does).
 * Delegating algorithms (LIBLOCK_PROP_DELEGATES) go through the API layer
 * (ll_api_lock/ll_api_unlock/liblock_trylock), whatever per-thread state
 * they keep there; a mutex of theirs must be unlocked by its locker (EPERM
 * otherwise, as the API answers).  An rcl lock starts no server when it is
 * made (the configuration probe included): it is bound to its server,
 * which is started then if needed, at its first lock or trylock, inside
 * set-up (w_bind), so a process that never locks has no server thread.
 */
#include "../internal.h"
#include "../core/cond_lifo.h" /* ll_sem_debug_queued, for tests */
#include "../rcl/rcl.h"       /* rcl_unlock_handed */

#include <dlfcn.h>
#include <limits.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* glibc's internal __kind bits (nptl/pthreadP.h) that mean "not ours". */
#define IP_KIND_ROBUST 16
#define IP_KIND_PI 32
#define IP_KIND_PP 64
#define IP_KIND_PSHARED 128
#define IP_KIND_PASS (IP_KIND_ROBUST | IP_KIND_PI | IP_KIND_PP | IP_KIND_PSHARED)
#define IP_KIND_TYPE 3
#define IP_GLIBC ((uintptr_t)1)

_Static_assert(sizeof(pthread_mutex_t) >= offsetof(pthread_mutex_t, __data.__list) + sizeof(uintptr_t),
               "mutex pointer word");
_Static_assert(sizeof(((pthread_mutex_t *)0)->__data.__list.__prev) == sizeof(uintptr_t), "pointer-sized word");
_Static_assert(sizeof(((pthread_cond_t *)0)->__data.__wseq) == sizeof(uintptr_t), "cond pointer word");

/* ---- the real functions ------------------------------------------------- */
static struct {
    int (*mutex_init)(pthread_mutex_t *, const pthread_mutexattr_t *);
    int (*mutex_destroy)(pthread_mutex_t *);
    int (*mutex_lock)(pthread_mutex_t *);
    int (*mutex_trylock)(pthread_mutex_t *);
    int (*mutex_unlock)(pthread_mutex_t *);
    int (*mutex_timedlock)(pthread_mutex_t *, const struct timespec *);
    int (*mutex_clocklock)(pthread_mutex_t *, clockid_t, const struct timespec *);
    int (*cond_init)(pthread_cond_t *, const pthread_condattr_t *);
    int (*cond_destroy)(pthread_cond_t *);
    int (*cond_wait)(pthread_cond_t *, pthread_mutex_t *);
    int (*cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
    int (*cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);
    int (*cond_signal)(pthread_cond_t *);
    int (*cond_broadcast)(pthread_cond_t *);
    int (*sem_init)(sem_t *, int, unsigned);
    int (*sem_destroy)(sem_t *);
    int (*sem_wait)(sem_t *);
    int (*sem_trywait)(sem_t *);
    int (*sem_timedwait)(sem_t *, const struct timespec *);
    int (*sem_clockwait)(sem_t *, clockid_t, const struct timespec *);
    int (*sem_post)(sem_t *);
    int (*sem_getvalue)(sem_t *, int *);
} R;
static _Atomic int resolved;
static __thread int ip_resolving __attribute__((tls_model("initial-exec")));
static __thread int ip_in_setup __attribute__((tls_model("initial-exec")));
static __thread char ip_tag __attribute__((tls_model("initial-exec")));

static inline uintptr_t self_tag(void) { return (uintptr_t)&ip_tag; }

static void *must(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        static const char msg[] = "liblock-interpose: cannot find the real pthread functions (dlsym)\n";
        ssize_t r = write(2, msg, sizeof msg - 1);
        (void)r;
        _exit(127);
    }
    return p;
}

static void ip_resolve(void)
{
    if (atomic_load_explicit(&resolved, memory_order_acquire))
        return;
    ip_resolving = 1;
    R.mutex_init = must("pthread_mutex_init");
    R.mutex_destroy = must("pthread_mutex_destroy");
    R.mutex_lock = must("pthread_mutex_lock");
    R.mutex_trylock = must("pthread_mutex_trylock");
    R.mutex_unlock = must("pthread_mutex_unlock");
    R.mutex_timedlock = must("pthread_mutex_timedlock");
    R.mutex_clocklock = dlsym(RTLD_NEXT, "pthread_mutex_clocklock"); /* glibc >= 2.30; may be NULL */
    R.cond_init = must("pthread_cond_init");
    R.cond_destroy = must("pthread_cond_destroy");
    R.cond_wait = must("pthread_cond_wait");
    R.cond_timedwait = must("pthread_cond_timedwait");
    R.cond_clockwait = dlsym(RTLD_NEXT, "pthread_cond_clockwait"); /* glibc >= 2.30; may be NULL */
    R.cond_signal = must("pthread_cond_signal");
    R.cond_broadcast = must("pthread_cond_broadcast");
    R.sem_init = must("sem_init");
    R.sem_destroy = must("sem_destroy");
    R.sem_wait = must("sem_wait");
    R.sem_trywait = must("sem_trywait");
    R.sem_timedwait = must("sem_timedwait");
    R.sem_clockwait = dlsym(RTLD_NEXT, "sem_clockwait"); /* glibc >= 2.30; may be NULL */
    R.sem_post = must("sem_post");
    R.sem_getvalue = must("sem_getvalue");
    ip_resolving = 0;
    atomic_store_explicit(&resolved, 1, memory_order_release);
}

/* Calls from the liblock objects linked into this .so (see the header). */
#define WRAP_READY() (LL_LIKELY(atomic_load_explicit(&resolved, memory_order_acquire)) || (ip_resolve(), 1))
int __wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a) { WRAP_READY(); return R.mutex_init(m, a); }
int __wrap_pthread_mutex_destroy(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_destroy(m); }
int __wrap_pthread_mutex_lock(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_lock(m); }
int __wrap_pthread_mutex_trylock(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_trylock(m); }
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_unlock(m); }
int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *t) { WRAP_READY(); return R.mutex_timedlock(m, t); }
int __wrap_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t c, const struct timespec *t) { WRAP_READY(); return R.mutex_clocklock ? R.mutex_clocklock(m, c, t) : EINVAL; }
int __wrap_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a) { WRAP_READY(); return R.cond_init(c, a); }
int __wrap_pthread_cond_destroy(pthread_cond_t *c) { WRAP_READY(); return R.cond_destroy(c); }
int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) { WRAP_READY(); return R.cond_wait(c, m); }
int __wrap_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) { WRAP_READY(); return R.cond_timedwait(c, m, t); }
int __wrap_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k, const struct timespec *t) { WRAP_READY(); return R.cond_clockwait ? R.cond_clockwait(c, m, k, t) : EINVAL; }
int __wrap_pthread_cond_signal(pthread_cond_t *c) { WRAP_READY(); return R.cond_signal(c); }
int __wrap_pthread_cond_broadcast(pthread_cond_t *c) { WRAP_READY(); return R.cond_broadcast(c); }

/* ---- configuration ------------------------------------------------------- */
static struct {
    int active;                    /* 0: everything goes to glibc */
    const struct ll_ops *ops;
    liblock_attr_t attr;
    liblock_condattr_t cattr;
    int lifo;                      /* LIBLOCK_COND=mostly-lifo granted */
    int generic_cond;              /* LIBLOCK_COND_GENERIC=1: own protocol for every algorithm */
    int force_api;                 /* LIBLOCK_INTERPOSE_API=1: API layer for every algorithm */
    int sem;                       /* LIBLOCK_SEM set: sem_init makes liblock semaphores */
    const char *sem_kind;          /* "fifo" / "mostly-lifo" */
    double sem_prob;               /* their FIFO probability */
} cfg;
static _Atomic int cfg_ready;
static pthread_mutex_t cfg_mutex = PTHREAD_MUTEX_INITIALIZER; /* real glibc mutex */

static int strict(void)
{
    const char *s = getenv("LIBLOCK_STRICT");
    return s && *s && strcmp(s, "0") != 0;
}

/* One line: the problem, then what happens: the fallback, or exit status
 * 127 under LIBLOCK_STRICT=1. */
static void config_error(const char *fallback, const char *fmt, const char *a, const char *b)
{
    int st = strict();
    fprintf(stderr, "liblock-interpose: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "; %s\n", st ? "exiting (LIBLOCK_STRICT=1)" : fallback);
    if (st)
        _exit(127);
}

static void valid_names(char *buf, size_t n)
{
    buf[0] = 0;
    size_t len = 0;
    for (const struct ll_ops *const *o = ll_registry; *o && len + 1 < n; o++) {
        int w = snprintf(buf + len, n - len, "%s%s", len ? " " : "", (*o)->name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

/* LIBLOCK_SEM: independent of LIBLOCK_LOCK (a program may want liblock's
 * semaphores with glibc's mutexes, or the reverse). */
static void sem_config_load(void)
{
    const char *s = getenv("LIBLOCK_SEM");
    if (!s || !*s)
        return; /* glibc's semaphores */
    if (strcmp(s, "fifo") == 0) {
        cfg.sem_kind = "fifo";
        cfg.sem_prob = 1.0;
    } else if (strcmp(s, "mostly-lifo") == 0) {
        cfg.sem_kind = "mostly-lifo";
        /* LIBLOCK_SEM_FIFO_PROB, else the condition variables' probability */
        double p = ll_env_double("LIBLOCK_COND_FIFO_PROB", 0.001, 0.0, 1.0);
        cfg.sem_prob = ll_env_double("LIBLOCK_SEM_FIFO_PROB", p, 0.0, 1.0);
    } else {
        config_error("using glibc's semaphores", "unknown LIBLOCK_SEM '%s' (valid: fifo mostly-lifo)%s", s, "");
        return;
    }
    cfg.sem = 1;
}

static void config_load(void)
{
    sem_config_load();
    const char *name = getenv("LIBLOCK_LOCK");
    if (!name || !*name)
        return; /* inactive */
    const struct ll_ops *o = ll_find_ops(name);
    if (!o) {
        char names[1024];
        valid_names(names, sizeof names);
        config_error("using glibc's mutexes", "unknown LIBLOCK_LOCK '%s' (valid: %s)", name, names);
        return;
    }
    liblock_attr_init(&cfg.attr);
    const char *w = getenv("LIBLOCK_WAIT");
    if (w && *w) {
        int p;
        if (liblock_wait_parse(w, &p) != 0) {
            config_error("using the algorithm's default", "unknown LIBLOCK_WAIT '%s' (valid: spin spin-then-park yield park)%s",
                         w, "");
        } else if (p != LIBLOCK_WAIT_DEFAULT && !(o->policies & LL_POLICY_BIT(p))) {
            config_error("using the algorithm's default", "LIBLOCK_WAIT '%s' is not supported by '%s'", w, o->name);
        } else {
            liblock_attr_setwait(&cfg.attr, p);
        }
    }
    liblock_condattr_init(&cfg.cattr);
    cfg.generic_cond = ll_env_long("LIBLOCK_COND_GENERIC", 0, 0, 1) == 1;
    cfg.force_api = ll_env_long("LIBLOCK_INTERPOSE_API", 0, 0, 1) == 1;
    const char *c = getenv("LIBLOCK_COND");
    if (c && *c && strcmp(c, "fifo") != 0) {
        if (strcmp(c, "mostly-lifo") != 0) {
            config_error("using fifo", "unknown LIBLOCK_COND '%s' (valid: fifo mostly-lifo)%s", c, "");
        } else {
            double prob = ll_env_double("LIBLOCK_COND_FIFO_PROB", 0.001, 0.0, 1.0);
            liblock_condattr_t ca;
            liblock_cond_t probe;
            liblock_condattr_init(&ca);
            int ok = liblock_condattr_setfifo(&ca, prob) == 0 && liblock_cond_init(&probe, &ca) == 0;
            int granted = ok && probe._kind != 0; /* kind 0 = the POSIX-backed FIFO condvar: a build without the kind */
            if (ok)
                liblock_cond_destroy(&probe);
            if (!granted) {
                config_error("using fifo", "LIBLOCK_COND=mostly-lifo: mostly-LIFO condition variables are not available in this "
                             "liblock build%s%s", "", "");
            } else {
                cfg.cattr = ca;
                cfg.lifo = 1;
            }
        }
    }
    /* Check that a lock of this algorithm can be made at all (e.g. an RCL
     * algorithm that needs servers), so failure is reported once, here. */
    liblock_t probe;
    int r = liblock_init(&probe, o->name, &cfg.attr);
    if (r) {
        config_error("using glibc's mutexes", "LIBLOCK_LOCK '%s' cannot be initialised (%s)", o->name, strerror(r));
        return;
    }
    liblock_destroy(&probe);
    /* Run the library's lazy, once-only initialisations now, inside set-up:
     * done later from within an interposed lock (e.g. mcscrn asking for its
     * NUMA node) they would call into hwloc, which takes pthread mutexes that
     * come back here, and pthread_once would deadlock on itself. */
    (void)ll_topology_source();
    (void)ll_cycles_per_ns();
    (void)ll_spin_budget_cycles();
    cfg.ops = o;
    cfg.active = 1;
}

static void config_ensure(void)
{
    if (LL_LIKELY(atomic_load_explicit(&cfg_ready, memory_order_acquire)))
        return;
    if (ip_in_setup)
        return; /* re-entered from config_load's own allocations: treat as inactive */
    ip_resolve();
    R.mutex_lock(&cfg_mutex);
    if (!atomic_load_explicit(&cfg_ready, memory_order_relaxed)) {
        ip_in_setup++;
        config_load();
        ip_in_setup--;
        atomic_store_explicit(&cfg_ready, 1, memory_order_release);
    }
    R.mutex_unlock(&cfg_mutex);
}

/* Exported for tests and tools: the algorithm in use, NULL when inactive. */
LL_EXPORT const char *liblock_interpose_lock(void)
{
    config_ensure();
    return cfg.active ? cfg.ops->name : NULL;
}

/* Exported for tests and tools: the kind of semaphore sem_init makes
 * ("fifo", "mostly-lifo"), NULL when semaphores are glibc's. */
LL_EXPORT const char *liblock_interpose_sem(void)
{
    config_ensure();
    return cfg.sem ? cfg.sem_kind : NULL;
}

/* ---- wrappers and their registry -------------------------------------------- */
struct ip_mutex {
    /* first cache line: everything the uncontended NORMAL path touches */
    liblock_t lock;
    int (*lockfn)(liblock_t *, void *);   /* non-NULL: direct path (NORMAL type, no nodes) */
    int (*unlockfn)(liblock_t *, void *);
    _Atomic uintptr_t owner;              /* self_tag() of the holder, 0 when free */
    /* second line */
    ll_hold_t *hold;                      /* node algorithms: the holder's node */
    int (*trylockfn)(liblock_t *, void *);
    unsigned count;                       /* recursion depth while held */
    int type;                             /* PTHREAD_MUTEX_NORMAL/RECURSIVE/ERRORCHECK */
    int holds;                            /* algorithm needs per-hold nodes (node path) */
    int api;                              /* delegating algorithm: through the API layer */
    _Atomic int bind;                     /* rcl: not bound to a server yet (w_bind) */
    const void *addr;                     /* the pthread_mutex_t it was made for (reuse table) */
    struct ip_mutex *prev, *next;         /* registry (fork) */
};
_Static_assert(offsetof(struct ip_mutex, owner) + sizeof(uintptr_t) <= LL_CACHELINE, "hot fields in one line");

struct ip_cond {
    liblock_cond_t lc;
    pthread_cond_t rc;                    /* real glibc condvar (clock attribute applied) */
    pthread_mutex_t im;                   /* real glibc mutex guarding rc in the fallback */
    clockid_t clock;
    _Atomic int used_lc, used_rc;
    struct ip_cond *prev, *next;
};

static pthread_mutex_t reg_mutex = PTHREAD_MUTEX_INITIALIZER; /* real glibc mutex */
static struct ip_mutex *reg_mutexes;
static struct ip_cond *reg_conds;

/* ---- the registry: a list (for fork) and an address table (for reuse) -----
 * Both are guarded by reg_mutex and touched only when a lock is set up or
 * destroyed, never on the lock path.  The table maps a pthread_mutex_t's
 * address to the wrapper last made for it.  A mutex that is never destroyed
 * (std::mutex, whose destructor does not call pthread_mutex_destroy; C code
 * that frees a mutex without destroying it) leaves its wrapper behind; when
 * a new mutex later appears at the same address (zeroed again, or
 * initialised again), the old wrapper is reused if it is idle, so the memory
 * kept is bounded by the number of distinct addresses ever used as mutexes
 * rather than growing with every object. */
static struct ip_mutex **tab;
static size_t tab_cap, tab_n;
static _Atomic long live_wrappers;

static size_t tab_hash(const void *a)
{
    uint64_t x = (uint64_t)(uintptr_t)a;
    x ^= x >> 29;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 17);
}

static long tab_index(const void *a)
{
    if (!tab_cap)
        return -1;
    for (size_t i = tab_hash(a) & (tab_cap - 1);; i = (i + 1) & (tab_cap - 1)) {
        if (!tab[i])
            return -1;
        if (tab[i]->addr == a)
            return (long)i;
    }
}

static void tab_put(struct ip_mutex *w) /* w->addr not in the table */
{
    if ((tab_n + 1) * 2 > tab_cap) {
        size_t nc = tab_cap ? tab_cap * 2 : 256;
        struct ip_mutex **nt = calloc(nc, sizeof *nt);
        if (!nt)
            return; /* no reuse for this one; nothing else depends on the table */
        for (size_t i = 0; i < tab_cap; i++)
            if (tab[i]) {
                size_t j = tab_hash(tab[i]->addr) & (nc - 1);
                while (nt[j])
                    j = (j + 1) & (nc - 1);
                nt[j] = tab[i];
            }
        free(tab);
        tab = nt;
        tab_cap = nc;
    }
    size_t i = tab_hash(w->addr) & (tab_cap - 1);
    while (tab[i])
        i = (i + 1) & (tab_cap - 1);
    tab[i] = w;
    tab_n++;
}

static void tab_del_at(size_t i) /* linear probing: shift the cluster back */
{
    tab[i] = NULL;
    tab_n--;
    for (size_t j = (i + 1) & (tab_cap - 1); tab[j]; j = (j + 1) & (tab_cap - 1)) {
        struct ip_mutex *e = tab[j];
        size_t h = tab_hash(e->addr) & (tab_cap - 1);
        /* e may move to the hole i if its home h is not in (i, j] */
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            tab[i] = e;
            tab[j] = NULL;
            i = j;
        }
    }
}

static void list_add_locked(struct ip_mutex *w)
{
    w->prev = NULL;
    w->next = reg_mutexes;
    if (reg_mutexes)
        reg_mutexes->prev = w;
    reg_mutexes = w;
}

static void list_del_locked(struct ip_mutex *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        reg_mutexes = w->next;
    if (w->next)
        w->next->prev = w->prev;
}

static void reg_del_mutex(struct ip_mutex *w)
{
    R.mutex_lock(&reg_mutex);
    list_del_locked(w);
    long i = tab_index(w->addr);
    if (i >= 0 && tab[i] == w)
        tab_del_at((size_t)i);
    R.mutex_unlock(&reg_mutex);
}

static void reg_add_cond(struct ip_cond *c)
{
    R.mutex_lock(&reg_mutex);
    c->prev = NULL;
    c->next = reg_conds;
    if (reg_conds)
        reg_conds->prev = c;
    reg_conds = c;
    R.mutex_unlock(&reg_mutex);
}

static void reg_del_cond(struct ip_cond *c)
{
    R.mutex_lock(&reg_mutex);
    if (c->prev)
        c->prev->next = c->next;
    else
        reg_conds = c->next;
    if (c->next)
        c->next->prev = c->prev;
    R.mutex_unlock(&reg_mutex);
}

static void mutex_set_fns(struct ip_mutex *w)
{
    const struct ll_ops *o = LL_OPS(&w->lock);
    /* Delegating algorithms (RCL, combining) may keep per-thread state the
     * API layer sets up; they go through liblock's own lock/unlock (speed
     * is not what they offer under interposition).  LIBLOCK_INTERPOSE_API=1
     * forces this path for every algorithm (for testing). */
    w->api = (o->props & LIBLOCK_PROP_DELEGATES) || cfg.force_api;
    atomic_store_explicit(&w->bind, strcmp(o->name, "rcl") == 0, memory_order_relaxed);
    w->holds = !w->api && o->node_size > 0;
    w->trylockfn = o->trylock;
    int direct = !w->holds && !w->api && w->type == PTHREAD_MUTEX_NORMAL;
    w->lockfn = direct ? o->lock : NULL;
    w->unlockfn = direct ? o->unlock : NULL;
}

static struct ip_mutex *mutex_new(int type)
{
    struct ip_mutex *w = ll_alloc_aligned(sizeof *w);
    if (!w)
        return NULL;
    if (liblock_init(&w->lock, cfg.ops->name, &cfg.attr) != 0) {
        free(w);
        return NULL;
    }
    w->type = type;
    mutex_set_fns(w);
    atomic_fetch_add_explicit(&live_wrappers, 1, memory_order_relaxed);
    return w;
}

static void mutex_free(struct ip_mutex *w)
{
    liblock_destroy(&w->lock);
    free(w);
    atomic_fetch_sub_explicit(&live_wrappers, 1, memory_order_relaxed);
}

/* For tests: wrappers currently allocated. */
LL_EXPORT long liblock_interpose_debug_wrappers(void) { return atomic_load_explicit(&live_wrappers, memory_order_relaxed); }

static inline _Atomic uintptr_t *mptr(pthread_mutex_t *m) { return (_Atomic uintptr_t *)(void *)&m->__data.__list.__prev; }
static inline int mkind(const pthread_mutex_t *m) { return *(const volatile int *)&m->__data.__kind; }

static int kind_to_type(int kind)
{
    switch (kind & IP_KIND_TYPE) {
    case PTHREAD_MUTEX_RECURSIVE:
        return PTHREAD_MUTEX_RECURSIVE;
    case PTHREAD_MUTEX_ERRORCHECK:
        return PTHREAD_MUTEX_ERRORCHECK;
    default:
        return PTHREAD_MUTEX_NORMAL; /* NORMAL (== DEFAULT in glibc) and ADAPTIVE */
    }
}

static struct ip_mutex *mutex_install(pthread_mutex_t *m, struct ip_mutex *fresh, int init, int type);

/* The wrapper of m, setting it up if needed; NULL: glibc handles m. */
static struct ip_mutex *mutex_resolve(pthread_mutex_t *m)
{
    config_ensure();
    if (mkind(m) & IP_KIND_PASS)
        return NULL;
    _Atomic uintptr_t *pw = mptr(m);
    uintptr_t p = atomic_load_explicit(pw, memory_order_acquire);
    if (p > IP_GLIBC)
        return (struct ip_mutex *)p;
    if (p == IP_GLIBC)
        return NULL;
    if (ip_in_setup) {
        /* An allocator's mutex, met while we set up another one: glibc's for life. */
        uintptr_t z = 0;
        if (atomic_compare_exchange_strong_explicit(pw, &z, IP_GLIBC, memory_order_acq_rel, memory_order_acquire) ||
            z == IP_GLIBC)
            return NULL;
        return (struct ip_mutex *)z;
    }
    if (!cfg.active)
        return NULL;
    /* No wrapper allocated here: install reuses an idle one left at this
     * address first, so a loop that news and deletes std::mutex objects
     * allocates nothing and keeps getting the same address back. */
    return mutex_install(m, NULL, 0, kind_to_type(mkind(m)));
}

static inline struct ip_mutex *mutex_fast(pthread_mutex_t *m)
{
    uintptr_t p = atomic_load_explicit(mptr(m), memory_order_acquire);
    if (LL_LIKELY(p > IP_GLIBC && !(mkind(m) & IP_KIND_PASS)))
        return (struct ip_mutex *)p;
    return NULL;
}

/* ---- per-thread nodes for queue locks ---------------------------------------------
 * Algorithms with node_size > 0 need a node that stays put from lock() to
 * unlock().  The API layer's hold stack provides one but costs a
 * stack search and bookkeeping per call; here the node is an
 * ll_hold_t taken from the thread's own free list (the API layer's, so it is
 * freed at thread exit like the API's), and the holder's node is remembered
 * in the wrapper: only the holder reads or writes w->hold between its lock
 * and its unlock, so the mutex itself protects that field.  (CLH-style
 * algorithms also use the record's spare node through ll_self_tls, which is
 * therefore set up before every call.)
 * A condition wait hands the node to the API layer's hold stack for the
 * duration of liblock_cond_wait (adopt_hold / reclaim_hold below). */
/* The thread's liblock record (initial-exec TLS in internal.h). */
static inline ll_thread_t *ip_get_self(void) { return ll_self(); }

static int w_node_acquire(struct ip_mutex *w, int try)
{
    ll_thread_t *s = ip_get_self();
    if (LL_UNLIKELY(!s))
        return ENOMEM;
    ll_hold_t *h = s->free_holds;
    if (LL_LIKELY(h != NULL)) {
        s->free_holds = h->next_free;
    } else {
        h = ll_alloc_aligned(sizeof *h);
        if (!h)
            return ENOMEM;
    }
    h->lock = &w->lock;
    const struct ll_ops *o = LL_OPS(&w->lock);
    int r = try ? o->trylock(&w->lock, h->node) : o->lock(&w->lock, h->node);
    if (LL_UNLIKELY(r)) {
        h->lock = NULL;
        h->next_free = s->free_holds;
        s->free_holds = h;
        return r;
    }
    w->hold = h;
    return 0;
}

static int w_node_release(struct ip_mutex *w)
{
    ll_thread_t *s = ip_get_self(); /* before unlock: CLH hands its spare node to ll_self_tls */
    ll_hold_t *h = w->hold;
    if (LL_UNLIKELY(!h))
        return EPERM; /* not locked */
    w->hold = NULL;
    int r = LL_OPS(&w->lock)->unlock(&w->lock, h->node);
    if (LL_UNLIKELY(r)) {
        w->hold = h;
        return r;
    }
    if (LL_LIKELY(s != NULL)) {
        h->lock = NULL;
        h->next_free = s->free_holds;
        s->free_holds = h;
    }
    return 0;
}

/* Put the holder's node on the API hold stack (for liblock_cond_wait). */
static int adopt_hold(ll_thread_t *s, struct ip_mutex *w)
{
    ll_hold_t *slot = ll_hold_push(s, &w->lock); /* grows the stack if needed */
    if (!slot)
        return ENOMEM;
    s->held[s->nheld - 1] = w->hold;
    w->hold->lock = &w->lock;
    slot->lock = NULL;
    slot->next_free = s->free_holds;
    s->free_holds = slot;
    return 0;
}

/* Take the (possibly new) node back from the API hold stack after the wait. */
static void reclaim_hold(ll_thread_t *s, struct ip_mutex *w)
{
    ll_hold_t *h = ll_hold_find(s, &w->lock);
    if (!h)
        return;
    ll_hold_pop(s, h);          /* pushes h on the free list head ... */
    s->free_holds = h->next_free; /* ... from where we take it back */
    h->lock = &w->lock;
    w->hold = h;
}

/* ---- acquire / release on a wrapper -------------------------------------------- */
/* An rcl lock is bound to its server, which is started then if needed, on
 * its first use, not when it is set up (a process that never locks starts
 * no server: docs/rcl.md).  Bind it here, inside set-up, so that a mutex
 * the server's start meets (an allocator's) stays glibc's as during any
 * set-up (see "Bootstrap"). */
static void w_bind(struct ip_mutex *w)
{
    ip_in_setup++;
    liblock_server_of(&w->lock);
    ip_in_setup--;
    atomic_store_explicit(&w->bind, 0, memory_order_relaxed);
}

static int w_raw_lock(struct ip_mutex *w)
{
    if (w->api) {
        if (LL_UNLIKELY(atomic_load_explicit(&w->bind, memory_order_relaxed)))
            w_bind(w);
        return ll_api_lock(&w->lock);
    }
    return w->holds ? w_node_acquire(w, 0) : LL_OPS(&w->lock)->lock(&w->lock, NULL);
}

static int w_raw_trylock(struct ip_mutex *w)
{
    if (w->api) {
        if (LL_UNLIKELY(atomic_load_explicit(&w->bind, memory_order_relaxed)))
            w_bind(w);
        return liblock_trylock(&w->lock);
    }
    return w->holds ? w_node_acquire(w, 1) : w->trylockfn(&w->lock, NULL);
}

static int w_raw_unlock(struct ip_mutex *w)
{
    if (w->api) {
        int r = ll_api_unlock(&w->lock);
        /* A normal mutex this thread does not hold: on rcl, it may be one a
         * delegated critical section locked and left to its caller
         * (docs/rcl.md, "What a delegated critical section may do") */
        if (LL_UNLIKELY(r == EPERM) && w->type == PTHREAD_MUTEX_NORMAL && LL_OPS(&w->lock)->lock == rcl_lock_lock)
            r = rcl_unlock_handed(&w->lock);
        return r;
    }
    return w->holds ? w_node_release(w) : LL_OPS(&w->lock)->unlock(&w->lock, NULL);
}

/* Install a wrapper for m (the slow path of set-up; serialised by
 * reg_mutex).  fresh: a new wrapper of the right type.  init: from
 * pthread_mutex_init (always install) rather than lazy set-up (install only
 * if m is still unset; else use what another thread installed).  fresh may
 * be NULL (lazy set-up): a wrapper of `type` is then allocated here only if
 * no idle one can be reused; if that allocation fails, m is left to glibc.  An idle
 * wrapper left at m's address by a mutex that was never destroyed is reused
 * instead of fresh (see the registry above).  Returns the wrapper in use,
 * or NULL if m turned out to be glibc's. */
static struct ip_mutex *mutex_install(pthread_mutex_t *m, struct ip_mutex *fresh, int init, int type)
{
    _Atomic uintptr_t *pw = mptr(m);
    struct ip_mutex *use = fresh;
    ip_in_setup++; /* an allocator met here (table growth, nodes) stays glibc's */
    R.mutex_lock(&reg_mutex);
    uintptr_t p = atomic_load_explicit(pw, memory_order_acquire);
    if (!init && p != 0) {
        use = p == IP_GLIBC ? NULL : (struct ip_mutex *)p;
    } else {
        long i = tab_index(m);
        struct ip_mutex *old = i >= 0 ? tab[i] : NULL;
        int idle = 0;
        if (old && old != (struct ip_mutex *)p && atomic_load_explicit(&old->owner, memory_order_relaxed) == 0 &&
            !old->hold && w_raw_trylock(old) == 0) {
            w_raw_unlock(old);
            idle = 1;
        } else if (old && old == (struct ip_mutex *)p && init &&
                   atomic_load_explicit(&old->owner, memory_order_relaxed) == 0 && !old->hold &&
                   w_raw_trylock(old) == 0) {
            w_raw_unlock(old); /* re-initialised without destroy */
            idle = 1;
        }
        if (!idle && !fresh) {
            fresh = mutex_new(type);
            if (!fresh) {
                /* Out of memory: leave this mutex to glibc rather than fail the call. */
                atomic_store_explicit(pw, IP_GLIBC, memory_order_release);
                R.mutex_unlock(&reg_mutex);
                ip_in_setup--;
                return NULL;
            }
            use = fresh;
        }
        if (idle) {
            old->type = type;
            mutex_set_fns(old);
            atomic_store_explicit(&old->owner, 0, memory_order_relaxed);
            old->count = 0;
            use = old;
        } else {
            if (old)
                tab_del_at((size_t)i); /* busy: left behind (leaked), fresh takes its place */
            fresh->addr = m;
            list_add_locked(fresh);
            tab_put(fresh);
        }
        if (init) {
            memset(m, 0, sizeof *m);
            m->__data.__kind = use->type;
        }
        atomic_store_explicit(pw, (uintptr_t)use, memory_order_release);
    }
    R.mutex_unlock(&reg_mutex);
    ip_in_setup--;
    if (fresh && use != fresh)
        mutex_free(fresh);
    return use;
}

/* Relock / owner checks for RECURSIVE and ERRORCHECK.  Returns -1 when the
 * caller must really acquire; otherwise the result of the call. */
static int w_owner_check(struct ip_mutex *w, int try)
{
    if (w->type == PTHREAD_MUTEX_NORMAL ||
        atomic_load_explicit(&w->owner, memory_order_relaxed) != self_tag())
        return -1;
    if (w->type == PTHREAD_MUTEX_RECURSIVE) {
        if (w->count == UINT_MAX)
            return EAGAIN;
        w->count++;
        return 0;
    }
    return try ? EBUSY : EDEADLK;
}

static int w_lock(struct ip_mutex *w)
{
    int r = w_owner_check(w, 0);
    if (r >= 0)
        return r;
    r = w_raw_lock(w);
    if (r == 0) {
        atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
        w->count = 1;
    }
    return r;
}

static int w_trylock(struct ip_mutex *w)
{
    int r = w_owner_check(w, 1);
    if (r >= 0)
        return r;
    r = w_raw_trylock(w);
    if (r == 0) {
        atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
        w->count = 1;
    }
    return r;
}

static int w_unlock(struct ip_mutex *w)
{
    uintptr_t me = self_tag();
    uintptr_t owner = atomic_load_explicit(&w->owner, memory_order_relaxed);
    if (w->type != PTHREAD_MUTEX_NORMAL) {
        if (owner != me)
            return EPERM;
        if (--w->count > 0)
            return 0;
    }
    if (owner == me)
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
    int r = w_raw_unlock(w);
    if (r && owner == me) {
        atomic_store_explicit(&w->owner, me, memory_order_relaxed);
        w->count = 1;
    }
    return r;
}

/* ---- pthread_mutex_* ---------------------------------------------------------- */
LL_EXPORT int pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a)
{
    config_ensure();
    int type = PTHREAD_MUTEX_NORMAL, pshared = PTHREAD_PROCESS_PRIVATE, proto = PTHREAD_PRIO_NONE,
        robust = PTHREAD_MUTEX_STALLED;
    if (a) {
        if (pthread_mutexattr_gettype(a, &type) || pthread_mutexattr_getpshared(a, &pshared) ||
            pthread_mutexattr_getprotocol(a, &proto) || pthread_mutexattr_getrobust(a, &robust))
            return EINVAL;
    }
    if (pshared != PTHREAD_PROCESS_PRIVATE || proto != PTHREAD_PRIO_NONE || robust != PTHREAD_MUTEX_STALLED)
        return R.mutex_init(m, a); /* the kind bits route every later call to glibc */
    if (ip_in_setup || !cfg.active) {
        /* Inactive, or initialised while we set up another lock (an
         * allocator's mutex): glibc's for life, marked so it is never
         * converted later. */
        int r = R.mutex_init(m, a);
        if (r == 0)
            atomic_store_explicit(mptr(m), IP_GLIBC, memory_order_release);
        return r;
    }
    if (type == PTHREAD_MUTEX_ADAPTIVE_NP)
        type = PTHREAD_MUTEX_NORMAL;
    ip_in_setup++;
    struct ip_mutex *w = mutex_new(type);
    ip_in_setup--;
    if (!w)
        return ENOMEM;
    mutex_install(m, w, 1, type);
    return 0;
}

LL_EXPORT int pthread_mutex_destroy(pthread_mutex_t *m)
{
    config_ensure();
    if (mkind(m) & IP_KIND_PASS)
        return R.mutex_destroy(m);
    uintptr_t p = atomic_load_explicit(mptr(m), memory_order_acquire);
    if (p == 0 || p == IP_GLIBC)
        return R.mutex_destroy(m);
    struct ip_mutex *w = (struct ip_mutex *)p;
    if (atomic_load_explicit(&w->owner, memory_order_relaxed) != 0)
        return EBUSY;
    int r = liblock_destroy(&w->lock);
    if (r)
        return r; /* EBUSY: held or waited on; left intact */
    reg_del_mutex(w);
    free(w);
    atomic_fetch_sub_explicit(&live_wrappers, 1, memory_order_relaxed);
    atomic_store_explicit(mptr(m), 0, memory_order_release);
    return 0;
}

/* The uncontended paths: a NORMAL mutex goes straight to the algorithm
 * (node-less: cached function pointer; queue lock: node path), other types
 * through w_lock/w_unlock.  (Measured: routing NORMAL queue locks through
 * the generic w_lock/w_unlock cost ~10 ns more per pair.) */
LL_EXPORT int pthread_mutex_lock(pthread_mutex_t *m)
{
    struct ip_mutex *w = mutex_fast(m);
    if (LL_LIKELY(w != NULL)) {
        int r;
        if (LL_LIKELY(w->lockfn))
            r = w->lockfn(&w->lock, NULL);
        else if (w->holds && w->type == PTHREAD_MUTEX_NORMAL)
            r = w_node_acquire(w, 0);
        else
            return w_lock(w);
        if (LL_LIKELY(r == 0))
            atomic_store_explicit(&w->owner, self_tag(), memory_order_relaxed);
        return r;
    }
    if (LL_UNLIKELY(!atomic_load_explicit(&resolved, memory_order_acquire)) && ip_resolving)
        return 0; /* bootstrap re-entry, see header */
    if (!(w = mutex_resolve(m)))
        return R.mutex_lock(m);
    return w_lock(w);
}

LL_EXPORT int pthread_mutex_unlock(pthread_mutex_t *m)
{
    struct ip_mutex *w = mutex_fast(m);
    if (LL_LIKELY(w != NULL)) {
        if (LL_LIKELY(w->unlockfn)) {
            atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
            return w->unlockfn(&w->lock, NULL);
        }
        if (w->holds && w->type == PTHREAD_MUTEX_NORMAL) {
            atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
            return w_node_release(w);
        }
        return w_unlock(w);
    }
    if (LL_UNLIKELY(!atomic_load_explicit(&resolved, memory_order_acquire)) && ip_resolving)
        return 0;
    if (!(w = mutex_resolve(m)))
        return R.mutex_unlock(m);
    return w_unlock(w);
}

LL_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m)
{
    struct ip_mutex *w = mutex_fast(m);
    if (LL_UNLIKELY(!w)) {
        if (LL_UNLIKELY(!atomic_load_explicit(&resolved, memory_order_acquire)) && ip_resolving)
            return 0;
        if (!(w = mutex_resolve(m)))
            return R.mutex_trylock(m);
    }
    return w_trylock(w);
}

/* ---- liblock_execute_mutex (include/liblock.h; what `liblock transform` emits) ----
 * Overrides the weak glibc version in src/core/execute_mutex.c (see there).
 * A NORMAL mutex on a delegating algorithm runs cs through liblock_execute:
 * on the RCL server for rcl, combined for the combining locks.  The
 * trampoline runs inside the critical section on whichever thread executes
 * it and keeps w->owner/count as a lock()/unlock() pair would (I2, I3: only
 * the executing holder writes them), so a pthread_cond_wait with m inside cs
 * and a later pthread_mutex_destroy see the mutex as they expect.  Every
 * other case (glibc's mutex, RECURSIVE/ERRORCHECK types whose owner is the
 * caller, non-delegating algorithms, a cs that may wait on an algorithm
 * whose delegated sections cannot: `_cond` without LIBLOCK_PROP_COND_IN_EXECUTE)
 * is lock, call, unlock on the calling thread through the wrappers above,
 * so it excludes pthread_mutex_lock/unlock of m exactly as they exclude
 * each other. */
struct ip_exec {
    struct ip_mutex *w;
    void *(*cs)(void *);
    void *ctx;
};

static void *ip_exec_tramp(void *a)
{
    struct ip_exec *x = a;
    atomic_store_explicit(&x->w->owner, self_tag(), memory_order_relaxed);
    x->w->count = 1;
    void *r = x->cs(x->ctx);
    atomic_store_explicit(&x->w->owner, 0, memory_order_relaxed);
    return r;
}

static void *ip_execute_mutex(pthread_mutex_t *m, void *(*cs)(void *), void *ctx, int waits)
{
    if (!m || !cs) {
        errno = EINVAL;
        return NULL;
    }
    struct ip_mutex *w = mutex_fast(m);
    if (!w && atomic_load_explicit(&resolved, memory_order_acquire))
        w = mutex_resolve(m);
    if (w && w->api && w->type == PTHREAD_MUTEX_NORMAL &&
        (!waits || (LL_OPS(&w->lock)->props & LIBLOCK_PROP_COND_IN_EXECUTE))) {
        struct ip_exec x = {w, cs, ctx};
        return liblock_execute(&w->lock, ip_exec_tramp, &x); /* NULL + errno if it cannot run */
    }
    int r = pthread_mutex_lock(m);
    if (r) {
        errno = r;
        return NULL;
    }
    void *ret = cs(ctx);
    int saved = errno;
    pthread_mutex_unlock(m);
    errno = saved;
    return ret;
}

LL_EXPORT void *liblock_execute_mutex(pthread_mutex_t *m, void *(*cs)(void *), void *ctx)
{
    return ip_execute_mutex(m, cs, ctx, 0);
}

LL_EXPORT void *liblock_execute_mutex_cond(pthread_mutex_t *m, void *(*cs)(void *), void *ctx)
{
    return ip_execute_mutex(m, cs, ctx, 1);
}

static int ts_valid(const struct timespec *t) { return t && t->tv_nsec >= 0 && t->tv_nsec < 1000000000L; }

static int ts_passed(clockid_t clk, const struct timespec *t, uint64_t *left_ns)
{
    struct timespec now;
    clock_gettime(clk, &now);
    if (now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec))
        return 1;
    *left_ns = (uint64_t)(t->tv_sec - now.tv_sec) * 1000000000ull + (uint64_t)t->tv_nsec - (uint64_t)now.tv_nsec;
    return 0;
}

static int w_timedlock(struct ip_mutex *w, clockid_t clk, const struct timespec *abstime)
{
    int r = w_owner_check(w, 0);
    if (r >= 0)
        return r;
    r = w_trylock(w);
    if (r != EBUSY)
        return r;
    if (!ts_valid(abstime))
        return EINVAL;
    uint64_t sleep_ns = 2000;
    for (unsigned i = 0;; i++) {
        uint64_t left;
        if (ts_passed(clk, abstime, &left))
            return ETIMEDOUT;
        if (i < 8) {
            ll_yield();
        } else {
            uint64_t s = sleep_ns < left ? sleep_ns : left;
            struct timespec d = {(time_t)(s / 1000000000ull), (long)(s % 1000000000ull)};
            nanosleep(&d, NULL);
            if (sleep_ns < 1000000)
                sleep_ns *= 2;
        }
        r = w_trylock(w);
        if (r != EBUSY)
            return r;
    }
}

LL_EXPORT int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *abstime)
{
    ip_resolve();
    struct ip_mutex *w = mutex_resolve(m);
    if (!w)
        return R.mutex_timedlock(m, abstime);
    return w_timedlock(w, CLOCK_REALTIME, abstime);
}

LL_EXPORT int pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
    ip_resolve();
    struct ip_mutex *w = mutex_resolve(m);
    if (!w)
        return R.mutex_clocklock ? R.mutex_clocklock(m, clk, abstime) : EINVAL;
    if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
        return EINVAL;
    return w_timedlock(w, clk, abstime);
}

/* ---- pthread_cond_* ---------------------------------------------------------------- */
static inline _Atomic uintptr_t *cptr(pthread_cond_t *c) { return (_Atomic uintptr_t *)(void *)&c->__data.__wseq; }
static inline int cond_pshared(const pthread_cond_t *c) { return *(const volatile unsigned *)&c->__data.__wrefs & 1; }

static struct ip_cond *cond_new(clockid_t clock)
{
    struct ip_cond *c = ll_alloc_aligned(sizeof *c);
    if (!c)
        return NULL;
    if (liblock_cond_init(&c->lc, &cfg.cattr) != 0) {
        free(c);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, clock);
    R.cond_init(&c->rc, &ca);
    pthread_condattr_destroy(&ca);
    R.mutex_init(&c->im, NULL);
    c->clock = clock;
    return c;
}

static void cond_free(struct ip_cond *c)
{
    liblock_cond_destroy(&c->lc);
    R.cond_destroy(&c->rc);
    R.mutex_destroy(&c->im);
    free(c);
}

/* NULL: glibc's condvar (pshared or interposer inactive) or out of memory (*err). */
static struct ip_cond *cond_resolve(pthread_cond_t *c, int *err)
{
    config_ensure();
    *err = 0;
    if (!cfg.active || cond_pshared(c))
        return NULL;
    _Atomic uintptr_t *pw = cptr(c);
    uintptr_t p = atomic_load_explicit(pw, memory_order_acquire);
    if (p)
        return (struct ip_cond *)p;
    ip_in_setup++;
    struct ip_cond *n = cond_new(CLOCK_REALTIME);
    ip_in_setup--;
    if (!n) {
        *err = ENOMEM;
        return NULL;
    }
    reg_add_cond(n);
    uintptr_t z = 0;
    if (atomic_compare_exchange_strong_explicit(pw, &z, (uintptr_t)n, memory_order_acq_rel, memory_order_acquire))
        return n;
    reg_del_cond(n);
    cond_free(n);
    return (struct ip_cond *)z;
}

LL_EXPORT int pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a)
{
    config_ensure();
    int pshared = PTHREAD_PROCESS_PRIVATE;
    clockid_t clock = CLOCK_REALTIME;
    if (a && (pthread_condattr_getpshared(a, &pshared) || pthread_condattr_getclock(a, &clock)))
        return EINVAL;
    if (!cfg.active || pshared != PTHREAD_PROCESS_PRIVATE)
        return R.cond_init(c, a);
    ip_in_setup++;
    struct ip_cond *n = cond_new(clock);
    ip_in_setup--;
    if (!n)
        return ENOMEM;
    reg_add_cond(n);
    memset(c, 0, sizeof *c);
    atomic_store_explicit(cptr(c), (uintptr_t)n, memory_order_release);
    return 0;
}

LL_EXPORT int pthread_cond_destroy(pthread_cond_t *c)
{
    config_ensure();
    if (!cfg.active || cond_pshared(c))
        return R.cond_destroy(c);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0;
    struct ip_cond *n = (struct ip_cond *)p;
    int r = liblock_cond_destroy(&n->lc);
    if (r)
        return r; /* EBUSY: waiters remain; nothing changed */
    R.cond_destroy(&n->rc);
    R.mutex_destroy(&n->im);
    reg_del_cond(n);
    free(n);
    atomic_store_explicit(cptr(c), 0, memory_order_release);
    return 0;
}

LL_EXPORT int pthread_cond_signal(pthread_cond_t *c)
{
    config_ensure();
    if (!cfg.active || cond_pshared(c))
        return R.cond_signal(c);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0; /* nobody has ever waited here */
    struct ip_cond *n = (struct ip_cond *)p;
    if (atomic_load_explicit(&n->used_lc, memory_order_acquire))
        liblock_cond_signal(&n->lc);
    if (atomic_load_explicit(&n->used_rc, memory_order_acquire)) {
        R.mutex_lock(&n->im);
        R.cond_signal(&n->rc);
        R.mutex_unlock(&n->im);
    }
    return 0;
}

LL_EXPORT int pthread_cond_broadcast(pthread_cond_t *c)
{
    config_ensure();
    if (!cfg.active || cond_pshared(c))
        return R.cond_broadcast(c);
    uintptr_t p = atomic_load_explicit(cptr(c), memory_order_acquire);
    if (!p)
        return 0;
    struct ip_cond *n = (struct ip_cond *)p;
    if (atomic_load_explicit(&n->used_lc, memory_order_acquire))
        liblock_cond_broadcast(&n->lc);
    if (atomic_load_explicit(&n->used_rc, memory_order_acquire)) {
        R.mutex_lock(&n->im);
        R.cond_broadcast(&n->rc);
        R.mutex_unlock(&n->im);
    }
    return 0;
}

/* abstime on clock clk -> the same instant on CLOCK_REALTIME. */
static struct timespec to_realtime(clockid_t clk, const struct timespec *t)
{
    if (clk == CLOCK_REALTIME)
        return *t;
    struct timespec now_c, now_r;
    clock_gettime(clk, &now_c);
    clock_gettime(CLOCK_REALTIME, &now_r);
    int64_t d = ((int64_t)t->tv_sec - now_c.tv_sec) * 1000000000ll + (t->tv_nsec - now_c.tv_nsec);
    int64_t r = (int64_t)now_r.tv_sec * 1000000000ll + now_r.tv_nsec + d;
    if (r < 0)
        r = 0;
    struct timespec out = {(time_t)(r / 1000000000ll), (long)(r % 1000000000ll)};
    return out;
}

/* The wait itself.  has_clock: clockwait (clk given) vs timedwait (the
 * condvar's clock); abstime NULL: untimed. */
static int cond_wait_common(pthread_cond_t *c, pthread_mutex_t *m, int has_clock, clockid_t clk,
                            const struct timespec *abstime)
{
    if (has_clock && clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
        return EINVAL;
    int err;
    struct ip_cond *n = cond_resolve(c, &err);
    if (!n) {
        if (err)
            return err;
        if (mutex_resolve(m) != NULL)
            return EINVAL; /* glibc's condvar with one of our mutexes */
        if (!abstime)
            return R.cond_wait(c, m);
        if (has_clock && !R.cond_clockwait)
            return EINVAL;
        return has_clock ? R.cond_clockwait(c, m, clk, abstime) : R.cond_timedwait(c, m, abstime);
    }
    if (abstime && !ts_valid(abstime))
        return EINVAL;
    struct ip_mutex *w = mutex_resolve(m);
    if (!w) {
        /* glibc's mutex (robust, PI, ...): wait on the real condvar. */
        atomic_store_explicit(&n->used_rc, 1, memory_order_seq_cst);
        if (!abstime)
            return R.cond_wait(&n->rc, m);
        if (has_clock && clk != n->clock) {
            if (!R.cond_clockwait)
                return EINVAL;
            return R.cond_clockwait(&n->rc, m, clk, abstime);
        }
        return R.cond_timedwait(&n->rc, m, abstime); /* rc was made with the condvar's clock */
    }
    uintptr_t me = self_tag();
    if (w->type != PTHREAD_MUTEX_NORMAL && atomic_load_explicit(&w->owner, memory_order_relaxed) != me)
        return EPERM;
    unsigned count = w->count;
    clockid_t eff = has_clock ? clk : n->clock;
    int r;
    if ((LL_OPS(&w->lock)->props & LIBLOCK_PROP_COND) && !cfg.generic_cond) {
        atomic_store_explicit(&n->used_lc, 1, memory_order_seq_cst);
        /* liblock_cond_wait releases and retakes the lock through the API
         * hold stack: node algorithms lend it their node, direct-path
         * algorithms a fresh hold. */
        ll_thread_t *self = ip_get_self();
        if (!self)
            return ENOMEM;
        if (w->api) {
            /* the API layer's own hold is already on the stack */
        } else if (w->holds) {
            if (!w->hold)
                return EPERM; /* the mutex is not locked */
            if (adopt_hold(self, w))
                return ENOMEM;
        } else if (!ll_hold_push(self, &w->lock)) {
            return ENOMEM;
        }
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
        if (abstime) {
            struct timespec rt = to_realtime(eff, abstime);
            r = liblock_cond_timedwait(&n->lc, &w->lock, &rt);
        } else {
            r = liblock_cond_wait(&n->lc, &w->lock);
        }
        if (w->api) {
            /* retaken through the API: its hold is on the stack again */
        } else if (w->holds) {
            reclaim_hold(self, w);
        } else {
            ll_hold_t *h = ll_hold_find(self, &w->lock);
            if (h)
                ll_hold_pop(self, h);
        }
    } else {
        /* Fallback protocol (as src/core/cond.c) for algorithms without
         * LIBLOCK_PROP_COND: inner glibc mutex taken before our lock is
         * released, so a signaller (which takes the inner mutex) cannot
         * slip between our release and our sleep. */
        atomic_store_explicit(&n->used_rc, 1, memory_order_seq_cst);
        R.mutex_lock(&n->im);
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
        r = w_raw_unlock(w);
        if (r) {
            R.mutex_unlock(&n->im);
            atomic_store_explicit(&w->owner, me, memory_order_relaxed);
            return r;
        }
        if (!abstime)
            r = R.cond_wait(&n->rc, &n->im);
        else if (eff == n->clock || !R.cond_clockwait)
            r = R.cond_timedwait(&n->rc, &n->im, eff == n->clock ? abstime : &(struct timespec){0, 0});
        else
            r = R.cond_clockwait(&n->rc, &n->im, eff, abstime);
        R.mutex_unlock(&n->im);
        int r2;
        while ((r2 = w_raw_lock(w)) == ENOMEM)
            ll_yield();
        if (r2)
            r = r2;
        else if (r != ETIMEDOUT)
            r = 0;
    }
    atomic_store_explicit(&w->owner, me, memory_order_relaxed);
    w->count = count;
    return r;
}

/* Cancellation: a glibc wait inside the liblock condvar would, if the
 * thread were cancelled there, unwind holding the condvar's inner mutex and
 * without our lock.  So cancellation is disabled during the wait and acted
 * on right after it, with the mutex held again - the state POSIX specifies
 * for cleanup handlers - at the cost that a cancel request does not by
 * itself end the wait (a signal, broadcast or timeout must). */
static int cond_wait_cancel(pthread_cond_t *c, pthread_mutex_t *m, int has_clock, clockid_t clk,
                            const struct timespec *abstime)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    int r = cond_wait_common(c, m, has_clock, clk, abstime);
    pthread_setcancelstate(old, NULL);
    if (old == PTHREAD_CANCEL_ENABLE)
        pthread_testcancel();
    return r;
}

LL_EXPORT int pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) { return cond_wait_cancel(c, m, 0, 0, NULL); }

LL_EXPORT int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *abstime)
{
    return cond_wait_cancel(c, m, 0, 0, abstime);
}

LL_EXPORT int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t clk, const struct timespec *abstime)
{
    return cond_wait_cancel(c, m, 1, clk, abstime);
}

/* ---- C11 mtx_* and cnd_* ------------------------------------------------------
 * glibc implements mtx_lock and friends with internal calls to its own
 * pthread functions, so replacing pthread_mutex_* alone would leave every
 * C11 mutex on glibc's lock.  We replace the C11 calls too and route them to
 * the pthread entry points above: in glibc an mtx_t is a pthread_mutex_t
 * and a cnd_t a pthread_cond_t (same size and layout, checked below), so a
 * C11 mutex gets a wrapper exactly like a pthread one, and pass-through
 * mutexes still reach glibc through the same path.  Error codes map to the
 * thrd_* values as C11 (and glibc) define them. */
#include <threads.h>

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is not a pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is not a pthread_cond_t");

static int thrd_result(int e)
{
    switch (e) {
    case 0:
        return thrd_success;
    case EBUSY:
        return thrd_busy;
    case ETIMEDOUT:
        return thrd_timedout;
    case ENOMEM:
        return thrd_nomem;
    default:
        return thrd_error;
    }
}

LL_EXPORT int mtx_init(mtx_t *m, int type)
{
    int base = type & ~mtx_recursive;
    if (!m || (base != mtx_plain && base != mtx_timed))
        return thrd_error; /* as glibc: only plain or timed, optionally recursive */
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (type & mtx_recursive)
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    int e = pthread_mutex_init((pthread_mutex_t *)m, &a);
    pthread_mutexattr_destroy(&a);
    return thrd_result(e);
}

LL_EXPORT int mtx_lock(mtx_t *m) { return thrd_result(pthread_mutex_lock((pthread_mutex_t *)m)); }
LL_EXPORT int mtx_trylock(mtx_t *m) { return thrd_result(pthread_mutex_trylock((pthread_mutex_t *)m)); }
LL_EXPORT int mtx_unlock(mtx_t *m) { return thrd_result(pthread_mutex_unlock((pthread_mutex_t *)m)); }

LL_EXPORT int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict t)
{
    return thrd_result(pthread_mutex_timedlock((pthread_mutex_t *)m, t));
}

LL_EXPORT void mtx_destroy(mtx_t *m) { pthread_mutex_destroy((pthread_mutex_t *)m); }

LL_EXPORT int cnd_init(cnd_t *c) { return thrd_result(pthread_cond_init((pthread_cond_t *)c, NULL)); }
LL_EXPORT int cnd_signal(cnd_t *c) { return thrd_result(pthread_cond_signal((pthread_cond_t *)c)); }
LL_EXPORT int cnd_broadcast(cnd_t *c) { return thrd_result(pthread_cond_broadcast((pthread_cond_t *)c)); }
LL_EXPORT void cnd_destroy(cnd_t *c) { pthread_cond_destroy((pthread_cond_t *)c); }

LL_EXPORT int cnd_wait(cnd_t *c, mtx_t *m)
{
    return thrd_result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

LL_EXPORT int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict t)
{
    return thrd_result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, t));
}

/* ---- sem_* (only with LIBLOCK_SEM) ------------------------------------------------
 * A sem_t (32 bytes on x86-64) is smaller than a liblock_sem_t, so, as for
 * mutexes, the sem_t holds a pointer to a heap `struct ip_sem`.  glibc's
 * semaphore (struct new_sem: a 64-bit value/waiters word, `private`, `pad`)
 * uses only the first 16 bytes; we keep our marker in the last 16:
 *   word 2: IP_SEM_MAGIC      word 3: pointer to the struct ip_sem
 * and the ip_sem points back at the sem_t.  A sem_t is ours iff word 2 is
 * the magic and the ip_sem it points to names this sem_t as its home.
 * Everything else is glibc's and passed through untouched: semaphores from
 * sem_open (glibc zeroes their last 16 bytes), process-shared ones (we clear
 * the marker words before handing them to glibc's sem_init, since the memory
 * may hold a marker from an earlier semaphore), and every sem_t initialised
 * while LIBLOCK_SEM was not in effect.
 * Ordering: sem_init stores the pointer and then the magic with release;
 * a user loads the magic with acquire before the pointer.  (POSIX requires
 * that init happen before any use anyway, so this only makes the
 * recognition itself race-free.)  The semaphore operations themselves are
 * liblock_sem_* (src/core/cond_lifo.c: value + mostly-LIFO waiter list,
 * direct hand-off of a posted unit to the head waiter); waiting is that
 * file's spin-then-park, whatever LIBLOCK_WAIT says.
 * Signals: a thread blocked in an interposed sem_wait is not interrupted by
 * a signal handler; the handler runs and the wait continues (never EINTR).
 * Cancellation: sem_wait/timedwait/clockwait act on a pending cancellation
 * request on entry; a request made while the thread is blocked takes effect
 * at its next cancellation point after a unit (or the timeout) ends the
 * wait, because cancelling inside the wait could lose a handed-off unit. */
#define IP_SEM_MAGIC 0x4c4c53454d495053ull /* "LLSEMIPS" */
_Static_assert(sizeof(sem_t) >= 4 * sizeof(uint64_t), "sem_t holds our two marker words after glibc's 16 bytes");

struct ip_sem {
    liblock_sem_t s;
    sem_t *home;
    struct ip_sem *prev, *next;            /* registry (fork) */
};

static struct ip_sem *reg_sems;

static inline _Atomic uint64_t *sem_magic_word(sem_t *s) { return (_Atomic uint64_t *)(void *)((char *)s + 16); }
static inline _Atomic uintptr_t *sem_ptr_word(sem_t *s) { return (_Atomic uintptr_t *)(void *)((char *)s + 24); }

/* Ours: the wrapper; otherwise NULL (glibc's semaphore, or LIBLOCK_SEM unset). */
static inline struct ip_sem *sem_ours(sem_t *s)
{
    if (LL_UNLIKELY(!atomic_load_explicit(&cfg_ready, memory_order_acquire)))
        config_ensure();
    if (!cfg.sem || !s)
        return NULL;
    if (atomic_load_explicit(sem_magic_word(s), memory_order_acquire) != IP_SEM_MAGIC)
        return NULL;
    struct ip_sem *w = (struct ip_sem *)atomic_load_explicit(sem_ptr_word(s), memory_order_relaxed);
    return w && w->home == s ? w : NULL;
}

static void sem_clear_marker(sem_t *s)
{
    atomic_store_explicit(sem_magic_word(s), 0, memory_order_relaxed);
    atomic_store_explicit(sem_ptr_word(s), 0, memory_order_relaxed);
}

static int sem_fail(int e)
{
    errno = e;
    return -1;
}

LL_EXPORT int sem_init(sem_t *s, int pshared, unsigned value)
{
    ip_resolve();
    config_ensure();
    if (!cfg.sem || pshared) {
        if (cfg.sem)
            sem_clear_marker(s); /* a stale marker must not make glibc's semaphore look like ours */
        return R.sem_init(s, pshared, value);
    }
    if (value > (unsigned)SEM_VALUE_MAX)
        return sem_fail(EINVAL);
    struct ip_sem *w = sem_ours(s);
    if (w && liblock_sem_destroy(&w->s) == 0) {
        /* initialised again without sem_destroy (undefined in POSIX): reuse
         * the wrapper when nobody waits on it */
        liblock_sem_init(&w->s, value, cfg.sem_prob);
        return 0;
    }
    ip_in_setup++;
    w = ll_alloc_aligned(sizeof *w);
    ip_in_setup--;
    if (!w) {
        /* out of memory: this semaphore stays glibc's (it still works) */
        sem_clear_marker(s);
        return R.sem_init(s, pshared, value);
    }
    liblock_sem_init(&w->s, value, cfg.sem_prob); /* cannot fail: value and P checked */
    w->home = s;
    R.mutex_lock(&reg_mutex);
    w->prev = NULL;
    w->next = reg_sems;
    if (reg_sems)
        reg_sems->prev = w;
    reg_sems = w;
    R.mutex_unlock(&reg_mutex);
    memset(s, 0, 16); /* glibc's part: value 0, so a call that bypasses us cannot take a unit */
    atomic_store_explicit(sem_ptr_word(s), (uintptr_t)w, memory_order_relaxed);
    atomic_store_explicit(sem_magic_word(s), IP_SEM_MAGIC, memory_order_release);
    return 0;
}

LL_EXPORT int sem_destroy(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_destroy(s);
    int r = liblock_sem_destroy(&w->s);
    if (r)
        return sem_fail(r); /* EBUSY: threads wait on it; left intact */
    sem_clear_marker(s);
    R.mutex_lock(&reg_mutex);
    if (w->prev)
        w->prev->next = w->next;
    else
        reg_sems = w->next;
    if (w->next)
        w->next->prev = w->prev;
    R.mutex_unlock(&reg_mutex);
    free(w);
    return 0;
}

LL_EXPORT int sem_wait(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_wait(s);
    pthread_testcancel(); /* a cancellation point (see above) */
    int r = liblock_sem_wait(&w->s);
    return r ? sem_fail(r) : 0;
}

LL_EXPORT int sem_trywait(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_trywait(s);
    int r = liblock_sem_trywait(&w->s);
    return r ? sem_fail(r) : 0;
}

/* sem_timedwait / sem_clockwait on ours.  As in glibc, a bad timespec is
 * EINVAL even when a unit is available (POSIX allows either), and a unit
 * available now is taken whatever the deadline says. */
static int sem_timed(struct ip_sem *w, clockid_t clk, const struct timespec *abstime)
{
    pthread_testcancel();
    if (!abstime || !ts_valid(abstime))
        return sem_fail(EINVAL);
    if (liblock_sem_trywait(&w->s) == 0)
        return 0;
    struct timespec rt = to_realtime(clk, abstime);
    int r = liblock_sem_timedwait(&w->s, &rt);
    return r ? sem_fail(r) : 0;
}

LL_EXPORT int sem_timedwait(sem_t *s, const struct timespec *abstime)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_timedwait(s, abstime);
    return sem_timed(w, CLOCK_REALTIME, abstime);
}

LL_EXPORT int sem_clockwait(sem_t *s, clockid_t clk, const struct timespec *abstime)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_clockwait ? R.sem_clockwait(s, clk, abstime) : sem_fail(EINVAL);
    if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
        return sem_fail(EINVAL);
    return sem_timed(w, clk, abstime);
}

LL_EXPORT int sem_post(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_post(s);
    int r = liblock_sem_post(&w->s);
    return r ? sem_fail(r) : 0; /* EOVERFLOW at SEM_VALUE_MAX, value unchanged */
}

LL_EXPORT int sem_getvalue(sem_t *restrict s, int *restrict value)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_getvalue(s, value);
    int r = liblock_sem_getvalue(&w->s, value);
    return r ? sem_fail(r) : 0;
}

/* For tests: threads queued on one of our semaphores, -1 if not ours. */
LL_EXPORT int liblock_interpose_sem_queued(sem_t *s)
{
    struct ip_sem *w = sem_ours(s);
    return w ? ll_sem_debug_queued(&w->s) : -1;
}

/* ---- fork ------------------------------------------------------------------------------ */
/* Between this prepare handler and our parent/child handler, the prepare,
 * parent and child handlers of other components run with reg_mutex held by
 * this thread; one that locks a mutex not set up yet would wait for
 * reg_mutex forever (liblock.so's own RCL handlers, when a program linked
 * with -llock runs under the interposer: a transformed memcached's
 * daemon()).  Such a mutex becomes glibc's for life, like an allocator's met
 * during set-up (ip_in_setup); mutexes already set up are unaffected. */
static void fork_prepare(void)
{
    R.mutex_lock(&reg_mutex);
    ip_in_setup++;
}
static void fork_parent(void)
{
    ip_in_setup--;
    R.mutex_unlock(&reg_mutex);
}

static void fork_child(void)
{
    ip_in_setup--; /* (fork_prepare) */
    R.mutex_init(&reg_mutex, NULL);
    uintptr_t me = self_tag();
    for (struct ip_mutex *w = reg_mutexes; w; w = w->next) {
        int mine = atomic_load_explicit(&w->owner, memory_order_relaxed) == me;
        ll_thread_t *self = ll_self_tls;
        liblock_t fresh;
        if (liblock_init(&fresh, LL_OPS(&w->lock)->name, &cfg.attr) != 0)
            continue; /* out of memory: left as it was */
        if (w->api && self) {
            ll_hold_t *h = ll_hold_find(self, &w->lock); /* the hold of the old state */
            if (h)
                ll_hold_pop(self, h);
        }
        w->lock = fresh; /* the old state (and node) is leaked on purpose */
        w->hold = NULL;
        mutex_set_fns(w); /* rcl: the fresh lock is bound on first use */
        if (mine && w_raw_lock(w) == 0)
            continue; /* still held by this thread, same count */
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
        w->count = 0;
    }
    for (struct ip_cond *n = reg_conds; n; n = n->next) {
        liblock_cond_init(&n->lc, &cfg.cattr);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, n->clock);
        R.cond_init(&n->rc, &ca);
        pthread_condattr_destroy(&ca);
        R.mutex_init(&n->im, NULL);
    }
    /* semaphores keep their value; their waiters were other threads, and the
     * internal spin lock may have been held by one of them */
    for (struct ip_sem *w = reg_sems; w; w = w->next) {
        int v = 0;
        liblock_sem_getvalue(&w->s, &v);
        liblock_sem_init(&w->s, (unsigned)(v > 0 ? v : 0), cfg.sem_prob);
    }
}

__attribute__((constructor)) static void ip_ctor(void)
{
    ip_resolve();
    config_ensure();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}
