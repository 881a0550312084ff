/*
 * lockbench - the lock microbenchmark of J.-P. Lozi, "Towards More
 * Scalable Mutual Exclusion for Multicore Architectures", PhD thesis, UPMC
 * (Paris 6), 2014, section 5.2, with the context lines of J.-P. Lozi,
 * "Improving the Performance of Java Applications on Multicore
 * Architectures", internship report, LIP6, 2010 (section 3.3,
 * "benchmark.c").
 *
 * T threads run critical sections on one lock through liblock_execute(), so
 * every algorithm of the registry runs unchanged, delegating ones included.
 * Between two critical sections a thread busy-waits DELAY cycles: the delay
 * sets the contention (the thesis sweeps 1e2 = high to 2e6 = low).  Each
 * critical section reads and writes K shared cache lines in a dependent,
 * non-prefetchable chain (bench/chain.h); with C > 0 each thread also owns C
 * "context" lines that it touches before the critical section and that the
 * critical section touches again (on the server, for a delegation lock: the
 * cost RCL pays to fetch the caller's context, the internship report's
 * equation (A)).
 *
 * Measured: the latency of every critical section including its acquisition
 * (cycle clock read before liblock_execute and after it returns; each
 * thread's first, one-time critical section runs before the start barrier
 * and is not measured), kept in a
 * log-bucket histogram per thread (median and percentiles within ~3%, exact
 * min/max/mean), in cycles and ns; the throughput; per-thread counts (min,
 * max, Jain's fairness index) so unfairness is visible; a cross-CPU
 * ping-pong probe before and after the run (bench/probe.h, docs/bench.md,
 * "How to measure").
 *
 * Hardware-thread budget (thesis section 5.2: with RCL one hardware thread is
 * the server, so one fewer runs critical sections): for an algorithm with
 * LIBLOCK_PROP_DELEGATES that runs its critical sections on a server, the
 * default convention "server" keeps one CPU for the server and runs T-1
 * client threads on the others.  Delegating algorithms without a server
 * (combining locks: the combiner is one of the workers) run T workers, as
 * in the thesis.  Which is which is asked of the library
 * (liblock_server_of); if it cannot say, every delegating algorithm gets the
 * server convention.  "--convention all|server" forces one.  The output
 * states which was used.  When the library provides RCL servers
 * (liblock_server_start) and the algorithm runs on one
 * (LIBLOCK_PROP_SERVER), lockbench starts one on the server CPU and passes
 * it to the lock through its attribute.
 *
 * Every run is bounded in time: a run that has not finished TIMEOUT seconds
 * after its end (fixed time) or its start (fixed count) is reported with
 * status "timeout" and the program exits with status 3, so a sweep over a
 * collapsing configuration cannot hang.  The set-up and tear-down around
 * the run are bounded too, by a watchdog thread (bench/watchdog.h): the program as a whole
 * must finish within that bound + WATCHDOG_SLACK_S (probes, starting the
 * lock and its server, joining threads); otherwise the watchdog prints a
 * record with status "timeout" and the stage that did not finish
 * ("stage", e.g. "server-start") and exits with status 3.  Why: starting or
 * stopping an RCL server creates or joins SCHED_FIFO threads on the server
 * CPU, which do not run while a FIFO thread of another process with the
 * same or a higher priority keeps that CPU busy (an RCL server of an older
 * build that never yields, any real-time busy loop) - and a run of a lock
 * that needs no server would then hang for a reason that is not the
 * lock's.  So lockbench
 * starts a server only for an algorithm with LIBLOCK_PROP_SERVER (rcl), not
 * for every delegating one (the combining locks and mp-server have no use
 * for it), and a server the lock does not bind anyway is not stopped: it
 * idle-parks (its threads sleep once nothing is asked of it for
 * LIBLOCK_RCL_IDLE_US) and ends with the process.
 *
 * For oversubscription (more threads than CPUs), --handoffs makes the critical section
 * also record the index of its thread in one more shared line and count the
 * changes of that index: `handoffs` (the lock went to a different thread)
 * and `handoff_ns` = elapsed time / handoffs.  --wake-probe takes the
 * wake-up probe (bench/wakeprobe.h: futex_wake of a parked thread until it
 * runs, two CPUs and one CPU) before and after the run, like the ping-pong
 * probe, so a hand-off can be compared with a wake-up of the same run.
 *
 * Correctness is checked, not assumed: after the run, every shared line must
 * have been incremented exactly once per critical section and every context
 * line twice per critical section of its thread; the result line says
 * "check": "ok" or "FAILED" (exit status 4).
 */
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include "chain.h"
#include "common.h"
#include "probe.h"
#include "wakeprobe.h"
#include "altprobe.h"
#include "rpcprobe.h"
#include "watchdog.h"
#include "platform/identity.h"

/* RCL servers come with the RCL runtime; until it is linked in, the weak
 * reference is NULL and the algorithm manages its own server. */
#pragma weak liblock_server_start
#pragma weak liblock_server_stop
liblock_server_t *liblock_server_of(const liblock_t *lock); /* from the RCL runtime, when present */
#pragma weak liblock_server_of

static const char usage_text[] =
    "usage: lockbench [options]\n"
    "  -a, --algorithm NAME     lock algorithm (default posix; see `liblock list`)\n"
    "  -t, --threads T          hardware-thread budget (default: number of CPUs)\n"
    "  -d, --delay CYCLES       busy delay between critical sections (default 100)\n"
    "  -k, --lines K            shared lines per critical section, dependent chain (default 1)\n"
    "  -c, --context C          per-thread context lines, touched before and inside (default 0)\n"
    "  -D, --duration SEC       fixed-time mode: run for SEC seconds (default 1)\n"
    "  -n, --count N            fixed-count mode: N critical sections per thread\n"
    "  -w, --wait POLICY        waiting policy (spin, spin-then-park, yield, park, preempt-aware; default: algorithm's)\n"
    "  -p, --pin MODE           rr (round-robin over CPUs, default) or none\n"
    "      --convention C       auto (default), server (1 CPU kept for the server, T-1 clients)\n"
    "                           or all (T threads run critical sections)\n"
    "      --server-cpu N       CPU of the server under the server convention (default: last CPU)\n"
    "  -T, --timeout SEC        bound on the run past its end/start (default 10; the whole program: +10 s)\n"
    "  -f, --format FMT         json (one JSON object per line, default) or csv\n"
    "      --header             with csv: print the header row first\n"
    "      --no-probe           skip the ping-pong probes\n"
    "      --handoffs           count owner changes (hand-offs between different threads) in the CS\n"
    "      --wake-probe         also take the wake-up probe (bench/wakeprobe.h) before and after the run\n"
    "      --alt-probe          also take the alternation probe (bench/altprobe.h) before and after the run\n"
    "      --rpc-probe          also take the delegation probe (bench/rpcprobe.h) before and after the run\n"
    "  -s, --seed N             seed of the chain layout (default 1)\n"
    "  -l, --label TEXT         free text carried in the output (e.g. a repetition id)\n"
    "  -h, --help               this text\n";

static void usage_fail(const char *fmt, const char *arg)
{
    fprintf(stderr, "lockbench: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n%s", usage_text);
    exit(2);
}

struct cfg {
    const char *algo;
    long threads, delay, lines, context, count, seed;
    double duration, timeout;
    int wait, pin, fmt, header, probe, handoffs, wake_probe, alt_probe, rpc_probe;
    int convention; /* 0 auto, 1 server, 2 all */
    long server_cpu;
    const char *label;
};

/* With --handoffs the critical section also writes this line: the index of
 * the thread whose critical section ran last, and how many times that
 * changed (a hand-off between two different threads).  Protected by the
 * lock like the chain; for a delegating lock the "owner" is the thread
 * whose request ran. */
struct owner_line {
    _Alignas(64) long last;
    uint64_t changes;
};

struct cs_arg {
    unsigned char *base;  /* shared chain */
    struct owner_line *own; /* NULL without --handoffs */
    long idx;
    uint64_t head;
    int k;
    unsigned char *cbase; /* this thread's context chain (may be NULL) */
    uint64_t chead;
    int c;
    volatile int ran;
};

struct worker {
    LL_ALIGNED pthread_t th;
    int idx, cpu;
    uint64_t count;
    uint64_t start_ns, end_ns; /* after the start barrier / after the last CS */
    int err;          /* errno from a failed liblock_execute */
    _Atomic int done;
    struct cs_arg arg;
    struct chain ctx;
    struct hist h;
};

static liblock_t lock;
static struct cfg cfg;

/* ---- the whole-program bound (see the header; bench/watchdog.h) ---- */
#define WATCHDOG_SLACK_S 10.0

static void set_stage(const char *s) { bench_set_stage(s); }

static void start_watchdog(void)
{
    double secs = (cfg.count ? cfg.timeout : cfg.duration + cfg.timeout) + bench_watchdog_slack(WATCHDOG_SLACK_S);
    bench_watchdog_start("lockbench", secs, cfg.label, cfg.algo, cfg.threads, cfg.fmt == FMT_JSON);
}

static pthread_barrier_t start_bar;
static LL_ALIGNED _Atomic int stop_flag;

static void *critical_section(void *p)
{
    struct cs_arg *a = p;
    chain_walk_fast(a->base, a->head, a->k);
    if (a->own && a->own->last != a->idx) {
        a->own->last = a->idx;
        a->own->changes++;
    }
    if (a->c)
        chain_walk_fast(a->cbase, a->chead, a->c);
    a->ran = 1;
    return p;
}

static void *warm_cs(void *p)
{
    (void)p;
    return &lock; /* non-NULL: liblock_execute's "ran" */
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    if (w->cpu >= 0)
        ll_pin_self(w->cpu);
    liblock_thread_register(&lock); /* set up per-thread state outside the timed loop */
    /* one untimed critical section: what a thread's first one costs once
     * (an RCL client id and slot, a server that idle-parked while the
     * threads were being created, a queue node) is not the steady state
     * the latency describes */
    if (!liblock_execute(&lock, warm_cs, NULL))
        w->err = errno ? errno : EIO;
    const uint64_t delay = (uint64_t)cfg.delay;
    const uint64_t n = w->err ? 0 : cfg.count > 0 ? (uint64_t)cfg.count : UINT64_MAX;
    struct cs_arg *a = &w->arg;
    pthread_barrier_wait(&start_bar);
    w->start_ns = ll_now_ns();
    uint64_t i = 0;
    for (; i < n; i++) {
        if (atomic_load_explicit(&stop_flag, memory_order_relaxed))
            break;
        if (a->c)
            chain_walk_fast(a->cbase, a->chead, a->c); /* context used before the CS */
        a->ran = 0;
        uint64_t t0 = bench_cycles();
        void *r = liblock_execute(&lock, critical_section, a);
        uint64_t t1 = bench_cycles();
        if (!r || !a->ran) {
            w->err = errno ? errno : EIO;
            break;
        }
        hist_add(&w->h, t1 - t0);
        w->count = i + 1;
        if (delay)
            while (bench_cycles() - t1 < delay)
                ll_pause();
    }
    w->end_ns = ll_now_ns();
    atomic_store_explicit(&w->done, 1, memory_order_release);
    return NULL;
}

static double now_s(void) { return (double)ll_now_ns() * 1e-9; }

/* A probe's two fields (keys are kept by pointer: literals), its values or
 * null when the option was not given. */
static void rec_mops_pair(struct record *r, int on, const char *k0, double before, const char *k1, double after)
{
    if (on) {
        REC_N(r, k0, "%.3f", before);
        REC_N(r, k1, "%.3f", after);
    } else {
        REC_N(r, k0, "%s", "");
        REC_N(r, k1, "%s", "");
    }
}

static void cs_reset(void *p) { ((struct cs_arg *)p)->ran = 0; }
static int cs_ran(void *p) { return ((struct cs_arg *)p)->ran; }

/* cs_probe(0): the alternation probe (bench/altprobe.h); cs_probe(1): the delegation
 * probe (bench/rpcprobe.h: client on CPU 0, server on CPU 1, the client's
 * argument read and written by the server as liblock_execute's is), with
 * this run's critical section: a chain of its own with the run's K lines
 * and seed, and, with --handoffs, an owner line of its own (the run's lines
 * and counts stay untouched).  CPUs 0 and 1; -1 if it cannot be taken. */
static double cs_probe(int rpc)
{
    struct chain c;
    if (chain_init(&c, (int)cfg.lines, (uint64_t)cfg.seed * 2654435761u + 17))
        return -1;
    static struct owner_line own;
    own = (struct owner_line){.last = -1};
    struct cs_arg *a = ll_alloc_aligned(2 * sizeof *a);
    if (!a) {
        chain_destroy(&c);
        return -1;
    }
    for (int i = 0; i < 2; i++)
        a[i] = (struct cs_arg){.base = c.base, .head = c.head, .k = c.k, .own = cfg.handoffs ? &own : NULL,
                               .idx = i};
    double r = rpc ? rpc_probe(critical_section, &a[0], cs_reset, cs_ran, cfg.delay, 0, 1, 40000, 5, 2000000000ull)
                   : alt_probe(critical_section, &a[0], &a[1], cfg.delay, 0, 1, 40000, 5, 2000000000ull);
    free(a);
    chain_destroy(&c);
    return r;
}

/* Wait until every worker is done or the absolute deadline (seconds) passes. */
static int wait_all(struct worker *w, long n, double deadline)
{
    for (;;) {
        long left = 0;
        for (long i = 0; i < n; i++)
            left += !atomic_load_explicit(&w[i].done, memory_order_acquire);
        if (!left)
            return 0;
        if (now_s() > deadline)
            return -1;
        usleep(2000);
    }
}

static void parse(int argc, char **argv)
{
    static const struct option opts[] = {
        {"algorithm", required_argument, 0, 'a'}, {"threads", required_argument, 0, 't'},
        {"delay", required_argument, 0, 'd'},     {"lines", required_argument, 0, 'k'},
        {"context", required_argument, 0, 'c'},   {"duration", required_argument, 0, 'D'},
        {"count", required_argument, 0, 'n'},     {"wait", required_argument, 0, 'w'},
        {"pin", required_argument, 0, 'p'},       {"convention", required_argument, 0, 1},
        {"server-cpu", required_argument, 0, 2},  {"timeout", required_argument, 0, 'T'},
        {"format", required_argument, 0, 'f'},    {"header", no_argument, 0, 3},
        {"no-probe", no_argument, 0, 4},          {"seed", required_argument, 0, 's'},
        {"handoffs", no_argument, 0, 5},          {"wake-probe", no_argument, 0, 6},
        {"alt-probe", no_argument, 0, 7},         {"rpc-probe", no_argument, 0, 8},
        {"label", required_argument, 0, 'l'},     {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    cfg = (struct cfg){.algo = "posix", .threads = ll_ncpus(), .delay = 100, .lines = 1, .context = 0,
                       .count = 0, .seed = 1, .duration = 1.0, .timeout = 10.0, .wait = LIBLOCK_WAIT_DEFAULT,
                       .pin = 1, .fmt = FMT_JSON, .probe = 1, .server_cpu = -1, .label = ""};
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":a:t:d:k:c:D:n:w:p:T:f:s:l:h", opts, NULL)) != -1) {
        switch (o) {
        case 'a': {
            liblock_algorithm_info_t in;
            if (liblock_algorithm_info(optarg, &in))
                usage_fail("unknown algorithm '%s' (see `liblock list`)", optarg);
            cfg.algo = optarg;
            break;
        }
        case 't':
            if (parse_long(optarg, 1, 4096, &cfg.threads))
                usage_fail("--threads must be 1..4096, not '%s'", optarg);
            break;
        case 'd':
            if (parse_long(optarg, 0, 100000000000L, &cfg.delay))
                usage_fail("--delay must be a number of cycles >= 0, not '%s'", optarg);
            break;
        case 'k':
            if (parse_long(optarg, 1, 100000, &cfg.lines))
                usage_fail("--lines must be 1..100000, not '%s'", optarg);
            break;
        case 'c':
            if (parse_long(optarg, 0, 100000, &cfg.context))
                usage_fail("--context must be 0..100000, not '%s'", optarg);
            break;
        case 'D':
            if (parse_double(optarg, 0.001, 86400, &cfg.duration))
                usage_fail("--duration must be 0.001..86400 seconds, not '%s'", optarg);
            cfg.count = 0;
            break;
        case 'n':
            if (parse_long(optarg, 1, 1000000000000L, &cfg.count))
                usage_fail("--count must be >= 1, not '%s'", optarg);
            break;
        case 'w':
            if (liblock_wait_parse(optarg, &cfg.wait))
                usage_fail("unknown waiting policy '%s'", optarg);
            break;
        case 'p':
            if (!strcmp(optarg, "rr"))
                cfg.pin = 1;
            else if (!strcmp(optarg, "none"))
                cfg.pin = 0;
            else
                usage_fail("--pin must be rr or none, not '%s'", optarg);
            break;
        case 1:
            if (!strcmp(optarg, "auto"))
                cfg.convention = 0;
            else if (!strcmp(optarg, "server"))
                cfg.convention = 1;
            else if (!strcmp(optarg, "all"))
                cfg.convention = 2;
            else
                usage_fail("--convention must be auto, server or all, not '%s'", optarg);
            break;
        case 2:
            if (parse_long(optarg, 0, ll_ncpus() - 1, &cfg.server_cpu))
                usage_fail("--server-cpu must be an online CPU number, not '%s'", optarg);
            break;
        case 'T':
            if (parse_double(optarg, 0.1, 86400, &cfg.timeout))
                usage_fail("--timeout must be 0.1..86400 seconds, not '%s'", optarg);
            break;
        case 'f':
            if (!strcmp(optarg, "json"))
                cfg.fmt = FMT_JSON;
            else if (!strcmp(optarg, "csv"))
                cfg.fmt = FMT_CSV;
            else
                usage_fail("--format must be json or csv, not '%s'", optarg);
            break;
        case 3: cfg.header = 1; break;
        case 4: cfg.probe = 0; break;
        case 5: cfg.handoffs = 1; break;
        case 6: cfg.wake_probe = 1; break;
        case 7: cfg.alt_probe = 1; break;
        case 8: cfg.rpc_probe = 1; break;
        case 's':
            if (parse_long(optarg, 0, 1L << 62, &cfg.seed))
                usage_fail("--seed must be a number >= 0, not '%s'", optarg);
            break;
        case 'l': cfg.label = optarg; break;
        case 'h': fputs(usage_text, stdout); exit(0);
        case ':': usage_fail("option '%s' needs a value", argv[optind - 1]); break;
        default: usage_fail("unknown option '%s'", argv[optind - 1]); break;
        }
    }
    if (optind < argc)
        usage_fail("unexpected argument '%s'", argv[optind]);
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    start_watchdog();
    set_stage("describe-machine");
    struct machine m;
    machine_describe(&m);
    liblock_algorithm_info_t info;
    liblock_algorithm_info(cfg.algo, &info);
    int delegates = !!(info.properties & LIBLOCK_PROP_DELEGATES);
    int ncpu = m.ncpus > 0 ? m.ncpus : 1;
    long server_cpu = cfg.server_cpu >= 0 ? cfg.server_cpu : ncpu - 1;

    /* the probe before: taken before any server exists (an RCL server spins
     * on its CPU at real-time priority and would stall the probe) */
    set_stage("probe-before");
    double probe0 = cfg.probe && ncpu > 1 ? probe_quick() : -1;
    double wake0 = cfg.wake_probe && ncpu > 1 ? wake_probe_cross() : -1;
    double wake0s = cfg.wake_probe ? wake_probe_same() : -1;
    double alt0 = cfg.alt_probe && ncpu > 1 ? cs_probe(0) : -1;
    double rpc0 = cfg.rpc_probe && ncpu > 1 ? cs_probe(1) : -1;

    /* the lock; for a delegating algorithm, with a server started on the
     * server CPU when the library has RCL servers */
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    if (cfg.wait != LIBLOCK_WAIT_DEFAULT && liblock_attr_setwait(&attr, cfg.wait)) {
        fprintf(stderr, "lockbench: algorithm %s does not support waiting policy %s\n", cfg.algo,
                liblock_wait_name(cfg.wait));
        return 2;
    }
    liblock_server_t *server = NULL;
    set_stage("server-start");
    if (delegates && (info.properties & LIBLOCK_PROP_SERVER) && cfg.convention != 2 && liblock_server_start) {
        server = liblock_server_start((int)server_cpu);
        if (server && liblock_attr_setserver(&attr, server) != 0) {
            if (liblock_server_stop)
                liblock_server_stop(server);
            server = NULL;
        }
    }
    set_stage("lock-init");
    int r = liblock_init(&lock, cfg.algo, &attr);
    if (r) {
        fprintf(stderr, "lockbench: liblock_init(%s): %s\n", cfg.algo, strerror(r));
        return 1;
    }
    /* Which convention.  auto: a delegating algorithm that runs its critical
     * sections on a server (liblock_server_of() says so, when the library
     * has it) gets the server CPU and T-1 clients; a delegating algorithm
     * without a server (combining: the combiner is one of the workers, as in
     * the thesis) gets T workers; without liblock_server_of every delegating
     * algorithm gets the server convention. */
    const char *server_mode = "none";
    liblock_server_t *bound = liblock_server_of ? liblock_server_of(&lock) : NULL;
    int has_server = delegates && (liblock_server_of ? bound != NULL : 1);
    int server_conv = cfg.convention == 1 || (cfg.convention == 0 && has_server);
    if (server_conv) {
        if (!delegates)
            server_mode = "reserved-idle"; /* convention forced on a classic lock */
        else if (bound && bound == server)
            server_mode = "liblock_server_start";
        else if (bound)
            server_mode = "library-default-server";
        else
            server_mode = "algorithm-managed";
    }
    /* A server this algorithm does not use is left to idle-park and end
     * with the process, not stopped: stopping joins its SCHED_FIFO threads,
     * which can wait without bound for the server CPU (see the header). */
    if (server && bound != server)
        server = NULL;
    if (!server_conv)
        server_cpu = -1;
    long nworkers = server_conv ? (cfg.threads > 1 ? cfg.threads - 1 : 1) : cfg.threads;
    int eff_wait = 0;
    liblock_getwait(&lock, &eff_wait);

    struct chain shared;
    if (chain_init(&shared, (int)cfg.lines, (uint64_t)cfg.seed * 2654435761u + 17)) {
        fprintf(stderr, "lockbench: out of memory for %ld shared lines\n", cfg.lines);
        return 1;
    }
    static struct owner_line owner = {.last = -1};
    struct worker *w = ll_alloc_aligned((size_t)nworkers * sizeof *w);
    if (!w) {
        fprintf(stderr, "lockbench: out of memory for %ld threads\n", nworkers);
        return 1;
    }
    /* CPUs the workers are pinned to: all, minus the server's under the
     * server convention (unless it is the only one). */
    int cpus[4096], ncpus_w = 0;
    for (int c = 0; c < ncpu && c < 4096; c++)
        if (!(server_conv && c == server_cpu && ncpu > 1))
            cpus[ncpus_w++] = c;
    /* Under the server convention the main thread, which wakes every few
     * milliseconds to watch the run, stays off the server CPU too: there it
     * would be a normal thread behind a SCHED_FIFO server, which the kernel
     * lets run only by preempting the server (its fair-share reserve for
     * starved normal threads), a stall of the server that no lock causes. */
    if (server_conv && server_cpu >= 0 && ncpu > 1 && cfg.pin) {
        cpu_set_t set;
        CPU_ZERO(&set);
        for (int i = 0; i < ncpus_w; i++)
            CPU_SET(cpus[i], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    }
    for (long i = 0; i < nworkers; i++) {
        w[i].idx = (int)i;
        w[i].cpu = cfg.pin ? cpus[i % ncpus_w] : -1;
        hist_init(&w[i].h);
        w[i].arg = (struct cs_arg){.base = shared.base, .head = shared.head, .k = shared.k,
                                   .own = cfg.handoffs ? &owner : NULL, .idx = (long)i};
        if (cfg.context) {
            if (chain_init(&w[i].ctx, (int)cfg.context, (uint64_t)cfg.seed * 7919 + (uint64_t)i * 104729 + 3)) {
                fprintf(stderr, "lockbench: out of memory for context lines\n");
                return 1;
            }
            w[i].arg.cbase = w[i].ctx.base;
            w[i].arg.chead = w[i].ctx.head;
            w[i].arg.c = w[i].ctx.k;
        }
    }


    set_stage("threads-start");
    pthread_barrier_init(&start_bar, NULL, (unsigned)nworkers + 1);
    for (long i = 0; i < nworkers; i++) {
        int e = pthread_create(&w[i].th, NULL, worker_main, &w[i]);
        if (e) {
            fprintf(stderr, "lockbench: cannot create thread %ld of %ld: %s\n", i + 1, nworkers, strerror(e));
            _exit(1); /* the created threads wait at the barrier: nothing to unwind */
        }
    }
    pthread_barrier_wait(&start_bar);
    uint64_t t_start = ll_now_ns();
    set_stage("run");
    double start_s = (double)t_start * 1e-9;
    /* timed_out: the run did not complete in its time bound (reported as
     * status "timeout"); stuck: some thread did not even come back after
     * the stop flag, so its counters are still moving and nothing is checked */
    int timed_out = 0, stuck = 0;
    if (cfg.count == 0) {
        wait_all(w, nworkers, start_s + cfg.duration); /* returns early only if every thread failed */
        atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
        timed_out = stuck = wait_all(w, nworkers, start_s + cfg.duration + cfg.timeout) != 0;
    } else {
        timed_out = wait_all(w, nworkers, start_s + cfg.timeout) != 0;
        atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
        if (timed_out) /* give the threads a moment to see the stop flag */
            stuck = wait_all(w, nworkers, now_s() + 1.0) != 0;
    }
    set_stage("teardown");
    if (!stuck)
        for (long i = 0; i < nworkers; i++)
            pthread_join(w[i].th, NULL);

    /* the lock and its server go before the probe after, for the same reason */
    if (!stuck) {
        liblock_destroy(&lock);
        if (server && liblock_server_stop)
            liblock_server_stop(server);
    }
    set_stage("probe-after");
    double probe1 = cfg.probe && ncpu > 1 && !stuck ? probe_quick() : -1;
    double wake1 = cfg.wake_probe && ncpu > 1 && !stuck ? wake_probe_cross() : -1;
    double wake1s = cfg.wake_probe && !stuck ? wake_probe_same() : -1;
    double alt1 = cfg.alt_probe && ncpu > 1 && !stuck ? cs_probe(0) : -1;
    double rpc1 = cfg.rpc_probe && ncpu > 1 && !stuck ? cs_probe(1) : -1;

    /* ---- results ---- */
    struct hist all;
    hist_init(&all);
    /* elapsed: from the first worker's start to the last one's end (the
     * main thread may be descheduled after the barrier while the workers
     * already run, so its own clock reading can come late) */
    uint64_t total = 0, cmin = UINT64_MAX, cmax = 0, end_max = t_start, start_min = t_start;
    double sq = 0;
    int err = 0;
    for (long i = 0; i < nworkers; i++) {
        uint64_t c = *(volatile uint64_t *)&w[i].count;
        total += c;
        sq += (double)c * (double)c;
        if (c < cmin)
            cmin = c;
        if (c > cmax)
            cmax = c;
        if (!stuck) {
            hist_merge(&all, &w[i].h);
            if (w[i].end_ns > end_max)
                end_max = w[i].end_ns;
            if (w[i].start_ns && w[i].start_ns < start_min)
                start_min = w[i].start_ns;
            if (w[i].err && !err)
                err = w[i].err;
        }
    }
    if (stuck)
        end_max = ll_now_ns();
    double elapsed = (double)(end_max - start_min) * 1e-9;
    const char *check = "skipped";
    if (!stuck) {
        int ok = chain_counts_are(&shared, total) && all.n == total;
        for (long i = 0; i < nworkers && ok && cfg.context; i++)
            ok = chain_counts_are(&w[i].ctx, 2 * w[i].count);
        check = ok ? "ok" : "FAILED";
    }
    const char *status = timed_out ? "timeout" : err ? "error" : "ok";
    double ghz = m.tsc_ghz > 0 ? m.tsc_ghz : 1;

    struct record rec = {0};
    REC_S(&rec, "benchmark", "lockbench");
    REC_S(&rec, "label", "%s", cfg.label);
    REC_S(&rec, "algorithm", "%s", cfg.algo);
    REC_S(&rec, "wait", "%s", liblock_wait_name(eff_wait));
    REC_N(&rec, "delegates", "%d", delegates);
    REC_N(&rec, "threads", "%ld", cfg.threads);
    REC_N(&rec, "workers", "%ld", nworkers);
    REC_S(&rec, "convention", "%s", server_conv ? "server" : "all");
    REC_S(&rec, "convention_text", "%s",
          server_conv ? "1 CPU kept for the server, T-1 client threads (thesis 5.2)"
                      : "all T threads execute critical sections");
    REC_N(&rec, "server_cpu", "%ld", server_cpu);
    REC_S(&rec, "server_mode", "%s", server_mode);
    REC_N(&rec, "delay_cycles", "%ld", cfg.delay);
    REC_N(&rec, "lines", "%ld", cfg.lines);
    REC_N(&rec, "context_lines", "%ld", cfg.context);
    REC_S(&rec, "mode", "%s", cfg.count ? "count" : "time");
    REC_N(&rec, "duration_s", "%g", cfg.count ? 0.0 : cfg.duration);
    REC_N(&rec, "count_per_thread", "%ld", cfg.count);
    REC_S(&rec, "pin", "%s", cfg.pin ? "rr" : "none");
    REC_N(&rec, "timeout_s", "%g", cfg.timeout);
    REC_N(&rec, "seed", "%ld", cfg.seed);
    rec_machine(&rec, &m);
    REC_S(&rec, "status", "%s", status);
    REC_N(&rec, "stuck", "%d", stuck);
    REC_S(&rec, "error", "%s", err ? strerror(err) : "");
    REC_S(&rec, "check", "%s", check);
    REC_N(&rec, "elapsed_s", "%.6f", elapsed);
    REC_N(&rec, "total_cs", "%llu", (unsigned long long)total);
    REC_N(&rec, "throughput_cs_per_s", "%.1f", elapsed > 0 ? (double)total / elapsed : 0.0);
    REC_N(&rec, "per_thread_min", "%llu", (unsigned long long)(nworkers ? cmin : 0));
    REC_N(&rec, "per_thread_max", "%llu", (unsigned long long)cmax);
    REC_N(&rec, "fairness_jain", "%.4f", sq > 0 ? (double)total * (double)total / ((double)nworkers * sq) : 0.0);
    if (all.n) {
        REC_N(&rec, "lat_cycles_min", "%llu", (unsigned long long)all.min);
        REC_N(&rec, "lat_cycles_p50", "%.0f", hist_quantile(&all, 0.50));
        REC_N(&rec, "lat_cycles_p90", "%.0f", hist_quantile(&all, 0.90));
        REC_N(&rec, "lat_cycles_p99", "%.0f", hist_quantile(&all, 0.99));
        REC_N(&rec, "lat_cycles_p999", "%.0f", hist_quantile(&all, 0.999));
        REC_N(&rec, "lat_cycles_max", "%llu", (unsigned long long)all.max);
        REC_N(&rec, "lat_cycles_mean", "%.1f", (double)all.sum / (double)all.n);
        REC_N(&rec, "lat_ns_p50", "%.1f", hist_quantile(&all, 0.50) / ghz);
        REC_N(&rec, "lat_ns_p90", "%.1f", hist_quantile(&all, 0.90) / ghz);
        REC_N(&rec, "lat_ns_p99", "%.1f", hist_quantile(&all, 0.99) / ghz);
        REC_N(&rec, "lat_ns_mean", "%.1f", (double)all.sum / (double)all.n / ghz);
    } else {
        static const char *const k[] = {"lat_cycles_min", "lat_cycles_p50", "lat_cycles_p90", "lat_cycles_p99",
                                        "lat_cycles_p999", "lat_cycles_max", "lat_cycles_mean", "lat_ns_p50",
                                        "lat_ns_p90", "lat_ns_p99", "lat_ns_mean"};
        for (size_t i = 0; i < sizeof k / sizeof *k; i++)
            REC_N(&rec, k[i], "%s", "");
    }
    REC_N(&rec, "probe_before_ns", "%.1f", probe0);
    REC_N(&rec, "probe_after_ns", "%.1f", probe1);
    if (cfg.handoffs) {
        uint64_t ho = *(volatile uint64_t *)&owner.changes;
        REC_N(&rec, "handoffs", "%llu", (unsigned long long)ho);
        REC_N(&rec, "handoff_ns", "%.1f", ho ? elapsed * 1e9 / (double)ho : 0.0);
    } else {
        REC_N(&rec, "handoffs", "%s", "");
        REC_N(&rec, "handoff_ns", "%s", "");
    }
    if (cfg.wake_probe) {
        REC_N(&rec, "wake_before_ns", "%.0f", wake0);
        REC_N(&rec, "wake_after_ns", "%.0f", wake1);
        REC_N(&rec, "wake_same_before_ns", "%.0f", wake0s);
        REC_N(&rec, "wake_same_after_ns", "%.0f", wake1s);
    } else {
        static const char *const k[] = {"wake_before_ns", "wake_after_ns", "wake_same_before_ns",
                                        "wake_same_after_ns"};
        for (size_t i = 0; i < sizeof k / sizeof *k; i++)
            REC_N(&rec, k[i], "%s", "");
    }
    rec_mops_pair(&rec, cfg.alt_probe, "alt_before_mops", alt0, "alt_after_mops", alt1);
    rec_mops_pair(&rec, cfg.rpc_probe, "rpc_before_mops", rpc0, "rpc_after_mops", rpc1);
    /* the spin phase this process measured for spin-then-park (wait.c): a
     * run whose budget came out short parks in ordinary hand-offs */
    if (eff_wait == LIBLOCK_WAIT_SPIN_THEN_PARK)
        REC_N(&rec, "spin_budget_ns", "%llu", (unsigned long long)ll_spin_budget_ns(NULL));
    else
        REC_N(&rec, "spin_budget_ns", "%s", "");
    /* how a delegated section that runs on another thread gets its caller's
     * identity: "wrfsbase", "arch_prctl", or "off (cause)" (identity.h) */
    REC_S(&rec, "identity", "%s", ll_ident_name());
    {
        char buf[64 * 1024];
        size_t off = 0;
        buf[off++] = '[';
        for (long i = 0; i < nworkers && off + 32 < sizeof buf; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%llu", i ? ", " : "",
                                    (unsigned long long)*(volatile uint64_t *)&w[i].count);
        buf[off++] = ']';
        buf[off] = 0;
        REC_N(&rec, "per_thread_counts", "%s", buf);
    }
    rec_print(&rec, cfg.fmt, cfg.header, stdout);
    set_stage("exit");
    rec_free(&rec);

    if (stuck)
        _exit(3); /* threads may still be spinning in the lock: leave at once */
    for (long i = 0; i < nworkers; i++)
        if (cfg.context)
            chain_destroy(&w[i].ctx);
    chain_destroy(&shared);
    free(w);
    if (strcmp(check, "ok") != 0)
        return 4;
    if (timed_out)
        return 3;
    return err ? 5 : 0;
}
