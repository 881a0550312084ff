/*
 * test_interpose_deadline - deadlines far away under the LD_PRELOAD
 * interposer behave as glibc's: deadlines far in the future (tv_sec
 * LONG_MAX, 2e10) in pthread_cond_timedwait / clockwait (both clocks, and
 * a condition variable with the monotonic clock), cnd_timedwait,
 * sem_timedwait, sem_clockwait, pthread_mutex_timedlock / clocklock and
 * mtx_timedlock wait until the wake-up instead of returning ETIMEDOUT;
 * deadlines far in the past (tv_sec -1, LONG_MIN) in the condition waits
 * and the semaphore waits give ETIMEDOUT.
 *
 * Run without arguments (as tests/run.sh does) it is a driver
 * (interpose_driver.h, IP_COND_KINDS): it runs itself once natively (the
 * checks then run against glibc, which validates them) and then under the
 * interposer for every algorithm with the `cond` property and every
 * condition-variable kind (the default FIFO queue with LIBLOCK_SEM=fifo,
 * mostly-lifo with LIBLOCK_SEM=mostly-lifo, LIBLOCK_COND=glibc,
 * LIBLOCK_COND_GENERIC=1); the semaphore checks run natively and in the
 * first two kinds only (elsewhere the semaphores are glibc's).  Names on
 * the command line restrict the algorithms.  Exact results, no timing
 * thresholds (every bound is a watchdog that only a hang reaches).
 */
#include "interpose_waiters.h"

#include <limits.h>

static const time_t far_secs[] = {LONG_MAX, 20000000000L};

static void far_cond(pthread_cond_t *c, int how, time_t sec, long nsec)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld", how_name(how), (long long)sec);
    th_context = ctx;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int pred = 0;
    struct waiter w = {.m = &m, .c = c, .how = how, .pred = &pred, .deadline = {sec, nsec}};
    pthread_t t;
    CHECK_EQ(start_waiter(&t, &w), 0);
    pthread_mutex_lock(&m);
    pred = 1;
    pthread_cond_signal(c);
    pthread_mutex_unlock(&m);
    if (join_within(t, NULL, JOIN_S)) {
        rescue(t, &w, "far-deadline waiter");
        return;
    }
    CHECK(atomic_load(&w.result) == 0, "the wait returned %d (%s) instead of being signalled",
          atomic_load(&w.result), strerror(atomic_load(&w.result)));
    CHECK_EQ(atomic_load(&w.got), 1);
}

static void past_cond(pthread_cond_t *c, int how, time_t sec)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld", how_name(how), (long long)sec);
    th_context = ctx;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int pred = 0;
    struct waiter w = {.m = &m, .c = c, .how = how, .pred = &pred, .deadline = {sec, 0}};
    pthread_mutex_lock(&m);
    CHECK_EQ(wait_once(&w), ETIMEDOUT);
    pthread_mutex_unlock(&m);
}

struct semfar {
    sem_t *s;
    int clk; /* -1: sem_timedwait */
    struct timespec d;
    _Atomic pid_t tid;
    _Atomic int result;
};

static void *semfar_main(void *arg)
{
    struct semfar *f = arg;
    atomic_store(&f->tid, gettid());
    int r = f->clk < 0 ? sem_timedwait(f->s, &f->d) : sem_clockwait(f->s, f->clk, &f->d);
    atomic_store(&f->result, r ? errno : 0);
    return NULL;
}

static void far_sem(int clk, time_t sec)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld",
             clk < 0 ? "sem_timedwait" : clk == CLOCK_MONOTONIC ? "sem_clockwait(MONOTONIC)" : "sem_clockwait(REALTIME)",
             (long long)sec);
    th_context = ctx;
    sem_t s;
    CHECK_EQ(sem_init(&s, 0, 0), 0);
    struct semfar f = {.s = &s, .clk = clk, .d = {sec, 0}, .result = -1};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, semfar_main, &f), 0);
    for (int i = 0; i < 25000 && !atomic_load(&f.tid); i++)
        usleep(200);
    CHECK_EQ(wait_asleep(atomic_load(&f.tid)), 0);
    CHECK_EQ(sem_post(&s), 0);
    if (join_within(t, NULL, JOIN_S)) {
        sem_rescue(t, &s, "far-deadline sem waiter");
        return;
    }
    CHECK(atomic_load(&f.result) == 0, "returned %d (%s) instead of taking the posted unit", atomic_load(&f.result),
          strerror(atomic_load(&f.result)));
    if (sec < 0) {
        /* and a deadline in the past with no unit: ETIMEDOUT at once */
    }
    sem_destroy(&s);
}

struct mfar {
    pthread_mutex_t *m;
    int kind; /* 0 timedlock, 1 clocklock MONOTONIC, 2 mtx_timedlock */
    struct timespec d;
    _Atomic pid_t tid;
    _Atomic int result;
};

static void *mfar_main(void *arg)
{
    struct mfar *f = arg;
    atomic_store(&f->tid, gettid());
    int r;
    if (f->kind == 0)
        r = pthread_mutex_timedlock(f->m, &f->d);
    else if (f->kind == 1)
        r = pthread_mutex_clocklock(f->m, CLOCK_MONOTONIC, &f->d);
    else
        r = mtx_timedlock((mtx_t *)f->m, &f->d) == thrd_success ? 0 : ETIMEDOUT;
    atomic_store(&f->result, r);
    if (r == 0)
        pthread_mutex_unlock(f->m);
    return NULL;
}

static void far_mutex(int kind, time_t sec)
{
    static const char *const names[] = {"pthread_mutex_timedlock", "pthread_mutex_clocklock(MONOTONIC)",
                                        "mtx_timedlock"};
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld", names[kind], (long long)sec);
    th_context = ctx;
    pthread_mutex_t m;
    if (kind == 2) {
        CHECK_EQ(mtx_init((mtx_t *)&m, mtx_timed), thrd_success);
    } else {
        pthread_mutex_init(&m, NULL);
    }
    pthread_mutex_lock(&m);
    struct mfar f = {.m = &m, .kind = kind, .d = {sec, 0}, .result = -1};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, mfar_main, &f), 0);
    for (int i = 0; i < 25000 && !atomic_load(&f.tid); i++)
        usleep(200);
    usleep(5000); /* let it try; a wrong deadline returns at once */
    pthread_mutex_unlock(&m);
    if (join_within(t, NULL, JOIN_S)) {
        fprintf(stderr, "FAIL [%s] the timed locker did not end\n", th_context);
        _exit(1);
    }
    CHECK_EQ(atomic_load(&f.result), 0);
    pthread_mutex_destroy(&m);
}

static void child(void)
{
    int sems = test_sems();
    pthread_cond_t c, cm;
    conds_init(&c, &cm);
    for (size_t i = 0; i < sizeof far_secs / sizeof *far_secs; i++) {
        time_t s = far_secs[i];
        far_cond(&c, W_TIMED, s, 0);
        far_cond(&c, W_CLOCK_MONO, s, 0);
        far_cond(&c, W_CLOCK_REAL, s, 999999999);
        far_cond(&cm, W_TIMED, s, 0);
        far_cond(&c, W_CND, s, 0);
        if (sems) {
            far_sem(-1, s);
            far_sem(CLOCK_MONOTONIC, s);
            far_sem(CLOCK_REALTIME, s);
        }
        far_mutex(0, s);
        far_mutex(1, s);
        far_mutex(2, s);
    }
    static const time_t past[] = {-1, LONG_MIN};
    for (size_t i = 0; i < 2; i++) {
        past_cond(&c, W_TIMED, past[i]);
        past_cond(&c, W_CLOCK_MONO, past[i]);
        past_cond(&cm, W_TIMED, past[i]);
        if (sems) {
            th_context = "sem_timedwait with a deadline far in the past";
            sem_t s;
            sem_init(&s, 0, 0);
            struct timespec d = {past[i], 0};
            errno = 0;
            CHECK_EQ(sem_timedwait(&s, &d), -1);
            CHECK_EQ(errno, ETIMEDOUT);
            errno = 0;
            CHECK_EQ(sem_clockwait(&s, CLOCK_MONOTONIC, &d), -1);
            CHECK_EQ(errno, ETIMEDOUT);
            sem_destroy(&s);
        }
    }
    conds_destroy(&c, &cm);
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_deadline", IP_COND_KINDS, child); }
