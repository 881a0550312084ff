/*
 * test_oversub - more threads than CPUs, default waiting policies: no
 * algorithm may turn a run of about a second into minutes.
 * Every algorithm of the catalogue, each configuration in its own child
 * process with a time bound (scenario.h), so a convoy fails that pair:
 *
 *  api-8, api-32   8 / 32 threads, default attributes, each alternating
 *                  liblock_lock/liblock_unlock and liblock_execute around a
 *                  short critical section, ~1 us of work between two (so a
 *                  thread's run spans several scheduler slices and threads
 *                  really overlap); exact count on a plain counter,
 *                  an "in critical section" flag never seen set on entry,
 *                  every call returns 0 / the section's value.
 *  interpose-bbuf  an ordinary pthread program (this binary re-executed with
 *                  LIBLOCK_OVERSUB_CHILD=bbuf): a bounded buffer of 16 slots
 *                  on a pthread mutex and two condition variables, 4
 *                  producers and 4 consumers, plus a counter under a static
 *                  mutex; run with LD_PRELOAD=<build>/lib/liblock-interpose.so
 *                  LIBLOCK_LOCK=<algorithm> LIBLOCK_STRICT=1 and LIBLOCK_WAIT
 *                  unset (the default policy), it must print the exact
 *                  number and sum of the items consumed and exit 0.
 *
 *  interpose-slots rcl: 6 threads count under one pthread mutex
 *                  through the interposer with LIBLOCK_RCL_SLOTS=3, fewer
 *                  client slots than threads; every pthread_mutex_lock and
 *                  unlock returns 0 (POSIX allows nothing else for a normal
 *                  mutex), exact count, no overlap.
 *
 * The bound only catches convoys and deadlocks: with glibc or a parking
 * lock each configuration takes well under a second on 2 CPUs.  Nothing
 * here asserts speed.
 *
 * Usage: test_oversub [ALGORITHM...] [--scenario=api-8,api-32,interpose-bbuf,interpose-slots]
 * Bound per pair: 15 s (LIBLOCK_TEST_TIMEOUT overrides); critical sections
 * per thread LIBLOCK_TEST_ITERS (default 5000; the bounded buffer moves
 * 2 x that many items); LIBLOCK_TEST_WAIT=POLICY
 * replaces the default policy of the api-* pairs.
 */
#include "scenario.h"

#include <dlfcn.h>
#include <poll.h>

static long iters;

/* ---------------------------------------------------------------- lock/unlock and execute */

static struct ov {
    liblock_t L;
    struct sc_guard g;
    struct sc_gate gate;
    atomic_long errors;
    atomic_int last;
} O;

static void *ov_cs(void *arg)
{
    (void)arg;
    sc_enter(&O.g);
    sc_leave(&O.g);
    return (void *)1;
}

static void *ov_thread(void *arg)
{
    long me = (long)arg;
    sc_gate_wait(&O.gate);
    for (long i = 0; i < iters; i++) {
        int e;
        if ((i + me) % 2 == 0) {
            if ((e = liblock_lock(&O.L)) == 0) {
                ov_cs(NULL);
                e = liblock_unlock(&O.L);
            }
        } else {
            errno = 0;
            e = liblock_execute(&O.L, ov_cs, NULL) == (void *)1 ? 0 : errno ? errno : -2;
        }
        if (e) {
            atomic_fetch_add(&O.errors, 1);
            atomic_store(&O.last, e);
        }
        sc_work_ns(1000);
    }
    return NULL;
}

static void api_body(const char *algo, void *arg)
{
    long nthreads = (long)arg;
    memset(&O, 0, sizeof O);
    int e = sc_init_default(&O.L, algo);
    CHECK(e == 0, "init: %s", strerror(e));
    if (e)
        return;
    O.gate.n = (int)nthreads;
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    for (long i = 0; i < nthreads; i++)
        pthread_create(&t[i], NULL, ov_thread, (void *)i);
    for (long i = 0; i < nthreads; i++)
        pthread_join(t[i], NULL);
    free(t);
    CHECK(atomic_load(&O.errors) == 0, "%ld calls failed, last %d (%s)", (long)atomic_load(&O.errors),
          atomic_load(&O.last), strerror(atomic_load(&O.last)));
    CHECK_EQ(O.g.count, iters * nthreads);
    CHECK_EQ(O.g.violations, 0);
    CHECK_EQ(liblock_destroy(&O.L), 0);
}

/* ---------------------------------------------------------------- the pthread program */

#define BB_SLOTS 16
#define BB_PRODUCERS 4
#define BB_CONSUMERS 4

static pthread_mutex_t bb_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bb_not_full = PTHREAD_COND_INITIALIZER;
static pthread_cond_t bb_not_empty = PTHREAD_COND_INITIALIZER;
static long bb_buf[BB_SLOTS];
static int bb_head, bb_count;
static long bb_left; /* items still to be consumed */
static pthread_mutex_t total_mutex = PTHREAD_MUTEX_INITIALIZER;
static long total_items;
static long long total_sum;
static long bb_per_producer;

static void *bb_producer(void *arg)
{
    long me = (long)arg;
    for (long i = 0; i < bb_per_producer; i++) {
        pthread_mutex_lock(&bb_mutex);
        while (bb_count == BB_SLOTS)
            pthread_cond_wait(&bb_not_full, &bb_mutex);
        bb_buf[(bb_head + bb_count) % BB_SLOTS] = me * bb_per_producer + i + 1;
        bb_count++;
        pthread_cond_signal(&bb_not_empty);
        pthread_mutex_unlock(&bb_mutex);
    }
    return NULL;
}

static void *bb_consumer(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&bb_mutex);
        while (bb_count == 0 && bb_left > 0)
            pthread_cond_wait(&bb_not_empty, &bb_mutex);
        if (bb_left == 0) {
            pthread_mutex_unlock(&bb_mutex);
            return NULL;
        }
        long v = bb_buf[bb_head];
        bb_head = (bb_head + 1) % BB_SLOTS;
        bb_count--;
        if (--bb_left == 0)
            pthread_cond_broadcast(&bb_not_empty); /* wake the other consumers to leave */
        pthread_cond_signal(&bb_not_full);
        pthread_mutex_unlock(&bb_mutex);
        pthread_mutex_lock(&total_mutex);
        total_items++;
        total_sum += v;
        pthread_mutex_unlock(&total_mutex);
    }
}

static int bb_main(void)
{
    bb_per_producer = iters / 2 > 0 ? iters / 2 : 1;
    bb_left = bb_per_producer * BB_PRODUCERS;
    pthread_t p[BB_PRODUCERS], c[BB_CONSUMERS];
    for (long i = 0; i < BB_CONSUMERS; i++)
        pthread_create(&c[i], NULL, bb_consumer, (void *)i);
    for (long i = 0; i < BB_PRODUCERS; i++)
        pthread_create(&p[i], NULL, bb_producer, (void *)i);
    for (int i = 0; i < BB_PRODUCERS; i++)
        pthread_join(p[i], NULL);
    for (int i = 0; i < BB_CONSUMERS; i++)
        pthread_join(c[i], NULL);
    const char *(*active)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_lock");
    const char *name = active ? active() : NULL;
    printf("lock=%s items=%ld sum=%lld\n", name ? name : "(none)", total_items, total_sum);
    return 0;
}

/* 6 threads count under one pthread mutex; every call's return value is
 * checked (POSIX allows no error here for a normal mutex). */
#define CT_THREADS 6
static pthread_mutex_t ct_mutex = PTHREAD_MUTEX_INITIALIZER;
static volatile long ct_count;
static volatile int ct_in;
static atomic_long ct_errors, ct_violations;
static atomic_int ct_last;

static void *ct_thread(void *arg)
{
    (void)arg;
    for (long i = 0; i < bb_per_producer; i++) {
        int e = pthread_mutex_lock(&ct_mutex);
        if (e) {
            atomic_fetch_add(&ct_errors, 1);
            atomic_store(&ct_last, e);
        }
        if (ct_in)
            atomic_fetch_add(&ct_violations, 1);
        ct_in = 1;
        long c = ct_count;
        sc_pause(20);
        ct_count = c + 1;
        ct_in = 0;
        if (!e && (e = pthread_mutex_unlock(&ct_mutex)) != 0) {
            atomic_fetch_add(&ct_errors, 1);
            atomic_store(&ct_last, e);
        }
        sc_work_ns(500);
    }
    return NULL;
}

static int ct_main(void)
{
    bb_per_producer = iters / 2 > 0 ? iters / 2 : 1;
    pthread_t t[CT_THREADS];
    for (int i = 0; i < CT_THREADS; i++)
        pthread_create(&t[i], NULL, ct_thread, NULL);
    for (int i = 0; i < CT_THREADS; i++)
        pthread_join(t[i], NULL);
    const char *(*active)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_lock");
    const char *name = active ? active() : NULL;
    if (atomic_load(&ct_errors))
        fprintf(stderr, "pthread_mutex_lock/unlock failed %ld times, last %d (%s)\n", (long)atomic_load(&ct_errors),
                atomic_load(&ct_last), strerror(atomic_load(&ct_last)));
    printf("lock=%s count=%ld errors=%ld violations=%ld\n", name ? name : "(none)", ct_count,
           (long)atomic_load(&ct_errors), (long)atomic_load(&ct_violations));
    return 0;
}

static char self_path[4096], interposer[4200];

/* arg NULL: the bounded buffer; else the counter with LIBLOCK_RCL_SLOTS=3
 * (fewer RCL client slots than threads). */
static void interpose_body(const char *algo, void *arg)
{
    int counter = arg != NULL;
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        setenv("LD_PRELOAD", interposer, 1);
        setenv("LIBLOCK_LOCK", algo, 1);
        setenv("LIBLOCK_STRICT", "1", 1);
        unsetenv("LIBLOCK_WAIT"); /* the algorithm's default policy */
        setenv("LIBLOCK_OVERSUB_CHILD", counter ? "counter" : "bbuf", 1);
        if (counter)
            setenv("LIBLOCK_RCL_SLOTS", "3", 1);
        char iters_s[32];
        snprintf(iters_s, sizeof iters_s, "%ld", iters);
        setenv("LIBLOCK_TEST_ITERS", iters_s, 1);
        execl(self_path, self_path, (char *)NULL);
        _exit(126);
    }
    close(fds[1]);
    CHECK(pid > 0, "fork: %s", strerror(errno));
    if (pid < 0)
        return;
    unsigned bound = sc_bound(15);
    int rc = sc_wait_nested(pid, bound > 3 ? bound - 3 : bound, counter ? "counter program" : "bounded-buffer program");
    char out[256] = {0};
    size_t n = 0;
    struct pollfd pf = {fds[0], POLLIN, 0};
    while (n < sizeof out - 1 && poll(&pf, 1, 0) == 1) {
        ssize_t r = read(fds[0], out + n, sizeof out - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fds[0]);
    long per = iters / 2 > 0 ? iters / 2 : 1, items = per * BB_PRODUCERS;
    char want[256];
    if (counter)
        snprintf(want, sizeof want, "lock=%s count=%ld errors=0 violations=0\n", algo, per * CT_THREADS);
    else
        snprintf(want, sizeof want, "lock=%s items=%ld sum=%lld\n", algo, items, (long long)items * (items + 1) / 2);
    CHECK(rc == 0, "exit status %d (-1: killed at the bound, >= 128: signal, 127: the interposer refused)", rc);
    CHECK(strcmp(out, want) == 0, "output '%.*s', expected '%.*s'", (int)strcspn(out, "\n"), out,
          (int)strcspn(want, "\n"), want);
}

/* ---------------------------------------------------------------- driver */

int main(int argc, char **argv)
{
    iters = sc_iters(5000);
    const char *child = getenv("LIBLOCK_OVERSUB_CHILD");
    if (child && strcmp(child, "bbuf") == 0)
        return bb_main();
    if (child && strcmp(child, "counter") == 0)
        return ct_main();
    sc_setup(argc, argv);
    /* this program, re-executed as the pthread program; the interposer
     * next to it: BUILD/tests/test_oversub -> BUILD/lib/liblock-interpose.so */
    char dir[4096];
    if (!realpath("/proc/self/exe", self_path))
        snprintf(self_path, sizeof self_path, "%s", argv[0]);
    snprintf(dir, sizeof dir, "%s", self_path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    char lib[4200];
    snprintf(lib, sizeof lib, "%s/../lib/liblock-interpose.so", dir);
    char *real = realpath(lib, NULL);
    if (real) {
        snprintf(interposer, sizeof interposer, "%s", real);
        free(real);
    }
    unsigned bound = sc_bound(15);
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!sc_algo_selected(*a))
            continue;
        liblock_algorithm_info_t in;
        liblock_algorithm_info(*a, &in);
        printf("== %s (default policy %s)\n", *a, liblock_wait_name(in.default_policy));
        if (sc_scenario_selected("api-8"))
            sc_run(*a, "api-8", bound, api_body, (void *)8L);
        if (sc_scenario_selected("api-32"))
            sc_run(*a, "api-32", bound, api_body, (void *)32L);
        if (sc_scenario_selected("interpose-bbuf")) {
            CHECK(interposer[0] != 0, "interposer not found at %s (run make)", lib);
            if (interposer[0])
                sc_run(*a, "interpose-bbuf", bound, interpose_body, NULL);
        }
        if (sc_scenario_selected("interpose-slots")) {
            if (strcmp(*a, "rcl") == 0 && interposer[0])
                sc_run(*a, "interpose-slots", bound, interpose_body, (void *)1);
            else
                sc_not_applicable(*a, "interpose-slots");
        }
    }
    return sc_report("test_oversub");
}
