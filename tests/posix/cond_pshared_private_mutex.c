/* A process-shared condvar used by threads of one process with a private
 * mutex (allowed: the attribute says who may use the condvar, the mutex
 * may be of any kind): waits, timed waits and signals behave as usual. */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c;
static int flag, waiting, wr = -1;
static void *waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    waiting = 1;
    while (!flag && (wr = pthread_cond_wait(&c, &m)) == 0)
        ;
    pthread_mutex_unlock(&m);
    return NULL;
}
int main(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED);
    SHOW("cond init", pthread_cond_init(&c, &ca));
    pthread_mutex_lock(&m);
    struct timespec d = deadline(CLOCK_REALTIME, 10);
    SHOW("timedwait", pthread_cond_timedwait(&c, &m, &d));
    pthread_mutex_unlock(&m);
    pthread_t t = spawn(waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&m);
        if (waiting)
            break;
        pthread_mutex_unlock(&m);
        ms_sleep(1);
    }
    flag = 1;
    SHOW("signal", pthread_cond_signal(&c));
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    printf("waiter's wait: %s\n", en(wr));
    SHOW("destroy", pthread_cond_destroy(&c));
    return 0;
}
