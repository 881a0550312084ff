/* A timed waiter that is signalled before its deadline returns 0 (not
 * ETIMEDOUT), for near, far (tv_sec = the largest time_t, 2e10) and
 * monotonic deadlines (clockwait, and a CLOCK_MONOTONIC condvar a year
 * ahead, which read as a realtime deadline would be long past). */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c;
static int flag, waiting;
struct req { int kind; struct timespec d; int r; };
static void *waiter(void *a)
{
    struct req *q = a;
    pthread_mutex_lock(&m);
    waiting = 1;
    q->r = 0;
    while (!flag && q->r == 0)
        q->r = q->kind == 0   ? pthread_cond_timedwait(&c, &m, &q->d)
               : q->kind == 1 ? pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &q->d)
                              : pthread_cond_clockwait(&c, &m, CLOCK_REALTIME, &q->d);
    pthread_mutex_unlock(&m);
    return NULL;
}
static void one(const char *what, int mono_cond, int kind, struct timespec d)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    if (mono_cond)
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c, &ca);
    flag = waiting = 0;
    struct req q = {kind, d, -1};
    pthread_t t = spawn(waiter, &q);
    for (;;) {
        pthread_mutex_lock(&m);
        int w = waiting;
        if (w) {
            flag = 1;
            pthread_cond_signal(&c);
        }
        pthread_mutex_unlock(&m);
        if (w)
            break;
        ms_sleep(1);
    }
    pthread_join(t, NULL);
    printf("%s: %s\n", what, en(q.r));
    pthread_cond_destroy(&c);
    pthread_condattr_destroy(&ca);
}
int main(void)
{
    time_t max = (time_t)((~(unsigned long long)0) >> 1);
    one("timedwait +60s", 0, 0, deadline(CLOCK_REALTIME, 60000));
    one("timedwait tv_sec=max", 0, 0, (struct timespec){max, 0});
    one("timedwait tv_sec=max nsec=999999999", 0, 0, (struct timespec){max, 999999999});
    one("timedwait tv_sec=2e10", 0, 0, (struct timespec){20000000000LL, 0});
    one("clockwait monotonic +1 year", 0, 1, deadline(CLOCK_MONOTONIC, 365L * 86400 * 1000));
    one("clockwait monotonic tv_sec=max", 0, 1, (struct timespec){max, 0});
    one("clockwait realtime tv_sec=2e10", 0, 2, (struct timespec){20000000000LL, 0});
    one("monotonic condvar: timedwait +1 year", 1, 0, deadline(CLOCK_MONOTONIC, 365L * 86400 * 1000));
    one("monotonic condvar: timedwait tv_sec=max", 1, 0, (struct timespec){max, 0});
    return 0;
}
