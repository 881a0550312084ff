/* The pthread_mutex_* calls return their error and leave errno alone, on
 * success and on failure (EBUSY, ETIMEDOUT, EDEADLK, EPERM), also after
 * waiting for another thread. */
#include "common.h"
int main(void)
{
    pthread_mutex_t m, e;
    struct holder h;
    mutex_of(&m, PTHREAD_MUTEX_NORMAL);
    mutex_of(&e, PTHREAD_MUTEX_ERRORCHECK);
    int changed = 0;
#define KEEP(expr)                                  \
    do {                                            \
        errno = 4242;                               \
        (void)(expr);                               \
        if (errno != 4242) {                        \
            printf("%s changed errno\n", #expr);    \
            changed++;                              \
        }                                           \
    } while (0)
    KEEP(pthread_mutex_lock(&m));
    KEEP(pthread_mutex_trylock(&m));
    KEEP(pthread_mutex_unlock(&m));
    KEEP(pthread_mutex_lock(&e));
    KEEP(pthread_mutex_lock(&e));
    KEEP(pthread_mutex_unlock(&e));
    KEEP(pthread_mutex_unlock(&e));
    hold_start(&h, &m);
    struct timespec d = deadline(CLOCK_REALTIME, 20);
    KEEP(pthread_mutex_timedlock(&m, &d));
    struct hold_later l = {&h, 20};
    pthread_t t = spawn(hold_later_fn, &l);
    KEEP(pthread_mutex_lock(&m)); /* waits for the holder */
    KEEP(pthread_mutex_unlock(&m));
    pthread_join(t, NULL);
    pthread_join(h.t, NULL);
    KEEP(pthread_mutex_destroy(&m));
    printf("calls that changed errno: %d\n", changed);
    return 0;
}
