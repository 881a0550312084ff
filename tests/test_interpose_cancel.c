/*
 * test_interpose_cancel - cancellation of condition and semaphore waits
 * under the LD_PRELOAD interposer behaves as glibc's: a thread blocked in
 * pthread_cond_wait / timedwait / clockwait (NORMAL and ERRORCHECK
 * mutexes, a condition variable with either clock), in sem_wait and in
 * sem_timedwait is cancelled: pthread_join returns PTHREAD_CANCELED and
 * its cleanup handler ran with the mutex held by the cancelled thread (its
 * pthread_mutex_unlock returns 0; on the ERRORCHECK mutex that proves
 * ownership); two waiters, the one a signal would wake cancelled, then one
 * job posted with one pthread_cond_signal (or one unit with one sem_post):
 * the other waiter gets it (a cancelled waiter consumes no signal / unit).
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

/* Two waiters; cancel the one `victim`, then one job and one signal: the
 * other must take it.  delay_us: between the cancel and the signal. */
static void cancel_no_consume(pthread_cond_t *c, int how, int victim, int delay_us)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "two waiters in %s, cancel waiter %d, signal %d us later", how_name(how), victim,
             delay_us);
    th_context = ctx;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int jobs = 0;
    struct waiter w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct waiter){.m = &m, .c = c, .how = how, .pred = &jobs};
        deadline_for(&w[i], 60000);
        CHECK_EQ(start_waiter(&t[i], &w[i]), 0);
    }
    CHECK_EQ(pthread_cancel(t[victim]), 0);
    if (delay_us)
        usleep(delay_us);
    pthread_mutex_lock(&m);
    jobs = 1;
    pthread_cond_signal(c);
    pthread_mutex_unlock(&m);
    void *ret = NULL;
    if (join_within(t[victim], &ret, JOIN_S)) {
        rescue(t[victim], &w[victim], "cancelled waiter");
    } else {
        CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        CHECK_EQ(atomic_load(&w[victim].unlock_rc), 0);
    }
    int other = 1 - victim;
    if (join_within(t[other], &ret, JOIN_S)) {
        rescue(t[other], &w[other], "the other waiter (the cancelled one consumed the signal?)");
    } else {
        CHECK_EQ(atomic_load(&w[other].got), 1);
        CHECK_EQ(atomic_load(&w[other].result), 0);
    }
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ---- semaphores */
static void sem_cancel(int timed)
{
    char ctx[96];
    snprintf(ctx, sizeof ctx, "cancel in %s", timed ? "sem_timedwait" : "sem_wait");
    th_context = ctx;
    sem_t s;
    CHECK_EQ(sem_init(&s, 0, 0), 0);
    struct semw w = {.s = &s, .timed = timed};
    pthread_t t;
    CHECK_EQ(start_semw(&t, &w), 0);
    CHECK_EQ(pthread_cancel(t), 0);
    void *ret = NULL;
    if (join_within(t, &ret, JOIN_S)) {
        sem_rescue(t, &s, "cancelled sem waiter");
    } else {
        CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        CHECK_EQ(atomic_load(&w.handler_ran), 1);
    }
    /* two waiters, one cancelled, then one unit: the other gets it, the
     * cancelled one took none.  concurrent: the post right after the
     * cancel; glibc may then leave the unit in the semaphore without waking
     * the other waiter (its sem_post's wake-up can go to the cancelled
     * thread), so a unit still there counts as kept, not lost. */
    for (int round = 0; round < 4; round++) {
        int victim = round & 1, concurrent = round >> 1;
        struct semw v[2] = {{.s = &s, .timed = timed}, {.s = &s, .timed = timed}};
        pthread_t vt[2];
        CHECK_EQ(start_semw(&vt[0], &v[0]), 0);
        CHECK_EQ(start_semw(&vt[1], &v[1]), 0);
        CHECK_EQ(pthread_cancel(vt[victim]), 0);
        if (concurrent)
            CHECK_EQ(sem_post(&s), 0);
        if (join_within(vt[victim], &ret, JOIN_S)) {
            sem_rescue(vt[victim], &s, "cancelled sem waiter");
        } else {
            CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        }
        if (!concurrent)
            CHECK_EQ(sem_post(&s), 0);
        int other = 1 - victim, kept = 0;
        for (int i = 0; i < 25000 && !atomic_load(&v[other].got); i++) {
            if (concurrent && sem_trywait(&s) == 0) {
                kept = 1; /* still in the semaphore: give the waiter a unit of its own */
                CHECK_EQ(sem_post(&s), 0);
                break;
            }
            usleep(200);
        }
        CHECK(concurrent || !kept, "unreachable");
        if (join_within(vt[other], &ret, JOIN_S)) {
            sem_rescue(vt[other], &s, "the other sem waiter (the cancelled one kept the unit?)");
        } else {
            CHECK_EQ(atomic_load(&v[other].got), 1);
        }
        int val = -1;
        CHECK_EQ(sem_getvalue(&s, &val), 0);
        CHECK_EQ(val, 0);
    }
    CHECK_EQ(sem_destroy(&s), 0);
}

static void child(void)
{
    int sems = test_sems();
    pthread_cond_t c, cm;
    conds_init(&c, &cm);
    for (int how = W_WAIT; how <= W_CLOCK_REAL; how++)
        cancel_blocked(&c, how, PTHREAD_MUTEX_ERRORCHECK);
    cancel_blocked(&c, W_WAIT, PTHREAD_MUTEX_NORMAL);
    cancel_blocked(&cm, W_TIMED, PTHREAD_MUTEX_NORMAL);
    for (int victim = 0; victim < 2; victim++)
        for (int d = 0; d < 2; d++)
            cancel_no_consume(&c, W_WAIT, victim, d ? 2000 : 0);
    cancel_no_consume(&c, W_TIMED, 0, 0);
    cancel_no_consume(&c, W_TIMED, 1, 0);
    if (sems) {
        sem_cancel(0);
        sem_cancel(1);
    }
    conds_destroy(&c, &cm);
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_cancel", IP_COND_KINDS, child); }
