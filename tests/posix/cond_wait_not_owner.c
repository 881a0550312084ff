/* Waiting with an ERRORCHECK or RECURSIVE mutex the caller does not hold:
 * EPERM (glibc checks, returns at once); the condvar is still usable. */
#include "common.h"
int main(void)
{
    static const int types[] = {PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_RECURSIVE};
    for (int i = 0; i < 2; i++) {
        pthread_mutex_t m;
        pthread_cond_t c;
        mutex_of(&m, types[i]);
        pthread_cond_init(&c, NULL);
        printf("[%s]\n", i ? "recursive" : "errorcheck");
        SHOW("wait unlocked", pthread_cond_wait(&c, &m));
        struct timespec d = deadline(CLOCK_REALTIME, 1000);
        SHOW("timedwait unlocked", pthread_cond_timedwait(&c, &m, &d));
        struct holder h;
        hold_start(&h, &m);
        SHOW("wait held by other thread", pthread_cond_wait(&c, &m));
        hold_end(&h);
        pthread_mutex_lock(&m);
        d = deadline(CLOCK_REALTIME, 5);
        SHOW("timedwait held", pthread_cond_timedwait(&c, &m, &d));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("destroy", pthread_cond_destroy(&c));
    }
    return 0;
}
