/*
 * prog.c - a program for tests/test_to_glibc.sh: makes objects the
 * interposer leaves to glibc, one per reason, and says nothing itself.
 *   prog all    2 robust mutexes, 1 robust + process-shared mutex (counted
 *               once, as process-shared), 1 priority-inheritance and 1
 *               priority-protection mutex, 1 process-shared condition
 *               variable and semaphore; plus ordinary ones, used
 *   prog none   only ordinary mutexes, a condition variable, a semaphore
 *   prog fork   1 robust mutex, then a child that makes 2 more and exits
 *   prog config locks tg_cfg_mutex (a global, so a configuration file can
 *               name it) and an ordinary mutex
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

pthread_mutex_t tg_cfg_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t plain = PTHREAD_MUTEX_INITIALIZER;

static void mutex_with(pthread_mutex_t *m, int robust, int pshared, int proto)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (robust)
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    if (pshared)
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    if (proto != PTHREAD_PRIO_NONE)
        pthread_mutexattr_setprotocol(&a, proto);
    if (pthread_mutex_init(m, &a))
        exit(10);
    /* (glibc refuses to lock a priority-protection mutex whose ceiling is
     * below the thread's priority: EINVAL; it is only made) */
    if (proto != PTHREAD_PRIO_PROTECT && (pthread_mutex_lock(m) || pthread_mutex_unlock(m)))
        exit(10);
    pthread_mutexattr_destroy(&a);
}

static void ordinary(void)
{
    pthread_mutex_t m;
    pthread_cond_t c;
    sem_t s;
    if (pthread_mutex_init(&m, NULL) || pthread_cond_init(&c, NULL) || sem_init(&s, 0, 1))
        exit(11);
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    pthread_mutex_lock(&plain);
    pthread_mutex_unlock(&plain);
    sem_wait(&s);
    sem_post(&s);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    static pthread_mutex_t m[6];
    ordinary();
    if (strcmp(what, "all") == 0) {
        mutex_with(&m[0], 1, 0, PTHREAD_PRIO_NONE);
        mutex_with(&m[1], 1, 0, PTHREAD_PRIO_NONE);
        mutex_with(&m[2], 1, 1, PTHREAD_PRIO_NONE);
        mutex_with(&m[3], 0, 0, PTHREAD_PRIO_INHERIT);
        mutex_with(&m[4], 0, 0, PTHREAD_PRIO_PROTECT);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
        static pthread_cond_t c;
        static sem_t s;
        if (pthread_cond_init(&c, &ca) || sem_init(&s, 1, 0))
            return 12;
    } else if (strcmp(what, "fork") == 0) {
        mutex_with(&m[0], 1, 0, PTHREAD_PRIO_NONE);
        pid_t pid = fork();
        if (pid == 0) {
            mutex_with(&m[1], 1, 0, PTHREAD_PRIO_NONE);
            mutex_with(&m[2], 1, 0, PTHREAD_PRIO_NONE);
            exit(0);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            return 13;
    } else if (strcmp(what, "config") == 0) {
        if (pthread_mutex_lock(&tg_cfg_mutex) || pthread_mutex_unlock(&tg_cfg_mutex))
            return 14;
    } else if (strcmp(what, "none") != 0) {
        return 2;
    }
    return 0;
}
