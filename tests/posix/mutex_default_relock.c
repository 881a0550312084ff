/* The default mutex (PTHREAD_MUTEX_INITIALIZER; NORMAL in glibc): relock by
 * the holder deadlocks, as for NORMAL (see mutex_normal_relock.c). */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static atomic_int stage;
static int relock_r, timed_r;
static void *relocker(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    struct timespec d = deadline(CLOCK_REALTIME, 20);
    timed_r = pthread_mutex_timedlock(&m, &d); /* NORMAL relock: waits, then ETIMEDOUT */
    atomic_store(&stage, 1);
    relock_r = pthread_mutex_lock(&m);
    atomic_store(&stage, 2);
    return NULL;
}
int main(void)
{
    spawn(relocker, NULL);
    wait_for(&stage, 1);
    printf("timedlock relock: %s\n", en(timed_r));
    ms_sleep(200);
    if (atomic_load(&stage) == 2)
        printf("relock returned: %s\n", en(relock_r));
    else
        printf("relock: still blocked\n");
    SHOW("trylock by main", pthread_mutex_trylock(&m));
    finish(0);
}
