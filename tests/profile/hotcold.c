/* Program with locks of known character for tests/profile/test_e2e.py:
 *   hot   initialised by pthread_mutex_init in main (line marked HOT_INIT),
 *         taken by THREADS workers ITERS times each (line HOT_LOCK), with
 *         about a microsecond of work inside;
 *   cold  initialised in main (COLD_INIT), taken 10 times by main (COLD_LOCK);
 *   table a static PTHREAD_MUTEX_INITIALIZER mutex taken 5 times (TABLE_LOCK).
 * Prints the totals and exits with status 3, which `liblock profile` must
 * pass through. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 2
#define ITERS 20000

static pthread_mutex_t hot, cold;
static pthread_mutex_t table = PTHREAD_MUTEX_INITIALIZER;
static volatile unsigned long counter, sink;

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < ITERS; i++) {
        pthread_mutex_lock(&hot); /* HOT_LOCK */
        counter++;
        for (int j = 0; j < 300; j++)
            sink += (unsigned long)j * counter;
        pthread_mutex_unlock(&hot);
    }
    return NULL;
}

int main(void)
{
    pthread_mutex_init(&hot, NULL); /* HOT_INIT */
    pthread_mutex_init(&cold, NULL); /* COLD_INIT */
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, worker, NULL)) {
            perror("pthread_create");
            return 1;
        }
    unsigned long c = 0;
    for (int i = 0; i < 10; i++) {
        pthread_mutex_lock(&cold); /* COLD_LOCK */
        c++;
        pthread_mutex_unlock(&cold);
    }
    for (int i = 0; i < 5; i++) {
        pthread_mutex_lock(&table); /* TABLE_LOCK */
        c++;
        pthread_mutex_unlock(&table);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("counter %lu cold+table %lu\n", counter, c);
    return 3;
}
