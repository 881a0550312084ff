/*
 * test_interpose_condsem - condition variables and semaphores under the
 * LD_PRELOAD interposer behave as glibc's: cancellation, destroy right
 * after a wake-up, deadlines far in the future, and a process-shared
 * condition variable used with a private mutex.
 *
 * Run without arguments (as tests/run.sh does) it is a driver: it runs
 * itself once natively (the checks then run against glibc, which validates
 * them) and then under build/lib/liblock-interpose.so for every algorithm of
 * the registry with the `cond` property and every condition-variable kind
 * the interposer offers: the default FIFO queue (with LIBLOCK_SEM=fifo),
 * mostly-lifo (with LIBLOCK_SEM=mostly-lifo), LIBLOCK_COND=glibc and
 * LIBLOCK_COND_GENERIC=1 (the semaphore checks run in the first two only:
 * elsewhere the semaphores are glibc's).  Each child is bounded by a kill
 * after 60 s; names on the command line restrict the algorithms.
 *
 * The child is a plain pthread program.  It checks, with exact results and
 * no timing thresholds (every bound below is a watchdog that only a hang
 * reaches):
 *  1. cancellation: a thread blocked in pthread_cond_wait / timedwait /
 *     clockwait (NORMAL and ERRORCHECK mutexes), in sem_wait and in
 *     sem_timedwait is cancelled: pthread_join returns PTHREAD_CANCELED and
 *     its cleanup handler ran with the mutex held by the cancelled thread
 *     (its pthread_mutex_unlock returns 0; on the ERRORCHECK mutex that
 *     proves ownership); two waiters, the one a signal would wake
 *     cancelled, then one job posted with one pthread_cond_signal (or one
 *     unit with one sem_post): the other waiter gets it (a cancelled waiter
 *     consumes no signal / unit);
 *  2. pthread_cond_destroy right after pthread_cond_broadcast woke 24
 *     waiters (with the mutex released, and while still holding it), and
 *     sem_destroy right after the sem_post that woke a waiter, return 0;
 *  3. deadlines far in the future (tv_sec LONG_MAX, 2e10) in
 *     pthread_cond_timedwait / clockwait (both clocks, and a condition
 *     variable with the monotonic clock), cnd_timedwait, sem_timedwait,
 *     sem_clockwait, pthread_mutex_timedlock / clocklock and mtx_timedlock
 *     wait until the wake-up instead of returning ETIMEDOUT; deadlines far in
 *     the past (tv_sec -1, LONG_MIN) give ETIMEDOUT;
 *  4. a process-shared condition variable with a private mutex: wait,
 *     timedwait, broadcast, cancellation and a timeout work (no EINVAL).
 * LIBLOCK_TEST_ITEMS (say "234") restricts the child to some of the four
 * parts and LIBLOCK_TEST_CHILD_TIMEOUT shortens its watchdog (to show each
 * part failing on its own against an older interposer, named by
 * LIBLOCK_TEST_INTERPOSER).
 * A waiter counts as blocked once the main thread has taken the mutex it
 * released inside the wait and /proc shows the thread asleep.
 */
#include "harness.h"

#include <limits.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <threads.h>

/* ---------------------------------------------------------------- driver */
static int run_child(const char *prog, const char *lib, const char *algo, const char *const *envs)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        th_unset_interposer_env();
        unsetenv("LD_PRELOAD");
        if (lib) {
            setenv("LD_PRELOAD", lib, 1);
            setenv("LIBLOCK_LOCK", algo, 1);
            setenv("LIBLOCK_STRICT", "1", 1);
        }
        setenv("LIBLOCK_CONDSEM_CHILD", "1", 1);
        for (const char *const *e = envs; *e; e++)
            putenv((char *)*e);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    char what[256];
    snprintf(what, sizeof what, "%s under %s", prog, algo ? algo : "glibc");
    return th_wait_child(pid, 60, what);
}

struct kind {
    const char *name;
    const char *envs[4];
};

static const struct kind kinds[] = {
    {"fifo", {"LIBLOCK_SEM=fifo", "LIBLOCK_TEST_SEM=1", NULL}},
    {"mostly-lifo", {"LIBLOCK_COND=mostly-lifo", "LIBLOCK_SEM=mostly-lifo", "LIBLOCK_TEST_SEM=1", NULL}},
    {"glibc", {"LIBLOCK_COND=glibc", NULL}},
    {"generic", {"LIBLOCK_COND_GENERIC=1", NULL}},
};

static int driver(int argc, char **argv)
{
    char *real = th_interposer(argv[0]); /* or LIBLOCK_TEST_INTERPOSER's (to show a failure) */
    if (!real)
        return th_report("test_interpose_condsem");
    uint64_t t0 = th_now_ns();
    static const char *const native_env[] = {"LIBLOCK_TEST_SEM=1", NULL};
    int rc = run_child(argv[0], NULL, NULL, native_env);
    CHECK(rc == 0, "natively (glibc): exit %d", rc);
    printf("  glibc (native): %s (%.1f s)\n", rc == 0 ? "ok" : "FAILED", (th_now_ns() - t0) / 1e9);
    fflush(stdout);
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        liblock_algorithm_info_t in;
        if (!th_selected(argc, argv, *a) || liblock_algorithm_info(*a, &in) || !(in.properties & LIBLOCK_PROP_COND))
            continue;
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
            t0 = th_now_ns();
            rc = run_child(argv[0], real, *a, kinds[k].envs);
            CHECK(rc == 0, "under %s, condition kind %s: exit %d", *a, kinds[k].name, rc);
            printf("  %-15s %-12s %s (%.1f s)\n", *a, kinds[k].name, rc == 0 ? "ok" : "FAILED",
                   (th_now_ns() - t0) / 1e9);
            fflush(stdout);
        }
    }
    free(real);
    return th_report("test_interpose_condsem");
}

/* ---------------------------------------------------------------- helpers */
#define JOIN_S 5 /* watchdog per join: only a hang reaches it */

static int join_within(pthread_t t, void **ret, int seconds)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    return pthread_timedjoin_np(t, ret, &ts);
}

/* Wait until thread tid sleeps in the kernel ('S' in /proc), at most ~5 s. */
static int wait_asleep(pid_t tid)
{
    for (int i = 0; i < 25000; i++) {
        int st = th_task_sleeping(tid);
        if (st != 0)
            return st > 0 ? 0 : -1; /* -1: the thread has ended: its wait failed */
        usleep(200);
    }
    return -1;
}

/* ------------------------------------------------- one waiter on a condition */
enum { W_WAIT, W_TIMED, W_CLOCK_MONO, W_CLOCK_REAL, W_CND };

struct waiter {
    pthread_mutex_t *m;
    pthread_cond_t *c;
    int how;
    struct timespec deadline; /* timed kinds */
    int *pred;                /* wait while *pred == 0; then (*pred)-- */
    _Atomic pid_t tid;
    _Atomic int entered;      /* set under m just before the first wait */
    _Atomic int handler_ran;
    _Atomic int unlock_rc;
    _Atomic int result;       /* the last wait's result */
    _Atomic int got;          /* took a job */
};

static void waiter_cleanup(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->unlock_rc, pthread_mutex_unlock(w->m)); /* must be ours: we were cancelled in the wait */
    atomic_store(&w->handler_ran, 1);
}

static int wait_once(struct waiter *w)
{
    switch (w->how) {
    case W_TIMED:
        return pthread_cond_timedwait(w->c, w->m, &w->deadline);
    case W_CLOCK_MONO:
        return pthread_cond_clockwait(w->c, w->m, CLOCK_MONOTONIC, &w->deadline);
    case W_CLOCK_REAL:
        return pthread_cond_clockwait(w->c, w->m, CLOCK_REALTIME, &w->deadline);
    case W_CND: {
        int r = cnd_timedwait((cnd_t *)w->c, (mtx_t *)w->m, &w->deadline);
        return r == thrd_success ? 0 : r == thrd_timedout ? ETIMEDOUT : EINVAL;
    }
    default:
        return pthread_cond_wait(w->c, w->m);
    }
}

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    atomic_store(&w->tid, gettid());
    pthread_mutex_lock(w->m);
    pthread_cleanup_push(waiter_cleanup, w);
    atomic_store(&w->entered, 1);
    int r = 0;
    while (*w->pred == 0) {
        r = wait_once(w);
        if (r)
            break; /* an error or a timeout: report it, never spin holding the mutex */
    }
    atomic_store(&w->result, r);
    if (r == 0) {
        (*w->pred)--;
        atomic_store(&w->got, 1);
    }
    pthread_cleanup_pop(0);
    pthread_mutex_unlock(w->m);
    return NULL;
}

/* Start w and return once it is blocked in its wait (0), or -1. */
static int start_waiter(pthread_t *t, struct waiter *w)
{
    atomic_store(&w->entered, 0);
    atomic_store(&w->tid, 0);
    atomic_store(&w->handler_ran, 0);
    atomic_store(&w->unlock_rc, -1);
    atomic_store(&w->result, -1);
    atomic_store(&w->got, 0);
    if (pthread_create(t, NULL, waiter_main, w))
        return -1;
    for (int i = 0; i < 25000 && !atomic_load(&w->entered); i++)
        usleep(200);
    pthread_mutex_lock(w->m); /* free again only once the waiter released it inside the wait */
    pthread_mutex_unlock(w->m);
    return atomic_load(&w->entered) ? wait_asleep(atomic_load(&w->tid)) : -1;
}

/* A waiter that did not end: wake everything and give up on this process. */
static void rescue(pthread_t t, struct waiter *w, const char *what)
{
    fprintf(stderr, "FAIL [%s] %s: the thread did not end within %d s\n", th_context, what, JOIN_S);
    th_failures++;
    pthread_mutex_lock(w->m);
    *w->pred += 100;
    pthread_cond_broadcast(w->c);
    pthread_mutex_unlock(w->m);
    if (join_within(t, NULL, JOIN_S)) {
        th_report("test_interpose_condsem (child)");
        fflush(NULL);
        _exit(1);
    }
}

/* ------------------------------------------------------------ 1. cancellation */
static const char *how_name(int how)
{
    static const char *const n[] = {"pthread_cond_wait", "pthread_cond_timedwait", "pthread_cond_clockwait(MONOTONIC)",
                                    "pthread_cond_clockwait(REALTIME)", "cnd_timedwait"};
    return n[how];
}

static void deadline_for(struct waiter *w, long ms)
{
    ts_after(w->how == W_CLOCK_MONO ? CLOCK_MONOTONIC : CLOCK_REALTIME, &w->deadline, ms);
}

static void cancel_blocked(pthread_cond_t *c, int how, int type)
{
    char ctx[128];
    snprintf(ctx, sizeof ctx, "cancel in %s, %s mutex", how_name(how),
             type == PTHREAD_MUTEX_ERRORCHECK ? "ERRORCHECK" : "NORMAL");
    th_context = ctx;
    pthread_mutex_t m;
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_settype(&ma, type);
    pthread_mutex_init(&m, &ma);
    pthread_mutexattr_destroy(&ma);
    int pred = 0;
    struct waiter w = {.m = &m, .c = c, .how = how, .pred = &pred};
    deadline_for(&w, 60000);
    pthread_t t;
    CHECK_EQ(start_waiter(&t, &w), 0);
    CHECK_EQ(pthread_cancel(t), 0);
    void *ret = NULL;
    if (join_within(t, &ret, JOIN_S)) {
        rescue(t, &w, "cancelled waiter");
    } else {
        CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        CHECK_EQ(atomic_load(&w.handler_ran), 1);
        CHECK_EQ(atomic_load(&w.unlock_rc), 0); /* the cleanup handler held the mutex */
    }
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* Two waiters; cancel the one `victim`, then one job and one signal: the
 * other must take it.  delay_us: between the cancel and the signal. */
static void cancel_no_consume(pthread_cond_t *c, int how, int victim, int delay_us)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "two waiters in %s, cancel waiter %d, signal %d us later", how_name(how), victim,
             delay_us);
    th_context = ctx;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int jobs = 0;
    struct waiter w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        w[i] = (struct waiter){.m = &m, .c = c, .how = how, .pred = &jobs};
        deadline_for(&w[i], 60000);
        CHECK_EQ(start_waiter(&t[i], &w[i]), 0);
    }
    CHECK_EQ(pthread_cancel(t[victim]), 0);
    if (delay_us)
        usleep(delay_us);
    pthread_mutex_lock(&m);
    jobs = 1;
    pthread_cond_signal(c);
    pthread_mutex_unlock(&m);
    void *ret = NULL;
    if (join_within(t[victim], &ret, JOIN_S)) {
        rescue(t[victim], &w[victim], "cancelled waiter");
    } else {
        CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        CHECK_EQ(atomic_load(&w[victim].unlock_rc), 0);
    }
    int other = 1 - victim;
    if (join_within(t[other], &ret, JOIN_S)) {
        rescue(t[other], &w[other], "the other waiter (the cancelled one consumed the signal?)");
    } else {
        CHECK_EQ(atomic_load(&w[other].got), 1);
        CHECK_EQ(atomic_load(&w[other].result), 0);
    }
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ---- semaphores */
struct semw {
    sem_t *s;
    int timed;
    _Atomic pid_t tid;
    _Atomic int handler_ran, got, result;
};

static void semw_cleanup(void *arg) { atomic_store(&((struct semw *)arg)->handler_ran, 1); }

static void *semw_main(void *arg)
{
    struct semw *w = arg;
    atomic_store(&w->tid, gettid());
    pthread_cleanup_push(semw_cleanup, w);
    int r;
    if (w->timed) {
        struct timespec d;
        ts_after(CLOCK_REALTIME, &d, 60000);
        r = sem_timedwait(w->s, &d);
    } else {
        r = sem_wait(w->s);
    }
    atomic_store(&w->result, r ? errno : 0);
    atomic_store(&w->got, r == 0);
    pthread_cleanup_pop(0);
    return NULL;
}

static int start_semw(pthread_t *t, struct semw *w)
{
    atomic_store(&w->tid, 0);
    atomic_store(&w->handler_ran, 0);
    atomic_store(&w->got, 0);
    atomic_store(&w->result, -1);
    if (pthread_create(t, NULL, semw_main, w))
        return -1;
    for (int i = 0; i < 25000 && !atomic_load(&w->tid); i++)
        usleep(200);
    return atomic_load(&w->tid) ? wait_asleep(atomic_load(&w->tid)) : -1;
}

static void sem_rescue(pthread_t t, sem_t *s, const char *what)
{
    fprintf(stderr, "FAIL [%s] %s: the thread did not end within %d s\n", th_context, what, JOIN_S);
    th_failures++;
    sem_post(s);
    if (join_within(t, NULL, JOIN_S)) {
        th_report("test_interpose_condsem (child)");
        fflush(NULL);
        _exit(1);
    }
}

static void sem_cancel(int timed)
{
    char ctx[96];
    snprintf(ctx, sizeof ctx, "cancel in %s", timed ? "sem_timedwait" : "sem_wait");
    th_context = ctx;
    sem_t s;
    CHECK_EQ(sem_init(&s, 0, 0), 0);
    struct semw w = {.s = &s, .timed = timed};
    pthread_t t;
    CHECK_EQ(start_semw(&t, &w), 0);
    CHECK_EQ(pthread_cancel(t), 0);
    void *ret = NULL;
    if (join_within(t, &ret, JOIN_S)) {
        sem_rescue(t, &s, "cancelled sem waiter");
    } else {
        CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        CHECK_EQ(atomic_load(&w.handler_ran), 1);
    }
    /* two waiters, one cancelled, then one unit: the other gets it, the
     * cancelled one took none.  concurrent: the post right after the
     * cancel; glibc may then leave the unit in the semaphore without waking
     * the other waiter (its sem_post's wake-up can go to the cancelled
     * thread), so a unit still there counts as kept, not lost. */
    for (int round = 0; round < 4; round++) {
        int victim = round & 1, concurrent = round >> 1;
        struct semw v[2] = {{.s = &s, .timed = timed}, {.s = &s, .timed = timed}};
        pthread_t vt[2];
        CHECK_EQ(start_semw(&vt[0], &v[0]), 0);
        CHECK_EQ(start_semw(&vt[1], &v[1]), 0);
        CHECK_EQ(pthread_cancel(vt[victim]), 0);
        if (concurrent)
            CHECK_EQ(sem_post(&s), 0);
        if (join_within(vt[victim], &ret, JOIN_S)) {
            sem_rescue(vt[victim], &s, "cancelled sem waiter");
        } else {
            CHECK(ret == PTHREAD_CANCELED, "join returned %p, not PTHREAD_CANCELED", ret);
        }
        if (!concurrent)
            CHECK_EQ(sem_post(&s), 0);
        int other = 1 - victim, kept = 0;
        for (int i = 0; i < 25000 && !atomic_load(&v[other].got); i++) {
            if (concurrent && sem_trywait(&s) == 0) {
                kept = 1; /* still in the semaphore: give the waiter a unit of its own */
                CHECK_EQ(sem_post(&s), 0);
                break;
            }
            usleep(200);
        }
        CHECK(concurrent || !kept, "unreachable");
        if (join_within(vt[other], &ret, JOIN_S)) {
            sem_rescue(vt[other], &s, "the other sem waiter (the cancelled one kept the unit?)");
        } else {
            CHECK_EQ(atomic_load(&v[other].got), 1);
        }
        int val = -1;
        CHECK_EQ(sem_getvalue(&s, &val), 0);
        CHECK_EQ(val, 0);
    }
    CHECK_EQ(sem_destroy(&s), 0);
}

/* ------------------------------------------------ 2. destroy right after wake */
#define NDESTROY 24

struct bw {
    pthread_mutex_t *m;
    pthread_cond_t *c;
    int *go;
    _Atomic int *inside;
};

static void *bw_main(void *arg)
{
    struct bw *b = arg;
    pthread_mutex_lock(b->m);
    atomic_fetch_add(b->inside, 1);
    while (!*b->go)
        pthread_cond_wait(b->c, b->m);
    pthread_mutex_unlock(b->m);
    return NULL;
}

static void destroy_after_broadcast(int under_lock, int rounds)
{
    th_context = under_lock ? "destroy right after broadcast, mutex held" : "destroy right after broadcast";
    for (int r = 0; r < rounds; r++) {
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_cond_t *c = malloc(sizeof *c);
        CHECK_EQ(pthread_cond_init(c, NULL), 0);
        int go = 0;
        _Atomic int inside = 0;
        struct bw b = {&m, c, &go, &inside};
        pthread_t t[NDESTROY];
        for (int i = 0; i < NDESTROY; i++)
            CHECK_EQ(pthread_create(&t[i], NULL, bw_main, &b), 0);
        for (int i = 0; i < 25000; i++) {
            pthread_mutex_lock(&m);
            int n = atomic_load(&inside);
            pthread_mutex_unlock(&m);
            if (n == NDESTROY)
                break;
            usleep(200);
        }
        pthread_mutex_lock(&m);
        go = 1;
        pthread_cond_broadcast(c);
        if (!under_lock)
            pthread_mutex_unlock(&m);
        int e = pthread_cond_destroy(c);
        CHECK(e == 0, "round %d: pthread_cond_destroy = %d (%s)", r, e, strerror(e));
        if (under_lock)
            pthread_mutex_unlock(&m);
        if (e == 0) {
            memset(c, 0xa5, sizeof *c); /* a woken waiter must no longer touch it */
            free(c);
        }
        for (int i = 0; i < NDESTROY; i++)
            if (join_within(t[i], NULL, JOIN_S)) {
                fprintf(stderr, "FAIL [%s] waiter %d did not end\n", th_context, i);
                th_report("test_interpose_condsem (child)");
                _exit(1);
            }
        pthread_mutex_destroy(&m);
    }
}

static void sem_destroy_after_post(int rounds)
{
    th_context = "sem_destroy right after the sem_post that woke the waiter";
    for (int r = 0; r < rounds; r++) {
        sem_t *s = malloc(sizeof *s);
        CHECK_EQ(sem_init(s, 0, 0), 0);
        struct semw w = {.s = s};
        pthread_t t;
        CHECK_EQ(start_semw(&t, &w), 0);
        CHECK_EQ(sem_post(s), 0);
        int e = sem_destroy(s);
        CHECK(e == 0, "round %d: sem_destroy = %d (errno %s)", r, e, strerror(errno));
        if (join_within(t, NULL, JOIN_S)) {
            fprintf(stderr, "FAIL [%s] the waiter did not end\n", th_context);
            _exit(1);
        }
        CHECK_EQ(atomic_load(&w.got), 1);
        if (e == 0) {
            memset(s, 0xa5, sizeof *s);
            free(s);
        }
    }
}

/* ------------------------------------------------------- 3. far deadlines */
static const time_t far_secs[] = {LONG_MAX, 20000000000L};

static void far_cond(pthread_cond_t *c, int how, time_t sec, long nsec)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld", how_name(how), (long long)sec);
    th_context = ctx;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int pred = 0;
    struct waiter w = {.m = &m, .c = c, .how = how, .pred = &pred, .deadline = {sec, nsec}};
    pthread_t t;
    CHECK_EQ(start_waiter(&t, &w), 0);
    pthread_mutex_lock(&m);
    pred = 1;
    pthread_cond_signal(c);
    pthread_mutex_unlock(&m);
    if (join_within(t, NULL, JOIN_S)) {
        rescue(t, &w, "far-deadline waiter");
        return;
    }
    CHECK(atomic_load(&w.result) == 0, "the wait returned %d (%s) instead of being signalled",
          atomic_load(&w.result), strerror(atomic_load(&w.result)));
    CHECK_EQ(atomic_load(&w.got), 1);
}

static void past_cond(pthread_cond_t *c, int how, time_t sec)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld", how_name(how), (long long)sec);
    th_context = ctx;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    int pred = 0;
    struct waiter w = {.m = &m, .c = c, .how = how, .pred = &pred, .deadline = {sec, 0}};
    pthread_mutex_lock(&m);
    CHECK_EQ(wait_once(&w), ETIMEDOUT);
    pthread_mutex_unlock(&m);
}

struct semfar {
    sem_t *s;
    int clk; /* -1: sem_timedwait */
    struct timespec d;
    _Atomic pid_t tid;
    _Atomic int result;
};

static void *semfar_main(void *arg)
{
    struct semfar *f = arg;
    atomic_store(&f->tid, gettid());
    int r = f->clk < 0 ? sem_timedwait(f->s, &f->d) : sem_clockwait(f->s, f->clk, &f->d);
    atomic_store(&f->result, r ? errno : 0);
    return NULL;
}

static void far_sem(int clk, time_t sec)
{
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld",
             clk < 0 ? "sem_timedwait" : clk == CLOCK_MONOTONIC ? "sem_clockwait(MONOTONIC)" : "sem_clockwait(REALTIME)",
             (long long)sec);
    th_context = ctx;
    sem_t s;
    CHECK_EQ(sem_init(&s, 0, 0), 0);
    struct semfar f = {.s = &s, .clk = clk, .d = {sec, 0}, .result = -1};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, semfar_main, &f), 0);
    for (int i = 0; i < 25000 && !atomic_load(&f.tid); i++)
        usleep(200);
    CHECK_EQ(wait_asleep(atomic_load(&f.tid)), 0);
    CHECK_EQ(sem_post(&s), 0);
    if (join_within(t, NULL, JOIN_S)) {
        sem_rescue(t, &s, "far-deadline sem waiter");
        return;
    }
    CHECK(atomic_load(&f.result) == 0, "returned %d (%s) instead of taking the posted unit", atomic_load(&f.result),
          strerror(atomic_load(&f.result)));
    if (sec < 0) {
        /* and a deadline in the past with no unit: ETIMEDOUT at once */
    }
    sem_destroy(&s);
}

struct mfar {
    pthread_mutex_t *m;
    int kind; /* 0 timedlock, 1 clocklock MONOTONIC, 2 mtx_timedlock */
    struct timespec d;
    _Atomic pid_t tid;
    _Atomic int result;
};

static void *mfar_main(void *arg)
{
    struct mfar *f = arg;
    atomic_store(&f->tid, gettid());
    int r;
    if (f->kind == 0)
        r = pthread_mutex_timedlock(f->m, &f->d);
    else if (f->kind == 1)
        r = pthread_mutex_clocklock(f->m, CLOCK_MONOTONIC, &f->d);
    else
        r = mtx_timedlock((mtx_t *)f->m, &f->d) == thrd_success ? 0 : ETIMEDOUT;
    atomic_store(&f->result, r);
    if (r == 0)
        pthread_mutex_unlock(f->m);
    return NULL;
}

static void far_mutex(int kind, time_t sec)
{
    static const char *const names[] = {"pthread_mutex_timedlock", "pthread_mutex_clocklock(MONOTONIC)",
                                        "mtx_timedlock"};
    char ctx[160];
    snprintf(ctx, sizeof ctx, "%s with tv_sec %lld", names[kind], (long long)sec);
    th_context = ctx;
    pthread_mutex_t m;
    if (kind == 2) {
        CHECK_EQ(mtx_init((mtx_t *)&m, mtx_timed), thrd_success);
    } else {
        pthread_mutex_init(&m, NULL);
    }
    pthread_mutex_lock(&m);
    struct mfar f = {.m = &m, .kind = kind, .d = {sec, 0}, .result = -1};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, mfar_main, &f), 0);
    for (int i = 0; i < 25000 && !atomic_load(&f.tid); i++)
        usleep(200);
    usleep(5000); /* let it try; a wrong deadline returns at once */
    pthread_mutex_unlock(&m);
    if (join_within(t, NULL, JOIN_S)) {
        fprintf(stderr, "FAIL [%s] the timed locker did not end\n", th_context);
        _exit(1);
    }
    CHECK_EQ(atomic_load(&f.result), 0);
    pthread_mutex_destroy(&m);
}

/* --------------------------------------- 4. process-shared cond, private mutex */
static void pshared_private(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    pthread_cond_t c;
    CHECK_EQ(pthread_cond_init(&c, &ca), 0);
    static const int hows[] = {W_WAIT, W_TIMED, W_CLOCK_MONO};
    for (size_t i = 0; i < 3; i++) {
        char ctx[128];
        snprintf(ctx, sizeof ctx, "process-shared condition, private mutex, %s", how_name(hows[i]));
        th_context = ctx;
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        int pred = 0;
        struct waiter w[2];
        pthread_t t[2];
        for (int k = 0; k < 2; k++) {
            w[k] = (struct waiter){.m = &m, .c = &c, .how = hows[i], .pred = &pred};
            deadline_for(&w[k], 60000);
            CHECK_EQ(start_waiter(&t[k], &w[k]), 0);
        }
        pthread_mutex_lock(&m);
        pred = 1;
        pthread_cond_signal(&c); /* one of them */
        pthread_mutex_unlock(&m);
        int got = 0;
        for (int j = 0; j < 25000 && got == 0; j++) {
            got = atomic_load(&w[0].got) + atomic_load(&w[1].got);
            if (!got)
                usleep(200);
        }
        CHECK(got == 1, "%d waiters took the job after one signal", got);
        pthread_mutex_lock(&m);
        pred += 1;
        pthread_cond_broadcast(&c); /* the other */
        pthread_mutex_unlock(&m);
        for (int k = 0; k < 2; k++) {
            if (join_within(t[k], NULL, JOIN_S)) {
                rescue(t[k], &w[k], "waiter on a process-shared condition");
                continue;
            }
            CHECK(atomic_load(&w[k].result) == 0, "waiter %d: the wait returned %d (%s)", k,
                  atomic_load(&w[k].result), strerror(atomic_load(&w[k].result)));
        }
        pthread_mutex_destroy(&m);
    }
    th_context = "process-shared condition, private mutex, timeout";
    {
        pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
        pthread_mutex_lock(&m);
        struct timespec d;
        ts_after(CLOCK_REALTIME, &d, 20);
        CHECK_EQ(pthread_cond_timedwait(&c, &m, &d), ETIMEDOUT);
        CHECK(ts_reached(CLOCK_REALTIME, &d), "timed out early");
        CHECK_EQ(pthread_mutex_unlock(&m), 0);
    }
    cancel_blocked(&c, W_WAIT, PTHREAD_MUTEX_ERRORCHECK);
    th_context = "process-shared condition, private mutex";
    CHECK_EQ(pthread_cond_destroy(&c), 0);
    pthread_condattr_destroy(&ca);
}

/* ------------------------------------------------------------------ child */
static int item(char n)
{
    const char *s = getenv("LIBLOCK_TEST_ITEMS");
    return !s || !*s || strchr(s, n);
}

static int child(void)
{
    const char *ct = getenv("LIBLOCK_TEST_CHILD_TIMEOUT"); /* (LIBLOCK_TEST_TIMEOUT would bound the driver too) */
    if (ct && *ct)
        setenv("LIBLOCK_TEST_TIMEOUT", ct, 1);
    th_watchdog(50);
    int sems = getenv("LIBLOCK_TEST_SEM") != NULL;
    pthread_cond_t c, cm;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    CHECK_EQ(pthread_cond_init(&c, NULL), 0);
    CHECK_EQ(pthread_cond_init(&cm, &ca), 0);
    pthread_condattr_destroy(&ca);

    /* 1. cancellation */
    for (int once = item('1'); once; once = 0) {
    for (int how = W_WAIT; how <= W_CLOCK_REAL; how++)
        cancel_blocked(&c, how, PTHREAD_MUTEX_ERRORCHECK);
    cancel_blocked(&c, W_WAIT, PTHREAD_MUTEX_NORMAL);
    cancel_blocked(&cm, W_TIMED, PTHREAD_MUTEX_NORMAL);
    for (int victim = 0; victim < 2; victim++)
        for (int d = 0; d < 2; d++)
            cancel_no_consume(&c, W_WAIT, victim, d ? 2000 : 0);
    cancel_no_consume(&c, W_TIMED, 0, 0);
    cancel_no_consume(&c, W_TIMED, 1, 0);
    if (sems) {
        sem_cancel(0);
        sem_cancel(1);
    }
    }

    /* 2. destroy right after the wake-up */
    if (item('2')) {
        destroy_after_broadcast(0, 4);
        destroy_after_broadcast(1, 2);
        if (sems)
            sem_destroy_after_post(4);
    }

    /* 3. deadlines far away */
    for (size_t i = 0; i < sizeof far_secs / sizeof *far_secs && item('3'); i++) {
        time_t s = far_secs[i];
        far_cond(&c, W_TIMED, s, 0);
        far_cond(&c, W_CLOCK_MONO, s, 0);
        far_cond(&c, W_CLOCK_REAL, s, 999999999);
        far_cond(&cm, W_TIMED, s, 0);
        far_cond(&c, W_CND, s, 0);
        if (sems) {
            far_sem(-1, s);
            far_sem(CLOCK_MONOTONIC, s);
            far_sem(CLOCK_REALTIME, s);
        }
        far_mutex(0, s);
        far_mutex(1, s);
        far_mutex(2, s);
    }
    static const time_t past[] = {-1, LONG_MIN};
    for (size_t i = 0; i < 2 && item('3'); i++) {
        past_cond(&c, W_TIMED, past[i]);
        past_cond(&c, W_CLOCK_MONO, past[i]);
        past_cond(&cm, W_TIMED, past[i]);
        if (sems) {
            th_context = "sem_timedwait with a deadline far in the past";
            sem_t s;
            sem_init(&s, 0, 0);
            struct timespec d = {past[i], 0};
            errno = 0;
            CHECK_EQ(sem_timedwait(&s, &d), -1);
            CHECK_EQ(errno, ETIMEDOUT);
            errno = 0;
            CHECK_EQ(sem_clockwait(&s, CLOCK_MONOTONIC, &d), -1);
            CHECK_EQ(errno, ETIMEDOUT);
            sem_destroy(&s);
        }
    }

    /* 4. process-shared condition variable, private mutex */
    if (item('4'))
        pshared_private();

    th_context = "end";
    CHECK_EQ(pthread_cond_destroy(&c), 0);
    CHECK_EQ(pthread_cond_destroy(&cm), 0);
    return th_report(getenv("LIBLOCK_LOCK") ? "test_interpose_condsem (child under the interposer)"
                                            : "test_interpose_condsem (child, glibc)");
}

int main(int argc, char **argv)
{
    if (getenv("LIBLOCK_CONDSEM_CHILD"))
        return child();
    th_watchdog(900);
    return driver(argc, argv);
}
