/* Waiting with mutexes of every kind - each type, robust, priority
 * inheritance, process-shared - on one condvar in turn: signalled waits
 * return 0 with the mutex held. */
#include "common.h"
static pthread_mutex_t *mp;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static int flag, waiting, wr = -1;
static void *waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(mp);
    waiting = 1;
    wr = 0;
    while (!flag && wr == 0)
        wr = pthread_cond_wait(&c, mp);
    flag = 0;
    pthread_mutex_unlock(mp);
    return NULL;
}
static void one(const char *name, pthread_mutex_t *m)
{
    mp = m;
    waiting = 0;
    pthread_t t = spawn(waiter, NULL);
    for (;;) {
        pthread_mutex_lock(m);
        if (waiting)
            break;
        pthread_mutex_unlock(m);
        ms_sleep(1);
    }
    flag = 1;
    pthread_cond_signal(&c);
    pthread_mutex_unlock(m);
    pthread_join(t, NULL);
    pthread_mutex_lock(m);
    struct timespec d = deadline(CLOCK_REALTIME, 5);
    int tw = pthread_cond_timedwait(&c, m, &d);
    int tr = in_thread(trylock_fn, m);
    pthread_mutex_unlock(m);
    printf("[%s] signalled wait: %s, timedwait: %s, held after it: %s\n", name, en(wr), en(tw),
           tr == EBUSY ? "yes" : en(tr));
}
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        mutex_of(&m, mutex_types[i].type);
        one(mutex_types[i].name, &m);
        pthread_mutex_destroy(&m);
    }
    static const char *names[] = {"robust", "prio-inherit", "pshared"};
    for (int k = 0; k < 3; k++) {
        pthread_mutexattr_t a;
        pthread_mutex_t m;
        pthread_mutexattr_init(&a);
        if (k == 0)
            pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        else if (k == 1)
            pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
        else
            pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
        pthread_mutex_init(&m, &a);
        one(names[k], &m);
        pthread_mutex_destroy(&m);
    }
    return 0;
}
