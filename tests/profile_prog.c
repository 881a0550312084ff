/*
 * profile_prog.c - a program with locks of known character, run by
 * tests/test_profile.sh and tests/test_site_config.sh under the preload
 * libraries (built there with -g; not a test by itself).  It counts its own
 * calls and prints them, with the source lines of its init and lock calls
 * (KEY=VALUE lines), so the drivers compare the report with what really
 * happened.  Modes (argv[1]):
 *   basic   hot lock (4 threads), light lock, 5 locks from one init site,
 *           a static mutex, one lock from two call sites, a recursive
 *           mutex, trylock failures, condition waits, a thread that exits
 *           early, C11 mtx; exits with status 3
 *   fork    locks in the parent, then in a forked child, both exit 0
 *   crash   locks, then abort()
 *   uexit   locks, then _exit(5)
 *   usr1    locks, raise(SIGUSR1), locks again, exits 0
 *   sites   two mutexes from two init sites and a static one, each locked
 *           by 2 threads (for per-site configuration), exits 0
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#define KV(k, v) printf("%s=%ld\n", k, (long)(v))

static pthread_mutex_t hot, light, two, rec, trym, condm, early;
static pthread_mutex_t many[5];
static pthread_mutex_t static_mx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long hot_count, cond_calls;
static int turn, early_done;
enum { HOT_THREADS = 4, HOT_ITERS = 20000 };

static void *hot_worker(void *a)
{
    for (int i = 0; i < HOT_ITERS; i++) {
        pthread_mutex_lock(&hot);
        hot_count++;
        pthread_mutex_unlock(&hot);
    }
    return a;
}

static void *early_worker(void *a)
{
    for (int i = 0; i < 9; i++) {
        pthread_mutex_lock(&early);
        pthread_mutex_unlock(&early);
    }
    pthread_mutex_lock(&early);
    early_done = 1;
    pthread_mutex_unlock(&early);
    pthread_exit(a); /* while the hot workers still run */
}

static void *trylocker(void *a)
{
    long *fails = a;
    for (int i = 0; i < 6; i++)
        if (pthread_mutex_trylock(&trym) != 0)
            (*fails)++;
    return NULL;
}

static void *cond_waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(&condm);
    for (int k = 1; k <= 5; k++) {
        while (turn != k) {
            pthread_cond_wait(&cv, &condm);
            cond_calls++;
        }
        turn = -k; /* acknowledged */
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&condm);
    return NULL;
}

/* A holder that waits on a condition variable while another thread takes
 * the mutex from another call site: its hold is the 6 ms it spins, the
 * wait excluded, and stays with its own call site. */
static pthread_mutex_t holdm;
static pthread_cond_t holdcv = PTHREAD_COND_INITIALIZER;
static int hold_n;
static long hold_waits;

static void spin_ms(long ms)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < ms * 1000000L);
}

static void *hold_helper(void *a)
{
    (void)a;
    for (int i = 0; i < 5; i++) {
        pthread_mutex_lock(&holdm);
        if (++hold_n == 5)
            pthread_cond_signal(&holdcv);
        pthread_mutex_unlock(&holdm);
    }
    return NULL;
}

static void hold_across_wait(void)
{
    pthread_t h;
    pthread_mutex_init(&holdm, NULL);
    int l_hold_lock = __LINE__; pthread_mutex_lock(&holdm);
    spin_ms(3);
    pthread_create(&h, NULL, hold_helper, NULL);
    while (hold_n < 5) {
        pthread_cond_wait(&holdcv, &holdm);
        hold_waits++;
    }
    spin_ms(3);
    pthread_mutex_unlock(&holdm);
    pthread_join(h, NULL);
    KV("l_hold_lock", l_hold_lock);
    KV("hold_waits", hold_waits);
}

static void lock_twice_site_a(void) { pthread_mutex_lock(&two); pthread_mutex_unlock(&two); } /* SITE_A */
static void lock_twice_site_b(void) { pthread_mutex_lock(&two); pthread_mutex_unlock(&two); } /* SITE_B */

static int basic(void)
{
    int l_hot = __LINE__; pthread_mutex_init(&hot, NULL);
    pthread_mutex_init(&light, NULL);
    int l_many = __LINE__; for (int i = 0; i < 5; i++) pthread_mutex_init(&many[i], NULL);
    int l_two = __LINE__; pthread_mutex_init(&two, NULL);
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&rec, &ra);
    pthread_mutex_init(&trym, NULL);
    pthread_mutex_init(&condm, NULL);
    pthread_mutex_init(&early, NULL);
    KV("l_hot", l_hot);
    KV("l_many", l_many);
    KV("l_two", l_two);

    pthread_t t[HOT_THREADS], e, c, tr;
    pthread_create(&e, NULL, early_worker, NULL);
    for (int i = 0; i < HOT_THREADS; i++)
        pthread_create(&t[i], NULL, hot_worker, NULL);
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&light);
        pthread_mutex_unlock(&light);
    }
    for (int i = 0; i < 5; i++)
        for (int j = 0; j <= i; j++) {
            pthread_mutex_lock(&many[i]);
            pthread_mutex_unlock(&many[i]);
        }
    int l_static = __LINE__; pthread_mutex_lock(&static_mx); pthread_mutex_unlock(&static_mx);
    for (int i = 0; i < 6; i++) {
        pthread_mutex_lock(&static_mx);
        pthread_mutex_unlock(&static_mx);
    }
    KV("l_static", l_static);
    for (int i = 0; i < 3; i++)
        lock_twice_site_a();
    for (int i = 0; i < 5; i++)
        lock_twice_site_b();
    for (int i = 0; i < 4; i++) {
        pthread_mutex_lock(&rec);
        pthread_mutex_lock(&rec);
        pthread_mutex_lock(&rec);
        pthread_mutex_unlock(&rec);
        pthread_mutex_unlock(&rec);
        pthread_mutex_unlock(&rec);
    }
    long fails = 0;
    pthread_mutex_lock(&trym);
    pthread_create(&tr, NULL, trylocker, &fails);
    pthread_join(tr, NULL);
    pthread_mutex_unlock(&trym);
    KV("try_fails", fails);
    pthread_create(&c, NULL, cond_waiter, NULL);
    for (int k = 1; k <= 5; k++) {
        pthread_mutex_lock(&condm);
        turn = k;
        pthread_cond_broadcast(&cv);
        while (turn != -k)
            pthread_cond_wait(&cv, &condm), cond_calls++;
        pthread_mutex_unlock(&condm);
    }
    pthread_join(c, NULL);
    KV("cond_calls", cond_calls);
    hold_across_wait();
    mtx_t cm;
    int l_c11 = __LINE__; mtx_init(&cm, mtx_plain);
    int l_c11_lock = __LINE__; for (int i = 0; i < 3; i++) { mtx_lock(&cm); mtx_unlock(&cm); }
    KV("l_c11", l_c11);
    KV("l_c11_lock", l_c11_lock);
    for (int i = 0; i < HOT_THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_join(e, NULL);
    KV("hot_count", hot_count);
    KV("threads", HOT_THREADS + 4);
    fflush(stdout);
    return 3;
}

static int do_fork(void)
{
    pthread_mutex_init(&hot, NULL);
    for (int i = 0; i < 7; i++) {
        pthread_mutex_lock(&hot);
        pthread_mutex_unlock(&hot);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 5; i++) {
            pthread_mutex_lock(&hot);
            pthread_mutex_unlock(&hot);
        }
        exit(0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    KV("child", pid);
    KV("child_status", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    pthread_mutex_lock(&hot);
    pthread_mutex_unlock(&hot);
    return 0;
}

static pthread_mutex_t site1, site2;
static pthread_mutex_t site_static = PTHREAD_MUTEX_INITIALIZER;
static long site_count[3]; /* one per mutex: each is protected by its own */

static void *site_worker(void *a)
{
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&site1);
        site_count[0]++;
        pthread_mutex_unlock(&site1);
        pthread_mutex_lock(&site2);
        site_count[1]++;
        pthread_mutex_unlock(&site2);
        pthread_mutex_lock(&site_static);
        site_count[2]++;
        pthread_mutex_unlock(&site_static);
    }
    return a;
}

static int sites(void)
{
    int l1 = __LINE__; pthread_mutex_init(&site1, NULL);
    int l2 = __LINE__; pthread_mutex_init(&site2, NULL);
    KV("l_site1", l1);
    KV("l_site2", l2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, site_worker, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    KV("site_counter", site_count[0] + site_count[1] + site_count[2]);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "basic";
    if (!strcmp(mode, "basic"))
        return basic();
    if (!strcmp(mode, "fork"))
        return do_fork();
    if (!strcmp(mode, "sites"))
        return sites();
    pthread_mutex_init(&hot, NULL);
    for (int i = 0; i < 4; i++) {
        pthread_mutex_lock(&hot);
        pthread_mutex_unlock(&hot);
    }
    fflush(stdout);
    if (!strcmp(mode, "crash"))
        abort();
    if (!strcmp(mode, "uexit"))
        _exit(5);
    if (!strcmp(mode, "usr1")) {
        raise(SIGUSR1);
        pthread_mutex_lock(&hot);
        pthread_mutex_unlock(&hot);
        return 0;
    }
    fprintf(stderr, "profile_prog: unknown mode %s\n", mode);
    return 2;
}
