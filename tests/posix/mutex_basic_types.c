/* Every mutex type: lock, trylock by the holder (EBUSY for all but
 * RECURSIVE), unlock, trylock of a free mutex, destroy. */
#include "common.h"
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        printf("[%s]\n", mutex_types[i].name);
        SHOW("init", mutex_of(&m, mutex_types[i].type));
        SHOW("lock", pthread_mutex_lock(&m));
        int r = pthread_mutex_trylock(&m);
        printf("trylock by holder: %s\n", en(r));
        if (r == 0)
            SHOW("unlock (recursion)", pthread_mutex_unlock(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("trylock free", pthread_mutex_trylock(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("destroy", pthread_mutex_destroy(&m));
    }
    return 0;
}
