/*
 * test_interpose_sem - semaphores and mostly-LIFO condition variables
 * through the LD_PRELOAD interposer (LIBLOCK_SEM, LIBLOCK_COND=mostly-lifo).
 *
 * Run without arguments (as tests/run.sh does) it is a driver that re-runs
 * itself, and the interposer's mutex test (the programs of ip_topics in
 * interpose_driver.h) with test_interpose_cxx, under the interposer in
 * these configurations (each child bounded by a watchdog and a kill after
 * 60 s; names on the command line restrict the algorithms):
 *   mcs    LIBLOCK_SEM=mostly-lifo LIBLOCK_COND=mostly-lifo LIBLOCK_COND_FIFO_PROB=0
 *          (both strictly LIFO: wake-up order checked; the semaphores take
 *          their probability from the condition variables' variable)
 *   posix  LIBLOCK_SEM=mostly-lifo LIBLOCK_COND=mostly-lifo (P = 0.001)
 *   mcscr  LIBLOCK_SEM=fifo LIBLOCK_COND=mostly-lifo LIBLOCK_COND_FIFO_PROB=1
 *          (FIFO order checked for both)
 *   none   LIBLOCK_SEM=mostly-lifo LIBLOCK_SEM_FIFO_PROB=0 without LIBLOCK_LOCK
 *          (semaphores are independent of the lock)
 *   mcs    without LIBLOCK_SEM: every semaphore is glibc's (the same
 *          semantic checks then run against glibc, which validates them)
 * and every program of ip_topics + test_interpose_cxx (every mutex, condvar,
 * C11, fork check of the interposer's mutex test) under
 * LIBLOCK_COND=mostly-lifo with mcs, posix and mcscr.
 *
 * The child checks, with exact results and no timing thresholds:
 *  - the interposer reports the semaphore kind asked for, and sem_init made
 *    one of its semaphores (liblock_interpose_sem_queued >= 0);
 *  - POSIX semantics: sem_init EINVAL above SEM_VALUE_MAX, getvalue,
 *    trywait EAGAIN, timedwait/clockwait ETIMEDOUT not before the deadline,
 *    a unit taken by timedwait even when its deadline has passed, EINVAL
 *    for a bad timespec (checked first, as glibc does) and a bad clock, post EOVERFLOW at SEM_VALUE_MAX (value unchanged), a timedwait
 *    satisfied by a post from another thread, destroy EBUSY with a waiter
 *    (ours only; glibc does not detect it);
 *  - a bounded buffer (3 producers, 3 consumers, semaphores for free and
 *    full slots; consumers take units with sem_wait, sem_trywait loops and
 *    sem_timedwait loops): every item consumed exactly once;
 *  - wake-up order (strict LIFO or FIFO configurations only): three threads
 *    queued one after another are woken in the order the kind dictates,
 *    for semaphores and condition variables;
 *  - a signal handler run while a thread is blocked in sem_wait does not
 *    end the wait (documented: never EINTR); the post does;
 *  - pass-through: a process-shared semaphore (also on memory that held
 *    one of ours) and a named one (sem_open) are glibc's and work, across
 *    fork for the shared one;
 *  - fork: the child can use a semaphore the parent made, with its value.
 */
#include "interpose_driver.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <semaphore.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>

/* ---------------------------------------------------------------- driver */
/* envs: NULL-terminated "NAME=value" list added to a clean LIBLOCK_* set;
 * algo NULL: no LIBLOCK_LOCK. */
static int run_child(const char *prog, const char *lib, const char *algo, const char *const *envs)
{
    struct ip_child c = {.lib = lib, .algo = algo, .policy = algo ? ip_policy(algo) : NULL,
                         .marker = IP_CHILD_MARKER, .envs = envs, .clean = 1};
    return ip_run(prog, &c);
}

struct config {
    const char *algo; /* NULL: no LIBLOCK_LOCK */
    const char *envs[8];
};

static const struct config configs[] = {
    {"mcs", {"LIBLOCK_SEM=mostly-lifo", "LIBLOCK_COND=mostly-lifo", "LIBLOCK_COND_FIFO_PROB=0",
             "LIBLOCK_TEST_SEM=mostly-lifo", "LIBLOCK_TEST_ORDER=lifo", "LIBLOCK_TEST_CORDER=lifo", NULL}},
    {"posix", {"LIBLOCK_SEM=mostly-lifo", "LIBLOCK_COND=mostly-lifo", "LIBLOCK_TEST_SEM=mostly-lifo", NULL}},
    {"mcscr", {"LIBLOCK_SEM=fifo", "LIBLOCK_COND=mostly-lifo", "LIBLOCK_COND_FIFO_PROB=1", "LIBLOCK_TEST_SEM=fifo",
               "LIBLOCK_TEST_ORDER=fifo", "LIBLOCK_TEST_CORDER=fifo", NULL}},
    {NULL, {"LIBLOCK_SEM=mostly-lifo", "LIBLOCK_SEM_FIFO_PROB=0", "LIBLOCK_TEST_SEM=mostly-lifo",
            "LIBLOCK_TEST_ORDER=lifo", NULL}},
    {"mcs", {"LIBLOCK_TEST_SEM=none", NULL}},
};

static int driver(int argc, char **argv)
{
    /* the programs of the interposer's mutex test, then test_interpose_cxx */
    enum { NOTHER = sizeof ip_topics / sizeof *ip_topics };
    char other[NOTHER][4200];
    for (int t = 0; t < NOTHER; t++)
        th_sibling_path(argv[0], ip_topics[t] ? ip_topics[t] : "test_interpose_cxx", other[t], sizeof other[t]);
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report("test_interpose_sem");
    for (int t = 0; t < NOTHER; t++)
        CHECK(access(other[t], X_OK) == 0, "%s missing", other[t]);
    for (size_t i = 0; i < sizeof configs / sizeof *configs; i++) {
        const struct config *c = &configs[i];
        const char *filter = c->algo ? c->algo : "mcs";
        if (!th_selected(argc, argv, filter) || liblock_algorithm_info(filter, &(liblock_algorithm_info_t){0}))
            continue;
        uint64_t t0 = th_now_ns();
        int rc = run_child(argv[0], real, c->algo, c->envs);
        char desc[512] = "";
        for (const char *const *e = c->envs; *e; e++)
            if (strncmp(*e, "LIBLOCK_TEST_", 13) != 0)
                snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " %s", *e);
        CHECK(rc == 0, "semaphore test under %s with%s: exit %d", c->algo ? c->algo : "(no lock)", desc, rc);
        printf("  sem   %-6s%s: %s (%.1f s)\n", c->algo ? c->algo : "-", desc, rc == 0 ? "ok" : "FAILED",
               (th_now_ns() - t0) / 1e9);
        fflush(stdout);
    }
    static const char *const lifo_algos[] = {"mcs", "posix", "mcscr"};
    static const char *const lifo_env[] = {"LIBLOCK_COND=mostly-lifo", NULL};
    for (size_t i = 0; i < 3; i++) {
        if (!th_selected(argc, argv, lifo_algos[i]) ||
            liblock_algorithm_info(lifo_algos[i], &(liblock_algorithm_info_t){0}))
            continue;
        uint64_t t0 = th_now_ns();
        int failed = 0;
        for (int t = 0; t < NOTHER; t++) {
            const char *name = strrchr(other[t], '/') + 1;
            int rc = run_child(other[t], real, lifo_algos[i], lifo_env);
            CHECK(rc == 0, "%s under %s with LIBLOCK_COND=mostly-lifo: exit %d", name, lifo_algos[i], rc);
            failed += rc != 0;
        }
        printf("  cond  %-6s LIBLOCK_COND=mostly-lifo: %d programs of the mutex test + test_interpose_cxx: %s (%.1f s)\n",
               lifo_algos[i], NOTHER - 1, failed ? "FAILED" : "ok", (th_now_ns() - t0) / 1e9);
        fflush(stdout);
    }
    free(real);
    return th_report("test_interpose_sem");
}

/* ---------------------------------------------------------------- helpers */
static int (*sem_queued)(sem_t *); /* interposer's liblock_interpose_sem_queued: -1 if not ours */
static int ours;                   /* LIBLOCK_SEM in effect */

/* -1 with errno, or 0 -> 0 / errno value */
static int E(int r) { return r == 0 ? 0 : (r == -1 ? errno : -1000 - r); }

static void wait_queued(sem_t *s, int n)
{
    while (sem_queued(s) < n)
        usleep(200);
}

/* ---------------------------------------------------------------- semantics */
typedef struct {
    sem_t *s;
    int op; /* 0 sem_wait, 1 sem_timedwait (10 s), 2 post after a waiter queued (ours) or a pause */
    int result;
    int id, *order, *norder;
    pthread_mutex_t *om;
} th_arg_t;

static void *sem_thread(void *p)
{
    th_arg_t *a = p;
    struct timespec dl;
    switch (a->op) {
    case 0:
        a->result = E(sem_wait(a->s));
        break;
    case 1:
        ts_after(CLOCK_REALTIME, &dl, 10000);
        a->result = E(sem_timedwait(a->s, &dl));
        break;
    case 2:
        if (sem_queued(a->s) >= 0)
            wait_queued(a->s, 1);
        else
            usleep(20000);
        a->result = E(sem_post(a->s));
        break;
    }
    if (a->order) {
        pthread_mutex_lock(a->om);
        a->order[(*a->norder)++] = a->id;
        pthread_mutex_unlock(a->om);
    }
    return NULL;
}

static void test_semantics(void)
{
    th_context = "semantics";
    sem_t s;
    CHECK_EQ(E(sem_init(&s, 0, (unsigned)SEM_VALUE_MAX + 1u)), EINVAL);
    CHECK_EQ(E(sem_init(&s, 0, 2)), 0);
    CHECK_EQ(sem_queued(&s), ours ? 0 : -1); /* ours iff LIBLOCK_SEM */
    int v = -1;
    CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
    CHECK_EQ(v, 2);
    CHECK_EQ(E(sem_trywait(&s)), 0);
    CHECK_EQ(E(sem_wait(&s)), 0);
    CHECK_EQ(E(sem_trywait(&s)), EAGAIN);
    CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
    CHECK_EQ(v, 0);

    th_context = "timedwait";
    struct timespec dl;
    ts_after(CLOCK_REALTIME, &dl, 30);
    CHECK_EQ(E(sem_timedwait(&s, &dl)), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_REALTIME, &dl), "sem_timedwait returned before its deadline");
    ts_after(CLOCK_MONOTONIC, &dl, 30);
    CHECK_EQ(E(sem_clockwait(&s, CLOCK_MONOTONIC, &dl)), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_MONOTONIC, &dl), "sem_clockwait returned before its deadline");
    ts_after(CLOCK_REALTIME, &dl, 30);
    CHECK_EQ(E(sem_clockwait(&s, CLOCK_REALTIME, &dl)), ETIMEDOUT);
    struct timespec past = {1, 0};
    CHECK_EQ(E(sem_timedwait(&s, &past)), ETIMEDOUT);
    struct timespec bad = {0, 1000000000L};
    CHECK_EQ(E(sem_timedwait(&s, &bad)), EINVAL);
    ts_after(CLOCK_MONOTONIC, &dl, 30);
    CHECK_EQ(E(sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &dl)), EINVAL);
    CHECK_EQ(E(sem_post(&s)), 0);
    CHECK_EQ(E(sem_timedwait(&s, &bad)), EINVAL); /* checked first, as glibc does; nothing taken */
    CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
    CHECK_EQ(v, 1);
    CHECK_EQ(E(sem_timedwait(&s, &past)), 0);     /* a unit is there: taken whatever the deadline */
    CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
    CHECK_EQ(v, 0);

    th_context = "timedwait + post";
    {
        th_arg_t w = {.s = &s, .op = 1}, p = {.s = &s, .op = 2};
        pthread_t tw, tp;
        pthread_create(&tw, NULL, sem_thread, &w);
        pthread_create(&tp, NULL, sem_thread, &p);
        pthread_join(tw, NULL);
        pthread_join(tp, NULL);
        CHECK_EQ(w.result, 0);
        CHECK_EQ(p.result, 0);
        CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
        CHECK_EQ(v, 0);
    }

    if (ours) {
        th_context = "destroy with a waiter";
        th_arg_t w = {.s = &s, .op = 0};
        pthread_t tw;
        pthread_create(&tw, NULL, sem_thread, &w);
        wait_queued(&s, 1);
        CHECK_EQ(E(sem_destroy(&s)), EBUSY);
        CHECK_EQ(E(sem_post(&s)), 0); /* intact: the waiter gets the unit */
        pthread_join(tw, NULL);
        CHECK_EQ(w.result, 0);
    }
    CHECK_EQ(E(sem_destroy(&s)), 0);

    th_context = "overflow";
    CHECK_EQ(E(sem_init(&s, 0, SEM_VALUE_MAX)), 0);
    CHECK_EQ(E(sem_post(&s)), EOVERFLOW);
    CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
    CHECK_EQ(v, SEM_VALUE_MAX);
    CHECK_EQ(E(sem_trywait(&s)), 0);
    CHECK_EQ(E(sem_post(&s)), 0);
    CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
    CHECK_EQ(v, SEM_VALUE_MAX);
    CHECK_EQ(E(sem_destroy(&s)), 0);

    th_context = "re-init";
    CHECK_EQ(E(sem_init(&s, 0, 1)), 0);
    CHECK_EQ(E(sem_init(&s, 0, 3)), 0); /* again without destroy (undefined in POSIX, but common) */
    CHECK_EQ(E(sem_getvalue(&s, &v)), 0);
    CHECK_EQ(v, 3);
    CHECK_EQ(E(sem_destroy(&s)), 0);
}

/* ---------------------------------------------------------------- bounded buffer */
#define BB_CAP 8
#define BB_PROD 3
#define BB_CONS 3
static sem_t bb_free, bb_full;
static pthread_mutex_t bb_mutex = PTHREAD_MUTEX_INITIALIZER;
static long bb_buf[BB_CAP];
static int bb_head, bb_tail, bb_items;
static unsigned char *bb_seen;
static long bb_got, bb_dup, bb_range;

static void *bb_producer(void *arg)
{
    int p = (int)(intptr_t)arg;
    for (int i = 0; i < bb_items; i++) {
        while (sem_wait(&bb_free) != 0)
            ;
        pthread_mutex_lock(&bb_mutex);
        bb_buf[bb_tail] = (long)p * bb_items + i;
        bb_tail = (bb_tail + 1) % BB_CAP;
        pthread_mutex_unlock(&bb_mutex);
        sem_post(&bb_full);
    }
    return NULL;
}

static void *bb_consumer(void *arg)
{
    int mode = (int)(intptr_t)arg; /* 0 wait, 1 trywait loop, 2 timedwait loop */
    long n = bb_items;             /* BB_CONS == BB_PROD: each takes as many as one producer makes */
    for (long i = 0; i < n; i++) {
        if (mode == 0) {
            while (sem_wait(&bb_full) != 0)
                ;
        } else if (mode == 1) {
            while (sem_trywait(&bb_full) != 0) {
                if (errno != EAGAIN)
                    __atomic_add_fetch(&bb_range, 1, __ATOMIC_RELAXED); /* wrong error */
                sched_yield();
            }
        } else {
            for (;;) {
                struct timespec dl;
                ts_after(CLOCK_REALTIME, &dl, 2);
                if (sem_timedwait(&bb_full, &dl) == 0)
                    break;
                if (errno != ETIMEDOUT)
                    __atomic_add_fetch(&bb_range, 1, __ATOMIC_RELAXED);
            }
        }
        pthread_mutex_lock(&bb_mutex);
        long v = bb_buf[bb_head];
        bb_head = (bb_head + 1) % BB_CAP;
        if (v < 0 || v >= (long)BB_PROD * bb_items)
            bb_range++;
        else if (bb_seen[v]++)
            bb_dup++;
        bb_got++;
        pthread_mutex_unlock(&bb_mutex);
        sem_post(&bb_free);
    }
    return NULL;
}

static void test_buffer(void)
{
    th_context = "bounded buffer";
    bb_items = th_scale_small() ? 300 : 3000;
    bb_seen = calloc((size_t)BB_PROD * bb_items, 1);
    CHECK_EQ(E(sem_init(&bb_free, 0, BB_CAP)), 0);
    CHECK_EQ(E(sem_init(&bb_full, 0, 0)), 0);
    CHECK_EQ(sem_queued(&bb_full), ours ? 0 : -1);
    pthread_t p[BB_PROD], c[BB_CONS];
    for (int i = 0; i < BB_CONS; i++)
        pthread_create(&c[i], NULL, bb_consumer, (void *)(intptr_t)i);
    for (int i = 0; i < BB_PROD; i++)
        pthread_create(&p[i], NULL, bb_producer, (void *)(intptr_t)i);
    for (int i = 0; i < BB_PROD; i++)
        pthread_join(p[i], NULL);
    for (int i = 0; i < BB_CONS; i++)
        pthread_join(c[i], NULL);
    CHECK_EQ(bb_got, (long)BB_PROD * bb_items);
    CHECK_EQ(bb_dup, 0);
    CHECK_EQ(bb_range, 0);
    long missing = 0;
    for (long i = 0; i < (long)BB_PROD * bb_items; i++)
        missing += bb_seen[i] != 1;
    CHECK_EQ(missing, 0);
    int v = -1;
    sem_getvalue(&bb_free, &v);
    CHECK_EQ(v, BB_CAP);
    sem_getvalue(&bb_full, &v);
    CHECK_EQ(v, 0);
    CHECK_EQ(E(sem_destroy(&bb_free)), 0);
    CHECK_EQ(E(sem_destroy(&bb_full)), 0);
    free(bb_seen);
}

/* ---------------------------------------------------------------- wake-up order */
/* Wait until *v, read under m, exceeds i (a thread has got that far). */
static void wait_above(pthread_mutex_t *m, const int *v, int i)
{
    for (;;) {
        pthread_mutex_lock(m);
        int k = *v;
        pthread_mutex_unlock(m);
        if (k > i)
            return;
        usleep(200);
    }
}

static void test_sem_order(const char *want)
{
    th_context = "semaphore wake-up order";
    sem_t s;
    CHECK_EQ(E(sem_init(&s, 0, 0)), 0);
    pthread_mutex_t om = PTHREAD_MUTEX_INITIALIZER;
    int order[3] = {0}, n = 0;
    th_arg_t a[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) { /* queued one after another */
        a[i] = (th_arg_t){.s = &s, .op = 0, .id = i + 1, .order = order, .norder = &n, .om = &om};
        pthread_create(&t[i], NULL, sem_thread, &a[i]);
        wait_queued(&s, i + 1);
    }
    for (int i = 0; i < 3; i++) { /* one unit at a time: the woken thread records itself */
        CHECK_EQ(E(sem_post(&s)), 0);
        wait_above(&om, &n, i);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        CHECK_EQ(a[i].result, 0);
    }
    int lifo = strcmp(want, "lifo") == 0;
    for (int i = 0; i < 3; i++)
        CHECK(order[i] == (lifo ? 3 - i : i + 1), "%s: woken %d %d %d", want, order[0], order[1], order[2]);
    CHECK_EQ(E(sem_destroy(&s)), 0);
}

static pthread_mutex_t co_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t co_cond = PTHREAD_COND_INITIALIZER;
static int co_waiting, co_tokens, co_order[3], co_n;

static void *co_waiter(void *arg)
{
    int id = (int)(intptr_t)arg;
    pthread_mutex_lock(&co_mutex);
    co_waiting++; /* seen by the main thread only after we released the mutex inside the wait */
    while (co_tokens == 0)
        pthread_cond_wait(&co_cond, &co_mutex);
    co_tokens--;
    co_order[co_n++] = id;
    pthread_mutex_unlock(&co_mutex);
    return NULL;
}

static void test_cond_order(const char *want)
{
    th_context = "condition variable wake-up order";
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        pthread_create(&t[i], NULL, co_waiter, (void *)(intptr_t)(i + 1));
        wait_above(&co_mutex, &co_waiting, i); /* waiter i+1 increments under the mutex, then queues and releases it in the wait */
    }
    for (int i = 0; i < 3; i++) {
        pthread_mutex_lock(&co_mutex);
        co_tokens++;
        pthread_cond_signal(&co_cond);
        pthread_mutex_unlock(&co_mutex);
        wait_above(&co_mutex, &co_n, i);
    }
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    int lifo = strcmp(want, "lifo") == 0;
    for (int i = 0; i < 3; i++)
        CHECK(co_order[i] == (lifo ? 3 - i : i + 1), "%s: woken %d %d %d", want, co_order[0], co_order[1], co_order[2]);
}

/* ---------------------------------------------------------------- signals */
static volatile sig_atomic_t sig_seen;
static void on_usr1(int sig) { (void)sig; sig_seen = 1; }

static void test_signal(void)
{
    th_context = "signal during sem_wait";
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1; /* no SA_RESTART: glibc's sem_wait would fail with EINTR */
    sigaction(SIGUSR1, &sa, NULL);
    sem_t s;
    CHECK_EQ(E(sem_init(&s, 0, 0)), 0);
    th_arg_t w = {.s = &s, .op = 0, .result = -1};
    pthread_t tw;
    pthread_create(&tw, NULL, sem_thread, &w);
    wait_queued(&s, 1);
    pthread_kill(tw, SIGUSR1);
    while (!sig_seen)
        usleep(200);
    wait_queued(&s, 1); /* the handler ran and the thread is (still or again) waiting */
    CHECK_EQ(E(sem_post(&s)), 0);
    pthread_join(tw, NULL);
    CHECK_EQ(w.result, 0);
    CHECK_EQ(E(sem_destroy(&s)), 0);
    signal(SIGUSR1, SIG_DFL);
}

/* ---------------------------------------------------------------- pass-through */
static void test_passthrough(void)
{
    th_context = "process-shared";
    sem_t *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED, "mmap");
    if (sh == MAP_FAILED)
        return;
    /* the memory first holds one of ours (a stale marker after destroy must not confuse glibc's) */
    CHECK_EQ(E(sem_init(sh, 0, 0)), 0);
    CHECK_EQ(E(sem_destroy(sh)), 0);
    CHECK_EQ(E(sem_init(&sh[1], 0, 0)), 0); /* one of ours, then re-initialised as shared */
    CHECK_EQ(E(sem_init(&sh[1], 1, 0)), 0);
    CHECK_EQ(sem_queued(&sh[1]), -1);
    CHECK_EQ(E(sem_destroy(&sh[1])), 0);
    CHECK_EQ(E(sem_init(sh, 1, 0)), 0);
    CHECK_EQ(sem_queued(sh), -1); /* glibc's */
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 100; i++)
            if (sem_post(sh) != 0)
                _exit(1);
        _exit(0);
    }
    int got = 0;
    for (int i = 0; i < 100; i++)
        got += sem_wait(sh) == 0;
    CHECK_EQ(got, 100);
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "posting child: status 0x%x", st);
    CHECK_EQ(E(sem_trywait(sh)), EAGAIN);
    CHECK_EQ(E(sem_destroy(sh)), 0);
    munmap(sh, 4096);

    th_context = "sem_open";
    char name[64];
    snprintf(name, sizeof name, "/liblock-test-sem-%d", (int)getpid());
    sem_t *ns = sem_open(name, O_CREAT | O_EXCL, 0600, 1);
    CHECK(ns != SEM_FAILED, "sem_open: %s", strerror(errno));
    if (ns == SEM_FAILED)
        return;
    sem_unlink(name);
    CHECK_EQ(sem_queued(ns), -1);
    int v = -1;
    CHECK_EQ(E(sem_getvalue(ns, &v)), 0);
    CHECK_EQ(v, 1);
    CHECK_EQ(E(sem_trywait(ns)), 0);
    CHECK_EQ(E(sem_trywait(ns)), EAGAIN);
    struct timespec dl;
    ts_after(CLOCK_REALTIME, &dl, 20);
    CHECK_EQ(E(sem_timedwait(ns, &dl)), ETIMEDOUT);
    th_arg_t w = {.s = ns, .op = 0, .result = -1}, p = {.s = ns, .op = 2, .result = -1};
    pthread_t tw, tp;
    pthread_create(&tw, NULL, sem_thread, &w);
    pthread_create(&tp, NULL, sem_thread, &p);
    pthread_join(tw, NULL);
    pthread_join(tp, NULL);
    CHECK_EQ(w.result, 0);
    CHECK_EQ(p.result, 0);
    CHECK_EQ(E(sem_close(ns)), 0);
}

/* ---------------------------------------------------------------- fork */
static void test_fork(void)
{
    th_context = "fork";
    sem_t s;
    CHECK_EQ(E(sem_init(&s, 0, 2)), 0);
    th_arg_t w = {.s = &s, .op = 0};
    sem_t z;
    CHECK_EQ(E(sem_init(&z, 0, 0)), 0);
    th_arg_t zw = {.s = &z, .op = 0};
    pthread_t tz;
    pthread_create(&tz, NULL, sem_thread, &zw); /* queued on z at fork time */
    if (ours)
        wait_queued(&z, 1);
    pid_t pid = fork();
    if (pid == 0) {
        int v = -1, ok = 1;
        ok &= sem_getvalue(&s, &v) == 0 && v == 2;
        ok &= sem_trywait(&s) == 0 && sem_wait(&s) == 0;
        ok &= sem_trywait(&s) == -1 && errno == EAGAIN;
        ok &= sem_post(&s) == 0 && sem_getvalue(&s, &v) == 0 && v == 1;
        /* z's waiter is a thread the child does not have: a post must stay a unit */
        ok &= sem_post(&z) == 0 && sem_getvalue(&z, &v) == 0 && v == 1 && sem_trywait(&z) == 0;
        pthread_t t;
        w.s = &s;
        pthread_create(&t, NULL, sem_thread, &w);
        pthread_join(t, NULL);
        ok &= w.result == 0;
        ok &= sem_destroy(&s) == 0;
        _exit(ok ? 0 : 1);
    }
    int st = -1;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: status 0x%x", st);
    CHECK_EQ(E(sem_post(&z)), 0);
    pthread_join(tz, NULL);
    CHECK_EQ(zw.result, 0);
    CHECK_EQ(E(sem_destroy(&s)), 0);
    CHECK_EQ(E(sem_destroy(&z)), 0);
}

/* ---------------------------------------------------------------- child main */
static int child(void)
{
    th_watchdog(40);
    const char *want = getenv("LIBLOCK_TEST_SEM");
    const char *order = getenv("LIBLOCK_TEST_ORDER");
    const char *corder = getenv("LIBLOCK_TEST_CORDER");
    const char *(*kind)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_sem");
    sem_queued = (int (*)(sem_t *))dlsym(RTLD_DEFAULT, "liblock_interpose_sem_queued");
    th_context = "interposed";
    CHECK(kind && sem_queued, "liblock_interpose_sem not found: interposer not preloaded");
    if (!kind || !sem_queued || !want)
        return th_report("test_interpose_sem");
    const char *got = kind();
    ours = strcmp(want, "none") != 0;
    CHECK(ours ? got && strcmp(got, want) == 0 : got == NULL, "interposer reports semaphores '%s', expected '%s'",
          got ? got : "(glibc)", want);

    test_semantics();
    test_buffer();
    if (ours && order)
        test_sem_order(order);
    if (corder)
        test_cond_order(corder);
    if (ours)
        test_signal();
    test_passthrough();
    test_fork();
    char name[160];
    snprintf(name, sizeof name, "test_interpose_sem[%s, sem %s]", getenv("LIBLOCK_LOCK") ? getenv("LIBLOCK_LOCK") : "-",
             want);
    return th_report(name);
}

int main(int argc, char **argv)
{
    if (getenv("LIBLOCK_INTERPOSE_TEST_CHILD"))
        return child();
    th_watchdog(300);
    return driver(argc, argv);
}
