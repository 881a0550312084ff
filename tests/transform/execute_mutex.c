/* execute_mutex.c - liblock_execute_mutex / _cond from a program linked with
 * liblock.so (tests/test_transform.sh runs it natively and under `liblock
 * run`).  Prints the final counts; exits non-zero on a wrong count, an
 * error, or (argv[1] == "remote") a critical section that ran on the
 * calling thread, or (argv[1] == "local") one that ran elsewhere. */
#include <liblock.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <errno.h>

#define THREADS 4
#define ITERS 20000

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static long counter, plain, remote_runs, local_runs, turns;

struct ctx { pid_t caller; long add; };

static void *cs(void *arg)
{
    struct ctx *x = arg;
    counter += x->add;
    if ((pid_t)syscall(SYS_gettid) == x->caller)
        local_runs++;
    else
        remote_runs++;
    return (void *)(long)counter;
}

/* A cs that waits: threads take turns in order of their id for a few rounds. */
struct turn { int id; };
static void *cs_wait(void *arg)
{
    struct turn *t = arg;
    while (turns % THREADS != t->id)
        if (pthread_cond_wait(&c, &m))
            abort();
    turns++;
    pthread_cond_broadcast(&c);
    return NULL;
}

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    struct ctx x = {(pid_t)syscall(SYS_gettid), 1};
    for (int i = 0; i < ITERS; i++) {
        if (i % 4 == 3) { /* interleaved with plain lock/unlock of the same mutex */
            pthread_mutex_lock(&m);
            plain++;
            counter++;
            pthread_mutex_unlock(&m);
            continue;
        }
        if (liblock_execute_mutex(&m, cs, &x) == NULL) {
            perror("liblock_execute_mutex");
            exit(3);
        }
    }
    struct turn t = {id};
    for (int r = 0; r < 50; r++)
        liblock_execute_mutex_cond(&m, cs_wait, &t);
    return NULL;
}

int main(int argc, char **argv)
{
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    if (liblock_execute_mutex(NULL, cs, NULL) != NULL || errno != EINVAL)
        return fprintf(stderr, "NULL mutex not refused with EINVAL\n"), 4;
    printf("counter %ld plain %ld turns %ld\n", counter, plain, turns);
    if (counter != (long)THREADS * ITERS || turns != THREADS * 50)
        return 1;
    if (argc > 1 && !strcmp(argv[1], "remote") && local_runs != 0)
        return fprintf(stderr, "%ld critical sections ran on the caller\n", local_runs), 2;
    if (argc > 1 && !strcmp(argv[1], "local") && remote_runs != 0)
        return fprintf(stderr, "%ld critical sections ran elsewhere\n", remote_runs), 2;
    if (pthread_mutex_destroy(&m))
        return fprintf(stderr, "destroy failed\n"), 5;
    return 0;
}
