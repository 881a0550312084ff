/*
 * shim.h - the interception layer shared by the two preload libraries:
 * build/lib/liblock-interpose.so (run an unmodified program on liblock's
 * algorithms: src/interpose/) and build/lib/liblock-profile.so (measure
 * every lock of an unmodified program: src/profile/).  The files of src/shim
 * files are compiled twice: once as they are for the interposer, once with
 * -DLL_SHIM_PROFILE for the profiler, where the observer hooks of
 * observer.h are the profiler's (src/profile/hooks.h, force-included by the
 * Makefile; they are empty inline functions otherwise, so the interposer
 * pays nothing for them).  The shim includes nothing of the profiler's.
 *
 * Files: real.c (bootstrap: the real glibc functions), config.c (the
 * environment), site_config.c (the LIBLOCK_CONFIG file parser), site.c
 * (per-site identity of a lock), registry.c (wrapper list and address
 * table), wrapper.c (wrapper set-up and the acquire/release paths),
 * lazy.c (lazy engagement: a mutex's one-word lock until its first
 * contention, and the hand-over to its algorithm), mutex.c (pthread_mutex_* and liblock_execute_mutex), cond.c
 * (pthread_cond_*), c11.c (mtx_*, cnd_*), sem.c (sem_*), fork.c (fork
 * handlers and the constructor).
 *
 * Source: the deployment method of D. Dice, "Malthusian Locks", EuroSys 2017 (extended version, arXiv:1511.06035),
 * section 6: every lock of an unmodified program replaced through
 * LD_PRELOAD interposition of the pthread mutex API; and LiTL (H. Guiroux,
 * R. Lachaize and V. Quema, "Multicore Locks: the Case Is Not Closed Yet",
 * USENIX ATC 2016), which made it a library.
 * Written here from those descriptions; no code taken from either.
 *
 * What is replaced: pthread_mutex_{init,destroy,lock,trylock,timedlock,
 * clocklock,unlock} and pthread_cond_{init,destroy,wait,timedwait,clockwait,
 * signal,broadcast}, and the C11 mtx_* and cnd_* calls on top of them.  (clocklock/clockwait are replaced too because
 * libstdc++'s std::timed_mutex and std::condition_variable::wait_for call
 * them; leaving them to glibc would hand glibc a mutex it does not own.)
 * With LIBLOCK_SEM=fifo|mostly-lifo also sem_{init,destroy,wait,trywait,
 * timedwait,clockwait,post,getvalue} for private semaphores, on liblock's
 * semaphores (Malthusian Locks, section 6.11; see "sem_*" below).  Without it every
 * sem_* call goes to glibc untouched.
 *
 * ---- Where the state lives (the cheap path) --------------------------------
 * A pthread_mutex_t (40 bytes on x86-64) cannot hold an arbitrary algorithm's
 * state, and a static initializer is all zeros (except __kind for the _NP
 * recursive/errorcheck/adaptive initializers).  We keep a pointer to a heap
 * `struct ip_mutex` (the liblock_t plus owner bookkeeping) in the mutex's
 * __data.__list.__prev word, which glibc uses only for robust mutexes.  The
 * wrapper is cache-line aligned, and the low bits of the word carry its
 * fast path (IP_FAST_*, below).  The uncontended path of a NORMAL mutex
 * is: load __kind and that word (one line), pick the path from its tag,
 * call the algorithm's lock through a pointer cached in the wrapper (a
 * queue lock: with the node cached in the thread's shim_tls block), store
 * the owner.  No hash table, no global lookup and one thread-local variable
 * at most on that path (an address table is used only when a lock is set
 * up or destroyed; see "the registry" below).
 *
 *   pointer word  __kind pass bits   meaning
 *   any           set                glibc's mutex (robust/PI/PP/pshared)
 *   0             clear              not set up yet: set up lazily
 *   1 (IP_GLIBC)  clear              glibc's mutex (see bootstrap below)
 *   other         clear              ours: struct ip_mutex | IP_FAST_* tag
 *
 * Lazy set-up is race-free: every thread that finds 0 builds a wrapper and
 * CASes it in; the losers free theirs and use the winner's.  The CAS is
 * acq_rel and every reader loads the word with acquire, so a reader that
 * sees the pointer sees the initialised wrapper.
 *
 * ---- posix in place (IP_FAST_GLIBC, interposer only) ----------------------
 * A NORMAL (or ADAPTIVE) mutex whose algorithm is posix and which is not
 * tracked (no mixed configuration) is locked by glibc's own functions on
 * the program's pthread_mutex_t itself: pthread_mutex_lock loads the
 * pointer word (same line as glibc's lock word), compares its tag with
 * IP_FAST_GLIBC and tail-jumps into glibc's lock on m.  The wrapper still
 * exists (registry, fork, condition variables, destroy, per-site choice),
 * but its algorithm state is not used while the mutex is in place.  Like
 * every NORMAL mutex it is lazy first (lazy.c): until it engages, only the
 * lazy word (__list.__next) is used and glibc's words stay as init left
 * them; glibc's lock is its L, taken by the engager.
 * Who owns which of the 40 bytes:
 *  - glibc: __lock, __count, __owner, __nusers, __kind's use, __spins /
 *    __elision.  For the types that reach this path (kind NORMAL or
 *    ADAPTIVE, no robust/PI/PP/pshared bits) glibc's lock, trylock,
 *    timedlock, clocklock, unlock and destroy read and write only those;
 *    __list is written only on the robust paths (the robust list of the
 *    thread) and by pthread_mutex_init (which we do not call on an in-place
 *    mutex).  The same holds for RECURSIVE and ERRORCHECK (__count and
 *    __owner besides), which do not take this path;
 *    tests/test_posix_inplace.c checks it of the glibc the tests run on.
 *  - the shim: __list.__prev (the pointer word), and __kind only while no
 *    thread can use m: pthread_mutex_init (the memset, before publication)
 *    and set-up (the type bits posix's policy asks for, NORMAL or ADAPTIVE,
 *    as posix.c gives its own glibc mutex; written under reg_mutex before
 *    the word is published).
 * Why publishing the tag is enough: glibc touches m's lock words only after
 * a thread has loaded the tagged word, with acquire, which pairs with the
 * release store (or acq_rel CAS) that published it after __kind and the
 * memset were written; before that, every call takes the slow path, which
 * serialises set-up under reg_mutex and re-reads the word.  The word goes
 * back to 0 only at pthread_mutex_destroy, after glibc's destroy said no
 * thread holds m (POSIX forbids using it concurrently with destroy).  The
 * critical sections are ordered by glibc's lock (acquire) and unlock
 * (release) exactly as without the interposer.
 * What then is glibc's, not ours: who holds m (__owner: no owner word,
 * IP_OWNERLESS), destroy's EBUSY (glibc's user count), timedlock/clocklock
 * (glibc's, not the polling loop), and m in a forked child: fork leaves
 * glibc's words as they are, so m is exactly what glibc leaves ("fork"
 * below).
 * A condition variable waits with liblock's condition (LIBLOCK_COND
 * applies), releasing and retaking m through glibc (cond.c, a proxy lock
 * with cond_release/cond_reacquire hooks).  An in-place wrapper left behind
 * by a mutex freed without destroy is never faulted on through its old
 * address (fork does not touch m; reuse at that address does not try the
 * old state, which was m's bytes and now belong to the new mutex).
 * The profiler keeps the old posix path (glibc's lock on the glibc mutex in
 * the algorithm's state; IP_INPLACE is 0 there).
 *
 * ---- Invariants and memory ordering -------------------------------------------
 *  I1 The pointer word of a mutex changes only 0 -> W or 0 -> IP_GLIBC (CAS,
 *     acq_rel), W -> 0 (pthread_mutex_destroy, when POSIX allows no other
 *     use) or by pthread_mutex_init (release store).  Readers load it with
 *     acquire, so whoever sees W sees W fully built (algorithm state included).
 *  I2 w->owner equals thread T's tag (its thread pointer) only while T
 *     holds w, for RECURSIVE/ERRORCHECK: it is stored after the acquire and
 *     cleared before the release, and a thread compares it only with its own
 *     tag, which no other thread stores; so relaxed accesses suffice.  For
 *     NORMAL it is bookkeeping for fork and destroy only (cleared by
 *     whichever thread unlocks), and not kept at all for posix in place
 *     (IP_OWNERLESS, below).
 *  I3 w->count, w->hold and w->trk are written by the holder between its
 *     acquire and its release, and read by the thread that releases: the
 *     holder itself, or (NORMAL) another thread whose unlock the program
 *     orders after the lock by its own synchronisation, as it must for any
 *     data the mutex protects; the algorithm's acquire/release ordering
 *     orders them for the next holder.
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
 *  - NORMAL, DEFAULT, ADAPTIVE: the selected algorithm, whichever it is.
 *    Relocking a NORMAL mutex deadlocks as POSIX says (the thread waits in
 *    the algorithm's lock, so another thread's unlock lets it in);
 *    unlocking one that another thread locked releases it, as glibc does
 *    (POSIX leaves that undefined; programs use it as a binary semaphore),
 *    also after that thread exited.  So a NORMAL hold never lives in a
 *    per-thread structure: node algorithms (and delegating ones) keep the
 *    holder's node in the wrapper (w->hold), and every algorithm's unlock
 *    works from the node, not from the calling thread.
 *  - RECURSIVE and ERRORCHECK: implemented HERE on top of the selected
 *    algorithm (owner tag + count in the wrapper), with POSIX semantics:
 *    recursive relock counts (EAGAIN at overflow), errorcheck relock EDEADLK,
 *    unlock by a non-owner or of an unlocked mutex EPERM, trylock by the
 *    owner EBUSY (errorcheck) or a count (recursive).
 *  - ROBUST, PRIO_INHERIT, PRIO_PROTECT, PROCESS_SHARED: passed to glibc
 *    untouched (glibc's fields are never written by us; the kind bits
 *    route every call to glibc).  pshared state cannot contain a pointer
 *    into one process's heap, and robust/PI semantics are kernel-assisted.
 *    Every object left to glibc is counted by reason (to_glibc.c) and
 *    reported at exit (interposer) or in the profile (profiler).
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
 * liblock_condattr_setfifo(LIBLOCK_COND_FIFO_PROB) (Malthusian Locks, section 6.10:
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
 * registry mutex, parent releases it, child leaves every mutex as glibc
 * leaves it and rebuilds every condvar empty (its waiters were other
 * threads):
 *  - free at the fork: free;
 *  - held by the forking thread: still held, with the same recursion
 *    count.  A NORMAL one keeps its owner tag (the child thread's own) and
 *    can be unlocked by the child - the pthread_atfork "lock in prepare,
 *    unlock in child" pattern; a RECURSIVE or ERRORCHECK one gets the owner
 *    tag IP_OWNER_PARENT, as glibc's owner is the parent thread's id, which
 *    the child's thread does not have: trylock EBUSY, unlock EPERM, lock
 *    waits for ever;
 *  - held by another thread (which does not exist in the child): still
 *    held, with IP_OWNER_PARENT for every type, so that trylock is EBUSY,
 *    lock waits for ever and timedlock times out; the child can unlock a
 *    NORMAL one (glibc's NORMAL unlock does not look at the owner), an
 *    ERRORCHECK or RECURSIVE one answers EPERM.  The hold is not counted in
 *    any record of the child (w->trk 0).
 * "Held" is read from the owner word, stored after the acquire and cleared
 * before the release: a thread the fork stops inside a lock or unlock call,
 * between the two, counts as not holding, as on glibc for a fork slightly
 * before its acquire or after its release (the call had not returned, so
 * the program cannot tell).
 * An algorithm's lock is rebuilt in place, fresh, and then acquired by the
 * child's thread if it was held: for queue locks a waiter queued at fork
 * time is a thread that does not exist in the child, and handing the lock
 * to its node would hang the child.  Old algorithm states are leaked in the
 * child (other threads may have pointed into them).  (Out of memory for the
 * fresh state: the old one is kept; for the fresh lock's acquire: the lock
 * is left free.)  A posix in-place mutex is not touched at all: glibc's
 * words in the program's mutex are already what glibc leaves.  The
 * profiler's glibc mode leaves glibc's mutex alone too and only names
 * IP_OWNER_PARENT in the bookkeeping of another thread's hold.
 *
 * ---- Bootstrap --------------------------------------------------------------------------
 * The real functions are found with dlsym(RTLD_NEXT) on the first call
 * that needs one (R checks a flag), not in the constructor: a process that
 * never reaches glibc through us (most short ones: /bin/true, a shell's
 * children) pays no lookup at all.  One thread resolves, a racing one waits
 * for it; the configuration's own once-lock is not glibc's.  glibc's dlsym
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
 * The liblock objects linked into this .so (src/core, src/locks/classic/posix.c ...)
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
 * algorithms with per-hold nodes (node_size > 0) get a node cached in the
 * thread's shim_tls block, else from the thread's free list (wrapper.c,
 * "per-thread nodes"), the others a NULL node;
 * such an algorithm must not depend on the hold stack (none does).
 * Delegating algorithms (LIBLOCK_PROP_DELEGATES) take the node path too
 * (not the API layer's hold stack, which would tie a hold to its thread:
 * see "Mutex types"), and their holds are counted in the thread record for
 * ll_may_run_foreign (w_track_acquired).  An rcl lock starts no server when it is
 * made (the configuration probe included): it is bound to its server,
 * which is started then if needed, when its mutex first takes the
 * algorithm's path (at engagement, lazy.c: its first contention, condition
 * wait or delegated section; with LIBLOCK_LAZY=0 its first lock or
 * trylock), inside set-up (w_bind), so a process whose mutexes never
 * engage has no server thread.
 */
#ifndef LL_SHIM_H
#define LL_SHIM_H

#include "internal.h"
#include "site_config.h"

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

/* The name the shim's messages start with ("liblock-interpose" or
 * "liblock-profile"). */
#ifdef LL_SHIM_PROFILE
#define SHIM_NAME "liblock-profile"
#else
#define SHIM_NAME "liblock-interpose"
#endif

/* ---- real.c: the real functions ------------------------------------------ */
struct shim_real {
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
    int (*create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
};
extern struct shim_real shim_real;
extern _Atomic int shim_resolved;
void ip_resolve(void);
/* glibc's functions, found on the first call that needs one (Bootstrap) */
static inline struct shim_real *shim_real_ready(void)
{
    if (LL_UNLIKELY(!atomic_load_explicit(&shim_resolved, memory_order_acquire)))
        ip_resolve();
    return &shim_real;
}
#define R (*shim_real_ready())
/* glibc's functions on a path reached only through a mutex whose wrapper
 * is IP_FAST_GLIBC: that wrapper's set-up (wrapper.c) resolved them before
 * the wrapper was published, and a reader reaches it through the pointer
 * word loaded with acquire (or through the wrapper it already sees), so the
 * pointers are visible without testing shim_resolved again. */
#define R_INPLACE shim_real
extern __thread int ip_resolving __attribute__((tls_model("initial-exec")));
extern __thread int ip_in_setup __attribute__((tls_model("initial-exec")));
extern __thread int shim_c11_init __attribute__((tls_model("initial-exec"))); /* inside mtx_init */
/* The one thread-local block the lock/unlock fast paths read (initial-exec:
 * its address is %fs plus a constant, one load from the GOT, no
 * __tls_get_addr).  `node` is a spare per-hold node for queue locks (wrapper.c, "per-thread nodes"),
 * valid only while `rec` is set: the thread record whose exit hook gives
 * the node back to that record's free list. */
struct shim_tls {
    ll_hold_t *node;
    const void *node_ops; /* node->ops, kept here because the fast paths read this line anyway and
                             node->ops is on the record's third: set with node (a node cached at unlock
                             was taken for that mutex's algorithm, so its ops); a node is reused only
                             for its own algorithm (internal.h, "One algorithm per node") */
    ll_thread_t *rec;
    struct ll_exit_hook hook;
};
extern __thread struct shim_tls shim_tls __attribute__((tls_model("initial-exec")));
/* The thread's owner tag (I2): the thread pointer (%fs base on x86-64),
 * unique per live thread and one instruction to read. */
static inline uintptr_t self_tag(void) { return (uintptr_t)__builtin_thread_pointer(); }

/* ---- config.c: the configuration ---------------------------------------------- */
/* What one lock runs on: an algorithm with its attributes, or glibc's mutex
 * (ops == NULL).  One for the default, one per `site` line of LIBLOCK_CONFIG. */
struct shim_algo {
    const struct ll_ops *ops;      /* NULL: glibc's mutex */
    liblock_attr_t attr;
    int server_cpu;                /* rcl: server=CPU of the config line, else -1 */
    _Atomic int server_ready;      /* the server of server_cpu is started and set in attr */
};

struct shim_cfg {
    int active;                    /* some lock may run on a liblock algorithm */
    int wrap;                      /* mutexes get wrappers (active, or profiling) */
    int need_site;                 /* compute each lock's site at set-up (site rules, profiling) */
    struct shim_algo def;          /* the default; def.ops NULL: glibc */
    struct shim_algo *site_algo;   /* one per rule of file (same index) */
    struct shim_config file;       /* LIBLOCK_CONFIG, parsed */
    int mixed;                     /* combining/delegating and other algorithms coexist */
    int debug_sites;               /* LIBLOCK_DEBUG_SITES=1: print each lock's site and algorithm */
    liblock_condattr_t cattr;      /* the condition kind of LIBLOCK_COND (config.c, cond_config_load) */
    int generic_cond;              /* LIBLOCK_COND_GENERIC=1: own protocol for every algorithm */
    int force_api;                 /* LIBLOCK_INTERPOSE_API=1: API layer for every algorithm */
    int lazy;                      /* LIBLOCK_LAZY (default 1): lazy engagement (lazy.c) */
    int sem;                       /* LIBLOCK_SEM set: sem_init makes liblock semaphores */
    const char *sem_kind;          /* "fifo" / "mostly-lifo" */
    double sem_prob;               /* their FIFO probability */
};
#define cfg shim_cfg
extern struct shim_cfg shim_cfg;
extern _Atomic int shim_cfg_ready;
void config_ensure(void);
/* The algorithm for a lock of this site (NULL: glibc's mutex); started if
 * it needs an RCL server of its own. */
struct shim_site;
struct shim_algo *shim_algo_for(const struct shim_site *s);
int shim_algo_ready(struct shim_algo *a);
void shim_debug_site(const struct shim_site *s, const struct shim_algo *a);


/* ---- site.c: where a lock comes from ------------------------------------------- */
#define SHIM_SITE_FRAMES 8
struct shim_site {
    uint64_t id;                   /* stable across runs (see site.c) */
    int is_static;                 /* never initialised: identified at first use */
    int nframes;
    void *frames[SHIM_SITE_FRAMES]; /* return addresses, innermost first, shim frames skipped */
    const char *sym;               /* static: the mutex's symbol (malloc'd, kept), else NULL */
};
/* At pthread_mutex_init: the caller's backtrace. */
void shim_site_init(struct shim_site *s);
/* At first use of a mutex that was never initialised: its symbol if it has
 * one, else the backtrace of that first use. */
void shim_site_static(struct shim_site *s, const void *mutex);
/* file:line and function of a code address (a return address: the call
 * before it is looked up).  0 on success; file is a basename.  Cached. */
int shim_symbolise(const void *ret_addr, const char **file, int *line, const char **fn);
/* The symbol containing a data address; NULL if none. */
const char *shim_data_symbol(const void *addr);
/* "module+0xOFF" of an address into buf. */
void shim_module_offset(const void *addr, char *buf, size_t n);

/* ---- the wrappers ------------------------------------------------------------- */
struct lp_inst;
struct lp_cs;
/* One layout for both libraries.  Line 0 holds everything the
 * interposer's uncontended NORMAL path touches; line 1 what the other
 * paths of an algorithm's mutex use; line 2 what set-up and an observer
 * read (an observer's glibc-mode NORMAL mutexes normally go through its
 * own fast path, which touches no wrapper: observer.h). */
struct ip_mutex {
    /* line 0: everything the uncontended NORMAL path touches */
    liblock_t lock;
    int (*lockfn)(liblock_t *, void *);   /* IP_FAST_FN, _NODE, _TRACK: the algorithm's lock */
    int (*unlockfn)(liblock_t *, void *);
    _Atomic uintptr_t owner;              /* self_tag() of the holder, 0 when free */
    /* line 1 */
    int fast;                             /* IP_FAST_*: the fast path (also in the pointer word's tag) */
    ll_hold_t *hold;                      /* node algorithms: the holder's node */
    int (*trylockfn)(liblock_t *, void *);
    unsigned count;                       /* recursion depth while held */
    int type;                             /* PTHREAD_MUTEX_NORMAL/RECURSIVE/ERRORCHECK */
    int holds;                            /* algorithm needs per-hold nodes (node path) */
    int api;                              /* delegating algorithm: through the API layer */
    int track;                            /* count holds in the thread record (w_track_acquired) */
    _Atomic int bind;                     /* the algorithm's bind hook is still to run (w_bind) */
    int lazy;                             /* lazy engagement (lazy.c): the mutex's lazy word is in use */
    uint64_t trk;                         /* track: serial of the thread whose count has this hold */
    const void *addr;                     /* the pthread_mutex_t it was made for (reuse table) */
    /* line 2 */
    struct shim_algo *algo;               /* what it runs on (NULL: glibc's mutex, with an observer only) */
    struct lp_inst *prof;                 /* observer: its record; NULL: not recorded */
    int lp_hidx;                          /* observer: its lock site's index (the threads' records) */
    uint32_t lp_iid;                      /* observer: its instance's id (the threads' records) */
    struct ip_mutex *prev, *next;         /* registry (fork) */
};
_Static_assert(offsetof(struct ip_mutex, owner) + sizeof(uintptr_t) <= LL_CACHELINE, "hot fields in one line");
_Static_assert(offsetof(struct ip_mutex, trk) + sizeof(uint64_t) <= 2 * LL_CACHELINE, "tracked path in line 1");

/* The fast path of a mutex, chosen by mutex_set_fns for a NORMAL mutex:
 *  IP_FAST_FN     node-less algorithm, not tracked: lockfn/unlockfn;
 *  IP_FAST_NODE   queue lock, not tracked: lockfn/unlockfn with the
 *                 thread's cached node;
 *  IP_FAST_GLIBC  an algorithm with LL_OPS_GLIBC_STATE (posix), not
 *                 tracked: glibc's lock/unlock on the program's
 *                 pthread_mutex_t itself ("posix in place" above; in the
 *                 profiler: on the glibc mutex its state begins with);
 *  IP_FAST_TRACK  tracked (w->track: a delegating algorithm's, or a mixed
 *                 configuration's) with per-hold nodes: IP_FAST_NODE's path
 *                 plus what w_lock/w_unlock add for it (the rcl bind check,
 *                 owner and count, the hold counted in the thread record);
 *  IP_FAST_NONE   anything else: w_lock/w_unlock.
 * The value is also kept in the low bits of the mutex's pointer word (the
 * wrapper is cache-line aligned, so they are free), so that the entry
 * points choose the path from the one word they load anyway. */
enum { IP_FAST_NONE = 0, IP_FAST_FN, IP_FAST_GLIBC, IP_FAST_NODE, IP_FAST_TRACK, IP_FAST_LAZY = 6, IP_FAST_LAZYT = 7 };
/* IP_FAST_LAZY / IP_FAST_LAZYT (tag only, never in w->fast): a lazy mutex
 * not engaged yet (lazy.c), untracked / tracked (bit 0: the entry points
 * test both with one compare).  Like IP_FAST_GLIBC, no word glibc writes
 * there (8-aligned robust-list pointers) has these low bits. */
#define IP_TAG_MASK ((uintptr_t)(LL_CACHELINE - 1))
/* The owner tag, in a forked child, of a RECURSIVE/ERRORCHECK mutex the
 * forking thread held and of any mutex another thread held (fork.c): no
 * thread's tag (thread pointers are aligned), as glibc's owner there is a
 * thread id the child does not have. */
#define IP_OWNER_PARENT ((uintptr_t)1)
/* A mutex whose owner word the interposer does not keep (I2 does not
 * apply): posix in place, whose pthread_mutex_t records its holder itself
 * (glibc's __owner).  Its lock and unlock are tail calls into glibc on the
 * program's own mutex (IP_INPLACE: "posix in place" above).  The profiler
 * keeps the word (its hooks read it) and the posix state's glibc mutex. */
#ifndef LL_SHIM_PROFILE
#define IP_OWNERLESS(w) ((w)->fast == IP_FAST_GLIBC)
#define IP_INPLACE(w) ((w)->fast == IP_FAST_GLIBC)
#else
#define IP_OWNERLESS(w) 0
#define IP_INPLACE(w) 0
#endif
/* The pthread_mutex_t an in-place wrapper was made for (set before the
 * pointer word is published; a wrapper is only reused at that address). */
#define IP_INPLACE_MUTEX(w) ((pthread_mutex_t *)(uintptr_t)(w)->addr)
/* The glibc mutex of a lock whose algorithm has LL_OPS_GLIBC_STATE: the
 * first member of its state (the algorithm asserts it). */
#define IP_POSIX_MUTEX(w) ((pthread_mutex_t *)(w)->lock._state)

#ifdef LL_SHIM_PROFILE
#define SHIM_GLIBC(w) ((w)->algo == NULL)
#else
#define SHIM_GLIBC(w) 0
#endif

struct ip_cond {
    liblock_cond_t lc;
    pthread_cond_t rc;                    /* real glibc condvar (clock attribute applied) */
    pthread_mutex_t im;                   /* real glibc mutex guarding rc in the fallback */
    clockid_t clock;
    _Atomic int used_lc, used_rc;
    unsigned gen_waiters, gen_unblocked;  /* under im: the generic protocol's waiters, and those woken (cond.c) */
    struct ip_cond *prev, *next;
};
void cond_fork_child(void);

/* ---- registry.c ------------------------------------------------------------------ */
extern pthread_mutex_t shim_reg_mutex; /* real glibc mutex */
#define reg_mutex shim_reg_mutex
extern struct ip_mutex *shim_reg_mutexes;
extern struct ip_cond *shim_reg_conds;
extern _Atomic long shim_live_wrappers;
long tab_index(const void *a);
struct ip_mutex *tab_at(long i);
void tab_put(struct ip_mutex *w);
void tab_del_at(size_t i);
void list_add_locked(struct ip_mutex *w);
void list_del_locked(struct ip_mutex *w);
void reg_del_mutex(struct ip_mutex *w);
void reg_add_cond(struct ip_cond *c);
void reg_del_cond(struct ip_cond *c);

/* ---- wrapper.c ------------------------------------------------------------------- */
static inline _Atomic uintptr_t *mptr(pthread_mutex_t *m) { return (_Atomic uintptr_t *)(void *)&m->__data.__list.__prev; }
static inline int mkind(const pthread_mutex_t *m) { return *(const volatile int *)&m->__data.__kind; }
static inline struct ip_mutex *ip_untag(uintptr_t p) { return (struct ip_mutex *)(p & ~IP_TAG_MASK); }
/* The pointer word of a wrapper being installed (its lazy word is 0 then:
 * a lazy one starts not engaged, lazy.c). */
static inline uintptr_t ip_word(const struct ip_mutex *w)
{
    return (uintptr_t)w | (uintptr_t)(w->lazy ? (w->track ? IP_FAST_LAZYT : IP_FAST_LAZY) : w->fast);
}
static inline struct ip_mutex *mutex_fast(pthread_mutex_t *m)
{
    uintptr_t p = atomic_load_explicit(mptr(m), memory_order_acquire);
    if (LL_LIKELY(p > IP_GLIBC && !(mkind(m) & IP_KIND_PASS)))
        return ip_untag(p);
    return NULL;
}
int kind_to_type(int kind);
void mutex_set_fns(struct ip_mutex *w);
int mutex_lazy_kind(const struct ip_mutex *w);
struct ip_mutex *mutex_new(int type, struct shim_algo *a);
void mutex_free(struct ip_mutex *w);
struct ip_mutex *mutex_resolve(pthread_mutex_t *m);
struct ip_mutex *mutex_install(pthread_mutex_t *m, struct ip_mutex *fresh, int init, int type, struct shim_algo *a,
                               const struct shim_site *site);
int w_node_acquire(struct ip_mutex *w, int try);
int w_node_release(struct ip_mutex *w);
int adopt_hold(ll_thread_t *s, struct ip_mutex *w);
void reclaim_hold(ll_thread_t *s, struct ip_mutex *w);
void w_bind(struct ip_mutex *w);
int w_raw_lock(struct ip_mutex *w);
int w_raw_trylock(struct ip_mutex *w);
int w_raw_unlock(struct ip_mutex *w);
int w_owner_check(struct ip_mutex *w, int try);
int w_lock(struct ip_mutex *w);
int w_trylock(struct ip_mutex *w);
int w_unlock(struct ip_mutex *w);
int w_timedlock(struct ip_mutex *w, clockid_t clk, const struct timespec *abstime);
void shim_tls_attach(ll_thread_t *s);

/* ---- lazy.c: lazy engagement ------------------------------------------------------ */
/* The lazy word of a mutex (__data.__list.__next, which glibc uses only for
 * robust mutexes): 0 free, a thread's tag (self_tag) held by that thread,
 * IP_LAZY_ENGAGED once the algorithm has taken over (for good). */
#define IP_LAZY_ENGAGED ((uintptr_t)1)
static inline _Atomic uintptr_t *lzw(pthread_mutex_t *m) { return (_Atomic uintptr_t *)(void *)&m->__data.__list.__next; }
static inline _Atomic uintptr_t *w_lzw(const struct ip_mutex *w) { return lzw((pthread_mutex_t *)(uintptr_t)w->addr); }
static inline int w_engaged(const struct ip_mutex *w)
{
    return atomic_load_explicit(w_lzw(w), memory_order_acquire) == IP_LAZY_ENGAGED;
}
/* w->trk of a proxy hold (lazy.c): the hold is counted in the record of
 * the thread whose tag is w->owner (no serial is this value). */
#define IP_TRK_LAZY UINT64_MAX
#define IP_LAZY_OFF (-1) /* lazy_lock/lazy_unlock: engaged, take the algorithm's path */
int lazy_lock(struct ip_mutex *w);
int lazy_trylock(struct ip_mutex *w);
int lazy_unlock(struct ip_mutex *w);
int lazy_engage(struct ip_mutex *w, int held);
static inline ll_thread_t *ip_get_self(void) { return ll_self(); }

/* Holds of mutexes are invisible to ll_may_run_foreign (they bypass the
 * API's hold stack); where a combining lock may ask (a delegating
 * algorithm, or a mixed configuration) they are counted in the thread
 * record's `shim_held` so a combiner holding one runs no foreign critical
 * section (docs/interpose.md "Per-site configuration").  The wrapper
 * remembers whose count has the hold (w->trk, the thread's serial, written
 * by the holder like w->hold: I3).  A NORMAL mutex may be unlocked by
 * another thread (glibc allows it): that thread's count is not touched, and
 * the locker's keeps the hold, which only makes the locker decline to
 * combine for others from then on (never the opposite: no count is ever
 * lower than the mutexes its thread holds).  The release side reads trk
 * before the lock is released (after it, a new holder may write it). */
static inline void w_track_acquired(struct ip_mutex *w)
{
    if (LL_UNLIKELY(w->track)) {
        ll_thread_t *s = ip_get_self();
        if (s) {
            s->shim_held++;
            w->trk = s->serial;
        }
    }
}
static inline uint64_t w_track_releasing(const struct ip_mutex *w) { return w->track ? w->trk : 0; }
static inline void w_track_released(uint64_t trk)
{
    if (LL_UNLIKELY(trk)) {
        ll_thread_t *s = ll_self_tls;
        if (s && s->serial == trk && s->shim_held)
            s->shim_held--;
    }
}

/* ---- mutex.c, cond.c: the entry points under hidden names (for c11.c) ---- */
int shim_mutex_init(pthread_mutex_t *, const pthread_mutexattr_t *);
int shim_mutex_lock_at(pthread_mutex_t *m, void *ra);
int shim_mutex_trylock_at(pthread_mutex_t *m, void *ra);
int shim_mutex_timedlock_at(pthread_mutex_t *m, const struct timespec *abstime, void *ra);
int shim_mutex_unlock(pthread_mutex_t *);
int shim_mutex_destroy(pthread_mutex_t *);
int shim_cond_init(pthread_cond_t *, const pthread_condattr_t *);
int shim_cond_signal(pthread_cond_t *);
int shim_cond_broadcast(pthread_cond_t *);
int shim_cond_destroy(pthread_cond_t *);
int shim_cond_wait(pthread_cond_t *, pthread_mutex_t *);
int shim_cond_timedwait(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);

/* ---- small helpers shared by mutex.c, cond.c and sem.c ----------------------------- */
static inline int ts_valid(const struct timespec *t) { return t && t->tv_nsec >= 0 && t->tv_nsec < 1000000000L; }
struct timespec to_realtime(clockid_t clk, const struct timespec *t);

/* ---- to_glibc.c: objects left to glibc, counted ----------------------------------- */
enum shim_gkind { SG_MUTEX, SG_COND, SG_SEM, SG_NKINDS };
/* In order of precedence: an object is counted once, for the first that applies. */
enum shim_greason { SG_PSHARED, SG_ROBUST, SG_PI, SG_PP, SG_CONFIG, SG_SETUP, SG_NOMEM, SG_NREASONS };
extern const char *const shim_greason_key[SG_NREASONS]; /* JSON keys: "robust", ... */
extern const char *const shim_gkind_key[SG_NKINDS];      /* "mutexes", "conds", "sems" */
void shim_to_glibc(int kind, int reason);
void shim_to_glibc_counts(unsigned long out[SG_NKINDS][SG_NREASONS]);
size_t shim_to_glibc_summary(char *buf, size_t n);
void shim_to_glibc_fork_child(void);

/* ---- fork.c ------------------------------------------------------------------------ */
extern struct ip_sem *shim_reg_sems;
void sem_fork_child(void);

/* ---- the observer's hooks (observer.h) ------------------------------------------- */
#include "observer.h"

#endif
