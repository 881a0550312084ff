/* pthread_condattr_setclock(CLOCK_MONOTONIC): timedwait deadlines are read
 * on the monotonic clock (a monotonic deadline 15 ms ahead times out, not
 * before it is reached on that clock; one a second in the past at once);
 * the attribute's defaults, getclock, and EINVAL for a CPU-time clock. */
#include "common.h"
int main(void)
{
    pthread_condattr_t ca;
    clockid_t clk = -1;
    int ps = -1;
    SHOW("condattr init", pthread_condattr_init(&ca));
    pthread_condattr_getclock(&ca, &clk);
    printf("default clock realtime: %s\n", clk == CLOCK_REALTIME ? "yes" : "no");
    pthread_condattr_getpshared(&ca, &ps);
    printf("default pshared private: %s\n", ps == PTHREAD_PROCESS_PRIVATE ? "yes" : "no");
    SHOW("setclock CLOCK_PROCESS_CPUTIME_ID", pthread_condattr_setclock(&ca, CLOCK_PROCESS_CPUTIME_ID));
    SHOW("setclock CLOCK_THREAD_CPUTIME_ID", pthread_condattr_setclock(&ca, CLOCK_THREAD_CPUTIME_ID));
    SHOW("setpshared 7", pthread_condattr_setpshared(&ca, 7));
    SHOW("setclock CLOCK_MONOTONIC", pthread_condattr_setclock(&ca, CLOCK_MONOTONIC));
    pthread_condattr_getclock(&ca, &clk);
    printf("getclock monotonic: %s\n", clk == CLOCK_MONOTONIC ? "yes" : "no");
    pthread_mutex_t m;
    pthread_cond_t c;
    mutex_of(&m, PTHREAD_MUTEX_ERRORCHECK);
    SHOW("cond init", pthread_cond_init(&c, &ca));
    pthread_mutex_lock(&m);
    struct timespec d = deadline(CLOCK_MONOTONIC, 15);
    SHOW("timedwait monotonic +15ms", pthread_cond_timedwait(&c, &m, &d));
    printf("returned before the deadline: %s\n", reached(CLOCK_MONOTONIC, &d) ? "no" : "yes");
    d = deadline(CLOCK_MONOTONIC, -1000);
    SHOW("timedwait monotonic past", pthread_cond_timedwait(&c, &m, &d));
    d = deadline(CLOCK_REALTIME, 15);
    SHOW("clockwait realtime +15ms (clock given overrides)", pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &d));
    printf("returned before the deadline: %s\n", reached(CLOCK_REALTIME, &d) ? "no" : "yes");
    SHOW("unlock", pthread_mutex_unlock(&m));
    SHOW("cond destroy", pthread_cond_destroy(&c));
    SHOW("condattr destroy", pthread_condattr_destroy(&ca));
    return 0;
}
