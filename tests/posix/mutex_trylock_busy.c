/* trylock of a mutex another thread holds: EBUSY for every type; it does
 * not block and does not take the mutex. */
#include "common.h"
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        struct holder h;
        mutex_of(&m, mutex_types[i].type);
        hold_start(&h, &m);
        printf("[%s] trylock while held: %s", mutex_types[i].name, en(pthread_mutex_trylock(&m)));
        hold_end(&h);
        printf(", holder unlock: %s", en(h.unlock_r));
        int r = pthread_mutex_trylock(&m);
        printf(", trylock after: %s\n", en(r));
        if (r == 0)
            pthread_mutex_unlock(&m);
        pthread_mutex_destroy(&m);
    }
    return 0;
}
