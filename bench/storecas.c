/*
 * storecas - the cost of a store and of a CAS on one shared cache line as
 * the number of threads writing it grows.
 *
 * Operations: a plain store (its cost to the writer is mostly hidden by the
 * store buffer), a store followed by a full fence (the writer waits until it
 * owns the line: the coherence cost), and a CAS.
 *
 * Source: J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 2.5 (Figure
 * 2.7b): one
 * monitored thread times single operations on a shared variable while the
 * other threads write random values to the same variable.  Here the
 * monitored thread (thread 0, pinned to the first CPU) times EVERY one of
 * SAMPLES operations on its own, the timer read fenced on both sides
 * (lfence; rdtsc; lfence / op / rdtscp; lfence on x86), into a histogram;
 * the cost of the timer itself (the same sequence around nothing, median of
 * 100000 reads in the same run, before the contenders start) is subtracted
 * from every reported percentile.  The clock of a VM may tick in steps
 * coarser than a cycle (here every ~24 cycles, 10 ns): single readings are
 * then quantised, so a trimmed mean (values up to p99, minus the timer's
 * own trimmed mean) is reported too; it resolves costs below one tick.  The contenders are pinned round-robin
 * over the CPUs (contender 1 on the second CPU, so 2 threads on 2 CPUs
 * measure the cross-CPU cost) and store random values to the line in a loop
 * until told to stop, whatever the monitored operation.  Between two timed
 * operations the monitored thread busy-waits GAP cycles (default 1000)
 * without touching the line, so that the contender has taken the line by
 * the next one: every timed operation then pays the transfer, as in the
 * thesis where many threads hammer the line and one of every 1000
 * operations is timed.  With --gap 0 the operations run back to back and
 * the distribution is bimodal: most find the line still in the own cache.  With more threads
 * than CPUs, contenders share CPUs with each other and with the monitored
 * thread: the median shows an operation while a contender on the other CPU
 * runs, the upper percentiles the cases where the line had to come back.
 */
#include <getopt.h>
#include <math.h>
#include "common.h"
#include "probe.h"

static const char usage_text[] =
    "usage: storecas [options]\n"
    "  -t, --threads LIST  thread counts incl. the monitored one (default 1..CPUs, 2xCPUs, 4xCPUs)\n"
    "  -o, --ops LIST      of store, cas, store-fence (store then a full fence: the cost of\n"
    "                      the store becoming visible, not hidden by the store buffer) (default all)\n"
    "  -n, --samples N     single operations timed per measurement (default 300000)\n"
    "  -g, --gap CYCLES    busy wait between timed operations, not touching the line, so that\n"
    "                      a contender can take it meanwhile (default 1000; 0: back to back)\n"
    "  -r, --reps N        repetitions, median reported (default 3)\n"
    "      --no-probe       skip the ping-pong probes\n"
    "      --quick         tiny run for tests\n"
    "  -h, --help\n";

static int no_probe; /* --no-probe, and --quick (a harness check, not a measurement) */

static void usage_fail(const char *what, const char *arg) { bench_usage_fail("storecas", usage_text, what, arg); }

static LL_ALIGNED _Atomic uint64_t shared_word;
static LL_ALIGNED _Atomic int stop, ready;
static int op_cas;
static long gap = 1000;

/* Timer reads that no earlier or later instruction can cross: the start
 * waits for everything before it and nothing after it starts early; the end
 * (rdtscp) waits for the timed operation to complete. */
static inline uint64_t t_start(void)
{
#if defined(__x86_64__) || defined(__i386__)
    uint32_t lo, hi;
    __asm__ __volatile__("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
#else
    atomic_thread_fence(memory_order_seq_cst);
    return bench_cycles();
#endif
}

static inline uint64_t t_end(void)
{
#if defined(__x86_64__) || defined(__i386__)
    uint32_t lo, hi, aux;
    __asm__ __volatile__("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux)::"memory");
    return ((uint64_t)hi << 32) | lo;
#else
    uint64_t c = bench_cycles();
    atomic_thread_fence(memory_order_seq_cst);
    return c;
#endif
}

static inline void do_op(uint64_t v)
{
    if (op_cas == 2) { /* the store, and waiting until it is visible to the other CPUs */
        atomic_store_explicit(&shared_word, v, memory_order_relaxed);
        atomic_thread_fence(memory_order_seq_cst);
    } else if (op_cas) {
        uint64_t old = atomic_load_explicit(&shared_word, memory_order_relaxed);
        atomic_compare_exchange_strong_explicit(&shared_word, &old, v, memory_order_seq_cst, memory_order_relaxed);
    } else {
        atomic_store_explicit(&shared_word, v, memory_order_relaxed);
    }
}

struct contender {
    pthread_t th;
    int cpu;
};

static void *contender_main(void *p)
{
    struct contender *c = p;
    ll_pin_self(c->cpu);
    uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)(uintptr_t)p;
    atomic_fetch_add(&ready, 1);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        atomic_store_explicit(&shared_word, x, memory_order_relaxed); /* random values */
    }
    return NULL;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmpu(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

struct result {
    double overhead, p10, p50, p90, p99, tmean;
};

/* Sorts v[0..n) and returns its quantile q (nearest rank). */
static double quant(const uint64_t *v, long n, double q)
{
    long k = (long)ceil(q * (double)n) - 1;
    return (double)v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* Mean of the values up to the 99th percentile: the clock here may tick in
 * steps much coarser than a cycle (10 ns on this VM), so a single reading is
 * quantised but the mean of many readings is not; the top 1% (interrupts,
 * preemptions) is left out so that it does not dominate. */
static double trimmed_mean(const uint64_t *v, long n)
{
    long k = n - n / 100;
    double s = 0;
    for (long i = 0; i < k; i++)
        s += (double)v[i];
    return k ? s / (double)k : 0;
}

#define OVH_N 100000
static uint64_t ovh_v[OVH_N];

/* Cost of the timer sequence around nothing: median and trimmed mean. */
static void timer_overhead(double *med, double *tmean)
{
    for (int i = 0; i < OVH_N; i++) {
        uint64_t t0 = t_start();
        uint64_t t1 = t_end();
        ovh_v[i] = t1 - t0;
    }
    qsort(ovh_v, OVH_N, sizeof *ovh_v, cmpu);
    *med = quant(ovh_v, OVH_N, 0.5);
    *tmean = trimmed_mean(ovh_v, OVH_N);
}

/* One measurement: percentiles of single-operation cycles of the monitored
 * thread, timer overhead (measured just before, same thread, same CPU)
 * subtracted. */
static void measure(int threads, long samples, struct result *res)
{
    int ncpu = ll_ncpus();
    struct contender *c = calloc((size_t)threads, sizeof *c);
    uint64_t *v = malloc((size_t)samples * sizeof *v);
    ll_pin_self(0);
    double ovh, ovh_mean;
    timer_overhead(&ovh, &ovh_mean);
    atomic_store(&stop, 0);
    atomic_store(&ready, 0);
    for (int i = 1; i < threads; i++) {
        c[i].cpu = i % ncpu;
        pthread_create(&c[i].th, NULL, contender_main, &c[i]);
    }
    while (atomic_load(&ready) < threads - 1)
        ll_yield();
    uint64_t x = 88172645463325252ull;
    for (long s = 0; s < samples; s++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        busy_cycles((uint64_t)gap);
        uint64_t t0 = t_start();
        do_op(x);
        uint64_t t1 = t_end();
        v[s] = t1 - t0;
    }
    atomic_store(&stop, 1);
    for (int i = 1; i < threads; i++)
        pthread_join(c[i].th, NULL);
    qsort(v, (size_t)samples, sizeof *v, cmpu);
    res->overhead = ovh;
#define SUB(x) ((x) > ovh ? (x) - ovh : 0.0)
    res->p10 = SUB(quant(v, samples, 0.10));
    res->p50 = SUB(quant(v, samples, 0.50));
    res->p90 = SUB(quant(v, samples, 0.90));
    res->p99 = SUB(quant(v, samples, 0.99));
#undef SUB
    double tm = trimmed_mean(v, samples) - ovh_mean;
    res->tmean = tm > 0 ? tm : 0;
    free(v);
    free(c);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"threads", required_argument, 0, 't'}, {"ops", required_argument, 0, 'o'},
                                         {"samples", required_argument, 0, 'n'}, {"gap", required_argument, 0, 'g'}, {"reps", required_argument, 0, 'r'},
                                         {"quick", no_argument, 0, 1}, {"no-probe", no_argument, 0, 4},           {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int ncpu = ll_ncpus();
    int tl[64], nt = 0;
    for (int t = 1; t <= ncpu && nt < 60; t++)
        tl[nt++] = t;
    tl[nt++] = 2 * ncpu;
    tl[nt++] = 4 * ncpu;
    int ops[3] = {0, 1, 2}, nops = 3;
    long samples = 300000, reps = 3;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":t:o:n:g:r:h", opts, NULL)) != -1) {
        switch (o) {
        case 't': {
            char buf[512];
            snprintf(buf, sizeof buf, "%s", optarg);
            nt = 0;
            for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
                long v;
                if (nt >= 64 || parse_long(t, 1, 1024, &v))
                    usage_fail("--threads: bad count", t);
                tl[nt++] = (int)v;
            }
            if (!nt)
                usage_fail("--threads: empty list", optarg);
            break;
        }
        case 'o': {
            char buf[128];
            snprintf(buf, sizeof buf, "%s", optarg);
            nops = 0;
            for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
                int op = !strcmp(t, "store") ? 0 : !strcmp(t, "cas") ? 1 : !strcmp(t, "store-fence") ? 2 : -1;
                if (op < 0 || nops >= 3)
                    usage_fail("--ops: each must be store, cas or store-fence:", t);
                ops[nops++] = op;
            }
            if (!nops)
                usage_fail("--ops: empty list", optarg);
            break;
        }
        case 'n':
            if (parse_long(optarg, 10, 100000000, &samples))
                usage_fail("--samples must be 10..1e8, not", optarg);
            break;
        case 'g':
            if (parse_long(optarg, 0, 100000000, &gap))
                usage_fail("--gap must be 0..1e8 cycles, not", optarg);
            break;
        case 'r':
            if (parse_long(optarg, 1, 101, &reps))
                usage_fail("--reps must be 1..101, not", optarg);
            break;
        case 4: no_probe = 1; break;
        case 1: no_probe = 1;
            samples = 2000, reps = 1, nt = 0;
            tl[nt++] = 1;
            if (ncpu > 1)
                tl[nt++] = 2;
            break;
        case 'h': fputs(usage_text, stdout); return 0;
        case ':': usage_fail("option needs a value:", argv[optind - 1]); break;
        default: usage_fail("unknown option", argv[optind - 1]); break;
        }
    }
    if (optind < argc)
        usage_fail("unexpected argument", argv[optind]);
    struct machine m;
    machine_describe(&m);
    double ghz = m.tsc_ghz > 0 ? m.tsc_ghz : 1;
    for (int ti = 0; ti < nt; ti++)
        for (int oi = 0; oi < nops; oi++) { /* the operations interleaved at each count */
            op_cas = ops[oi];
            double md[101], p1[101], p9[101], p99[101], ov[101], tmn[101];
            double probe0 = !no_probe && m.ncpus > 1 ? probe_quick() : -1;
            for (long r = 0; r < reps; r++) {
                struct result res;
                measure(tl[ti], samples, &res);
                md[r] = res.p50, p1[r] = res.p10, p9[r] = res.p90, p99[r] = res.p99, ov[r] = res.overhead;
                tmn[r] = res.tmean;
            }
            double probe1 = !no_probe && m.ncpus > 1 ? probe_quick() : -1;
            qsort(md, (size_t)reps, sizeof *md, cmpd);
            qsort(p1, (size_t)reps, sizeof *p1, cmpd);
            qsort(p9, (size_t)reps, sizeof *p9, cmpd);
            qsort(p99, (size_t)reps, sizeof *p99, cmpd);
            qsort(ov, (size_t)reps, sizeof *ov, cmpd);
            qsort(tmn, (size_t)reps, sizeof *tmn, cmpd);
            struct record rec = {0};
            REC_S(&rec, "benchmark", "storecas");
            REC_S(&rec, "op", "%s", op_cas == 2 ? "store-fence" : op_cas ? "cas" : "store");
            REC_N(&rec, "threads", "%d", tl[ti]);
            REC_N(&rec, "oversubscribed", "%d", tl[ti] > ncpu);
            REC_S(&rec, "method", "every operation timed alone, timer overhead subtracted");
            REC_N(&rec, "samples", "%ld", samples);
            REC_N(&rec, "gap_cycles", "%ld", gap);
            REC_N(&rec, "reps", "%ld", reps);
            REC_N(&rec, "timer_overhead_cycles", "%.1f", ov[reps / 2]);
            REC_N(&rec, "cycles_per_op", "%.1f", md[reps / 2]);
            REC_N(&rec, "cycles_per_op_min", "%.1f", md[0]);
            REC_N(&rec, "cycles_per_op_max", "%.1f", md[reps - 1]);
            REC_N(&rec, "cycles_per_op_p10", "%.1f", p1[reps / 2]);
            REC_N(&rec, "cycles_per_op_p90", "%.1f", p9[reps / 2]);
            REC_N(&rec, "cycles_per_op_p99", "%.1f", p99[reps / 2]);
            REC_N(&rec, "cycles_per_op_mean", "%.1f", tmn[reps / 2]);
            REC_N(&rec, "ns_per_op", "%.2f", md[reps / 2] / ghz);
            REC_N(&rec, "ns_per_op_mean", "%.2f", tmn[reps / 2] / ghz);
            REC_N(&rec, "ns_per_op_p90", "%.2f", p9[reps / 2] / ghz);
            REC_N(&rec, "ns_per_op_p99", "%.2f", p99[reps / 2] / ghz);
            REC_N(&rec, "probe_before_ns", "%.1f", probe0);
            REC_N(&rec, "probe_after_ns", "%.1f", probe1);
            rec_machine(&rec, &m);
            rec_print(&rec, FMT_JSON, 0, stdout);
            rec_free(&rec);
        }
    return 0;
}
