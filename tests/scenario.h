/*
 * scenario.h - algorithm x scenario matrices for tests/test_*.c.
 *
 * A scenario test runs every (algorithm, scenario) pair in its own child
 * process (fork) with a time bound, so a deadlock or a convoy FAILS that
 * pair, names it, and the run goes on with the next one.  The driver (the
 * parent) never takes a lock itself: it only asks the catalogue for names
 * and properties, so algorithms added to src/locks/ are covered at once.
 *
 * Per pair, one line:  "ok   mcs x hoh-pthread (0.21 s)"  or
 *                      "FAIL cc-synch x hoh-pthread: hang (killed after 10 s)"
 * then a matrix (rows: algorithms, columns: scenarios; ok / FAIL / HANG /
 * SIGn / - for not applicable) and "N checks, N failed".
 *
 * Selection: algorithm names as arguments (or LIBLOCK_TEST_ALGOS), as
 * th_selected; scenarios with --scenario=a,b (or LIBLOCK_TEST_SCENARIOS).
 * Bound per pair: the test's default, or LIBLOCK_TEST_TIMEOUT seconds.
 * The parent arms no watchdog of its own (tests/run.sh bounds the whole
 * program); each child arms one at the pair's bound, and the parent kills
 * a child that outlives it by 5 s (th_wait_child).
 */
#ifndef LIBLOCK_TEST_SCENARIO_H
#define LIBLOCK_TEST_SCENARIO_H

#include "harness.h"

#include <stdatomic.h>

#define SC_MAX_ALGOS 64
#define SC_MAX_SCENS 24

enum { SC_NA = 0, SC_OK, SC_FAIL, SC_HANG, SC_SIG };

static struct {
    const char *algos[SC_MAX_ALGOS];
    int nalgos;
    const char *scens[SC_MAX_SCENS];
    int nscens;
    unsigned char res[SC_MAX_ALGOS][SC_MAX_SCENS];
    unsigned char sig[SC_MAX_ALGOS][SC_MAX_SCENS];
    int argc;
    char **argv;
    int runs, bad;
} sc;

static inline void sc_setup(int argc, char **argv)
{
    sc.argc = argc;
    sc.argv = argv;
    setvbuf(stdout, NULL, _IOLBF, 0);
}

/* --scenario=a,b or LIBLOCK_TEST_SCENARIOS="a b"; none = every scenario. */
static inline int sc_scenario_selected(const char *scen)
{
    const char *list = NULL;
    for (int i = 1; i < sc.argc; i++)
        if (strncmp(sc.argv[i], "--scenario=", 11) == 0)
            list = sc.argv[i] + 11;
    if (!list)
        list = getenv("LIBLOCK_TEST_SCENARIOS");
    if (!list || !*list)
        return 1;
    return th_list_has(list, scen);
}

static inline int sc_algo_selected(const char *algo) { return th_selected(sc.argc, sc.argv, algo); }

static inline unsigned sc_bound(unsigned dflt)
{
    const char *s = getenv("LIBLOCK_TEST_TIMEOUT");
    if (s && atoi(s) > 0)
        return (unsigned)atoi(s);
    return dflt;
}

static inline int sc_index(const char **arr, int *n, int max, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (strcmp(arr[i], name) == 0)
            return i;
    if (*n >= max)
        return -1;
    arr[*n] = name;
    return (*n)++;
}

/* The catalogue's properties of `algo` (0 if unknown). */
static inline unsigned sc_props(const char *algo)
{
    liblock_algorithm_info_t in;
    return liblock_algorithm_info(algo, &in) == 0 ? in.properties : 0;
}

/* Set by a body whose own child process had to be killed at its bound:
 * the pair is then reported as HANG rather than FAIL. */
static int sc_nested_hang;

/* th_wait_child for a body's own child process, noting a hang. */
static inline int sc_wait_nested(pid_t pid, unsigned seconds, const char *what)
{
    int rc = th_wait_child(pid, seconds, what);
    if (rc == -1)
        sc_nested_hang = 1;
    return rc;
}

static char sc_alarm_msg[256];
static size_t sc_alarm_len;

static void sc_on_alarm(int sig)
{
    (void)sig;
    ssize_t r = write(2, sc_alarm_msg, sc_alarm_len);
    (void)r;
    _exit(3);
}

/* Mark (algo, scen) as not applicable, so the matrix shows "-". */
static inline void sc_not_applicable(const char *algo, const char *scen)
{
    sc_index(sc.algos, &sc.nalgos, SC_MAX_ALGOS, algo);
    sc_index(sc.scens, &sc.nscens, SC_MAX_SCENS, scen);
}

/* Run body(algo, arg) in a child bounded by `bound` seconds; record and
 * print the outcome.  The body reports failures with CHECK; the child exits
 * 1 if any failed.  Returns 1 if the pair passed. */
static inline int sc_run(const char *algo, const char *scen, unsigned bound, void (*body)(const char *algo, void *arg),
                         void *arg)
{
    int ai = sc_index(sc.algos, &sc.nalgos, SC_MAX_ALGOS, algo);
    int si = sc_index(sc.scens, &sc.nscens, SC_MAX_SCENS, scen);
    fflush(stdout);
    fflush(stderr);
    uint64_t t0 = th_now_ns();
    pid_t pid = fork();
    if (pid < 0) {
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        return 0;
    }
    if (pid == 0) {
        static char ctx[160];
        snprintf(ctx, sizeof ctx, "%s x %s", algo, scen);
        th_context = ctx;
        th_failures = 0;
        int n = snprintf(sc_alarm_msg, sizeof sc_alarm_msg,
                         "FAIL %s x %s: watchdog expired after %u s (deadlock or convoy)\n", algo, scen, bound);
        sc_alarm_len = n > 0 && (size_t)n < sizeof sc_alarm_msg ? (size_t)n : 0;
        signal(SIGALRM, sc_on_alarm);
        alarm(bound);
        body(algo, arg);
        fflush(stdout);
        fflush(stderr);
        _exit(sc_nested_hang ? 3 : th_failures ? 1 : 0); /* _exit: no destructors, the verdict is in */
    }
    char what[200];
    snprintf(what, sizeof what, "%s x %s", algo, scen);
    int rc = th_wait_child(pid, bound + 5, what);
    double secs = (double)(th_now_ns() - t0) / 1e9;
    int res = rc == 0 ? SC_OK : rc == 1 ? SC_FAIL : (rc == 3 || rc == -1) ? SC_HANG : rc >= 128 ? SC_SIG : SC_FAIL;
    if (ai >= 0 && si >= 0) {
        sc.res[ai][si] = (unsigned char)res;
        sc.sig[ai][si] = (unsigned char)(rc >= 128 ? rc - 128 : 0);
    }
    sc.runs++;
    th_checks++;
    if (res == SC_OK) {
        printf("ok   %s (%.2f s)\n", what, secs);
        return 1;
    }
    th_failures++;
    sc.bad++;
    if (res == SC_HANG)
        printf("FAIL %s: hang (bound %u s)\n", what, bound);
    else if (res == SC_SIG)
        printf("FAIL %s: killed by signal %d (%s) after %.2f s\n", what, rc - 128, strsignal(rc - 128), secs);
    else
        printf("FAIL %s: exit status %d after %.2f s\n", what, rc, secs);
    return 0;
}

static inline int sc_report(const char *prog)
{
    printf("\n%-16s", "");
    for (int s = 0; s < sc.nscens; s++)
        printf(" %s", sc.scens[s]);
    printf("\n");
    for (int a = 0; a < sc.nalgos; a++) {
        printf("%-16s", sc.algos[a]);
        for (int s = 0; s < sc.nscens; s++) {
            char cell[16];
            switch (sc.res[a][s]) {
            case SC_OK: snprintf(cell, sizeof cell, "ok"); break;
            case SC_FAIL: snprintf(cell, sizeof cell, "FAIL"); break;
            case SC_HANG: snprintf(cell, sizeof cell, "HANG"); break;
            case SC_SIG: snprintf(cell, sizeof cell, "SIG%d", sc.sig[a][s]); break;
            default: snprintf(cell, sizeof cell, "-"); break;
            }
            printf(" %*s", (int)strlen(sc.scens[s]), cell);
        }
        printf("\n");
    }
    printf("%d pairs run, %d failed\n", sc.runs, sc.bad);
    return th_report(prog);
}

/* ---- helpers for scenario bodies ------------------------------------------ */

/* A waiting policy of `algo` under which more threads than CPUs make
 * progress today (spin-then-park, else park, else yield, else the default),
 * so that a scenario about semantics is not also a test of oversubscription
 * (tests/test_oversub.c is).  LIBLOCK_TEST_WAIT=default uses the default
 * policy instead, LIBLOCK_TEST_WAIT=NAME that policy where the algorithm
 * supports it (the preference above where it does not). */
static inline int sc_progress_policy(const char *algo)
{
    liblock_algorithm_info_t in;
    if (liblock_algorithm_info(algo, &in))
        return LIBLOCK_WAIT_DEFAULT;
    const char *env = getenv("LIBLOCK_TEST_WAIT");
    int want;
    if (env && *env && liblock_wait_parse(env, &want) == 0 &&
        (want == LIBLOCK_WAIT_DEFAULT || (in.policies & (1u << want))))
        return want; /* else (not supported): the preference below */
    static const int pref[] = {LIBLOCK_WAIT_SPIN_THEN_PARK, LIBLOCK_WAIT_PARK, LIBLOCK_WAIT_YIELD};
    for (size_t i = 0; i < sizeof pref / sizeof *pref; i++)
        if (in.policies & (1u << pref[i]))
            return pref[i];
    return LIBLOCK_WAIT_DEFAULT;
}

/* liblock_init with sc_progress_policy. */
static inline int sc_init_progress(liblock_t *l, const char *algo)
{
    liblock_attr_t at;
    liblock_attr_init(&at);
    liblock_attr_setwait(&at, sc_progress_policy(algo));
    int e = liblock_init(l, algo, &at);
    liblock_attr_destroy(&at);
    return e;
}

/* Data protected by one lock: a plain counter and an "in critical section"
 * flag; an overlap of two holders shows as a violation or a lost update. */
struct sc_guard {
    volatile int in;
    volatile long count;
    volatile long violations;
};

static inline void sc_enter(struct sc_guard *g)
{
    if (g->in)
        g->violations++;
    g->in = 1;
    long c = g->count;
    for (volatile int i = 0; i < 8; i++)
        ;
    g->count = c + 1;
}

static inline void sc_leave(struct sc_guard *g) { g->in = 0; }

/* A start line: threads wait until all have arrived, so they race. */
struct sc_gate {
    atomic_int arrived;
    int n;
};

static inline void sc_gate_wait(struct sc_gate *g)
{
    atomic_fetch_add(&g->arrived, 1);
    while (atomic_load(&g->arrived) < g->n)
        sched_yield();
}

/* A little work outside any lock, so other threads' requests queue up. */
static inline void sc_pause(unsigned n)
{
    for (volatile unsigned i = 0; i < n; i++)
        ;
}

/* Busy work outside any lock for about `ns` nanoseconds of wall time
 * (program work between critical sections: it makes a thread's run span
 * several scheduler slices, so threads really overlap). */
static inline void sc_work_ns(unsigned ns)
{
    uint64_t end = th_now_ns() + ns;
    while (th_now_ns() < end)
        sc_pause(20);
}

/* liblock_init with default attributes, or LIBLOCK_TEST_WAIT's policy when
 * that is set (and supported). */
static inline int sc_init_default(liblock_t *l, const char *algo)
{
    if (!getenv("LIBLOCK_TEST_WAIT"))
        return liblock_init(l, algo, NULL);
    return sc_init_progress(l, algo);
}

/* A thread that holds a lock calls this so that another thread's request
 * is queued behind it before it releases: wait (at most max_us) until
 * *pending is non-zero (the other threads count up just before they call
 * execute/lock and down after), then 2 us more for the request to be
 * published. */
static inline void sc_await_pending(atomic_long *pending, unsigned max_us)
{
    uint64_t end = th_now_ns() + (uint64_t)max_us * 1000u;
    while (atomic_load_explicit(pending, memory_order_relaxed) == 0 && th_now_ns() < end)
        sc_pause(50);
    uint64_t t = th_now_ns() + 2000;
    while (th_now_ns() < t)
        sc_pause(20);
}

/* Iterations: `n`, a tenth of it under LIBLOCK_TEST_SCALE=small/tsan,
 * or LIBLOCK_TEST_ITERS. */
static inline long sc_iters(long n)
{
    const char *s = getenv("LIBLOCK_TEST_ITERS");
    if (s && atol(s) > 0)
        return atol(s);
    return th_scale_small() ? (n / 10 > 0 ? n / 10 : 1) : n;
}

#endif
