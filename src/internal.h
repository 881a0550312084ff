/*
 * internal.h - what algorithm files, the RCL runtime and the interposer
 * share.  Not installed.
 *
 * Layers (docs/internals.md):
 *   platform  (src/platform/)  atomics, pause, cache line, topology, futex,
 *                              cycle clock, pinning.  The only place with
 *                              inline assembly and raw OS calls.
 *   waiting   (src/core/wait.c) an algorithm says WHERE a thread waits (a
 *                              32-bit word), the policy decides HOW.
 *   threads   (src/core/thread.c) per-thread records, created on first use,
 *                              released at thread exit; per-hold nodes.
 *   registry  (src/core/api.c + generated build/gen/registry.c) one ops table
 *                              per algorithm file src/locks/<name>.c.
 */
#ifndef LIBLOCK_INTERNAL_H
#define LIBLOCK_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include "liblock.h"

#define LL_CACHELINE 64          /* compile-time line size (x86-64); see ll_cacheline() */
#define LL_ALIGNED _Alignas(LL_CACHELINE)
/* x86's adjacent-line prefetcher moves lines in aligned pairs: a read of
 * one line of a pair may fetch the other too.  A line another CPU writes
 * on every operation is kept out of the pair of a line this CPU reads on
 * every operation, or each read steals the written line and the writer's
 * next store there waits for it (and, in store order, every store after
 * it: a reply, say). */
#define LL_PAIR (2 * LL_CACHELINE)
#define LL_PAIR_ALIGNED _Alignas(LL_PAIR)
#define LL_LIKELY(x) __builtin_expect(!!(x), 1)
#define LL_UNLIKELY(x) __builtin_expect(!!(x), 0)
/* The contended part of a lock or unlock, split off so that the uncontended
 * part compiles without saving registers or a stack frame (GCC does not
 * shrink-wrap a function whose slow path loops). */
#define LL_SLOW __attribute__((noinline, cold))

/* LL_KEEP_ERRNO; at the top of a scope restores errno when the scope is
 * left.  Lock, unlock and condition calls must leave the caller's errno as
 * it was, as glibc's do: programs read errno across them (CPython after
 * readdir(), across its GIL).  The hot paths (lock, unlock, trylock of
 * any mutex type) make no failing system call of their own (ll_futex_*
 * and the env readers keep errno themselves) and do not pay for this; the
 * cold ones (first use of a mutex, a thread or the topology, sleeps,
 * start-up, condition and timed calls, the replaced init/destroy) use it. */
static inline void ll_errno_restore_(const int *saved) { errno = *saved; }
#define LL_KEEP_ERRNO_CAT2(a, b) a##b
#define LL_KEEP_ERRNO_CAT(a, b) LL_KEEP_ERRNO_CAT2(a, b)
#define LL_KEEP_ERRNO                                                                                                   \
    int LL_KEEP_ERRNO_CAT(ll_saved_errno_, __LINE__) __attribute__((cleanup(ll_errno_restore_), unused)) = errno
/* LL_NO_CANCEL; at the top of a scope holds off thread cancellation until
 * the scope is left, restoring the caller's state (a pending request stays
 * pending: restoring is not a cancellation point).  For the cold work a
 * lock, unlock or post may do on first need (reading or writing the
 * calibration cache, loading the topology, measuring the spin budget,
 * printing a warning): their open/read/write/join are cancellation points,
 * and a lock call is not one under glibc, so a cancel must not act there. */
static inline void ll_cancel_restore_(const int *saved) { pthread_setcancelstate(*saved, NULL); }
static inline int ll_cancel_hold_(void)
{
    int old = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old;
}
#define LL_NO_CANCEL                                                                                                    \
    int LL_KEEP_ERRNO_CAT(ll_cancel_state_, __LINE__) __attribute__((cleanup(ll_cancel_restore_), unused)) =          \
        ll_cancel_hold_()
#define LL_EXPORT __attribute__((visibility("default")))

#define LL_LOCK_MAGIC 0x4c4c4f4bu   /* "LLOK" */
#define LL_ATTR_MAGIC 0x4c4c4154u
#define LL_COND_MAGIC 0x4c4c434eu
#define LL_CONDATTR_MAGIC 0x4c4c4341u

#define LL_POLICY_BIT(p) (1u << (p))

/* ======================================================================
 * platform (src/platform/platform.c)
 * ====================================================================== */
static inline void ll_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    atomic_signal_fence(memory_order_seq_cst);
#endif
}

static inline uint64_t ll_cycles(void)
{
#if defined(__x86_64__) || defined(__i386__)
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
#else
    extern uint64_t ll_now_ns(void);
    return ll_now_ns();
#endif
}

uint64_t ll_now_ns(void);                 /* CLOCK_MONOTONIC in ns */
double ll_cycles_per_ns(void);            /* TSC calibrated against clock_gettime, cached */
uint64_t ll_ns_to_cycles(uint64_t ns);
int ll_ncpus(void);                       /* online CPUs */
int ll_cacheline(void);                   /* coherence line size from sysfs/sysconf, 64 if unknown */
int ll_cpu_node(int cpu);                 /* NUMA node of a CPU (LIBLOCK_NUMA_MAP overrides), 0 if unknown */
int ll_cpu_package(int cpu);              /* physical package, 0 if unknown */
int ll_cpu_core(int cpu);                 /* core id, cpu if unknown */
const char *ll_topology_source(void);     /* "hwloc", "sysfs" or "none" */
/* The machine's figures measured before (src/platform/calibration.c): from
 * LIBLOCK_CALIBRATION, else this machine's cache file; 0 and *source set if
 * found (a 0 field: not known), -1 if not.  _store writes them to the cache
 * (a 0 field keeps the cache's), 0 or -1; both keep errno. */
struct ll_calibration {
    double cycles_per_ns;
    uint64_t spin_ns;
};
int ll_calibration_lookup(struct ll_calibration *out, const char **source);
int ll_calibration_store(const struct ll_calibration *c);
/* Around code of other libraries that the library runs on first need
 * (hwloc's topology, dlopen): defined by the preload libraries' shim
 * (src/shim/real.c), where the pthread mutexes such code takes must stay
 * glibc's as during any set-up (it may run with a library mutex held, and an
 * interposed mutex could come back into the library: an RCL server's start
 * asks for the topology); NULL (weak) elsewhere. */
void ll_foreign_enter(void) __attribute__((weak));
void ll_foreign_leave(void) __attribute__((weak));
int ll_current_cpu(void);                 /* sched_getcpu(), or -1 */
int ll_pin_self(int cpu);                 /* 0 or errno */
int ll_pin_thread(pthread_t t, int cpu);  /* 0 or errno */
void *ll_alloc_aligned(size_t size);      /* zeroed, cache-line aligned, NULL on ENOMEM */
void *ll_alloc_pair_aligned(size_t size); /* zeroed, aligned to a line pair (LL_PAIR), NULL on ENOMEM */
void *ll_alloc_on_node(size_t size, int node); /* like ll_alloc_aligned, on a NUMA node when possible */
void ll_free_on_node(void *p, size_t size);
int ll_futex_wait(_Atomic uint32_t *addr, uint32_t val, const struct timespec *rel); /* 0, EAGAIN, ETIMEDOUT, EINTR */
int ll_futex_wake(_Atomic uint32_t *addr, int n);
void ll_yield(void);
/* A system call that leaves errno alone (result or -errno): for what a
 * thread does while a section runs elsewhere with its identity. */
long ll_syscall_raw(long nr, long a, long b, long c, long d, long e, long f);
/* The asymmetric barrier (src/platform/membarrier.c): ll_heavy_barrier_ok()
 * registers the process (once) and says whether the heavy side exists here;
 * ll_heavy_barrier() makes every thread of the process pass a full barrier
 * (0, or an errno: the caller must then not rely on it). */
int ll_heavy_barrier_ok(void);
int ll_heavy_barrier(void);
/* Whether a thread is on a CPU now (src/platform/oncpu.c, docs/oncpu.md):
 * 1 running, 0 not running (preempted, blocked or exited), -1 not known
 * (no mechanism, or a thread the eBPF program has not seen switch yet).
 * tid is a thread id (gettid) in this process's pid namespace.  Resolved on
 * the first call: the eBPF map pinned by `liblock oncpu load` (one byte
 * load per call), else the thread's CPU-time clock (two system calls, for
 * threads of this process only), else none; LIBLOCK_ONCPU=ebpf|fallback|none
 * forces one. */
enum { LL_ONCPU_NONE = 1, LL_ONCPU_EBPF = 2, LL_ONCPU_FALLBACK = 3 };
int ll_oncpu(pid_t tid);
/* The same with why a thread is off: LL_ONCPU_B_* - 1, that is -1 not
 * known, 0 off (asleep, or off for a reason the mechanism cannot tell:
 * the fallback), 1 on, 2 preempted (switched out while runnable and not
 * run since: the eBPF mechanism only). */
int ll_oncpu_state(pid_t tid);
int ll_oncpu_kind(void);                 /* LL_ONCPU_* (resolves on first call) */
const char *ll_oncpu_mechanism(void);    /* "ebpf", "fallback" or "none" */
const char *ll_oncpu_reason(void);       /* one line: the mechanism and why */
/* What the loader (tools/liblock-oncpu.c) and the reader share: the pins,
 * and one byte per tid in an mmapable BPF array of 8-byte values (tid t is
 * byte t % 8 of value t / 8, byte t of the mapping): LL_ONCPU_B_* - 1 is
 * what ll_oncpu returns. */
#define LL_ONCPU_BPFFS "/sys/fs/bpf"
#define LL_ONCPU_DIR LL_ONCPU_BPFFS "/liblock"
#define LL_ONCPU_MAP_PIN LL_ONCPU_DIR "/oncpu_map"
#define LL_ONCPU_LINK_PIN LL_ONCPU_DIR "/oncpu_link"
#define LL_ONCPU_NAME "liblock_oncpu2"   /* the map's and the program's name (2: with PREEMPTED) */
/* OFF: switched out to sleep; PREEMPTED: switched out while runnable
 * (preempted, or yielded), not run since */
enum { LL_ONCPU_B_UNKNOWN = 0, LL_ONCPU_B_OFF = 1, LL_ONCPU_B_ON = 2, LL_ONCPU_B_PREEMPTED = 3 };
long ll_bpf(int cmd, void *attr, unsigned size); /* the bpf() system call: >= 0, or -errno */
/* The pinned map, checked (type, name, geometry), opened with flags
 * (BPF_F_RDONLY or 0): its fd and its size in bytes (*len), or -errno
 * (-ENOENT: not pinned, -EPERM: no privilege, -EINVAL: not ours). */
int ll_oncpu_map_open(unsigned flags, size_t *len);
/* Lock a process-private pthread mutex guarding a free list, with a bounded
 * number of attempts (trylock, yield; 1000 tries): a forked child may have
 * inherited it locked by a thread that does not exist there (the interposer
 * initialises locks in its fork handler), so it is never waited for
 * indefinitely.  1 = locked, 0 = given up (the caller does without). */
int ll_mutex_lock_bounded(pthread_mutex_t *m);
/* x86 user-mode waiting instructions (src/platform/uwait.c): detection by
 * CPUID, and one bounded wait for a word to change (UMONITOR/UMWAIT or
 * MONITORX/MWAITX).  ll_uwait_kind() is LL_UWAIT_NONE where neither exists;
 * callers then pause instead (nothing is emulated). */
enum { LL_UWAIT_NONE = 0, LL_UWAIT_WAITPKG = 1, LL_UWAIT_MONITORX = 2, LL_UWAIT_DISABLED = 3 };
int ll_cpu_has_waitpkg(void);             /* CPUID.(7,0):ECX[5] */
int ll_cpu_has_monitorx(void);            /* CPUID.0x80000001:ECX[29] */
unsigned ll_cpuid_ext_ecx(void);          /* CPUID.0x80000001:ECX; 0 where absent or not x86 (cpuid.c) */
unsigned ll_cpuid_7_ecx(void);            /* CPUID.(7,0):ECX; 0 where absent or not x86 (cpuid.c) */
int ll_uwait_kind(void);                  /* which one the library uses (LIBLOCK_UWAIT=0: DISABLED) */
const char *ll_uwait_name(void);          /* "umwait", "mwaitx", "not available", "off (...)" */
/* Return when (*w & ~LL_PARKED) != v, at the TSC deadline, or spuriously. */
void ll_uwait_change(_Atomic uint32_t *w, uint32_t v, uint64_t deadline_tsc);
/* Environment helpers for LIBLOCK_* variables. */
long ll_env_long(const char *name, long dflt, long min, long max);
double ll_env_double(const char *name, double dflt, double min, double max);
/* One-line warning to stderr, printed at most once per key. */
void ll_warn_once(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Read a small file (/proc, /sys) into buf with one read, NUL-terminated:
 * the length read, or -1 (buf then holds ""). */
long ll_read_file(const char *path, char *buf, size_t n);

/* ======================================================================
 * waiting policies (src/core/wait.c)
 *
 * Protocol for a waiting word w (a uint32_t the algorithm owns):
 *   - a waiter calls ll_wait_while(w, v, policy): it returns once
 *     (*w & ~LL_PARKED) != v, with acquire ordering, and returns that value;
 *   - the thread that ends the wait calls ll_wake(w, newval, policy), which
 *     stores newval with release ordering and wakes a parked waiter.
 * Bit 31 (LL_PARKED) is reserved for the policy: algorithm values must fit
 * in 31 bits.  Under spin-then-park the waiter, after spinning, CASes
 * v -> v|LL_PARKED and sleeps in futex_wait(w, v|LL_PARKED); the waker swaps
 * in newval (clearing the bit) and calls futex_wake only when the old value
 * had the bit.  No wake-up is lost: either the waiter's CAS fails because the
 * value already changed, or the kernel's futex_wait sees the swapped value
 * and returns, or the waiter is asleep and is woken.  Spurious wake-ups are
 * absorbed by the re-check loop.
 * ====================================================================== */
#define LL_PARKED 0x80000000u

uint32_t ll_wait_while(_Atomic uint32_t *w, uint32_t v, int policy);
/* How many times this thread has gone to sleep in the waiting layer (one
 * per futex_wait call it made there); a lock compares two readings to
 * learn whether a wait slept. */
extern __thread unsigned long ll_parks_tls __attribute__((tls_model("initial-exec")));
/* Cancellable sleeps (condition variables and semaphores, src/core/wait.c
 * "Cancellable sleeps"): while ll_cancel_tls points at a struct ll_cancel,
 * the waiting layer's futex sleeps on the first word and value it sleeps
 * on are POSIX cancellation points: a thread cancelled there runs fn(arg)
 * (with ll_cancel_tls cleared) and then unwinds.  The caller sets it around
 * one wait and clears it afterwards. */
struct ll_cancel {
    void (*fn)(void *);
    void *arg;
    _Atomic uint32_t *word; /* NULL until the first sleep latches it */
    uint32_t val;
};
extern __thread struct ll_cancel *ll_cancel_tls __attribute__((tls_model("initial-exec")));
/* The policy to wait with for a thread last seen on CPU their_cpu (a hint):
 * under spin-then-park, park at once when that thread is on the caller's
 * own CPU my_cpu -- it cannot run while the caller spins there
 * (src/locks/restricting/cr.h, "Same-CPU waiters"). */
static inline int ll_policy_behind(int policy, int their_cpu, int my_cpu)
{
    return policy == LIBLOCK_WAIT_SPIN_THEN_PARK && my_cpu >= 0 && their_cpu == my_cpu ? LIBLOCK_WAIT_PARK : policy;
}
/* Preemption-aware waiting (src/core/wait.c, "Preemption-aware waiting").
 * A lock initialised with LIBLOCK_WAIT_PREEMPT_AWARE stores
 * LIBLOCK_WAIT_SPIN_THEN_PARK | LL_WAIT_AWARE in _wait: to the algorithm
 * it is spin-then-park (every algorithm reads its policy with ll_policy,
 * never _wait itself), and where the algorithm knows whom a waiter waits
 * for it passes that thread's tid to the waiting layer through
 * ll_behind(l, &tid), which is NULL unless the flag is set.  A waiting
 * call given a tid spins while that thread is on a CPU (ll_oncpu) and
 * parks as soon as it is not; with no tid, or a tid whose state is not
 * known, it is spin-then-park. */
#define LL_WAIT_AWARE 0x100
static inline int ll_policy(const liblock_t *l)
{
    return l->_wait & 0xff;
}
static inline const _Atomic int32_t *ll_behind(const liblock_t *l, const _Atomic int32_t *tid)
{
    return LL_UNLIKELY(l->_wait & LL_WAIT_AWARE) ? tid : NULL;
}
static inline int ll_aware(const liblock_t *l)
{
    return LL_UNLIKELY((l->_wait & LL_WAIT_AWARE) != 0);
}
/* ll_wait_while and ll_wait_while_announced for a waiter that waits for
 * the thread whose tid *who holds (read at each check: it may change, as a
 * barging lock's holder does; 0 or less: not known).  who NULL: the plain
 * calls.  Only spin-then-park looks at who.  extend: that thread holds the
 * lock, so spinning past the budget while it runs is worth it (a waiter
 * behind another waiter passes false: that one running may only mean it
 * spins too, and only its preemption is acted on). */
uint32_t ll_wait_while_behind(_Atomic uint32_t *w, uint32_t v, int policy, const _Atomic int32_t *who, bool extend);
uint32_t ll_wait_while_announced_behind(_Atomic uint32_t *w, uint32_t v, int policy, _Atomic uint32_t *announce,
                                        const _Atomic int32_t *who, bool extend);
/* For an algorithm's own spin loop (ttas): called at its periodic check,
 * with sp zeroed but for .start (the cycle count its spin began at) and
 * .extend when the spin began and budget its spin budget, it says whether to park now
 * (1) or keep spinning (0), by the rule above.  who NULL: the budget
 * rule. */
struct ll_aware_spin {
    uint64_t start;    /* ll_cycles() when the spin began */
    uint8_t extended;  /* counted in ll_aware_tls.extended already */
    uint8_t extend;    /* may spin past the budget while the thread runs (ll_wait_while_behind) */
};
int ll_aware_should_park(const _Atomic int32_t *who, struct ll_aware_spin *sp, uint64_t budget);
/* This thread's counts of preemption-aware decisions (tests, lockbench):
 * parks because the thread waited for was off its CPU, parks because the
 * budget ran out (its state not known), parks because it ran past the
 * cap, and checks that kept a waiter spinning past its budget. */
struct ll_aware_counts {
    unsigned long park_off, park_budget, park_cap, extended;
};
extern __thread struct ll_aware_counts ll_aware_tls __attribute__((tls_model("initial-exec")));
/* Same, giving up at the absolute CLOCK_MONOTONIC deadline (ns): returns 0
 * with *out set to the new value, or ETIMEDOUT.  After ETIMEDOUT the word may
 * still carry LL_PARKED (clearing it could strand another parked waiter on
 * the same word); the next ll_wake clears it, and an algorithm that CASes
 * the word itself must accept v|LL_PARKED as "still v". */
int ll_wait_while_until(_Atomic uint32_t *w, uint32_t v, int policy, uint64_t deadline_ns, uint32_t *out);
void ll_wake(_Atomic uint32_t *w, uint32_t newval, int policy);
/* Fast hand-over (src/core/fastwake.c, which has the argument): a waiter
 * whose waker reads `announce` on its hand-over path waits with
 * ll_wait_while_announced (same contract as ll_wait_while; under
 * spin-then-park and park it sets *announce and runs an asymmetric fence
 * before it sleeps), and that waker may then hand over with
 * ll_wake_announced instead of ll_wake -- a plain store, no swap -- as long
 * as ll_fastwake_on() said so.  ll_fastwake_on settles the state on its
 * first call (a syscall or two): call it when a lock is initialised. */
uint32_t ll_wait_while_announced(_Atomic uint32_t *w, uint32_t v, int policy, _Atomic uint32_t *announce);
int ll_fastwake_on(void);
int ll_fastwake_announce(_Atomic uint32_t *announce);
static inline void ll_wake_announced(_Atomic uint32_t *w, uint32_t newval, const _Atomic uint32_t *announce)
{
    atomic_store_explicit(w, newval, memory_order_release);
    /* the load must follow the store in program order (fastwake.c) */
    atomic_signal_fence(memory_order_seq_cst);
    if (atomic_load_explicit(announce, memory_order_relaxed))
        ll_futex_wake(w, 1 << 30);
}
/* One step of a policy's waiting loop for conditions that are not a single
 * word (e.g. "ticket == now_serving"): spin policies pause, yield yields.
 * Spin-then-park is not meaningful here; callers that need it use a word. */
static inline void ll_wait_step(int policy)
{
    if (policy == LIBLOCK_WAIT_YIELD)
        ll_yield();
    else
        ll_pause();
}
/* Spin phase of spin-then-park: one futex round trip, measured once per
 * process at the first call (LIBLOCK_SPIN_NS overrides).  _ns also says
 * where the value came from ("measured", "LIBLOCK_SPIN_NS", "default ..."). */
uint64_t ll_spin_budget_cycles(void);
uint64_t ll_spin_budget_ns(const char **source);
/* Increment a parking counter word (low 31 bits), clear LL_PARKED and wake
 * all its sleepers if it was set.  seq_cst. */
void ll_bump_wake(_Atomic uint32_t *w);
/* Pure-spin loops call this every LL_SPIN_CHECK_MASK+1 iterations (start and
 * counted zeroed per wait): a wait of over 20 ms counts once, and the third
 * such wait in the process prints one warning (LIBLOCK_WARN=0: never). */
#define LL_SPIN_CHECK_MASK 0x3fffu
void ll_spin_note_slow(uint64_t *start, int *counted);

/* ======================================================================
 * per-thread state (src/core/thread.c)
 * ====================================================================== */
#define LL_NODE_BYTES 128  /* per-hold node area available to an algorithm */

/* One record per lock a thread holds or is acquiring.  Stable in memory
 * while in use (queue locks link other threads to it); recycled per thread,
 * and records of exited threads go to a process-wide pool; never freed.
 *
 * One algorithm per node.  A record's node area, once an algorithm has used
 * it, is reused only for that algorithm (`ops`, set at first use and never
 * changed; any lock of it).  An algorithm may touch a node after its owner
 * released it -- mcs and mcscr waiters announce their parking in the node
 * they are queued behind, and may do so after its owner has left; lifocr's
 * releaser reads its successor's announce word after the grant, when the
 * successor may have left -- and its own header argues that such a late
 * access is harmless to its own layout, reset before each use.  Another
 * algorithm's layout may keep anything at that place (loiter keeps a plain
 * field there).  Keyed by the algorithm, every late access lands in a node
 * of the algorithm that made it, and the per-algorithm arguments suffice.
 * Every path that hands out a record's node goes through ll_hold_take (or
 * ll_hold_push), and the interposer's per-thread cached node keeps its
 * algorithm beside it (src/shim/shim.h, shim_tls). */
typedef struct ll_hold {
    LL_ALIGNED unsigned char node[LL_NODE_BYTES]; /* algorithm's node, zeroed on first use only */
    liblock_t *lock;
    const struct ll_ops *ops; /* the algorithm this node area belongs to (NULL: unused yet) */
    struct ll_hold *next_free;
} ll_hold_t;

typedef struct ll_thread {
    unsigned id;                /* small id, reused after the thread exits */
    pid_t tid;
    ll_hold_t **held;           /* stack of holds, innermost last */
    unsigned nheld, capheld;
    ll_hold_t *free_holds;
    void *clh_spare;            /* CLH: the node this thread owns between acquisitions */
    struct ll_exit_hook *hooks; /* run at thread exit */
    uint64_t rng;               /* xorshift state, seeded per thread */
    unsigned running_cs;        /* delegated critical sections (own or other threads')
                                   this thread is running now through a combining path */
    unsigned shim_held;         /* interposer: mutexes this thread locked that bypass `held`
                                   and are counted (shim.h, w_track_acquired) */
    uint64_t serial;            /* unique for the process's life (never reused, unlike id, tid
                                   or the record's address): names this thread in a wrapper */
} ll_thread_t;

struct ll_exit_hook {
    void (*fn)(ll_thread_t *self, void *arg);
    void *arg;
    struct ll_exit_hook *next;
};

/* initial-exec: one %fs-relative load instead of a __tls_get_addr call in
 * the -fPIC library (a few bytes of static TLS, fine for LD_PRELOAD too). */
#define LL_TLS_IE __attribute__((tls_model("initial-exec"))) /* the same for the algorithms' own */
extern __thread ll_thread_t *ll_self_tls __attribute__((tls_model("initial-exec")));
/* Nonzero on a servicing thread of the library: one that a runtime runs to
 * execute other threads' critical sections on a server CPU (an RCL server's
 * servicing, management and backup threads), set by the runtime first thing
 * in that thread and never cleared.  Read by the interposer's
 * pthread_create (src/interpose/thread_create.c): a thread created there
 * is the program's and must not inherit the server's scheduling.  The
 * thread's own variable: no ordering. */
extern __thread int ll_servicing_tls __attribute__((tls_model("initial-exec")));
ll_thread_t *ll_self_slow(void);          /* creates the record; NULL on ENOMEM */
/* preempt-aware (internal.h, "Preemption-aware waiting"): store the calling
 * thread's tid where waiters read whom they wait for; relaxed: the value
 * is a hint read at a waiter's periodic check, published with the node or
 * lock word by the algorithm's own release (the API layer sets
 * ll_self_tls before ->lock; 0, "not known", without a record). */
static inline void ll_note_self_tid(_Atomic int32_t *where)
{
    ll_thread_t *t = ll_self_tls;
    atomic_store_explicit(where, t ? t->tid : 0, memory_order_relaxed);
}
static inline ll_thread_t *ll_self(void)
{
    ll_thread_t *t = ll_self_tls;
    return LL_LIKELY(t != NULL) ? t : ll_self_slow();
}
/* Register fn(self,arg) to run when the calling thread exits (hook memory is
 * owned by the caller and must stay valid).  Hooks run newest first. */
void ll_thread_on_exit(ll_thread_t *self, struct ll_exit_hook *hook);
/* pthread_create for the library's own threads (servers): counted once
 * running, so that the process still ends when its last application thread
 * does, and never earlier (thread.c). */
int ll_internal_thread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
/* The interposer's count of application threads (thread.c, "the end of the
 * process"): _created before glibc's pthread_create (_create_failed if it
 * failed), _begin first thing in the new thread, _main_begin in main. */
void ll_app_thread_created(void);
void ll_app_thread_create_failed(void);
void ll_app_thread_begin(void);
void ll_app_main_begin(void);
unsigned ll_thread_max_id(void);          /* 1 + highest id in use (scan bound) */
LL_EXPORT long liblock_debug_live_threads(void); /* for leak tests */

/* docs/api.md, "Delegated critical sections": may this thread run other threads' critical
 * sections (act as a combiner) right now?  Only where running one there
 * cannot be told apart from running it on its owner's thread: the thread
 * holds no liblock lock (under the interposer with a delegating algorithm,
 * whose mutexes go through the API layer, that includes every pthread
 * mutex) and is not already running a delegated critical section.  A
 * thread that may not hands the combiner role on instead.  Unlock paths
 * never run other threads' critical sections at all (a hand-over-hand
 * caller may hold a native pthread mutex liblock cannot see); see
 * docs/combining.md.  self may be NULL (no record: ENOMEM). */
/* Interposer: mutexes the calling thread holds lazily (not engaged yet:
 * src/shim/lazy.c) that are counted; a thread-local of its own rather than
 * a record field, so that a lazy lock and unlock touch no record. */
extern __thread unsigned ll_lazy_held __attribute__((tls_model("initial-exec")));
static inline int ll_may_run_foreign(const ll_thread_t *self)
{
    return self != NULL && self->nheld == 0 && self->running_cs == 0 && self->shim_held == 0 && ll_lazy_held == 0;
}

/* Bracket the code that runs delegated critical sections of lock l on the
 * calling thread (its own or other threads'): the algorithm's thread-local
 * "lock being combined" pointer (*tls_lock) is set to l, so that a nested
 * lock/execute of l from inside returns EDEADLK, and running_cs counts the
 * thread as inside a delegated section (ll_may_run_foreign).  Both are the
 * calling thread's own state: no atomics, no ordering.  Scopes nest. */
struct ll_cs_scope {
    const liblock_t *saved;
    ll_thread_t *self;
};
static inline struct ll_cs_scope ll_cs_enter(const liblock_t **tls_lock, const liblock_t *l)
{
    struct ll_cs_scope sc = {*tls_lock, ll_self_tls};
    *tls_lock = l;
    if (sc.self)
        sc.self->running_cs++;
    return sc;
}
static inline void ll_cs_leave(const liblock_t **tls_lock, struct ll_cs_scope sc)
{
    if (sc.self)
        sc.self->running_cs--;
    *tls_lock = sc.saved;
}

/* The hold stack is on every lock/unlock path, so its common case is inline:
 * find scans from the top (the lock released is usually the last taken),
 * push pops the per-thread free list, pop of the top entry is a decrement. */
ll_hold_t *ll_hold_push_slow(ll_thread_t *self, liblock_t *lock); /* NULL on ENOMEM */
/* A free record for algorithm `ops` ("One algorithm per node" above): from
 * the thread's free list, else the pool, else new; tagged with ops; NULL on
 * ENOMEM.  The caller sets its lock and puts it back on free_holds. */
ll_hold_t *ll_hold_take(ll_thread_t *self, const struct ll_ops *ops);
void ll_hold_remove_at(ll_thread_t *self, unsigned idx);          /* any position */

static inline int ll_hold_index(const ll_thread_t *self, const liblock_t *lock)
{
    for (unsigned i = self->nheld; i-- > 0;)
        if (self->held[i]->lock == lock)
            return (int)i;
    return -1;
}

static inline ll_hold_t *ll_hold_find(ll_thread_t *self, const liblock_t *lock)
{
    int i = ll_hold_index(self, lock);
    return i < 0 ? NULL : self->held[i];
}

static inline ll_hold_t *ll_hold_push(ll_thread_t *self, liblock_t *lock)
{
    ll_hold_t *h = self->free_holds;
    if (LL_LIKELY(h != NULL && h->ops == (const struct ll_ops *)lock->_ops && self->nheld < self->capheld)) {
        self->free_holds = h->next_free;
        h->lock = lock;
        self->held[self->nheld++] = h;
        return h;
    }
    return ll_hold_push_slow(self, lock);
}

static inline void ll_hold_pop_at(ll_thread_t *self, unsigned idx)
{
    if (LL_LIKELY(idx + 1 == self->nheld)) {
        ll_hold_t *h = self->held[idx];
        self->nheld = idx;
        h->lock = NULL;
        h->next_free = self->free_holds;
        self->free_holds = h;
        return;
    }
    ll_hold_remove_at(self, idx);
}

/* Removes h wherever it is in the stack. */
static inline void ll_hold_pop(ll_thread_t *self, ll_hold_t *h)
{
    for (unsigned i = self->nheld; i-- > 0;)
        if (self->held[i] == h) {
            ll_hold_pop_at(self, i);
            return;
        }
}

static inline uint64_t ll_rand(ll_thread_t *self)
{
    uint64_t x = self->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    self->rng = x;
    return x;
}

/* ======================================================================
 * algorithm ops (one table per file in src/locks/)
 *
 * A file src/locks/FAMILY/foo-bar.c defines `const struct ll_ops ll_ops_foo_bar`
 * (dashes become underscores); the build generates the registry from the
 * file names, so adding an algorithm is adding one file.
 *
 * The API layer (src/core/api.c) validates arguments, allocates the state
 * (state_size bytes, cache-line aligned, zeroed), keeps the per-thread hold
 * stack (EDEADLK / EPERM detection) and hands the algorithm a node of
 * LL_NODE_BYTES that stays put from lock() to unlock().
 * ====================================================================== */
struct ll_stats;
struct ll_ops {
    const char *name;
    const char *description;
    const char *source;
    unsigned props;            /* LIBLOCK_PROP_* */
    unsigned policies;         /* LL_POLICY_BIT(LIBLOCK_WAIT_*) mask */
    int default_policy;
    /* What the default policy does when threads outnumber CPUs (one
     * sentence, for `liblock list` and docs/api.md); NULL: not stated. */
    const char *oversubscribed;
    size_t state_size;         /* bytes of lock state */
    size_t node_size;          /* bytes of per-hold node used (<= LL_NODE_BYTES) */

    int (*init)(liblock_t *l, const liblock_attr_t *attr); /* state already zeroed */
    int (*destroy)(liblock_t *l);                  /* EBUSY if held/waited; must not free l->_state */
    int (*lock)(liblock_t *l, void *node);
    int (*trylock)(liblock_t *l, void *node);      /* 0 or EBUSY */
    int (*unlock)(liblock_t *l, void *node);
    /* Optional: NULL means lock/cs/unlock through the API layer. */
    void *(*execute)(liblock_t *l, void *(*cs)(void *), void *arg);
    /* Optional hooks for condition variables: release the lock around the
     * wait and take it back.  NULL means the API's unlock/lock. */
    int (*cond_release)(liblock_t *l);
    int (*cond_reacquire)(liblock_t *l);
    /* Optional condition-variable requeue (src/core/cond.c): a signal puts
     * the waiter's queue node on the lock's queue instead of waking it, so a
     * waiter sleeps until the lock is handed to it (one wake-up, not two).
     *  requeue_prepare(l, node): the waiter, before it is queued on the
     *    condition: make node "waiting, not queued"; 0, or ENOTSUP when the
     *    lock's policy does not park (the condition then wakes as usual).
     *  requeue(l, node): a signaller, on behalf of the sleeping waiter:
     *    enqueue node as the waiter's lock() would, without waiting.
     *  requeue_wait(l, node, deadline_ns): the waiter: wait until the lock
     *    is granted to node (0); with a CLOCK_MONOTONIC deadline (0 = none),
     *    may return ETIMEDOUT while node has not been requeued yet.
     * All three or none.  Not used with cond_release/cond_reacquire. */
    int (*requeue_prepare)(liblock_t *l, void *node);
    void (*requeue)(liblock_t *l, void *node);
    int (*requeue_wait)(liblock_t *l, void *node, uint64_t deadline_ns);
    /* Optional: per-thread set-up (liblock_thread_register). */
    int (*thread_register)(liblock_t *l);
    /* Optional: the lock's statistics and test probes as named counters
     * (ll_stats_put), reached through ll_lock_stats.  Reads the lock's
     * counters without synchronisation (relaxed loads): exact once the
     * lock is quiescent; a probe documented "read by the holder" is
     * meaningful only when the caller holds the lock. */
    void (*stats)(const liblock_t *l, struct ll_stats *out);
    /* Optional: attach the lock to a resource it starts on first need (an
     * RCL server), called by the interposer inside its set-up when a
     * mutex first takes the algorithm's path (its engagement:
     * src/shim/lazy.c), so that a process that never contends starts
     * nothing and what the start meets stays glibc's.  Idempotent. */
    void (*bind)(liblock_t *l);
    /* Optional: make locks initialised from now on take their "direct"
     * mode, where the algorithm has one (lock/unlock without a request to
     * a server: docs/rcl.md); called once by the interposer's
     * configuration, before its first lock is made. */
    void (*direct_default)(void);
    /* LL_OPS_*: what the interposer may assume of the algorithm. */
    unsigned flags;
};
/* The lock's state begins with a glibc pthread_mutex_t whose glibc lock and
 * unlock are the algorithm's lock and unlock (the interposer's
 * IP_FAST_GLIBC path calls glibc on it directly). */
#define LL_OPS_GLIBC_STATE 1u

/* A lock's statistics (struct ll_ops .stats): up to LL_STATS_MAX named
 * counters, names static strings, each documented where the algorithm
 * fills it (docs/internals.md, "Statistics").  For tests, benchmarks and
 * the fairness instrumentation. */
#define LL_STATS_MAX 24
struct ll_stat {
    const char *name;
    int64_t value;
};
struct ll_stats {
    unsigned n;
    struct ll_stat v[LL_STATS_MAX];
};
static inline void ll_stats_put(struct ll_stats *s, const char *name, int64_t value)
{
    if (s->n < LL_STATS_MAX)
        s->v[s->n++] = (struct ll_stat){name, value};
}
/* Fill *out from the lock's algorithm: 0; EINVAL if l is not an
 * initialised lock or out is NULL; ENOTSUP if its algorithm keeps none. */
LL_EXPORT int ll_lock_stats(const liblock_t *l, struct ll_stats *out);
/* The counter called name: 0 with *value set, or ENOENT. */
LL_EXPORT int ll_stats_get(const struct ll_stats *s, const char *name, int64_t *value);
/* The counter called name, or dflt when the record has none. */
static inline int64_t ll_stat(const struct ll_stats *s, const char *name, int64_t dflt)
{
    int64_t v;
    return ll_stats_get(s, name, &v) == 0 ? v : dflt;
}

#define LL_STATE(l, type) ((type *)(l)->_state)
#define LL_OPS(l) ((const struct ll_ops *)(l)->_ops)

const struct ll_ops *ll_find_ops(const char *name);
extern const struct ll_ops *const ll_registry[]; /* generated, NULL-terminated */

/* The API-level lock/unlock (hold stack + ops), for code inside the library
 * that needs to take a liblock (conditions, interposer). */
int ll_api_lock(liblock_t *l);
int ll_api_unlock(liblock_t *l);

/* For the delegating algorithms, whose thread-local "lock whose critical
 * sections this thread runs now" (`running`) is kept by ll_cs_enter.
 * ll_cs_held_by_caller: the caller runs a delegated section of l or holds l
 * through lock(), so a nested execute() of l would wait for itself
 * (EDEADLK).  ll_cs_cond_release: condition variables are for lock()
 * holders only; a delegated section may be running on another thread (a
 * combiner, a server), which must not sleep, so cond_wait there is EPERM.
 * Both read only the calling thread's own state: no atomics. */
static inline int ll_cs_held_by_caller(const liblock_t *running, const liblock_t *l)
{
    if (running == l)
        return 1;
    ll_thread_t *self = ll_self_tls;
    return self && self->nheld && ll_hold_find(self, l);
}

static inline int ll_cs_cond_release(const liblock_t *running, liblock_t *l)
{
    if (running == l)
        return EPERM;
    ll_thread_t *self = ll_self_tls;
    if (!self || !ll_hold_find(self, l))
        return EPERM;
    return ll_api_unlock(l);
}

#endif /* LIBLOCK_INTERNAL_H */
