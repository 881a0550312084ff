/*
 * timer_cost - what reading the clock costs a lock/unlock pair, the price a
 * lock profiler pays for exact wait and hold times (docs/profile-runtime.md,
 * "Cost").
 *
 *   timer_cost [-t THREADS] [-m LOCKS] [-n PAIRS]
 *
 * THREADS threads (default 2) each take a random one of LOCKS glibc mutexes
 * (default 4096, one per cache line) PAIRS times (default 2,000,000), with
 * one of these added to every pair:
 *   none        nothing (the program without a profiler)
 *   rdtsc       one rdtsc before the lock
 *   rdtsc x2    one before the lock and one after the unlock (a profiler's
 *               acquisition and release times)
 *   lfence      one lfence before the lock (for comparison: an instruction
 *               that waits for every earlier one to finish)
 *   rdpid       one rdpid before the lock (a cheap instruction that does
 *               not wait), when the CPU has it
 * and prints ns per pair (wall time ÷ the pairs of one thread), the
 * variants interleaved, median of 5 rounds.  On a machine where rdtsc costs
 * as much as lfence with random locks, the clock reads, not the profiler's
 * records, dominate what exact timing costs.
 */
#include <cpuid.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { V_NONE, V_RDTSC, V_RDTSC2, V_LFENCE, V_RDPID, NV };
static const char *vname[NV] = {"none", "rdtsc", "rdtsc x2", "lfence", "rdpid"};

struct padded {
    pthread_mutex_t m;
} __attribute__((aligned(64)));

static struct padded *locks;
static long nlocks = 4096, pairs = 2000000;
static int variant;
static volatile uint64_t sink;

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("rdtsc" : "=a"(lo), "=d"(hi));
    return ((uint64_t)hi << 32) | lo;
}

static void *worker(void *arg)
{
    uint32_t s = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    uint64_t acc = 0;
    int v = variant;
    for (long i = 0; i < pairs; i++) {
        s = s * 1103515245u + 12345u;
        pthread_mutex_t *m = &locks[(s >> 8) % (uint32_t)nlocks].m;
        if (v == V_RDTSC || v == V_RDTSC2)
            acc += rdtsc();
        else if (v == V_LFENCE)
            __asm__ __volatile__("lfence" ::: "memory");
        else if (v == V_RDPID) {
            uint64_t x;
            __asm__ __volatile__("rdpid %0" : "=r"(x));
            acc += x;
        }
        pthread_mutex_lock(m);
        pthread_mutex_unlock(m);
        if (v == V_RDTSC2)
            acc += rdtsc();
    }
    sink = acc;
    return NULL;
}

static double run(int threads)
{
    pthread_t t[64];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < threads; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1))) {
            fprintf(stderr, "timer_cost: pthread_create failed\n");
            exit(1);
        }
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)pairs;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int threads = 2, c;
    while ((c = getopt(argc, argv, "t:m:n:")) != -1) {
        switch (c) {
        case 't': threads = atoi(optarg); break;
        case 'm': nlocks = atol(optarg); break;
        case 'n': pairs = atol(optarg); break;
        default:
            fprintf(stderr, "usage: timer_cost [-t THREADS] [-m LOCKS] [-n PAIRS]\n");
            return 2;
        }
    }
    if (threads < 1 || threads > 64 || nlocks < 1 || pairs < 1) {
        fprintf(stderr, "timer_cost: need 1-64 threads, at least one lock and one pair\n");
        return 2;
    }
    unsigned a, b, cx, d;
    int has_rdpid = __get_cpuid_count(7, 0, &a, &b, &cx, &d) && (cx & (1u << 22));
    locks = aligned_alloc(64, (size_t)nlocks * sizeof *locks);
    if (!locks) {
        fprintf(stderr, "timer_cost: out of memory\n");
        return 1;
    }
    for (long i = 0; i < nlocks; i++)
        pthread_mutex_init(&locks[i].m, NULL);
    enum { ROUNDS = 5 };
    double ns[NV][ROUNDS];
    for (int r = 0; r < ROUNDS; r++)
        for (int v = 0; v < NV; v++) {
            variant = v;
            ns[v][r] = v == V_RDPID && !has_rdpid ? -1 : run(threads);
        }
    printf("# %d thread(s), %ld mutexes, %ld pairs per thread; ns per pair, median of %d interleaved rounds\n",
           threads, nlocks, pairs, ROUNDS);
    for (int v = 0; v < NV; v++) {
        if (ns[v][0] < 0) {
            printf("%-9s not available on this CPU\n", vname[v]);
            continue;
        }
        qsort(ns[v], ROUNDS, sizeof ns[v][0], cmp);
        printf("%-9s %.1f\n", vname[v], ns[v][ROUNDS / 2]);
    }
    return 0;
}
