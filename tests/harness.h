/*
 * harness.h - tiny test harness shared by tests/test_*.c.
 *
 * Every test program arms a watchdog (LIBLOCK_TEST_TIMEOUT seconds, default
 * given by the program) so a deadlock fails the test with a message instead
 * of hanging CI; tests/run.sh adds an outer `timeout` as a second bound.
 * CHECK records a failure and goes on; the program exits 1 if any failed.
 * No test asserts anything about speed.
 *
 * A check that cannot run here is reported, never passed: th_skip() prints
 * "SKIP: <cause>" for a part that did not run (tests/run.sh lists the test as
 * partly skipped), and a program none of whose checks could run exits with
 * TH_SKIPPED (77), which tests/run.sh counts as skipped, not passed.
 */
#ifndef LIBLOCK_TEST_HARNESS_H
#define LIBLOCK_TEST_HARNESS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>
#include <sys/types.h>
#include <sys/wait.h>
#include "liblock.h"

static int th_failures;
static int th_checks;
static const char *th_context = "";

#define CHECK(cond, ...)                                                                    \
    do {                                                                                    \
        th_checks++;                                                                        \
        if (!(cond)) {                                                                      \
            th_failures++;                                                                  \
            fprintf(stderr, "FAIL %s:%d [%s] %s: ", __FILE__, __LINE__, th_context, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
        }                                                                                   \
    } while (0)

/* a and b are evaluated once (a failing check must not run a trylock twice) */
#define CHECK_EQ(a, b)                                                                      \
    do {                                                                                    \
        long long th_a_ = (long long)(a), th_b_ = (long long)(b);                           \
        CHECK(th_a_ == th_b_, "%s = %lld, expected %s = %lld", #a, th_a_, #b, th_b_);       \
    } while (0)

static void th_on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: test watchdog expired (deadlock or livelock?)\n";
    ssize_t r = write(2, msg, sizeof msg - 1);
    (void)r;
    _exit(3);
}

static inline void th_watchdog(unsigned seconds)
{
    const char *s = getenv("LIBLOCK_TEST_TIMEOUT");
    if (s && atoi(s) > 0)
        seconds = (unsigned)atoi(s);
    signal(SIGALRM, th_on_alarm);
    alarm(seconds);
}

/* "tsan" scale: ThreadSanitizer builds run fewer iterations. */
static inline int th_scale_small(void)
{
    const char *s = getenv("LIBLOCK_TEST_SCALE");
    return s && (strcmp(s, "tsan") == 0 || strcmp(s, "small") == 0);
}

/* A ThreadSanitizer run (tests/run.sh sets LIBLOCK_TEST_SCALE=tsan). */
static inline int th_under_tsan(void)
{
    const char *s = getenv("LIBLOCK_TEST_SCALE");
    return s && strcmp(s, "tsan") == 0;
}

static inline uint64_t th_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Deadlines for the timed calls under test: *t = now + ms on clock clk. */
static inline void ts_after(clockid_t clk, struct timespec *t, long ms)
{
    clock_gettime(clk, t);
    t->tv_sec += ms / 1000;
    t->tv_nsec += (ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}

/* Whether clock clk has reached *t (a timed call must not return before). */
static inline int ts_reached(clockid_t clk, const struct timespec *t)
{
    struct timespec now;
    clock_gettime(clk, &now);
    return now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec >= t->tv_nsec);
}

/* CLOCK_REALTIME now + ns (ns >= 0), for pthread/liblock timed waits. */
static inline struct timespec ts_in_ns(long ns)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ns / 1000000000L;
    t.tv_nsec += ns % 1000000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Join th by deadline_ns (th_now_ns clock): 0 when joined, ETIMEDOUT if the
 * thread is stuck. */
static inline int th_join_by(pthread_t th, uint64_t deadline_ns)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t left = deadline_ns > th_now_ns() ? deadline_ns - th_now_ns() : 0;
    struct timespec ts = {now.tv_sec + (time_t)(left / 1000000000ull), now.tv_nsec + (long)(left % 1000000000ull)};
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return pthread_timedjoin_np(th, NULL, &ts);
}

/* Whether the list of names separated by spaces or commas contains name. */
static inline int th_list_has(const char *list, const char *name)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save, *tok = strtok_r(buf, " ,", &save); tok; tok = strtok_r(NULL, " ,", &save))
        if (strcmp(tok, name) == 0)
            return 1;
    return 0;
}

/* Algorithm filter: argv names (or LIBLOCK_TEST_ALGOS="a b c"); none = all. */
static inline int th_selected(int argc, char **argv, const char *name)
{
    int any = 0;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-')
            continue;
        any = 1;
        if (strcmp(argv[i], name) == 0)
            return 1;
    }
    const char *env = getenv("LIBLOCK_TEST_ALGOS");
    if (!any && env && *env)
        return th_list_has(env, name);
    return !any;
}

/* Wait for child `pid` at most `seconds`, killing it (SIGKILL) if it runs
 * longer: a hang before the child arms its own watchdog still ends.  Returns
 * the exit status, 128 + signal if it died of a signal, or -1 if it had to
 * be killed (a line naming `what` is printed).  After the SIGKILL it waits
 * at most 10 s more for the child to go: a killed process whose threads
 * cannot get a CPU (a SCHED_FIFO thread of another process spinning on its
 * CPU) is not reaped until they run, and the caller must not hang on that. */
static inline int th_wait_child(pid_t pid, unsigned seconds, const char *what)
{
    int st = 0;
    uint64_t deadline = th_now_ns() + (uint64_t)seconds * 1000000000ull;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (th_now_ns() > deadline) {
            kill(pid, SIGKILL);
            fprintf(stderr, "FAIL %s: killed after %u s\n", what, seconds);
            for (int i = 0; i < 500 && waitpid(pid, &st, WNOHANG) != pid; i++)
                usleep(20000);
            return -1;
        }
        usleep(20000);
    }
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return WEXITSTATUS(st);
}

/* Start prog in a child with the environment entries envs ("NAME=VALUE",
 * NULL-terminated; NULL: none) added; stdout is flushed first so that the
 * child does not repeat it.  Returns the child's pid (wait for it with
 * th_wait_child), or -1 if fork failed. */
static inline pid_t th_spawn(const char *prog, const char *const *envs)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (const char *const *e = envs; e && *e; e++)
            putenv((char *)*e);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    return pid;
}

/* The state letter in a /proc .../stat file (after the name, which may
 * hold anything): -1 if it cannot be opened, 0 if it cannot be parsed. */
static inline int th_stat_state(const char *path)
{
    char buf[512];
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? (unsigned char)p[2] : 0;
}

/* Whether thread tid of this process sleeps in the kernel ('S' in
 * /proc/self/task/TID/stat): 1 yes, 0 no, -1 no such thread (it ended). */
static inline int th_task_sleeping(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    int st = th_stat_state(path);
    return st < 0 ? -1 : st == 'S';
}

/* Section selector of a test made of named sections: whether section name
 * runs (no arguments: every one; else those named), printing its name when
 * it does, so that a watchdog failure shows which section hung. */
static inline int th_section(int argc, char **argv, const char *name)
{
    int w = argc < 2;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0)
            w = 1;
    if (w) {
        printf("  %s\n", name);
        fflush(stdout);
    }
    return w;
}

/* The interposer of the build a test program belongs to:
 * BUILD/tests/test_x -> BUILD/lib/liblock-interpose.so, into lib. */
static inline void th_interposer_path(const char *self, char *lib, size_t n)
{
    const char *slash = strrchr(self, '/');
    int len = slash ? (int)(slash - self) : 1;
    snprintf(lib, n, "%.*s/../lib/liblock-interpose.so", len, slash ? self : ".");
}

/* The interposer a test preloads: the one named by LIBLOCK_TEST_INTERPOSER
 * (another build's, to show a test failing there), else the one of the
 * test's own build (th_interposer_path).  Returns its real path (to free),
 * or NULL after a failed check: the build always makes it. */
static inline char *th_interposer(const char *self)
{
    char lib[4200];
    const char *over = getenv("LIBLOCK_TEST_INTERPOSER");
    if (over && *over)
        snprintf(lib, sizeof lib, "%s", over);
    else
        th_interposer_path(self, lib, sizeof lib);
    char *real = realpath(lib, NULL);
    CHECK(real != NULL, "interposer not found at %s (run make)", lib);
    return real;
}

/* In a child about to run a program under the interposer: forget the
 * interposer settings (lock, policy, condition and semaphore kinds) it may
 * have inherited, so that only those the test sets apply. */
static inline void th_unset_interposer_env(void)
{
    static const char *const vars[] = {"LIBLOCK_LOCK",          "LIBLOCK_WAIT",          "LIBLOCK_COND",
                                       "LIBLOCK_SEM",           "LIBLOCK_COND_FIFO_PROB", "LIBLOCK_SEM_FIFO_PROB",
                                       "LIBLOCK_COND_GENERIC",  "LIBLOCK_INTERPOSE_API", NULL};
    for (const char *const *v = vars; *v; v++)
        unsetenv(*v);
}

/* Another program of the test's build: BUILD/tests/test_x -> BUILD/tests/name. */
static inline void th_sibling_path(const char *self, const char *name, char *out, size_t n)
{
    const char *slash = strrchr(self, '/');
    int len = slash ? (int)(slash - self) : 1;
    snprintf(out, n, "%.*s/%s", len, slash ? self : ".", name);
}

#define TH_SKIPPED 77

/* A part of the test did not run; say why (tests/run.sh collects these). */
#define th_skip(...)                                                                        \
    do {                                                                                    \
        printf("SKIP: ");                                                                   \
        printf(__VA_ARGS__);                                                                \
        printf("\n");                                                                       \
        fflush(stdout);                                                                     \
    } while (0)

static inline int th_report(const char *prog)
{
    printf("%s: %d checks, %d failed\n", prog, th_checks, th_failures);
    return th_failures ? 1 : 0;
}

#endif
