/* sem_timedwait/sem_clockwait: ETIMEDOUT (never before the deadline) when no
 * unit comes, a unit available is taken whatever the deadline, a bad
 * tv_nsec is EINVAL (glibc checks it first, even with a unit available), a
 * bad clock EINVAL; a unit posted while waiting is taken (0), also with
 * far deadlines (largest time_t, 2e10). */
#include "common.h"
#include <semaphore.h>
static sem_t s;
struct req { int kind; struct timespec d; int r, e; };
static atomic_int started;
static void *waiter(void *a)
{
    struct req *q = a;
    atomic_store(&started, 1);
    errno = 0;
    q->r = q->kind ? sem_clockwait(&s, CLOCK_MONOTONIC, &q->d) : sem_timedwait(&s, &q->d);
    q->e = errno;
    return NULL;
}
static void posted(const char *what, int kind, struct timespec d)
{
    struct req q = {kind, d, -2, 0};
    atomic_store(&started, 0);
    pthread_t t = spawn(waiter, &q);
    wait_for(&started, 1);
    ms_sleep(10);
    sem_post(&s);
    pthread_join(t, NULL);
    printf("%s, posted while waiting: %s\n", what, q.r == 0 ? "0" : en(q.e));
    int v = -1;
    sem_getvalue(&s, &v);
    if (v) {
        printf("  value after: %d\n", v);
        while (sem_trywait(&s) == 0)
            ;
    }
}
int main(void)
{
    SHOWE("init", sem_init(&s, 0, 0));
    struct timespec d = deadline(CLOCK_REALTIME, 15);
    SHOWE("timedwait +15ms", sem_timedwait(&s, &d));
    printf("returned before the deadline: %s\n", reached(CLOCK_REALTIME, &d) ? "no" : "yes");
    d = deadline(CLOCK_REALTIME, -1000);
    SHOWE("timedwait past", sem_timedwait(&s, &d));
    d = deadline(CLOCK_MONOTONIC, 15);
    SHOWE("clockwait monotonic +15ms", sem_clockwait(&s, CLOCK_MONOTONIC, &d));
    printf("returned before the deadline: %s\n", reached(CLOCK_MONOTONIC, &d) ? "no" : "yes");
    d = deadline(CLOCK_REALTIME, 15);
    SHOWE("clockwait realtime +15ms", sem_clockwait(&s, CLOCK_REALTIME, &d));
    SHOWE("clockwait CLOCK_PROCESS_CPUTIME_ID", sem_clockwait(&s, CLOCK_PROCESS_CPUTIME_ID, &d));
    d.tv_nsec = -1;
    SHOWE("timedwait nsec -1", sem_timedwait(&s, &d));
    d.tv_nsec = 1000000000;
    SHOWE("timedwait nsec 1e9", sem_timedwait(&s, &d));
    sem_post(&s);
    SHOWE("unit available: timedwait nsec 1e9", sem_timedwait(&s, &d));
    d = deadline(CLOCK_REALTIME, -1000);
    SHOWE("unit available: timedwait past", sem_timedwait(&s, &d));
    sem_post(&s);
    d = deadline(CLOCK_MONOTONIC, -1000);
    SHOWE("unit available: clockwait monotonic past", sem_clockwait(&s, CLOCK_MONOTONIC, &d));
    time_t max = (time_t)((~(unsigned long long)0) >> 1);
    posted("timedwait +60s", 0, deadline(CLOCK_REALTIME, 60000));
    posted("timedwait tv_sec=max", 0, (struct timespec){max, 0});
    posted("timedwait tv_sec=2e10", 0, (struct timespec){20000000000LL, 0});
    posted("clockwait monotonic +1 year", 1, deadline(CLOCK_MONOTONIC, 365L * 86400 * 1000));
    posted("clockwait monotonic tv_sec=max", 1, (struct timespec){max, 0});
    SHOWE("destroy", sem_destroy(&s));
    return 0;
}
