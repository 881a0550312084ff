/*
 * test_interpose_held - under the interposer, the count of tracked holds
 * in a thread's record (what ll_may_run_foreign reads: a thread holding a
 * mutex must not run other threads' critical sections as a combiner) is
 * exactly the number of NORMAL mutexes the thread locked and has not
 * unlocked, and never lower, whichever path the lock and the unlock take:
 *  - nested holds (the second takes the general path: one node is cached
 *    per thread), unlocked in and out of order, a thousand times;
 *  - trylock, then unlock;
 *  - a condition wait that times out, and one woken by another thread
 *    (the wait lends the holder's node and gets it back);
 *  - a NORMAL mutex unlocked by a thread that did not lock it: the
 *    unlocker's count is untouched, the locker keeps the hold (so it only
 *    declines to combine, never the opposite), and its next lock/unlock
 *    pair moves the count by one each way.
 * Run without arguments it is a driver: one child per delegating
 * algorithm (LIBLOCK_LOCK), and one with a mixed configuration
 * (LIBLOCK_CONFIG: mcs by default, cc-synch for a static mutex), under
 * LD_PRELOAD=<build>/lib/liblock-interpose.so (or LIBLOCK_TEST_INTERPOSER).
 * The count is read through liblock_interpose_debug_held.
 */
#include "harness.h"

#include <dlfcn.h>

/* ---------------------------------------------------------------- child */
static long (*held)(void);
pthread_mutex_t held_static = PTHREAD_MUTEX_INITIALIZER; /* a site of its own (the mixed configuration) */
static pthread_mutex_t ma, mb, mfree;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;

static void *foreign_unlock(void *arg)
{
    (void)arg;
    /* a record of its own first, with nothing held */
    CHECK_EQ(pthread_mutex_lock(&mfree), 0);
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_mutex_unlock(&mfree), 0);
    CHECK_EQ(held(), 0);
    CHECK_EQ(pthread_mutex_unlock(&ma), 0); /* locked by the main thread */
    CHECK_EQ(held(), 0);
    return NULL;
}

static void *waiter(void *arg)
{
    (void)arg;
    CHECK_EQ(pthread_mutex_lock(&ma), 0);
    CHECK_EQ(held(), 1);
    while (!flag)
        CHECK_EQ(pthread_cond_wait(&cv, &ma), 0);
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_mutex_unlock(&ma), 0);
    CHECK_EQ(held(), 0);
    return NULL;
}

static int child(void)
{
    th_watchdog(30);
    held = (long (*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_held");
    CHECK(held != NULL, "liblock_interpose_debug_held not exported");
    if (!held)
        return th_report("test_interpose_held child");
    pthread_mutex_init(&ma, NULL);
    pthread_mutex_init(&mb, NULL);
    pthread_mutex_init(&mfree, NULL);

    th_context = "nested";
    CHECK_EQ(pthread_mutex_lock(&ma), 0);
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_mutex_lock(&mb), 0);
    CHECK_EQ(held(), 2);
    CHECK_EQ(pthread_mutex_lock(&held_static), 0);
    CHECK_EQ(held(), 3);
    CHECK_EQ(pthread_mutex_unlock(&held_static), 0);
    CHECK_EQ(held(), 2);
    CHECK_EQ(pthread_mutex_unlock(&mb), 0);
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_mutex_unlock(&ma), 0);
    CHECK_EQ(held(), 0);
    int bad = 0;
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&ma);
        bad += held() != 1;
        pthread_mutex_lock(&mb);
        bad += held() != 2;
        if (i & 1) {
            pthread_mutex_unlock(&ma);
            bad += held() != 1;
            pthread_mutex_unlock(&mb);
        } else {
            pthread_mutex_unlock(&mb);
            bad += held() != 1;
            pthread_mutex_unlock(&ma);
        }
        bad += held() != 0;
    }
    CHECK_EQ(bad, 0);

    th_context = "trylock";
    CHECK_EQ(pthread_mutex_trylock(&ma), 0);
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_mutex_unlock(&ma), 0);
    CHECK_EQ(held(), 0);

    th_context = "condition wait";
    CHECK_EQ(pthread_mutex_lock(&ma), 0);
    struct timespec ts;
    ts_after(CLOCK_REALTIME, &ts, 10);
    int tw = pthread_cond_timedwait(&cv, &ma, &ts);
    CHECK(tw == ETIMEDOUT || tw == 0, "timedwait: %d", tw); /* (0: a spurious wake-up, allowed) */
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_mutex_unlock(&ma), 0);
    CHECK_EQ(held(), 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, waiter, NULL), 0);
    usleep(20000);
    CHECK_EQ(pthread_mutex_lock(&ma), 0);
    flag = 1;
    CHECK_EQ(pthread_cond_signal(&cv), 0);
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_mutex_unlock(&ma), 0);
    CHECK_EQ(held(), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);

    th_context = "foreign unlock";
    CHECK_EQ(pthread_mutex_lock(&ma), 0);
    CHECK_EQ(held(), 1);
    CHECK_EQ(pthread_create(&th, NULL, foreign_unlock, NULL), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(held(), 1); /* the locker keeps the hold: never lower than what it holds */
    CHECK_EQ(pthread_mutex_lock(&ma), 0);
    CHECK_EQ(held(), 2);
    CHECK_EQ(pthread_mutex_unlock(&ma), 0);
    CHECK_EQ(held(), 1);
    return th_report("test_interpose_held child");
}

/* ---------------------------------------------------------------- driver */
static int run_child(const char *prog, const char *lib, const char *algo, const char *config)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        setenv("LD_PRELOAD", lib, 1);
        setenv("LIBLOCK_STRICT", "1", 1);
        unsetenv("LIBLOCK_WAIT");
        if (config) {
            unsetenv("LIBLOCK_LOCK");
            setenv("LIBLOCK_CONFIG", config, 1);
        } else {
            setenv("LIBLOCK_LOCK", algo, 1);
            unsetenv("LIBLOCK_CONFIG");
        }
        setenv("LIBLOCK_HELD_CHILD", "1", 1);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    char what[256];
    snprintf(what, sizeof what, "%s under %s", prog, algo);
    return th_wait_child(pid, 60, what);
}

int main(int argc, char **argv)
{
    if (getenv("LIBLOCK_HELD_CHILD"))
        return child();
    th_watchdog(300);
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report("test_interpose_held");
    int n = 0;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        liblock_algorithm_info_t in;
        if (liblock_algorithm_info(*a, &in) != 0 || !(in.properties & LIBLOCK_PROP_DELEGATES) ||
            !th_selected(argc, argv, *a))
            continue;
        int rc = run_child(argv[0], real, *a, NULL);
        CHECK(rc == 0, "under %s: exit %d", *a, rc);
        printf("  %-16s %s\n", *a, rc == 0 ? "ok" : "FAILED");
        n++;
    }
    CHECK(n > 0 || argc > 1, "no delegating algorithm in the registry");
    char cfgpath[] = "/tmp/test_interpose_held.XXXXXX";
    int fd = mkstemp(cfgpath);
    CHECK(fd >= 0, "mkstemp");
    if (fd >= 0) {
        static const char text[] = "default mcs\nsite held_static cc-synch\n";
        CHECK_EQ(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
        close(fd);
        int rc = run_child(argv[0], real, "mixed (mcs, cc-synch)", cfgpath);
        CHECK(rc == 0, "under the mixed configuration: exit %d", rc);
        printf("  %-16s %s\n", "mixed", rc == 0 ? "ok" : "FAILED");
        unlink(cfgpath);
    }
    free(real);
    return th_report("test_interpose_held");
}
