/* Deadlines far in the future (tv_sec = the largest time_t, 2e10 s, and a
 * monotonic one a year ahead) are valid: the waiter gets the mutex when the
 * holder releases it, not ETIMEDOUT or EINVAL. */
#include "common.h"
static void one(const char *what, clockid_t clk, struct timespec d, int clocklock)
{
    pthread_mutex_t m;
    struct holder h;
    mutex_of(&m, PTHREAD_MUTEX_NORMAL);
    hold_start(&h, &m);
    struct hold_later l = {&h, 20};
    pthread_t t = spawn(hold_later_fn, &l);
    int r = clocklock ? pthread_mutex_clocklock(&m, clk, &d) : pthread_mutex_timedlock(&m, &d);
    printf("%s: %s\n", what, en(r));
    pthread_join(t, NULL);
    pthread_join(h.t, NULL);
    if (r == 0)
        pthread_mutex_unlock(&m);
    pthread_mutex_destroy(&m);
}
int main(void)
{
    time_t max = (time_t)((~(unsigned long long)0) >> 1);
    one("timedlock tv_sec=max", CLOCK_REALTIME, (struct timespec){max, 0}, 0);
    one("timedlock tv_sec=max nsec=999999999", CLOCK_REALTIME, (struct timespec){max, 999999999}, 0);
    one("timedlock tv_sec=2e10", CLOCK_REALTIME, (struct timespec){20000000000LL, 0}, 0);
    one("clocklock realtime tv_sec=max", CLOCK_REALTIME, (struct timespec){max, 0}, 1);
    one("clocklock monotonic tv_sec=max", CLOCK_MONOTONIC, (struct timespec){max, 0}, 1);
    one("clocklock monotonic +1 year", CLOCK_MONOTONIC, deadline(CLOCK_MONOTONIC, 365L * 86400 * 1000), 1);
    return 0;
}
