/*
 * test_lazy_engage - when a lazy mutex engages its algorithm by being
 * locked (docs/interpose.md, "Lazy engagement"): use by one thread, failed
 * tries and timed locks leave it lazy; a lock that finds it held engages
 * it, for the rest of its life.
 *
 * Run without arguments it is a driver (lazy_driver.h): it runs its child
 * on glibc alone, then under the interposer for every algorithm with
 * LIBLOCK_LAZY unset and with LIBLOCK_LAZY=0, under the mixed
 * configuration and under the profiler; names on the command line restrict
 * the algorithms.  "engaged" below is the value expected of
 * liblock_interpose_debug_engaged: 0 lazy, 1 engaged (1 for "lazy" under
 * LIBLOCK_LAZY=0, -1 for both under the profiler).
 *
 * The child's sections:
 *  lazy       a static PTHREAD_MUTEX_INITIALIZER mutex (-1 before its first
 *             use), the adaptive static initializer, mutexes initialised
 *             with no attribute, NORMAL, DEFAULT and ADAPTIVE, and a C11
 *             mtx_plain: 10,000 lock/unlock pairs, 1,000 trylock pairs
 *             (with the holder's trylock EBUSY), a timedlock and a clocklock
 *             of a free mutex, a condition signal and broadcast while
 *             holding it: all stay lazy; then (lazy mode) the process
 *             still has exactly one thread (/proc/self/task), which under
 *             rcl means no RCL server was started.  A delegating algorithm
 *             (or the mixed configuration) counts each hold for
 *             liblock_interpose_debug_held.
 *  nofail     another thread holds m lazily: trylock EBUSY, timedlock and
 *             clocklock ETIMEDOUT; m stays lazy.
 *  contention the main thread holds m (initialised, static, adaptive) and
 *             keeps it until a second thread, announced as about to lock,
 *             has engaged it (engaged becomes 1: polled, bounded); that
 *             thread has not returned from lock while m was held, gets m
 *             after the unlock, and m stays engaged after more use.
 *  relock     a NORMAL relock by the holder waits (and engages m) until
 *             another thread unlocks m, then holds it.
 */
#include "lazy_driver.h"

#include <threads.h>

/* Public symbol: a site of its own in the mixed configuration (rcl there). */
pthread_mutex_t lz_static = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lz_static2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lz_adaptive_static = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;

static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* ---------------------------------------------------------------- lazy */
static pthread_cond_t lz_cv = PTHREAD_COND_INITIALIZER;

static void single_thread_use(pthread_mutex_t *m, const char *what, int n)
{
    th_context = what;
    CHECK_EQ(pthread_mutex_lock(m), 0);
    long h1 = held();
    if (tracked)
        CHECK(h1 >= 1, "held count while holding: %ld", h1);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    if (tracked)
        CHECK_EQ(held(), h1 - 1);
    int bad = 0, badheld = 0;
    for (int i = 0; i < n; i++) {
        bad += pthread_mutex_lock(m) != 0;
        if (tracked)
            badheld += held() != h1;
        bad += pthread_mutex_unlock(m) != 0;
    }
    for (int i = 0; i < n / 10; i++) {
        bad += pthread_mutex_trylock(m) != 0;
        if (tracked)
            badheld += held() != h1;
        bad += pthread_mutex_trylock(m) != EBUSY; /* the holder's own try */
        bad += pthread_mutex_unlock(m) != 0;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(badheld, 0);
    struct timespec t;
    ts_after(CLOCK_REALTIME, &t, 10000);
    CHECK_EQ(pthread_mutex_timedlock(m, &t), 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    ts_after(CLOCK_MONOTONIC, &t, 10000);
    CHECK_EQ(pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &t), 0);
    /* signalling is not waiting: no engagement */
    CHECK_EQ(pthread_cond_signal(&lz_cv), 0);
    CHECK_EQ(pthread_cond_broadcast(&lz_cv), 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    if (tracked)
        CHECK_EQ(held(), h1 - 1);
    CHECK_ENG(m, w_lazy);
}

static pthread_mutex_t l_plain, l_normal, l_default, l_adaptive;

static void sec_lazy(void)
{
    int n = scale(10000);
    th_context = "static, before use";
    if (eng_fn)
        CHECK_EQ(eng(&lz_static), -1); /* not set up yet */
    single_thread_use(&lz_static, "static initializer", n);
    single_thread_use(&lz_adaptive_static, "adaptive static initializer", n);
    mk(&l_plain, -1);
    single_thread_use(&l_plain, "initialised (no attribute)", n);
    mk(&l_normal, PTHREAD_MUTEX_NORMAL);
    single_thread_use(&l_normal, "NORMAL", n);
    mk(&l_default, PTHREAD_MUTEX_DEFAULT);
    single_thread_use(&l_default, "DEFAULT", n);
    mk(&l_adaptive, PTHREAD_MUTEX_ADAPTIVE_NP);
    single_thread_use(&l_adaptive, "ADAPTIVE", n);
    th_context = "C11 mtx_plain";
    mtx_t x;
    CHECK_EQ(mtx_init(&x, mtx_plain), thrd_success);
    int bad = 0;
    for (int i = 0; i < n / 10; i++) {
        bad += mtx_lock(&x) != thrd_success;
        bad += mtx_trylock(&x) != thrd_busy;
        bad += mtx_unlock(&x) != thrd_success;
    }
    CHECK_EQ(bad, 0);
    CHECK_ENG((pthread_mutex_t *)&x, w_lazy);
    mtx_destroy(&x);
    th_context = "no thread";
    if (lazy_mode || !interposed)
        CHECK_EQ(task_count(), 1); /* under rcl: no server started */
    CHECK_EQ(pthread_mutex_destroy(&l_plain), 0);
    CHECK_EQ(pthread_mutex_destroy(&l_normal), 0);
    CHECK_EQ(pthread_mutex_destroy(&l_default), 0);
    CHECK_EQ(pthread_mutex_destroy(&l_adaptive), 0);
}

/* ---------------------------------------------------------------- nofail */
static void sec_nofail(void)
{
    th_context = "failed trylock/timedlock";
    pthread_mutex_t m;
    mk(&m, -1);
    struct holder h;
    pthread_t t;
    holder_start(&h, &t, &m, 0, 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY);
    struct timespec ts;
    ts_after(CLOCK_REALTIME, &ts, 5);
    CHECK_EQ(pthread_mutex_timedlock(&m, &ts), ETIMEDOUT);
    ts_after(CLOCK_MONOTONIC, &ts, 5);
    CHECK_EQ(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_ENG(&m, w_lazy); /* a failed try does not engage */
    atomic_store(&h.go, 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(h.unlock_r, 0);
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ---------------------------------------------------------------- contention */
static void contend_once(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_ENG(m, w_lazy);
    struct contender c;
    pthread_t t;
    contender_start(&c, &t, m); /* returns once engaged (lazy mode) */
    CHECK_ENG(m, w_eng);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    contender_join(&c, t);
    CHECK_EQ(atomic_load(&c.got), 1);
    CHECK_ENG(m, w_eng);
    /* engaged for the rest of its life: more use, alone, does not undo it */
    int bad = 0;
    for (int i = 0; i < scale(1000); i++) {
        bad += pthread_mutex_lock(m) != 0;
        bad += pthread_mutex_unlock(m) != 0;
        bad += pthread_mutex_trylock(m) != 0;
        bad += pthread_mutex_unlock(m) != 0;
    }
    CHECK_EQ(bad, 0);
    CHECK_ENG(m, w_eng);
}

static void sec_contention(void)
{
    pthread_mutex_t m, ma;
    mk(&m, -1);
    contend_once(&m, "contention, initialised");
    contend_once(&lz_static2, "contention, static");
    mk(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    contend_once(&ma, "contention, adaptive");
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&ma), 0);
}

/* ---------------------------------------------------------------- relock */
struct relocker {
    pthread_mutex_t *m;
    atomic_int tid, first, relocked;
    int r1, r2, r3;
};

static void *relocker_main(void *arg)
{
    struct relocker *r = arg;
    atomic_store(&r->tid, (int)gettid());
    r->r1 = pthread_mutex_lock(r->m);
    atomic_store(&r->first, 1);
    r->r2 = pthread_mutex_lock(r->m); /* deadlocks until another thread unlocks */
    atomic_store(&r->relocked, 1);
    r->r3 = pthread_mutex_unlock(r->m);
    return NULL;
}

static void sec_relock(void)
{
    th_context = "NORMAL relock";
    pthread_mutex_t m;
    mk(&m, PTHREAD_MUTEX_NORMAL);
    struct relocker r = {.m = &m};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, relocker_main, &r), 0);
    wait_flag(&r.first, 1);
    wait_blocked(&m, atomic_load(&r.tid));
    CHECK_EQ(atomic_load(&r.relocked), 0);
    CHECK_ENG(&m, w_eng); /* the relock found it held */
    CHECK_EQ(pthread_mutex_unlock(&m), 0); /* releases the first hold */
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(r.r1, 0);
    CHECK_EQ(r.r2, 0);
    CHECK_EQ(r.r3, 0);
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ------------------------------------------------------------------ main */
static const struct lz_section sections[] = {
    {"lazy", sec_lazy}, /* first: no thread may have been created before its count */
    {"nofail", sec_nofail},
    {"contention", sec_contention},
    {"relock", sec_relock},
    {NULL, NULL},
};

int main(int argc, char **argv) { return lz_main(argc, argv, "test_lazy_engage", sections); }
