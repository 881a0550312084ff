/* timedwait/clockwait time out with ETIMEDOUT, never before the deadline,
 * and return with the mutex held (ERRORCHECK and RECURSIVE mutexes say
 * so); a deadline in the past times out at once; several clocks. */
#include "common.h"
int main(void)
{
    static const int types[] = {PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_RECURSIVE, PTHREAD_MUTEX_NORMAL};
    for (int i = 0; i < 3; i++) {
        pthread_mutex_t m;
        pthread_cond_t c;
        mutex_of(&m, types[i]);
        pthread_cond_init(&c, NULL);
        printf("[type %d]\n", types[i]);
        pthread_mutex_lock(&m);
        struct timespec d = deadline(CLOCK_REALTIME, 15);
        SHOW("timedwait +15ms", pthread_cond_timedwait(&c, &m, &d));
        printf("returned before the deadline: %s\n", reached(CLOCK_REALTIME, &d) ? "no" : "yes");
        SHOW("trylock by other thread", in_thread(trylock_fn, &m));
        d = deadline(CLOCK_REALTIME, -1000);
        SHOW("timedwait past", pthread_cond_timedwait(&c, &m, &d));
        d = (struct timespec){0, 0};
        SHOW("timedwait epoch", pthread_cond_timedwait(&c, &m, &d));
        d = deadline(CLOCK_MONOTONIC, 15);
        SHOW("clockwait monotonic +15ms", pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d));
        printf("returned before the deadline: %s\n", reached(CLOCK_MONOTONIC, &d) ? "no" : "yes");
        d = deadline(CLOCK_MONOTONIC, -1000);
        SHOW("clockwait monotonic past", pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d));
        d = deadline(CLOCK_REALTIME, 15);
        SHOW("clockwait realtime +15ms", pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &d));
        SHOW("trylock by other thread", in_thread(trylock_fn, &m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        if (types[i] != PTHREAD_MUTEX_NORMAL) /* NORMAL: undefined */
            SHOW("unlock again", pthread_mutex_unlock(&m));
        SHOW("destroy", pthread_cond_destroy(&c));
    }
    return 0;
}
