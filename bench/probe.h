/*
 * probe.h - the cross-CPU ping-pong probe every benchmark records.
 *
 * On these virtual machines the round trip of a cache line between the two
 * CPUs switches between regimes (~65 ns, ~330 ns, rarely ~30 ns) for seconds
 * to minutes (docs/bench.md, "How to measure").  A benchmark takes a probe just
 * before and just after each run and reports both with its result, so that
 * results are compared only within one regime.
 *
 * The probe: two threads pinned to CPUs a and b bounce one cache-line-sized
 * word (a writes odd values, b answers with the next even value); the result
 * is the median over `reps` batches of the mean ns per round trip.
 */
#ifndef LIBLOCK_BENCH_PROBE_H
#define LIBLOCK_BENCH_PROBE_H

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

struct probe_line {
    _Alignas(64) volatile uint64_t word;
    char pad[56];
};

struct probe_arg {
    struct probe_line *line;
    int cpu;
    long rounds;
    int orphan; /* capped probe: set (before PROBE_STOP) when nobody will join the responder */
};

static inline uint64_t probe_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void probe_pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *probe_responder(void *p)
{
    struct probe_arg *a = p;
    probe_pin(a->cpu);
    for (long i = 0; i < a->rounds; i++) {
        uint64_t want = 2 * (uint64_t)i + 1;
        while (__atomic_load_n(&a->line->word, __ATOMIC_ACQUIRE) != want)
            __builtin_ia32_pause();
        __atomic_store_n(&a->line->word, want + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

static int probe_cmp(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Median ns per round trip between CPUs a and b (reps batches of `batch`
 * round trips).  Returns -1 when the machine has only one CPU. */
static inline double probe_roundtrip_ns(int cpu_a, int cpu_b, int reps, long batch)
{
    if (cpu_a == cpu_b)
        return -1;
    double res[64];
    if (reps > 64)
        reps = 64;
    for (int r = 0; r < reps; r++) {
        struct probe_line *line = aligned_alloc(64, sizeof *line);
        line->word = 0;
        struct probe_arg arg = {line, cpu_b, batch};
        pthread_t th;
        pthread_create(&th, NULL, probe_responder, &arg);
        cpu_set_t old;
        pthread_getaffinity_np(pthread_self(), sizeof old, &old);
        probe_pin(cpu_a);
        /* warm-up: first exchange also waits for the responder to start */
        uint64_t t0 = 0;
        for (long i = 0; i < batch; i++) {
            if (i == 1)
                t0 = probe_now_ns();
            __atomic_store_n(&line->word, 2 * (uint64_t)i + 1, __ATOMIC_RELEASE);
            while (__atomic_load_n(&line->word, __ATOMIC_ACQUIRE) != 2 * (uint64_t)i + 2)
                __builtin_ia32_pause();
        }
        uint64_t t1 = probe_now_ns();
        pthread_join(th, NULL);
        pthread_setaffinity_np(pthread_self(), sizeof old, &old);
        res[r] = (double)(t1 - t0) / (double)(batch - 1);
        free(line);
    }
    qsort(res, (size_t)reps, sizeof *res, probe_cmp);
    return res[reps / 2];
}

/* The default probe: CPUs 0 and 1, 5 batches of 20,000 round trips (~10 ms). */
static inline double probe_default(void) { return probe_roundtrip_ns(0, 1, 5, 20000); }

/* Responder for the capped probe: stops when it reads PROBE_STOP. */
#define PROBE_STOP UINT64_MAX
static void *probe_responder_capped(void *p)
{
    struct probe_arg *a = p;
    probe_pin(a->cpu);
    for (long i = 0; i < a->rounds; i++) {
        uint64_t want = 2 * (uint64_t)i + 1, v;
        while ((v = __atomic_load_n(&a->line->word, __ATOMIC_ACQUIRE)) != want) {
            if (v == PROBE_STOP) {
                if (__atomic_load_n(&a->orphan, __ATOMIC_ACQUIRE)) { /* detached: clean up */
                    free(a->line);
                    free(a);
                }
                return NULL;
            }
            __builtin_ia32_pause();
        }
        __atomic_store_n(&a->line->word, want + 1, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Like probe_roundtrip_ns, but a batch ends after cap_ns even if it has not
 * done all its round trips (on a loaded machine, where the responder waits
 * for a time slice, a probe must not take seconds): the mean is over the
 * round trips done; if the responder has not even started after 20 caps
 * (its CPU held by a real-time thread), the probe gives up and returns -1
 * (unknown).  Same method and units otherwise. */
static inline double probe_roundtrip_capped_ns(int cpu_a, int cpu_b, int reps, long batch, uint64_t cap_ns)
{
    if (cpu_a == cpu_b)
        return -1;
    double res[64];
    if (reps > 64)
        reps = 64;
    int got = 0;
    for (int r = 0; r < reps; r++) {
        struct probe_line *line = aligned_alloc(64, sizeof *line);
        line->word = 0;
        struct probe_arg *arg = malloc(sizeof *arg);
        *arg = (struct probe_arg){line, cpu_b, batch};
        pthread_t th;
        if (pthread_create(&th, NULL, probe_responder_capped, arg)) {
            free(arg);
            free(line);
            break;
        }
        cpu_set_t old;
        pthread_getaffinity_np(pthread_self(), sizeof old, &old);
        probe_pin(cpu_a);
        uint64_t start = probe_now_ns(), t0 = 0, t1 = 0;
        long done = 0;
        int started = 1, cut = 0;
        for (long i = 0; i < batch && !cut; i++) {
            if (i == 1)
                t0 = probe_now_ns(); /* the first exchange also waits for the responder to start */
            __atomic_store_n(&line->word, 2 * (uint64_t)i + 1, __ATOMIC_RELEASE);
            unsigned spins = 0;
            while (__atomic_load_n(&line->word, __ATOMIC_ACQUIRE) != 2 * (uint64_t)i + 2) {
                __builtin_ia32_pause();
                if ((++spins & 1023) == 0) {
                    uint64_t now = probe_now_ns();
                    /* the responder's CPU may be held by another (real-time)
                     * thread: never wait for it for ever */
                    if (i == 0 && now - start > 20 * cap_ns) {
                        started = 0, cut = 1;
                        break;
                    }
                    if (i > 0 && now - t0 > cap_ns) {
                        cut = 1; /* this exchange is not complete: i - 1 are */
                        break;
                    }
                }
            }
            if (!cut && i >= 1) {
                done = i;
                if ((i & 63) == 0 && probe_now_ns() - t0 > cap_ns)
                    break;
            }
        }
        t1 = probe_now_ns();
        if (cut) /* the responder frees the line and argument when it sees PROBE_STOP */
            __atomic_store_n(&arg->orphan, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&line->word, PROBE_STOP, __ATOMIC_RELEASE);
        pthread_setaffinity_np(pthread_self(), sizeof old, &old);
        if (cut) {
            /* the responder may not run for a while: do not wait for it;
             * it finds PROBE_STOP whenever it runs */
            pthread_detach(th);
        } else {
            pthread_join(th, NULL);
            free(arg);
            free(line);
        }
        if (!started)
            break;
        if (done > 0)
            res[got++] = (double)(t1 - t0) / (double)done;
    }
    if (!got)
        return -1;
    qsort(res, (size_t)got, sizeof *res, probe_cmp);
    return res[got / 2];
}

/* A shorter probe for benchmarks that take one before and after every run:
 * 7 batches of 4,000 round trips (~2 ms on an idle machine), each batch cut
 * at 5 ms on a loaded one.  Same units as probe_default(). */
static inline double probe_quick(void) { return probe_roundtrip_capped_ns(0, 1, 7, 4000, 5000000); }

#endif
