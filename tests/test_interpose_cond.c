/*
 * test_interpose_cond - condition variables under the LD_PRELOAD
 * interposer, for every algorithm: a waiter cancelled in pthread_cond_wait
 * runs its cleanup handler with the mutex held; a bounded buffer (2
 * producers, 2 consumers) moves every item once and keeps errno;
 * timedwait and clockwait time out not before the deadline with the mutex
 * held again on return, and a wait on an errorcheck mutex not held gives
 * EPERM; a CLOCK_MONOTONIC condition variable; a recursive mutex with a
 * condition variable; broadcast wakes every waiter; a condition variable
 * with a robust (glibc's) mutex.
 *
 * Run without arguments it is a driver (interpose_driver.h,
 * IP_EVERY_ALGORITHM): it re-runs itself under the interposer for every
 * algorithm and the configurations of test_interpose; names on the command
 * line restrict the algorithms.  Its child first checks that the
 * interposer is in use, then makes the lazy mutexes engage their algorithm
 * (engage_mutexes, interpose_mutexes.h).
 */
#include "interpose_driver.h"
#include "interpose_mutexes.h"

/* ---------------------------------------------------------------- condvars */
#define BUF_CAP 4
static pthread_mutex_t bb_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bb_not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t bb_not_empty = PTHREAD_COND_INITIALIZER;
static long bb_buf[BUF_CAP];
static int bb_head, bb_count, bb_items;
static long bb_sum, bb_got;

static void *producer_main(void *arg)
{
    long base = (long)(intptr_t)arg;
    for (int i = 1; i <= bb_items; i++) {
        KEEP_ERRNO(pthread_mutex_lock(&bb_mutex));
        while (bb_count == BUF_CAP)
            KEEP_ERRNO(pthread_cond_wait(&bb_not_full, &bb_mutex));
        bb_buf[(bb_head + bb_count) % BUF_CAP] = base + i;
        bb_count++;
        KEEP_ERRNO(pthread_cond_signal(&bb_not_empty));
        KEEP_ERRNO(pthread_mutex_unlock(&bb_mutex));
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        KEEP_ERRNO(pthread_mutex_lock(&bb_mutex));
        while (bb_count == 0)
            KEEP_ERRNO(pthread_cond_wait(&bb_not_empty, &bb_mutex));
        long v = bb_buf[bb_head];
        bb_head = (bb_head + 1) % BUF_CAP;
        bb_count--;
        bb_sum += v;
        bb_got++;
        KEEP_ERRNO(pthread_cond_signal(&bb_not_full));
        KEEP_ERRNO(pthread_mutex_unlock(&bb_mutex));
    }
    return NULL;
}

static pthread_mutex_t bc_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bc_cond = PTHREAD_COND_INITIALIZER;
static int bc_go, bc_woken;

static void *bc_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&bc_mutex);
    while (!bc_go)
        pthread_cond_wait(&bc_cond, &bc_mutex);
    bc_woken++;
    pthread_mutex_unlock(&bc_mutex);
    return NULL;
}

typedef struct {
    pthread_mutex_t *m;
    pthread_cond_t *c;
    volatile int flag;
} robust_arg_t;

static void *robust_signaller(void *arg)
{
    robust_arg_t *a = arg;
    usleep(10000);
    pthread_mutex_lock(a->m);
    a->flag = 1;
    pthread_cond_signal(a->c);
    pthread_mutex_unlock(a->m);
    return NULL;
}

static pthread_mutex_t cx_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cx_cond = PTHREAD_COND_INITIALIZER;
static volatile int cx_waiting, cx_cleanup_held;

static void cx_cleanup(void *arg)
{
    (void)arg;
    /* POSIX: the mutex is held again when cleanup handlers run */
    cx_cleanup_held = pthread_mutex_trylock(&cx_mutex) == EBUSY;
    pthread_mutex_unlock(&cx_mutex);
}

static void *cx_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cx_mutex);
    pthread_cleanup_push(cx_cleanup, NULL);
    cx_waiting = 1;
    for (;;)
        pthread_cond_wait(&cx_cond, &cx_mutex);
    pthread_cleanup_pop(0);
    return NULL;
}

static void test_cond(void)
{
    th_context = "cancel in wait";
    {
        pthread_t t;
        pthread_create(&t, NULL, cx_waiter, NULL);
        while (!cx_waiting)
            usleep(1000);
        pthread_mutex_lock(&cx_mutex); /* the waiter is inside the wait */
        pthread_cancel(t);
        pthread_cond_signal(&cx_cond);
        pthread_mutex_unlock(&cx_mutex);
        void *ret;
        pthread_join(t, &ret);
        CHECK(ret == PTHREAD_CANCELED, "cancelled waiter returned %p", ret);
        CHECK(cx_cleanup_held, "cleanup handler ran without the mutex");
        CHECK_EQ(pthread_mutex_trylock(&cx_mutex), 0);
        pthread_mutex_unlock(&cx_mutex);
    }

    th_context = "bounded buffer";
    bb_items = scale(2000);
    pthread_t p[2], c[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&p[i], NULL, producer_main, (void *)(intptr_t)(i * 1000000L));
    for (int i = 0; i < 2; i++)
        pthread_create(&c[i], NULL, consumer_main, (void *)(intptr_t)bb_items);
    for (int i = 0; i < 2; i++) {
        pthread_join(p[i], NULL);
        pthread_join(c[i], NULL);
    }
    long n = bb_items;
    CHECK_EQ(bb_got, 2 * n);
    CHECK_EQ(bb_sum, n * (n + 1) + 1000000L * n);
    check_errno_kept("bounded buffer");
    CHECK_EQ(bb_count, 0);

    th_context = "timedwait";
    pthread_mutex_t *e = &d_mutex[K_D_ERRORCHECK];
    pthread_cond_t cv;
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    struct timespec dl;
    CHECK_EQ(pthread_mutex_lock(e), 0);
    ts_after(CLOCK_REALTIME, &dl, 30);
    CHECK_EQ(pthread_cond_timedwait(&cv, e, &dl), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_REALTIME, &dl), "timedwait returned before its deadline");
    CHECK_EQ(pthread_mutex_lock(e), EDEADLK); /* held again after the wait */
    ts_after(CLOCK_MONOTONIC, &dl, 30);
    CHECK_EQ(pthread_cond_clockwait(&cv, e, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_MONOTONIC, &dl), "clockwait returned before its deadline");
    CHECK_EQ(pthread_mutex_unlock(e), 0);
    CHECK_EQ(pthread_cond_wait(&cv, e), EPERM); /* errorcheck mutex not held */
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "monotonic condvar";
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    CHECK_EQ(pthread_cond_init(&cv, &ca), 0);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&s_normal);
    ts_after(CLOCK_MONOTONIC, &dl, 30);
    CHECK_EQ(pthread_cond_timedwait(&cv, &s_normal, &dl), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_MONOTONIC, &dl), "monotonic timedwait returned before its deadline");
    CHECK_EQ(in_thread(&s_normal, 0), EBUSY);
    pthread_mutex_unlock(&s_normal);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "recursive + cond";
    pthread_mutex_t *r = &d_mutex[K_D_RECURSIVE];
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    pthread_mutex_lock(r);
    ts_after(CLOCK_REALTIME, &dl, 10);
    CHECK_EQ(pthread_cond_timedwait(&cv, r, &dl), ETIMEDOUT);
    CHECK_EQ(in_thread(r, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(r), 0);
    CHECK_EQ(pthread_mutex_unlock(r), EPERM);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "broadcast";
    pthread_t w[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&w[i], NULL, bc_waiter, NULL);
    usleep(20000);
    pthread_mutex_lock(&bc_mutex);
    bc_go = 1;
    pthread_cond_broadcast(&bc_cond);
    pthread_mutex_unlock(&bc_mutex);
    for (int i = 0; i < 3; i++)
        pthread_join(w[i], NULL);
    CHECK_EQ(bc_woken, 3);

    th_context = "robust mutex + cond";
    pthread_cond_t rc = PTHREAD_COND_INITIALIZER;
    robust_arg_t ra = {.m = &d_mutex[K_D_ROBUST], .c = &rc};
    pthread_t t;
    pthread_mutex_lock(ra.m);
    pthread_create(&t, NULL, robust_signaller, &ra);
    while (!ra.flag)
        CHECK_EQ(pthread_cond_wait(&rc, ra.m), 0);
    pthread_mutex_unlock(ra.m);
    pthread_join(t, NULL);
}

static void child(void)
{
    init_dynamic();
    engage_mutexes();
    test_cond();
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_cond", IP_EVERY_ALGORITHM, child); }
