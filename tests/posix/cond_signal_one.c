/* pthread_cond_signal unblocks at least one waiter, broadcast all: three
 * waiters each consume one token; one signal with one token lets exactly
 * one through (the others, woken or not, wait again), a second signal a
 * second, a broadcast with one token the third; all return 0. */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int tokens, waiting, through, errors;
static void *waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    waiting++;
    while (tokens == 0)
        errors += pthread_cond_wait(&c, &m) != 0;
    tokens--;
    waiting--;
    through++;
    pthread_mutex_unlock(&m);
    return NULL;
}
static int get(int *v)
{
    pthread_mutex_lock(&m);
    int x = *v;
    pthread_mutex_unlock(&m);
    return x;
}
static void until(int *v, int want)
{
    while (get(v) != want)
        ms_sleep(1);
}
int main(void)
{
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        t[i] = spawn(waiter, NULL);
    until(&waiting, 3); /* all three inside pthread_cond_wait (they hold m until then) */
    pthread_mutex_lock(&m);
    tokens = 1;
    SHOW("signal", pthread_cond_signal(&c));
    pthread_mutex_unlock(&m);
    until(&through, 1);
    ms_sleep(10);
    printf("through after one signal: %d\n", get(&through));
    pthread_mutex_lock(&m);
    tokens = 1;
    SHOW("signal", pthread_cond_signal(&c));
    pthread_mutex_unlock(&m);
    until(&through, 2);
    ms_sleep(10);
    printf("through after two signals: %d\n", get(&through));
    pthread_mutex_lock(&m);
    tokens = 1;
    SHOW("broadcast", pthread_cond_broadcast(&c));
    pthread_mutex_unlock(&m);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    printf("through: %d, errors: %d\n", through, errors);
    return 0;
}
