/* signal and broadcast with no waiter return 0 and are not remembered: a
 * later timed wait times out (never before its deadline) with the mutex
 * held; also on a PTHREAD_COND_INITIALIZER condvar never waited on, which
 * destroy then accepts. */
#include "common.h"
int main(void)
{
    pthread_mutex_t m;
    pthread_cond_t c, s = PTHREAD_COND_INITIALIZER, z = PTHREAD_COND_INITIALIZER;
    mutex_of(&m, PTHREAD_MUTEX_ERRORCHECK);
    pthread_cond_init(&c, NULL);
    SHOW("signal", pthread_cond_signal(&c));
    SHOW("broadcast", pthread_cond_broadcast(&c));
    SHOW("static: signal", pthread_cond_signal(&s));
    SHOW("static: broadcast", pthread_cond_broadcast(&s));
    pthread_mutex_lock(&m);
    struct timespec d = deadline(CLOCK_REALTIME, 20);
    SHOW("timedwait after them", pthread_cond_timedwait(&c, &m, &d));
    printf("returned before the deadline: %s\n", reached(CLOCK_REALTIME, &d) ? "no" : "yes");
    SHOW("mutex held (relock)", pthread_mutex_lock(&m));
    d = deadline(CLOCK_REALTIME, 20);
    SHOW("static: timedwait", pthread_cond_timedwait(&s, &m, &d));
    SHOW("unlock", pthread_mutex_unlock(&m));
    SHOW("destroy", pthread_cond_destroy(&c));
    SHOW("static: destroy", pthread_cond_destroy(&s));
    SHOW("never used: destroy", pthread_cond_destroy(&z));
    return 0;
}
