/*
 * profile_cost - cost of one pthread_mutex_lock/unlock pair, to compare the
 * same binary with and without a preload library (liblock-profile.so,
 * liblock-interpose.so).
 *
 *   profile_cost [iters] [rounds]            one thread, one mutex: the
 *                                            uncontended pair
 *   profile_cost -m LOCKS -t THREADS [-s SITES] [iters] [rounds]
 *                                            the pattern of a server with a
 *                                            table of locks (memcached's item
 *                                            locks): THREADS threads each take
 *                                            a random one of LOCKS mutexes
 *                                            (pthread_mutex_init, default
 *                                            type) from one of SITES call
 *                                            sites (1-4), iters pairs each
 *
 * Prints "ns_per_pair <x>": the best of `rounds` timed rounds, wall time of a
 * round divided by the pairs of one thread (with several threads on a shared
 * machine that is time per pair per thread, comparable between runs of the
 * same -m/-t/-s).  Run it interleaved with and without the preload
 * (docs/profile-runtime.md).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static pthread_mutex_t *locks;
static long nlocks = 1, iters = 20000000;
static int nsites = 1;
static long *counts; /* one per lock, under it */
static pthread_barrier_t start, done;
static volatile int stop_all;

/* Distinct call sites: each function has its own call instructions. */
#define PAIR_FN(n)                                                                                                     \
    static __attribute__((noinline)) void pair##n(long k)                                                              \
    {                                                                                                                  \
        pthread_mutex_lock(&locks[k]);                                                                                 \
        counts[k] += n + 1;                                                                                            \
        pthread_mutex_unlock(&locks[k]);                                                                               \
    }
PAIR_FN(0)
PAIR_FN(1)
PAIR_FN(2)
PAIR_FN(3)
static void (*const pairs[4])(long) = {pair0, pair1, pair2, pair3};

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static void *worker(void *arg)
{
    uint64_t seed = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    for (;;) {
        pthread_barrier_wait(&start);
        if (stop_all)
            return NULL;
        for (long i = 0; i < iters; i++) {
            uint64_t r = rnd(&seed);
            pairs[(r >> 32) % (unsigned)nsites]((long)(r % (uint64_t)nlocks));
        }
        pthread_barrier_wait(&done);
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: profile_cost [-m LOCKS] [-t THREADS] [-s SITES(1-4)] [iters] [rounds]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int nthreads = 0, rounds = 5, c;
    while ((c = getopt(argc, argv, "m:t:s:")) != -1) {
        if (c == 'm')
            nlocks = atol(optarg);
        else if (c == 't')
            nthreads = atoi(optarg);
        else if (c == 's')
            nsites = atoi(optarg);
        else
            return usage();
    }
    if (optind < argc)
        iters = atol(argv[optind++]);
    if (optind < argc)
        rounds = atoi(argv[optind++]);
    if (optind < argc || iters <= 0 || rounds <= 0 || nlocks <= 0 || nthreads < 0 || nsites < 1 || nsites > 4)
        return usage();
    locks = calloc((size_t)nlocks, sizeof *locks);
    counts = calloc((size_t)nlocks, sizeof *counts);
    if (!locks || !counts) {
        fprintf(stderr, "profile_cost: out of memory\n");
        return 1;
    }
    for (long k = 0; k < nlocks; k++)
        pthread_mutex_init(&locks[k], NULL);
    double best = 1e30;
    if (nthreads == 0) { /* the original: one thread, one call site, lock 0 */
        for (int r = 0; r < rounds; r++) {
            double t0 = now_ns();
            for (long i = 0; i < iters; i++)
                pair0(0);
            double dt = (now_ns() - t0) / (double)iters;
            if (dt < best)
                best = dt;
        }
        printf("ns_per_pair %.2f\n", best);
        return counts[0] == iters * rounds ? 0 : 1;
    }
    pthread_t *th = calloc((size_t)nthreads, sizeof *th);
    pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&done, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i)) {
            fprintf(stderr, "profile_cost: pthread_create failed\n");
            return 1;
        }
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        pthread_barrier_wait(&start);
        pthread_barrier_wait(&done);
        double dt = (now_ns() - t0) / (double)iters;
        if (dt < best)
            best = dt;
    }
    stop_all = 1;
    pthread_barrier_wait(&start);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    /* every pair added its site's weight: the sum is at least one per pair */
    long sum = 0;
    for (long k = 0; k < nlocks; k++)
        sum += counts[k];
    printf("ns_per_pair %.2f\n", best);
    return sum >= iters * rounds * nthreads ? 0 : 1;
}
