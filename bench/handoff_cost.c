/*
 * handoff_cost - cost per hand-off of a lock with more threads than CPUs,
 * next to a futex wake-up probe measured in the same run.
 *
 * For each algorithm named (default: ticket clh mcs posix spin ttas) and
 * each thread count (-t, default 8 and 32), T threads run short critical
 * sections (a counter increment) on one lock with its default policy for
 * -d seconds; the cost per hand-off is elapsed / critical sections (with
 * short critical sections a FIFO lock's throughput is its hand-off rate).
 * Before each run the wake-up probe measures, 200 times, the time from
 * futex_wake of a thread parked in futex_wait until that thread runs, and
 * prints the median (and 90th percentile).
 *
 * Usage: handoff_cost [-d SECONDS] [-t N]... [-w POLICY] [ALGORITHM...]
 * (-w: a waiting policy instead of each algorithm's default)
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- wake-up probe ---- */
#define PROBES 200
static _Atomic uint32_t probe_word;
static _Atomic uint64_t probe_t0;
static uint64_t probe_lat[PROBES];

static void *probe_sleeper(void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < PROBES; i++) {
        ll_wait_while(&probe_word, 2 * i, LIBLOCK_WAIT_PARK);   /* woken: 2i -> 2i+1 */
        probe_lat[i] = ll_now_ns() - atomic_load(&probe_t0);
        ll_wake(&probe_word, 2 * i + 2, LIBLOCK_WAIT_PARK);     /* tell the waker */
    }
    return NULL;
}

static void wake_probe(double *median_us, double *p90_us)
{
    atomic_store(&probe_word, 0);
    pthread_t th;
    pthread_create(&th, NULL, probe_sleeper, NULL);
    for (uint32_t i = 0; i < PROBES; i++) {
        /* let the sleeper get into futex_wait */
        while (!(atomic_load(&probe_word) & LL_PARKED))
            usleep(50);
        atomic_store(&probe_t0, ll_now_ns());
        ll_wake(&probe_word, 2 * i + 1, LIBLOCK_WAIT_PARK);
        ll_wait_while(&probe_word, 2 * i + 1, LIBLOCK_WAIT_PARK);
    }
    pthread_join(th, NULL);
    qsort(probe_lat, PROBES, sizeof *probe_lat, cmp_u64);
    *median_us = probe_lat[PROBES / 2] / 1e3;
    *p90_us = probe_lat[PROBES * 9 / 10] / 1e3;
}

/* ---- lock run ---- */
static liblock_t L;
static volatile long counter;
static _Atomic int stop;
static pthread_barrier_t start;

static void *worker(void *arg)
{
    long *mine = arg;
    pthread_barrier_wait(&start);
    long n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        liblock_lock(&L);
        counter++;
        liblock_unlock(&L);
        n++;
    }
    *mine = n;
    return NULL;
}

static int policy;

static double run_lock(const char *algo, int nthreads, double secs, long *total)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    if (liblock_init(&L, algo, &a)) {
        fprintf(stderr, "cannot init %s\n", algo);
        return -1;
    }
    counter = 0;
    atomic_store(&stop, 0);
    pthread_t th[256];
    long done[256];
    pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, worker, &done[i]);
    pthread_barrier_wait(&start);
    uint64_t t0 = ll_now_ns();
    usleep((useconds_t)(secs * 1e6));
    atomic_store(&stop, 1);
    long sum = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        sum += done[i];
    }
    uint64_t el = ll_now_ns() - t0;
    pthread_barrier_destroy(&start);
    liblock_destroy(&L);
    *total = sum;
    return sum ? (double)el / (double)sum / 1e3 : -1;
}

int main(int argc, char **argv)
{
    double secs = 1.0;
    int counts[8], ncounts = 0;
    const char *algos[32];
    int nalgos = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") && i + 1 < argc)
            secs = atof(argv[++i]);
        else if (!strcmp(argv[i], "-w") && i + 1 < argc) {
            if (liblock_wait_parse(argv[++i], &policy)) {
                fprintf(stderr, "unknown policy %s\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "-t") && i + 1 < argc && ncounts < 8)
            counts[ncounts++] = atoi(argv[++i]);
        else if (nalgos < 32)
            algos[nalgos++] = argv[i];
    }
    if (!ncounts) {
        counts[0] = 8;
        counts[1] = 32;
        ncounts = 2;
    }
    if (!nalgos) {
        static const char *const d[] = {"ticket", "clh", "mcs", "posix", "spin", "ttas"};
        for (int i = 0; i < 6; i++)
            algos[nalgos++] = d[i];
    }
    const char *src;
    uint64_t budget = ll_spin_budget_ns(&src);
    printf("# %d CPUs, spin budget %llu ns (%s), %.1f s per run\n", ll_ncpus(), (unsigned long long)budget, src, secs);
    printf("%-8s %-15s %7s %12s %14s %14s %8s\n", "algo", "policy", "threads", "CS", "us/hand-off", "wake-up med",
           "ratio");
    for (int a = 0; a < nalgos; a++)
        for (int c = 0; c < ncounts; c++) {
            double med, p90;
            wake_probe(&med, &p90);
            long total;
            double per = run_lock(algos[a], counts[c], secs, &total);
            liblock_algorithm_info_t in;
            liblock_algorithm_info(algos[a], &in);
            printf("%-8s %-15s %7d %12ld %14.3f %8.2f (p90 %.1f) %6.2f\n", algos[a],
                   liblock_wait_name(policy ? policy : in.default_policy), counts[c], total, per, med, p90, per / med);
            fflush(stdout);
        }
    return 0;
}
