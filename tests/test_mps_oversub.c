/*
 * test_mps_oversub - mp-server's direct mode (more threads than CPUs; header of
 * src/locks/delegation/mp-server.c, "Direct mode"; src/runtime/mpserver/direct.c).
 *
 *  1. lock/trylock/unlock never post a request: 4 threads, exact count, and
 *     the server has served nothing (before direct mode: two requests per
 *     section);
 *  2. a sleeping server is not woken for an uncontended execute: once the
 *     server has gone to sleep, liblock_execute runs the section on the
 *     calling thread, and the server's request count does not move;
 *  3. the lock word's release wakes a server that sleeps with a request
 *     waiting for the word (server_parked = 2): the main thread holds the
 *     lock, a client pinned away from the (pinned) server posts an execute
 *     with a withdrawal window far beyond the test's bound, the server finds
 *     the word taken and sleeps; after the unlock the section must run on
 *     the server (a lost wake-up leaves the request to be withdrawn only
 *     after the window: the watchdog fails it);
 *  4. exact counts and no hang, 32 threads mixing execute, lock/unlock and
 *     trylock, under spin-then-park, park and yield, each with the default
 *     window, a 1 ns window (nearly every request is withdrawn: claim and
 *     withdrawal race on every request) and a window longer than the run
 *     (never withdrawn); every section runs exactly once (a counter of
 *     sections run on the server plus those run by their callers equals
 *     the executes), some lock() sections yield inside so that waiters
 *     sleep on the word (parked clients must be woken);
 *  5. fork while the server holds the word for a pass: the child's lock,
 *     trylock and execute work (the parent's server's hold is dropped);
 *  6. the explicit spin policy keeps the thesis's request path: lock/unlock
 *     are served by the server (its count moves) -- direct mode is off;
 *  7. so does a server pinned with LIBLOCK_MPSERVER_CPU (default policy).
 * Each configuration runs in a child process with a watchdog.
 */
#include "harness.h"
#include "internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static uint64_t stat_of(liblock_t *l, const char *name)
{
    struct ll_stats st;
    return ll_lock_stats(l, &st) == 0 ? (uint64_t)ll_stat(&st, name, 0) : 0;
}
#define SERVED(l) stat_of(l, "served")
#define PARKS(l) stat_of(l, "parks")

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static int init_mps(liblock_t *l, int policy)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    if (policy >= 0)
        liblock_attr_setwait(&a, policy);
    return liblock_init(l, "mp-server", &a);
}

/* wait until the server has gone to sleep at least n times */
static void wait_parks(liblock_t *l, uint64_t n)
{
    while (PARKS(l) < n)
        usleep(1000);
}

/* ---- 1 ------------------------------------------------------------------ */
static liblock_t l1;
static long c1;
static void *t1(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        if (i & 1) {
            liblock_lock(&l1);
        } else {
            while (liblock_trylock(&l1) != 0)
                sched_yield();
        }
        c1++;
        liblock_unlock(&l1);
    }
    return NULL;
}
static int test_lock_no_requests(void)
{
    th_context = "lock/unlock without requests";
    CHECK_EQ(init_mps(&l1, -1), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, t1, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(c1, 4 * 20000);
    CHECK_EQ(SERVED(&l1), 0);
    CHECK_EQ(liblock_destroy(&l1), 0);
    return th_failures;
}

/* ---- 2 ------------------------------------------------------------------ */
static void *who(void *arg)
{
    *(pid_t *)arg = tid();
    return (void *)7;
}
static int test_asleep_runs_own(void)
{
    th_context = "sleeping server not woken";
    liblock_t l;
    CHECK_EQ(init_mps(&l, -1), 0);
    pid_t ran = 0;
    CHECK(liblock_execute(&l, who, &ran) == (void *)7, "first execute");
    wait_parks(&l, 1);
    uint64_t served = SERVED(&l);
    ran = 0;
    CHECK(liblock_execute(&l, who, &ran) == (void *)7, "execute");
    CHECK_EQ(ran, tid());
    CHECK_EQ(SERVED(&l), served);
    CHECK_EQ(liblock_destroy(&l), 0);
    return th_failures;
}

/* ---- 3 ------------------------------------------------------------------ */
static liblock_t l3;
static _Atomic int posting;
static pid_t ran3, client3;
static void *t3(void *arg)
{
    (void)arg;
    pin(1);
    client3 = tid();
    atomic_store(&posting, 1);
    liblock_execute(&l3, who, &ran3);
    return NULL;
}
static int test_release_wakes_server(void)
{
    th_context = "word release wakes the server";
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        th_skip("%s: one CPU", th_context);
        return 0;
    }
    setenv("LIBLOCK_MPSERVER_CPU", "0", 1);
    setenv("LIBLOCK_MPSERVER_DIRECT", "1", 1); /* a pinned server is not in direct mode by default */
    setenv("LIBLOCK_MPSERVER_WINDOW_NS", "60000000000", 1); /* 60 s: never withdrawn within the watchdog */
    CHECK_EQ(init_mps(&l3, -1), 0);
    unsetenv("LIBLOCK_MPSERVER_CPU");
    unsetenv("LIBLOCK_MPSERVER_DIRECT");
    unsetenv("LIBLOCK_MPSERVER_WINDOW_NS");
    pin(0);
    pid_t r = 0;
    liblock_execute(&l3, who, &r); /* starts the server */
    wait_parks(&l3, 1);
    CHECK_EQ(liblock_lock(&l3), 0);
    uint64_t p = PARKS(&l3);
    pthread_t th;
    pthread_create(&th, NULL, t3, NULL);
    while (!atomic_load(&posting))
        usleep(1000);
    /* the client's request wakes the server, which finds the word held,
     * and sleeps again (as 2) */
    wait_parks(&l3, p + 1);
    usleep(20000);
    CHECK_EQ(liblock_unlock(&l3), 0);
    pthread_join(th, NULL);
    CHECK(ran3 != 0 && ran3 != client3, "the section ran on the server (ran %d, client %d)", (int)ran3,
          (int)client3);
    CHECK_EQ(liblock_destroy(&l3), 0);
    return th_failures;
}

/* ---- 4 ------------------------------------------------------------------ */
#define T4 32
static liblock_t l4;
static long c4;
static _Atomic long own4, srv4;
struct a4 {
    pid_t caller;
};
static void *inc4(void *arg)
{
    struct a4 *a = arg;
    c4++;
    if (tid() == a->caller)
        atomic_fetch_add_explicit(&own4, 1, memory_order_relaxed);
    else
        atomic_fetch_add_explicit(&srv4, 1, memory_order_relaxed);
    return (void *)1;
}
static int n4;
static void *t4(void *arg)
{
    long me = (long)arg;
    struct a4 a = {tid()};
    long execs = 0;
    for (int i = 0; i < n4; i++) {
        switch ((i + me) % 4) {
        case 0:
        case 1:
            if (liblock_execute(&l4, inc4, &a) != (void *)1)
                fprintf(stderr, "execute failed\n");
            execs++;
            break;
        case 2:
            liblock_lock(&l4);
            c4++;
            if ((i & 15) == 2)
                sched_yield(); /* a holder off-CPU: waiters sleep on the word */
            liblock_unlock(&l4);
            break;
        default:
            while (liblock_trylock(&l4) != 0)
                sched_yield();
            c4++;
            liblock_unlock(&l4);
        }
    }
    return (void *)execs;
}
static int run_counts(int policy, const char *window)
{
    if (window)
        setenv("LIBLOCK_MPSERVER_WINDOW_NS", window, 1);
    CHECK_EQ(init_mps(&l4, policy), 0);
    unsetenv("LIBLOCK_MPSERVER_WINDOW_NS");
    n4 = th_scale_small() ? 500 : 4000;
    pthread_t th[T4];
    for (long i = 0; i < T4; i++)
        pthread_create(&th[i], NULL, t4, (void *)i);
    long execs = 0;
    for (int i = 0; i < T4; i++) {
        void *r;
        pthread_join(th[i], &r);
        execs += (long)r;
    }
    CHECK_EQ(c4, (long)T4 * n4);
    CHECK_EQ(atomic_load(&own4) + atomic_load(&srv4), execs);
    printf("  %-15s window %-12s: %ld sections, executes run by the server %ld, by their callers %ld\n",
           liblock_wait_name(policy), window ? window : "default", c4, atomic_load(&srv4), atomic_load(&own4));
    CHECK_EQ(liblock_destroy(&l4), 0);
    return th_failures;
}

/* ---- 5 ------------------------------------------------------------------ */
static liblock_t l5;
static _Atomic int stop5;
static long c5;
static void *inc5(void *arg)
{
    (void)arg;
    c5++;
    return NULL;
}
static _Atomic int warm5; /* threads past their first execute */
static void *t5(void *arg)
{
    (void)arg;
    liblock_execute(&l5, inc5, NULL);
    atomic_fetch_add(&warm5, 1);
    while (!atomic_load(&stop5))
        liblock_execute(&l5, inc5, NULL);
    return NULL;
}
static int test_fork(void)
{
    th_context = "fork";
    if (th_under_tsan()) {
        th_skip("fork: ThreadSanitizer cannot create threads after a multi-threaded fork");
        return 0;
    }
    setenv("LIBLOCK_MPSERVER_WINDOW_NS", "60000000000", 1); /* the server runs (almost) every execute */
    CHECK_EQ(init_mps(&l5, -1), 0);
    unsetenv("LIBLOCK_MPSERVER_WINDOW_NS");
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, t5, NULL);
    /* Fork only once both threads are past their first execute, which
     * allocates their records: a fork while another thread is inside
     * malloc is safe with glibc's malloc (it locks its arenas around fork),
     * not with the AddressSanitizer allocator of this toolchain, where the
     * child's first allocation can then wait for good (seen once: the first
     * fork's child hung under ASan). */
    while (atomic_load(&warm5) < 2)
        usleep(1000);
    for (int k = 0; k < 40; k++) {
        usleep(2000);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(20);
            long before = c5;
            liblock_lock(&l5);
            c5++;
            liblock_unlock(&l5);
            if (liblock_trylock(&l5) == 0)
                liblock_unlock(&l5);
            liblock_execute(&l5, inc5, NULL);
            _exit(c5 == before + 2 ? 0 : 1);
        }
        int st = 0;
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d: status %#x", k, st);
    }
    atomic_store(&stop5, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(liblock_destroy(&l5), 0);
    return th_failures;
}

/* ---- 6 ------------------------------------------------------------------ */
static int test_spin_requests(void)
{
    th_context = "spin policy: request path";
    liblock_t l;
    CHECK_EQ(init_mps(&l, LIBLOCK_WAIT_SPIN), 0);
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(liblock_lock(&l), 0);
        CHECK_EQ(liblock_unlock(&l), 0);
    }
    pid_t ran = 0;
    liblock_execute(&l, who, &ran);
    CHECK(ran != tid(), "spin: execute ran on the server");
    CHECK(SERVED(&l) >= 11, "served %llu", (unsigned long long)SERVED(&l));
    CHECK_EQ(liblock_destroy(&l), 0);
    return th_failures;
}

/* ---- 7 ------------------------------------------------------------------ */
static int test_pinned_requests(void)
{
    th_context = "pinned server: request path";
    setenv("LIBLOCK_MPSERVER_CPU", "0", 1);
    liblock_t l;
    CHECK_EQ(init_mps(&l, -1), 0);
    unsetenv("LIBLOCK_MPSERVER_CPU");
    for (int i = 0; i < 10; i++) {
        CHECK_EQ(liblock_lock(&l), 0);
        CHECK_EQ(liblock_unlock(&l), 0);
    }
    CHECK(SERVED(&l) >= 10, "served %llu", (unsigned long long)SERVED(&l));
    CHECK_EQ(liblock_destroy(&l), 0);
    return th_failures;
}

/* run fn in a child with a watchdog; returns 0 if it passed */
static int in_child(const char *name, int (*fn)(void), unsigned secs)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        th_failures = th_checks = 0; /* this child's own */
        th_watchdog(secs);
        int f = fn();
        fflush(stdout);
        _exit(f ? 1 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    th_checks++;
    if (!ok) {
        th_failures++;
        fprintf(stderr, "FAIL %s: child status %#x\n", name, st);
    } else {
        printf("  %s ok\n", name);
    }
    return !ok;
}

static int pol_c, win_c;
static const int pols[] = {LIBLOCK_WAIT_SPIN_THEN_PARK, LIBLOCK_WAIT_PARK, LIBLOCK_WAIT_YIELD};
static const char *const wins[] = {NULL, "1", "60000000000"};
static int counts_child(void)
{
    th_context = "exact counts";
    return run_counts(pols[pol_c], wins[win_c]);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    unsetenv("LIBLOCK_MPSERVER_DIRECT");
    in_child("1 lock/unlock without requests", test_lock_no_requests, 60);
    in_child("2 sleeping server not woken", test_asleep_runs_own, 60);
    in_child("3 word release wakes the server", test_release_wakes_server, 40);
    for (pol_c = 0; pol_c < 3; pol_c++)
        for (win_c = 0; win_c < 3; win_c++) {
            char name[96];
            snprintf(name, sizeof name, "4 exact counts, 32 threads, %s, window %s", liblock_wait_name(pols[pol_c]),
                     wins[win_c] ? wins[win_c] : "default");
            in_child(name, counts_child, 120);
        }
    in_child("5 fork while the server holds the word", test_fork, 120);
    in_child("6 spin policy keeps the request path", test_spin_requests, 60);
    in_child("7 a pinned server keeps the request path", test_pinned_requests, 60);
    printf("test_mps_oversub: %d checks, %d failed\n", th_checks, th_failures);
    return th_failures ? 1 : 0;
}
