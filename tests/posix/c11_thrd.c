/* C11 threads with C11 mutexes: thrd_create/join with results, 4 threads x
 * 20000 increments under mtx_plain (and a recursive one taken twice) exact,
 * call_once runs once, thrd_equal/thrd_current, thrd_detach. */
#include "c11_common.h"
static mtx_t m, r;
static long counter, rcounter;
static once_flag once = ONCE_FLAG_INIT;
static int once_runs;
static void init_once(void) { once_runs++; }
static int worker(void *a)
{
    call_once(&once, init_once);
    for (int i = 0; i < 20000; i++) {
        mtx_lock(&m);
        counter++;
        mtx_unlock(&m);
        mtx_lock(&r);
        mtx_lock(&r);
        rcounter++;
        mtx_unlock(&r);
        mtx_unlock(&r);
    }
    return (int)(long)a;
}
static atomic_int detached_ran;
static int detached(void *a)
{
    (void)a;
    atomic_store(&detached_ran, 1);
    return 0;
}
int main(void)
{
    mtx_init(&m, mtx_plain);
    mtx_init(&r, mtx_plain | mtx_recursive);
    thrd_t t[4];
    for (long i = 0; i < 4; i++)
        TSHOW("create", thrd_create(&t[i], worker, (void *)(i + 10)));
    int sum = 0;
    for (int i = 0; i < 4; i++) {
        int res = 0;
        TSHOW("join", thrd_join(t[i], &res));
        sum += res;
    }
    printf("counter %ld, recursive counter %ld, results %d, call_once runs %d\n", counter, rcounter, sum, once_runs);
    printf("thrd_equal(current, current): %d\n", thrd_equal(thrd_current(), thrd_current()) != 0);
    thrd_t d;
    thrd_create(&d, detached, NULL);
    TSHOW("detach", thrd_detach(d));
    wait_for(&detached_ran, 1);
    mtx_destroy(&m);
    mtx_destroy(&r);
    return 0;
}
