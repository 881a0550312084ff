/*
 * test_fc_park - flat combining under spin-then-park: every requester and
 * lock() caller that goes to sleep is woken, in both of its protocols:
 * the asymmetric barrier (the default where membarrier(2) has the private
 * expedited command: releases and combining passes use plain stores, the
 * sleepers a heavy barrier; src/locks/combining/fc_park.h, "Asymmetric") and
 * the symmetric one (LIBLOCK_FC_ASYM=0: exchange and CAS on the hot path).
 *
 *   1. Parked by a holder: the main thread holds the lock with
 *      liblock_lock for 3 ms while 4 threads arrive (2 execute, 2 lock); a
 *      flat-combining waiter yields for 1 ms and then sleeps, so they all
 *      park; the unlock must wake them.  40 rounds, each bounded.
 *   2. Random stress: 6 threads, lock/unlock and execute mixed, 1 critical
 *      section in 64 sleeping 1.5 ms so that waiters park and are woken
 *      all the time, the others short so that parks race with releases.
 *      Exact count, mutual exclusion, and at least one park seen.
 *   3. After fork: a child of a process that has registered for the
 *      barrier (membarrier registration is per process) parks and wakes
 *      its own threads on a new lock (rounds of 1), in a child with a 30 s
 *      bound of its own.
 * A lost wake-up leaves a thread asleep with the lock free: its round, or
 * the stress, then misses its 20 s bound (nothing else can take that long).
 * A stress hides most lost wake-ups (the next release wakes the sleeper a
 * missed one left); tests/test_release_race.c races one release against
 * one sleep, here in both modes and across the switch of lock()'s
 * releases to the exchange.
 */
#include "harness.h"
#include "internal.h"

#include <sys/wait.h>
#include <unistd.h>

/* The lock's futex waits so far; *asym: whether it uses the asymmetric
 * barrier (its statistics, ll_lock_stats). */
static unsigned long fc_parks(liblock_t *l, int *asym)
{
    struct ll_stats st;
    if (ll_lock_stats(l, &st) != 0)
        return 0;
    if (asym)
        *asym = (int)ll_stat(&st, "asym", -1);
    return (unsigned long)ll_stat(&st, "parks", 0);
}

static liblock_t L;
static long counter;
static volatile int inside;
static _Atomic long violations, errors;

static void *cs(void *arg)
{
    long sleep_us = (long)arg;
    if (inside)
        atomic_fetch_add(&violations, 1);
    inside = 1;
    counter++;
    if (sleep_us)
        usleep((useconds_t)sleep_us);
    inside = 0;
    return (void *)0x5a;
}

static void one_op(int use_execute, long sleep_us)
{
    if (use_execute) {
        if (liblock_execute(&L, cs, (void *)sleep_us) != (void *)0x5a)
            atomic_fetch_add(&errors, 1);
        return;
    }
    if (liblock_lock(&L)) {
        atomic_fetch_add(&errors, 1);
        return;
    }
    cs((void *)sleep_us);
    if (liblock_unlock(&L))
        atomic_fetch_add(&errors, 1);
}

static void *arrival(void *arg)
{
    one_op((int)(long)arg & 1, 0);
    return NULL;
}

static void init_fc(void)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_SPIN_THEN_PARK);
    CHECK_EQ(liblock_init(&L, "flat-combining", &a), 0);
    counter = 0;
    atomic_store(&violations, 0);
    atomic_store(&errors, 0);
}

static void parked_by_holder(const char *mode, int rounds)
{
    enum { K = 4 };
    for (int r = 0; r < rounds; r++) {
        CHECK_EQ(liblock_lock(&L), 0);
        pthread_t th[K];
        for (int i = 0; i < K; i++)
            pthread_create(&th[i], NULL, arrival, (void *)(long)i);
        usleep(3000);
        inside = 0;
        CHECK_EQ(liblock_unlock(&L), 0);
        uint64_t deadline = th_now_ns() + 20000000000ull;
        for (int i = 0; i < K; i++)
            CHECK(th_join_by(th[i], deadline) == 0, "%s: round %d, arrival %d never woken", mode, r, i);
    }
    CHECK_EQ(counter, (long)rounds * K);
}

struct sarg {
    long ops;
    unsigned seed;
};

static void *stress_main(void *arg)
{
    struct sarg *a = arg;
    unsigned s = a->seed;
    for (long i = 0; i < a->ops; i++) {
        s = s * 1103515245u + 12345u;
        unsigned v = s >> 16;
        one_op(v & 1, (v >> 1) % 64 == 0 ? 1500 : 0);
    }
    return NULL;
}

static void stress(const char *mode, long ops)
{
    enum { T = 6 };
    pthread_t th[T];
    struct sarg a[T];
    for (int i = 0; i < T; i++) {
        a[i].ops = ops;
        a[i].seed = 0x9e3779b9u * (unsigned)(i + 1);
        pthread_create(&th[i], NULL, stress_main, &a[i]);
    }
    uint64_t deadline = th_now_ns() + 20000000000ull;
    for (int i = 0; i < T; i++)
        CHECK(th_join_by(th[i], deadline) == 0, "%s: stress thread %d stranded", mode, i);
    CHECK_EQ(counter, T * ops);
}

static void run_mode(const char *mode, const char *asym_env, int want_asym)
{
    th_context = mode;
    setenv("LIBLOCK_FC_ASYM", asym_env, 1);
    init_fc();
    unsetenv("LIBLOCK_FC_ASYM");
    int asym = -1;
    fc_parks(&L, &asym);
    if (want_asym >= 0)
        CHECK_EQ(asym, want_asym);
    uint64_t t0 = th_now_ns();
    parked_by_holder(mode, th_scale_small() ? 10 : 40);
    unsigned long p1 = fc_parks(&L, NULL);
    CHECK(p1 > 0, "%s: no waiter parked behind a 3 ms holder", mode);
    counter = 0;
    stress(mode, th_scale_small() ? 300 : 1500);
    unsigned long p2 = fc_parks(&L, NULL) - p1;
    CHECK(p2 > 0, "%s: no waiter parked in the stress", mode);
    CHECK_EQ(atomic_load(&violations), 0);
    CHECK_EQ(atomic_load(&errors), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
    printf("  %-26s asym %d: %lu parks behind the holder, %lu in the stress, %.2f s\n", mode, asym, p1, p2,
           (th_now_ns() - t0) / 1e9);
}

static void after_fork(void)
{
    th_context = "fork";
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        alarm(30);
        init_fc();
        parked_by_holder("fork child", 5);
        int asym = -1;
        unsigned long parks = fc_parks(&L, &asym);
        int ok = th_report("test_fc_park (fork child)") == 0 && parks > 0 &&
                 asym == (ll_heavy_barrier_ok() ? 1 : 0) && liblock_destroy(&L) == 0;
        printf("  fork child: asym %d, %lu parks\n", asym, parks);
        fflush(stdout);
        _exit(ok ? 0 : 1);
    }
    int st = 0;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: status %#x (a signal is the 30 s alarm: stranded)", st);
}

int main(void)
{
    th_watchdog(120);
    /* the asymmetric mode where the kernel has it (it does on the CI
     * machines: Linux 6.x), else that run checks the fallback too */
    run_mode("asymmetric (default)", "1", ll_heavy_barrier_ok() ? 1 : 0);
    run_mode("symmetric (FC_ASYM=0)", "0", 0);
    after_fork();
    return th_report("test_fc_park");
}
