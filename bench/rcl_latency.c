/*
 * rcl_latency - cost of a delegated critical section (RCL) against the
 * cross-CPU cache-line round trip (bench/probe.h), and throughput/fairness
 * with 1..64 client threads sharing the non-server CPU.
 *
 * Latency: one client pinned on CPU C, the server on CPU S (defaults 0 and
 * the last CPU).  Each round: probe (C<->S) | N execute() with an empty CS |
 * N execute() with a CS that increments 5 shared lines | probe.  The 5
 * lines are touched only by the CS, so they stay in the server's cache.  The server
 * is idle-parked during the probes (the bench sleeps past LIBLOCK_RCL_IDLE_US
 * first), so the probe's responder gets CPU S.  Reported per round: ns per
 * CS and the ratio to the mean of the two probes; then the median, min and
 * max of the ratios over the rounds.
 *
 * Throughput: T client threads (1..64) all pinned on CPU C run execute() in
 * a loop for a fixed time; reported: million CSs per second, the max/min
 * ratio of per-thread counts (the raw balance), of per-thread CPU times
 * (CLOCK_THREAD_CPUTIME_ID: how evenly the scheduler split CPU C) and of
 * per-thread CSs per CPU-second (how evenly the server served the clients
 * while they ran), for the spin, spin-then-park and yield policies.
 *
 * -w P[,P2] times the latency with the client waiting policy P (default:
 * the library's default for rcl); with P2, a second lock with policy P2 on
 * the same server is timed in the same rounds, interleaved with the first,
 * and the ratio P2/P of each round is reported (the cross-CPU distance
 * moves between runs, so policies are compared within one run).
 *
 * -f runs the latency part (client and both probe threads) under SCHED_FIFO
 * priority 1, below the server's threads, so that other processes on a
 * shared machine do not preempt the measuring threads (opt-in: the client
 * then monopolises its CPU for the few tens of ms each timing lasts).
 *
 * usage: rcl_latency [-f] [-w P[,P2]] [-r ROUNDS] [-n CS_PER_ROUND] [-t MS_PER_POINT] [-c CLIENT_CPU] [-s SERVER_CPU]
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "liblock.h"
#include "probe.h"

struct lines {
    _Alignas(64) volatile long v[8];
};
/* The 5 lines only the server touches (through the CS).  128-byte aligned
 * and padded to a whole number of 128-byte pairs, so that no variable the
 * client reads shares an adjacent-line-prefetch pair with them. */
static struct {
    struct lines l[5];
    char pad[64];
} __attribute__((aligned(128))) five;
#define data five.l
static _Alignas(64) liblock_t lock;   /* on its own line: the CS never writes it */
static _Alignas(64) liblock_t lock2;  /* -w P,P2: the second policy */
static _Alignas(64) volatile long counter;

static void *cs_empty(void *a) { return a; }
static void *cs_five(void *a)
{
    for (int i = 0; i < 5; i++)
        data[i].v[0]++;
    return a;
}
static void *cs_count(void *a)
{
    counter++;
    return a;
}

static int cmpd(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double time_cs_on(liblock_t *l, void *(*cs)(void *), long n)
{
    for (long i = 0; i < 1000; i++) /* warm up: wake the server, fault in the slot */
        liblock_execute(l, cs, NULL);
    uint64_t t0 = probe_now_ns();
    for (long i = 0; i < n; i++)
        liblock_execute(l, cs, NULL);
    return (double)(probe_now_ns() - t0) / (double)n;
}
static double time_cs(void *(*cs)(void *), long n) { return time_cs_on(&lock, cs, n); }

struct tp_arg {
    int cpu;
    volatile int *stop;
    long count;
    double cpu_s; /* CPU time this thread received while it ran the loop */
    pthread_barrier_t *bar;
    liblock_t *l;
};
static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}
static void *tp_thread(void *p)
{
    struct tp_arg *a = p;
    probe_pin(a->cpu);
    pthread_barrier_wait(a->bar);
    long c = 0;
    double c0 = thread_cpu_s();
    while (!__atomic_load_n(a->stop, __ATOMIC_RELAXED)) {
        liblock_execute(a->l, cs_count, NULL);
        c++;
    }
    a->cpu_s = thread_cpu_s() - c0;
    a->count = c;
    return NULL;
}

static double ratio(double mx, double mn) { return mn > 0 ? mx / mn : 0.0; }

static void throughput(int ccpu, liblock_server_t *srv, int policy, int nthreads, int ms)
{
    liblock_attr_t at;
    liblock_attr_init(&at);
    liblock_attr_setserver(&at, srv);
    liblock_attr_setwait(&at, policy);
    liblock_t l;
    if (liblock_init(&l, "rcl", &at) != 0)
        return;
    struct tp_arg a[64];
    pthread_t th[64];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
    volatile int stop = 0;
    counter = 0;
    for (int i = 0; i < nthreads; i++) {
        a[i] = (struct tp_arg){ccpu, &stop, 0, 0.0, &bar, &l};
        pthread_create(&th[i], NULL, tp_thread, &a[i]);
    }
    pthread_barrier_wait(&bar);
    uint64_t t0 = probe_now_ns();
    usleep((useconds_t)ms * 1000);
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    long total = 0;
    double mx = 0, mn = -1, cmx = 0, cmn = -1, rmx = 0, rmn = -1;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(th[i], NULL);
        total += a[i].count;
        double c = (double)a[i].count, cpu = a[i].cpu_s, rate = cpu > 0 ? c / cpu : 0;
        mx = c > mx ? c : mx;
        mn = mn < 0 || c < mn ? c : mn;
        cmx = cpu > cmx ? cpu : cmx;
        cmn = cmn < 0 || cpu < cmn ? cpu : cmn;
        rmx = rate > rmx ? rate : rmx;
        rmn = rmn < 0 || rate < rmn ? rate : rmn;
    }
    double secs = (double)(probe_now_ns() - t0) / 1e9;
    /* count max/min is the raw per-client balance; a client cannot complete
     * more CSs than its share of the CPU allows, so the CPU-time max/min and
     * the CS-per-CPU-second max/min separate the scheduler's split of the
     * client CPU from the server's treatment of the clients. */
    printf("  %-5s %2d threads: %7.3f M CS/s  count max/min %5.2f  cpu-time max/min %5.2f  "
           "CS/cpu-s max/min %5.2f\n",
           liblock_wait_name(policy), nthreads, (double)total / secs / 1e6, ratio(mx, mn), ratio(cmx, cmn),
           ratio(rmx, rmn));
    liblock_destroy(&l);
    pthread_barrier_destroy(&bar);
}

int main(int argc, char **argv)
{
    int rounds = 7, ms = 500, ccpu = 0, scpu = (int)sysconf(_SC_NPROCESSORS_ONLN) - 1;
    long n = 200000;
    int opt, fifo = 0, pol1 = LIBLOCK_WAIT_DEFAULT, pol2 = -1;
    while ((opt = getopt(argc, argv, "fw:r:n:t:c:s:")) != -1) {
        switch (opt) {
        case 'f': fifo = 1; break;
        case 'w': {
            char buf[64];
            snprintf(buf, sizeof buf, "%s", optarg);
            char *comma = strchr(buf, ',');
            if (comma)
                *comma++ = 0;
            if (liblock_wait_parse(buf, &pol1) != 0 || (comma && liblock_wait_parse(comma, &pol2) != 0)) {
                fprintf(stderr, "rcl_latency: -w: unknown policy in '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case 'r': rounds = atoi(optarg); break;
        case 'n': n = atol(optarg); break;
        case 't': ms = atoi(optarg); break;
        case 'c': ccpu = atoi(optarg); break;
        case 's': scpu = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: rcl_latency [-f] [-w P[,P2]] [-r ROUNDS] [-n CS] [-t MS] [-c CLIENT_CPU] [-s SERVER_CPU]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > 64 || n < 1 || ms < 1 || ccpu == scpu || ccpu < 0 || scpu < 0) {
        fprintf(stderr, "rcl_latency: bad arguments (rounds 1..64, client CPU != server CPU)\n");
        return 2;
    }
    setenv("LIBLOCK_RCL_IDLE_US", "2000", 0);
    liblock_server_t *srv = liblock_server_start(scpu);
    if (!srv) {
        fprintf(stderr, "rcl_latency: cannot start a server on CPU %d: %s\n", scpu, strerror(errno));
        return 1;
    }
    liblock_attr_t at;
    liblock_attr_init(&at);
    liblock_attr_setserver(&at, srv);
    liblock_attr_setwait(&at, pol1);
    if (liblock_init(&lock, "rcl", &at) != 0) {
        fprintf(stderr, "rcl_latency: init failed (policy %s)\n", liblock_wait_name(pol1));
        return 1;
    }
    liblock_attr_setwait(&at, pol2 < 0 ? pol1 : pol2);
    if (pol2 >= 0 && liblock_init(&lock2, "rcl", &at) != 0) {
        fprintf(stderr, "rcl_latency: init failed (policy %s)\n", liblock_wait_name(pol2));
        return 1;
    }
    liblock_getwait(&lock, &pol1);
    probe_pin(ccpu);
    struct sched_param sp = {.sched_priority = 1};
    if (fifo && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) != 0) {
        fprintf(stderr, "rcl_latency: -f: SCHED_FIFO refused; measuring under the normal scheduler\n");
        fifo = 0;
    }
    liblock_server_stats_t st;
    liblock_server_stats(srv, &st);
    printf("rcl_latency: client CPU %d, server CPU %d%s, %d rounds of %ld CSs%s, policy %s%s%s\n", ccpu, scpu,
           st.degraded ? " (degraded)" : "", rounds, n, fifo ? ", measuring threads SCHED_FIFO" : "",
           liblock_wait_name(pol1), pol2 >= 0 ? " vs " : "", pol2 >= 0 ? liblock_wait_name(pol2) : "");
    if (pol2 >= 0) {
        /* interleaved: P empty, P2 empty, P 5-line, P2 5-line in every round */
        printf("round  probe-before  %s empty / 5-line   %s empty / 5-line   probe-after   P2/P empty  P2/P 5-line\n",
               liblock_wait_name(pol1), liblock_wait_name(pol2));
        double qe[64], q5[64], a1[64], a2[64];
        for (int r = 0; r < rounds; r++) {
            usleep(20000);
            probe_pin(scpu);
            double p0 = probe_roundtrip_ns(ccpu, scpu, 5, 20000);
            probe_pin(ccpu);
            double e1 = time_cs_on(&lock, cs_empty, n), e2 = time_cs_on(&lock2, cs_empty, n);
            double f1 = time_cs_on(&lock, cs_five, n), f2 = time_cs_on(&lock2, cs_five, n);
            usleep(20000);
            probe_pin(scpu);
            double p1 = probe_roundtrip_ns(ccpu, scpu, 5, 20000);
            probe_pin(ccpu);
            qe[r] = e2 / e1;
            q5[r] = f2 / f1;
            a1[r] = e1 / ((p0 + p1) / 2);
            a2[r] = e2 / ((p0 + p1) / 2);
            printf("%5d  %9.1f ns  %7.1f / %7.1f ns   %7.1f / %7.1f ns   %8.1f ns   %8.3f x  %8.3f x\n", r, p0, e1, f1,
                   e2, f2, p1, qe[r], q5[r]);
            fflush(stdout);
        }
        qsort(qe, (size_t)rounds, sizeof *qe, cmpd);
        qsort(q5, (size_t)rounds, sizeof *q5, cmpd);
        qsort(a1, (size_t)rounds, sizeof *a1, cmpd);
        qsort(a2, (size_t)rounds, sizeof *a2, cmpd);
        printf("median: %s/%s empty CS %.3fx (min %.3f, max %.3f), 5-line CS %.3fx (min %.3f, max %.3f); "
               "empty CS / probe: %s %.2fx, %s %.2fx\n",
               liblock_wait_name(pol2), liblock_wait_name(pol1), qe[rounds / 2], qe[0], qe[rounds - 1],
               q5[rounds / 2], q5[0], q5[rounds - 1], liblock_wait_name(pol1), a1[rounds / 2],
               liblock_wait_name(pol2), a2[rounds / 2]);
        liblock_destroy(&lock);
        liblock_destroy(&lock2);
        liblock_server_stop(srv);
        return 0;
    }
    printf("round  probe-before  empty-CS  5-line-CS  probe-after   ratio-empty  ratio-5line\n");
    double re[64], r5[64], pe[64], e_ns[64], f_ns[64];
    for (int r = 0; r < rounds; r++) {
        usleep(20000); /* let the server idle-park so the probe gets its CPU */
        probe_pin(scpu); /* the responder inherits this CPU (and, with -f, FIFO) from its creator */
        double p0 = probe_roundtrip_ns(ccpu, scpu, 5, 20000);
        probe_pin(ccpu);
        double e = time_cs(cs_empty, n);
        double f = time_cs(cs_five, n);
        usleep(20000);
        probe_pin(scpu);
        double p1 = probe_roundtrip_ns(ccpu, scpu, 5, 20000);
        probe_pin(ccpu);
        double p = (p0 + p1) / 2;
        re[r] = e / p;
        r5[r] = f / p;
        pe[r] = p;
        e_ns[r] = e;
        f_ns[r] = f;
        printf("%5d  %9.1f ns  %6.1f ns  %7.1f ns  %8.1f ns   %8.2f x   %8.2f x\n", r, p0, e, f, p1, re[r], r5[r]);
        fflush(stdout);
    }
    qsort(re, (size_t)rounds, sizeof *re, cmpd);
    qsort(r5, (size_t)rounds, sizeof *r5, cmpd);
    qsort(pe, (size_t)rounds, sizeof *pe, cmpd);
    qsort(e_ns, (size_t)rounds, sizeof *e_ns, cmpd);
    qsort(f_ns, (size_t)rounds, sizeof *f_ns, cmpd);
    printf("median: probe %.1f ns, empty CS %.1f ns = %.2fx probe (min %.2f, max %.2f), "
           "5-line CS %.1f ns = %.2fx probe (min %.2f, max %.2f)\n",
           pe[rounds / 2], e_ns[rounds / 2], re[rounds / 2], re[0], re[rounds - 1], f_ns[rounds / 2],
           r5[rounds / 2], r5[0], r5[rounds - 1]);
    liblock_destroy(&lock);
    if (fifo) {
        sp.sched_priority = 0;
        pthread_setschedparam(pthread_self(), SCHED_OTHER, &sp);
    }

    printf("throughput, all clients on CPU %d, %d ms per point:\n", ccpu, ms);
    static const int counts[] = {1, 2, 4, 8, 16, 32, 64};
    static const int pols[] = {LIBLOCK_WAIT_SPIN, LIBLOCK_WAIT_SPIN_THEN_PARK, LIBLOCK_WAIT_YIELD};
    for (int pi = 0; pi < 3; pi++) {
        int pol = pols[pi];
        for (size_t i = 0; i < sizeof counts / sizeof *counts; i++)
            throughput(ccpu, srv, pol, counts[i], ms);
    }
    liblock_server_stats(srv, &st);
    printf("server: %llu CS, use rate %.3f, slow path %.4f, idle parks %llu\n", (unsigned long long)st.cs_executed,
           st.use_rate, st.slow_path_rate, (unsigned long long)st.idle_parks);
    int r = liblock_server_stop(srv);
    if (r)
        fprintf(stderr, "rcl_latency: server_stop: %s\n", strerror(r));
    return 0;
}
