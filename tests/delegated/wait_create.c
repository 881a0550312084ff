/* wait_create.c - run by tests/test_delegated_wait.sh under `liblock run
 * --lock rcl` (and natively): what memcached's maintenance threads do in
 * their delegated critical sections.
 *
 *  - a "maintainer" thread runs one section on mutex A (through
 *    liblock_execute_mutex_cond, as `liblock transform` writes it) that
 *    creates a thread and then waits on a condition variable of A until the
 *    end of the run (seconds);
 *  - meanwhile WORKERS threads run ITERS sections each on mutexes B0/B1 and
 *    on A (the waiter released A): all must be served, counts exact;
 *  - the thread created inside the section must be an ordinary thread:
 *    SCHED_OTHER, allowed on a CPU other than the RCL server's (the last
 *    CPU by default), never a real-time thread confined to the server CPU;
 *  - each worker also runs a section on D that trylocks E inside and leaves
 *    it locked, and unlocks E itself after the section (memcached's
 *    lru_pull_tail and item_trylock): E must be released (later sections
 *    and lock/unlock sections on E go on), counts exact;
 *  - main then signals the waiter from a section on A and joins everything;
 *  - last, fork(): the program is linked with liblock.so and runs under the
 *    interposer, so two copies of liblock's fork handlers run (memcached's
 *    daemon() hung in them); the child exits at once.
 * Exit 0 and "ok ..." on success; a one-line reason and exit 1 otherwise.
 */
#define _GNU_SOURCE
#include <liblock.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKERS 3
#define ITERS 3000

static pthread_mutex_t A = PTHREAD_MUTEX_INITIALIZER, B[2] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static pthread_mutex_t D = PTHREAD_MUTEX_INITIALIZER, E = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t C = PTHREAD_COND_INITIALIZER;
static long count_e, count_e_locked;
static long count_a, count_b[2];
static int stop, waiting, child_policy[2] = {-1, -1}, child_other_cpu[2] = {-1, -1};
static pthread_t child[2];
static pid_t main_tid;

static void *child_main(void *arg)
{
    long k = (long)arg;
    cpu_set_t m;
    int pol = sched_getscheduler(0);
    int other = 0, n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof m, &m) == 0)
        for (int c = 0; c < n - 1 && c < CPU_SETSIZE; c++)
            other |= CPU_ISSET(c, &m);
    if (n < 2)
        other = 1;
    __atomic_store_n(&child_other_cpu[k], other, __ATOMIC_RELEASE);
    __atomic_store_n(&child_policy[k], pol, __ATOMIC_RELEASE);
    return NULL;
}

static void *cs_wait(void *arg)
{
    (void)arg;
    pthread_attr_t at; /* one with default attributes, one with attributes given */
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 1 << 20);
    if (pthread_create(&child[0], NULL, child_main, (void *)0) != 0 ||
        pthread_create(&child[1], &at, child_main, (void *)1) != 0)
        return (void *)2;
    pthread_attr_destroy(&at);
    waiting = 1;
    while (!stop)
        pthread_cond_wait(&C, &A);
    return (void *)1;
}

static void *cs_inc_a(void *arg) { (void)arg; count_a++; return (void *)1; }
static void *cs_inc_b(void *arg) { count_b[(long)arg]++; return (void *)1; }
static void *cs_take_e(void *arg)
{
    (void)arg;
    return pthread_mutex_trylock(&E) == 0 ? (void *)1 : (void *)2; /* 1: E left locked for the caller */
}
static void *cs_inc_e(void *arg) { (void)arg; count_e++; return (void *)1; }
static void *cs_waiting(void *arg) { *(int *)arg = waiting; return (void *)1; }
static void *cs_stop(void *arg)
{
    (void)arg;
    stop = 1;
    pthread_cond_broadcast(&C);
    return (void *)1;
}

static void *maintainer(void *arg)
{
    (void)arg;
    return liblock_execute_mutex_cond(&A, cs_wait, NULL);
}

static void *worker(void *arg)
{
    long id = (long)arg;
    for (int i = 0; i < ITERS; i++) {
        if (!liblock_execute_mutex(&B[(id + i) % 2], cs_inc_b, (void *)((id + i) % 2)) ||
            !liblock_execute_mutex(&A, cs_inc_a, NULL)) {
            printf("a section could not run\n");
            exit(1);
        }
        if (i % 10 == 0) {
            void *r = liblock_execute_mutex(&D, cs_take_e, NULL);
            if (r == (void *)1) {
                count_e_locked++; /* under E */
                pthread_mutex_unlock(&E);
            }
            pthread_mutex_lock(&E);
            count_e++;
            pthread_mutex_unlock(&E);
        }
        if (!liblock_execute_mutex(&E, cs_inc_e, NULL)) {
            printf("a section could not run\n");
            exit(1);
        }
    }
    return NULL;
}

int main(void)
{
    pthread_t m, w[WORKERS];
    void *r;
    int is_waiting = 0;
    main_tid = getpid();
    if (pthread_create(&m, NULL, maintainer, NULL))
        return 1;
    for (int k = 0; k < 20000 && !is_waiting; k++) {  /* up to 20 s for the waiter to be in place */
        liblock_execute_mutex(&A, cs_waiting, &is_waiting);
        if (!is_waiting)
            usleep(1000);
    }
    if (!is_waiting) {
        printf("the maintainer's section never reached its wait\n");
        return 1;
    }
    for (long i = 0; i < WORKERS; i++)
        if (pthread_create(&w[i], NULL, worker, (void *)i))
            return 1;
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    liblock_execute_mutex(&A, cs_stop, NULL);
    pthread_join(m, &r);
    pthread_join(child[0], NULL);
    pthread_join(child[1], NULL);
    if (r != (void *)1) {
        printf("the waiting section returned %p\n", r);
        return 1;
    }
    if (count_e != WORKERS * ITERS + WORKERS * (ITERS / 10)) {
        printf("count e=%ld, expected %d\n", count_e, WORKERS * ITERS + WORKERS * (ITERS / 10));
        return 1;
    }
    if (count_a != WORKERS * ITERS || count_b[0] + count_b[1] != WORKERS * ITERS) {
        printf("counts a=%ld b=%ld, expected %d each\n", count_a, count_b[0] + count_b[1], WORKERS * ITERS);
        return 1;
    }
    for (int k = 0; k < 2; k++)
        if (child_policy[k] != SCHED_OTHER || child_other_cpu[k] != 1) {
            printf("the thread created inside the section (%s attributes) runs with policy %d%s\n",
                   k ? "given" : "default", child_policy[k], child_other_cpu[k] == 1 ? "" : ", confined to the server CPU");
            return 1;
        }
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        printf("fork: the child did not exit normally\n");
        return 1;
    }
    printf("ok a=%ld b=%ld e=%ld (%ld taken inside a section)\n", count_a, count_b[0] + count_b[1], count_e,
           count_e_locked);
    return 0;
}
