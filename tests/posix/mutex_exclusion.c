/* Mutual exclusion: 4 threads x 20000 increments under a mutex of each
 * type (RECURSIVE taken twice; every 8th acquisition by trylock-retry,
 * every 8th by timedlock) give an exact count. */
#include "common.h"
#define T 4
#define N 20000
static pthread_mutex_t m;
static long counter;
static int type, errors;
static void *worker(void *a)
{
    (void)a;
    for (int i = 0; i < N; i++) {
        int r;
        if (i % 8 == 3) {
            while ((r = pthread_mutex_trylock(&m)) == EBUSY)
                sched_yield();
        } else if (i % 8 == 5) {
            struct timespec d = deadline(CLOCK_REALTIME, 60000);
            r = pthread_mutex_timedlock(&m, &d);
        } else {
            r = pthread_mutex_lock(&m);
        }
        if (r)
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
        if (type == PTHREAD_MUTEX_RECURSIVE)
            pthread_mutex_lock(&m);
        long c = counter;
        if (i % 64 == 0)
            sched_yield();
        counter = c + 1;
        if (type == PTHREAD_MUTEX_RECURSIVE)
            pthread_mutex_unlock(&m);
        if (pthread_mutex_unlock(&m))
            __atomic_add_fetch(&errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        type = mutex_types[i].type;
        mutex_of(&m, type);
        counter = 0;
        errors = 0;
        pthread_t t[T];
        for (int k = 0; k < T; k++)
            t[k] = spawn(worker, NULL);
        for (int k = 0; k < T; k++)
            pthread_join(t[k], NULL);
        printf("[%s] counter %ld (expected %d), errors %d\n", mutex_types[i].name, counter, T * N, errors);
        pthread_mutex_destroy(&m);
    }
    return 0;
}
