/* expect: transformed=1 refused=0 -- continue and break out of a loop from inside */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long total, skipped, stopped, broke;
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
    if (i < ITERS)
        __atomic_fetch_add(&broke, 1, __ATOMIC_RELAXED);
}
/* which threads reach LIMIT depends on scheduling; these do not */
static void report(void) { printf("total %ld stopped %d broke %d\n", total, stopped > 0, broke == stopped); }
