/*
 * cr_quick - a quick RandArray measurement of concurrency restriction
 * (D. Dice, "Malthusian Locks", EuroSys 2017, extended version
 * arXiv:1511.06035, section 6.1): throughput of mcs (spin-then-park), mcscr
 * (spin-then-park) and posix at 2 and 32 threads.
 *
 * RandArray: each thread loops  lock; CS; unlock; NCS  where the CS does
 * 100 loads at random indexes of a shared 1 MB array and the NCS 400 loads
 * at random indexes of the thread's private 1 MB array (xorshift indexes,
 * loads only).  Fixed-time runs (-t seconds, default 0.5); the algorithms
 * are interleaved (A B C, A B C, ...) for -r rounds (default 5), and each
 * round records the cross-CPU ping-pong probe before and after
 * (bench/probe.h).  Reported per configuration: median, min and max
 * throughput over the rounds, median ratio to the first configuration
 * measured in the same round, and voluntary context switches per
 * acquisition (getrusage).  Threads are not pinned.
 *
 * usage: cr_quick [-r ROUNDS] [-t SECONDS] [-T THREADS,...] [ALGO[:POLICY][@LIBLOCK_VAR=VALUE]...]
 *   (a LIBLOCK_ variable given after @ is set only while that lock is
 *   initialised, e.g. mcscr:spin-then-park@LIBLOCK_CR_FAIRNESS=0.01)
 *   default configurations: mcs:spin-then-park mcscr:spin-then-park posix
 *   default thread counts: 2,32
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "liblock.h"
#include "probe.h"

#define ARRAY_WORDS (256 * 1024) /* 1 MB of uint32_t */
#define CS_LOADS 100
#define NCS_LOADS 400
#define MAX_THREADS 256
#define MAX_CONFIGS 8
#define MAX_ROUNDS 64

static uint32_t *shared_array;
static uint32_t *private_arrays[MAX_THREADS];

struct config {
    const char *algo;
    int policy;
    char label[96];
    char env[64]; /* VAR=VAL set around liblock_init, or "" */
};

struct worker {
    pthread_t th;
    liblock_t *lock;
    uint32_t *priv;
    uint64_t rng;
    volatile int *stop;
    pthread_barrier_t *bar;
    long ops;
    uint32_t sink;
};

static inline uint32_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return (uint32_t)(x >> 16);
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    uint32_t sum = 0;
    long ops = 0;
    pthread_barrier_wait(w->bar);
    while (!__atomic_load_n(w->stop, __ATOMIC_RELAXED)) {
        liblock_lock(w->lock);
        for (int i = 0; i < CS_LOADS; i++)
            sum += ((volatile uint32_t *)shared_array)[xs(&w->rng) % ARRAY_WORDS];
        liblock_unlock(w->lock);
        for (int i = 0; i < NCS_LOADS; i++)
            sum += ((volatile uint32_t *)w->priv)[xs(&w->rng) % ARRAY_WORDS];
        ops++;
    }
    w->ops = ops;
    w->sink = sum;
    return NULL;
}

/* ops per second, and voluntary context switches per op in *csw */
static double run_once(const struct config *c, int nthreads, double seconds, double *csw)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, c->policy);
    liblock_t lock;
    char var[64] = "";
    if (c->env[0]) {
        snprintf(var, sizeof var, "%s", c->env);
        char *eq = strchr(var, '=');
        *eq = 0;
        setenv(var, eq + 1, 1);
    }
    int e = liblock_init(&lock, c->algo, &a);
    if (var[0])
        unsetenv(var);
    if (e) {
        fprintf(stderr, "cr_quick: %s: %s\n", c->label, strerror(e));
        exit(2);
    }
    static struct worker ws[MAX_THREADS];
    volatile int stop = 0;
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1);
    for (int i = 0; i < nthreads; i++) {
        ws[i] = (struct worker){.lock = &lock, .priv = private_arrays[i], .stop = &stop, .bar = &bar,
                                .rng = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1) ^ probe_now_ns()};
        if (!ws[i].rng)
            ws[i].rng = 1;
        pthread_create(&ws[i].th, NULL, worker_main, &ws[i]);
    }
    struct rusage r0, r1;
    getrusage(RUSAGE_SELF, &r0);
    pthread_barrier_wait(&bar);
    uint64_t t0 = probe_now_ns();
    usleep((useconds_t)(seconds * 1e6));
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    long total = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(ws[i].th, NULL);
        total += ws[i].ops;
    }
    uint64_t t1 = probe_now_ns();
    getrusage(RUSAGE_SELF, &r1);
    pthread_barrier_destroy(&bar);
    liblock_destroy(&lock);
    *csw = total ? (double)(r1.ru_nvcsw - r0.ru_nvcsw) / (double)total : 0;
    return (double)total / ((double)(t1 - t0) / 1e9);
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double median(double *v, int n)
{
    double tmp[MAX_ROUNDS];
    memcpy(tmp, v, (size_t)n * sizeof *v);
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_d);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static void usage(void)
{
    fprintf(stderr, "usage: cr_quick [-r ROUNDS] [-t SECONDS] [-T THREADS,...] [ALGO[:POLICY][@LIBLOCK_VAR=VALUE]...]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int rounds = 5;
    double seconds = 0.5;
    int tcounts[8] = {2, 32}, ntc = 2;
    int opt;
    while ((opt = getopt(argc, argv, "r:t:T:h")) != -1) {
        char *end;
        switch (opt) {
        case 'r':
            rounds = (int)strtol(optarg, &end, 10);
            if (*end || rounds < 1 || rounds > MAX_ROUNDS) {
                fprintf(stderr, "cr_quick: -r wants 1..%d rounds, got \"%s\"\n", MAX_ROUNDS, optarg);
                return 2;
            }
            break;
        case 't':
            seconds = strtod(optarg, &end);
            if (*end || !(seconds > 0 && seconds <= 600)) {
                fprintf(stderr, "cr_quick: -t wants seconds in (0, 600], got \"%s\"\n", optarg);
                return 2;
            }
            break;
        case 'T': {
            ntc = 0;
            for (char *s = optarg; *s && ntc < 8;) {
                long v = strtol(s, &end, 10);
                if (end == s || v < 1 || v > MAX_THREADS) {
                    fprintf(stderr, "cr_quick: -T wants thread counts 1..%d separated by commas, got \"%s\"\n",
                            MAX_THREADS, optarg);
                    return 2;
                }
                tcounts[ntc++] = (int)v;
                s = *end == ',' ? end + 1 : end;
                if (*end && *end != ',') {
                    fprintf(stderr, "cr_quick: bad -T \"%s\"\n", optarg);
                    return 2;
                }
            }
            break;
        }
        default:
            usage();
        }
    }
    struct config cfg[MAX_CONFIGS];
    int ncfg = 0;
    const char *defaults[] = {"mcs:spin-then-park", "mcscr:spin-then-park", "posix"};
    int nargs = argc - optind;
    for (int i = 0; i < (nargs ? nargs : 3) && ncfg < MAX_CONFIGS; i++) {
        const char *spec = nargs ? argv[optind + i] : defaults[i];
        struct config *c = &cfg[ncfg++];
        char buf[64];
        snprintf(buf, sizeof buf, "%s", spec);
        c->env[0] = 0;
        char *at = strchr(buf, '@');
        if (at) {
            *at = 0;
            if (!strchr(at + 1, '=') || strncmp(at + 1, "LIBLOCK_", 8) != 0) {
                fprintf(stderr, "cr_quick: \"%s\": expected ALGO[:POLICY][@LIBLOCK_VAR=VALUE]\n", spec);
                return 2;
            }
            snprintf(c->env, sizeof c->env, "%s", at + 1);
        }
        char *colon = strchr(buf, ':');
        c->policy = LIBLOCK_WAIT_DEFAULT;
        if (colon) {
            *colon = 0;
            if (liblock_wait_parse(colon + 1, &c->policy)) {
                fprintf(stderr, "cr_quick: unknown waiting policy \"%s\"\n", colon + 1);
                return 2;
            }
        }
        liblock_algorithm_info_t info;
        if (liblock_algorithm_info(buf, &info)) {
            fprintf(stderr, "cr_quick: unknown algorithm \"%s\"\n", buf);
            return 2;
        }
        c->algo = info.name;
        if (c->policy == LIBLOCK_WAIT_DEFAULT)
            c->policy = info.default_policy;
        if (!(info.policies & (1u << c->policy))) {
            fprintf(stderr, "cr_quick: %s does not support %s\n", buf, liblock_wait_name(c->policy));
            return 2;
        }
        snprintf(c->label, sizeof c->label, "%s/%s%s%s", c->algo, liblock_wait_name(c->policy), c->env[0] ? " " : "",
                 c->env);
    }

    int maxt = 0;
    for (int i = 0; i < ntc; i++)
        if (tcounts[i] > maxt)
            maxt = tcounts[i];
    shared_array = aligned_alloc(64, ARRAY_WORDS * sizeof(uint32_t));
    for (int i = 0; i < ARRAY_WORDS; i++)
        shared_array[i] = (uint32_t)i * 2654435761u;
    for (int t = 0; t < maxt; t++) {
        private_arrays[t] = aligned_alloc(64, ARRAY_WORDS * sizeof(uint32_t));
        if (!private_arrays[t]) {
            fprintf(stderr, "cr_quick: out of memory\n");
            return 1;
        }
        for (int i = 0; i < ARRAY_WORDS; i++)
            private_arrays[t][i] = (uint32_t)(i ^ t);
    }

    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    printf("# cr_quick: RandArray (CS %d loads of a shared 1 MB array, NCS %d loads of a private 1 MB array), "
           "%d rounds x %.2f s, interleaved; %d CPUs\n",
           CS_LOADS, NCS_LOADS, rounds, seconds, ncpu);
    for (int ti = 0; ti < ntc; ti++) {
        int nt = tcounts[ti];
        double ops[MAX_CONFIGS][MAX_ROUNDS], ratio[MAX_CONFIGS][MAX_ROUNDS], csw[MAX_CONFIGS][MAX_ROUNDS];
        double probes[2 * MAX_ROUNDS];
        int np = 0;
        for (int r = 0; r < rounds; r++) {
            probes[np++] = ncpu > 1 ? probe_roundtrip_ns(0, 1, 5, 20000) : -1;
            for (int c = 0; c < ncfg; c++)
                ops[c][r] = run_once(&cfg[c], nt, seconds, &csw[c][r]);
            probes[np++] = ncpu > 1 ? probe_roundtrip_ns(0, 1, 5, 20000) : -1;
            for (int c = 0; c < ncfg; c++)
                ratio[c][r] = ops[0][r] > 0 ? ops[c][r] / ops[0][r] : 0;
        }
        double pmin = probes[0], pmax = probes[0];
        for (int i = 1; i < np; i++) {
            if (probes[i] < pmin)
                pmin = probes[i];
            if (probes[i] > pmax)
                pmax = probes[i];
        }
        printf("\n## %d threads   (probe round trip %.0f..%.0f ns, median %.0f)\n", nt, pmin, pmax, median(probes, np));
        printf("%-46s %14s %14s %14s %12s %12s\n", "lock", "median ops/s", "min", "max",
               "vs first", "vol.csw/op");
        for (int c = 0; c < ncfg; c++) {
            double mn = ops[c][0], mx = ops[c][0];
            for (int r = 1; r < rounds; r++) {
                if (ops[c][r] < mn)
                    mn = ops[c][r];
                if (ops[c][r] > mx)
                    mx = ops[c][r];
            }
            printf("%-46s %14.0f %14.0f %14.0f %11.2fx %12.3f\n", cfg[c].label, median(ops[c], rounds), mn, mx,
                   median(ratio[c], rounds), median(csw[c], rounds));
        }
        fflush(stdout);
    }
    return 0;
}
