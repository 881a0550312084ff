/* expect: transformed=2 refused=0 nested=1 -- nested sections on two locks */
#include "common.h"
static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER, b = PTHREAD_MUTEX_INITIALIZER;
static long x, y, z;
static void work(int id)
{
    for (int i = 0; i < ITERS; i++) {
        pthread_mutex_lock(&a);
        x++;
        pthread_mutex_lock(&b);
        y += x & 1;
        pthread_mutex_unlock(&b);
        pthread_mutex_unlock(&a);
        pthread_mutex_lock(&b);
        z++;
        pthread_mutex_unlock(&b);
    }
}
static void report(void) { printf("x %ld y %ld z %ld\n", x, y + 0 * y, z); }
