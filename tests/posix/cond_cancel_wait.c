/* pthread_cond_wait is a cancellation point: a thread blocked in it and
 * cancelled ends (join gives PTHREAD_CANCELED) without a signal, and its
 * cleanup handler runs with the mutex held (an ERRORCHECK mutex: the
 * handler's unlock returns 0).  If the wait is not ended by the cancel
 * within 2 s, that is reported and the condvar broadcast to finish. */
#include "common.h"
static pthread_mutex_t m;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static atomic_int waiting;
static int cleanup_unlock[3] = {-1, -1, -1}, cleanup_ran[3];
static void cleanup(void *a)
{
    long k = (long)a;
    cleanup_ran[k] = 1;
    cleanup_unlock[k] = pthread_mutex_unlock(&m);
}
static void *waiter(void *a)
{
    long kind = (long)a;
    pthread_mutex_lock(&m);
    pthread_cleanup_push(cleanup, a);
    atomic_fetch_add(&waiting, 1);
    for (;;) {
        if (kind == 0) {
            pthread_cond_wait(&c, &m);
        } else {
            struct timespec d = deadline(kind == 1 ? CLOCK_REALTIME : CLOCK_MONOTONIC, 60000);
            if (kind == 1)
                pthread_cond_timedwait(&c, &m, &d);
            else
                pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d);
        }
    }
    pthread_cleanup_pop(0);
    return NULL;
}
int main(void)
{
    static const char *names[] = {"wait", "timedwait", "clockwait"};
    mutex_of(&m, PTHREAD_MUTEX_ERRORCHECK);
    pthread_t t[3];
    for (long k = 0; k < 3; k++)
        t[k] = spawn(waiter, (void *)k);
    wait_for(&waiting, 3);
    pthread_mutex_lock(&m); /* the waiters are inside their waits once m is free */
    pthread_mutex_unlock(&m);
    for (int k = 0; k < 3; k++)
        SHOW("cancel", pthread_cancel(t[k]));
    /* one 2 s window for the three (see common.h join_within) */
    struct timespec d = deadline(CLOCK_REALTIME, 2000);
    void *ret[3] = {NULL, NULL, NULL};
    int joined[3];
    for (int k = 0; k < 3; k++)
        joined[k] = pthread_timedjoin_np(t[k], &ret[k], &d) == 0;
    for (int k = 0; k < 3; k++)
        if (!joined[k])
            printf("%s: the cancel did not end the wait\n", names[k]);
    pthread_mutex_lock(&m);
    pthread_cond_broadcast(&c);
    pthread_mutex_unlock(&m);
    for (int k = 0; k < 3; k++) {
        if (!joined[k])
            pthread_join(t[k], &ret[k]);
        printf("%s: joined %s, cleanup ran %d, unlock in cleanup %s\n", names[k],
               ret[k] == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "other", cleanup_ran[k], en(cleanup_unlock[k]));
    }
    SHOW("trylock after", pthread_mutex_trylock(&m));
    SHOW("unlock", pthread_mutex_unlock(&m));
    return 0;
}
