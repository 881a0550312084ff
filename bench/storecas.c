/*
 * storecas - the cost of a store and of a CAS on one shared cache line as
 * the number of threads writing it grows.
 *
 * Operations: a plain store (its cost to the writer is mostly hidden by the
 * store buffer until the buffer fills), a store followed by a full fence
 * (the writer waits until it owns the line: the coherence cost), and a CAS.
 *
 * Source: thesis section 2.5 (seed 000, Fig. 2.7b; digest section 2): one
 * monitored thread times its operations on a shared variable while the other
 * threads write random values to the same variable.  Here the monitored
 * thread (thread 0, pinned to the first CPU) times batches of BATCH
 * operations with the cycle clock (the thesis timed every 1000th operation)
 * and reports the median batch, divided by BATCH; the contenders are pinned
 * round-robin over the CPUs and store (or CAS) random values in a loop until
 * told to stop.  With more threads than CPUs, contenders share CPUs with
 * each other and with the monitored thread: the median still reflects the
 * cost of one operation while the others run, the tail (p90) shows the
 * preemptions.
 */
#include <getopt.h>
#include "common.h"
#include "probe.h"

static const char usage_text[] =
    "usage: storecas [options]\n"
    "  -t, --threads LIST  thread counts incl. the monitored one (default 1..CPUs, 2xCPUs, 4xCPUs)\n"
    "  -o, --ops LIST      of store, cas, store-fence (store then a full fence: the cost of\n"
    "                      the store becoming visible, not hidden by the store buffer) (default all)\n"
    "  -n, --batches N     timed batches of 100 operations (default 20000)\n"
    "  -r, --reps N        repetitions, median reported (default 3)\n"
    "      --no-probe       skip the ping-pong probes\n"
    "      --quick         tiny run for tests\n"
    "  -h, --help\n";

static int no_probe; /* --no-probe, and --quick (a harness check, not a measurement) */

static void usage_fail(const char *what, const char *arg)
{
    fprintf(stderr, "storecas: %s '%s'\n%s", what, arg, usage_text);
    exit(2);
}

#define BATCH 100

static LL_ALIGNED _Atomic uint64_t shared_word;
static LL_ALIGNED _Atomic int stop, ready;
static int op_cas;

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
        do_op(x);
    }
    return NULL;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One measurement: median and p90 cycles per operation of the monitored thread. */
static void measure(int threads, long batches, double *med, double *p90)
{
    int ncpu = ll_ncpus();
    struct contender *c = calloc((size_t)threads, sizeof *c);
    atomic_store(&stop, 0);
    atomic_store(&ready, 0);
    for (int i = 1; i < threads; i++) {
        c[i].cpu = i % ncpu;
        pthread_create(&c[i].th, NULL, contender_main, &c[i]);
    }
    ll_pin_self(0);
    while (atomic_load(&ready) < threads - 1)
        ll_yield();
    double *v = malloc((size_t)batches * sizeof *v);
    uint64_t x = 88172645463325252ull;
    for (long b = 0; b < batches; b++) {
        uint64_t t0 = bench_cycles();
        for (int i = 0; i < BATCH; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            do_op(x);
        }
        v[b] = (double)(bench_cycles() - t0) / BATCH;
    }
    atomic_store(&stop, 1);
    for (int i = 1; i < threads; i++)
        pthread_join(c[i].th, NULL);
    qsort(v, (size_t)batches, sizeof *v, cmpd);
    *med = v[batches / 2];
    *p90 = v[batches * 9 / 10];
    free(v);
    free(c);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"threads", required_argument, 0, 't'}, {"ops", required_argument, 0, 'o'},
                                         {"batches", required_argument, 0, 'n'}, {"reps", required_argument, 0, 'r'},
                                         {"quick", no_argument, 0, 1}, {"no-probe", no_argument, 0, 4},           {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int ncpu = ll_ncpus();
    int tl[64], nt = 0;
    for (int t = 1; t <= ncpu && nt < 60; t++)
        tl[nt++] = t;
    tl[nt++] = 2 * ncpu;
    tl[nt++] = 4 * ncpu;
    int ops[3] = {0, 1, 2}, nops = 3;
    long batches = 20000, reps = 3;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":t:o:n:r:h", opts, NULL)) != -1) {
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
            if (parse_long(optarg, 10, 100000000, &batches))
                usage_fail("--batches must be 10..1e8, not", optarg);
            break;
        case 'r':
            if (parse_long(optarg, 1, 101, &reps))
                usage_fail("--reps must be 1..101, not", optarg);
            break;
        case 4: no_probe = 1; break;
        case 1: no_probe = 1;
            batches = 200, reps = 1, nt = 0;
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
            double md[101], p9[101];
            double probe0 = !no_probe && m.ncpus > 1 ? probe_quick() : -1;
            for (long r = 0; r < reps; r++)
                measure(tl[ti], batches, &md[r], &p9[r]);
            double probe1 = !no_probe && m.ncpus > 1 ? probe_quick() : -1;
            qsort(md, (size_t)reps, sizeof *md, cmpd);
            qsort(p9, (size_t)reps, sizeof *p9, cmpd);
            struct record rec = {0};
            REC_S(&rec, "benchmark", "storecas");
            REC_S(&rec, "op", "%s", op_cas == 2 ? "store-fence" : op_cas ? "cas" : "store");
            REC_N(&rec, "threads", "%d", tl[ti]);
            REC_N(&rec, "oversubscribed", "%d", tl[ti] > ncpu);
            REC_N(&rec, "batch", "%d", BATCH);
            REC_N(&rec, "batches", "%ld", batches);
            REC_N(&rec, "reps", "%ld", reps);
            REC_N(&rec, "cycles_per_op", "%.2f", md[reps / 2]);
            REC_N(&rec, "cycles_per_op_min", "%.2f", md[0]);
            REC_N(&rec, "cycles_per_op_max", "%.2f", md[reps - 1]);
            REC_N(&rec, "cycles_per_op_p90", "%.2f", p9[reps / 2]);
            REC_N(&rec, "ns_per_op", "%.2f", md[reps / 2] / ghz);
                REC_N(&rec, "probe_before_ns", "%.1f", probe0);
                REC_N(&rec, "probe_after_ns", "%.1f", probe1);
            rec_machine(&rec, &m);
            rec_print(&rec, FMT_JSON, 0, stdout);
            rec_free(&rec);
        }
    return 0;
}
