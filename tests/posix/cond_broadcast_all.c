/* One broadcast unblocks every waiter (8 threads), each returning 0 with
 * the mutex held (they run one at a time: an exact count). */
#include "common.h"
#define T 8
static pthread_mutex_t m;
static pthread_cond_t c;
static int go, waiting, woken, errors, inside;
static void *waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    waiting++;
    while (!go)
        errors += pthread_cond_wait(&c, &m) != 0;
    errors += inside++ != 0;
    ms_sleep(1);
    inside--;
    woken++;
    pthread_mutex_unlock(&m);
    return NULL;
}
int main(void)
{
    mutex_of(&m, PTHREAD_MUTEX_ERRORCHECK);
    SHOW("cond init", pthread_cond_init(&c, NULL));
    pthread_t t[T];
    for (int i = 0; i < T; i++)
        t[i] = spawn(waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&m);
        int w = waiting;
        pthread_mutex_unlock(&m);
        if (w == T)
            break;
        ms_sleep(1);
    }
    pthread_mutex_lock(&m);
    go = 1;
    SHOW("broadcast", pthread_cond_broadcast(&c));
    pthread_mutex_unlock(&m);
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    printf("woken: %d, errors: %d\n", woken, errors);
    SHOW("destroy", pthread_cond_destroy(&c));
    return 0;
}
