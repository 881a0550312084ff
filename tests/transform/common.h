/* common.h - the threads of the transform corpus (tests/test_transform.sh).
 * Each program defines work(id) and report(); main runs THREADS threads. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define THREADS 4
#define ITERS 1000

static void work(int id);
static void report(void);

static void *corpus_thread(void *arg)
{
    work((int)(long)arg);
    return NULL;
}

int main(void)
{
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++)
        if (pthread_create(&th[i], NULL, corpus_thread, (void *)i))
            return 99;
    for (int i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    report();
    return 0;
}
