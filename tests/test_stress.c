/*
 * test_stress - mutual exclusion under stress, for every registered
 * algorithm and every waiting policy it supports, with 1, 2, 4, 16 and 64
 * threads on however many cores there are, through lock/unlock, through
 * execute, and mixed (each thread cycles lock/unlock, execute and trylock,
 * which is what a program that mixes delegated and ordinary critical
 * sections does).
 *
 * The critical section checks and sets an "occupied" flag and increments a
 * plain (non-atomic) counter; afterwards the counter must equal the number of
 * critical sections the threads report and the flag must never have been
 * seen set.  Each configuration runs for a fixed count (40,000 critical
 * sections in all; 2,000 at the sanitizers' scale) or until a deadline of
 * 80 ms, whichever comes first
 * (oversubscribed FIFO spin locks hand over slowly on 2 cores); the
 * deadline only bounds the run, it asserts nothing.  Every successful call
 * must leave errno as it found it (docs/api.md).  At the sanitizers' scale
 * the 64-thread configurations are left out: 16 threads already
 * oversubscribe the CPUs eightfold on 2 cores, and a sanitizer's cost grows
 * with the thread count, not the races it can see (the normal build runs 64).
 *
 * Usage: test_stress [ALGORITHM...]   (default: all)
 */
#include "harness.h"

static const int thread_counts[] = {1, 2, 4, 16, 64};

struct shared {
    liblock_t lock;
    volatile int occupied;
    volatile long counter;
    volatile int violations;
    volatile int stop;
    long per_thread_max;
    int use_execute; /* MODE_* */
    long errno_changes; /* successful calls that changed errno */
    int errno_last;
};

enum { MODE_LOCK = 0, MODE_EXECUTE = 1, MODE_MIXED = 2, MODE__COUNT };
static const char *const mode_names[] = {"lock", "execute", "mixed"};

struct worker {
    pthread_t th;
    struct shared *sh;
    long done;
    int err;
};

static void *critical(void *arg)
{
    struct shared *sh = arg;
    if (sh->occupied)
        sh->violations++;
    sh->occupied = 1;
    long c = sh->counter;
    for (volatile int i = 0; i < 4; i++)
        ;
    sh->counter = c + 1;
    sh->occupied = 0;
    return (void *)0x5a;
}

/* One critical section: how = 0 lock/unlock, 1 execute, 2 trylock.
 * Returns 1 if it ran, 0 if trylock found the lock busy (EBUSY, the only
 * failure trylock may report), or -errno on any error. */
/* errno must come out of a successful lock, trylock, unlock or execute as
 * it went in (docs/api.md), even after waits that slept in the kernel. */
#define ERRNO_SENTINEL 7777
static void errno_check(struct shared *sh)
{
    if (errno != ERRNO_SENTINEL) {
        __atomic_store_n(&sh->errno_last, errno, __ATOMIC_RELAXED);
        __atomic_fetch_add(&sh->errno_changes, 1, __ATOMIC_RELAXED);
    }
}

static int one_cs(struct shared *sh, int how)
{
    errno = ERRNO_SENTINEL;
    if (how == MODE_EXECUTE) {
        void *r = liblock_execute(&sh->lock, critical, sh);
        if (r != (void *)0x5a)
            return -(errno != ERRNO_SENTINEL && errno ? errno : 1);
        errno_check(sh);
        return 1;
    }
    int e = how == 2 ? liblock_trylock(&sh->lock) : liblock_lock(&sh->lock);
    if (how == 2 && e == EBUSY) {
        errno_check(sh);
        return 0;
    }
    if (e)
        return -e;
    critical(sh);
    e = liblock_unlock(&sh->lock);
    if (e)
        return -e;
    errno_check(sh);
    return 1;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct shared *sh = w->sh;
    /* Every thread completes at least one critical section before it looks
     * at the stop flag, so "each thread made progress" is deterministic. */
    for (long i = 0; i < sh->per_thread_max && (i == 0 || !__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)); i++) {
        int how = sh->use_execute == MODE_MIXED ? (int)(i % 3) : sh->use_execute;
        int r = one_cs(sh, how);
        if (r == 0)
            continue;
        if (r < 0) {
            __atomic_store_n(&w->err, -r, __ATOMIC_RELAXED);
            break;
        }
        __atomic_store_n(&w->done, w->done + 1, __ATOMIC_RELAXED); /* main polls it */
    }
    return NULL;
}

static void run_config(const char *algo, int policy, int nthreads, int use_execute)
{
    static struct shared sh;
    memset(&sh, 0, sizeof sh);
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setwait(&attr, policy);
    int r = liblock_init(&sh.lock, algo, &attr);
    CHECK(r == 0, "init %s/%s failed: %s", algo, liblock_wait_name(policy), strerror(r));
    if (r)
        return;
    int small = th_scale_small();
    sh.per_thread_max = (small ? 2000 : 40000) / nthreads + 100;
    sh.use_execute = use_execute;
    struct worker *ws = calloc((size_t)nthreads, sizeof *ws);
    for (int i = 0; i < nthreads; i++) {
        ws[i].sh = &sh;
        pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
    }
    uint64_t deadline = th_now_ns() + 80 * 1000000ull;
    while (th_now_ns() < deadline) {
        int all_done = 1;
        for (int i = 0; i < nthreads; i++)
            if (__atomic_load_n(&ws[i].done, __ATOMIC_RELAXED) < sh.per_thread_max && !__atomic_load_n(&ws[i].err, __ATOMIC_RELAXED))
                all_done = 0;
        if (all_done)
            break;
        usleep(2000);
    }
    __atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
    long total = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(ws[i].th, NULL);
        total += ws[i].done;
        CHECK(ws[i].err == 0, "%s/%s %d threads %s: thread %d got error %d (%s)", algo, liblock_wait_name(policy),
              nthreads, mode_names[use_execute], i, ws[i].err, strerror(ws[i].err));
    }
    CHECK(sh.counter == total, "%s/%s %d threads %s: counter %ld != %ld critical sections", algo,
          liblock_wait_name(policy), nthreads, mode_names[use_execute], sh.counter, total);
    CHECK(sh.violations == 0, "%s/%s %d threads %s: %d exclusion violations", algo, liblock_wait_name(policy),
          nthreads, mode_names[use_execute], sh.violations);
    CHECK(sh.errno_changes == 0, "%s/%s %d threads %s: %ld successful calls changed errno (last to %d, %s)", algo,
          liblock_wait_name(policy), nthreads, mode_names[use_execute], sh.errno_changes, sh.errno_last,
          strerror(sh.errno_last));
    for (int i = 0; i < nthreads; i++)
        CHECK(ws[i].done > 0 || ws[i].err, "%s/%s %d threads: thread %d made no progress", algo,
              liblock_wait_name(policy), nthreads, i);
    r = liblock_destroy(&sh.lock);
    CHECK(r == 0, "destroy %s after stress: %s", algo, strerror(r));
    free(ws);
}

int main(int argc, char **argv)
{
    th_watchdog(th_scale_small() ? 900 : 400);
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        liblock_algorithm_info_t info;
        liblock_algorithm_info(*a, &info);
        uint64_t t0 = th_now_ns();
        for (int p = 1; p < LIBLOCK_WAIT__COUNT; p++) {
            if (!(info.policies & (1u << p)))
                continue;
            th_context = *a;
            size_t nt = sizeof thread_counts / sizeof *thread_counts;
            if (th_scale_small())
                nt--; /* no 64 (see the header) */
            for (size_t t = 0; t < nt; t++)
                for (int ex = 0; ex < MODE__COUNT; ex++)
                    run_config(*a, p, thread_counts[t], ex);
        }
        printf("  %-16s ok so far (%d failures), %.1f s\n", *a, th_failures, (th_now_ns() - t0) / 1e9);
        fflush(stdout);
    }
    return th_report("test_stress");
}
