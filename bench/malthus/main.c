/*
 * malthus - the workloads of D. Dice, "Malthusian Locks", EuroSys 2017
 * (extended version, arXiv:1511.06035), section 6, on any liblock
 * algorithm and waiting policy, fixed-time, reporting throughput, the
 * fairness metrics of the lock (docs/fairness.md), voluntary context
 * switches and CPU utilisation (getrusage), with a ping-pong probe before
 * and after (bench/probe.h).  One run per
 * invocation; `liblock bench malthus` (tools/liblock_cli/_malthus.py)
 * interleaves runs and summarises them.  This file is the harness; the
 * parts are listed in malthus.h.
 *
 * usage: malthus -w WORKLOAD [-l LOCK] [-p POLICY] [-t THREADS] [-d SECONDS]
 *                [-o json|csv] [options]       (malthus -h for all of them)
 *
 * Workloads (parameters default to the paper's; choices the paper leaves
 * open are listed in docs/malthusian-bench.md):
 *   randarray          CS: 100 random loads from a shared 1 MB array;
 *                      NCS: 400 random loads from a private 1 MB array.
 *   ringwalker         private ring of 50 elements of 8 KB (one touched
 *                      line per element at a random offset); NCS walks 50
 *                      private elements, CS advances 10 on a shared ring.
 *   producer-consumer  COZ bounded queue (10,000) under the lock with two
 *                      condition variables; 3 consumers, -t producers.
 *   keymap             CS updates a central hash map (10M keys pre-inserted)
 *                      with a key of the thread's 1000-key keyset, replaced
 *                      with probability 0.1; NCS: 1000 steps of mt19937.
 *   lrucache           as keymap, on a shared LRU cache of 10,000 entries,
 *                      keys in [0, 1M), replacement probability 0.01.
 *   bufferpool         pool of 5 buffers of 1 MB (LIFO) under the lock with
 *                      a NotEmpty condition variable; take one, swap 500
 *                      random words with a private buffer, give it back,
 *                      update 5000 random private words.
 *
 * Measurement window: the workers start together (barrier); the main
 * thread reads getrusage(RUSAGE_SELF), the clock and the lock's fairness
 * history at the start and at the end of the window, and the per-thread
 * operation counters at the end.  Workers then finish the operation they
 * are in (the "drain"); if that takes longer than the grace period (-g) the
 * record says "drained": false and the process exits without the
 * end-of-run consistency checks.  Exit status: 0 ok, 1 a consistency check
 * failed, 2 bad usage, 3 the lock cannot run this workload (policy or
 * condition variables unsupported), 4 out of memory.
 */
#include "malthus.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "probe.h"

liblock_t LOCK;
liblock_cond_t COND_A, COND_B;
_Atomic int stop_flag;
struct worker *W;
int NW;
static pthread_barrier_t start_bar;
static _Atomic int setup_failed;

static const struct workload *const WL[W__N] = {
    [W_RANDARRAY] = &wl_randarray, [W_RINGWALKER] = &wl_ringwalker, [W_PC] = &wl_prodcons,
    [W_KEYMAP] = &wl_keymap,       [W_LRU] = &wl_lrucache,          [W_BUFPOOL] = &wl_bufferpool,
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    const struct workload *wl = WL[C.workload];
    if (wl->thread_init && wl->thread_init(w) != 0)
        atomic_store(&setup_failed, 1);
    pthread_barrier_wait(&start_bar);
    if (!atomic_load(&setup_failed))
        wl->loop(w);
    return NULL;
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

int main(int argc, char **argv)
{
    int r = malthus_options(argc, argv);
    if (r >= 0)
        return r;

    /* the lock */
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    if (C.policy_name)
        liblock_attr_setwait(&attr, C.policy);
    liblock_attr_setfairness(&attr, C.fairness);
    r = liblock_init(&LOCK, C.lock, &attr);
    if (r == ENOTSUP) {
        fprintf(stderr, "malthus: lock '%s' does not support waiting policy '%s'\n", C.lock, C.policy_name);
        return 3;
    }
    if (r) {
        fprintf(stderr, "malthus: cannot initialise lock '%s': %s\n", C.lock, strerror(r));
        return r == ENOMEM ? 4 : 3;
    }
    liblock_getwait(&LOCK, &C.policy);
    const struct workload *wl = WL[C.workload];
    if (wl->uses_cond) {
        liblock_algorithm_info_t in;
        liblock_algorithm_info(C.lock, &in);
        if (!(in.properties & LIBLOCK_PROP_COND)) {
            fprintf(stderr, "malthus: lock '%s' has no condition variables; %s needs them\n", C.lock,
                    wnames[C.workload]);
            return 3;
        }
        liblock_condattr_t ca;
        liblock_condattr_init(&ca);
        if (C.cond_fifo >= 0)
            liblock_condattr_setfifo(&ca, C.cond_fifo);
        if ((r = liblock_cond_init(&COND_A, &ca)) || (r = liblock_cond_init(&COND_B, &ca))) {
            fprintf(stderr, "malthus: condition variable: %s\n", strerror(r));
            return 3;
        }
    }
    if ((r = wl->setup()) != 0) {
        fprintf(stderr, "malthus: %s set-up: %s\n", wnames[C.workload], strerror(r));
        return r == ENOMEM ? 4 : 2;
    }

    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double probe0 = C.probe && ncpu > 1 ? probe_default() : -1;

    NW = C.threads + (C.workload == W_PC ? C.consumers : 0);
    W = aligned_alloc(64, sizeof *W * (size_t)NW);
    if (!W) {
        fprintf(stderr, "malthus: out of memory\n");
        return 4;
    }
    memset(W, 0, sizeof *W * (size_t)NW);
    pthread_barrier_init(&start_bar, NULL, (unsigned)NW + 1);
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setstacksize(&ta, 256 * 1024);
    for (int i = 0; i < NW; i++) {
        W[i].idx = i;
        W[i].role = C.workload == W_PC && i < C.consumers;
        W[i].rng = 0x9E3779B97F4A7C15ull * (C.seed + 1) + (uint64_t)i * 0xBF58476D1CE4E5B9ull + 1;
        if ((r = pthread_create(&W[i].th, &ta, worker_main, &W[i])) != 0) {
            fprintf(stderr, "malthus: cannot create thread %d of %d: %s\n", i + 1, NW, strerror(r));
            _exit(4);
        }
    }
    pthread_barrier_wait(&start_bar);
    if (atomic_load(&setup_failed)) {
        fprintf(stderr, "malthus: out of memory setting up %d threads\n", NW);
        _exit(4);
    }
    struct rusage ru0, ru1;
    liblock_fairness_t f1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = probe_now_ns();
    /* no admission happens before the barrier, so the history starts at t0 */
    uint64_t deadline = t0 + (uint64_t)(C.duration * 1e9);
    for (uint64_t now; (now = probe_now_ns()) < deadline;) {
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    if (C.fairness)
        liblock_fairness(&LOCK, &f1);
    atomic_store(&stop_flag, 1);
    uint64_t t1 = probe_now_ns();
    getrusage(RUSAGE_SELF, &ru1);
    uint64_t ops = 0, starved = 0;
    for (int i = 0; i < NW; i++) {
        uint64_t o = atomic_load_explicit(&W[i].ops, memory_order_relaxed);
        if (C.workload != W_PC || W[i].role)
            ops += o; /* producer-consumer: messages = consumptions */
        starved += o == 0;
    }
    if (wl->uses_cond) { /* wake the condition waiters so that they see stop */
        liblock_lock(&LOCK);
        liblock_cond_broadcast(&COND_A);
        liblock_cond_broadcast(&COND_B);
        liblock_unlock(&LOCK);
    }
    /* drain */
    uint64_t gdead = t1 + (uint64_t)(C.grace * 1e9);
    int joined = 0;
    for (int i = 0; i < NW; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t now = probe_now_ns(), left = gdead > now ? gdead - now : 0;
        ts.tv_sec += (time_t)(left / 1000000000u);
        ts.tv_nsec += (long)(left % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_timedjoin_np(W[i].th, NULL, &ts) != 0)
            break;
        joined++;
    }
    int drained = joined == NW;
    uint64_t t2 = probe_now_ns();
    double probe1 = C.probe && ncpu > 1 && drained ? probe_default() : -1;

    /* consistency checks (only when every worker has finished) */
    char msg[256] = "";
    int check = 0; /* 0 ok, -1 failed, 1 not run */
    uint64_t ops_final = 0;
    for (int i = 0; i < NW; i++)
        ops_final += atomic_load(&W[i].ops);
    if (!drained) {
        check = 1;
    } else if (wl->check) {
        check = wl->check(msg, sizeof msg, ops_final);
    }

    /* Totals once every worker has stopped: nothing changes any more, so
     * the two can be compared exactly (the window figures above are read a
     * moment apart while workers still run). */
    liblock_fairness_t f2;
    int have_totals = drained && C.fairness && liblock_fairness(&LOCK, &f2) == 0;

    /* the record */
    double el = (double)(t1 - t0) * 1e-9;
    double cpu = tv(ru1.ru_utime) + tv(ru1.ru_stime) - tv(ru0.ru_utime) - tv(ru0.ru_stime);
    f_str("bench", "malthus");
    f_str("workload", wnames[C.workload]);
    f_str("lock", C.lock);
    f_str("policy", liblock_wait_name(C.policy));
    f_num("threads", "%.0f", C.threads);
    f_num("workers", "%.0f", NW);
    f_num("duration_s", "%g", C.duration);
    f_num("elapsed_s", "%.6f", el);
    f_u64("ops", ops);
    f_num("throughput", "%.1f", (double)ops / el);
    f_num("fairness", "%.0f", C.fairness);
    if (C.fairness) {
        f_u64("acquisitions", f1.acquisitions);
        f_num("acq_per_op", "%.4f", ops ? (double)f1.acquisitions / (double)ops : NAN);
        f_num("avg_lwss", "%.3f", f1.avg_lwss);
        f_u64("lwss_windows", f1.windows);
        if (f1.mttr >= 0)
            f_num("mttr", "%.1f", f1.mttr);
        else
            f_null("mttr");
        f_num("gini", "%.4f", f1.gini);
        f_num("rstddev", "%.4f", f1.rstddev);
        f_u64("fair_threads", f1.threads);
    } else {
        const char *nulls[] = {"acquisitions", "acq_per_op", "avg_lwss", "lwss_windows", "mttr", "gini", "rstddev",
                               "fair_threads"};
        for (size_t i = 0; i < sizeof nulls / sizeof *nulls; i++)
            f_null(nulls[i]);
    }
    f_u64("starved", starved);
    f_num("vcsw", "%.0f", (double)(ru1.ru_nvcsw - ru0.ru_nvcsw));
    f_num("ivcsw", "%.0f", (double)(ru1.ru_nivcsw - ru0.ru_nivcsw));
    f_num("cpu_s", "%.3f", cpu);
    f_num("cpu_util", "%.3f", cpu / el);
    f_num("probe_before_ns", "%.1f", probe0 > 0 ? probe0 : NAN);
    f_num("probe_after_ns", "%.1f", probe1 > 0 ? probe1 : NAN);
    f_num("drained", "%.0f", drained);
    if (have_totals) {
        f_u64("ops_total", ops_final);
        f_u64("acquisitions_total", f2.acquisitions);
    } else {
        f_null("ops_total");
        f_null("acquisitions_total");
    }
    f_num("drain_s", "%.3f", (double)(t2 - t1) * 1e-9);
    f_str("check", check == 0 ? "ok" : check < 0 ? "failed" : "not-run");
    f_u64("seed", C.seed);
    f_num("cpus", "%.0f", ncpu);
    wl->report(); /* workload parameters and results */
    emit();
    if (check < 0)
        fprintf(stderr, "malthus: consistency check failed: %s\n", msg);
    if (!drained) {
        fprintf(stderr, "malthus: %d of %d workers still busy %.1f s after the window; not checked\n", NW - joined, NW,
                C.grace);
        _exit(0); /* the workers may be stuck behind preempted lock holders: end them with the process */
    }
    return check < 0 ? 1 : 0;
}
