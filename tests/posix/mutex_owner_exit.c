/* A (non-robust) mutex held by a thread that ended stays held: trylock
 * EBUSY, timedlock ETIMEDOUT; an ERRORCHECK one cannot be unlocked by
 * another thread (EPERM). */
#include "common.h"
static void *die_holding(void *m)
{
    pthread_mutex_lock(m);
    return NULL;
}
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        mutex_of(&m, mutex_types[i].type);
        pthread_join(spawn(die_holding, &m), NULL);
        struct timespec d = deadline(CLOCK_REALTIME, 10);
        int t = pthread_mutex_trylock(&m), tl = pthread_mutex_timedlock(&m, &d);
        printf("[%s] trylock: %s timedlock: %s", mutex_types[i].name, en(t), en(tl));
        if (mutex_types[i].type == PTHREAD_MUTEX_ERRORCHECK || mutex_types[i].type == PTHREAD_MUTEX_RECURSIVE)
            printf(" unlock: %s", en(pthread_mutex_unlock(&m)));
        printf("\n");
    }
    return 0;
}
