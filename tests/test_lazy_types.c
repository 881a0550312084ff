/*
 * test_lazy_types - the mutexes that never use lazy mode
 * (docs/interpose.md, "Lazy engagement"): RECURSIVE, ERRORCHECK,
 * process-shared and robust ones keep their semantics and report no lazy
 * mode.
 *
 * Run without arguments it is a driver (lazy_driver.h): it runs its child
 * on glibc alone, then under the interposer for every algorithm with
 * LIBLOCK_LAZY unset and with LIBLOCK_LAZY=0, under the mixed
 * configuration and under the profiler; names on the command line restrict
 * the algorithms.  "engaged" below is the value expected of
 * liblock_interpose_debug_engaged: 0 lazy, 1 engaged (1 for "lazy" under
 * LIBLOCK_LAZY=0, -1 for both under the profiler).
 *
 * The child's section:
 *  types      RECURSIVE and ERRORCHECK (initialised and static), and
 *             process-shared and robust NORMAL mutexes report -1, before
 *             and after contention, and keep their semantics (recursive
 *             counts, errorcheck EDEADLK/EPERM, EBUSY, exact counters).
 */
#include "lazy_driver.h"

static pthread_mutex_t lz_rec_static = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t lz_ec_static = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;

/* ---------------------------------------------------------------- types */
static long ty_counter;
static pthread_mutex_t *ty_m;
static int ty_recursive;

static void *ty_worker(void *arg)
{
    long bad = 0;
    for (int i = 0; i < scale(2000); i++) {
        bad += pthread_mutex_lock(ty_m) != 0;
        if (ty_recursive && (i & 1)) {
            bad += pthread_mutex_lock(ty_m) != 0;
            ty_counter++;
            bad += pthread_mutex_unlock(ty_m) != 0;
        } else {
            ty_counter++;
        }
        bad += pthread_mutex_unlock(ty_m) != 0;
    }
    *(long *)arg = bad;
    return NULL;
}

static void contend_counter(pthread_mutex_t *m, int recursive)
{
    ty_m = m;
    ty_recursive = recursive;
    ty_counter = 0;
    long b1 = -1, b2 = -1;
    pthread_t t1, t2;
    CHECK_EQ(pthread_create(&t1, NULL, ty_worker, &b1), 0);
    CHECK_EQ(pthread_create(&t2, NULL, ty_worker, &b2), 0);
    CHECK_EQ(pthread_join(t1, NULL), 0);
    CHECK_EQ(pthread_join(t2, NULL), 0);
    CHECK_EQ(b1, 0);
    CHECK_EQ(b2, 0);
    CHECK_EQ(ty_counter, 2L * scale(2000));
}

static void check_recursive(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_ENG(m, -1);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_trylock(m), 0);
    CHECK_ENG(m, -1);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(in_thread(m, OP_UNLOCK), EPERM);
    CHECK_EQ(pthread_mutex_destroy(m), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY); /* still held once */
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_mutex_unlock(m), EPERM);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), 0);
    contend_counter(m, 1);
    CHECK_ENG(m, -1);
}

static void check_errorcheck(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_ENG(m, -1);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_lock(m), EDEADLK);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    CHECK_ENG(m, -1);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(in_thread(m, OP_UNLOCK), EPERM);
    CHECK_EQ(pthread_mutex_destroy(m), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_mutex_unlock(m), EPERM);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), 0);
    contend_counter(m, 0);
    CHECK_ENG(m, -1);
}

static void check_glibc_normal(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_ENG(m, -1);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    contend_counter(m, 0);
    CHECK_ENG(m, -1);
}

static void sec_types(void)
{
    pthread_mutex_t r, e, ps, rb;
    pthread_mutexattr_t a;
    mk(&r, PTHREAD_MUTEX_RECURSIVE);
    check_recursive(&r, "RECURSIVE");
    check_recursive(&lz_rec_static, "RECURSIVE static initializer");
    mk(&e, PTHREAD_MUTEX_ERRORCHECK);
    check_errorcheck(&e, "ERRORCHECK");
    check_errorcheck(&lz_ec_static, "ERRORCHECK static initializer");
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    CHECK_EQ(pthread_mutex_init(&ps, &a), 0);
    pthread_mutexattr_destroy(&a);
    check_glibc_normal(&ps, "process-shared NORMAL");
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    CHECK_EQ(pthread_mutex_init(&rb, &a), 0);
    pthread_mutexattr_destroy(&a);
    check_glibc_normal(&rb, "robust NORMAL");
    CHECK_EQ(pthread_mutex_destroy(&r), 0);
    CHECK_EQ(pthread_mutex_destroy(&e), 0);
    CHECK_EQ(pthread_mutex_destroy(&ps), 0);
    CHECK_EQ(pthread_mutex_destroy(&rb), 0);
}

/* ------------------------------------------------------------------ main */
static const struct lz_section sections[] = {
    {"types", sec_types},
    {NULL, NULL},
};

int main(int argc, char **argv) { return lz_main(argc, argv, "test_lazy_types", sections); }
