/*
 * test_interpose - the LD_PRELOAD interposer under every algorithm.
 *
 * Run without arguments (as tests/run.sh does) it is a driver: for every
 * algorithm in the registry it re-runs itself, and then test_interpose_cxx,
 * with LD_PRELOAD=<build>/lib/liblock-interpose.so LIBLOCK_LOCK=<name> and a
 * waiting policy that makes progress with more threads than cores
 * (spin-then-park, else park, else yield, else the default; posix also
 * under park, its default), each child bounded by a watchdog.  Names on the command line restrict the algorithms.
 *
 * In a child (LIBLOCK_INTERPOSE_TEST_CHILD=1) it checks, with exact results:
 *  - that the interposer is really in use (liblock_interpose_lock() names the
 *    algorithm; a locked static mutex carries the interposer's pointer);
 *  - counters under static and dynamic mutexes of every type (normal,
 *    recursive, errorcheck, adaptive, default, robust, PI, pshared), all
 *    threads starting together so static mutexes race on first use, with a
 *    share of acquisitions through trylock loops;
 *  - POSIX semantics of recursive and errorcheck mutexes, trylock EBUSY;
 *  - timedlock and clocklock: ETIMEDOUT not before the deadline, EINVAL on a
 *    bad timespec when it would block, success when released meanwhile;
 *  - condition variables: a bounded buffer (2 producers, 2 consumers),
 *    timedwait/clockwait timeouts with the mutex held on return, a
 *    CLOCK_MONOTONIC condvar, broadcast, a condvar with a robust mutex;
 *  - C11 mtx_* and cnd_* (which glibc implements without going through
 *    pthread_mutex_*): interposed, exact counts, recursive, timed, bad type,
 *    thrd_* return codes, a condition-variable hand-off;
 *  - fork: the child unlocks what the forking thread held (including a lock
 *    another thread was queued on, and a recursive one held twice), finds a
 *    lock another thread held still locked and unlocks it (NORMAL), runs
 *    pthread_atfork handlers that lock and unlock, and uses mutexes and
 *    condvars with new threads.
 */
#include "harness.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <threads.h>
#include <sys/wait.h>

#define NTHREADS 4

static int scale(int n) { return th_scale_small() ? n / 10 : n; }

/* ---------------------------------------------------------------- driver */
static int pick_policy(const char *name, const char **out)
{
    liblock_algorithm_info_t in;
    if (liblock_algorithm_info(name, &in))
        return -1;
    static const int pref[] = {LIBLOCK_WAIT_SPIN_THEN_PARK, LIBLOCK_WAIT_PARK, LIBLOCK_WAIT_YIELD};
    *out = NULL;
    for (size_t i = 0; i < sizeof pref / sizeof *pref; i++)
        if (in.policies & (1u << pref[i])) {
            *out = liblock_wait_name(pref[i]);
            break;
        }
    return 0;
}

static int run_child(const char *prog, const char *lib, const char *algo, const char *policy, int variant)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setenv("LD_PRELOAD", lib, 1);
        setenv("LIBLOCK_LOCK", algo, 1);
        if (policy)
            setenv("LIBLOCK_WAIT", policy, 1);
        setenv("LIBLOCK_STRICT", "1", 1);
        if (variant == 1)
            setenv("LIBLOCK_COND_GENERIC", "1", 1);
        if (variant == 2)
            setenv("LIBLOCK_INTERPOSE_API", "1", 1);
        setenv("LIBLOCK_INTERPOSE_TEST_CHILD", "1", 1);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    char what[256];
    snprintf(what, sizeof what, "%s under %s", prog, algo);
    return th_wait_child(pid, 60, what);
}

static int driver(int argc, char **argv)
{
    char cxx[4200];
    th_sibling_path(argv[0], "test_interpose_cxx", cxx, sizeof cxx);
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report("test_interpose");
    int have_cxx = access(cxx, X_OK) == 0;
    CHECK(have_cxx, "%s missing", cxx);
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        const char *policy = NULL;
        pick_policy(*a, &policy);
        uint64_t t0 = th_now_ns();
        int rc = run_child(argv[0], real, *a, policy, 0);
        CHECK(rc == 0, "C test under %s (%s): exit %d", *a, policy ? policy : "default", rc);
        int rcx = have_cxx ? run_child(cxx, real, *a, policy, 0) : 0;
        CHECK(rcx == 0, "C++ test under %s (%s): exit %d", *a, policy ? policy : "default", rcx);
        printf("  %-16s %-15s C %s, C++ %s (%.1f s)\n", *a, policy ? policy : "default", rc == 0 ? "ok" : "FAILED",
               rcx == 0 ? "ok" : "FAILED", (th_now_ns() - t0) / 1e9);
        fflush(stdout);
    }
    /* Paths no current algorithm takes, forced on a queue lock and a
     * node-less one: the interposer's own condition-variable protocol (for
     * algorithms without LIBLOCK_PROP_COND) and the API-layer path (for
     * delegating algorithms). */
    static const char *const generic[] = {"mcs", "ttas"};
    static const char *const variant_env[] = {NULL, "LIBLOCK_COND_GENERIC=1", "LIBLOCK_INTERPOSE_API=1"};
    for (int v = 1; v <= 2; v++)
        for (size_t i = 0; i < 2; i++) {
            if (!th_selected(argc, argv, generic[i]) ||
                liblock_algorithm_info(generic[i], &(liblock_algorithm_info_t){0}))
                continue;
            const char *policy = NULL;
            pick_policy(generic[i], &policy);
            int rc = run_child(argv[0], real, generic[i], policy, v);
            CHECK(rc == 0, "C test under %s with %s: exit %d", generic[i], variant_env[v], rc);
            int rcx = have_cxx ? run_child(cxx, real, generic[i], policy, v) : 0;
            CHECK(rcx == 0, "C++ test under %s with %s: exit %d", generic[i], variant_env[v], rcx);
            printf("  %-16s %-15s %s: C %s, C++ %s\n", generic[i], policy ? policy : "default", variant_env[v],
                   rc == 0 ? "ok" : "FAILED", rcx == 0 ? "ok" : "FAILED");
        }
    /* posix under its default policy (park: a NORMAL glibc mutex in its
     * state, where spin-then-park above makes it an adaptive one), through
     * the interposer's posix fast path (src/shim/mutex.c, IP_FAST_GLIBC). */
    if (th_selected(argc, argv, "posix")) {
        int rc = run_child(argv[0], real, "posix", "park", 0);
        CHECK(rc == 0, "C test under posix (park): exit %d", rc);
        int rcx = have_cxx ? run_child(cxx, real, "posix", "park", 0) : 0;
        CHECK(rcx == 0, "C++ test under posix (park): exit %d", rcx);
        printf("  %-16s %-15s C %s, C++ %s\n", "posix", "park", rc == 0 ? "ok" : "FAILED", rcx == 0 ? "ok" : "FAILED");
    }
    free(real);
    return th_report("test_interpose");
}

/* ---------------------------------------------------------------- helpers */
typedef struct {
    pthread_mutex_t *m;
    int op;          /* 0 trylock, 1 unlock, 2 lock+hold until released, 3 lock-then-unlock, 4 lock and exit */
    int result;
    volatile int *release;
    volatile int started;
} helper_t;

static void *helper_main(void *arg)
{
    helper_t *h = arg;
    h->started = 1;
    switch (h->op) {
    case 0:
        h->result = pthread_mutex_trylock(h->m);
        if (h->result == 0)
            pthread_mutex_unlock(h->m);
        break;
    case 1:
        h->result = pthread_mutex_unlock(h->m);
        break;
    case 2:
        h->result = pthread_mutex_lock(h->m);
        while (!*h->release)
            usleep(1000);
        pthread_mutex_unlock(h->m);
        break;
    case 3:
        h->result = pthread_mutex_lock(h->m);
        if (h->result == 0)
            pthread_mutex_unlock(h->m);
        break;
    case 4: /* lock and exit holding it */
        h->result = pthread_mutex_lock(h->m);
        break;
    }
    return NULL;
}

static int in_thread(pthread_mutex_t *m, int op)
{
    helper_t h = {.m = m, .op = op};
    pthread_t t;
    pthread_create(&t, NULL, helper_main, &h);
    pthread_join(t, NULL);
    return h.result;
}

/* ---------------------------------------------------------------- counters */
static pthread_mutex_t s_normal = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t s_recursive = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_errorcheck = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t s_adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

enum { K_S_NORMAL, K_S_RECURSIVE, K_S_ERRORCHECK, K_S_ADAPTIVE, K_D_DEFAULT, K_D_NORMAL, K_D_RECURSIVE,
       K_D_ERRORCHECK, K_D_ROBUST, K_D_PI, K_D_PSHARED, K_COUNT };
static const char *const k_names[K_COUNT] = {"static normal", "static recursive", "static errorcheck",
                                             "static adaptive", "default", "normal", "recursive",
                                             "errorcheck", "robust", "prio-inherit", "pshared"};
static pthread_mutex_t d_mutex[K_COUNT];
static pthread_mutex_t *k_mutex[K_COUNT];
static long counters[K_COUNT];
static pthread_barrier_t start_barrier;
static int iters;

static void init_dynamic(void)
{
    for (int k = K_D_DEFAULT; k < K_COUNT; k++) {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        switch (k) {
        case K_D_NORMAL: pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL); break;
        case K_D_RECURSIVE: pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE); break;
        case K_D_ERRORCHECK: pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK); break;
        case K_D_ROBUST: pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST); break;
        case K_D_PI: pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT); break;
        case K_D_PSHARED: pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED); break;
        default: break;
        }
        CHECK_EQ(pthread_mutex_init(&d_mutex[k], k == K_D_DEFAULT ? NULL : &a), 0);
        pthread_mutexattr_destroy(&a);
        k_mutex[k] = &d_mutex[k];
    }
    k_mutex[K_S_NORMAL] = &s_normal;
    k_mutex[K_S_RECURSIVE] = &s_recursive;
    k_mutex[K_S_ERRORCHECK] = &s_errorcheck;
    k_mutex[K_S_ADAPTIVE] = &s_adaptive;
}

static int is_recursive(int k) { return k == K_S_RECURSIVE || k == K_D_RECURSIVE; }

/* errno across interposed calls: glibc's pthread and C11 calls leave it
 * alone, and programs rely on that (CPython reads errno after readdir()
 * across its GIL's lock and condition calls), so the interposer must too,
 * even when its waits made system calls that failed (a futex wait that
 * found the word changed: EAGAIN).  KEEP_ERRNO(call) sets a sentinel, makes
 * the call and counts a change. */
#define ERRNO_SENTINEL 4242
static _Atomic long errno_changes;
static _Atomic int errno_last;
#define KEEP_ERRNO(call)                                                                                               \
    ({                                                                                                                 \
        errno = ERRNO_SENTINEL;                                                                                        \
        __typeof__(call) r_ = (call);                                                                                  \
        if (errno != ERRNO_SENTINEL) {                                                                                 \
            atomic_fetch_add(&errno_changes, 1);                                                                       \
            atomic_store(&errno_last, errno);                                                                          \
        }                                                                                                              \
        r_;                                                                                                            \
    })

static void check_errno_kept(const char *what)
{
    long n = atomic_exchange(&errno_changes, 0);
    int e = atomic_load(&errno_last);
    CHECK(n == 0, "%s: %ld interposed calls changed errno (last to %d, %s)", what, n, e, strerror(e));
}

static void *counter_main(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    pthread_barrier_wait(&start_barrier);
    for (int i = 0; i < iters; i++) {
        for (int k = 0; k < K_COUNT; k++) {
            pthread_mutex_t *m = k_mutex[(k + id) % K_COUNT];
            int kk = (int)((k + id) % K_COUNT);
            if ((i + id) % 4 == 0) {
                int r;
                while ((r = KEEP_ERRNO(pthread_mutex_trylock(m))) == EBUSY)
                    sched_yield();
                if (r)
                    CHECK_EQ(r, 0);
            } else {
                int r = KEEP_ERRNO(pthread_mutex_lock(m));
                if (r)
                    CHECK_EQ(r, 0);
            }
            if (is_recursive(kk))
                KEEP_ERRNO(pthread_mutex_lock(m));
            counters[kk]++;
            if (is_recursive(kk))
                KEEP_ERRNO(pthread_mutex_unlock(m));
            int r = KEEP_ERRNO(pthread_mutex_unlock(m));
            if (r)
                CHECK_EQ(r, 0);
        }
    }
    return NULL;
}

static void test_counters(void)
{
    th_context = "counters";
    iters = scale(1500);
    pthread_t t[NTHREADS];
    pthread_barrier_init(&start_barrier, NULL, NTHREADS);
    for (uintptr_t i = 0; i < NTHREADS; i++)
        pthread_create(&t[i], NULL, counter_main, (void *)i);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start_barrier);
    for (int k = 0; k < K_COUNT; k++)
        CHECK(counters[k] == (long)NTHREADS * iters, "%s: counter %ld, expected %ld", k_names[k], counters[k],
              (long)NTHREADS * iters);
    check_errno_kept("counters");
}

/* ---------------------------------------------------------------- types */
static void test_types(void)
{
    th_context = "recursive";
    pthread_mutex_t *r = &d_mutex[K_D_RECURSIVE];
    CHECK_EQ(pthread_mutex_lock(r), 0);
    CHECK_EQ(pthread_mutex_lock(r), 0);
    CHECK_EQ(pthread_mutex_lock(r), 0);
    CHECK_EQ(pthread_mutex_trylock(r), 0);
    CHECK_EQ(in_thread(r, 0), EBUSY);
    CHECK_EQ(in_thread(r, 1), EPERM);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_mutex_unlock(r), 0);
    CHECK_EQ(in_thread(r, 0), EBUSY); /* still held once */
    CHECK_EQ(pthread_mutex_unlock(r), 0);
    CHECK_EQ(pthread_mutex_unlock(r), EPERM);
    CHECK_EQ(in_thread(r, 0), 0);
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    CHECK_EQ(in_thread(&s_recursive, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), EPERM);

    th_context = "errorcheck";
    pthread_mutex_t *e = &d_mutex[K_D_ERRORCHECK];
    CHECK_EQ(pthread_mutex_unlock(e), EPERM);
    CHECK_EQ(pthread_mutex_lock(e), 0);
    CHECK_EQ(pthread_mutex_lock(e), EDEADLK);
    CHECK_EQ(pthread_mutex_trylock(e), EBUSY);
    CHECK_EQ(in_thread(e, 1), EPERM);
    CHECK_EQ(in_thread(e, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(e), 0);
    CHECK_EQ(pthread_mutex_unlock(e), EPERM);
    CHECK_EQ(pthread_mutex_lock(&s_errorcheck), 0);
    CHECK_EQ(pthread_mutex_lock(&s_errorcheck), EDEADLK);
    CHECK_EQ(pthread_mutex_unlock(&s_errorcheck), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_errorcheck), EPERM);

    th_context = "normal";
    for (int k = 0; k < K_COUNT; k++) {
        if (is_recursive(k))
            continue;
        CHECK_EQ(pthread_mutex_lock(k_mutex[k]), 0);
        int t = in_thread(k_mutex[k], 0);
        CHECK(t == EBUSY, "%s: trylock from another thread gave %d", k_names[k], t);
        CHECK_EQ(pthread_mutex_unlock(k_mutex[k]), 0);
        t = in_thread(k_mutex[k], 3);
        CHECK(t == 0, "%s: lock from another thread gave %d", k_names[k], t);
    }

    th_context = "unlock by another thread";
    /* NORMAL-like kinds: glibc lets another thread unlock, and so do we,
     * for every algorithm (tests/test_mutex_types.c has the rest). */
    static const int normal_kinds[] = {K_S_NORMAL, K_S_ADAPTIVE, K_D_DEFAULT, K_D_NORMAL};
    for (size_t i = 0; i < sizeof normal_kinds / sizeof *normal_kinds; i++) {
        pthread_mutex_t *m = k_mutex[normal_kinds[i]];
        CHECK_EQ(pthread_mutex_lock(m), 0);
        int r = in_thread(m, 1);
        CHECK(r == 0, "%s: unlock by another thread gave %d", k_names[normal_kinds[i]], r);
        if (r != 0)
            CHECK_EQ(pthread_mutex_unlock(m), 0);
        CHECK_EQ(pthread_mutex_trylock(m), 0);
        CHECK_EQ(pthread_mutex_unlock(m), 0);
    }

    th_context = "pass-through";
    /* glibc's own mutexes: the interposer leaves their words alone ... */
    for (int k = K_D_PI; k <= K_D_PSHARED; k++) {
        CHECK_EQ(pthread_mutex_lock(k_mutex[k]), 0);
        CHECK(k_mutex[k]->__data.__list.__prev == NULL, "%s: the interposer took over a glibc mutex", k_names[k]);
        CHECK(k_mutex[k]->__data.__lock != 0, "%s: glibc's lock word not set while held", k_names[k]);
        CHECK_EQ(pthread_mutex_unlock(k_mutex[k]), 0);
    }
    /* ... and a robust mutex keeps its semantics: the owner dies -> EOWNERDEAD */
    {
        helper_t h = {.m = &d_mutex[K_D_ROBUST], .op = 4};
        pthread_t t;
        pthread_create(&t, NULL, helper_main, &h);
        pthread_join(t, NULL);
        CHECK_EQ(h.result, 0);
        int r = pthread_mutex_lock(&d_mutex[K_D_ROBUST]);
        CHECK(r == EOWNERDEAD, "robust mutex whose owner exited: lock gave %d, expected EOWNERDEAD", r);
        if (r == EOWNERDEAD)
            CHECK_EQ(pthread_mutex_consistent(&d_mutex[K_D_ROBUST]), 0);
        CHECK_EQ(pthread_mutex_unlock(&d_mutex[K_D_ROBUST]), 0);
    }
    /* ours carry the interposer's pointer */
    for (int k = 0; k < K_D_ROBUST; k++)
        CHECK(k_mutex[k]->__data.__list.__prev != NULL, "%s: not interposed", k_names[k]);

    th_context = "life cycle";
    pthread_mutex_t m;
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(pthread_mutex_init(&m, NULL), 0);
        CHECK_EQ(pthread_mutex_lock(&m), 0);
        CHECK_EQ(pthread_mutex_destroy(&m), EBUSY); /* held: refused, left intact */
        CHECK_EQ(pthread_mutex_unlock(&m), 0);
        CHECK_EQ(pthread_mutex_destroy(&m), 0);
    }
    /* mutexes that are never destroyed (freed, or re-initialised): the
     * interposer's memory stays bounded by the addresses used */
    long (*wrappers)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_wrappers");
    CHECK(wrappers != NULL, "liblock_interpose_debug_wrappers not exported");
    if (wrappers) {
        long before = wrappers();
        for (int i = 0; i < 20000; i++) {
            pthread_mutex_t *f = calloc(1, sizeof *f);
            CHECK_EQ(pthread_mutex_lock(f), 0);
            CHECK_EQ(pthread_mutex_unlock(f), 0);
            free(f); /* no pthread_mutex_destroy */
        }
        pthread_mutex_t again;
        for (int i = 0; i < 1000; i++) {
            CHECK_EQ(pthread_mutex_init(&again, NULL), 0); /* no destroy in between */
            CHECK_EQ(pthread_mutex_lock(&again), 0);
            CHECK_EQ(pthread_mutex_unlock(&again), 0);
        }
        long grown = wrappers() - before;
        CHECK(grown < 200, "20000 freed + 1000 re-initialised mutexes left %ld wrappers", grown);
        /* a busy one left behind is not reused: the new mutex must be free */
        pthread_mutex_t *b = calloc(1, sizeof *b);
        CHECK_EQ(pthread_mutex_lock(b), 0);
        memset(b, 0, sizeof *b); /* a new zeroed mutex at the address of a held one */
        CHECK_EQ(in_thread(b, 0), 0);
        CHECK_EQ(pthread_mutex_destroy(b), 0);
        free(b);
    }
    /* a zeroed mutex (what PTHREAD_MUTEX_INITIALIZER and std::mutex give) */
    pthread_mutex_t *z = calloc(1, sizeof *z);
    CHECK_EQ(pthread_mutex_lock(z), 0);
    CHECK_EQ(in_thread(z, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(z), 0);
    CHECK_EQ(pthread_mutex_destroy(z), 0);
    free(z);
}

/* ---------------------------------------------------------------- timed */
static void test_timed(void)
{
    th_context = "timedlock";
    volatile int release = 0;
    for (int k = 0; k < K_COUNT; k++) {
        pthread_mutex_t *m = k_mutex[k];
        struct timespec dl;
        ts_after(CLOCK_REALTIME, &dl, 1000);
        CHECK_EQ(pthread_mutex_timedlock(m, &dl), 0); /* free: immediate */
        CHECK_EQ(pthread_mutex_unlock(m), 0);
        release = 0;
        helper_t h = {.m = m, .op = 2, .release = &release};
        pthread_t t;
        pthread_create(&t, NULL, helper_main, &h);
        while (!h.started || in_thread(m, 0) != EBUSY)
            usleep(1000);
        ts_after(CLOCK_REALTIME, &dl, 20);
        int r = pthread_mutex_timedlock(m, &dl);
        CHECK(r == ETIMEDOUT, "%s: timedlock on a held mutex gave %d", k_names[k], r);
        CHECK(ts_reached(CLOCK_REALTIME, &dl), "%s: timedlock returned before its deadline", k_names[k]);
        if (k != K_D_PI) { /* glibc checks the timespec first only for some kinds */
            struct timespec bad = {dl.tv_sec, 1000000000L};
            r = pthread_mutex_timedlock(m, &bad);
            CHECK(r == EINVAL, "%s: timedlock with tv_nsec=1e9 gave %d", k_names[k], r);
        }
        ts_after(CLOCK_MONOTONIC, &dl, 15);
        r = pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &dl);
        CHECK(r == ETIMEDOUT, "%s: clocklock(MONOTONIC) on a held mutex gave %d", k_names[k], r);
        CHECK(ts_reached(CLOCK_MONOTONIC, &dl), "%s: clocklock returned before its deadline", k_names[k]);
        /* released while we wait: success well before the deadline */
        ts_after(CLOCK_REALTIME, &dl, 20000);
        release = 1;
        r = pthread_mutex_timedlock(m, &dl);
        CHECK(r == 0, "%s: timedlock after release gave %d", k_names[k], r);
        if (r == 0)
            pthread_mutex_unlock(m);
        pthread_join(t, NULL);
    }
    struct timespec dl;
    ts_after(CLOCK_REALTIME, &dl, 1000);
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_timedlock(&s_recursive, &dl), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_lock(&s_errorcheck), 0);
    CHECK_EQ(pthread_mutex_timedlock(&s_errorcheck, &dl), EDEADLK);
    CHECK_EQ(pthread_mutex_unlock(&s_errorcheck), 0);
}

/* ---------------------------------------------------------------- condvars */
#define BUF_CAP 4
static pthread_mutex_t bb_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bb_not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t bb_not_empty = PTHREAD_COND_INITIALIZER;
static long bb_buf[BUF_CAP];
static int bb_head, bb_count, bb_items;
static long bb_sum, bb_got;

static void *producer_main(void *arg)
{
    long base = (long)(intptr_t)arg;
    for (int i = 1; i <= bb_items; i++) {
        KEEP_ERRNO(pthread_mutex_lock(&bb_mutex));
        while (bb_count == BUF_CAP)
            KEEP_ERRNO(pthread_cond_wait(&bb_not_full, &bb_mutex));
        bb_buf[(bb_head + bb_count) % BUF_CAP] = base + i;
        bb_count++;
        KEEP_ERRNO(pthread_cond_signal(&bb_not_empty));
        KEEP_ERRNO(pthread_mutex_unlock(&bb_mutex));
    }
    return NULL;
}

static void *consumer_main(void *arg)
{
    long n = (long)(intptr_t)arg;
    for (long i = 0; i < n; i++) {
        KEEP_ERRNO(pthread_mutex_lock(&bb_mutex));
        while (bb_count == 0)
            KEEP_ERRNO(pthread_cond_wait(&bb_not_empty, &bb_mutex));
        long v = bb_buf[bb_head];
        bb_head = (bb_head + 1) % BUF_CAP;
        bb_count--;
        bb_sum += v;
        bb_got++;
        KEEP_ERRNO(pthread_cond_signal(&bb_not_full));
        KEEP_ERRNO(pthread_mutex_unlock(&bb_mutex));
    }
    return NULL;
}

static pthread_mutex_t bc_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bc_cond = PTHREAD_COND_INITIALIZER;
static int bc_go, bc_woken;

static void *bc_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&bc_mutex);
    while (!bc_go)
        pthread_cond_wait(&bc_cond, &bc_mutex);
    bc_woken++;
    pthread_mutex_unlock(&bc_mutex);
    return NULL;
}

typedef struct {
    pthread_mutex_t *m;
    pthread_cond_t *c;
    volatile int flag;
} robust_arg_t;

static void *robust_signaller(void *arg)
{
    robust_arg_t *a = arg;
    usleep(10000);
    pthread_mutex_lock(a->m);
    a->flag = 1;
    pthread_cond_signal(a->c);
    pthread_mutex_unlock(a->m);
    return NULL;
}

static pthread_mutex_t cx_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cx_cond = PTHREAD_COND_INITIALIZER;
static volatile int cx_waiting, cx_cleanup_held;

static void cx_cleanup(void *arg)
{
    (void)arg;
    /* POSIX: the mutex is held again when cleanup handlers run */
    cx_cleanup_held = pthread_mutex_trylock(&cx_mutex) == EBUSY;
    pthread_mutex_unlock(&cx_mutex);
}

static void *cx_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&cx_mutex);
    pthread_cleanup_push(cx_cleanup, NULL);
    cx_waiting = 1;
    for (;;)
        pthread_cond_wait(&cx_cond, &cx_mutex);
    pthread_cleanup_pop(0);
    return NULL;
}

static void test_cond(void)
{
    th_context = "cancel in wait";
    {
        pthread_t t;
        pthread_create(&t, NULL, cx_waiter, NULL);
        while (!cx_waiting)
            usleep(1000);
        pthread_mutex_lock(&cx_mutex); /* the waiter is inside the wait */
        pthread_cancel(t);
        pthread_cond_signal(&cx_cond);
        pthread_mutex_unlock(&cx_mutex);
        void *ret;
        pthread_join(t, &ret);
        CHECK(ret == PTHREAD_CANCELED, "cancelled waiter returned %p", ret);
        CHECK(cx_cleanup_held, "cleanup handler ran without the mutex");
        CHECK_EQ(pthread_mutex_trylock(&cx_mutex), 0);
        pthread_mutex_unlock(&cx_mutex);
    }

    th_context = "bounded buffer";
    bb_items = scale(2000);
    pthread_t p[2], c[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&p[i], NULL, producer_main, (void *)(intptr_t)(i * 1000000L));
    for (int i = 0; i < 2; i++)
        pthread_create(&c[i], NULL, consumer_main, (void *)(intptr_t)bb_items);
    for (int i = 0; i < 2; i++) {
        pthread_join(p[i], NULL);
        pthread_join(c[i], NULL);
    }
    long n = bb_items;
    CHECK_EQ(bb_got, 2 * n);
    CHECK_EQ(bb_sum, n * (n + 1) + 1000000L * n);
    check_errno_kept("bounded buffer");
    CHECK_EQ(bb_count, 0);

    th_context = "timedwait";
    pthread_mutex_t *e = &d_mutex[K_D_ERRORCHECK];
    pthread_cond_t cv;
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    struct timespec dl;
    CHECK_EQ(pthread_mutex_lock(e), 0);
    ts_after(CLOCK_REALTIME, &dl, 30);
    CHECK_EQ(pthread_cond_timedwait(&cv, e, &dl), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_REALTIME, &dl), "timedwait returned before its deadline");
    CHECK_EQ(pthread_mutex_lock(e), EDEADLK); /* held again after the wait */
    ts_after(CLOCK_MONOTONIC, &dl, 30);
    CHECK_EQ(pthread_cond_clockwait(&cv, e, CLOCK_MONOTONIC, &dl), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_MONOTONIC, &dl), "clockwait returned before its deadline");
    CHECK_EQ(pthread_mutex_unlock(e), 0);
    CHECK_EQ(pthread_cond_wait(&cv, e), EPERM); /* errorcheck mutex not held */
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "monotonic condvar";
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    CHECK_EQ(pthread_cond_init(&cv, &ca), 0);
    pthread_condattr_destroy(&ca);
    pthread_mutex_lock(&s_normal);
    ts_after(CLOCK_MONOTONIC, &dl, 30);
    CHECK_EQ(pthread_cond_timedwait(&cv, &s_normal, &dl), ETIMEDOUT);
    CHECK(ts_reached(CLOCK_MONOTONIC, &dl), "monotonic timedwait returned before its deadline");
    CHECK_EQ(in_thread(&s_normal, 0), EBUSY);
    pthread_mutex_unlock(&s_normal);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "recursive + cond";
    pthread_mutex_t *r = &d_mutex[K_D_RECURSIVE];
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    pthread_mutex_lock(r);
    ts_after(CLOCK_REALTIME, &dl, 10);
    CHECK_EQ(pthread_cond_timedwait(&cv, r, &dl), ETIMEDOUT);
    CHECK_EQ(in_thread(r, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(r), 0);
    CHECK_EQ(pthread_mutex_unlock(r), EPERM);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "broadcast";
    pthread_t w[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&w[i], NULL, bc_waiter, NULL);
    usleep(20000);
    pthread_mutex_lock(&bc_mutex);
    bc_go = 1;
    pthread_cond_broadcast(&bc_cond);
    pthread_mutex_unlock(&bc_mutex);
    for (int i = 0; i < 3; i++)
        pthread_join(w[i], NULL);
    CHECK_EQ(bc_woken, 3);

    th_context = "robust mutex + cond";
    pthread_cond_t rc = PTHREAD_COND_INITIALIZER;
    robust_arg_t ra = {.m = &d_mutex[K_D_ROBUST], .c = &rc};
    pthread_t t;
    pthread_mutex_lock(ra.m);
    pthread_create(&t, NULL, robust_signaller, &ra);
    while (!ra.flag)
        CHECK_EQ(pthread_cond_wait(&rc, ra.m), 0);
    pthread_mutex_unlock(ra.m);
    pthread_join(t, NULL);
}

/* ---------------------------------------------------------------- fork */
static pthread_mutex_t f_held = PTHREAD_MUTEX_INITIALIZER;   /* forking thread holds; a waiter queued */
static pthread_mutex_t f_other = PTHREAD_MUTEX_INITIALIZER;  /* another thread holds */
static pthread_mutex_t f_atfork = PTHREAD_MUTEX_INITIALIZER; /* pthread_atfork pattern */
static pthread_mutex_t f_count = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t f_cond = PTHREAD_COND_INITIALIZER;     /* a thread waits on it at fork */
static int f_atfork_child_rc = -1;
static long f_counter;
static volatile int f_cond_flag;

static void atfork_prepare(void) { pthread_mutex_lock(&f_atfork); }
static void atfork_parent(void) { pthread_mutex_unlock(&f_atfork); }
static void atfork_child(void) { f_atfork_child_rc = pthread_mutex_unlock(&f_atfork); }

static void *f_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&f_held);
    pthread_mutex_unlock(&f_held);
    return NULL;
}

static void *f_cond_waiter(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&f_count);
    while (!f_cond_flag)
        pthread_cond_wait(&f_cond, &f_count);
    pthread_mutex_unlock(&f_count);
    return NULL;
}

static void *f_counter_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&f_count);
        f_counter++;
        pthread_mutex_unlock(&f_count);
    }
    return NULL;
}

static int child_after_fork(void)
{
    int bad = 0;
#define CCHK(c)                                                           \
    do {                                                                  \
        if (!(c)) {                                                       \
            fprintf(stderr, "FAIL in fork child: %s (line %d)\n", #c, __LINE__); \
            bad++;                                                        \
        }                                                                 \
    } while (0)
    CCHK(f_atfork_child_rc == 0);
    CCHK(pthread_mutex_unlock(&f_held) == 0);
    CCHK(pthread_mutex_lock(&f_held) == 0);
    CCHK(pthread_mutex_unlock(&f_held) == 0);
    /* held twice by the forking thread: as on glibc, whose owner is that
     * thread's id, which the child's thread does not have */
    CCHK(pthread_mutex_trylock(&s_recursive) == EBUSY);
    CCHK(pthread_mutex_unlock(&s_recursive) == EPERM);
    /* held by a thread that does not exist here: still locked, as glibc
     * leaves it, and a NORMAL one can be unlocked by the child */
    CCHK(pthread_mutex_trylock(&f_other) == EBUSY);
    CCHK(pthread_mutex_unlock(&f_other) == 0);
    CCHK(pthread_mutex_lock(&f_other) == 0);
    CCHK(pthread_mutex_unlock(&f_other) == 0);
    CCHK(pthread_mutex_lock(&f_atfork) == 0);
    CCHK(pthread_mutex_unlock(&f_atfork) == 0);
    f_counter = 0;
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, f_counter_main, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CCHK(f_counter == 4000);
    /* the condvar a parent thread was waiting on */
    struct timespec dl;
    pthread_mutex_lock(&f_count);
    ts_after(CLOCK_REALTIME, &dl, 10);
    CCHK(pthread_cond_timedwait(&f_cond, &f_count, &dl) == ETIMEDOUT);
    pthread_mutex_unlock(&f_count);
    f_cond_flag = 0;
    pthread_t w;
    pthread_create(&w, NULL, f_cond_waiter, NULL);
    usleep(10000);
    pthread_mutex_lock(&f_count);
    f_cond_flag = 1;
    pthread_cond_signal(&f_cond);
    pthread_mutex_unlock(&f_count);
    pthread_join(w, NULL);
    return bad;
#undef CCHK
}

static void test_fork(void)
{
    th_context = "fork";
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    volatile int release = 0;
    helper_t other = {.m = &f_other, .op = 2, .release = &release};
    pthread_t to, tw, tc;
    pthread_create(&to, NULL, helper_main, &other);
    while (in_thread(&f_other, 0) != EBUSY)
        usleep(1000);
    CHECK_EQ(pthread_mutex_lock(&f_held), 0);
    pthread_create(&tw, NULL, f_waiter, NULL);
    pthread_create(&tc, NULL, f_cond_waiter, NULL);
    usleep(30000); /* let the waiters queue up (not needed for correctness) */
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        _exit(child_after_fork() ? 1 : 0);
    }
    CHECK(pid > 0, "fork failed");
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&f_held), 0);
    release = 1;
    pthread_mutex_lock(&f_count);
    f_cond_flag = 1;
    pthread_cond_broadcast(&f_cond);
    pthread_mutex_unlock(&f_count);
    pthread_join(to, NULL);
    pthread_join(tw, NULL);
    pthread_join(tc, NULL);
    int st = 0;
    if (pid > 0) {
        waitpid(pid, &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child: status 0x%x", st);
    }
    /* the parent's locks still work */
    CHECK_EQ(pthread_mutex_lock(&f_atfork), 0);
    CHECK_EQ(pthread_mutex_unlock(&f_atfork), 0);
}

/* ---------------------------------------------------------------- C11 threads */
static mtx_t c11_m, c11_r, c11_t;
static cnd_t c11_c;
static long c11_count;
static int c11_items, c11_taken, c11_sum;

static int c11_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < scale(20000); i++) {
        if (i % 8 == 0) {
            int r;
            while ((r = KEEP_ERRNO(mtx_trylock(&c11_m))) == thrd_busy)
                thrd_yield();
            if (r != thrd_success)
                return r;
        } else if (KEEP_ERRNO(mtx_lock(&c11_m)) != thrd_success)
            return -1;
        c11_count++;
        KEEP_ERRNO(mtx_unlock(&c11_m));
    }
    return 0;
}

static int c11_try_other(void *arg)
{
    return mtx_trylock(arg) == thrd_busy ? 0 : 1; /* held by the main thread */
}

static int c11_timed_other(void *arg)
{
    struct timespec ts;
    ts_after(CLOCK_REALTIME, &ts, 30); /* C11's TIME_UTC is CLOCK_REALTIME */
    return mtx_timedlock(arg, &ts) == thrd_timedout && ts_reached(CLOCK_REALTIME, &ts) ? 0 : 1;
}

static int c11_consumer(void *arg)
{
    (void)arg;
    for (;;) {
        KEEP_ERRNO(mtx_lock(&c11_m));
        while (c11_items == 0 && c11_taken < 1000)
            KEEP_ERRNO(cnd_wait(&c11_c, &c11_m));
        if (c11_taken >= 1000) {
            mtx_unlock(&c11_m);
            return 0;
        }
        c11_items--;
        c11_sum += ++c11_taken;
        cnd_broadcast(&c11_c);
        mtx_unlock(&c11_m);
    }
}

/* glibc's mtx_* and cnd_* call its pthread functions internally, so they are
 * interposed separately: check that they land on the algorithm and keep C11
 * semantics and return codes. */
static void test_c11(void)
{
    th_context = "C11 mtx";
    CHECK_EQ(mtx_init(&c11_m, mtx_plain), thrd_success);
    thrd_t t[NTHREADS];
    int res;
    for (int i = 0; i < NTHREADS; i++)
        CHECK_EQ(thrd_create(&t[i], c11_worker, NULL), thrd_success);
    for (int i = 0; i < NTHREADS; i++) {
        thrd_join(t[i], &res);
        CHECK_EQ(res, 0);
    }
    CHECK_EQ(c11_count, (long)NTHREADS * scale(20000));
    CHECK(((pthread_mutex_t *)&c11_m)->__data.__list.__prev != NULL, "a C11 mutex is not interposed");

    th_context = "C11 mtx_init";
    mtx_t bad;
    /* as glibc: a type other than plain or timed with mtx_recursive makes a
     * plain mutex */
    CHECK_EQ(mtx_init(&bad, 42), thrd_success);
    CHECK_EQ(mtx_lock(&bad), thrd_success);
    CHECK_EQ(mtx_trylock(&bad), thrd_busy);
    CHECK_EQ(mtx_unlock(&bad), thrd_success);
    mtx_destroy(&bad);
    CHECK_EQ(mtx_init(&bad, mtx_timed | 8), thrd_success);
    mtx_destroy(&bad);

    th_context = "C11 recursive";
    CHECK_EQ(mtx_init(&c11_r, mtx_plain | mtx_recursive), thrd_success);
    CHECK_EQ(mtx_lock(&c11_r), thrd_success);
    CHECK_EQ(mtx_lock(&c11_r), thrd_success);
    CHECK_EQ(mtx_trylock(&c11_r), thrd_success);
    thrd_t o;
    CHECK_EQ(thrd_create(&o, c11_try_other, &c11_r), thrd_success);
    thrd_join(o, &res);
    CHECK(res == 0, "another thread's mtx_trylock on a held recursive mutex did not say thrd_busy");
    for (int i = 0; i < 3; i++)
        CHECK_EQ(mtx_unlock(&c11_r), thrd_success);
    CHECK_EQ(mtx_trylock(&c11_r), thrd_success); /* free again after three unlocks */
    CHECK_EQ(mtx_unlock(&c11_r), thrd_success);
    mtx_destroy(&c11_r);

    th_context = "C11 timed";
    CHECK_EQ(mtx_init(&c11_t, mtx_timed), thrd_success);
    CHECK_EQ(mtx_lock(&c11_t), thrd_success);
    CHECK_EQ(thrd_create(&o, c11_timed_other, &c11_t), thrd_success);
    thrd_join(o, &res);
    CHECK(res == 0, "mtx_timedlock on a held mutex did not return thrd_timedout at its deadline");
    CHECK_EQ(mtx_unlock(&c11_t), thrd_success);
    mtx_destroy(&c11_t);

    th_context = "C11 cnd";
    CHECK_EQ(cnd_init(&c11_c), thrd_success);
    struct timespec ts;
    ts_after(CLOCK_REALTIME, &ts, 20);
    CHECK_EQ(mtx_lock(&c11_m), thrd_success);
    CHECK_EQ(cnd_timedwait(&c11_c, &c11_m, &ts), thrd_timedout);
    CHECK_EQ(mtx_trylock(&c11_m), thrd_busy); /* held again on return (not recursive) */
    CHECK_EQ(mtx_unlock(&c11_m), thrd_success);
    thrd_t cons[2];
    for (int i = 0; i < 2; i++)
        CHECK_EQ(thrd_create(&cons[i], c11_consumer, NULL), thrd_success);
    for (int produced = 0; produced < 1000; produced++) {
        mtx_lock(&c11_m);
        while (c11_items >= 4)
            cnd_wait(&c11_c, &c11_m);
        c11_items++;
        cnd_broadcast(&c11_c);
        mtx_unlock(&c11_m);
    }
    for (int i = 0; i < 2; i++)
        thrd_join(cons[i], NULL);
    CHECK_EQ(c11_taken, 1000);
    check_errno_kept("C11");
    CHECK_EQ(c11_sum, 1000 * 1001 / 2);
    cnd_destroy(&c11_c);
    mtx_destroy(&c11_m);
}

/* ---------------------------------------------------------------- child main */
static int child(void)
{
    th_watchdog(40);
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

    init_dynamic();
    test_counters();
    test_types();
    test_timed();
    test_cond();
    test_c11();
    test_fork();
    char name[128];
    snprintf(name, sizeof name, "test_interpose[%s]", want ? want : "?");
    return th_report(name);
}

int main(int argc, char **argv)
{
    if (getenv("LIBLOCK_INTERPOSE_TEST_CHILD"))
        return child();
    th_watchdog(600);
    return driver(argc, argv);
}
