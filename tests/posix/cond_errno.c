/* The pthread_cond_* calls return their result and leave errno alone
 * (signalled waits, timeouts, EINVAL, signal/broadcast/destroy). */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int flag, waiting;
static void *waiter(void *a)
{
    int *changed = a;
    pthread_mutex_lock(&m);
    waiting = 1;
    while (!flag) {
        errno = 4242;
        pthread_cond_wait(&c, &m);
        *changed += errno != 4242;
    }
    pthread_mutex_unlock(&m);
    return NULL;
}
int main(void)
{
    int changed = 0, wchanged = 0;
#define KEEP(expr)                                \
    do {                                          \
        errno = 4242;                             \
        (void)(expr);                             \
        if (errno != 4242) {                      \
            printf("%s changed errno\n", #expr);  \
            changed++;                            \
        }                                         \
    } while (0)
    pthread_mutex_lock(&m);
    struct timespec d = deadline(CLOCK_REALTIME, 10);
    KEEP(pthread_cond_timedwait(&c, &m, &d));
    d.tv_nsec = -5;
    KEEP(pthread_cond_timedwait(&c, &m, &d));
    d = deadline(CLOCK_MONOTONIC, 10);
    KEEP(pthread_cond_clockwait(&c, &m, CLOCK_MONOTONIC, &d));
    pthread_mutex_unlock(&m);
    pthread_t t = spawn(waiter, &wchanged);
    for (;;) {
        pthread_mutex_lock(&m);
        if (waiting)
            break;
        pthread_mutex_unlock(&m);
        ms_sleep(1);
    }
    ms_sleep(10); /* let the waiter sleep in the kernel */
    flag = 1;
    KEEP(pthread_cond_signal(&c));
    KEEP(pthread_cond_broadcast(&c));
    pthread_mutex_unlock(&m);
    pthread_join(t, NULL);
    KEEP(pthread_cond_destroy(&c));
    printf("calls that changed errno: %d, waits that changed it: %d\n", changed, wchanged);
    return 0;
}
