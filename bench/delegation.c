/*
 * delegation - one run of the delegation benchmark of D. Petrovic,
 * "Efficient Communication and Synchronization on Manycore Processors",
 * PhD thesis no. 6552, EPFL, 2015, sections 6.2 and 7.2: T
 * threads each do an operation on a shared object (bench/delegation/
 * objects.h: counter, stack, one- or two-lock MS queue) through
 * liblock_execute, then pause a random 0..P cycles (P = 1000 by default),
 * for D seconds.  One JSON record: throughput, mean latency per operation,
 * fairness (max/min operations per thread), the algorithm's own counters
 * where it exposes them (combining rate, CAS per operation, server cycles
 * per request), the ping-pong probe before and after.  `liblock bench
 * delegation` (tools/liblock_cli/_delegation.py) runs it many times,
 * interleaved.
 *
 * Placement: a server CPU (-S, default 0) is kept for servers (mp-server:
 * LIBLOCK_MPSERVER_CPU; rcl: LIBLOCK_SERVERS, unless already set) and the
 * client threads go round-robin over the other CPUs (-c server, default);
 * -c all spreads them over every CPU, -c none does not pin.
 * Algorithm "faa" is not a lock: the counter by one atomic fetch-and-add.
 */
#include "common.h"
#include "probe.h"
#include "delegation/objects.h"

#include <pthread.h>
#include <sched.h>

/* One of a lock's statistics (ll_lock_stats; names as the algorithm fills
 * them), -1 if it keeps no such counter. */
static double stat_of(const liblock_t *l, const char *name)
{
    struct ll_stats st;
    return ll_lock_stats(l, &st) == 0 ? (double)ll_stat(&st, name, -1) : -1;
}

static const char usage[] =
    "usage: delegation -a ALGORITHM|faa [-o counter|stack|queue1|queue2] [-t THREADS] [-D SECONDS]\n"
    "                  [-P PAUSE_MAX_CYCLES] [-S SERVER_CPU|-1] [-c server|all|none] [-w POLICY]\n"
    "                  [-T TIMEOUT_S] [-l LABEL] [--no-probe]\n";

struct cfg {
    const char *algo, *label, *placement;
    int object, threads, server_cpu, probe, wait;
    double duration, timeout;
    long pause;
};

struct worker {
    pthread_t th;
    int idx, cpu, err;
    uint64_t ops, lat_cycles, enq_sum, deq_sum;
    struct obj_pool pool;
    struct object *o;
    const struct cfg *c;
} __attribute__((aligned(64)));

static atomic_int go, stop, ready, finished;
static _Atomic uint64_t faa_counter __attribute__((aligned(64)));

static void *worker_main(void *p)
{
    struct worker *w = p;
    if (w->cpu >= 0)
        ll_pin_self(w->cpu);
    struct obj_arg x = {w->o, &w->pool, ((uint64_t)w->idx << 32) + 1};
    uint64_t rng = 0x9e3779b97f4a7c15ull * (uint64_t)(w->idx + 1);
    int faa = strcmp(w->c->algo, "faa") == 0;
    atomic_fetch_add(&ready, 1);
    while (!atomic_load_explicit(&go, memory_order_acquire))
        ll_pause();
    for (uint64_t i = 0; !atomic_load_explicit(&stop, memory_order_relaxed); i++) {
        uint64_t t0 = bench_cycles();
        if (faa) {
            atomic_fetch_add_explicit(&faa_counter, 1, memory_order_seq_cst);
        } else {
            int e = object_op(&x, i, &w->enq_sum, &w->deq_sum);
            if (e) {
                w->err = e;
                break;
            }
        }
        w->lat_cycles += bench_cycles() - t0;
        w->ops++;
        if (w->c->pause) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            busy_cycles(rng % (uint64_t)(w->c->pause + 1));
        }
    }
    atomic_fetch_add(&finished, 1);
    return NULL;
}

static void parse(int argc, char **argv, struct cfg *c)
{
    *c = (struct cfg){NULL, "", "server", OBJ_COUNTER, 1, 0, 1, 0, 1.0, 10.0, 1000};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        double d;
        if (!strcmp(a, "--no-probe")) {
            c->probe = 0;
            continue;
        }
        if (!v)
            bench_usage_fail("delegation", usage, "missing value for", a);
        i++;
        if (!strcmp(a, "-a")) {
            c->algo = v;
        } else if (!strcmp(a, "-o")) {
            c->object = -1;
            for (int k = 0; k < OBJ__COUNT; k++)
                if (!strcmp(v, obj_names[k]))
                    c->object = k;
            if (c->object < 0)
                bench_usage_fail("delegation", usage, "unknown object", v);
        } else if (!strcmp(a, "-t")) {
            if (parse_long(v, 1, 4096, &n))
                bench_usage_fail("delegation", usage, "bad thread count", v);
            c->threads = (int)n;
        } else if (!strcmp(a, "-D")) {
            if (parse_double(v, 0.001, 3600, &d))
                bench_usage_fail("delegation", usage, "bad duration", v);
            c->duration = d;
        } else if (!strcmp(a, "-P")) {
            if (parse_long(v, 0, 1L << 30, &n))
                bench_usage_fail("delegation", usage, "bad pause", v);
            c->pause = n;
        } else if (!strcmp(a, "-S")) {
            if (parse_long(v, -1, 1 << 20, &n))
                bench_usage_fail("delegation", usage, "bad server CPU", v);
            c->server_cpu = (int)n;
        } else if (!strcmp(a, "-c")) {
            if (strcmp(v, "server") && strcmp(v, "all") && strcmp(v, "none"))
                bench_usage_fail("delegation", usage, "unknown placement", v);
            c->placement = v;
        } else if (!strcmp(a, "-w")) {
            if (liblock_wait_parse(v, &c->wait) != 0)
                bench_usage_fail("delegation", usage, "unknown waiting policy", v);
        } else if (!strcmp(a, "-T")) {
            if (parse_double(v, 0.1, 3600, &d))
                bench_usage_fail("delegation", usage, "bad timeout", v);
            c->timeout = d;
        } else if (!strcmp(a, "-l")) {
            c->label = v;
        } else {
            bench_usage_fail("delegation", usage, "unknown option", a);
        }
    }
    if (!c->algo)
        bench_usage_fail("delegation", usage, "missing", "-a");
    if (!strcmp(c->algo, "faa") && c->object != OBJ_COUNTER)
        bench_usage_fail("delegation", usage, "faa is a counter only, not", obj_names[c->object]);
}

int main(int argc, char **argv)
{
    struct cfg c;
    parse(argc, argv, &c);
    int ncpu = ll_ncpus();
    int faa = !strcmp(c.algo, "faa");
    if (c.server_cpu >= ncpu)
        c.server_cpu = ncpu - 1;
    char buf[32];
    if (c.server_cpu >= 0) {
        snprintf(buf, sizeof buf, "%d", c.server_cpu);
        setenv("LIBLOCK_MPSERVER_CPU", buf, 0);
        setenv("LIBLOCK_SERVERS", buf, 0);
    }
    if (c.object == OBJ_QUEUE2)
        setenv("LIBLOCK_MPSERVER_STREAM", "0", 1); /* not valid with two servers (Petrovic's thesis, section 7.1.3, "Streaming stores") */
    struct machine m;
    machine_describe(&m);
    double ghz = m.tsc_ghz > 0 ? m.tsc_ghz : 1.0;
    struct object o;
    memset(&o, 0, sizeof o);
    if (!faa) {
        liblock_attr_t at;
        liblock_attr_init(&at);
        if (c.wait)
            liblock_attr_setwait(&at, c.wait);
        int e = object_init(&o, c.object, c.algo, &at);
        if (e) {
            fprintf(stderr, "delegation: cannot initialise '%s': %s\n", c.algo, strerror(e));
            return 2;
        }
    }
    /* client CPUs */
    int ncl = 0, cl[1024];
    for (int i = 0; i < ncpu && ncl < 1024; i++)
        if (strcmp(c.placement, "server") || i != c.server_cpu || ncpu == 1)
            cl[ncl++] = i;
    double probe0 = c.probe && ncpu > 1 ? probe_quick() : -1;
    struct worker *w = ll_alloc_aligned((size_t)c.threads * sizeof *w);
    for (int i = 0; i < c.threads; i++) {
        w[i].idx = i;
        w[i].cpu = strcmp(c.placement, "none") ? cl[i % ncl] : -1;
        w[i].o = &o;
        w[i].c = &c;
        pthread_create(&w[i].th, NULL, worker_main, &w[i]);
    }
    while (atomic_load(&ready) < c.threads)
        usleep(100);
    uint64_t t0 = ll_now_ns(), c0 = ll_cycles();
    atomic_store_explicit(&go, 1, memory_order_release);
    usleep((useconds_t)(c.duration * 1e6));
    atomic_store(&stop, 1);
    uint64_t bound = ll_now_ns() + (uint64_t)(c.timeout * 1e9);
    while (atomic_load(&finished) < c.threads && ll_now_ns() < bound)
        usleep(1000);
    int stuck = atomic_load(&finished) < c.threads;
    uint64_t t1 = ll_now_ns(), c1 = ll_cycles();
    double elapsed = (double)(t1 - t0) / 1e9;
    uint64_t total = 0, lat = 0, mn = UINT64_MAX, mx = 0, enq = 0, deq = 0;
    int err = 0;
    for (int i = 0; i < c.threads; i++) {
        if (!stuck)
            pthread_join(w[i].th, NULL);
        total += w[i].ops;
        lat += w[i].lat_cycles;
        enq += w[i].enq_sum;
        deq += w[i].deq_sum;
        if (w[i].ops < mn)
            mn = w[i].ops;
        if (w[i].ops > mx)
            mx = w[i].ops;
        if (w[i].err)
            err = w[i].err;
    }
    const char *check = "skipped";
    if (!stuck && !err) {
        if (faa)
            check = atomic_load(&faa_counter) == total ? "ok" : "WRONG";
        else if (c.object == OBJ_COUNTER)
            check = o.counter == total ? "ok" : "WRONG";
        else
            check = enq == deq + object_remaining_sum(&o) ? "ok" : "WRONG";
    }
    /* the algorithm's counters */
    double comb = -1, cas_per_op = -1, srv_cyc = -1, batch = -1, parks = -1;
    if (!faa && stat_of(&o.lock, "busy_cycles") >= 0) { /* a server's counters (mp-server) */
        double served = stat_of(&o.lock, "served"), busy = stat_of(&o.lock, "busy_passes"),
               cyc = stat_of(&o.lock, "busy_cycles"), pk = stat_of(&o.lock, "parks");
        if (o.nlocks == 2 && stat_of(&o.lock2, "busy_cycles") >= 0)
            served += stat_of(&o.lock2, "served"), busy += stat_of(&o.lock2, "busy_passes"),
                cyc += stat_of(&o.lock2, "busy_cycles"), pk += stat_of(&o.lock2, "parks");
        parks = total ? (double)pk / (double)total : -1;
        batch = busy ? (double)served / (double)busy : -1;
        srv_cyc = served ? (double)cyc / (double)served : -1;
        comb = batch;
    }
    if (!faa && (!strcmp(c.algo, "cc-synch") || !strcmp(c.algo, "flat-combining"))) {
        double passes = stat_of(&o.lock, "passes");
        comb = passes > 0 ? (double)total / passes : -1;
    }
    if (!faa && stat_of(&o.lock, "cas") >= 0) { /* hybcomb's registration counters */
        double passes = stat_of(&o.lock, "passes");
        comb = passes > 0 ? (stat_of(&o.lock, "own") + stat_of(&o.lock, "served")) / passes : -1;
        cas_per_op = total ? stat_of(&o.lock, "cas") / (double)total : -1;
    }
    double probe1 = c.probe && ncpu > 1 && !stuck ? probe_quick() : -1;

    struct record r = {0};
    REC_S(&r, "label", "%s", c.label);
    REC_S(&r, "algorithm", "%s", c.algo);
    REC_S(&r, "object", "%s", obj_names[c.object]);
    REC_N(&r, "threads", "%d", c.threads);
    REC_S(&r, "wait", "%s", c.wait ? liblock_wait_name(c.wait) : "default");
    REC_N(&r, "pause_max_cycles", "%ld", c.pause);
    REC_N(&r, "server_cpu", "%d", c.server_cpu);
    REC_S(&r, "placement", "%s", c.placement);
    REC_S(&r, "mpserver_backoff", "%s", getenv("LIBLOCK_MPSERVER_BACKOFF") ? getenv("LIBLOCK_MPSERVER_BACKOFF") : "0");
    REC_S(&r, "mpserver_stream", "%s", getenv("LIBLOCK_MPSERVER_STREAM") ? getenv("LIBLOCK_MPSERVER_STREAM") : "0");
    REC_S(&r, "mpserver_stride", "%s", getenv("LIBLOCK_MPSERVER_STRIDE") ? getenv("LIBLOCK_MPSERVER_STRIDE") : "1");
    REC_S(&r, "mpserver_shuffle", "%s", getenv("LIBLOCK_MPSERVER_SHUFFLE") ? getenv("LIBLOCK_MPSERVER_SHUFFLE") : "0");
    REC_S(&r, "hybcomb_max_ops", "%s", getenv("LIBLOCK_HYBCOMB_MAX_OPS") ? getenv("LIBLOCK_HYBCOMB_MAX_OPS") : "");
    rec_machine(&r, &m);
    REC_S(&r, "status", "%s", stuck ? "timeout" : err ? "error" : "ok");
    REC_S(&r, "error", "%s", err ? strerror(err) : "");
    REC_S(&r, "check", "%s", check);
    REC_N(&r, "elapsed_s", "%.6f", elapsed);
    REC_N(&r, "total_ops", "%llu", (unsigned long long)total);
    REC_N(&r, "throughput_ops_per_s", "%.1f", elapsed > 0 ? (double)total / elapsed : 0.0);
    REC_N(&r, "cycles_per_op", "%.1f", total ? (double)(c1 - c0) / (double)total : 0.0);
    REC_N(&r, "latency_cycles_mean", "%.1f", total ? (double)lat / (double)total : 0.0);
    REC_N(&r, "latency_ns_mean", "%.1f", total ? (double)lat / (double)total / ghz : 0.0);
    REC_N(&r, "per_thread_min", "%llu", (unsigned long long)(c.threads ? mn : 0));
    REC_N(&r, "per_thread_max", "%llu", (unsigned long long)mx);
    if (mn > 0)
        REC_N(&r, "fairness_max_min", "%.4f", (double)mx / (double)mn);
    else
        REC_N(&r, "fairness_max_min", "%s", "");
    if (comb >= 0)
        REC_N(&r, "combining_rate", "%.2f", comb);
    else
        REC_N(&r, "combining_rate", "%s", "");
    if (cas_per_op >= 0)
        REC_N(&r, "cas_per_op", "%.4f", cas_per_op);
    else
        REC_N(&r, "cas_per_op", "%s", "");
    if (srv_cyc >= 0)
        REC_N(&r, "server_busy_cycles_per_op", "%.1f", srv_cyc);
    else
        REC_N(&r, "server_busy_cycles_per_op", "%s", "");
    if (parks >= 0)
        REC_N(&r, "server_sleeps_per_op", "%.4f", parks);
    else
        REC_N(&r, "server_sleeps_per_op", "%s", "");
    REC_N(&r, "probe_before_ns", "%.1f", probe0);
    REC_N(&r, "probe_after_ns", "%.1f", probe1);
    rec_print(&r, FMT_JSON, 0, stdout);
    rec_free(&r);
    fflush(stdout);
    if (stuck)
        _exit(3);
    for (int i = 0; i < c.threads; i++)
        pool_destroy(&w[i].pool);
    if (!faa)
        object_destroy(&o);
    free(w);
    return err ? 1 : 0;
}
