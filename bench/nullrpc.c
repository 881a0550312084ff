/*
 * nullrpc - the round trip of a null RPC between two pinned threads: the
 * physical floor of a delegation round trip (RCL, combining) on this machine.
 *
 * Source: J.-P. Lozi, "Improving the Performance of Java Applications on
 * Multicore Architectures", internship report, LIP6, 2010, section 3.2
 * (`null_rpc.c`, Figure 8): a client raises
 * `rpc_requested` and spins until `done_with_rpc`; the server spins on
 * `rpc_requested`, clears it and raises `done_with_rpc`; the client clears
 * `done_with_rpc` and starts over.  Waiting is a pause loop.  Layouts:
 *   same-line       both flags in one cache line (one line moves per hop);
 *   separate-lines  the flags three lines apart ("two full cache lines
 *                   between them", so the adjacent-line prefetcher does not
 *                   drag one in with the other): two lines move.
 * The flags are 32-bit atomics written with release and read with acquire
 * ordering: each side only reads a flag the other side wrote, so a
 * release/acquire pair per hop orders the (empty) request and reply.
 * The two layouts are measured interleaved (A B A B ...) and a ping-pong
 * probe (bench/probe.h) is taken before and after, since the round trip on
 * these VMs moves between regimes.
 */
#include <getopt.h>
#include "common.h"
#include "probe.h"

static const char usage_text[] =
    "usage: nullrpc [options]\n"
    "  -C, --client-cpu N   client CPU (default 0)\n"
    "  -S, --server-cpu N   server CPU (default 1, or 0 on a 1-CPU machine)\n"
    "  -n, --rpcs N         round trips per measurement (default 200000)\n"
    "  -r, --reps N         interleaved repetitions per layout (default 5)\n"
    "      --no-probe       skip the ping-pong probes\n"
    "      --quick          tiny run for tests\n"
    "  -h, --help\n";

static int no_probe; /* --no-probe, and --quick (a harness check, not a measurement) */

static void usage_fail(const char *what, const char *arg) { bench_usage_fail("nullrpc", usage_text, what, arg); }

struct flags {
    LL_ALIGNED _Atomic uint32_t req;
    _Atomic uint32_t done_same; /* used by the same-line layout */
    char gap[3 * LL_CACHELINE - 2 * sizeof(uint32_t)];
    LL_ALIGNED _Atomic uint32_t done_far; /* three lines after req */
};

struct side {
    struct flags *f;
    _Atomic uint32_t *done;
    long n;
    int cpu;
    uint64_t cycles;
};

static void *server_main(void *p)
{
    struct side *s = p;
    ll_pin_self(s->cpu);
    for (long i = 0; i < s->n; i++) {
        while (!atomic_load_explicit(&s->f->req, memory_order_acquire))
            ll_pause();
        atomic_store_explicit(&s->f->req, 0, memory_order_relaxed);
        atomic_store_explicit(s->done, 1, memory_order_release);
    }
    return NULL;
}

static double one(int layout_far, int ccpu, int scpu, long n)
{
    struct flags *f = ll_alloc_aligned(sizeof *f);
    struct side srv = {f, layout_far ? &f->done_far : &f->done_same, n + 1, scpu, 0};
    pthread_t th;
    pthread_create(&th, NULL, server_main, &srv);
    ll_pin_self(ccpu);
    uint64_t t0 = 0;
    for (long i = 0; i <= n; i++) {
        if (i == 1)
            t0 = bench_cycles(); /* the first round trip also waits for the server to start */
        atomic_store_explicit(&f->req, 1, memory_order_release);
        while (!atomic_load_explicit(srv.done, memory_order_acquire))
            ll_pause();
        atomic_store_explicit(srv.done, 0, memory_order_relaxed);
    }
    uint64_t t1 = bench_cycles();
    pthread_join(th, NULL);
    free(f);
    return (double)(t1 - t0) / (double)n;
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"client-cpu", required_argument, 0, 'C'},
                                         {"server-cpu", required_argument, 0, 'S'},
                                         {"rpcs", required_argument, 0, 'n'},
                                         {"reps", required_argument, 0, 'r'},
                                         {"quick", no_argument, 0, 1}, {"no-probe", no_argument, 0, 4},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    int ncpu = ll_ncpus();
    long ccpu = 0, scpu = ncpu > 1 ? 1 : 0, n = 200000, reps = 5;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":C:S:n:r:h", opts, NULL)) != -1) {
        switch (o) {
        case 'C':
            if (parse_long(optarg, 0, ncpu - 1, &ccpu))
                usage_fail("--client-cpu: not an online CPU:", optarg);
            break;
        case 'S':
            if (parse_long(optarg, 0, ncpu - 1, &scpu))
                usage_fail("--server-cpu: not an online CPU:", optarg);
            break;
        case 'n':
            if (parse_long(optarg, 10, 1000000000, &n))
                usage_fail("--rpcs must be 10..1e9, not", optarg);
            break;
        case 'r':
            if (parse_long(optarg, 1, 101, &reps))
                usage_fail("--reps must be 1..101, not", optarg);
            break;
        case 4: no_probe = 1; break;
        case 1: no_probe = 1; n = 2000, reps = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case ':': usage_fail("option needs a value:", argv[optind - 1]); break;
        default: usage_fail("unknown option", argv[optind - 1]); break;
        }
    }
    if (optind < argc)
        usage_fail("unexpected argument", argv[optind]);
    if (ccpu == scpu && ncpu > 1)
        usage_fail("client and server must be on different CPUs, both are", argv[0]);
    struct machine m;
    machine_describe(&m);
    double ghz = m.tsc_ghz > 0 ? m.tsc_ghz : 1;
    double probe0 = !no_probe && ncpu > 1 ? probe_quick() : -1;
    double v[2][101];
    for (long r = 0; r < reps; r++)
        for (int lay = 0; lay < 2; lay++)
            v[lay][r] = one(lay, (int)ccpu, (int)scpu, n);
    double probe1 = !no_probe && ncpu > 1 ? probe_quick() : -1;
    for (int lay = 0; lay < 2; lay++) {
        qsort(v[lay], (size_t)reps, sizeof(double), cmpd);
        struct record rec = {0};
        REC_S(&rec, "benchmark", "nullrpc");
        REC_S(&rec, "layout", "%s", lay ? "separate-lines" : "same-line");
        REC_N(&rec, "client_cpu", "%ld", ccpu);
        REC_N(&rec, "server_cpu", "%ld", scpu);
        REC_N(&rec, "rpcs", "%ld", n);
        REC_N(&rec, "reps", "%ld", reps);
        REC_N(&rec, "cycles_per_rpc", "%.1f", v[lay][reps / 2]);
        REC_N(&rec, "cycles_per_rpc_min", "%.1f", v[lay][0]);
        REC_N(&rec, "cycles_per_rpc_max", "%.1f", v[lay][reps - 1]);
        REC_N(&rec, "ns_per_rpc", "%.1f", v[lay][reps / 2] / ghz);
        REC_N(&rec, "probe_before_ns", "%.1f", probe0);
        REC_N(&rec, "probe_after_ns", "%.1f", probe1);
        rec_machine(&rec, &m);
        REC_S(&rec, "status", "ok");
        rec_print(&rec, FMT_JSON, 0, stdout);
        rec_free(&rec);
    }
    return 0;
}
