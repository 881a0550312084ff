/*
 * interpose_driver.h - how the test_interpose*.c programs run their checks
 * under the LD_PRELOAD interposer.  Run without arguments (as tests/run.sh
 * does), such a program is a driver: it re-runs itself in a child per
 * configuration, with LD_PRELOAD=<build>/lib/liblock-interpose.so (or the
 * one LIBLOCK_TEST_INTERPOSER names), each child bounded by a kill after
 * 60 s; names on the command line restrict the algorithms.  In the child it
 * runs its checks (the program's child function) and reports.  Two sets of
 * configurations:
 *
 *  - IP_EVERY_ALGORITHM (the mutex programs, ip_topics): every algorithm of
 *    the registry with LIBLOCK_LOCK=<name>, LIBLOCK_STRICT=1 and a waiting
 *    policy that makes progress with more threads than cores
 *    (spin-then-park, else park, else yield, else the default); mcs and
 *    ttas also with LIBLOCK_COND_GENERIC=1 (the interposer's own
 *    condition-variable protocol, for algorithms without LIBLOCK_PROP_COND)
 *    and with LIBLOCK_INTERPOSE_API=1 (the API-layer path, for delegating
 *    algorithms), paths no current algorithm takes; posix also under park,
 *    its default (a NORMAL glibc mutex in its state, where spin-then-park
 *    makes it an adaptive one), through the interposer's posix fast path
 *    (src/shim/mutex.c, IP_FAST_GLIBC).  The child has
 *    LIBLOCK_INTERPOSE_TEST_CHILD=1 and first checks that the interposer
 *    is really in use (ip_check_interposed).  IP_EVERY_ALGORITHM_CXX
 *    (test_interpose) also runs test_interpose_cxx in each configuration.
 *    `PROGRAM --topics` prints ip_topics, one a line.
 *
 *  - IP_COND_KINDS (the condition-variable and semaphore programs): once
 *    natively (the checks then run against glibc, which validates them),
 *    then for every algorithm with the `cond` property under every
 *    condition-variable kind the interposer offers: the default FIFO queue
 *    (with LIBLOCK_SEM=fifo), mostly-lifo (with LIBLOCK_SEM=mostly-lifo),
 *    LIBLOCK_COND=glibc and LIBLOCK_COND_GENERIC=1; interposer settings
 *    inherited by the driver are dropped.  The child has
 *    LIBLOCK_CONDSEM_CHILD=1, and LIBLOCK_TEST_SEM=1 natively and in the
 *    first two kinds, which have the interposer's semaphores: the
 *    semaphore checks run there only (elsewhere the semaphores are
 *    glibc's).
 *    LIBLOCK_TEST_CHILD_TIMEOUT shortens the child's watchdog (to show a
 *    check failing against an older interposer, named by
 *    LIBLOCK_TEST_INTERPOSER, without waiting for the default one).
 */
#ifndef LIBLOCK_TEST_INTERPOSE_DRIVER_H
#define LIBLOCK_TEST_INTERPOSE_DRIVER_H

#include "harness.h"
#include "interpose_policy.h"

#include <dlfcn.h>

/* The programs that together are the interposer's mutex test, one topic
 * each (IP_EVERY_ALGORITHM): whatever runs that test in a configuration of
 * its own (test_interpose_sem, tests/test_profile.sh) runs them all, and
 * the Makefile's INTERPOSE_TOPICS (built by `make ubsan-preload`) names
 * them too.  A program with this driver that is missing here fails. */
static const char *const ip_topics[] = {"test_interpose",      "test_interpose_types", "test_interpose_timed",
                                        "test_interpose_cond", "test_interpose_c11",   "test_interpose_fork",
                                        NULL};

enum { IP_EVERY_ALGORITHM, IP_EVERY_ALGORITHM_CXX, IP_COND_KINDS };

/* The program's name, for its reports. */
static const char *ip_prog = "";

static inline int ip_is_topic(const char *name)
{
    for (const char *const *t = ip_topics; *t; t++)
        if (strcmp(*t, name) == 0)
            return 1;
    return 0;
}


/* One child's configuration. */
struct ip_child {
    const char *lib;         /* the interposer; NULL: natively */
    const char *algo;        /* LIBLOCK_LOCK (with lib); NULL: unset */
    const char *policy;      /* LIBLOCK_WAIT (with lib); NULL: unset */
    const char *marker;      /* "NAME=1": what tells the program it is the child */
    const char *const *envs; /* more "NAME=VALUE" entries, NULL-terminated; or NULL */
    int clean;               /* forget inherited LD_PRELOAD and interposer settings first */
};

/* Run prog as a child in configuration c; with lib, LIBLOCK_STRICT=1.
 * Returns its exit status (th_wait_child), or -1. */
static inline int ip_run(const char *prog, const struct ip_child *c)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (c->clean) {
            th_unset_interposer_env();
            unsetenv("LD_PRELOAD");
        }
        if (c->lib) {
            setenv("LD_PRELOAD", c->lib, 1);
            if (c->algo)
                setenv("LIBLOCK_LOCK", c->algo, 1);
            if (c->policy)
                setenv("LIBLOCK_WAIT", c->policy, 1);
            setenv("LIBLOCK_STRICT", "1", 1);
        }
        putenv((char *)c->marker);
        for (const char *const *e = c->envs; e && *e; e++)
            putenv((char *)*e);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    char what[256];
    snprintf(what, sizeof what, "%s under %s", prog, c->algo ? c->algo : c->lib ? "(no lock)" : "glibc");
    return th_wait_child(pid, 60, what);
}

/* ---------------------------------------------------- IP_EVERY_ALGORITHM */
#define IP_CHILD_MARKER "LIBLOCK_INTERPOSE_TEST_CHILD=1"

/* The mutex programs' child under algo, with variant v's environment
 * (0: none). */
static const char *const ip_variant_env[] = {NULL, "LIBLOCK_COND_GENERIC=1", "LIBLOCK_INTERPOSE_API=1"};

static inline int ip_run_variant(const char *prog, const char *lib, const char *algo, const char *policy, int v)
{
    const char *envs[] = {ip_variant_env[v], NULL};
    struct ip_child c = {.lib = lib, .algo = algo, .policy = policy, .marker = IP_CHILD_MARKER, .envs = envs};
    return ip_run(prog, &c);
}

static inline void ip_print_config(const char *algo, const char *policy, const char *variant, int rc, int rcx,
                                   int with_cxx, uint64_t t0)
{
    char res[64];
    if (with_cxx)
        snprintf(res, sizeof res, "C %s, C++ %s", rc == 0 ? "ok" : "FAILED", rcx == 0 ? "ok" : "FAILED");
    else
        snprintf(res, sizeof res, "%s", rc == 0 ? "ok" : "FAILED");
    printf("  %-16s %-15s %s%s%s (%.1f s)\n", algo, policy ? policy : "default", variant ? variant : "",
           variant ? ": " : "", res, (th_now_ns() - t0) / 1e9);
    fflush(stdout);
}

static inline int ip_driver_every_algorithm(int argc, char **argv, int with_cxx)
{
    char cxx[4200];
    th_sibling_path(argv[0], "test_interpose_cxx", cxx, sizeof cxx);
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report(ip_prog);
    CHECK(ip_is_topic(ip_prog), "%s is not in ip_topics (interpose_driver.h): what runs every topic misses it",
          ip_prog);
    int have_cxx = 0;
    if (with_cxx) {
        have_cxx = access(cxx, X_OK) == 0;
        CHECK(have_cxx, "%s missing", cxx);
    }
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        const char *policy = ip_policy(*a);
        uint64_t t0 = th_now_ns();
        int rc = ip_run_variant(argv[0], real, *a, policy, 0);
        CHECK(rc == 0, "C test under %s (%s): exit %d", *a, policy ? policy : "default", rc);
        int rcx = have_cxx ? ip_run_variant(cxx, real, *a, policy, 0) : 0;
        if (with_cxx)
            CHECK(rcx == 0, "C++ test under %s (%s): exit %d", *a, policy ? policy : "default", rcx);
        ip_print_config(*a, policy, NULL, rc, rcx, with_cxx, t0);
    }
    /* Paths no current algorithm takes, forced on a queue lock and a
     * node-less one: the interposer's own condition-variable protocol (for
     * algorithms without LIBLOCK_PROP_COND) and the API-layer path (for
     * delegating algorithms). */
    static const char *const generic[] = {"mcs", "ttas"};
    for (int v = 1; v <= 2; v++)
        for (size_t i = 0; i < 2; i++) {
            if (!th_selected(argc, argv, generic[i]) ||
                liblock_algorithm_info(generic[i], &(liblock_algorithm_info_t){0}))
                continue;
            const char *policy = ip_policy(generic[i]);
            uint64_t t0 = th_now_ns();
            int rc = ip_run_variant(argv[0], real, generic[i], policy, v);
            CHECK(rc == 0, "C test under %s with %s: exit %d", generic[i], ip_variant_env[v], rc);
            int rcx = have_cxx ? ip_run_variant(cxx, real, generic[i], policy, v) : 0;
            if (with_cxx)
                CHECK(rcx == 0, "C++ test under %s with %s: exit %d", generic[i], ip_variant_env[v], rcx);
            ip_print_config(generic[i], policy, ip_variant_env[v], rc, rcx, with_cxx, t0);
        }
    /* posix under its default policy (park: a NORMAL glibc mutex in its
     * state, where spin-then-park above makes it an adaptive one), through
     * the interposer's posix fast path (src/shim/mutex.c, IP_FAST_GLIBC). */
    if (th_selected(argc, argv, "posix")) {
        uint64_t t0 = th_now_ns();
        int rc = ip_run_variant(argv[0], real, "posix", "park", 0);
        CHECK(rc == 0, "C test under posix (park): exit %d", rc);
        int rcx = have_cxx ? ip_run_variant(cxx, real, "posix", "park", 0) : 0;
        if (with_cxx)
            CHECK(rcx == 0, "C++ test under posix (park): exit %d", rcx);
        ip_print_config("posix", "park", NULL, rc, rcx, with_cxx, t0);
    }
    free(real);
    return th_report(ip_prog);
}

/* In the child: the interposer is really in use (liblock_interpose_lock()
 * names the algorithm; a locked static mutex carries the interposer's
 * pointer). */
static inline void ip_check_interposed(void)
{
    const char *want = getenv("LIBLOCK_LOCK");
    const char *(*active)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_lock");
    th_context = "interposed";
    CHECK(active != NULL, "liblock_interpose_lock not found: interposer not preloaded");
    const char *got = active ? active() : NULL;
    CHECK(got && want && strcmp(got, want) == 0, "interposer reports '%s', LIBLOCK_LOCK is '%s'", got ? got : "(none)",
          want ? want : "(unset)");
    pthread_mutex_t probe = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&probe);
    CHECK(probe.__data.__list.__prev != NULL, "a locked static mutex carries no interposer pointer");
    pthread_mutex_unlock(&probe);
}

/* --------------------------------------------------------- IP_COND_KINDS */
struct ip_kind {
    const char *name;
    const char *envs[4];
};

static const struct ip_kind ip_kinds[] = {
    {"fifo", {"LIBLOCK_SEM=fifo", "LIBLOCK_TEST_SEM=1", NULL}},
    {"mostly-lifo", {"LIBLOCK_COND=mostly-lifo", "LIBLOCK_SEM=mostly-lifo", "LIBLOCK_TEST_SEM=1", NULL}},
    {"glibc", {"LIBLOCK_COND=glibc", NULL}},
    {"generic", {"LIBLOCK_COND_GENERIC=1", NULL}},
};

#define IP_CONDSEM_MARKER "LIBLOCK_CONDSEM_CHILD=1"

static inline int ip_driver_cond_kinds(int argc, char **argv)
{
    char *real = th_interposer(argv[0]); /* or LIBLOCK_TEST_INTERPOSER's (to show a failure) */
    if (!real)
        return th_report(ip_prog);
    uint64_t t0 = th_now_ns();
    static const char *const native_env[] = {"LIBLOCK_TEST_SEM=1", NULL};
    struct ip_child native = {.marker = IP_CONDSEM_MARKER, .envs = native_env, .clean = 1};
    int rc = ip_run(argv[0], &native);
    CHECK(rc == 0, "natively (glibc): exit %d", rc);
    printf("  glibc (native): %s (%.1f s)\n", rc == 0 ? "ok" : "FAILED", (th_now_ns() - t0) / 1e9);
    fflush(stdout);
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        liblock_algorithm_info_t in;
        if (!th_selected(argc, argv, *a) || liblock_algorithm_info(*a, &in) || !(in.properties & LIBLOCK_PROP_COND))
            continue;
        for (size_t k = 0; k < sizeof ip_kinds / sizeof *ip_kinds; k++) {
            t0 = th_now_ns();
            struct ip_child c = {.lib = real, .algo = *a, .marker = IP_CONDSEM_MARKER, .envs = ip_kinds[k].envs,
                                 .clean = 1};
            rc = ip_run(argv[0], &c);
            CHECK(rc == 0, "under %s, condition kind %s: exit %d", *a, ip_kinds[k].name, rc);
            printf("  %-15s %-12s %s (%.1f s)\n", *a, ip_kinds[k].name, rc == 0 ? "ok" : "FAILED",
                   (th_now_ns() - t0) / 1e9);
            fflush(stdout);
        }
    }
    free(real);
    return th_report(ip_prog);
}

/* ------------------------------------------------------------------ main */
/* The main of a program built on this driver: name its name, shape one of
 * the enum above, child its checks. */
static inline int ip_main(int argc, char **argv, const char *name, int shape, void (*child)(void))
{
    ip_prog = name;
    char report[256];
    if (shape == IP_COND_KINDS) {
        if (getenv("LIBLOCK_CONDSEM_CHILD")) {
            const char *ct = getenv("LIBLOCK_TEST_CHILD_TIMEOUT"); /* (LIBLOCK_TEST_TIMEOUT would bound the driver too) */
            if (ct && *ct)
                setenv("LIBLOCK_TEST_TIMEOUT", ct, 1);
            th_watchdog(50);
            child();
            snprintf(report, sizeof report, "%s (child, %s)", name,
                     getenv("LIBLOCK_LOCK") ? "under the interposer" : "glibc");
            return th_report(report);
        }
        th_watchdog(900);
        return ip_driver_cond_kinds(argc, argv);
    }
    if (argc == 2 && strcmp(argv[1], "--topics") == 0) {
        for (const char *const *t = ip_topics; *t; t++)
            printf("%s\n", *t);
        return 0;
    }
    if (getenv("LIBLOCK_INTERPOSE_TEST_CHILD")) {
        th_watchdog(40);
        ip_check_interposed();
        child();
        const char *want = getenv("LIBLOCK_LOCK");
        snprintf(report, sizeof report, "%s[%s]", name, want ? want : "?");
        return th_report(report);
    }
    th_watchdog(600);
    return ip_driver_every_algorithm(argc, argv, shape == IP_EVERY_ALGORITHM_CXX);
}

#endif
