/* NORMAL: relocking by the holder deadlocks (POSIX: "deadlock shall
 * occur").  Observed from the main thread: the relocking
 * thread has not returned when the program ends, and the mutex stays held. */
#include "common.h"
static pthread_mutex_t m;
static atomic_int stage;
static int relock_r;
static void *relocker(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    atomic_store(&stage, 1);
    relock_r = pthread_mutex_lock(&m);
    atomic_store(&stage, 2);
    return NULL;
}
int main(void)
{
    mutex_of(&m, PTHREAD_MUTEX_NORMAL);
    spawn(relocker, NULL);
    wait_for(&stage, 1);
    ms_sleep(200); /* a relock that returns does so now; correct: never */
    if (atomic_load(&stage) == 2)
        printf("relock returned: %s\n", en(relock_r));
    else
        printf("relock: still blocked\n");
    SHOW("trylock by main", pthread_mutex_trylock(&m));
    finish(0);
}
