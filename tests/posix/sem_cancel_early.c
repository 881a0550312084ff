/* A cancel request that arrives just as a thread enters sem_wait (the
 * process's first wait): the thread ends cancelled without taking a unit,
 * and the semaphore stays usable - later posts and waits by other threads
 * work.  (A liblock semaphore may instead let the wait go on until a unit
 * comes, as documented; it must not leave the semaphore broken.) */
#include "common.h"
#include <semaphore.h>
static sem_t s;
static atomic_int entering;
static void *waiter(void *a)
{
    (void)a;
    atomic_store(&entering, 1);
    sem_wait(&s);
    return NULL;
}
int main(void)
{
    sem_init(&s, 0, 0);
    pthread_t t = spawn(waiter, NULL);
    while (!atomic_load(&entering))
        ;
    SHOW("cancel", pthread_cancel(t));
    void *ret = NULL;
    if (!join_within(t, 2000, &ret)) {
        printf("the cancel did not end the wait\n");
        sem_post(&s);
        pthread_join(t, &ret);
    }
    printf("waiter: %s\n", ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "returned");
    int errors = 0;
    for (int i = 0; i < 100; i++)
        errors += sem_post(&s) != 0;
    for (int i = 0; i < 100; i++)
        errors += sem_wait(&s) != 0;
    int v = -1;
    sem_getvalue(&s, &v);
    printf("100 posts and waits afterwards: errors %d, value %d\n", errors, v);
    return 0;
}
