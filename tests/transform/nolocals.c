/* expect: transformed=1 refused=0 -- no locals: a global counter */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static void work(int id)
{
    for (int i = 0; i < ITERS; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
}
static void report(void) { printf("counter %ld\n", counter); }
