/* C11 condition variables: cnd_signal wakes a waiter, cnd_broadcast all
 * (4 threads), cnd_timedwait gives thrd_timedout (not before its deadline)
 * with the mutex held, signal/broadcast without waiters thrd_success; a
 * bounded buffer of 2000 items with cnd_wait on mtx_plain is exact. */
#include "c11_common.h"
static mtx_t m;
static cnd_t c, notfull, notempty;
static int go, waiting, woken, errors, buf[2], count, head;
static long sum;
static int waiter(void *a)
{
    (void)a;
    mtx_lock(&m);
    waiting++;
    while (!go)
        errors += cnd_wait(&c, &m) != thrd_success;
    woken++;
    mtx_unlock(&m);
    return 0;
}
static int producer(void *a)
{
    (void)a;
    for (int i = 1; i <= 2000; i++) {
        mtx_lock(&m);
        while (count == 2)
            errors += cnd_wait(&notfull, &m) != thrd_success;
        buf[(head + count++) % 2] = i;
        cnd_signal(&notempty);
        mtx_unlock(&m);
    }
    return 0;
}
int main(void)
{
    TSHOW("mtx init", mtx_init(&m, mtx_plain));
    TSHOW("cnd init", cnd_init(&c));
    TSHOW("signal, no waiter", cnd_signal(&c));
    TSHOW("broadcast, no waiter", cnd_broadcast(&c));
    mtx_lock(&m);
    struct timespec d = deadline(CLOCK_REALTIME, 15);
    TSHOW("timedwait +15ms", cnd_timedwait(&c, &m, &d));
    printf("returned before the deadline: %s\n", reached(CLOCK_REALTIME, &d) ? "no" : "yes");
    TSHOW("held after: trylock by other thread", in_thread(mtx_trylock_fn, &m));
    mtx_unlock(&m);
    thrd_t t[4];
    for (int i = 0; i < 4; i++)
        thrd_create(&t[i], waiter, NULL);
    for (;;) {
        mtx_lock(&m);
        if (waiting == 4)
            break;
        mtx_unlock(&m);
        ms_sleep(1);
    }
    go = 1;
    TSHOW("broadcast", cnd_broadcast(&c));
    mtx_unlock(&m);
    for (int i = 0; i < 4; i++)
        thrd_join(t[i], NULL);
    printf("woken %d\n", woken);
    cnd_init(&notfull);
    cnd_init(&notempty);
    thrd_t p;
    thrd_create(&p, producer, NULL);
    for (int i = 1; i <= 2000; i++) {
        mtx_lock(&m);
        while (count == 0)
            errors += cnd_wait(&notempty, &m) != thrd_success;
        sum += buf[head];
        head = (head + 1) % 2;
        count--;
        cnd_signal(&notfull);
        mtx_unlock(&m);
    }
    thrd_join(p, NULL);
    printf("sum %ld, errors %d\n", sum, errors);
    cnd_destroy(&c);
    cnd_destroy(&notfull);
    cnd_destroy(&notempty);
    mtx_destroy(&m);
    return 0;
}
