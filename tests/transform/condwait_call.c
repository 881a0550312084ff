/* expect: transformed=1 refused=0 -- the wait is in a function the section calls (memcached's
 * wait_for_thread_registration): the call site must use liblock_execute_mutex_cond */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int registered;
static long rounds;
static void wait_for(int n)
{
    while (registered < n)
        pthread_cond_wait(&cv, &m);
}
static void wait_all(int n) { wait_for(n); }
static void work(int id)
{
    for (int i = 0; i < ITERS / 10; i++) {
        int target = (i + 1) * THREADS;
        pthread_mutex_lock(&m);
        registered++;
        pthread_cond_broadcast(&cv);
        wait_all(target);
        rounds++;
        pthread_mutex_unlock(&m);
    }
}
static void report(void) { printf("registered %d rounds %ld\n", registered, rounds); }
