/*
 * profile_cost - cost of one uncontended pthread_mutex_lock/unlock pair, to
 * compare the same binary with and without a preload library
 * (liblock-profile.so, liblock-interpose.so).  One thread, one mutex
 * initialised with pthread_mutex_init (default type); prints
 * "ns_per_pair <x>" as the best of `rounds` timed rounds of `iters` pairs.
 *
 *   profile_cost [iters] [rounds]
 *
 * Run it interleaved with and without the preload (docs/profile-runtime.md).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    long iters = argc > 1 ? atol(argv[1]) : 20000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (iters <= 0 || rounds <= 0) {
        fprintf(stderr, "profile_cost: bad arguments\n");
        return 2;
    }
    pthread_mutex_t m;
    pthread_mutex_init(&m, NULL);
    volatile long x = 0;
    double best = 1e30;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++) {
            pthread_mutex_lock(&m);
            x++;
            pthread_mutex_unlock(&m);
        }
        double dt = (now_ns() - t0) / (double)iters;
        if (dt < best)
            best = dt;
    }
    printf("ns_per_pair %.2f\n", best);
    return x == iters * rounds ? 0 : 1;
}
