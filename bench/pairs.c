/*
 * pairs - ns per lock/unlock pair for every algorithm: uncontended (one
 * thread) and with two threads on the two CPUs, interleaving the algorithms
 * (A B C ... A B C ...) over several rounds and reporting the median, with a
 * ping-pong probe before and after (bench/probe.h).  The first `make demo`.
 *
 * usage: pairs [-r ROUNDS] [-n PAIRS] [ALGORITHM...]
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "liblock.h"
#include "probe.h"

struct run {
    liblock_t *lock;
    long pairs;
    int cpu;
    volatile long *shared;
    pthread_barrier_t *bar;
    double ns;
};

static void *pair_thread(void *p)
{
    struct run *r = p;
    probe_pin(r->cpu);
    pthread_barrier_wait(r->bar);
    uint64_t t0 = probe_now_ns();
    for (long i = 0; i < r->pairs; i++) {
        liblock_lock(r->lock);
        (*r->shared)++;
        liblock_unlock(r->lock);
    }
    r->ns = (double)(probe_now_ns() - t0) / (double)r->pairs;
    return NULL;
}

static double measure(const char *algo, int threads, long pairs)
{
    liblock_t l;
    if (liblock_init(&l, algo, NULL))
        return -1;
    volatile long shared = 0;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)threads);
    struct run r[2];
    pthread_t th[2];
    for (int i = 0; i < threads; i++) {
        r[i] = (struct run){&l, pairs, i % 2, &shared, &bar, 0};
        pthread_create(&th[i], NULL, pair_thread, &r[i]);
    }
    double worst = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        if (r[i].ns > worst)
            worst = r[i].ns;
    }
    pthread_barrier_destroy(&bar);
    liblock_destroy(&l);
    return worst;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rounds = 5;
    long pairs = 200000;
    int opt;
    while ((opt = getopt(argc, argv, "r:n:h")) != -1) {
        if (opt == 'r')
            rounds = atoi(optarg);
        else if (opt == 'n')
            pairs = atol(optarg);
        else {
            fprintf(stderr, "usage: pairs [-r ROUNDS] [-n PAIRS] [ALGORITHM...]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64 || pairs < 100) {
        fprintf(stderr, "pairs: -r must be 1..64 and -n at least 100\n");
        return 2;
    }
    const char *algos[128];
    int na = 0;
    if (optind < argc) {
        for (int i = optind; i < argc && na < 128; i++) {
            liblock_algorithm_info_t info;
            if (liblock_algorithm_info(argv[i], &info)) {
                fprintf(stderr, "pairs: unknown algorithm '%s'\n", argv[i]);
                return 2;
            }
            algos[na++] = argv[i];
        }
    } else {
        for (const char *const *a = liblock_algorithms(); *a && na < 128; a++) {
            liblock_algorithm_info_t info;
            liblock_algorithm_info(*a, &info);
            if (!(info.properties & LIBLOCK_PROP_DELEGATES)) /* lock/unlock pairs: classic locks */
                algos[na++] = *a;
        }
    }
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double probe0 = ncpu > 1 ? probe_default() : -1;
    static double one[128][64], two[128][64];
    for (int r = 0; r < rounds; r++)
        for (int a = 0; a < na; a++) { /* interleaved: A B C ... A B C ... */
            one[a][r] = measure(algos[a], 1, pairs);
            two[a][r] = ncpu > 1 ? measure(algos[a], 2, pairs / 4) : -1;
        }
    double probe1 = ncpu > 1 ? probe_default() : -1;
    printf("ns per lock/unlock pair, median of %d interleaved rounds [min-max]\n", rounds);
    printf("probe (CPU0<->CPU1 round trip): before %.0f ns, after %.0f ns%s\n", probe0, probe1,
           (probe0 > 0 && (probe1 > 1.5 * probe0 || probe0 > 1.5 * probe1)) ? "  ** regime changed during run **" : "");
    int posix = -1;
    for (int a = 0; a < na; a++)
        if (strcmp(algos[a], "posix") == 0)
            posix = a;
    double pmed1 = 0, pmed2 = 0;
    if (posix >= 0) {
        qsort(one[posix], (size_t)rounds, sizeof(double), cmpd);
        qsort(two[posix], (size_t)rounds, sizeof(double), cmpd);
        pmed1 = one[posix][rounds / 2];
        pmed2 = two[posix][rounds / 2];
    }
    printf("%-16s %22s %8s %22s %8s\n", "algorithm", "1 thread", "vs posix", "2 threads (2 CPUs)", "vs posix");
    for (int a = 0; a < na; a++) {
        qsort(one[a], (size_t)rounds, sizeof(double), cmpd);
        qsort(two[a], (size_t)rounds, sizeof(double), cmpd);
        double m1 = one[a][rounds / 2], m2 = two[a][rounds / 2];
        char b1[64], b2[64];
        snprintf(b1, sizeof b1, "%.1f [%.1f-%.1f]", m1, one[a][0], one[a][rounds - 1]);
        snprintf(b2, sizeof b2, "%.1f [%.1f-%.1f]", m2, two[a][0], two[a][rounds - 1]);
        printf("%-16s %22s %7.2fx %22s %7.2fx\n", algos[a], b1, pmed1 > 0 ? m1 / pmed1 : 0, b2,
               pmed2 > 0 ? m2 / pmed2 : 0);
    }
    return 0;
}
