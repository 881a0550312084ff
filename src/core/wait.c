/*
 * wait.c - waiting policies as a layer (docs/internals.md).
 *
 * An algorithm names the 32-bit word a thread waits on and the value that
 * means "keep waiting"; the policy decides how to wait:
 *   spin            pause loop;
 *   yield           sched_yield() between checks;
 *   spin-then-park  pause loop for about one cross-CPU wake-up
 *                   (measured once per machine, see ll_spin_budget_cycles;
 *                   LIBLOCK_SPIN_NS overrides), then sleep in the kernel on
 *                   the word;
 *   park            sleep at once.
 *
 * Park protocol (see internal.h for the full argument): the waiter announces
 * itself by CAS v -> v|LL_PARKED and then futex-waits on v|LL_PARKED; the
 * waker swaps the new value in and calls futex_wake only if the old value
 * carried LL_PARKED.  The swap is a full RMW so the waker reads the bit it
 * replaces: a waiter that set the bit before the swap is seen and woken, a
 * waiter that tries after it fails its CAS (the value is no longer v).  The
 * kernel re-checks the word under its hash-bucket lock before sleeping, so
 * a swap between the CAS and the sleep makes futex_wait return EAGAIN.
 *
 * The waker may reach futex_wake after the waiter has already returned and
 * reused the word's memory (a queue node recycled at once): that is a
 * spurious wake-up for whoever waits there now, which every waiter
 * tolerates, and FUTEX_WAKE on unmapped memory fails with EFAULT and no
 * effect.
 *
 * Orderings: the waiter's final load is acquire and the waker's store (or
 * swap) is release, so everything the waker wrote before waking (typically:
 * the critical section's effects) is visible to the waiter when it returns.
 *
 * Preemption-aware waiting (LIBLOCK_WAIT_PREEMPT_AWARE), after the rule of
 * V. Laforet, S. Kashyap, C. Iorgulescu, J. Lawall and J.-P. Lozi,
 * "FlexGuard: Fast Mutual Exclusion Independent of Subscription",
 * SOSP 2025: busy-wait while the thread waited for is on a CPU, block as
 * soon as it is preempted.  To the algorithm it is spin-then-park:
 * the same word, the same park protocol, the same wakers (internal.h).
 * Only the end of the spin phase differs, when the algorithm names the
 * thread the waiter waits for (the holder, or for a queue lock the
 * predecessor, who hands over next): at each periodic check the waiter
 * asks ll_oncpu_state (src/platform/oncpu.c) about that thread and
 *   - parks at once when it was preempted (switched out while runnable,
 *     and not run since): the hand-over cannot come before the scheduler
 *     gives it a CPU again, typically a time slice away, so spinning only
 *     takes a CPU from it or from another runnable thread;
 *   - keeps spinning past the budget while it runs, when it holds the
 *     lock (the algorithm says so: `extend`), since a hand-over from a
 *     running holder is the cheapest there is (no wake-up), up to a cap
 *     (LIBLOCK_AWARE_MAX_NS, default 1 ms: a holder running a long
 *     critical section should not keep a CPU spinning for it forever).
 *     Behind a waiter it does not: that waiter running may only mean it
 *     spins too, and waiters that spin on while others spin keep the
 *     CPUs from the holder under oversubscription;
 *   - falls back to the budget rule otherwise: when the thread is off its
 *     CPU asleep -- a waiter parked behind its own predecessor, or a
 *     thread just woken and on its way to a CPU, whose hand-over comes
 *     after a wake-up, the very delay the budget is measured on (parking
 *     at once there turns every hand-over after one sleep into another
 *     sleep: a convoy) -- and when ll_oncpu_state does not know (no
 *     mechanism, the fallback, which cannot tell preempted from asleep,
 *     a tid not known yet).  So the policy is spin-then-park but for the
 *     two cases the scheduler's own record decides.
 * Only the eBPF mechanism is used here: a check is a byte load, made at
 * every periodic check of the spin.  The fallback cannot tell preempted
 * from asleep, and its check (two reads of the other thread's CPU clock,
 * each of which takes that thread's run-queue lock) costs more than
 * extending gains (docs/oncpu.md): without eBPF the policy is
 * spin-then-park exactly, with no check.  Correctness never depends on
 * the answer: it only decides when the waiter goes to sleep, and the park
 * protocol is the same whenever it does.
 */
#include "internal.h"

__thread unsigned long ll_parks_tls __attribute__((tls_model("initial-exec")));
__thread struct ll_cancel *ll_cancel_tls __attribute__((tls_model("initial-exec")));
__thread struct ll_aware_counts ll_aware_tls __attribute__((tls_model("initial-exec")));

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- the spin budget ------------------------------------------------------------
 * Spin-then-park should spin for about what parking costs (the 2-competitive
 * rule of A. R. Karlin, K. Li, M. S. Manasse and S. Owicki, "Empirical
 * Studies of Competitive Spinning for a Shared-Memory Multiprocessor",
 * SOSP 1991, as applied in D. Dice, "Malthusian Locks", EuroSys 2017 (extended version, arXiv:1511.06035),
 * section 5.1): the time from the futex_wake
 * of a sleeping waiter until it runs.  A lock hands over to a waiter on
 * another CPU (one on the releaser's own CPU is not running anyway), so the
 * cost that counts is a *cross-CPU* wake-up.  It is needed on first need
 * only (the first spin-then-park wait), and is then taken, in this order,
 * from LIBLOCK_SPIN_NS, from the figures measured before (LIBLOCK_CALIBRATION,
 * which `liblock run` hands to its children, else the machine's cache:
 * src/platform/calibration.c), or measured now and written to the cache: two
 * helper threads pinned to two CPUs of the caller's set hand a token back
 * and forth ROUNDS times, both parking in futex_wait each time; the budget
 * is half the median round trip, clamped to [BUDGET_MIN_NS, BUDGET_MAX_NS].
 * The CPUs are two of the caller's, or of the online CPUs if the caller is
 * pinned to one (the first lock is often initialised by a pinned thread);
 * on a one-CPU machine they share it (a same-CPU wake-up: spinning longer
 * there only delays the thread the waiter waits for).  About 2.5 ms, once
 * per machine and boot.  If the helpers cannot be created the budget is
 * BUDGET_DEFAULT_NS.  Callers that arrive while the measurement runs use the
 * default for that one wait rather than wait for the measurement.  A
 * process that never waits never asks: it creates no thread, pins nothing,
 * and glibc's __libc_single_threaded stays as glibc left it.
 *
 * Why not the fastest round trip without pinning: the helper then often
 * runs on the caller's CPU, so the budget would be a same-CPU round trip,
 * an order of magnitude shorter than a cross-CPU wake-up, and only
 * sometimes a cross-CPU one: bimodal from process to process, and when
 * short, waiters park during ordinary hand-offs between two running
 * threads, so each hand-off costs a wake-up (docs/api.md). */
#define BUDGET_DEFAULT_NS 20000
#define BUDGET_MIN_NS 2000
#define BUDGET_MAX_NS 200000
#define ROUNDS 41

static _Atomic uint64_t spin_budget;    /* cycles; 0 = not known yet */
static _Atomic uint64_t spin_budget_ns; /* the same in ns, for reports */
static _Atomic int budget_state;        /* 0 none, 1 measuring, 2 done */
static const char *_Atomic budget_source = "default";

/* to_a/to_b: the tokens, handed over through ll_wake/ll_wait_while
 * (release/acquire).  d and n are written by A only and read by the caller
 * after pthread_join, which orders them; cpu_a/cpu_b are written before the
 * helpers are created. */
struct rt_probe {
    _Atomic uint32_t to_a, to_b;
    uint64_t d[ROUNDS];
    unsigned n;
    int cpu_a, cpu_b; /* -1: not pinned */
};

static void pin_self(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set); /* refused: measured unpinned */
}

/* B: answers each token. */
static void *rt_answer(void *arg)
{
    struct rt_probe *p = arg;
    pin_self(p->cpu_b);
    for (uint32_t i = 0; i < ROUNDS; i++) {
        ll_wait_while(&p->to_b, i, LIBLOCK_WAIT_PARK);
        ll_wake(&p->to_a, i + 1, LIBLOCK_WAIT_PARK);
    }
    return NULL;
}

/* A: sends ROUNDS tokens to B and times each round trip. */
static void *rt_ask(void *arg)
{
    struct rt_probe *p = arg;
    pin_self(p->cpu_a);
    for (uint32_t i = 0; i < ROUNDS; i++) {
        uint64_t t0 = ll_now_ns();
        ll_wake(&p->to_b, i + 1, LIBLOCK_WAIT_PARK);
        ll_wait_while(&p->to_a, i, LIBLOCK_WAIT_PARK);
        if (i >= 3) /* the first rounds include the threads' start */
            p->d[p->n++] = ll_now_ns() - t0;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Median cross-CPU wake-up in ns (half a futex round trip between two
 * helper threads pinned to two CPUs of the caller's set: pinning both keeps
 * the scheduler's wake-affine placement from pulling them onto one CPU;
 * the caller's own affinity is not touched), or 0 if the helpers could not
 * be made.  With one CPU allowed they share it. */
static uint64_t measure_wake_ns(void)
{
    LL_KEEP_ERRNO;
    struct rt_probe p;
    memset(&p, 0, sizeof p);
    atomic_init(&p.to_a, 0);
    atomic_init(&p.to_b, 0);
    p.cpu_a = p.cpu_b = -1;
    /* the caller's CPUs; a caller pinned to one CPU (a benchmark thread, an
     * application worker) measures the process's machine all the same: the
     * online CPUs (pinning outside the process's cpuset fails, and the
     * helpers then run where the scheduler puts them) */
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 2) {
        CPU_ZERO(&set);
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < n && c < CPU_SETSIZE; c++)
            CPU_SET((int)c, &set);
    }
    if (CPU_COUNT(&set) > 1)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) {
                if (p.cpu_a < 0)
                    p.cpu_a = c;
                else {
                    p.cpu_b = c;
                    break;
                }
            }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the helpers take no signals */
    pthread_t ta, tb;
    int r = pthread_create(&tb, NULL, rt_answer, &p);
    if (r == 0 && (r = pthread_create(&ta, NULL, rt_ask, &p)) != 0) {
        /* B waits for tokens that will not come: send them */
        for (uint32_t i = 0; i < ROUNDS; i++)
            ll_wake(&p.to_b, i + 1, LIBLOCK_WAIT_PARK);
        pthread_join(tb, NULL);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r)
        return 0;
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    qsort(p.d, p.n, sizeof *p.d, cmp_u64);
    return p.n ? p.d[p.n / 2] / 2 : 0;
}

/* LIBLOCK_SPIN_NS: the budget in ns, or -1 when unset or not valid (then
 * the budget comes from the figures, as when it is unset). */
static long spin_ns_env(void)
{
    LL_KEEP_ERRNO;
    const char *s = getenv("LIBLOCK_SPIN_NS");
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || *end || v < 0 || v > 60000000000L) {
        ll_warn_once("LIBLOCK_SPIN_NS",
                     "liblock: LIBLOCK_SPIN_NS=\"%s\" is not an integer in [0, 60000000000]; ignored, the spin "
                     "budget is measured (one cross-CPU futex wake-up)",
                     s);
        return -1;
    }
    return v;
}

uint64_t ll_spin_budget_cycles(void)
{
    uint64_t b = atomic_load_explicit(&spin_budget, memory_order_relaxed);
    if (LL_LIKELY(b))
        return b;
    int st = 0;
    if (!atomic_compare_exchange_strong_explicit(&budget_state, &st, 1, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        b = atomic_load_explicit(&spin_budget, memory_order_acquire);
        return b ? b : ll_ns_to_cycles(BUDGET_DEFAULT_NS); /* being measured */
    }
    /* This runs inside whichever wait first needs the budget (a lock, a
     * condition wait, a sem_wait with its node already queued); reading the
     * cache and measuring (which joins its helpers) hit cancellation points,
     * and a cancel acting there would unwind that wait with its node still
     * queued (the next post or unlock then writes to a dead stack frame) and
     * leave budget_state at 1. */
    LL_NO_CANCEL;
    long ns = spin_ns_env();
    const char *src = "LIBLOCK_SPIN_NS";
    struct ll_calibration known;
    if (ns < 0 && ll_calibration_lookup(&known, &src) == 0 && known.spin_ns) {
        ns = (long)known.spin_ns; /* src: "LIBLOCK_CALIBRATION" or "cache" */
    } else if (ns < 0) {
        uint64_t rt = measure_wake_ns();
        if (rt == 0 || rt == UINT64_MAX) {
            ns = BUDGET_DEFAULT_NS;
            src = "default (measurement failed)";
        } else {
            ns = (long)(rt < BUDGET_MIN_NS ? BUDGET_MIN_NS : rt > BUDGET_MAX_NS ? BUDGET_MAX_NS : rt);
            src = "measured";
            (void)ll_calibration_store(&(struct ll_calibration){ll_cycles_per_ns(), (uint64_t)ns});
        }
    }
    b = ll_ns_to_cycles((uint64_t)ns);
    if (b == 0)
        b = 1;
    atomic_store_explicit(&budget_source, src, memory_order_relaxed);
    atomic_store_explicit(&spin_budget_ns, (uint64_t)ns, memory_order_relaxed);
    atomic_store_explicit(&spin_budget, b, memory_order_release);
    atomic_store_explicit(&budget_state, 2, memory_order_release);
    return b;
}

uint64_t ll_spin_budget_ns(const char **source)
{
    (void)ll_spin_budget_cycles();
    uint64_t ns;
    while (!(ns = atomic_load_explicit(&spin_budget_ns, memory_order_acquire)) &&
           atomic_load_explicit(&budget_state, memory_order_acquire) != 2)
        ll_yield(); /* another thread is measuring */
    if (source)
        *source = atomic_load_explicit(&budget_source, memory_order_relaxed);
    return ns;
}

/* ---- the pure-spin warning ------------------------------------------------------
 * A waiter under pure spin checks the clock every SPIN_CHECK_MASK+1 pauses
 * (off the fast path: only after thousands of failed checks).  A wait longer
 * than LONG_WAIT_MS counts once; after LONG_WAITS of them in the process the
 * first one prints the warning once.  Such waits are what a spinning FIFO
 * hand-off to descheduled threads looks like (each hand-off waits for the
 * scheduler); a long critical section on dedicated cores also trips it,
 * which the message says.  LIBLOCK_WARN=0 silences it. */
#define LONG_WAIT_MS 20
#define LONG_WAITS 3

static _Atomic unsigned long_waits;
static _Atomic int spin_warned;

void ll_spin_note_slow(uint64_t *start, int *counted)
{
    uint64_t now = ll_cycles();
    if (*start == 0) {
        *start = now;
        return;
    }
    if (*counted || now - *start < ll_ns_to_cycles(LONG_WAIT_MS * 1000000ull))
        return;
    *counted = 1;
    if (atomic_fetch_add_explicit(&long_waits, 1, memory_order_relaxed) + 1 != LONG_WAITS)
        return;
    if (ll_env_long("LIBLOCK_WARN", 1, 0, 1) == 0 || atomic_exchange(&spin_warned, 1))
        return;
    static const char msg[] =
        "liblock: threads waiting with the pure 'spin' policy have repeatedly waited over 20 ms: the lock is "
        "probably being handed to threads that are not running (more threads than CPUs). Use the "
        "spin-then-park policy (liblock run --wait spin-then-park, LIBLOCK_WAIT=spin-then-park, or "
        "liblock_attr_setwait) or a Malthusian lock (mcscr, lifocr, loiter). LIBLOCK_WARN=0 turns this "
        "warning off.\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
}

static inline uint32_t load_acq(_Atomic uint32_t *w)
{
    return atomic_load_explicit(w, memory_order_acquire);
}

/* ---- cancellable sleeps ------------------------------------------------------------
 * pthread_cond_wait and sem_wait are cancellation points: a thread cancelled
 * while it sleeps there must act on the request at once.  The waits of
 * cond.c and cond_lifo.c set ll_cancel_tls (internal.h) around themselves;
 * a futex sleep under it then runs with asynchronous cancellation, inside a
 * cleanup handler that calls the waiter's own clean-up (take the waiter out
 * of its queue or pass on a wake-up it got, retake the user's mutex).  Only
 * the system call runs asynchronously cancellable: everything between the
 * two pthread_setcanceltype calls is the futex_wait and its errno
 * bookkeeping, which a cancellation may cut at any instruction without
 * leaving shared state half-changed -- the waiter's record, its word and
 * the queue are exactly as they were before the sleep, and the clean-up
 * reads them under the queue's own lock.  Switching to asynchronous
 * cancellation with a request already pending acts on it at once, so a
 * request made while the thread spun is acted on when it would sleep.
 * Only sleeps on the first (word, value) slept on under one setting are
 * cancellable: a wait that goes on to wait for something else (mcs's
 * requeued waiter waiting for its grant, which is the mutex re-acquisition
 * and no cancellation point in glibc either) is not cut there. */
static void run_cancel_cleanup(void *arg)
{
    struct ll_cancel *c = arg;
    ll_cancel_tls = NULL; /* the clean-up's own sleeps are ordinary ones */
    c->fn(c->arg);
}

static __attribute__((noinline)) void futex_wait_cancellable(_Atomic uint32_t *w, uint32_t v, const struct timespec *rel)
{
    struct ll_cancel *c = ll_cancel_tls;
    if (!c->word) {
        c->word = w;
        c->val = v;
    }
    if (c->word != w || c->val != v) {
        ll_futex_wait(w, v | LL_PARKED, rel);
        return;
    }
    int old = PTHREAD_CANCEL_DEFERRED;
    pthread_cleanup_push(run_cancel_cleanup, c);
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, &old);
    ll_futex_wait(w, v | LL_PARKED, rel);
    pthread_setcanceltype(old, NULL);
    pthread_cleanup_pop(0);
}

/* Park until the value leaves v; deadline 0 = none.  Returns 0 or ETIMEDOUT.
 * announce: NULL, or the word a fast hand-over's waker reads (fastwake.c):
 * set it and fence before the first sleep; if the fence fails, yield until
 * the value changes instead of sleeping. */
static int park(_Atomic uint32_t *w, uint32_t v, uint64_t deadline_ns, uint32_t *out, _Atomic uint32_t *announce)
{
    if (announce && !ll_fastwake_announce(announce)) {
        uint32_t cur;
        while (((cur = load_acq(w)) & ~LL_PARKED) == v)
            ll_yield();
        *out = cur & ~LL_PARKED;
        return 0;
    }
    for (;;) {
        uint32_t cur = load_acq(w);
        if ((cur & ~LL_PARKED) != v) {
            *out = cur & ~LL_PARKED;
            return 0;
        }
        if (!(cur & LL_PARKED)) {
            uint32_t expect = v;
            if (!atomic_compare_exchange_strong_explicit(w, &expect, v | LL_PARKED, memory_order_acq_rel,
                                                         memory_order_acquire))
                continue; /* value changed (or another waiter set the bit): re-check */
        }
        struct timespec rel, *relp = NULL;
        if (deadline_ns) {
            uint64_t now = ll_now_ns();
            if (now >= deadline_ns) {
                /* Leave the bit: the waker's swap clears it, and a stray bit
                 * only costs the waker one futex_wake call. */
                *out = v;
                return ETIMEDOUT;
            }
            uint64_t d = deadline_ns - now;
            rel.tv_sec = (time_t)(d / 1000000000ull);
            rel.tv_nsec = (long)(d % 1000000000ull);
            relp = &rel;
        }
        /* an atomic add: a delegated section running with this thread's
         * identity may park meanwhile (platform/identity.h, I2) */
        __atomic_fetch_add(&ll_parks_tls, 1, __ATOMIC_RELAXED);
        if (LL_UNLIKELY(ll_cancel_tls != NULL))
            futex_wait_cancellable(w, v, relp);
        else
            ll_futex_wait(w, v | LL_PARKED, relp);
    }
}

/* ---- preemption-aware waiting (header) ---- */
#define AWARE_MAX_DEFAULT_NS 1000000

static _Atomic uint64_t aware_cap; /* cycles; 0 = not read yet */
static _Atomic int aware_on;       /* 1 ebpf, 2 not (budget rule only), 0 = not settled */

static void aware_settle(void) /* inside lock(): no cancellation point (LL_NO_CANCEL, internal.h) */
{
    LL_KEEP_ERRNO;
    LL_NO_CANCEL;
    uint64_t cap = ll_ns_to_cycles((uint64_t)ll_env_long("LIBLOCK_AWARE_MAX_NS", AWARE_MAX_DEFAULT_NS, 0, 1000000000));
    atomic_store_explicit(&aware_cap, cap ? cap : 1, memory_order_relaxed);
    atomic_store_explicit(&aware_on, ll_oncpu_kind() == LL_ONCPU_EBPF ? 1 : 2, memory_order_relaxed);
}

int ll_aware_should_park(const _Atomic int32_t *who, struct ll_aware_spin *sp, uint64_t budget)
{
    uint64_t now = ll_cycles();
    int32_t tid = who ? atomic_load_explicit(who, memory_order_relaxed) : 0;
    int on_kind = atomic_load_explicit(&aware_on, memory_order_relaxed);
    if (LL_UNLIKELY(!on_kind)) {
        aware_settle();
        on_kind = atomic_load_explicit(&aware_on, memory_order_relaxed);
    }
    if (tid > 0 && on_kind == 1) {
        int on = ll_oncpu_state(tid);
        if (on == LL_ONCPU_B_PREEMPTED - 1) {
            ll_aware_tls.park_off++;
            return 1;
        }
        if (on == LL_ONCPU_B_ON - 1 && sp->extend) {
            if (now - sp->start > atomic_load_explicit(&aware_cap, memory_order_relaxed)) {
                ll_aware_tls.park_cap++;
                return 1;
            }
            if (!sp->extended && now - sp->start > budget) {
                sp->extended = 1;
                ll_aware_tls.extended++;
            }
            return 0;
        }
    }
    if (now - sp->start > budget) {
        if (who)
            ll_aware_tls.park_budget++;
        return 1;
    }
    return 0;
}

static int wait_until(_Atomic uint32_t *w, uint32_t v, int policy, uint64_t deadline_ns, uint32_t *out,
                      _Atomic uint32_t *announce, const _Atomic int32_t *who, bool extend)
{
    uint32_t cur;
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK || policy == LIBLOCK_WAIT_PARK) {
        if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
            uint64_t start = ll_cycles(), budget = ll_spin_budget_cycles();
            struct ll_aware_spin sp = {.start = start, .extend = extend};
            unsigned n = 0;
            while (((cur = load_acq(w)) & ~LL_PARKED) == v) {
                ll_pause();
                if ((++n & 63) == 0) {
                    if (LL_UNLIKELY(who != NULL) ? ll_aware_should_park(who, &sp, budget)
                                                 : ll_cycles() - start > budget)
                        break;
                    if (deadline_ns && ll_now_ns() >= deadline_ns) {
                        *out = v;
                        return ETIMEDOUT;
                    }
                }
            }
            if ((cur & ~LL_PARKED) != v) {
                *out = cur & ~LL_PARKED;
                return 0;
            }
        }
        return park(w, v, deadline_ns, out, announce);
    }
    unsigned n = 0;
    while (((cur = load_acq(w)) & ~LL_PARKED) == v) {
        ll_wait_step(policy);
        if (deadline_ns && (++n & 63) == 0 && ll_now_ns() >= deadline_ns) {
            *out = v;
            return ETIMEDOUT;
        }
    }
    *out = cur & ~LL_PARKED;
    return 0;
}

uint32_t ll_wait_while(_Atomic uint32_t *w, uint32_t v, int policy)
{
    uint32_t cur;
    if (policy == LIBLOCK_WAIT_SPIN) {
        unsigned n = 0;
        uint64_t start = 0;
        int counted = 0;
        while (((cur = load_acq(w)) & ~LL_PARKED) == v) {
            ll_pause();
            if (LL_UNLIKELY((++n & LL_SPIN_CHECK_MASK) == 0))
                ll_spin_note_slow(&start, &counted);
        }
        return cur & ~LL_PARKED;
    }
    ll_wait_while_until(w, v, policy, 0, &cur);
    return cur;
}

int ll_wait_while_until(_Atomic uint32_t *w, uint32_t v, int policy, uint64_t deadline_ns, uint32_t *out)
{
    return wait_until(w, v, policy, deadline_ns, out, NULL, NULL, false);
}

uint32_t ll_wait_while_behind(_Atomic uint32_t *w, uint32_t v, int policy, const _Atomic int32_t *who, bool extend)
{
    if (!who || policy != LIBLOCK_WAIT_SPIN_THEN_PARK)
        return ll_wait_while(w, v, policy);
    uint32_t cur;
    wait_until(w, v, policy, 0, &cur, NULL, who, extend);
    return cur;
}

uint32_t ll_wait_while_announced(_Atomic uint32_t *w, uint32_t v, int policy, _Atomic uint32_t *announce)
{
    return ll_wait_while_announced_behind(w, v, policy, announce, NULL, false);
}

uint32_t ll_wait_while_announced_behind(_Atomic uint32_t *w, uint32_t v, int policy, _Atomic uint32_t *announce,
                                        const _Atomic int32_t *who, bool extend)
{
    if ((policy != LIBLOCK_WAIT_SPIN_THEN_PARK && policy != LIBLOCK_WAIT_PARK) || !ll_fastwake_on())
        return ll_wait_while_behind(w, v, policy, who, extend);
    uint32_t cur;
    wait_until(w, v, policy, 0, &cur, announce, who, extend);
    return cur;
}

void ll_wake(_Atomic uint32_t *w, uint32_t newval, int policy)
{
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK || policy == LIBLOCK_WAIT_PARK) {
        uint32_t old = atomic_exchange_explicit(w, newval, memory_order_acq_rel);
        if (old & LL_PARKED)
            ll_futex_wake(w, 1 << 30);
        return;
    }
    atomic_store_explicit(w, newval, memory_order_release);
}

/* Bump a parking counter word (a word waiters park on without owning its
 * value, e.g. a ticket lock's waiting-array slot): increment the low 31
 * bits, clear LL_PARKED, and wake every sleeper if the bit was set.  The
 * increment is a CAS loop, so concurrent bumpers (slots shared by several
 * locks) never lose one: a waiter that read the old value always sees a
 * different one afterwards. */
void ll_bump_wake(_Atomic uint32_t *w)
{
    uint32_t cur = atomic_load_explicit(w, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(w, &cur, (cur + 1) & ~LL_PARKED, memory_order_seq_cst,
                                                  memory_order_relaxed))
        ;
    if (cur & LL_PARKED)
        ll_futex_wake(w, 1 << 30);
}
