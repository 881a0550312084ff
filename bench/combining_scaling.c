/*
 * combining_scaling - per-critical-section cost of the combining and
 * time-published locks with 2, 8 and 32 threads on however many CPUs there
 * are (2 here: oversubscription), for every waiting policy each supports.
 *
 * Each thread loops liblock_execute(lock, cs) (for mcs-tp and other
 * non-delegating locks execute is lock/cs/unlock) for a fixed duration;
 * the cost is wall time / critical sections completed, in ns.  The
 * critical section increments a counter and touches two more cache lines.
 * Algorithms are interleaved (A B C A B C ...) within every (policy,
 * threads) cell and every round; a ping-pong probe (bench/probe.h) is
 * taken before and after each round and printed with the results.
 * Reported: median [min-max] over the rounds, and the ratio of the 8- and
 * 32-thread medians to the same algorithm's 2-thread median in that policy.
 *
 * usage: combining_scaling [-r ROUNDS] [-d MS] [-t LIST] [-w LIST] [ALGO...]
 *   -r rounds (default 5), -d milliseconds per measurement (default 100),
 *   -t thread counts (default 2,8,32), -w policies (default
 *   spin,yield,spin-then-park), algorithms (default cc-synch dsm-synch
 *   flat-combining oyama mcs-tp).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "liblock.h"
#include "probe.h"

#define MAXA 16
#define MAXP 4
#define MAXT 8
#define MAXR 64

struct shared {
    liblock_t lock;
    _Alignas(64) volatile long counter;
    _Alignas(64) volatile long line1;
    _Alignas(64) volatile long line2;
    _Alignas(64) volatile int stop;
    pthread_barrier_t bar;
};

struct thr {
    pthread_t th;
    struct shared *sh;
    long done;
    int err;
};

static void *cs(void *arg)
{
    struct shared *sh = arg;
    sh->counter++;
    sh->line1 += 2;
    sh->line2 += 3;
    return arg;
}

static void *thr_main(void *p)
{
    struct thr *t = p;
    struct shared *sh = t->sh;
    pthread_barrier_wait(&sh->bar);
    while (!__atomic_load_n(&sh->stop, __ATOMIC_RELAXED)) {
        if (liblock_execute(&sh->lock, cs, sh) != sh) {
            t->err = errno ? errno : -1;
            break;
        }
        t->done++;
    }
    return NULL;
}

/* ns per critical section, or -1 on error */
static double measure(const char *algo, int policy, int nthreads, int ms)
{
    static struct shared sh;
    memset((void *)&sh, 0, sizeof sh);
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    if (liblock_init(&sh.lock, algo, &a))
        return -1;
    pthread_barrier_init(&sh.bar, NULL, (unsigned)nthreads + 1);
    struct thr *ts = calloc((size_t)nthreads, sizeof *ts);
    for (int i = 0; i < nthreads; i++) {
        ts[i].sh = &sh;
        pthread_create(&ts[i].th, NULL, thr_main, &ts[i]);
    }
    pthread_barrier_wait(&sh.bar);
    uint64_t t0 = probe_now_ns();
    usleep((useconds_t)ms * 1000);
    __atomic_store_n(&sh.stop, 1, __ATOMIC_RELAXED);
    long total = 0;
    int err = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(ts[i].th, NULL);
        total += ts[i].done;
        err |= ts[i].err;
    }
    uint64_t t1 = probe_now_ns();
    if (sh.counter != total)
        err = 1;
    pthread_barrier_destroy(&sh.bar);
    liblock_destroy(&sh.lock);
    free(ts);
    if (err || total == 0)
        return -1;
    return (double)(t1 - t0) / (double)total;
}

static int cmpd(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n, double *mn, double *mx)
{
    double s[MAXR];
    memcpy(s, v, (size_t)n * sizeof *v);
    qsort(s, (size_t)n, sizeof *s, cmpd);
    *mn = s[0];
    *mx = s[n - 1];
    return s[n / 2];
}

static double loadavg(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static int parse_list(const char *s, char out[][32], int max)
{
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save, *tok = strtok_r(buf, ",", &save); tok && n < max; tok = strtok_r(NULL, ",", &save))
        snprintf(out[n++], 32, "%s", tok);
    return n;
}

int main(int argc, char **argv)
{
    int rounds = 5, ms = 100, opt;
    const char *tlist = "2,8,32", *wlist = "spin,yield,spin-then-park";
    while ((opt = getopt(argc, argv, "r:d:t:w:h")) != -1) {
        if (opt == 'r')
            rounds = atoi(optarg);
        else if (opt == 'd')
            ms = atoi(optarg);
        else if (opt == 't')
            tlist = optarg;
        else if (opt == 'w')
            wlist = optarg;
        else {
            fprintf(stderr, "usage: combining_scaling [-r ROUNDS] [-d MS] [-t LIST] [-w LIST] [ALGO...]\n");
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAXR || ms < 1 || ms > 10000) {
        fprintf(stderr, "combining_scaling: -r must be 1..%d and -d 1..10000\n", MAXR);
        return 2;
    }
    const char *algos[MAXA];
    int na = 0;
    static const char *dflt[] = {"cc-synch", "dsm-synch", "flat-combining", "oyama", "mcs-tp"};
    if (optind < argc)
        for (int i = optind; i < argc && na < MAXA; i++)
            algos[na++] = argv[i];
    else
        for (size_t i = 0; i < sizeof dflt / sizeof *dflt; i++)
            algos[na++] = dflt[i];
    liblock_algorithm_info_t info[MAXA];
    for (int a = 0; a < na; a++)
        if (liblock_algorithm_info(algos[a], &info[a])) {
            fprintf(stderr, "combining_scaling: unknown algorithm '%s'\n", algos[a]);
            return 2;
        }
    char tnames[MAXT][32], wnames[MAXP][32];
    int nt = parse_list(tlist, tnames, MAXT), np = parse_list(wlist, wnames, MAXP);
    int threads[MAXT], pols[MAXP];
    for (int i = 0; i < nt; i++) {
        threads[i] = atoi(tnames[i]);
        if (threads[i] < 1 || threads[i] > 1024) {
            fprintf(stderr, "combining_scaling: bad thread count '%s'\n", tnames[i]);
            return 2;
        }
    }
    for (int i = 0; i < np; i++)
        if (liblock_wait_parse(wnames[i], &pols[i])) {
            fprintf(stderr, "combining_scaling: unknown policy '%s'\n", wnames[i]);
            return 2;
        }
    static double res[MAXP][MAXT][MAXA][MAXR];
    static double probes[MAXR][2];
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double load0 = loadavg();
    for (int r = 0; r < rounds; r++) {
        probes[r][0] = ncpu > 1 ? probe_default() : -1;
        for (int p = 0; p < np; p++)
            for (int t = 0; t < nt; t++)
                for (int a = 0; a < na; a++) /* interleaved */
                    res[p][t][a][r] = (info[a].policies & (1u << pols[p])) ? measure(algos[a], pols[p], threads[t], ms)
                                                                            : -2;
        probes[r][1] = ncpu > 1 ? probe_default() : -1;
        fprintf(stderr, "round %d/%d done\n", r + 1, rounds);
    }
    double load1 = loadavg();
    printf("ns per critical section (execute), median of %d interleaved rounds [min-max], %d ms each, %d CPUs\n",
           rounds, ms, ncpu);
    printf("load average before %.1f, after %.1f (other processes share the CPUs)\n", load0, load1);
    printf("probe (CPU0<->CPU1 round trip, ns) before/after each round:");
    for (int r = 0; r < rounds; r++)
        printf(" %.0f/%.0f", probes[r][0], probes[r][1]);
    printf("\n");
    for (int p = 0; p < np; p++) {
        printf("\npolicy %s\n%-16s", wnames[p], "algorithm");
        for (int t = 0; t < nt; t++)
            printf(" %10d thr [min-max]     ", threads[t]);
        for (int t = 1; t < nt; t++)
            printf(" %3d/%-3d", threads[t], threads[0]);
        printf("\n");
        for (int a = 0; a < na; a++) {
            if (res[p][0][a][0] == -2)
                continue;
            printf("%-16s", algos[a]);
            double med[MAXT];
            for (int t = 0; t < nt; t++) {
                double mn, mx;
                int bad = 0;
                for (int r = 0; r < rounds; r++)
                    bad |= res[p][t][a][r] < 0;
                med[t] = bad ? -1 : median(res[p][t][a], rounds, &mn, &mx);
                char cell[64];
                if (bad)
                    snprintf(cell, sizeof cell, "error");
                else
                    snprintf(cell, sizeof cell, "%.0f [%.0f-%.0f]", med[t], mn, mx);
                printf(" %27s", cell);
            }
            for (int t = 1; t < nt; t++)
                printf(" %6.2fx", med[0] > 0 && med[t] > 0 ? med[t] / med[0] : 0);
            printf("\n");
        }
    }
    return 0;
}
