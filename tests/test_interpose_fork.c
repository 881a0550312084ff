/*
 * test_interpose_fork - fork under the LD_PRELOAD interposer, for every
 * algorithm.  The child of a process whose forking thread holds a mutex
 * another thread is queued on, holds a recursive mutex twice, and whose
 * other threads hold a mutex and wait on a condition variable: unlocks
 * and relocks what the forking thread held; finds the recursive mutex
 * held by a thread it does not have (EBUSY, EPERM, as glibc); finds the
 * mutex another thread held still locked and unlocks it (NORMAL); ran
 * pthread_atfork handlers that lock and unlock; counts exactly with new
 * threads; times out on the condition variable and hands it over to a
 * new thread.  The parent's locks still work.
 *
 * Run without arguments it is a driver (interpose_driver.h,
 * IP_EVERY_ALGORITHM): it re-runs itself under the interposer for every
 * algorithm and the configurations of test_interpose; names on the command
 * line restrict the algorithms.  Its child first checks that the
 * interposer is in use, then makes the lazy mutexes engage their algorithm
 * (engage_mutexes, interpose_mutexes.h).
 */
#include "interpose_driver.h"
#include "interpose_mutexes.h"

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

static void child(void)
{
    init_dynamic();
    engage_mutexes();
    test_fork();
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_fork", IP_EVERY_ALGORITHM, child); }
