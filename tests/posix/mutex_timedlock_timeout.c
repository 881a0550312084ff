/* timedlock and clocklock of a mutex another thread holds: ETIMEDOUT, for a
 * deadline already past and for one a little ahead, never before the
 * deadline; every type; REALTIME and MONOTONIC clocks. */
#include "common.h"
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        struct holder h;
        mutex_of(&m, mutex_types[i].type);
        hold_start(&h, &m);
        printf("[%s]\n", mutex_types[i].name);
        struct timespec d = deadline(CLOCK_REALTIME, -1000);
        SHOW("timedlock past", pthread_mutex_timedlock(&m, &d));
        d = (struct timespec){0, 0};
        SHOW("timedlock epoch", pthread_mutex_timedlock(&m, &d));
        d = deadline(CLOCK_REALTIME, 15);
        SHOW("timedlock +15ms", pthread_mutex_timedlock(&m, &d));
        printf("returned before the deadline: %s\n", reached(CLOCK_REALTIME, &d) ? "no" : "yes");
        d = deadline(CLOCK_MONOTONIC, -1000);
        SHOW("clocklock monotonic past", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &d));
        d = deadline(CLOCK_MONOTONIC, 15);
        SHOW("clocklock monotonic +15ms", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &d));
        printf("returned before the deadline: %s\n", reached(CLOCK_MONOTONIC, &d) ? "no" : "yes");
        d = deadline(CLOCK_REALTIME, 15);
        SHOW("clocklock realtime +15ms", pthread_mutex_clocklock(&m, CLOCK_REALTIME, &d));
        hold_end(&h);
        SHOW("holder unlock", h.unlock_r);
        pthread_mutex_destroy(&m);
    }
    return 0;
}
