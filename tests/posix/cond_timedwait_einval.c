/* timedwait/clockwait with a bad tv_nsec, or clockwait with a clock other
 * than REALTIME/MONOTONIC: EINVAL, the mutex still held. */
#include "common.h"
int main(void)
{
    pthread_mutex_t m;
    pthread_cond_t c;
    mutex_of(&m, PTHREAD_MUTEX_ERRORCHECK);
    pthread_cond_init(&c, NULL);
    pthread_mutex_lock(&m);
    struct timespec d = deadline(CLOCK_REALTIME, 100);
    d.tv_nsec = -1;
    SHOW("timedwait nsec -1", pthread_cond_timedwait(&c, &m, &d));
    d.tv_nsec = 1000000000;
    SHOW("timedwait nsec 1e9", pthread_cond_timedwait(&c, &m, &d));
    SHOW("clockwait monotonic nsec 1e9", pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d));
    d = deadline(CLOCK_REALTIME, 10);
    SHOW("clockwait CLOCK_PROCESS_CPUTIME_ID", pthread_cond_clockwait(&c, &m, CLOCK_PROCESS_CPUTIME_ID, &d));
    SHOW("clockwait clock 12345", pthread_cond_clockwait(&c, &m, (clockid_t)12345, &d));
    SHOW("still held (relock)", pthread_mutex_lock(&m));
    SHOW("unlock", pthread_mutex_unlock(&m));
    SHOW("destroy", pthread_cond_destroy(&c));
    return 0;
}
