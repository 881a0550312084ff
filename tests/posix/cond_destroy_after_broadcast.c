/* Destroying a condvar right after a broadcast that unblocked all its
 * waiters is allowed (POSIX: "safe to destroy ... upon which no threads are
 * currently blocked"; its example destroys right after broadcast): destroy
 * returns 0 whether the broadcaster still holds the mutex or has released
 * it, the waiters all return 0, and the memory can be initialised again. */
#include "common.h"
#define T 4
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c;
static int go, waiting, errors, done;
static void *waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    waiting++;
    while (!go)
        errors += pthread_cond_wait(&c, &m) != 0;
    done++;
    pthread_mutex_unlock(&m);
    return NULL;
}
static void round_(int hold)
{
    pthread_cond_init(&c, NULL);
    go = waiting = done = errors = 0;
    pthread_t t[T];
    for (int i = 0; i < T; i++)
        t[i] = spawn(waiter, NULL);
    for (;;) {
        pthread_mutex_lock(&m);
        if (waiting == T)
            break;
        pthread_mutex_unlock(&m);
        ms_sleep(1);
    }
    go = 1;
    int b = pthread_cond_broadcast(&c), d;
    if (hold) {
        d = pthread_cond_destroy(&c);
        pthread_mutex_unlock(&m);
    } else {
        pthread_mutex_unlock(&m);
        d = pthread_cond_destroy(&c);
    }
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    printf("%s: broadcast %s, destroy %s, waiters done %d, errors %d\n",
           hold ? "destroy holding the mutex" : "destroy after unlocking", en(b), en(d), done, errors);
}
int main(void)
{
    round_(0);
    round_(1);
    round_(0);
    pthread_cond_init(&c, NULL);
    pthread_mutex_lock(&m);
    struct timespec d = deadline(CLOCK_REALTIME, 5);
    SHOW("reinitialised: timedwait", pthread_cond_timedwait(&c, &m, &d));
    pthread_mutex_unlock(&m);
    SHOW("destroy", pthread_cond_destroy(&c));
    return 0;
}
