/* EOWNERDEAD is returned by trylock, timedlock and clocklock too, and the
 * caller then holds the mutex (another thread's trylock: EBUSY). */
#include "common.h"
static void *die_holding(void *m)
{
    pthread_mutex_lock(m);
    return NULL;
}
int main(void)
{
    pthread_mutexattr_t a;
    pthread_mutex_t m;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    for (int k = 0; k < 3; k++) {
        pthread_mutex_init(&m, &a);
        pthread_join(spawn(die_holding, &m), NULL);
        struct timespec d = deadline(k == 2 ? CLOCK_MONOTONIC : CLOCK_REALTIME, 1000);
        int r = k == 0 ? pthread_mutex_trylock(&m) : k == 1 ? pthread_mutex_timedlock(&m, &d)
                                                            : pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &d);
        printf("%s after owner died: %s\n", k == 0 ? "trylock" : k == 1 ? "timedlock" : "clocklock", en(r));
        SHOW("trylock by other thread", in_thread(trylock_fn, &m));
        SHOW("consistent", pthread_mutex_consistent(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("destroy", pthread_mutex_destroy(&m));
    }
    return 0;
}
