/*
 * identity.h - a delegated critical section runs with its caller's thread
 * identity (src/platform/identity.c has the switch itself).
 *
 * On x86-64 glibc the thread pointer (the FS base) is the thread's control
 * block: pthread_self() returns it, and errno, every __thread variable (the
 * program's, glibc's -- malloc's cache, stdio -- and liblock's own),
 * pthread_getspecific and the cancellation state are found from it.  A
 * requester records pthread_self() in its request (identity.c checks once
 * that it equals the FS base); a runner (an RCL servicing thread, the
 * mp-server, a combiner) that runs a request whose recorded identity is not
 * its own calls ll_ident_run, which sets the FS base to the caller's,
 * runs the section through a wrapper, and sets it back.
 *
 * Invariants and why they hold:
 *
 * (I1) Between the two switches the runner's own code touches no
 *      thread-local data.  The switch and the call are one assembly
 *      function (identity.c), so no compiler can keep a thread-local
 *      address (GCC treats the thread pointer as constant within a
 *      function; __errno_location is declared const) from before the switch
 *      to after it: code on either side of the call is in other functions,
 *      and the wrapper called in between is reached through a pointer from
 *      assembly, so it computes every thread-local address afresh, from
 *      the caller's FS base.
 * (I2) The caller does not touch its own thread-local data while its
 *      request is pending: between posting and its answer it only polls
 *      the answer word of its request and sleeps on it; its futex and
 *      membarrier calls do not even save and restore errno (platform.c,
 *      ll_syscall_raw: a restore would put back a stale value over the
 *      section's), and the waiting layer's only thread-local write on that
 *      path, the park count ll_parks_tls, is a relaxed atomic add (a
 *      section that parks in a nested lock adds to the same count).  So
 *      the section (and the wrapper's set-up, below) has the caller's
 *      thread-local data to itself, exactly as if it ran on the caller's
 *      thread.  A runner may itself be running as someone else (an RCL
 *      section that combines another lock): the switch saves the FS base
 *      it finds and puts that one back, so switches nest.
 * (I3) What a runner's code keeps per thread to run sections safely (the
 *      "lock being combined" pointer that makes a nested lock of the same
 *      lock return EDEADLK, the running_cs count that stops a thread
 *      running a delegated section from combining) is set up by the
 *      wrapper on the *caller's* thread-local copy, after the switch, and
 *      restored before it returns: inside, a nested liblock call finds the
 *      state it would find on a runner, in the caller's records, which (I2)
 *      nobody else touches meanwhile.  RCL's servicing-thread state is
 *      taken lazily, by the nested call that needs it (the runner's is
 *      reachable through ll_ident_tls, below; src/runtime/rcl/server.c,
 *      rcl_nested_enter), because the caller reads its own on every
 *      request and a store to it on every section would cost the caller a
 *      line transfer each time.  A lock
 *      the section takes and does not release is on the caller's hold
 *      stack: it is the caller's afterwards, as it would be had the caller
 *      run the section itself.
 * (I4) Memory ordering: the caller's writes to its thread-local data before
 *      it posts are ordered before the runner's reads by the request's
 *      release store and the runner's acquire load of it; the section's
 *      writes (errno included) are ordered before the caller's reads after
 *      the answer by the answer's release store (or the hand-over's) and
 *      the caller's acquire load.  No further fence is needed.
 * (I5) Cancellation: glibc keeps the cancellation state in the control
 *      block, so a cancellation point inside a switched section would act
 *      on the caller's pending cancellation and unwind the runner's stack.
 *      The wrapper disables cancellation around the section (a flag in the
 *      caller's block, no system call) and restores it; a cancellation
 *      request stays pending and acts at the caller's next cancellation
 *      point, after its section.
 *
 * Signals.  The kernel keeps the signal mask per kernel thread.  RCL's and
 * mp-server's threads block every signal (ll_internal_thread_create), so a
 * handler never runs there with a caller's identity.  A combiner is a
 * program thread: blocking and unblocking around each switched section
 * costs two system calls, several times the section itself, so it does
 * not; a signal the kernel delivers to the combiner while it runs a switched
 * section runs its handler with the caller's identity, which is what a
 * handler interrupting that section on the caller's thread would see
 * (process-directed signals could have gone to either thread; a signal
 * directed at the combiner itself -- pthread_kill, a thread timer -- is
 * handled as the caller: docs/internals.md).  On the waiting caller a
 * handler runs with the caller's identity, concurrently with the section:
 * liblock's state is safe by (I2) (liblock's calls are not async-signal-
 * safe, so a handler makes none), and a handler's own thread-local data
 * (volatile sig_atomic_t, lock-free atomics: all a handler may portably
 * touch) is read or written by whole words, as it would be between two
 * instructions of the section; a handler that saves and restores errno
 * races with a section that stores errno at the same time (docs).
 *
 * Off under ThreadSanitizer and AddressSanitizer (they keep per-thread
 * state in TLS of their own, which must follow the kernel thread), on
 * other architectures, with LIBLOCK_IDENTITY=0, and where the thread
 * pointer is not pthread_self().
 */
#ifndef LIBLOCK_IDENTITY_H
#define LIBLOCK_IDENTITY_H

#include "internal.h"

#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define LL_IDENT_BUILD 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define LL_IDENT_BUILD 0
#endif
#endif
#ifndef LL_IDENT_BUILD
#if defined(__x86_64__) && defined(__GLIBC__)
#define LL_IDENT_BUILD 1
#else
#define LL_IDENT_BUILD 0
#endif
#endif

enum { LL_IDENT_OFF = 0, LL_IDENT_FSGSBASE = 1, LL_IDENT_PRCTL = 2 };
/* How this process switches (identity.c): settled by a constructor before
 * main, never changed after; read without ordering. */
extern int ll_ident_how;
LL_EXPORT int ll_ident_mode(void);          /* LL_IDENT_* (tests) */
LL_EXPORT const char *ll_ident_name(void);  /* "wrfsbase", "arch_prctl", "off (cause)" */

/* The identity a requester records: its thread pointer, or 0 when switching
 * is off (then every runner runs sections as itself). */
static inline uintptr_t ll_ident_self(void)
{
#if LL_IDENT_BUILD
    return LL_LIKELY(ll_ident_how) ? (uintptr_t)pthread_self() : 0;
#else
    return 0;
#endif
}

/* The one line of a thread's thread-local data that a runner writes while
 * it runs that thread's section (a runtime's wrapper: set, then put back),
 * and that the thread itself never touches on a hot path: what the runner
 * is, for the few slow paths that must know they run on a runner under a
 * borrowed identity (RCL's nested requests, pthread_create).  A line of its
 * own, so that those stores cost the waiting owner nothing. */
struct ll_ident_tls {
    void *runner;  /* the runtime's state of the thread running the section (RCL: its rcl_tls) */
    int servicing; /* that thread is a library servicing thread (as ll_servicing_tls) */
    char pad[LL_CACHELINE - sizeof(void *) - sizeof(int)];
} __attribute__((aligned(LL_CACHELINE)));
extern __thread struct ll_ident_tls ll_ident_tls __attribute__((tls_model("initial-exec")));

/* Set the FS base to tp, return wrap(w), set it back (identity.c, assembly). */
void *ll_ident_call_fsgs(uintptr_t tp, void *(*wrap)(void *), void *w);
void *ll_ident_call_prctl(uintptr_t tp, void *(*wrap)(void *), void *w, uintptr_t self);

/* What a runtime's wrapper gets: the section, its argument and its lock.
 * `aux` is the runtime's own (RCL: the servicing thread's state). */
struct ll_ident_cs {
    void *(*cs)(void *);
    void *arg;
    const liblock_t *l;
    void *aux;
};

/* Run cs(arg) for the requester whose identity is tp, on a runner whose own
 * is self (its ll_ident_self(), read once before its pass): as itself when
 * they are equal or tp is 0, else through wrap (a runtime's function that
 * sets up (I3) on the caller's thread-local data, calls cs and undoes it). */
static inline void *ll_ident_run(uintptr_t tp, uintptr_t self, void *(*wrap)(void *), const liblock_t *l,
                                 void *(*cs)(void *), void *arg, void *aux)
{
#if LL_IDENT_BUILD
    if (LL_UNLIKELY(tp != self) && tp) {
        struct ll_ident_cs w = {cs, arg, l, aux};
        if (LL_LIKELY(ll_ident_how == LL_IDENT_FSGSBASE))
            return ll_ident_call_fsgs(tp, wrap, &w);
        return ll_ident_call_prctl(tp, wrap, &w, self);
    }
#else
    (void)tp, (void)self, (void)wrap, (void)l, (void)aux;
#endif
    return cs(arg);
}

/* The wrapper of the combining locks and mp-server: (I3) is their "lock
 * being combined/served" pointer (tls_lock) and running_cs, set by
 * ll_cs_enter on the caller's copies; cancellation off (I5).  Defined per algorithm file with its own
 * thread-local, as a function of its own (never inlined into the runner). */
#define LL_IDENT_SCOPE_WRAPPER(name, tls_lock)                                                                     \
    static __attribute__((noinline)) void *name(void *p)                                                                \
    {                                                                                                                   \
        const struct ll_ident_cs *w_ = p;                                                                               \
        int cancel_;                                                                                                    \
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_);                                                       \
        struct ll_cs_scope sc_ = ll_cs_enter(&(tls_lock), w_->l);                                                       \
        void *r_ = w_->cs(w_->arg);                                                                                     \
        ll_cs_leave(&(tls_lock), sc_);                                                                                  \
        pthread_setcancelstate(cancel_, NULL);                                                                          \
        return r_;                                                                                                      \
    }

#endif
