/*
 * oncpu_cost - nanoseconds per ll_oncpu(tid) call with the mechanism this
 * process gets (LIBLOCK_ONCPU=ebpf|fallback|none chooses; docs/oncpu.md).
 *
 * Three targets: the calling thread itself (running), a thread spinning on
 * another CPU (running; skipped with one CPU), a thread blocked in read()
 * (not running).  Each is timed over N back-to-back calls (CLOCK_MONOTONIC
 * around the loop), in R rounds; printed: median [min-max] ns per call, and
 * the answers seen (how many 1, 0, -1).
 *
 * usage: oncpu_cost [-n CALLS] [-r ROUNDS]   (defaults 200000 and 5)
 */
#include "internal.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic pid_t spin_tid, block_tid;
static _Atomic int stop;
static int pipefd[2];

static void *spinner(void *a)
{
    (void)a;
    atomic_store(&spin_tid, (pid_t)syscall(SYS_gettid));
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        ;
    return NULL;
}

static void *blocker(void *a)
{
    (void)a;
    char c;
    atomic_store(&block_tid, (pid_t)syscall(SYS_gettid));
    if (read(pipefd[0], &c, 1) < 0)
        perror("read");
    return NULL;
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void measure(const char *what, pid_t tid, long n, int rounds)
{
    double ns[64];
    long seen[3] = {0, 0, 0};
    for (int r = 0; r < rounds; r++) {
        double t0 = now_ns();
        for (long i = 0; i < n; i++)
            seen[ll_oncpu(tid) + 1]++;
        ns[r] = (now_ns() - t0) / (double)n;
    }
    qsort(ns, (size_t)rounds, sizeof ns[0], cmp);
    printf("  %-28s %8.1f ns [%.1f-%.1f]   answers: 1 x%ld, 0 x%ld, -1 x%ld\n", what, ns[rounds / 2], ns[0],
           ns[rounds - 1], seen[2], seen[1], seen[0]);
}

int main(int argc, char **argv)
{
    long n = 200000;
    int rounds = 5, c;
    while ((c = getopt(argc, argv, "n:r:")) != -1) {
        if (c == 'n')
            n = atol(optarg);
        else if (c == 'r')
            rounds = atoi(optarg);
        else {
            fprintf(stderr, "usage: oncpu_cost [-n CALLS] [-r ROUNDS]\n");
            return 2;
        }
    }
    if (n < 1 || rounds < 1 || rounds > 64) {
        fprintf(stderr, "oncpu_cost: -n >= 1, 1 <= -r <= 64\n");
        return 2;
    }
    printf("oncpu_cost: %s\n", ll_oncpu_reason());
    cpu_set_t set;
    int cpus[2] = {-1, -1}, k = 0;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        for (int i = 0; i < CPU_SETSIZE && k < 2; i++)
            if (CPU_ISSET(i, &set))
                cpus[k++] = i;
    if (pipe(pipefd) != 0)
        return 1;
    pthread_t s, b;
    pthread_attr_t at;
    pthread_attr_init(&at);
    if (k == 2) {
        ll_pin_self(cpus[0]);
        CPU_ZERO(&set);
        CPU_SET(cpus[1], &set);
        pthread_attr_setaffinity_np(&at, sizeof set, &set);
        pthread_create(&s, &at, spinner, NULL);
    }
    pthread_create(&b, NULL, blocker, NULL);
    while (!atomic_load(&block_tid) || (k == 2 && !atomic_load(&spin_tid)))
        ;
    usleep(100000); /* the blocker reaches its read() */
    measure("self (running)", (pid_t)syscall(SYS_gettid), n, rounds);
    if (k == 2)
        measure("spinner on another CPU", atomic_load(&spin_tid), n, rounds);
    else
        printf("  spinner on another CPU: one CPU only, not measured\n");
    measure("blocked in read()", atomic_load(&block_tid), n, rounds);
    atomic_store(&stop, 1);
    if (write(pipefd[1], "x", 1) != 1)
        return 1;
    if (k == 2)
        pthread_join(s, NULL);
    pthread_join(b, NULL);
    return 0;
}
