/* A cancelled waiter does not consume a signal meant for another: two
 * waiters; one is cancelled (and has ended), then one signal must unblock
 * the other.  Also: a cancel request pending when pthread_cond_wait is
 * called acts at once (the wait is a cancellation point). */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER, c2 = PTHREAD_COND_INITIALIZER;
static int flag, waiting, passed;
static void unlock_cleanup(void *a)
{
    (void)a;
    pthread_mutex_unlock(&m);
}
static void *waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    pthread_cleanup_push(unlock_cleanup, NULL);
    waiting++;
    while (!flag)
        pthread_cond_wait(&c, &m);
    flag = 0;
    passed++;
    pthread_cleanup_pop(1);
    return NULL;
}
static atomic_int pend_ready, pend_go;
static void *pending(void *a)
{
    (void)a;
    /* no cancellation point may act on the request before the wait */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    atomic_store(&pend_ready, 1);
    wait_for(&pend_go, 1);
    pthread_mutex_lock(&m);
    pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL); /* not a cancellation point */
    pthread_cleanup_push(unlock_cleanup, NULL);
    pthread_cond_wait(&c2, &m); /* cancel already pending: acts here */
    pthread_cleanup_pop(1);
    return (void *)1;
}
int main(void)
{
    pthread_t a = spawn(waiter, NULL), b;
    for (;;) {
        pthread_mutex_lock(&m);
        int w = waiting;
        pthread_mutex_unlock(&m);
        if (w == 1)
            break;
        ms_sleep(1);
    }
    b = spawn(waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&m);
        int w = waiting;
        pthread_mutex_unlock(&m);
        if (w == 2)
            break;
        ms_sleep(1);
    }
    pthread_t p = spawn(pending, NULL);
    wait_for(&pend_ready, 1);
    void *ra = NULL, *rb = NULL, *rp = NULL;
    SHOW("cancel first waiter", pthread_cancel(a));
    SHOW("cancel before the wait", pthread_cancel(p));
    atomic_store(&pend_go, 1);
    /* one 2 s window for both (see common.h join_within) */
    struct timespec d = deadline(CLOCK_REALTIME, 2000);
    int ja = pthread_timedjoin_np(a, &ra, &d) == 0, jp = pthread_timedjoin_np(p, &rp, &d) == 0;
    if (!ja)
        printf("the cancel did not end the wait\n");
    if (!jp)
        printf("a pending cancel did not act in pthread_cond_wait\n");
    if (!ja || !jp) {
        pthread_mutex_lock(&m);
        flag = !ja;
        pthread_cond_broadcast(&c);
        pthread_cond_broadcast(&c2);
        pthread_mutex_unlock(&m);
        if (!ja)
            pthread_join(a, &ra);
        if (!jp)
            pthread_join(p, &rp);
    }
    printf("first waiter: %s\n", ra == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "returned");
    printf("pending: %s\n", rp == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "returned");
    pthread_mutex_lock(&m);
    flag = 1;
    SHOW("signal", pthread_cond_signal(&c));
    pthread_mutex_unlock(&m);
    if (!join_within(b, 2000, &rb)) {
        printf("the signal did not unblock the second waiter\n");
        pthread_cancel(b);
        pthread_mutex_lock(&m);
        flag = 1;
        pthread_cond_broadcast(&c);
        pthread_mutex_unlock(&m);
        pthread_join(b, &rb);
    }
    printf("second waiter: %s, passed %d\n", rb == PTHREAD_CANCELED ? "PTHREAD_CANCELED" : "returned", passed);
    return 0;
}
