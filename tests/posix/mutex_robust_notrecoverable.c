/* Robust mutex left inconsistent (EOWNERDEAD, unlocked without
 * pthread_mutex_consistent): every later lock and trylock returns
 * ENOTRECOVERABLE; destroy succeeds. */
#include "common.h"
static void *die_holding(void *m)
{
    pthread_mutex_lock(m);
    return NULL;
}
int main(void)
{
    pthread_mutexattr_t a;
    pthread_mutex_t m;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&m, &a);
    pthread_join(spawn(die_holding, &m), NULL);
    SHOW("lock after owner died", pthread_mutex_lock(&m));
    SHOW("unlock without consistent", pthread_mutex_unlock(&m));
    SHOW("lock", pthread_mutex_lock(&m));
    SHOW("trylock", pthread_mutex_trylock(&m));
    SHOW("trylock by other thread", in_thread(trylock_fn, &m));
    SHOW("consistent", pthread_mutex_consistent(&m));
    SHOW("destroy", pthread_mutex_destroy(&m));
    return 0;
}
