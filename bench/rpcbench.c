/*
 * rpcbench - local locking vs delegation to a server core, with shared and
 * context lines: the multi-client RPC experiment and the cost model of
 * J.-P. Lozi, "Improving the Performance of Java Applications on Multicore
 * Architectures", internship report, LIP6, 2010, sections 3.3-3.4
 * (`benchmark.c`).
 *
 * Mode rpc (solution (b), delegation): one server thread pinned to the server
 * CPU; client threads pinned round-robin over the other CPUs.  A client
 *   1. sets its completion flag to -1 and increments its C context lines
 *      (context used before the critical section),
 *   2. claims the single server slot by CAS(slot, NULL, &my_request):
 *      TAS retries the CAS at once, TTAS first waits until it reads NULL,
 *   3. waits until the server writes a sequence number >= 0 into its flag,
 *   4. busy-waits DELAY cycles.
 * The server spins until the slot is non-NULL, increments the client's C
 * context lines (fetching them from the client, the cost of delegation) and
 * the S shared lines (which stay in its cache, the gain), writes the
 * sequence number into the client's flag, and empties the slot.
 *
 * Mode lock (solution (a), local execution): every thread (all CPUs: the
 * same hardware budget as 1 server + clients) increments its context lines,
 * takes a CAS spinlock (TAS or TTAS), increments its context lines and the
 * shared lines, releases, waits DELAY cycles.
 *
 * Shared and context lines are dependent, non-prefetchable chains
 * (bench/chain.h).  Fixed time; reported: throughput, cycles per critical
 * section seen by the clients (incl. claiming/acquiring), per-client counts
 * (min, max, Jain's fairness index), a probe before and after.  Checked:
 * shared lines incremented once per CS, context lines twice per CS of their
 * owner.  A run that does not stop within its time bound is reported with
 * status "timeout" (exit 3).
 *
 * Memory ordering: the client publishes its request (and, before it, its
 * context-line writes) with the release CAS on the slot; the server's
 * acquire load of the slot sees them; the server's release store of the flag
 * publishes its writes to the context lines back to the client (acquire
 * load).  The slot is emptied with a release store after the flag is written,
 * so the next claimant's acquire CAS is ordered after the server's shared-line
 * writes.  In lock mode the CAS acquires and the release store releases.
 */
#include <getopt.h>
#include "chain.h"
#include "common.h"
#include "probe.h"

static const char usage_text[] =
    "usage: rpcbench [options]\n"
    "  -m, --mode MODE      rpc (delegation, default) or lock (local CAS spinlock)\n"
    "  -c, --clients N      client threads in rpc mode (default CPUs-1, at least 1);\n"
    "                       threads in lock mode (default CPUs)\n"
    "  -S, --shared N       shared lines per critical section (default 0)\n"
    "  -C, --context N      context lines per client (default 0)\n"
    "  -d, --delay CYCLES   client busy delay after each CS (default 0)\n"
    "      --ttas           test before the CAS (TTAS) instead of retrying it (TAS)\n"
    "  -s, --server-cpu N   server CPU in rpc mode (default: last CPU)\n"
    "  -D, --duration SEC   run time (default 0.5)\n"
    "  -T, --timeout SEC    bound past the run time (default 10)\n"
    "      --no-probe       skip the ping-pong probes\n"
    "      --quick          tiny run for tests (one rpc and one lock run)\n"
    "  -h, --help\n";

static void usage_fail(const char *what, const char *arg) { bench_usage_fail("rpcbench", usage_text, what, arg); }

struct request {
    LL_ALIGNED _Atomic int64_t flag; /* -1 while pending, else sequence number */
    unsigned char *cbase;            /* context chain of the client */
    uint64_t chead;
    int c;
};

struct client {
    LL_ALIGNED pthread_t th;
    int cpu;
    uint64_t count, cycles;
    struct chain ctx;
    struct request req; /* own line(s) */
    _Atomic int done;
};

static struct {
    int mode_lock, ttas, shared_n, ctx_n, nclients, server_cpu, probe;
    long delay;
    double duration, timeout;
} cfg;

static LL_ALIGNED _Atomic(struct request *) slot;
static LL_ALIGNED _Atomic uint32_t lockword;
static LL_ALIGNED _Atomic int stop, clients_left;
static struct chain shared;
static pthread_barrier_t bar;

static void *server_main(void *p)
{
    (void)p;
    ll_pin_self(cfg.server_cpu);
    pthread_barrier_wait(&bar);
    int64_t seq = 0;
    for (;;) {
        struct request *r;
        while (!(r = atomic_load_explicit(&slot, memory_order_acquire))) {
            if (atomic_load_explicit(&clients_left, memory_order_relaxed) == 0)
                return NULL;
            ll_pause();
        }
        if (r->c)
            chain_walk_fast(r->cbase, r->chead, r->c);
        if (cfg.shared_n)
            chain_walk_fast(shared.base, shared.head, cfg.shared_n);
        atomic_store_explicit(&r->flag, seq++, memory_order_release);
        atomic_store_explicit(&slot, NULL, memory_order_release);
    }
}

static void *client_main(void *p)
{
    struct client *c = p;
    if (c->cpu >= 0)
        ll_pin_self(c->cpu);
    struct request *me = &c->req;
    pthread_barrier_wait(&bar);
    uint64_t n = 0, cyc = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        if (me->c)
            chain_walk_fast(me->cbase, me->chead, me->c);
        uint64_t t0 = bench_cycles();
        if (!cfg.mode_lock) {
            atomic_store_explicit(&me->flag, -1, memory_order_relaxed);
            for (;;) {
                if (cfg.ttas)
                    while (atomic_load_explicit(&slot, memory_order_relaxed))
                        ll_pause();
                struct request *expect = NULL;
                if (atomic_compare_exchange_weak_explicit(&slot, &expect, me, memory_order_release,
                                                          memory_order_relaxed))
                    break;
                ll_pause();
            }
            while (atomic_load_explicit(&me->flag, memory_order_acquire) < 0)
                ll_pause();
        } else {
            for (;;) {
                if (cfg.ttas)
                    while (atomic_load_explicit(&lockword, memory_order_relaxed))
                        ll_pause();
                uint32_t expect = 0;
                if (atomic_compare_exchange_weak_explicit(&lockword, &expect, 1, memory_order_acquire,
                                                          memory_order_relaxed))
                    break;
                ll_pause();
            }
            if (me->c)
                chain_walk_fast(me->cbase, me->chead, me->c);
            if (cfg.shared_n)
                chain_walk_fast(shared.base, shared.head, cfg.shared_n);
            atomic_store_explicit(&lockword, 0, memory_order_release);
        }
        uint64_t t1 = bench_cycles();
        cyc += t1 - t0;
        n++;
        if (cfg.delay)
            while (bench_cycles() - t1 < (uint64_t)cfg.delay)
                ll_pause();
    }
    c->count = n;
    c->cycles = cyc;
    atomic_fetch_sub(&clients_left, 1);
    atomic_store_explicit(&c->done, 1, memory_order_release);
    return NULL;
}

static int one_run(const struct machine *m, FILE *out)
{
    int ncpu = m->ncpus > 0 ? m->ncpus : 1;
    int nthreads = cfg.nclients;
    atomic_store(&stop, 0);
    atomic_store(&slot, NULL);
    atomic_store(&lockword, 0);
    atomic_store(&clients_left, nthreads);
    int sn = cfg.shared_n > 0 ? cfg.shared_n : 1;
    if (chain_init(&shared, sn, 4242)) {
        fprintf(stderr, "rpcbench: out of memory\n");
        return 1;
    }
    struct client *cl = ll_alloc_aligned((size_t)nthreads * sizeof *cl);
    int others[1024], no = 0;
    for (int c = 0; c < ncpu && no < 1024; c++)
        if (cfg.mode_lock || c != cfg.server_cpu || ncpu == 1)
            others[no++] = c;
    for (int i = 0; i < nthreads; i++) {
        cl[i].cpu = others[i % no];
        if (cfg.ctx_n) {
            if (chain_init(&cl[i].ctx, cfg.ctx_n, 1000 + (uint64_t)i)) {
                fprintf(stderr, "rpcbench: out of memory\n");
                return 1;
            }
            cl[i].req.cbase = cl[i].ctx.base;
            cl[i].req.chead = cl[i].ctx.head;
            cl[i].req.c = cfg.ctx_n;
        }
    }
    double probe0 = cfg.probe && ncpu > 1 ? probe_quick() : -1;
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads + 1 + !cfg.mode_lock);
    pthread_t srv;
    if (!cfg.mode_lock)
        pthread_create(&srv, NULL, server_main, NULL);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&cl[i].th, NULL, client_main, &cl[i]);
    pthread_barrier_wait(&bar);
    uint64_t t0 = ll_now_ns();
    usleep((useconds_t)(cfg.duration * 1e6));
    atomic_store(&stop, 1);
    uint64_t deadline = ll_now_ns() + (uint64_t)(cfg.timeout * 1e9);
    int stuck = 0;
    for (;;) {
        int left = 0;
        for (int i = 0; i < nthreads; i++)
            left += !atomic_load_explicit(&cl[i].done, memory_order_acquire);
        if (!left)
            break;
        if (ll_now_ns() > deadline) {
            stuck = 1;
            break;
        }
        usleep(1000);
    }
    uint64_t t1 = ll_now_ns();
    if (!stuck) {
        for (int i = 0; i < nthreads; i++)
            pthread_join(cl[i].th, NULL);
        if (!cfg.mode_lock)
            pthread_join(srv, NULL);
    }
    double probe1 = cfg.probe && ncpu > 1 && !stuck ? probe_quick() : -1;
    uint64_t total = 0, cyc = 0, mn = UINT64_MAX, mx = 0;
    double sq = 0;
    for (int i = 0; i < nthreads; i++) {
        uint64_t c = cl[i].count;
        total += c, cyc += cl[i].cycles, sq += (double)c * (double)c;
        if (c < mn)
            mn = c;
        if (c > mx)
            mx = c;
    }
    int ok = 1;
    if (!stuck) {
        if (cfg.shared_n)
            ok = chain_counts_are(&shared, total);
        for (int i = 0; i < nthreads && ok && cfg.ctx_n; i++)
            ok = chain_counts_are(&cl[i].ctx, 2 * cl[i].count);
    }
    double el = (double)(t1 - t0) * 1e-9;
    struct record rec = {0};
    REC_S(&rec, "benchmark", "rpcbench");
    REC_S(&rec, "mode", "%s", cfg.mode_lock ? "lock" : "rpc");
    REC_S(&rec, "claim", "%s", cfg.ttas ? "ttas" : "tas");
    REC_N(&rec, "clients", "%d", nthreads);
    REC_N(&rec, "server_cpu", "%d", cfg.mode_lock ? -1 : cfg.server_cpu);
    REC_N(&rec, "shared_lines", "%d", cfg.shared_n);
    REC_N(&rec, "context_lines", "%d", cfg.ctx_n);
    REC_N(&rec, "delay_cycles", "%ld", cfg.delay);
    REC_N(&rec, "duration_s", "%g", cfg.duration);
    REC_N(&rec, "timeout_s", "%g", cfg.timeout);
    REC_S(&rec, "status", "%s", stuck ? "timeout" : "ok");
    REC_S(&rec, "check", "%s", stuck ? "skipped" : ok ? "ok" : "FAILED");
    REC_N(&rec, "elapsed_s", "%.6f", el);
    REC_N(&rec, "total_cs", "%llu", (unsigned long long)total);
    REC_N(&rec, "throughput_cs_per_s", "%.1f", el > 0 ? (double)total / el : 0.0);
    REC_N(&rec, "cycles_per_cs", "%.1f", total ? (double)cyc / (double)total : 0.0);
    REC_N(&rec, "per_client_min", "%llu", (unsigned long long)(nthreads ? mn : 0));
    REC_N(&rec, "per_client_max", "%llu", (unsigned long long)mx);
    REC_N(&rec, "fairness_jain", "%.4f", sq > 0 ? (double)total * (double)total / ((double)nthreads * sq) : 0.0);
    REC_N(&rec, "probe_before_ns", "%.1f", probe0);
    REC_N(&rec, "probe_after_ns", "%.1f", probe1);
    rec_machine(&rec, m);
    rec_print(&rec, FMT_JSON, 0, out);
    rec_free(&rec);
    if (stuck) {
        fflush(out);
        _exit(3);
    }
    for (int i = 0; i < nthreads; i++)
        if (cfg.ctx_n)
            chain_destroy(&cl[i].ctx);
    chain_destroy(&shared);
    free(cl);
    pthread_barrier_destroy(&bar);
    return ok ? 0 : 4;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"mode", required_argument, 0, 'm'},     {"clients", required_argument, 0, 'c'},
        {"shared", required_argument, 0, 'S'},   {"context", required_argument, 0, 'C'},
        {"delay", required_argument, 0, 'd'},    {"ttas", no_argument, 0, 2},
        {"server-cpu", required_argument, 0, 's'}, {"duration", required_argument, 0, 'D'},
        {"timeout", required_argument, 0, 'T'},  {"no-probe", no_argument, 0, 3},
        {"quick", no_argument, 0, 1},            {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    int ncpu = ll_ncpus();
    long clients = 0, sh = 0, cx = 0, scpu = ncpu - 1;
    int quick = 0;
    cfg.duration = 0.5, cfg.timeout = 10, cfg.probe = 1;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":m:c:S:C:d:s:D:T:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm':
            if (!strcmp(optarg, "rpc"))
                cfg.mode_lock = 0;
            else if (!strcmp(optarg, "lock"))
                cfg.mode_lock = 1;
            else
                usage_fail("--mode must be rpc or lock, not", optarg);
            break;
        case 'c':
            if (parse_long(optarg, 1, 1024, &clients))
                usage_fail("--clients must be 1..1024, not", optarg);
            break;
        case 'S':
            if (parse_long(optarg, 0, 100000, &sh))
                usage_fail("--shared must be 0..100000, not", optarg);
            break;
        case 'C':
            if (parse_long(optarg, 0, 100000, &cx))
                usage_fail("--context must be 0..100000, not", optarg);
            break;
        case 'd':
            if (parse_long(optarg, 0, 100000000000L, &cfg.delay))
                usage_fail("--delay must be cycles >= 0, not", optarg);
            break;
        case 2: cfg.ttas = 1; break;
        case 's':
            if (parse_long(optarg, 0, ncpu - 1, &scpu))
                usage_fail("--server-cpu: not an online CPU:", optarg);
            break;
        case 'D':
            if (parse_double(optarg, 0.001, 86400, &cfg.duration))
                usage_fail("--duration must be 0.001..86400 s, not", optarg);
            break;
        case 'T':
            if (parse_double(optarg, 0.1, 86400, &cfg.timeout))
                usage_fail("--timeout must be 0.1..86400 s, not", optarg);
            break;
        case 3: cfg.probe = 0; break;
        case 1: quick = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case ':': usage_fail("option needs a value:", argv[optind - 1]); break;
        default: usage_fail("unknown option", argv[optind - 1]); break;
        }
    }
    if (optind < argc)
        usage_fail("unexpected argument", argv[optind]);
    cfg.shared_n = (int)sh, cfg.ctx_n = (int)cx, cfg.server_cpu = (int)scpu;
    struct machine m;
    machine_describe(&m);
    if (quick) {
        cfg.probe = 0;
        cfg.duration = 0.05, cfg.shared_n = 3, cfg.ctx_n = 2, cfg.delay = 100;
        int rc = 0;
        for (int lock = 0; lock < 2; lock++) {
            cfg.mode_lock = lock;
            cfg.nclients = lock ? ncpu : (ncpu > 1 ? ncpu - 1 : 1);
            rc |= one_run(&m, stdout);
        }
        return rc;
    }
    cfg.nclients = clients ? (int)clients : cfg.mode_lock ? ncpu : (ncpu > 1 ? ncpu - 1 : 1);
    return one_run(&m, stdout);
}
