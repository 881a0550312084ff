/*
 * test_mcstp - behaviour of mcs-tp beyond test_stress:
 *   - the thesis's last_lock fix (seed 000 section 3.5, line 38): a waiter
 *     that times out while the holder keeps the lock must reclaim its place
 *     in the queue.  Run in a child process with a watchdog: with the fix
 *     the child finishes; with the fix disabled (LIBLOCK_MCSTP_UNSAFE_
 *     DISABLE_FIX=1) the waiter inserts its node a second time, the queue
 *     gets a cycle and the child deadlocks -- the watchdog turns that into
 *     a non-zero exit, which is what the test expects.  The holder releases
 *     only after the waiter has timed out twice (debug counter), so the
 *     scenario does not depend on timing;
 *   - 64 threads on 2 cores with the yield policy (waiters descheduled
 *     while queued), default parameters and tiny ones that make waiters time
 *     out and releasers remove them all the time: exact counts, exclusion,
 *     no deadlock;
 *   - trylock, bad input, a condition-variable bounded buffer.
 * Bounded by watchdogs; no timing assertions.
 */
#include "harness.h"

#include <sys/wait.h>

unsigned long ll_mcstp_debug_timeouts(liblock_t *l, unsigned long *failed);

static liblock_t L;

static int init_lock(int policy)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    return liblock_init(&L, "mcs-tp", &a);
}

/* ---- the last_lock fix ---------------------------------------------------- */
static void child_alarm(int sig)
{
    (void)sig;
    _exit(3);
}

static void *waiter_main(void *a)
{
    (void)a;
    if (liblock_lock(&L))
        return (void *)1;
    liblock_unlock(&L);
    return NULL;
}

static int fix_child(int disable_fix)
{
    signal(SIGALRM, child_alarm);
    alarm(3);
    if (disable_fix)
        setenv("LIBLOCK_MCSTP_UNSAFE_DISABLE_FIX", "1", 1);
    setenv("LIBLOCK_MCSTP_PATIENCE_NS", "20000", 1);
    if (init_lock(LIBLOCK_WAIT_YIELD))
        return 4;
    if (liblock_lock(&L))
        return 5;
    pthread_t t;
    pthread_create(&t, NULL, waiter_main, NULL);
    /* hold until the waiter has timed out twice: its second attempt had to
     * deal with its leftover place in the queue */
    while (ll_mcstp_debug_timeouts(&L, NULL) < 2)
        usleep(500);
    liblock_unlock(&L);
    void *rv;
    pthread_join(t, &rv);
    if (rv)
        return 6;
    /* a few more rounds, both threads */
    for (int i = 0; i < 50; i++) {
        pthread_create(&t, NULL, waiter_main, NULL);
        liblock_lock(&L);
        liblock_unlock(&L);
        pthread_join(t, NULL);
    }
    return liblock_destroy(&L) ? 7 : 0;
}

static int run_fix_child(int disable_fix)
{
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0)
        _exit(fix_child(disable_fix));
    int st = 0;
    waitpid(p, &st, 0);
    if (WIFEXITED(st))
        return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void test_fix(void)
{
    th_context = "last_lock fix";
    int with = run_fix_child(0);
    CHECK(with == 0, "with the fix: child exited %d (3 = deadlock watchdog)", with);
    int without = run_fix_child(1);
    CHECK(without != 0, "with the fix disabled the double insertion went unnoticed (child exited 0)");
    printf("  last_lock fix: with fix child exit %d, without fix child exit %d (3 = deadlock caught by watchdog)\n",
           with, without);
}

/* ---- oversubscription ---------------------------------------------------------- */
static volatile long counter;
static volatile int occupied, violations;

struct w {
    pthread_t th;
    long iters, done;
    int err;
};

static void *worker(void *a)
{
    struct w *w = a;
    for (long i = 0; i < w->iters; i++) {
        int e = liblock_lock(&L);
        if (e) {
            w->err = e;
            break;
        }
        if (occupied)
            violations++;
        occupied = 1;
        long c = counter;
        if ((i & 15) == 0)
            sched_yield(); /* get descheduled while holding, now and then */
        counter = c + 1;
        occupied = 0;
        if ((e = liblock_unlock(&L))) {
            w->err = e;
            break;
        }
        w->done++;
    }
    return NULL;
}

static void run_many(const char *label, int policy, int nthreads, long iters)
{
    CHECK_EQ(init_lock(policy), 0);
    counter = 0;
    occupied = violations = 0;
    struct w *ws = calloc((size_t)nthreads, sizeof *ws);
    for (int i = 0; i < nthreads; i++) {
        ws[i].iters = iters;
        pthread_create(&ws[i].th, NULL, worker, &ws[i]);
    }
    long total = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(ws[i].th, NULL);
        CHECK(ws[i].err == 0, "%s: thread %d error %d", label, i, ws[i].err);
        total += ws[i].done;
    }
    CHECK(total == nthreads * iters, "%s: %ld of %ld sections", label, total, nthreads * iters);
    CHECK(counter == total, "%s: counter %ld != %ld", label, counter, total);
    CHECK(violations == 0, "%s: %d exclusion violations", label, violations);
    unsigned long failed = 0, to = ll_mcstp_debug_timeouts(&L, &failed);
    printf("  %-40s %d threads x %ld: ok, %lu time-outs, %lu removals by releasers\n", label, nthreads, iters, to,
           failed);
    CHECK_EQ(liblock_destroy(&L), 0);
    free(ws);
}

static void test_oversubscribed(void)
{
    th_context = "oversubscribed";
    run_many("yield, default parameters", LIBLOCK_WAIT_YIELD, 64, 200);
    setenv("LIBLOCK_MCSTP_PATIENCE_NS", "2000", 1);
    setenv("LIBLOCK_MCSTP_UPDATE_DELAY_NS", "500", 1);
    setenv("LIBLOCK_MCSTP_MAX_CS_TIME_NS", "5000", 1);
    run_many("yield, patience 2us, update delay 0.5us", LIBLOCK_WAIT_YIELD, 64, 200);
    run_many("spin, patience 2us, update delay 0.5us", LIBLOCK_WAIT_SPIN, 16, 200);
    unsetenv("LIBLOCK_MCSTP_PATIENCE_NS");
    unsetenv("LIBLOCK_MCSTP_UPDATE_DELAY_NS");
    unsetenv("LIBLOCK_MCSTP_MAX_CS_TIME_NS");
}

/* ---- trylock and bad input ------------------------------------------------------ */
static volatile int in_cs, go;

static void *holder(void *a)
{
    (void)a;
    liblock_lock(&L);
    __atomic_store_n(&in_cs, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
        usleep(100);
    liblock_unlock(&L);
    return NULL;
}

static void *try_other(void *a)
{
    (void)a;
    return (void *)(long)liblock_trylock(&L);
}

static void test_trylock_bad_input(void)
{
    th_context = "trylock/bad input";
    CHECK_EQ(init_lock(LIBLOCK_WAIT_SPIN), 0);
    pthread_t t;
    void *rv;
    in_cs = go = 0;
    pthread_create(&t, NULL, holder, NULL);
    while (!__atomic_load_n(&in_cs, __ATOMIC_ACQUIRE))
        usleep(100);
    CHECK_EQ(liblock_trylock(&L), EBUSY);
    CHECK_EQ(liblock_destroy(&L), EBUSY);
    CHECK_EQ(liblock_unlock(&L), EPERM);
    __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    CHECK_EQ(liblock_trylock(&L), 0);
    CHECK_EQ(liblock_trylock(&L), EBUSY);
    CHECK_EQ(liblock_lock(&L), EDEADLK);
    pthread_create(&t, NULL, try_other, NULL);
    pthread_join(t, &rv);
    CHECK_EQ((long)rv, EBUSY);
    CHECK_EQ(liblock_unlock(&L), 0);
    CHECK_EQ(liblock_unlock(&L), EPERM);
    CHECK_EQ(liblock_destroy(&L), 0);
    CHECK_EQ(init_lock(LIBLOCK_WAIT_PARK), ENOTSUP);
    setenv("LIBLOCK_MCSTP_PATIENCE_NS", "-5", 1);
    CHECK_EQ(init_lock(LIBLOCK_WAIT_SPIN), 0); /* warning, default used */
    unsetenv("LIBLOCK_MCSTP_PATIENCE_NS");
    CHECK_EQ(liblock_lock(&L), 0);
    CHECK_EQ(liblock_unlock(&L), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- condition variables ---------------------------------------------------------- */
#define CAP 2
#define ITEMS 400
static liblock_cond_t nf, ne;
static long buf[CAP];
static int head, count;
static long sum, n_consumed;

static void *producer(void *a)
{
    long base = (long)a * 10000;
    for (long i = 0; i < ITEMS; i++) {
        liblock_lock(&L);
        while (count == CAP)
            liblock_cond_wait(&nf, &L);
        buf[(head + count) % CAP] = base + i;
        count++;
        liblock_cond_signal(&ne);
        liblock_unlock(&L);
    }
    return NULL;
}

static void *consumer(void *a)
{
    (void)a;
    for (long i = 0; i < ITEMS; i++) {
        liblock_lock(&L);
        while (count == 0)
            liblock_cond_wait(&ne, &L);
        sum += buf[head];
        head = (head + 1) % CAP;
        count--;
        n_consumed++;
        liblock_cond_signal(&nf);
        liblock_unlock(&L);
    }
    return NULL;
}

static void test_cond(void)
{
    th_context = "cond";
    CHECK_EQ(init_lock(LIBLOCK_WAIT_YIELD), 0);
    liblock_cond_init(&nf, NULL);
    liblock_cond_init(&ne, NULL);
    pthread_t p[8], c[8];
    for (int i = 0; i < 8; i++) {
        pthread_create(&c[i], NULL, consumer, NULL);
        pthread_create(&p[i], NULL, producer, (void *)(long)i);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(p[i], NULL);
        pthread_join(c[i], NULL);
    }
    long expect = 0;
    for (long pi = 0; pi < 8; pi++)
        for (long i = 0; i < ITEMS; i++)
            expect += pi * 10000 + i;
    CHECK_EQ(n_consumed, 8 * ITEMS);
    CHECK_EQ(sum, expect);
    CHECK_EQ(liblock_cond_destroy(&nf), 0);
    CHECK_EQ(liblock_cond_destroy(&ne), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
}

int main(void)
{
    test_fix(); /* forks: first, while this process has one thread */
    th_watchdog(120);
    test_oversubscribed();
    test_trylock_bad_input();
    test_cond();
    return th_report("test_mcstp");
}
