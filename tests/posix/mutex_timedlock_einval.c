/* A bad tv_nsec (negative, or 1e9) when the mutex is held by another
 * thread: EINVAL from timedlock and clocklock, the mutex left alone; a
 * clock other than REALTIME/MONOTONIC: EINVAL from clocklock.  (With the
 * mutex free, whatever glibc does is the reference.) */
#include "common.h"
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        struct holder h;
        mutex_of(&m, mutex_types[i].type);
        printf("[%s]\n", mutex_types[i].name);
        hold_start(&h, &m);
        struct timespec d = deadline(CLOCK_REALTIME, 100);
        d.tv_nsec = -1;
        SHOW("held: timedlock nsec -1", pthread_mutex_timedlock(&m, &d));
        d.tv_nsec = 1000000000;
        SHOW("held: timedlock nsec 1e9", pthread_mutex_timedlock(&m, &d));
        SHOW("held: clocklock monotonic nsec 1e9", pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &d));
        d = deadline(CLOCK_REALTIME, 10);
        SHOW("held: clocklock CLOCK_PROCESS_CPUTIME_ID", pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &d));
        SHOW("held: clocklock clock 12345", pthread_mutex_clocklock(&m, (clockid_t)12345, &d));
        hold_end(&h);
        SHOW("holder unlock", h.unlock_r);
        d = deadline(CLOCK_REALTIME, 100);
        int r = pthread_mutex_clocklock(&m, CLOCK_PROCESS_CPUTIME_ID, &d);
        printf("free: clocklock CLOCK_PROCESS_CPUTIME_ID: %s\n", en(r));
        if (r == 0)
            pthread_mutex_unlock(&m);
        SHOW("trylock after", pthread_mutex_trylock(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        pthread_mutex_destroy(&m);
    }
    return 0;
}
