/* expect: transformed=2 refused=0 -- a condition wait inside (a bounded buffer) */
#include "common.h"
#define CAP 3
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t notfull = PTHREAD_COND_INITIALIZER, notempty = PTHREAD_COND_INITIALIZER;
static long buf[CAP], sum;
static int count, head;
static void work(int id)
{
    for (int i = 0; i < ITERS; i++) {
        if (id % 2 == 0) { /* producer */
            long v = i + 1;
            pthread_mutex_lock(&m);
            while (count == CAP)
                pthread_cond_wait(&notfull, &m);
            buf[(head + count) % CAP] = v;
            count++;
            pthread_cond_signal(&notempty);
            pthread_mutex_unlock(&m);
        } else {
            long v;
            pthread_mutex_lock(&m);
            while (count == 0)
                pthread_cond_wait(&notempty, &m);
            v = buf[head];
            head = (head + 1) % CAP;
            count--;
            pthread_cond_signal(&notfull);
            pthread_mutex_unlock(&m);
            __atomic_fetch_add(&sum, v, __ATOMIC_RELAXED);
        }
    }
}
static void report(void) { printf("sum %ld count %d\n", sum, count); }
