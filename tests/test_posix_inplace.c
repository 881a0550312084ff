/*
 * test_posix_inplace - posix in place (src/shim/shim.h): under the
 * interposer with the posix algorithm, a NORMAL mutex is glibc's mutex in
 * the program's own pthread_mutex_t.
 *  1. (no interposer) The premise, on the glibc the tests run on: glibc's
 *     lock, trylock, timedlock, unlock (contended too) and destroy of a
 *     NORMAL, RECURSIVE, ERRORCHECK and ADAPTIVE mutex never write the
 *     __list words, where the interposer keeps its pointer.
 *  2. (child under the interposer, LIBLOCK_LOCK=posix and LIBLOCK_LAZY=0 -
 *     lazily, glibc's words are used only once a mutex has engaged, which
 *     the test_lazy_* programs check -, with each of
 *     LIBLOCK_COND unset, mostly-lifo and LIBLOCK_COND_GENERIC=1, and with
 *     LIBLOCK_WAIT=spin-then-park): while a thread holds an initialised, a
 *     static and an adaptive-initialised mutex, their own __owner is its
 *     thread id, as on glibc; mutual exclusion under contention; a
 *     condition wait (woken, and timed out) releases and retakes the
 *     program's mutex; destroy of a held mutex is EBUSY and leaves it
 *     usable; a forked child inherits a mutex its parent's thread held and
 *     can unlock it, finds one another thread held still locked (glibc's
 *     words as they were: trylock EBUSY, the holder's id in __owner) and
 *     can unlock it too, and survives a mutex unmapped without destroy;
 *     spin-then-park gives glibc's adaptive kind.
 * Run without arguments it is the driver (part 1, then the children).
 */
#include "harness.h"

#include <sys/mman.h>
#include <sys/wait.h>

#define SENTINEL ((void *)0x5a5a5a5a5a5a5a40ul)

static pthread_mutex_t *shared_m;
static long counter;

static void *hammer(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++) {
        if (i % 3 == 0) {
            while (pthread_mutex_trylock(shared_m) != 0)
                ;
        } else if (i % 3 == 1) {
            struct timespec t;
            clock_gettime(CLOCK_REALTIME, &t);
            t.tv_sec += 10;
            CHECK_EQ(pthread_mutex_timedlock(shared_m, &t), 0);
        } else {
            CHECK_EQ(pthread_mutex_lock(shared_m), 0);
        }
        counter++;
        CHECK_EQ(pthread_mutex_unlock(shared_m), 0);
    }
    return NULL;
}

static void contend(pthread_mutex_t *m, long n)
{
    shared_m = m;
    counter = 0;
    pthread_t a, b;
    CHECK_EQ(pthread_create(&a, NULL, hammer, (void *)n), 0);
    CHECK_EQ(pthread_create(&b, NULL, hammer, (void *)n), 0);
    CHECK_EQ(pthread_join(a, NULL), 0);
    CHECK_EQ(pthread_join(b, NULL), 0);
    CHECK_EQ(counter, 2 * n);
}

/* ---------------------------------------------------------------- part 1 */
static void glibc_words(void)
{
    static const int types[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_RECURSIVE, PTHREAD_MUTEX_ERRORCHECK,
                                PTHREAD_MUTEX_ADAPTIVE_NP};
    for (unsigned i = 0; i < sizeof types / sizeof types[0]; i++) {
        pthread_mutexattr_t a;
        pthread_mutex_t m;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, types[i]);
        CHECK_EQ(pthread_mutex_init(&m, &a), 0);
        pthread_mutexattr_destroy(&a);
        m.__data.__list.__prev = SENTINEL;
        m.__data.__list.__next = SENTINEL;
        CHECK_EQ(pthread_mutex_lock(&m), 0);
        CHECK_EQ(pthread_mutex_destroy(&m), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(&m), 0);
        contend(&m, 20000);
        CHECK_EQ(pthread_mutex_destroy(&m), 0);
        CHECK(m.__data.__list.__prev == SENTINEL && m.__data.__list.__next == SENTINEL,
              "type %d: glibc wrote the __list words", types[i]);
    }
}

/* ---------------------------------------------------------------- part 2 */
static pthread_mutex_t m_static = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_adaptive = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_init, m_cv;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;

static int owner(pthread_mutex_t *m) { return __atomic_load_n(&m->__data.__owner, __ATOMIC_RELAXED); }

static void *signaller(void *arg)
{
    (void)arg;
    CHECK_EQ(pthread_mutex_lock(&m_cv), 0);
    CHECK_EQ(owner(&m_cv), (int)gettid()); /* the waiter released the program's mutex */
    flag = 1;
    CHECK_EQ(pthread_cond_signal(&cv), 0);
    CHECK_EQ(pthread_mutex_unlock(&m_cv), 0);
    return NULL;
}

static int holding;
static int static_holder; /* hold_static's thread id */
static void *hold_static(void *arg)
{
    (void)arg;
    CHECK_EQ(pthread_mutex_lock(&m_static), 0);
    static_holder = (int)gettid();
    __atomic_store_n(&holding, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&holding, __ATOMIC_ACQUIRE) != 2)
        usleep(1000);
    CHECK_EQ(pthread_mutex_unlock(&m_static), 0);
    return NULL;
}

static int child(void)
{
    th_watchdog(60);
    CHECK_EQ(pthread_mutex_init(&m_init, NULL), 0);
    CHECK_EQ(pthread_mutex_init(&m_cv, NULL), 0);
    pthread_mutex_t *ms[] = {&m_init, &m_static, &m_adaptive};
    int adaptive = getenv("LIBLOCK_WAIT") != NULL; /* spin-then-park */
    for (unsigned i = 0; i < 3; i++) {
        th_context = i == 0 ? "initialised" : i == 1 ? "static" : "adaptive initializer";
        CHECK_EQ(pthread_mutex_lock(ms[i]), 0);
        CHECK_EQ(owner(ms[i]), (int)gettid()); /* glibc's record, in the program's mutex */
        CHECK_EQ(pthread_mutex_trylock(ms[i]), EBUSY);
        CHECK_EQ(pthread_mutex_destroy(ms[i]), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(ms[i]), 0);
        CHECK_EQ(owner(ms[i]), 0);
        if (i < 2)
            CHECK_EQ(ms[i]->__data.__kind & 3, adaptive ? PTHREAD_MUTEX_ADAPTIVE_NP : PTHREAD_MUTEX_NORMAL);
        contend(ms[i], 20000);
    }

    th_context = "condition wait";
    CHECK_EQ(pthread_mutex_lock(&m_cv), 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, signaller, NULL), 0);
    while (!flag)
        CHECK_EQ(pthread_cond_wait(&cv, &m_cv), 0);
    CHECK_EQ(owner(&m_cv), (int)gettid());
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += 20 * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    CHECK_EQ(pthread_cond_timedwait(&cv, &m_cv, &t), ETIMEDOUT);
    CHECK_EQ(owner(&m_cv), (int)gettid());
    CHECK_EQ(pthread_mutex_unlock(&m_cv), 0);
    CHECK_EQ(pthread_join(th, NULL), 0);

    th_context = "fork";
    /* a mutex set up, then its memory unmapped without destroy: fork must
     * not touch it */
    pthread_mutex_t *gone = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(gone != MAP_FAILED, "mmap");
    CHECK_EQ(pthread_mutex_lock(gone), 0);
    CHECK_EQ(pthread_mutex_unlock(gone), 0);
    CHECK_EQ(munmap(gone, 4096), 0);
    CHECK_EQ(pthread_mutex_lock(&m_init), 0);
    holding = 0;
    CHECK_EQ(pthread_create(&th, NULL, hold_static, NULL), 0);
    while (!__atomic_load_n(&holding, __ATOMIC_ACQUIRE))
        usleep(1000);
    pid_t pid = fork();
    if (pid == 0) {
        int ok = pthread_mutex_unlock(&m_init) == 0 && pthread_mutex_trylock(&m_init) == 0 &&
                 owner(&m_init) == (int)gettid() && pthread_mutex_unlock(&m_init) == 0 &&
                 pthread_mutex_trylock(&m_static) == EBUSY && owner(&m_static) == static_holder &&
                 pthread_mutex_unlock(&m_static) == 0 && pthread_mutex_trylock(&m_static) == 0 &&
                 pthread_mutex_unlock(&m_static) == 0;
        _exit(ok ? 0 : 1);
    }
    __atomic_store_n(&holding, 2, __ATOMIC_RELEASE);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK(pid > 0, "fork");
    int st = -1;
    CHECK_EQ(waitpid(pid, &st, 0), pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked child: status %d", st);
    CHECK_EQ(pthread_mutex_unlock(&m_init), 0);

    th_context = "destroy";
    CHECK_EQ(pthread_mutex_destroy(&m_init), 0);
    CHECK_EQ(pthread_mutex_init(&m_init, NULL), 0);
    CHECK_EQ(pthread_mutex_lock(&m_init), 0);
    CHECK_EQ(owner(&m_init), (int)gettid());
    CHECK_EQ(pthread_mutex_unlock(&m_init), 0);
    CHECK_EQ(pthread_mutex_destroy(&m_init), 0);
    return th_report("test_posix_inplace child");
}

static int run_child(const char *prog, const char *lib, const char *what, const char *env)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        th_unset_interposer_env();
        setenv("LD_PRELOAD", lib, 1);
        setenv("LIBLOCK_STRICT", "1", 1);
        setenv("LIBLOCK_LOCK", "posix", 1);
        if (env)
            putenv((char *)env);
        setenv("LIBLOCK_INPLACE_CHILD", "1", 1);
        setenv("LIBLOCK_LAZY", "0", 1); /* glibc's words from the first lock (lazily: from the first contention) */
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    return th_wait_child(pid, 60, what);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (getenv("LIBLOCK_INPLACE_CHILD"))
        return child();
    th_watchdog(120);
    th_context = "glibc's words";
    glibc_words();
    char *lib = th_interposer(argv[0]);
    if (!lib)
        return th_report("test_posix_inplace");
    static const char *const envs[] = {NULL, "LIBLOCK_COND=mostly-lifo", "LIBLOCK_COND_GENERIC=1",
                                       "LIBLOCK_WAIT=spin-then-park"};
    for (unsigned i = 0; i < sizeof envs / sizeof envs[0]; i++) {
        const char *what = envs[i] ? envs[i] : "posix";
        th_context = what;
        int rc = run_child(argv[0], lib, what, envs[i]);
        CHECK(rc == 0, "child under %s: exit %d", what, rc);
        printf("  %-32s %s\n", what, rc == 0 ? "ok" : "FAILED");
    }
    free(lib);
    return th_report("test_posix_inplace");
}
