/*
 * test_interpose_timed - timed mutex locks under the LD_PRELOAD
 * interposer, for every algorithm and every mutex type:
 * pthread_mutex_timedlock and clocklock succeed at once on a free mutex,
 * give ETIMEDOUT not before the deadline on a held one (CLOCK_REALTIME and
 * CLOCK_MONOTONIC), EINVAL for a bad timespec when they would block, and
 * succeed when the mutex is released while they wait; a recursive mutex
 * relocks, an errorcheck one gives EDEADLK to its owner.
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

/* ---------------------------------------------------------------- timed */
static void test_timed(void)
{
    th_context = "timedlock";
    volatile int release = 0;
    for (int k = 0; k < K_COUNT; k++) {
        pthread_mutex_t *m = k_mutex[k];
        struct timespec dl;
        ts_after(CLOCK_REALTIME, &dl, 1000);
        CHECK_EQ(pthread_mutex_timedlock(m, &dl), 0); /* free: immediate */
        CHECK_EQ(pthread_mutex_unlock(m), 0);
        release = 0;
        helper_t h = {.m = m, .op = 2, .release = &release};
        pthread_t t;
        pthread_create(&t, NULL, helper_main, &h);
        while (!h.started || in_thread(m, 0) != EBUSY)
            usleep(1000);
        ts_after(CLOCK_REALTIME, &dl, 20);
        int r = pthread_mutex_timedlock(m, &dl);
        CHECK(r == ETIMEDOUT, "%s: timedlock on a held mutex gave %d", k_names[k], r);
        CHECK(ts_reached(CLOCK_REALTIME, &dl), "%s: timedlock returned before its deadline", k_names[k]);
        if (k != K_D_PI) { /* glibc checks the timespec first only for some kinds */
            struct timespec bad = {dl.tv_sec, 1000000000L};
            r = pthread_mutex_timedlock(m, &bad);
            CHECK(r == EINVAL, "%s: timedlock with tv_nsec=1e9 gave %d", k_names[k], r);
        }
        ts_after(CLOCK_MONOTONIC, &dl, 15);
        r = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &dl);
        CHECK(r == ETIMEDOUT, "%s: clocklock(MONOTONIC) on a held mutex gave %d", k_names[k], r);
        CHECK(ts_reached(CLOCK_MONOTONIC, &dl), "%s: clocklock returned before its deadline", k_names[k]);
        /* released while we wait: success well before the deadline */
        ts_after(CLOCK_REALTIME, &dl, 20000);
        release = 1;
        r = pthread_mutex_timedlock(m, &dl);
        CHECK(r == 0, "%s: timedlock after release gave %d", k_names[k], r);
        if (r == 0)
            pthread_mutex_unlock(m);
        pthread_join(t, NULL);
    }
    struct timespec dl;
    ts_after(CLOCK_REALTIME, &dl, 1000);
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_timedlock(&s_recursive, &dl), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_lock(&s_errorcheck), 0);
    CHECK_EQ(pthread_mutex_timedlock(&s_errorcheck, &dl), EDEADLK);
    CHECK_EQ(pthread_mutex_unlock(&s_errorcheck), 0);
}

static void child(void)
{
    init_dynamic();
    engage_mutexes();
    test_timed();
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_timed", IP_EVERY_ALGORITHM, child); }
