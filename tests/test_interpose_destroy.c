/*
 * test_interpose_destroy - destroying a condition variable or a semaphore
 * right after the wake-up under the LD_PRELOAD interposer behaves as
 * glibc's: pthread_cond_destroy right after the pthread_cond_broadcast
 * that woke 24 waiters (with the mutex released, and while still holding
 * it), and sem_destroy right after the sem_post that woke a waiter, return
 * 0, and the woken threads no longer touch the object (its memory is
 * overwritten and freed at once).
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

#define NDESTROY 24

struct bw {
    pthread_mutex_t *m;
    pthread_cond_t *c;
    int *go;
    _Atomic int *inside;
};

static void *bw_main(void *arg)
{
    struct bw *b = arg;
    pthread_mutex_lock(b->m);
    atomic_fetch_add(b->inside, 1);
    while (!*b->go)
        pthread_cond_wait(b->c, b->m);
    pthread_mutex_unlock(b->m);
    return NULL;
}

static void destroy_after_broadcast(int under_lock, int rounds)
{
    th_context = under_lock ? "destroy right after broadcast, mutex held" : "destroy right after broadcast";
    for (int r = 0; r < rounds; r++) {
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t *c = malloc(sizeof *c);
        CHECK_EQ(pthread_cond_init(c, NULL), 0);
        int go = 0;
        _Atomic int inside = 0;
        struct bw b = {&m, c, &go, &inside};
        pthread_t t[NDESTROY];
        for (int i = 0; i < NDESTROY; i++)
            CHECK_EQ(pthread_create(&t[i], NULL, bw_main, &b), 0);
        for (int i = 0; i < 25000; i++) {
            pthread_mutex_lock(&m);
            int n = atomic_load(&inside);
            pthread_mutex_unlock(&m);
            if (n == NDESTROY)
                break;
            usleep(200);
        }
        pthread_mutex_lock(&m);
        go = 1;
        pthread_cond_broadcast(c);
        if (!under_lock)
            pthread_mutex_unlock(&m);
        int e = pthread_cond_destroy(c);
        CHECK(e == 0, "round %d: pthread_cond_destroy = %d (%s)", r, e, strerror(e));
        if (under_lock)
            pthread_mutex_unlock(&m);
        if (e == 0) {
            memset(c, 0xa5, sizeof *c); /* a woken waiter must no longer touch it */
            free(c);
        }
        for (int i = 0; i < NDESTROY; i++)
            if (join_within(t[i], NULL, JOIN_S)) {
                fprintf(stderr, "FAIL [%s] waiter %d did not end\n", th_context, i);
                th_report(ip_prog);
                _exit(1);
            }
        pthread_mutex_destroy(&m);
    }
}

static void sem_destroy_after_post(int rounds)
{
    th_context = "sem_destroy right after the sem_post that woke the waiter";
    for (int r = 0; r < rounds; r++) {
        sem_t *s = malloc(sizeof *s);
        CHECK_EQ(sem_init(s, 0, 0), 0);
        struct semw w = {.s = s};
        pthread_t t;
        CHECK_EQ(start_semw(&t, &w), 0);
        CHECK_EQ(sem_post(s), 0);
        int e = sem_destroy(s);
        CHECK(e == 0, "round %d: sem_destroy = %d (errno %s)", r, e, strerror(errno));
        if (join_within(t, NULL, JOIN_S)) {
            fprintf(stderr, "FAIL [%s] the waiter did not end\n", th_context);
            _exit(1);
        }
        CHECK_EQ(atomic_load(&w.got), 1);
        if (e == 0) {
            memset(s, 0xa5, sizeof *s);
            free(s);
        }
    }
}

static void child(void)
{
    destroy_after_broadcast(0, 4);
    destroy_after_broadcast(1, 2);
    if (test_sems())
        sem_destroy_after_post(4);
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_destroy", IP_COND_KINDS, child); }
