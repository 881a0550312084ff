/*
 * test_lazy_single - lazy mutexes of a process that has one thread
 * (src/shim/mutex.c: while __libc_single_threaded is set, the lazy lock and
 * unlock are a load and a plain store instead of the compare-and-swap),
 * and the moments that path meets the ordinary one.
 *
 * Run without arguments it is a driver (lazy_driver.h): glibc alone, then
 * the interposer for every algorithm, lazy and LIBLOCK_LAZY=0, the mixed
 * configuration and the profiler.
 *
 * The child's section (the first thing the child does, so the process has
 * one thread; the part that needs it is skipped, and said so, if it does
 * not):
 *  single   with one thread: lock, a trylock by the same thread (EBUSY),
 *           unlock, relock; an ERRORCHECK relock (EDEADLK) and a foreign
 *           unlock are glibc's;
 *           a mutex taken with one thread, then a thread created: that
 *           thread's lock blocks (and engages the mutex), the unlock by
 *           the first thread lets it in, the counts are exact;
 *           a mutex taken by the first thread while a second one exists,
 *           then a fork: the child (one thread again) unlocks it, locks it
 *           and unlocks it, exits 0;
 *           a mutex locked lazily with one thread and waited on with a
 *           condition once a thread exists (the wait engages it): the
 *           signal comes, the mutex is held again after the wait.
 */
#include "lazy_driver.h"

#include <sys/single_threaded.h>

static pthread_mutex_t s_a = PTHREAD_MUTEX_INITIALIZER, s_b = PTHREAD_MUTEX_INITIALIZER,
                       s_c = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t s_cv = PTHREAD_COND_INITIALIZER;
static int s_flag;

static void *signaller(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&s_c);
    s_flag = 1;
    pthread_cond_signal(&s_cv);
    pthread_mutex_unlock(&s_c);
    return NULL;
}

static void *sleeper(void *arg)
{
    wait_flag(arg, 1);
    return NULL;
}

static void sec_single(void)
{
    int one = __libc_single_threaded;
    if (!one)
        th_skip("%s: the child has more than one thread at its start: the one-thread path is not tested", algo);
    /* one thread */
    CHECK_EQ(pthread_mutex_lock(&s_a), 0);
    CHECK_ENG(&s_a, w_lazy);
    CHECK_EQ(pthread_mutex_trylock(&s_a), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(&s_a), 0);
    CHECK_EQ(pthread_mutex_trylock(&s_a), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_a), 0);
    for (int i = 0; i < 1000; i++) {
        CHECK_EQ(pthread_mutex_lock(&s_a), 0);
        CHECK_EQ(pthread_mutex_unlock(&s_a), 0);
    }
    CHECK_ENG(&s_a, w_lazy);
    if (lazy_mode) /* (an engaged rcl mutex starts its server, a thread) */
        CHECK(__libc_single_threaded == one, "a lazy mutex's calls created a thread");
    pthread_mutex_t e;
    mk(&e, PTHREAD_MUTEX_ERRORCHECK);
    CHECK_EQ(pthread_mutex_lock(&e), 0);
    CHECK_EQ(pthread_mutex_lock(&e), EDEADLK);
    CHECK_EQ(pthread_mutex_unlock(&e), 0);
    CHECK_EQ(pthread_mutex_unlock(&e), EPERM);
    CHECK_EQ(pthread_mutex_destroy(&e), 0);

    /* taken with one thread, contended once a second exists */
    CHECK_EQ(pthread_mutex_lock(&s_a), 0);
    CHECK_EQ(pthread_mutex_lock(&s_c), 0); /* for the condition below: taken with one thread too */
    struct contender c;
    pthread_t t;
    contender_start(&c, &t, &s_a);
    CHECK_EQ(pthread_mutex_unlock(&s_a), 0);
    contender_join(&c, t);
    CHECK_ENG(&s_a, w_eng);
    CHECK_EQ(pthread_mutex_trylock(&s_a), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_a), 0);

    /* a condition wait on a mutex taken with one thread */
    pthread_t sg;
    CHECK_EQ(pthread_create(&sg, NULL, signaller, NULL), 0);
    while (!s_flag)
        CHECK_EQ(pthread_cond_wait(&s_cv, &s_c), 0);
    CHECK_EQ(pthread_mutex_trylock(&s_c), EBUSY); /* held again after the wait */
    CHECK_EQ(pthread_mutex_unlock(&s_c), 0);
    CHECK_EQ(pthread_join(sg, NULL), 0);

    /* taken with two threads, released in a fork child (one thread) */
    atomic_int go = 0;
    pthread_t sl;
    CHECK_EQ(pthread_create(&sl, NULL, sleeper, &go), 0);
    CHECK_EQ(pthread_mutex_lock(&s_b), 0);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        int bad = pthread_mutex_unlock(&s_b) != 0;
        for (int i = 0; i < 100; i++)
            bad += pthread_mutex_lock(&s_b) != 0 || pthread_mutex_unlock(&s_b) != 0;
        bad += pthread_mutex_trylock(&s_b) != 0;
        bad += pthread_mutex_trylock(&s_b) != EBUSY;
        bad += pthread_mutex_unlock(&s_b) != 0;
        _exit(bad ? 1 : 0);
    }
    CHECK(p > 0, "fork");
    int st = -1;
    if (p > 0)
        waitpid(p, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the fork child could not unlock and reuse the mutex (%d)", st);
    CHECK_EQ(pthread_mutex_unlock(&s_b), 0);
    atomic_store(&go, 1);
    CHECK_EQ(pthread_join(sl, NULL), 0);
}

static const struct lz_section sections[] = {
    {"single", sec_single},
    {NULL, NULL},
};

int main(int argc, char **argv) { return lz_main(argc, argv, "test_lazy_single", sections); }
