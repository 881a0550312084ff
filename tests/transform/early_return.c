/* expect: transformed=2 refused=0 -- early returns (with and without a value) after an unlock */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long stock = THREADS * ITERS / 2, taken, empty, logged;
static int take(int id)
{
    int got;
    pthread_mutex_lock(&m);
    if (stock == 0) {
        empty++;
        pthread_mutex_unlock(&m);
        return -1;
    }
    stock--;
    got = 1;
    taken++;
    pthread_mutex_unlock(&m);
    return got ? id : -2;
}
static void note(long v)
{
    pthread_mutex_lock(&m);
    if (v < 0) {
        pthread_mutex_unlock(&m);
        return;
    }
    logged++;
    pthread_mutex_unlock(&m);
}
static void work(int id)
{
    for (int i = 0; i < ITERS; i++)
        note(take(id));
}
static void report(void) { printf("taken %ld empty %ld stock %ld logged %ld\n", taken, empty, stock, logged); }
