/* A timedlock/clocklock waiting for a held mutex gets it (0) when the
 * holder unlocks before the deadline; every type. */
#include "common.h"
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        for (int clk = 0; clk < 2; clk++) {
            pthread_mutex_t m;
            struct holder h;
            mutex_of(&m, mutex_types[i].type);
            hold_start(&h, &m);
            struct hold_later l = {&h, 20};
            pthread_t t = spawn(hold_later_fn, &l);
            int r;
            if (clk) {
                struct timespec d = deadline(CLOCK_MONOTONIC, 60000);
                r = pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &d);
            } else {
                struct timespec d = deadline(CLOCK_REALTIME, 60000);
                r = pthread_mutex_timedlock(&m, &d);
            }
            printf("[%s] %s while held, released after 20 ms: %s\n", mutex_types[i].name,
                   clk ? "clocklock monotonic" : "timedlock", en(r));
            pthread_join(t, NULL);
            pthread_join(h.t, NULL);
            SHOW("holder unlock", h.unlock_r);
            SHOW("unlock", pthread_mutex_unlock(&m));
            pthread_mutex_destroy(&m);
        }
    }
    return 0;
}
