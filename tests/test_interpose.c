/*
 * test_interpose - the LD_PRELOAD interposer under every algorithm: it is
 * in use, and counters under mutexes of every type stay exact.
 *
 * Run without arguments (as tests/run.sh does) it is a driver
 * (interpose_driver.h, IP_EVERY_ALGORITHM_CXX): it re-runs itself under
 * the interposer for every algorithm, with a waiting policy that makes
 * progress with more threads than cores, and the paths no algorithm takes
 * (LIBLOCK_COND_GENERIC=1, LIBLOCK_INTERPOSE_API=1, posix under park), and
 * runs test_interpose_cxx (libstdc++ locking) in each configuration too.
 * Names on the command line restrict the algorithms.  The other topics of
 * the interposer's mutex test, each a program with the same driver, are
 * test_interpose_types, test_interpose_timed, test_interpose_cond,
 * test_interpose_c11 and test_interpose_fork (ip_topics).
 *
 * In a child it checks, with exact results:
 *  - that the interposer is really in use (liblock_interpose_lock() names
 *    the algorithm; a locked static mutex carries the interposer's
 *    pointer), as every topic's child does first;
 *  - counters under static and dynamic mutexes of every type (normal,
 *    recursive, errorcheck, adaptive, default, robust, PI, pshared), all
 *    threads starting together so static mutexes race on first use, with
 *    a share of acquisitions through trylock loops; no interposed call
 *    changes errno.
 */
#include "interpose_driver.h"
#include "interpose_mutexes.h"

/* ---------------------------------------------------------------- counters */
static long counters[K_COUNT];
static pthread_barrier_t start_barrier;
static int iters;

static void *counter_main(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    pthread_barrier_wait(&start_barrier);
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < K_COUNT; k++) {
            pthread_mutex_t *m = k_mutex[(k + id) % K_COUNT];
            int kk = (int)((k + id) % K_COUNT);
            if ((i + id) % 4 == 0) {
                int r;
                while ((r = KEEP_ERRNO(pthread_mutex_trylock(m))) == EBUSY)
                    sched_yield();
                if (r)
                    CHECK_EQ(r, 0);
            } else {
                int r = KEEP_ERRNO(pthread_mutex_lock(m));
                if (r)
                    CHECK_EQ(r, 0);
            }
            if (is_recursive(kk))
                KEEP_ERRNO(pthread_mutex_lock(m));
            counters[kk]++;
            if (is_recursive(kk))
                KEEP_ERRNO(pthread_mutex_unlock(m));
            int r = KEEP_ERRNO(pthread_mutex_unlock(m));
            if (r)
                CHECK_EQ(r, 0);
        }
    }
    return NULL;
}

static void test_counters(void)
{
    th_context = "counters";
    iters = scale(1500);
    pthread_t t[NTHREADS];
    pthread_barrier_init(&start_barrier, NULL, NTHREADS);
    for (uintptr_t i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, counter_main, (void *)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start_barrier);
    for (int k = 0; k < K_COUNT; k++)
        CHECK(counters[k] == (long)NTHREADS * iters, "%s: counter %ld, expected %ld", k_names[k], counters[k],
              (long)NTHREADS * iters);
    check_errno_kept("counters");
}

static void child(void)
{
    init_dynamic();
    test_counters();
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose", IP_EVERY_ALGORITHM_CXX, child); }
