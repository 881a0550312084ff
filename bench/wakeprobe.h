/*
 * wakeprobe.h - the wake-up probe: how long a thread parked in futex_wait
 * takes to run after another thread wakes it, on this machine, now.
 *
 * Why: a FIFO lock under oversubscription hands the lock to a waiter that
 * is parked, so every hand-off pays at least one wake-up.  The
 * only fair yardstick for such a hand-off is the wake-up itself, measured
 * in the same run (the machine's scheduling costs move with its load, as
 * the cache-line round trip of probe.h moves with its regime).
 *
 * One sample: the sleeper announces the sample's sequence number and parks
 * in futex_wait on `word`; the waker waits until the kernel reports the
 * sleeper's state as 'S' (/proc/self/task/TID/stat: really asleep in the
 * futex, not about to be), reads the clock (t0), stores the sequence number
 * into `word` and calls futex_wake; the sleeper, back from futex_wait, reads
 * the clock (t1) and publishes it.  The sample is t1 - t0: the store, the
 * wake system call, the scheduler putting the sleeper on a CPU and the
 * sleeper's return to user space.  CLOCK_MONOTONIC is one clock for all
 * CPUs.  The probe is the median of the samples.
 *
 * Two placements:
 *  - cross: waker pinned to CPU a, sleeper to CPU b (an idle CPU is woken:
 *    the inter-processor interrupt and the exit from idle, which on a VM is
 *    a hypervisor round trip) - the case of a lock holder on one CPU waking
 *    the next owner parked on the other;
 *  - same: both on CPU a; after futex_wake the waker parks itself (on
 *    `ack`), so the sleeper runs when the waker's CPU is free: wake-up plus
 *    one context switch - the case of a CPU shared by more threads.
 *
 * Bounded: waiting for the sleeper to park is cut at 20 ms per sample (the
 * sample is then not counted), the whole probe at cap_ns; if the sleeper
 * does not even start within 100 ms (its CPU held by a real-time thread)
 * the probe gives up and returns -1.  Samples cut short are not counted.
 */
#ifndef LIBLOCK_BENCH_WAKEPROBE_H
#define LIBLOCK_BENCH_WAKEPROBE_H

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct wake_shared {
    _Alignas(64) uint32_t word; /* the sleeper parks on it until it holds its sequence number */
    _Alignas(64) uint32_t ack;  /* the waker parks on it until the sleeper has run */
    _Alignas(64) uint32_t announce;
    uint64_t t_run;
    int tid, started, stop, orphan;
    int cpu;
};

static inline uint64_t wake_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void wake_futex_wait(uint32_t *addr, uint32_t val, uint64_t timeout_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, timeout_ns ? &ts : NULL, NULL, 0);
}

static inline void wake_futex_wake(uint32_t *addr)
{
    syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static inline void wake_pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* The scheduler state of thread tid of this process ('S' = sleeping), or 0. */
static inline char wake_task_state(int tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* the name may contain spaces and parentheses */
    return p && p[1] == ' ' ? p[2] : 0;
}

static void *wake_sleeper(void *p)
{
    struct wake_shared *s = p;
    wake_pin(s->cpu);
    __atomic_store_n(&s->tid, (int)syscall(SYS_gettid), __ATOMIC_RELEASE);
    __atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
    for (uint32_t seq = 1;; seq++) {
        __atomic_store_n(&s->announce, seq, __ATOMIC_RELEASE);
        uint32_t w;
        while ((w = __atomic_load_n(&s->word, __ATOMIC_ACQUIRE)) != seq) {
            if (__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE))
                goto out;
            wake_futex_wait(&s->word, w, 0);
        }
        uint64_t t1 = wake_now_ns();
        __atomic_store_n(&s->t_run, t1, __ATOMIC_RELEASE);
        __atomic_store_n(&s->ack, seq, __ATOMIC_RELEASE);
        wake_futex_wake(&s->ack);
    }
out:
    if (__atomic_load_n(&s->orphan, __ATOMIC_ACQUIRE))
        free(s);
    return NULL;
}

static int wake_cmp_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* Median wake-up latency in ns over up to `samples` samples (at most 1000),
 * waker on cpu_a and sleeper on cpu_b (cpu_b == cpu_a: the same-CPU
 * placement); the whole probe is cut at cap_ns.  *got (if not NULL)
 * receives the number of samples counted.  -1 if none could be taken. */
static inline double wake_probe_ns(int cpu_a, int cpu_b, int samples, uint64_t cap_ns, int *got)
{
    uint64_t lat[1000];
    int n = 0;
    if (samples > 1000)
        samples = 1000;
    if (got)
        *got = 0;
    struct wake_shared *s = aligned_alloc(64, sizeof *s);
    if (!s)
        return -1;
    memset(s, 0, sizeof *s);
    s->cpu = cpu_b;
    cpu_set_t old;
    pthread_getaffinity_np(pthread_self(), sizeof old, &old);
    wake_pin(cpu_a);
    pthread_t th;
    if (pthread_create(&th, NULL, wake_sleeper, s)) {
        pthread_setaffinity_np(pthread_self(), sizeof old, &old);
        free(s);
        return -1;
    }
    const int same = cpu_a == cpu_b;
    uint64_t start = wake_now_ns();
    int alive = 1;
    while (!__atomic_load_n(&s->started, __ATOMIC_ACQUIRE)) {
        if (wake_now_ns() - start > 100000000ull) {
            alive = 0;
            break;
        }
        if (same)
            sched_yield();
        else
            usleep(50);
    }
    for (uint32_t seq = 1; alive && seq <= (uint32_t)samples; seq++) {
        if (wake_now_ns() - start > cap_ns)
            break;
        /* wait until the sleeper is parked in the futex for this sample */
        uint64_t w0 = wake_now_ns();
        int parked = 0;
        for (;;) {
            if (__atomic_load_n(&s->announce, __ATOMIC_ACQUIRE) == seq &&
                wake_task_state(__atomic_load_n(&s->tid, __ATOMIC_ACQUIRE)) == 'S') {
                parked = 1;
                break;
            }
            if (wake_now_ns() - w0 > 20000000ull)
                break;
            if (same)
                sched_yield();
            else
                usleep(20);
        }
        uint64_t t0 = wake_now_ns();
        __atomic_store_n(&s->word, seq, __ATOMIC_RELEASE);
        wake_futex_wake(&s->word);
        /* wait for the sleeper to have run (parked: on the same CPU, this
         * is what lets it run); bounded so a starved sleeper cannot hang us */
        uint64_t a0 = wake_now_ns();
        uint32_t a;
        while ((a = __atomic_load_n(&s->ack, __ATOMIC_ACQUIRE)) != seq) {
            if (wake_now_ns() - a0 > 100000000ull) {
                alive = 0;
                break;
            }
            wake_futex_wait(&s->ack, a, 10000000ull);
        }
        if (!alive)
            break;
        uint64_t t1 = __atomic_load_n(&s->t_run, __ATOMIC_ACQUIRE);
        if (parked && t1 >= t0)
            lat[n++] = t1 - t0;
    }
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    if (!alive) { /* the sleeper may not run for a while: it frees s when it does */
        __atomic_store_n(&s->orphan, 1, __ATOMIC_RELEASE);
        __atomic_store_n(&s->word, UINT32_MAX, __ATOMIC_RELEASE);
        wake_futex_wake(&s->word);
        pthread_detach(th);
    } else {
        __atomic_store_n(&s->word, UINT32_MAX, __ATOMIC_RELEASE);
        wake_futex_wake(&s->word);
        pthread_join(th, NULL);
        free(s);
    }
    pthread_setaffinity_np(pthread_self(), sizeof old, &old);
    if (got)
        *got = n;
    if (!n)
        return -1;
    qsort(lat, (size_t)n, sizeof *lat, wake_cmp_u64);
    return (double)lat[n / 2];
}

/* The probe lockbench records with each run: 100 samples, cut at 150 ms.
 * cross: waker on CPU 0, sleeper on CPU 1 (-1 on a one-CPU machine);
 * same: both on CPU 0. */
static inline double wake_probe_cross(void) { return wake_probe_ns(0, 1, 100, 150000000ull, NULL); }
static inline double wake_probe_same(void) { return wake_probe_ns(0, 0, 100, 150000000ull, NULL); }

#endif
