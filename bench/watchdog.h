/*
 * watchdog.h - a bound on a whole benchmark program, set-up and tear-down
 * included (lockbench's; docs/bench.md, "Bounded").
 *
 * bench_watchdog_start() starts a detached thread that sleeps until the
 * bound; if the program is still running then, it writes a message naming
 * the stage the main thread was in (bench_set_stage) and, for JSON output,
 * a record with "status": "timeout", "stuck": 1 and that "stage", then
 * leaves with _exit(3), as a stuck run does.  The record is made with
 * snprintf and write(): the main thread may hold stdio's lock, so the JSON
 * strings (label, algorithm) are quoted before the thread starts.
 *
 * The stage is a pointer to a static string, stored and loaded relaxed: the
 * watchdog only names it in its message, and a stale stage is the worst a
 * missed store can do.  LOCKBENCH_TEST_STALL=STAGE (tests only) stops the
 * main thread for good when it enters that stage, so tests can check the
 * watchdog; LOCKBENCH_TEST_SLACK=SECONDS (tests only) replaces the program's
 * slack, so that such a check need not wait the slack a real run gets.
 */
#ifndef LIBLOCK_BENCH_WATCHDOG_H
#define LIBLOCK_BENCH_WATCHDOG_H

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static const char *_Atomic bench_stage = "start";

static struct {
    const char *prog;
    double secs;
    long threads;
    int json;
    char label[512], algo[256]; /* quoted JSON strings */
    char algo_raw[128];
} bench_wd;

static void bench_set_stage(const char *s)
{
    atomic_store_explicit(&bench_stage, s, memory_order_relaxed);
    const char *t = getenv("LOCKBENCH_TEST_STALL");
    if (t && strcmp(t, s) == 0)
        for (;;)
            pause();
}

/* The slack added to the run's own bound: dflt, or LOCKBENCH_TEST_SLACK. */
static double bench_watchdog_slack(double dflt)
{
    const char *t = getenv("LOCKBENCH_TEST_SLACK");
    char *end;
    double v = t ? strtod(t, &end) : -1;
    return t && end != t && *end == '\0' && v >= 0 ? v : dflt;
}

/* Quotes and escapes s as a JSON string into out; too long -> truncated. */
static void bench_json_quote(char *out, size_t size, const char *s)
{
    FILE *f = fmemopen(out, size, "w");
    if (!f) {
        snprintf(out, size, "\"\"");
        return;
    }
    setvbuf(f, NULL, _IONBF, 0);
    json_string(f, s);
    fclose(f);
    out[size - 1] = '\0';
}

static void *bench_watchdog_main(void *unused)
{
    (void)unused;
    double secs = bench_wd.secs;
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)secs;
    until.tv_nsec += (long)((secs - (double)(time_t)secs) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) != 0)
        ;
    const char *st = atomic_load_explicit(&bench_stage, memory_order_relaxed);
    char buf[2048];
    int n = snprintf(buf, sizeof buf, "%s: %s, %ld threads: the program did not finish within %.1f s; stuck in stage '%s'\n",
                     bench_wd.prog, bench_wd.algo_raw, bench_wd.threads, secs, st);
    if (n > 0)
        (void)!write(2, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    if (bench_wd.json) {
        n = snprintf(buf, sizeof buf,
                     "{\"benchmark\": \"%s\", \"label\": %s, \"algorithm\": %s, \"threads\": %ld, "
                     "\"status\": \"timeout\", \"check\": \"skipped\", \"stage\": \"%s\", \"stuck\": 1, "
                     "\"error\": \"program not finished after %.1f s, in stage %s\"}\n",
                     bench_wd.prog, bench_wd.label, bench_wd.algo, bench_wd.threads, st, secs, st);
        if (n > 0)
            (void)!write(1, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    }
    _exit(3);
    return NULL;
}

/* Bound the program to secs from now.  prog: the program's name (a plain
 * word, written into the record as is); label, algo: free text, quoted
 * here; json: also write the timeout record on stdout. */
static void bench_watchdog_start(const char *prog, double secs, const char *label, const char *algo, long threads,
                                 int json)
{
    bench_wd.prog = prog;
    bench_wd.secs = secs;
    bench_wd.threads = threads;
    bench_wd.json = json;
    bench_json_quote(bench_wd.label, sizeof bench_wd.label, label ? label : "");
    bench_json_quote(bench_wd.algo, sizeof bench_wd.algo, algo ? algo : "");
    snprintf(bench_wd.algo_raw, sizeof bench_wd.algo_raw, "%s", algo ? algo : "");
    pthread_t th;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &a, bench_watchdog_main, NULL) != 0)
        fprintf(stderr, "%s: no watchdog thread: set-up and tear-down are not bounded\n", prog);
    pthread_attr_destroy(&a);
}

#endif
