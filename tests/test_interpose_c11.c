/*
 * test_interpose_c11 - C11 threads under the LD_PRELOAD interposer, for
 * every algorithm: mtx_* and cnd_* (which glibc implements without going
 * through pthread_mutex_*) land on the algorithm (a C11 mutex carries the
 * interposer's pointer), count exactly with a share of mtx_trylock loops
 * and keep errno; mtx_init with a bad type makes a plain mutex, as glibc;
 * recursive mutexes count, timed ones give thrd_timedout not before the
 * deadline; cnd_timedwait times out with the mutex held again; a
 * condition-variable hand-off (one producer, two consumers) moves every
 * item once; thrd_* return codes.
 *
 * Run without arguments it is a driver (interpose_driver.h,
 * IP_EVERY_ALGORITHM): it re-runs itself under the interposer for every
 * algorithm and the configurations of test_interpose; names on the command
 * line restrict the algorithms.  Its child first checks that the
 * interposer is in use.
 */
#include "interpose_driver.h"
#include "interpose_mutexes.h"

#include <threads.h>

/* ---------------------------------------------------------------- C11 threads */
static mtx_t c11_m, c11_r, c11_t;
static cnd_t c11_c;
static long c11_count;
static int c11_items, c11_taken, c11_sum;

static int c11_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < scale(20000); i++) {
        if (i % 8 == 0) {
            int r;
            while ((r = KEEP_ERRNO(mtx_trylock(&c11_m))) == thrd_busy)
                thrd_yield();
            if (r != thrd_success)
                return r;
        } else if (KEEP_ERRNO(mtx_lock(&c11_m)) != thrd_success)
            return -1;
        c11_count++;
        KEEP_ERRNO(mtx_unlock(&c11_m));
    }
    return 0;
}

static int c11_try_other(void *arg)
{
    return mtx_trylock(arg) == thrd_busy ? 0 : 1; /* held by the main thread */
}

static int c11_timed_other(void *arg)
{
    struct timespec ts;
    ts_after(CLOCK_REALTIME, &ts, 30); /* C11's TIME_UTC is CLOCK_REALTIME */
    return mtx_timedlock(arg, &ts) == thrd_timedout && ts_reached(CLOCK_REALTIME, &ts) ? 0 : 1;
}

static int c11_consumer(void *arg)
{
    (void)arg;
    for (;;) {
        KEEP_ERRNO(mtx_lock(&c11_m));
        while (c11_items == 0 && c11_taken < 1000)
            KEEP_ERRNO(cnd_wait(&c11_c, &c11_m));
        if (c11_taken >= 1000) {
            mtx_unlock(&c11_m);
            return 0;
        }
        c11_items--;
        c11_sum += ++c11_taken;
        cnd_broadcast(&c11_c);
        mtx_unlock(&c11_m);
    }
}

/* glibc's mtx_* and cnd_* call its pthread functions internally, so they are
 * interposed separately: check that they land on the algorithm and keep C11
 * semantics and return codes. */
static void test_c11(void)
{
    th_context = "C11 mtx";
    CHECK_EQ(mtx_init(&c11_m, mtx_plain), thrd_success);
    thrd_t t[NTHREADS];
    int res;
    for (int i = 0; i < NTHREADS; i++)
        CHECK_EQ(thrd_create(&t[i], c11_worker, NULL), thrd_success);
    for (int i = 0; i < NTHREADS; i++) {
        thrd_join(t[i], &res);
        CHECK_EQ(res, 0);
    }
    CHECK_EQ(c11_count, (long)NTHREADS * scale(20000));
    CHECK(((pthread_mutex_t *)&c11_m)->__data.__list.__prev != NULL, "a C11 mutex is not interposed");

    th_context = "C11 mtx_init";
    mtx_t bad;
    /* as glibc: a type other than plain or timed with mtx_recursive makes a
     * plain mutex */
    CHECK_EQ(mtx_init(&bad, 42), thrd_success);
    CHECK_EQ(mtx_lock(&bad), thrd_success);
    CHECK_EQ(mtx_trylock(&bad), thrd_busy);
    CHECK_EQ(mtx_unlock(&bad), thrd_success);
    mtx_destroy(&bad);
    CHECK_EQ(mtx_init(&bad, mtx_timed | 8), thrd_success);
    mtx_destroy(&bad);

    th_context = "C11 recursive";
    CHECK_EQ(mtx_init(&c11_r, mtx_plain | mtx_recursive), thrd_success);
    CHECK_EQ(mtx_lock(&c11_r), thrd_success);
    CHECK_EQ(mtx_lock(&c11_r), thrd_success);
    CHECK_EQ(mtx_trylock(&c11_r), thrd_success);
    thrd_t o;
    CHECK_EQ(thrd_create(&o, c11_try_other, &c11_r), thrd_success);
    thrd_join(o, &res);
    CHECK(res == 0, "another thread's mtx_trylock on a held recursive mutex did not say thrd_busy");
    for (int i = 0; i < 3; i++)
        CHECK_EQ(mtx_unlock(&c11_r), thrd_success);
    CHECK_EQ(mtx_trylock(&c11_r), thrd_success); /* free again after three unlocks */
    CHECK_EQ(mtx_unlock(&c11_r), thrd_success);
    mtx_destroy(&c11_r);

    th_context = "C11 timed";
    CHECK_EQ(mtx_init(&c11_t, mtx_timed), thrd_success);
    CHECK_EQ(mtx_lock(&c11_t), thrd_success);
    CHECK_EQ(thrd_create(&o, c11_timed_other, &c11_t), thrd_success);
    thrd_join(o, &res);
    CHECK(res == 0, "mtx_timedlock on a held mutex did not return thrd_timedout at its deadline");
    CHECK_EQ(mtx_unlock(&c11_t), thrd_success);
    mtx_destroy(&c11_t);

    th_context = "C11 cnd";
    CHECK_EQ(cnd_init(&c11_c), thrd_success);
    struct timespec ts;
    ts_after(CLOCK_REALTIME, &ts, 20);
    CHECK_EQ(mtx_lock(&c11_m), thrd_success);
    CHECK_EQ(cnd_timedwait(&c11_c, &c11_m, &ts), thrd_timedout);
    CHECK_EQ(mtx_trylock(&c11_m), thrd_busy); /* held again on return (not recursive) */
    CHECK_EQ(mtx_unlock(&c11_m), thrd_success);
    thrd_t cons[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(thrd_create(&cons[i], c11_consumer, NULL), thrd_success);
    for (int produced = 0; produced < 1000; produced++) {
        mtx_lock(&c11_m);
        while (c11_items >= 4)
            cnd_wait(&c11_c, &c11_m);
        c11_items++;
        cnd_broadcast(&c11_c);
        mtx_unlock(&c11_m);
    }
    for (int i = 0; i < 2; i++)
        thrd_join(cons[i], NULL);
    CHECK_EQ(c11_taken, 1000);
    check_errno_kept("C11");
    CHECK_EQ(c11_sum, 1000 * 1001 / 2);
    cnd_destroy(&c11_c);
    mtx_destroy(&c11_m);
}

static void child(void) { test_c11(); }

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_c11", IP_EVERY_ALGORITHM, child); }
