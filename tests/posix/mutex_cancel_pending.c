/* pthread_mutex_lock is not a cancellation point:
 * a thread with a cancel request pending that blocks in pthread_mutex_lock
 * (the process's first contended wait) gets the mutex, runs its critical
 * section and unlocks; the request acts at its next cancellation point. */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static atomic_int ready, go, locked;
static int lock_r = -1, unlock_r = -1;
static void *worker(void *a)
{
    (void)a;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    atomic_store(&ready, 1);
    wait_for(&go, 1); /* cancelled meanwhile: the request is pending */
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL); /* not a cancellation point */
    lock_r = pthread_mutex_lock(&m);                     /* held by main: waits */
    atomic_store(&locked, 1);
    unlock_r = pthread_mutex_unlock(&m);
    pthread_testcancel();
    return (void *)1;
}
int main(void)
{
    pthread_mutex_lock(&m);
    pthread_t t = spawn(worker, NULL);
    wait_for(&ready, 1);
    SHOW("cancel", pthread_cancel(t));
    atomic_store(&go, 1);
    ms_sleep(30); /* the worker blocks in pthread_mutex_lock */
    SHOW("unlock by main", pthread_mutex_unlock(&m));
    void *ret = NULL;
    if (!join_within(t, 5000, &ret)) {
        printf("the worker did not end\n");
        finish(0);
    }
    printf("worker: lock %s, critical section ran %d, unlock %s, ended %s\n", en(lock_r), atomic_load(&locked),
           en(unlock_r), ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "returned");
    SHOW("trylock by main", pthread_mutex_trylock(&m));
    return 0;
}
