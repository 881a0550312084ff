/* A bounded buffer (4 slots) with two condvars, 3 producers and 3
 * consumers, 3 x 2000 items: every item is consumed exactly once. */
#include "common.h"
#define P 3
#define N 2000
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t notfull = PTHREAD_COND_INITIALIZER, notempty = PTHREAD_COND_INITIALIZER;
static int buf[4], head, count, errors;
static long sum;
static int seen[P * N];
static void *producer(void *a)
{
    long b = (long)a;
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&m);
        while (count == 4)
            errors += pthread_cond_wait(&notfull, &m) != 0;
        buf[(head + count++) % 4] = (int)(b * N + i);
        pthread_cond_signal(&notempty);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}
static void *consumer(void *a)
{
    (void)a;
    for (int i = 0; i < N; i++) {
        pthread_mutex_lock(&m);
        while (count == 0) {
            struct timespec d = deadline(CLOCK_REALTIME, 50);
            int r = pthread_cond_timedwait(&notempty, &m, &d);
            errors += r != 0 && r != ETIMEDOUT;
        }
        int v = buf[head];
        head = (head + 1) % 4;
        count--;
        seen[v]++;
        sum += v;
        pthread_cond_signal(&notfull);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}
int main(void)
{
    pthread_t t[2 * P];
    for (long i = 0; i < P; i++) {
        t[i] = spawn(producer, (void *)i);
        t[P + i] = spawn(consumer, NULL);
    }
    for (int i = 0; i < 2 * P; i++)
        pthread_join(t[i], NULL);
    int bad = 0;
    for (int i = 0; i < P * N; i++)
        bad += seen[i] != 1;
    printf("sum %ld, items not seen exactly once %d, errors %d\n", sum, bad, errors);
    return 0;
}
