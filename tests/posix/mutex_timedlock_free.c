/* timedlock/clocklock of a free mutex take it whatever the deadline (a
 * past one included: POSIX "the validity of the abstime parameter need not
 * be checked if the mutex can be locked immediately"); every type. */
#include "common.h"
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        mutex_of(&m, mutex_types[i].type);
        printf("[%s]\n", mutex_types[i].name);
        struct timespec d = deadline(CLOCK_REALTIME, -1000);
        SHOW("timedlock past", pthread_mutex_timedlock(&m, &d));
        SHOW("trylock by other thread", in_thread(trylock_fn, &m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        d = deadline(CLOCK_MONOTONIC, -1000);
        SHOW("clocklock monotonic past", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &d));
        SHOW("unlock", pthread_mutex_unlock(&m));
        d = deadline(CLOCK_REALTIME, 60000);
        SHOW("timedlock future", pthread_mutex_timedlock(&m, &d));
        SHOW("unlock", pthread_mutex_unlock(&m));
        pthread_mutex_destroy(&m);
    }
    return 0;
}
