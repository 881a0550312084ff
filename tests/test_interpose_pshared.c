/*
 * test_interpose_pshared - a process-shared condition variable used with
 * a private mutex under the LD_PRELOAD interposer behaves as glibc's:
 * pthread_cond_wait, timedwait and clockwait(MONOTONIC) with two waiters,
 * a signal waking one and a broadcast the other; a timeout not before the
 * deadline; a waiter cancelled in the wait, its cleanup handler holding
 * the mutex; destroy (no EINVAL anywhere).
 *
 * Run without arguments (as tests/run.sh does) it is a driver
 * (interpose_driver.h, IP_COND_KINDS): it runs itself once natively (the
 * checks then run against glibc, which validates them) and then under the
 * interposer for every algorithm with the `cond` property and every
 * condition-variable kind (the default FIFO queue with LIBLOCK_SEM=fifo,
 * mostly-lifo with LIBLOCK_SEM=mostly-lifo, LIBLOCK_COND=glibc,
 * LIBLOCK_COND_GENERIC=1); names on the command line restrict the
 * algorithms.  Exact results, no timing thresholds (every bound is a
 * watchdog that only a hang reaches).
 */
#include "interpose_waiters.h"

static void pshared_private(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_cond_t c;
    CHECK_EQ(pthread_cond_init(&c, &ca), 0);
    static const int hows[] = {W_WAIT, W_TIMED, W_CLOCK_MONO};
    for (size_t i = 0; i < 3; i++) {
        char ctx[128];
        snprintf(ctx, sizeof ctx, "process-shared condition, private mutex, %s", how_name(hows[i]));
        th_context = ctx;
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        int pred = 0;
        struct waiter w[2];
        pthread_t t[2];
        for (int k = 0; k < 2; k++) {
            w[k] = (struct waiter){.m = &m, .c = &c, .how = hows[i], .pred = &pred};
            deadline_for(&w[k], 60000);
            CHECK_EQ(start_waiter(&t[k], &w[k]), 0);
        }
        pthread_mutex_lock(&m);
        pred = 1;
        pthread_cond_signal(&c); /* one of them */
        pthread_mutex_unlock(&m);
        int got = 0;
        for (int j = 0; j < 25000 && got == 0; j++) {
            got = atomic_load(&w[0].got) + atomic_load(&w[1].got);
            if (!got)
                usleep(200);
        }
        CHECK(got == 1, "%d waiters took the job after one signal", got);
        pthread_mutex_lock(&m);
        pred += 1;
        pthread_cond_broadcast(&c); /* the other */
        pthread_mutex_unlock(&m);
        for (int k = 0; k < 2; k++) {
            if (join_within(t[k], NULL, JOIN_S)) {
                rescue(t[k], &w[k], "waiter on a process-shared condition");
                continue;
            }
            CHECK(atomic_load(&w[k].result) == 0, "waiter %d: the wait returned %d (%s)", k,
                  atomic_load(&w[k].result), strerror(atomic_load(&w[k].result)));
        }
        pthread_mutex_destroy(&m);
    }
    th_context = "process-shared condition, private mutex, timeout";
    {
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&m);
        struct timespec d;
        ts_after(CLOCK_REALTIME, &d, 20);
        CHECK_EQ(pthread_cond_timedwait(&c, &m, &d), ETIMEDOUT);
        CHECK(ts_reached(CLOCK_REALTIME, &d), "timed out early");
        CHECK_EQ(pthread_mutex_unlock(&m), 0);
    }
    cancel_blocked(&c, W_WAIT, PTHREAD_MUTEX_ERRORCHECK);
    th_context = "process-shared condition, private mutex";
    CHECK_EQ(pthread_cond_destroy(&c), 0);
    pthread_condattr_destroy(&ca);
}

static void child(void) { pshared_private(); }

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_pshared", IP_COND_KINDS, child); }
