/*
 * wake_probe - the wake-up probe on its own (bench/wakeprobe.h): median ns
 * from futex_wake of a parked thread until that thread runs, waker and
 * sleeper on two CPUs (cross) and on one (same), with the ping-pong probe
 * (bench/probe.h) taken in the same run.  One JSON object per repetition.
 *
 * lockbench records the same probe before and after each run with
 * --wake-probe; `liblock bench oversubscription` compares FIFO hand-offs
 * against it.
 */
#include <getopt.h>
#include "common.h"
#include "probe.h"
#include "wakeprobe.h"

static const char usage_text[] =
    "usage: wake_probe [options]\n"
    "  -n, --samples N    samples per placement and repetition (default 200, at most 1000)\n"
    "  -r, --reps R       repetitions, one JSON line each (default 5)\n"
    "  -a, --waker CPU    CPU of the waker (default 0)\n"
    "  -b, --sleeper CPU  CPU of the sleeper for the cross placement (default 1)\n"
    "      --quick        1 repetition of 30 samples (for the tests)\n"
    "  -h, --help         this text\n";

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"samples", required_argument, 0, 'n'}, {"reps", required_argument, 0, 'r'},
                                         {"waker", required_argument, 0, 'a'},   {"sleeper", required_argument, 0, 'b'},
                                         {"quick", no_argument, 0, 1},           {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    long samples = 200, reps = 5, ca = 0, cb = 1;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":n:r:a:b:h", opts, NULL)) != -1) {
        switch (o) {
        case 'n':
            if (parse_long(optarg, 1, 1000, &samples))
                bench_usage_fail("wake_probe", usage_text, "--samples must be 1..1000, not", optarg);
            break;
        case 'r':
            if (parse_long(optarg, 1, 1000, &reps))
                bench_usage_fail("wake_probe", usage_text, "--reps must be 1..1000, not", optarg);
            break;
        case 'a':
            if (parse_long(optarg, 0, ll_ncpus() - 1, &ca))
                bench_usage_fail("wake_probe", usage_text, "--waker must be an online CPU, not", optarg);
            break;
        case 'b':
            if (parse_long(optarg, 0, ll_ncpus() - 1, &cb))
                bench_usage_fail("wake_probe", usage_text, "--sleeper must be an online CPU, not", optarg);
            break;
        case 1: samples = 30, reps = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case ':': bench_usage_fail("wake_probe", usage_text, "this option needs a value:", argv[optind - 1]);
        default: bench_usage_fail("wake_probe", usage_text, "unknown option", argv[optind - 1]);
        }
    }
    if (optind < argc)
        bench_usage_fail("wake_probe", usage_text, "unexpected argument", argv[optind]);
    struct machine m;
    machine_describe(&m);
    int two = m.ncpus > 1 && ca != cb;
    for (long r = 0; r < reps; r++) {
        double p0 = two ? probe_quick() : -1;
        int n_cross = 0, n_same = 0;
        double cross = two ? wake_probe_ns((int)ca, (int)cb, (int)samples, 2000000000ull, &n_cross) : -1;
        double same = wake_probe_ns((int)ca, (int)ca, (int)samples, 2000000000ull, &n_same);
        double p1 = two ? probe_quick() : -1;
        struct record rec = {0};
        REC_S(&rec, "benchmark", "wake_probe");
        REC_N(&rec, "rep", "%ld", r);
        REC_N(&rec, "waker_cpu", "%ld", ca);
        REC_N(&rec, "sleeper_cpu", "%ld", cb);
        REC_N(&rec, "samples", "%ld", samples);
        rec_machine(&rec, &m);
        REC_N(&rec, "wake_cross_ns", "%.0f", cross);
        REC_N(&rec, "wake_cross_samples", "%d", n_cross);
        REC_N(&rec, "wake_same_ns", "%.0f", same);
        REC_N(&rec, "wake_same_samples", "%d", n_same);
        REC_N(&rec, "probe_before_ns", "%.1f", p0);
        REC_N(&rec, "probe_after_ns", "%.1f", p1);
        REC_S(&rec, "status", "%s", (cross > 0 || !two) && same > 0 ? "ok" : "error");
        rec_print(&rec, FMT_JSON, 0, stdout);
        rec_free(&rec);
    }
    return 0;
}
