/*
 * lazy_driver.h - what the test_lazy_*.c programs share.  Together they
 * test lazy engagement in the interposer (src/shim/lazy.c,
 * docs/interpose.md "Lazy engagement"), one topic a program: a NORMAL,
 * DEFAULT or ADAPTIVE mutex, whatever its algorithm, starts lazy (a
 * one-word compare-and-swap lock in the program's own pthread_mutex_t, no
 * algorithm state, no thread) and engages its algorithm, for the rest of
 * its life, at the first pthread_mutex_lock that finds it held, its first
 * condition wait, or its first liblock_execute_mutex.  A failed trylock or
 * timedlock does not engage it; LIBLOCK_LAZY=0 engages every such mutex at
 * its first use; RECURSIVE, ERRORCHECK, process-shared and robust mutexes
 * never use lazy mode.  The state is read through the
 * interposer's liblock_interpose_debug_engaged(m): 1 engaged, 0 lazy, -1 no
 * lazy mode for m.
 *
 * Run without arguments (as tests/run.sh does) such a program is a driver
 * (lz_main): it runs its child once on glibc alone (no LD_PRELOAD: the
 * semantic expectations of the sections are glibc's, checked against glibc
 * itself; the engagement checks are skipped there), then, for every
 * algorithm of the registry, twice under
 * LD_PRELOAD=<build>/lib/liblock-interpose.so (or LIBLOCK_TEST_INTERPOSER)
 * with LIBLOCK_LOCK=<name> and LIBLOCK_STRICT=1: with LIBLOCK_LAZY unset
 * and with LIBLOCK_LAZY=0; and once with a mixed configuration
 * (LIBLOCK_CONFIG: mcs by default, rcl for the static mutex lz_static, a
 * public symbol of test_lazy_engage; in the other programs the rule names
 * no mutex, and the configuration is mcs with every hold counted, as a
 * mixed one counts them); then under the profiler (liblock-profile.so
 * beside the interposer) on mcs and rcl, where no mutex is ever lazy (-1
 * throughout).
 * Each algorithm runs under its default waiting policy (one that parks
 * unless the default is pure spin: test_lazy_stress runs 8 threads, more
 * than the cores).  Names on the command line restrict the algorithms
 * ("mixed": the mixed configuration); LIBLOCK_LAZY_SECTIONS ("stress fork")
 * restricts the child's sections.
 *
 * The child runs the program's sections (struct lz_section), in their
 * order: exact results, no timing assertion.  In them CHECK_ENG
 * checks the debug function's value for a mutex against w_lazy (before an
 * engagement) or w_eng (after one): 0 and 1 in lazy mode, 1 and 1 under
 * LIBLOCK_LAZY=0, -1 and -1 under the profiler; tracked says that holds
 * are counted for liblock_interpose_debug_held (a delegating algorithm, or
 * the mixed configuration), delegating that the mutexes of mk() are a
 * delegating algorithm's.  The helper threads: holder (locks, waits for
 * `go`, unlocks or not, or exits holding), contender (announces, blocks in
 * lock, records) and in_thread (one operation in a new thread), and
 * wait_blocked, which waits until an announced thread really waits.
 */
#ifndef LIBLOCK_TEST_LAZY_DRIVER_H
#define LIBLOCK_TEST_LAZY_DRIVER_H

#include "harness.h"
#include "interpose_policy.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>

static inline int scale(int n) { return th_scale_small() ? (n / 10 > 0 ? n / 10 : 1) : n; }

/* ---------------------------------------------------------------- child state */
static long (*eng_fn)(pthread_mutex_t *);
static long (*held_fn)(void);
typedef void *(*exec_fn_t)(pthread_mutex_t *, void *(*)(void *), void *);
static exec_fn_t exec_fn;
static const char *algo = "glibc"; /* LIBLOCK_LOCK, "mixed" or "glibc" */
static int interposed;             /* under the interposer (else glibc alone) */
static int lazy_mode;              /* NORMAL mutexes start lazy here */
static int tracked;                /* holds counted for liblock_interpose_debug_held */
static int delegating;             /* the mutexes of mk() are a delegating algorithm's (execute engages) */
static long w_lazy, w_eng;         /* engaged() expected before / after an engagement */
static const char *volatile section = "start";
static const char *lz_prog = ""; /* the program's name, for its reports (lz_main) */
/* A line a section leaves for the child's report (the stress: how many of
 * its mutexes engaged); empty: none. */
static char lz_note[96];

/* One section of a program's child: its name (for LIBLOCK_LAZY_SECTIONS
 * and the watchdog's message) and its checks. */
struct lz_section {
    const char *name;
    void (*run)(void);
};

static inline void on_alarm(int sig)
{
    (void)sig;
    const char *parts[] = {"FAIL: ", lz_prog, " watchdog expired (deadlock?) in section ", section, " under ", algo,
                           "\n"};
    for (unsigned i = 0; i < sizeof parts / sizeof *parts; i++) {
        ssize_t r = write(2, parts[i], strlen(parts[i]));
        (void)r;
    }
    _exit(3);
}

static inline long eng(pthread_mutex_t *m) { return eng_fn ? eng_fn(m) : -2; }
static inline long held(void) { return held_fn ? held_fn() : 0; }

/* engaged(m) as expected; skipped on glibc alone (no debug function) */
#define CHECK_ENG(m, want)                                                                  \
    do {                                                                                    \
        if (eng_fn)                                                                         \
            CHECK_EQ(eng_fn(m), (want));                                                    \
    } while (0)

static inline void mk(pthread_mutex_t *m, int type)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (type >= 0)
        pthread_mutexattr_settype(&a, type);
    CHECK_EQ(pthread_mutex_init(m, type >= 0 ? &a : NULL), 0);
    pthread_mutexattr_destroy(&a);
}

static inline void wait_flag(atomic_int *f, int v)
{
    while (atomic_load(f) != v)
        usleep(100);
}

/* A thread (tid) has announced that it is about to block in lock(m) (or in
 * an execute on m) while m is held: wait, bounded, until it really waits.
 * Where m engages (lazy mode), until engaged(m) is 1, a check (the lock
 * call that finds m held engages it); elsewhere until the thread sleeps in
 * the kernel, not checked (it only makes the wait likely to have begun). */
static inline void wait_blocked(pthread_mutex_t *m, pid_t tid)
{
    uint64_t end = th_now_ns() + 10ull * 1000000000ull;
    if (eng_fn && w_eng == 1 && eng_fn(m) == 0) { /* lazy: until it engages (other values: checked by the caller) */
        while (eng_fn(m) == 0 && th_now_ns() < end)
            usleep(200);
        CHECK(eng_fn(m) == 1, "a thread blocked in lock did not engage the mutex in 10 s (engaged %ld)", eng_fn(m));
    }
    end = th_now_ns() + 2ull * 1000000000ull;
    while (th_task_sleeping(tid) == 0 && th_now_ns() < end)
        usleep(200);
}

/* ---- helper threads */
/* Locks m, says so, waits for `go`, then unlocks it (unless keep) and ends;
 * with exit_holding it ends at once holding m. */
struct holder {
    pthread_mutex_t *m;
    int keep, exit_holding;
    atomic_int locked, go;
    int lock_r, unlock_r;
    long held_locked, held_after, eng_locked;
};

static inline void *holder_main(void *arg)
{
    struct holder *h = arg;
    h->lock_r = pthread_mutex_lock(h->m);
    h->held_locked = held();
    h->eng_locked = eng(h->m);
    atomic_store(&h->locked, 1);
    if (h->exit_holding)
        return NULL;
    wait_flag(&h->go, 1);
    if (!h->keep) {
        h->unlock_r = pthread_mutex_unlock(h->m);
        h->held_after = held();
    }
    return NULL;
}

static inline void holder_start(struct holder *h, pthread_t *t, pthread_mutex_t *m, int keep, int exit_holding)
{
    memset(h, 0, sizeof *h);
    h->m = m;
    h->keep = keep;
    h->exit_holding = exit_holding;
    CHECK_EQ(pthread_create(t, NULL, holder_main, h), 0);
    wait_flag(&h->locked, 1);
    CHECK_EQ(h->lock_r, 0);
}

/* Announces, locks m (blocking), records, unlocks. */
struct contender {
    pthread_mutex_t *m;
    atomic_int tid, announced, got;
    int lock_r, unlock_r;
    long eng_after, held_in, held_out;
};

static inline void *contender_main(void *arg)
{
    struct contender *c = arg;
    atomic_store(&c->tid, (int)gettid());
    atomic_store(&c->announced, 1);
    c->lock_r = pthread_mutex_lock(c->m);
    atomic_store(&c->got, 1);
    c->eng_after = eng(c->m);
    c->held_in = held();
    c->unlock_r = pthread_mutex_unlock(c->m);
    c->held_out = held();
    return NULL;
}

static inline void contender_start(struct contender *c, pthread_t *t, pthread_mutex_t *m)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    CHECK_EQ(pthread_create(t, NULL, contender_main, c), 0);
    wait_flag(&c->announced, 1);
    wait_blocked(m, atomic_load(&c->tid));
    CHECK_EQ(atomic_load(&c->got), 0); /* m is held: it cannot have returned */
}

static inline void contender_join(struct contender *c, pthread_t t)
{
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(c->lock_r, 0);
    CHECK_EQ(c->unlock_r, 0);
    if (eng_fn)
        CHECK_EQ(c->eng_after, w_eng);
    if (tracked) {
        CHECK(c->held_in >= 1, "contender's held count while holding: %ld", c->held_in);
        CHECK_EQ(c->held_out, c->held_in - 1);
    }
}

enum { OP_TRYLOCK, OP_UNLOCK, OP_LOCK_EXIT };
struct op {
    pthread_mutex_t *m;
    int op, result;
};

static inline void *op_main(void *arg)
{
    struct op *o = arg;
    switch (o->op) {
    case OP_TRYLOCK:
        o->result = pthread_mutex_trylock(o->m);
        if (o->result == 0)
            pthread_mutex_unlock(o->m);
        break;
    case OP_UNLOCK:
        o->result = pthread_mutex_unlock(o->m);
        break;
    case OP_LOCK_EXIT:
        o->result = pthread_mutex_lock(o->m);
        break;
    }
    return NULL;
}

/* op on m in a new thread: its result */
static inline int in_thread(pthread_mutex_t *m, int op)
{
    struct op o = {m, op, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, op_main, &o))
        return -2;
    pthread_join(t, NULL);
    return o.result;
}

/* ---------------------------------------------------------------- child main */
static inline int want_section(const char *name)
{
    const char *only = getenv("LIBLOCK_LAZY_SECTIONS");
    if (only && *only && !th_list_has(only, name))
        return 0;
    section = name;
    return 1;
}

static inline int child(const char *mode, const struct lz_section *sections)
{
    signal(SIGALRM, on_alarm);
    const char *to = getenv("LIBLOCK_TEST_TIMEOUT");
    alarm(to && atoi(to) > 0 ? (unsigned)atoi(to) : 30);
    uint64_t t0 = th_now_ns();
    interposed = strcmp(mode, "glibc") != 0;
    int mixed = strcmp(mode, "mixed") == 0;
    int profiler = strcmp(mode, "profile") == 0; /* liblock-profile.so: never lazy */
    if (interposed)
        algo = mixed ? "mixed" : getenv("LIBLOCK_LOCK");
    if (!algo)
        algo = "?";
    const char *lz = getenv("LIBLOCK_LAZY");
    int lazy_off = lz && strcmp(lz, "0") == 0;
    th_context = "set-up";
    if (interposed) {
        eng_fn = (long (*)(pthread_mutex_t *))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_engaged");
        CHECK(eng_fn != NULL, "liblock_interpose_debug_engaged not exported by the %s", profiler ? "profiler" : "interposer");
        held_fn = (long (*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_held");
        CHECK(held_fn != NULL, "liblock_interpose_debug_held not exported");
        /* The interposer's liblock_execute_mutex: this program links
         * liblock.a, whose weak glibc version it binds at link time. */
        exec_fn = (exec_fn_t)dlsym(RTLD_NEXT, "liblock_execute_mutex");
        CHECK(exec_fn != NULL, "liblock_execute_mutex not exported by the interposer");
        Dl_info de, dx;
        if (exec_fn && held_fn && dladdr((void *)exec_fn, &dx) && dladdr((void *)held_fn, &de))
            CHECK(strcmp(dx.dli_fname, de.dli_fname) == 0, "liblock_execute_mutex is %s's, not the interposer's (%s)",
                  dx.dli_fname, de.dli_fname);
        if (!exec_fn)
            exec_fn = liblock_execute_mutex;
        liblock_algorithm_info_t in;
        delegating = !mixed && liblock_algorithm_info(algo, &in) == 0 && (in.properties & LIBLOCK_PROP_DELEGATES);
        tracked = mixed || delegating;
        if (!held_fn || profiler)
            tracked = 0;
        lazy_mode = !lazy_off && !profiler;
        w_eng = profiler ? -1 : 1;
        w_lazy = profiler ? -1 : lazy_off ? 1 : 0;
    } else {
        exec_fn = liblock_execute_mutex; /* glibc's lock, cs, unlock */
    }
    for (const struct lz_section *sec = sections; sec->name; sec++)
        if (want_section(sec->name))
            sec->run();
    section = "end";
    char name[128];
    snprintf(name, sizeof name, "  %-15s %-14s", algo,
             !interposed ? "(glibc alone)" : profiler ? "(profiler)" : lazy_off ? "LIBLOCK_LAZY=0" : "lazy");
    printf("%s %s: %d checks, %d failed%s%s (%.1f s)\n", name, th_failures ? "FAILED" : "ok", th_checks, th_failures,
           lz_note[0] ? "; " : "", lz_note, (th_now_ns() - t0) / 1e9);
    fflush(stdout);
    return th_failures ? 1 : 0;
}

/* ---------------------------------------------------------------- driver */
/* The algorithm's default policy, unless it is pure spin (the stress's 8
 * threads on fewer cores would crawl): then the one the interposer's mutex
 * tests pick (ip_policy). */
static inline const char *pick_policy(const char *name)
{
    liblock_algorithm_info_t in;
    if (liblock_algorithm_info(name, &in) || in.default_policy != LIBLOCK_WAIT_SPIN)
        return NULL;
    return ip_policy(name);
}

static char prof_out[128];

/* Remove directory dir and the files in it (the profiler's reports). */
static inline void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        char path[512];
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static inline int run_child(const char *prog, const char *lib, const char *mode, const char *algo_name,
                            const char *config, int lazy_off)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        th_unset_interposer_env();
        unsetenv("LIBLOCK_CONFIG");
        unsetenv("LIBLOCK_LAZY");
        if (lib) {
            setenv("LD_PRELOAD", lib, 1);
            setenv("LIBLOCK_STRICT", "1", 1);
            if (algo_name)
                setenv("LIBLOCK_LOCK", algo_name, 1);
            if (config)
                setenv("LIBLOCK_CONFIG", config, 1);
            const char *policy = algo_name ? pick_policy(algo_name) : NULL;
            if (policy)
                setenv("LIBLOCK_WAIT", policy, 1);
            if (lazy_off)
                setenv("LIBLOCK_LAZY", "0", 1);
            if (strcmp(mode, "profile") == 0)
                setenv("LIBLOCK_PROFILE_OUT", prof_out, 1);
        } else {
            unsetenv("LD_PRELOAD");
        }
        setenv("LIBLOCK_LAZY_CHILD", mode, 1);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    char what[256];
    snprintf(what, sizeof what, "%s under %s%s", prog, algo_name ? algo_name : mode, lazy_off ? " LIBLOCK_LAZY=0" : "");
    return th_wait_child(pid, 45, what);
}

/* ------------------------------------------------------------------ main */
/* The main of a program built on this driver: name its name, sections its
 * sections (ended by {NULL, NULL}). */
static inline int lz_main(int argc, char **argv, const char *name, const struct lz_section *sections)
{
    lz_prog = name;
    const char *mode = getenv("LIBLOCK_LAZY_CHILD");
    if (mode)
        return child(mode, sections);
    th_watchdog(600);
    uint64_t t0 = th_now_ns();
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report(lz_prog);
    int rc = run_child(argv[0], NULL, "glibc", NULL, NULL, 0);
    CHECK(rc == 0, "on glibc alone: exit %d (the test's expectations are not glibc's)", rc);
    int n = 0;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        n++;
        rc = run_child(argv[0], real, "algo", *a, NULL, 0);
        CHECK(rc == 0, "under %s: exit %d", *a, rc);
        rc = run_child(argv[0], real, "algo", *a, NULL, 1);
        CHECK(rc == 0, "under %s with LIBLOCK_LAZY=0: exit %d", *a, rc);
    }
    CHECK(n > 0 || argc > 1, "no algorithm in the registry");
    if (argc < 2 || th_selected(argc, argv, "mixed")) {
        char cfgpath[] = "/tmp/test_lazy.XXXXXX";
        int fd = mkstemp(cfgpath);
        CHECK(fd >= 0, "mkstemp");
        if (fd >= 0) {
            static const char text[] = "default mcs\nsite lz_static rcl\n";
            CHECK_EQ(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
            close(fd);
            rc = run_child(argv[0], real, "mixed", NULL, cfgpath, 0);
            CHECK(rc == 0, "under the mixed configuration (mcs, rcl for lz_static): exit %d", rc);
            unlink(cfgpath);
        }
    }
    /* the profiler, beside the interposer: never lazy */
    char prof[4200];
    snprintf(prof, sizeof prof, "%s", real);
    char *slash = strrchr(prof, '/');
    snprintf(slash ? slash + 1 : prof, sizeof prof - (size_t)(slash ? slash + 1 - prof : 0), "liblock-profile.so");
    char prof_dir[] = "/tmp/test_lazy.XXXXXX"; /* the reports (a forked child writes one of its own) */
    CHECK(mkdtemp(prof_dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(prof_out, sizeof prof_out, "%s/profile.json", prof_dir);
    static const char *const prof_algos[] = {"mcs", "rcl"};
    for (size_t i = 0; i < sizeof prof_algos / sizeof *prof_algos; i++) {
        if (!th_selected(argc, argv, prof_algos[i]))
            continue;
        if (access(prof, R_OK) != 0) {
            th_skip("no profiler at %s", prof);
            break;
        }
        rc = run_child(argv[0], prof, "profile", prof_algos[i], NULL, 0);
        CHECK(rc == 0, "under the profiler on %s: exit %d", prof_algos[i], rc);
    }
    remove_dir(prof_dir);
    free(real);
    printf("  total %.1f s\n", (th_now_ns() - t0) / 1e9);
    return th_report(lz_prog);
}

#endif
