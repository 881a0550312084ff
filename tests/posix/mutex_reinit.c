/* init/destroy cycles on the same memory, changing the type each time, and
 * mutexes in memory freed and reused: each behaves as its latest type. */
#include "common.h"
int main(void)
{
    pthread_mutex_t m;
    int errors = 0;
    for (int k = 0; k < 300; k++) {
        int ti = k % N_MUTEX_TYPES, type = mutex_types[ti].type;
        errors += mutex_of(&m, type) != 0;
        errors += pthread_mutex_lock(&m) != 0;
        int r = pthread_mutex_trylock(&m);
        int want = type == PTHREAD_MUTEX_RECURSIVE ? 0 : EBUSY;
        if (r != want) {
            printf("cycle %d [%s]: trylock by holder %s\n", k, mutex_types[ti].name, en(r));
            errors++;
        }
        if (r == 0)
            pthread_mutex_unlock(&m);
        errors += pthread_mutex_unlock(&m) != 0;
        errors += pthread_mutex_destroy(&m) != 0;
    }
    printf("init/lock/unlock/destroy cycles: 300, errors: %d\n", errors);
    errors = 0;
    for (int k = 0; k < 300; k++) {
        pthread_mutex_t *p = malloc(sizeof *p);
        mutex_of(p, k % 2 ? PTHREAD_MUTEX_ERRORCHECK : PTHREAD_MUTEX_NORMAL);
        errors += pthread_mutex_lock(p) != 0;
        if (k % 2)
            errors += pthread_mutex_lock(p) != EDEADLK;
        errors += pthread_mutex_unlock(p) != 0;
        if (k % 3)
            pthread_mutex_destroy(p); /* and sometimes freed without destroy */
        free(p);
    }
    printf("malloc'd mutexes: 300, errors: %d\n", errors);
    return 0;
}
