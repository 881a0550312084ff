/* sem_wait, sem_timedwait and sem_clockwait are cancellation points: a
 * thread blocked in one and cancelled ends (PTHREAD_CANCELED) without
 * taking a unit: a unit posted afterwards is still there.  If the cancel
 * does not end the wait within 2 s that is reported and a unit posted. */
#include "common.h"
#include <semaphore.h>
static sem_t s;
static atomic_int started;
static void *waiter(void *a)
{
    long k = (long)a;
    atomic_store(&started, 1);
    struct timespec d = deadline(k == 2 ? CLOCK_MONOTONIC : CLOCK_REALTIME, 60000);
    if (k == 0)
        sem_wait(&s);
    else if (k == 1)
        sem_timedwait(&s, &d);
    else
        sem_clockwait(&s, CLOCK_MONOTONIC, &d);
    return NULL;
}
int main(void)
{
    static const char *names[] = {"sem_wait", "sem_timedwait", "sem_clockwait"};
    for (long k = 0; k < 3; k++) {
        sem_init(&s, 0, 0);
        atomic_store(&started, 0);
        pthread_t t = spawn(waiter, (void *)k);
        wait_for(&started, 1);
        ms_sleep(20); /* into the wait (a cancel before it acts the same) */
        SHOW("cancel", pthread_cancel(t));
        void *ret = NULL;
        if (!join_within(t, 2000, &ret)) {
            printf("%s: the cancel did not end the wait\n", names[k]);
            sem_post(&s);
            pthread_join(t, &ret);
        }
        sem_post(&s);
        int v = -1;
        sem_getvalue(&s, &v);
        printf("%s: %s, value after one post %d\n", names[k], ret == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "returned",
               v);
        sem_destroy(&s);
    }
    return 0;
}
