/* 300 threads at once (many more than CPUs) on one default mutex and one
 * ERRORCHECK mutex: each locks each 5 times (every 5th by trylock-retry):
 * exact counts, no errors.  (Kept small: with FIFO hand-offs to threads that
 * are not running, each acquisition may cost a scheduler time slice.) */
#include "common.h"
#define T 300
#define N 5
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, e;
static long counter, ecounter;
static atomic_int errors, go;
static void *worker(void *a)
{
    (void)a;
    wait_for(&go, 1);
    for (int i = 0; i < N; i++) {
        int r;
        if (i % 5 == 4) {
            while ((r = pthread_mutex_trylock(&m)) == EBUSY)
                sched_yield();
        } else {
            r = pthread_mutex_lock(&m);
        }
        if (r)
            atomic_fetch_add(&errors, 1);
        counter++;
        if (pthread_mutex_unlock(&m))
            atomic_fetch_add(&errors, 1);
        if (pthread_mutex_lock(&e) || pthread_mutex_lock(&e) != EDEADLK)
            atomic_fetch_add(&errors, 1);
        ecounter++;
        if (pthread_mutex_unlock(&e))
            atomic_fetch_add(&errors, 1);
    }
    return NULL;
}
int main(void)
{
    mutex_of(&e, PTHREAD_MUTEX_ERRORCHECK);
    pthread_t t[T];
    for (int i = 0; i < T; i++)
        t[i] = spawn(worker, NULL);
    atomic_store(&go, 1);
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    printf("counter %ld, errorcheck counter %ld (expected %d each), errors %d\n", counter, ecounter, T * N,
           atomic_load(&errors));
    return 0;
}
