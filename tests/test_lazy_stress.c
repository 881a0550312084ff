/*
 * test_lazy_stress - the lazy->engaged transition under load
 * (docs/interpose.md, "Lazy engagement"): many threads race to be the
 * first holders of fresh lazy mutexes, so a mutex engages while others
 * lock, try, time out and wait on it.
 *
 * Run without arguments it is a driver (lazy_driver.h): it runs its child
 * on glibc alone, then under the interposer for every algorithm with
 * LIBLOCK_LAZY unset and with LIBLOCK_LAZY=0, under the mixed
 * configuration and under the profiler; names on the command line restrict
 * the algorithms.  "engaged" below is the value expected of
 * liblock_interpose_debug_engaged: 0 lazy, 1 engaged (1 for "lazy" under
 * LIBLOCK_LAZY=0, -1 for both under the profiler).
 *
 * The child's section:
 *  stress     4 and 8 threads (more than the cores) increment a counter
 *             under a fresh mutex per round (zeroed memory or initialised,
 *             a few thousand increments each, then destroyed), by lock,
 *             trylock loops, timedlock, with now and then a
 *             pthread_cond_timedwait of 200 us and a broadcast or signal:
 *             the count is exact and no two threads are ever inside at
 *             once, so the lazy->engaged transition races many times.
 *             The child's report says how many of the mutexes engaged.
 */
#include "lazy_driver.h"

#include <sched.h>

/* ---------------------------------------------------------------- stress */
static struct {
    int nthreads, rounds, per_round;
    pthread_barrier_t start, end;
    pthread_mutex_t *m;
    pthread_cond_t *cv;
    volatile long counter;
    atomic_int inside, arrived;
    atomic_long overlaps, errors, busy, waits;
} S;

static inline void cs_enter(void)
{
    if (atomic_fetch_add(&S.inside, 1) != 0)
        atomic_fetch_add(&S.overlaps, 1);
}
static inline void cs_leave(void) { atomic_fetch_sub(&S.inside, 1); }

static void *stress_worker(void *arg)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    for (int r = 0; r < S.rounds; r++) {
        pthread_barrier_wait(&S.start);
        pthread_mutex_t *m = S.m;
        pthread_cond_t *cv = S.cv;
        /* start together: the first holds of the lazy mutex meet */
        atomic_fetch_add(&S.arrived, 1);
        while (atomic_load(&S.arrived) < (r + 1) * S.nthreads)
            sched_yield();
        for (int i = 0; i < S.per_round; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            unsigned k = (unsigned)(x % 256);
            int e;
            if (k < 48) {
                while ((e = pthread_mutex_trylock(m)) == EBUSY) {
                    atomic_fetch_add(&S.busy, 1);
                    sched_yield();
                }
            } else if (k < 56) {
                struct timespec t;
                ts_after(CLOCK_REALTIME, &t, 20000);
                e = pthread_mutex_timedlock(m, &t);
            } else {
                e = pthread_mutex_lock(m);
            }
            if (e) {
                atomic_fetch_add(&S.errors, 1);
                continue;
            }
            cs_enter();
            if (k >= 253) { /* a short condition wait: m released and retaken */
                cs_leave();
                struct timespec t = ts_in_ns(200000);
                int w = pthread_cond_timedwait(cv, m, &t);
                if (w != 0 && w != ETIMEDOUT)
                    atomic_fetch_add(&S.errors, 1);
                atomic_fetch_add(&S.waits, 1);
                cs_enter();
            }
            long v = S.counter;
            for (int d = 0; d < 20; d++) /* a critical section long enough to be met held */
                __asm__ volatile("" ::: "memory");
            S.counter = v + 1;
            if (k == 250)
                pthread_cond_broadcast(cv);
            else if (k == 251)
                pthread_cond_signal(cv);
            cs_leave();
            if (pthread_mutex_unlock(m) != 0)
                atomic_fetch_add(&S.errors, 1);
            for (int d = 0; d < 20; d++)
                __asm__ volatile("" ::: "memory");
        }
        pthread_barrier_wait(&S.end);
    }
    return NULL;
}

static int stress_engaged, stress_mutexes;

static void stress(int nthreads, int rounds, int per_round)
{
    char ctx[64];
    snprintf(ctx, sizeof ctx, "stress, %d threads", nthreads);
    th_context = ctx;
    memset((void *)&S, 0, sizeof S);
    S.nthreads = nthreads;
    S.rounds = rounds;
    S.per_round = per_round;
    pthread_barrier_init(&S.start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&S.end, NULL, (unsigned)nthreads + 1);
    pthread_t th[16];
    for (int i = 0; i < nthreads; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, stress_worker, (void *)(uintptr_t)i), 0);
    int bad_state = 0;
    long first_bad = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_mutex_t *m = malloc(sizeof *m);
        pthread_cond_t *cv = malloc(sizeof *cv);
        if (r % 2) { /* zeroed memory: PTHREAD_MUTEX_INITIALIZER, set up at first use (racing) */
            memset(m, 0, sizeof *m);
            memset(cv, 0, sizeof *cv);
        } else {
            mk(m, r % 4 == 0 ? -1 : PTHREAD_MUTEX_NORMAL);
            CHECK_EQ(pthread_cond_init(cv, NULL), 0);
        }
        S.m = m;
        S.cv = cv;
        pthread_barrier_wait(&S.start);
        pthread_barrier_wait(&S.end);
        CHECK_EQ(S.counter, (long)(r + 1) * nthreads * per_round);
        long e = eng(m);
        /* the profiler: -1; LIBLOCK_LAZY=0: engaged from the first use; else either */
        if (eng_fn && ((w_eng == -1 || w_lazy == 1) ? e != w_lazy : e != 0 && e != 1) && !bad_state++)
            first_bad = e;
        stress_engaged += e == 1;
        stress_mutexes++;
        CHECK_EQ(pthread_mutex_destroy(m), 0);
        CHECK_EQ(pthread_cond_destroy(cv), 0);
        free(m);
        free(cv);
    }
    for (int i = 0; i < nthreads; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    CHECK(bad_state == 0, "%d of %d mutexes in an unexpected state after their round (the first: engaged = %ld, expected %s)",
          bad_state, rounds, first_bad, w_eng == -1 ? "-1" : w_lazy == 1 ? "1" : "0 or 1");
    CHECK_EQ(atomic_load(&S.overlaps), 0);
    CHECK_EQ(atomic_load(&S.errors), 0);
    CHECK_EQ(S.counter, (long)rounds * nthreads * per_round);
    pthread_barrier_destroy(&S.start);
    pthread_barrier_destroy(&S.end);
}

static void sec_stress(void)
{
    stress(4, 64, scale(600));
    stress(8, 64, scale(300));
    snprintf(lz_note, sizeof lz_note, "stress: %d of %d mutexes engaged", stress_engaged, stress_mutexes);
}

/* ------------------------------------------------------------------ main */
static const struct lz_section sections[] = {
    {"stress", sec_stress},
    {NULL, NULL},
};

int main(int argc, char **argv) { return lz_main(argc, argv, "test_lazy_stress", sections); }
