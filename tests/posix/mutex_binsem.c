/* Two default mutexes used as binary semaphores between a producer and a
 * consumer (each unlocks a mutex the other thread locked): 2000 items pass
 * in order.  A failing unlock is reported at once instead of hanging. */
#include "common.h"
#define N 2000
static pthread_mutex_t empty = PTHREAD_MUTEX_INITIALIZER, full = PTHREAD_MUTEX_INITIALIZER;
static int item;
static void check(const char *what, int r)
{
    if (r) {
        printf("%s: %s\n", what, en(r));
        finish(0);
    }
}
static void *producer(void *a)
{
    (void)a;
    for (int i = 1; i <= N; i++) {
        check("producer lock(empty)", pthread_mutex_lock(&empty));
        item = i;
        check("producer unlock(full)", pthread_mutex_unlock(&full));
    }
    return NULL;
}
int main(void)
{
    long sum = 0, bad = 0;
    check("lock(full)", pthread_mutex_lock(&full)); /* full starts at 0 */
    pthread_t t = spawn(producer, NULL);
    for (int i = 1; i <= N; i++) {
        check("consumer lock(full)", pthread_mutex_lock(&full));
        sum += item;
        bad += item != i;
        check("consumer unlock(empty)", pthread_mutex_unlock(&empty));
    }
    pthread_join(t, NULL);
    printf("sum: %ld out-of-order: %ld\n", sum, bad);
    return 0;
}
