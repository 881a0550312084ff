/* expect: transformed=1 refused=0 -- continue and break out of a loop from inside */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long total, skipped, stopped;
#define LIMIT (THREADS * ITERS / 3)
static void work(int id)
{
    int i;
    for (i = 0; i < ITERS; i++) {
        pthread_mutex_lock(&m);
        if (i % 5 == 0) {
            skipped++;
            pthread_mutex_unlock(&m);
            continue;
        }
        if (total >= LIMIT) {
            stopped++;
            pthread_mutex_unlock(&m);
            break;
        }
        total++;
        pthread_mutex_unlock(&m);
    }
    if (i == ITERS)
        printf("thread finished its loop\n");
}
static void report(void) { printf("total %ld stopped %ld\n", total, stopped); }
