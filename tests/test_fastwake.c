/*
 * test_fastwake - the fast hand-over of mcscr, mcscrn, lifocr and mcs
 * (src/core/fastwake.c, src/locks/restricting/cr.h, lifocr.c and mcs.c "Fast
 * hand-over"): the grant to the successor that linked itself (mcscr,
 * mcscrn, mcs) or to the popped waiter (lifocr) is a plain store plus a
 * read of the waiter's parking announcement, made safe by an asymmetric
 * fence on the parking side.  A mistake there loses a wake-up: a granted
 * waiter sleeps for ever and the lock with it.  So:
 *  1. The fast hand-over is on exactly where the kernel offers membarrier's
 *     private expedited command (the test asks the kernel itself), and off
 *     with LIBLOCK_FASTWAKE=0.
 *  2. Park/unpark races: spin-then-park with the spin budget cut to 0
 *     (LIBLOCK_SPIN_NS=0, set before the library reads it), so a waiter
 *     parks after a few dozen pauses and nearly every hand-over meets a
 *     waiter that is parking or asleep.  2 threads (every grant goes to the
 *     successor that linked itself: the fast path), 8 and 32 threads
 *     (culling, grafts and pending grants mixed in), lock/unlock with
 *     trylock mixed in, exact counts; each run is bounded by 60 s, which
 *     only a lost wake-up reaches.
 *  3. The same in a child forked from this process after its threads used
 *     the locks (the registration belongs to the process image, so the
 *     child must register again, which the library does at its first
 *     barrier: checked afterwards by calling the fenced command, which the
 *     kernel refuses to an unregistered process), and in a child
 *     forked before anything settled, with LIBLOCK_FASTWAKE=0 (the swap
 *     hand-over, under the same stress).
 */
#include "harness.h"

#include <linux/membarrier.h>
#include <stdatomic.h>
#include <sys/syscall.h>

int ll_fastwake_on(void); /* src/core/fastwake.c (internal) */

static int kernel_has_expedited(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
           (cmds & MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
}

struct run {
    liblock_t lock;
    long count; /* protected by lock */
    long iters;
    _Atomic long tries_won;
};

static void *worker(void *arg)
{
    struct run *r = arg;
    for (long i = 0; i < r->iters; i++) {
        if (i % 5 == 0 && liblock_trylock(&r->lock) == 0)
            atomic_fetch_add_explicit(&r->tries_won, 1, memory_order_relaxed);
        else
            liblock_lock(&r->lock);
        r->count++;
        liblock_unlock(&r->lock);
    }
    return NULL;
}

static void stress(const char *algo, int threads, long iters)
{
    struct run r;
    memset(&r, 0, sizeof r);
    r.iters = iters;
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_SPIN_THEN_PARK);
    CHECK_EQ(liblock_init(&r.lock, algo, &a), 0);
    pthread_t th[32];
    for (int i = 0; i < threads; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, worker, &r), 0);
    uint64_t deadline = th_now_ns() + 60000000000ull;
    int stuck = 0;
    for (int i = 0; i < threads; i++)
        if (th_join_by(th[i], deadline) != 0)
            stuck++;
    CHECK(stuck == 0, "%s, %d threads: %d thread(s) still waiting after 60 s (a lost wake-up?)", algo, threads,
          stuck);
    if (stuck) {
        printf("%s: giving up (threads stuck)\n", th_context);
        exit(th_report("test_fastwake"));
    }
    CHECK_EQ(r.count, (long)threads * iters);
    CHECK_EQ(liblock_destroy(&r.lock), 0);
}

static void stress_all(const char *where)
{
    static const char *algos[] = {"mcscr", "mcscrn", "lifocr", "mcs"};
    static const int counts[] = {2, 8, 32};
    long base = th_scale_small() ? 4000 : 30000;
    for (size_t a = 0; a < sizeof algos / sizeof *algos; a++)
        for (size_t c = 0; c < 3; c++) {
            uint64_t t0 = th_now_ns();
            stress(algos[a], counts[c], base * 2 / counts[c] + 200);
            printf("  %-6s %-7s %2d threads: ok, %.1f s\n", where, algos[a], counts[c], (th_now_ns() - t0) / 1e9);
        }
}

int main(void)
{
    th_watchdog(600);
    setenv("LIBLOCK_SPIN_NS", "0", 1);

    /* 3b. before anything settles: a child with the fast hand-over off */
    fflush(stdout);
    pid_t off = fork();
    if (off == 0) {
        setenv("LIBLOCK_FASTWAKE", "0", 1);
        th_context = "LIBLOCK_FASTWAKE=0 child";
        CHECK_EQ(ll_fastwake_on(), 0);
        stress_all("off");
        exit(th_report("test_fastwake (child, LIBLOCK_FASTWAKE=0)"));
    }
    CHECK(off > 0, "fork: %s", strerror(errno));
    CHECK_EQ(th_wait_child(off, 300, "LIBLOCK_FASTWAKE=0 child"), 0);

    /* 1. on exactly where the kernel has the command */
    int want = kernel_has_expedited();
    CHECK_EQ(ll_fastwake_on(), want);
    printf("  membarrier private expedited: %s; fast hand-over %s\n", want ? "available" : "not available",
           ll_fastwake_on() ? "on" : "off");

    /* 2. races in this process */
    th_context = "parent";
    stress_all("parent");

    /* 3a. a child forked after the threads ran */
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        th_context = "forked child";
        CHECK_EQ(ll_fastwake_on(), want);
        stress_all("child");
        if (want) /* refused (EPERM) unless the library registered the child again */
            CHECK_EQ(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0), 0);
        exit(th_report("test_fastwake (forked child)"));
    }
    CHECK(child > 0, "fork: %s", strerror(errno));
    CHECK_EQ(th_wait_child(child, 300, "forked child"), 0);
    return th_report("test_fastwake");
}
