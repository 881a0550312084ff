/* Counting semaphores between threads: 4 posters x 5000 units, 4 takers
 * (sem_wait, sem_trywait retries, sem_timedwait) take exactly 20000, the
 * value ends at 0; a semaphore as a mutex keeps a counter exact. */
#include "common.h"
#include <semaphore.h>
static sem_t units, mtx;
static long counter;
static void *poster(void *a)
{
    (void)a;
    for (int i = 0; i < 5000; i++)
        sem_post(&units);
    return NULL;
}
static void *taker(void *a)
{
    long k = (long)a;
    for (int i = 0; i < 5000; i++) {
        if (k == 1) {
            while (sem_trywait(&units) != 0)
                sched_yield();
        } else if (k == 2) {
            struct timespec d = deadline(CLOCK_REALTIME, 60000);
            sem_timedwait(&units, &d);
        } else {
            sem_wait(&units);
        }
        sem_wait(&mtx);
        counter++;
        sem_post(&mtx);
    }
    return NULL;
}
int main(void)
{
    sem_init(&units, 0, 0);
    sem_init(&mtx, 0, 1);
    pthread_t t[8];
    for (long i = 0; i < 4; i++) {
        t[i] = spawn(taker, (void *)i);
        t[4 + i] = spawn(poster, NULL);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(t[i], NULL);
    int v = -1, w = -1;
    sem_getvalue(&units, &v);
    sem_getvalue(&mtx, &w);
    printf("taken %ld, value %d, mutex value %d\n", counter, v, w);
    SHOWE("destroy", sem_destroy(&units));
    SHOWE("destroy", sem_destroy(&mtx));
    return 0;
}
