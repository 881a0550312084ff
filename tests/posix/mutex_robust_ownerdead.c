/* Robust mutex whose owner thread ended holding it: the next lock returns
 * EOWNERDEAD with the mutex held; pthread_mutex_consistent makes it normal
 * again (0), then unlock/lock work.  NORMAL and ERRORCHECK robust mutexes. */
#include "common.h"
static void *die_holding(void *m)
{
    pthread_mutex_lock(m);
    return NULL;
}
int main(void)
{
    static const int types[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_RECURSIVE};
    for (int i = 0; i < 3; i++) {
        pthread_mutexattr_t a;
        pthread_mutex_t m;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, types[i]);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
        SHOW("init", pthread_mutex_init(&m, &a));
        pthread_join(spawn(die_holding, &m), NULL);
        SHOW("lock after owner died", pthread_mutex_lock(&m));
        SHOW("consistent", pthread_mutex_consistent(&m));
        SHOW("consistent again", pthread_mutex_consistent(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("lock", pthread_mutex_lock(&m));
        SHOW("trylock by other thread", in_thread(trylock_fn, &m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("destroy", pthread_mutex_destroy(&m));
        pthread_mutexattr_destroy(&a);
    }
    return 0;
}
