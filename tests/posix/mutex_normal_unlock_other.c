/* A NORMAL or default mutex locked by one thread may be unlocked by another
 * (glibc allows it; programs use such a mutex as a binary semaphore): the
 * unlock returns 0 and frees the mutex for everyone. */
#include "common.h"
static void one(const char *name, pthread_mutex_t *m)
{
    printf("[%s]\n", name);
    SHOW("lock by main", pthread_mutex_lock(m));
    SHOW("unlock by other thread", in_thread(unlock_fn, m));
    SHOW("trylock by other thread", in_thread(trylock_fn, m)); /* and left locked by it */
    SHOW("trylock by main", pthread_mutex_trylock(m));
    SHOW("unlock by main", pthread_mutex_unlock(m));
    SHOW("lock by main", pthread_mutex_lock(m));
    SHOW("unlock by main", pthread_mutex_unlock(m));
}
int main(void)
{
    pthread_mutex_t a, b, c = PTHREAD_MUTEX_INITIALIZER;
    mutex_of(&a, PTHREAD_MUTEX_NORMAL);
    mutex_of(&b, -1);
    one("normal", &a);
    one("attr-null", &b);
    one("PTHREAD_MUTEX_INITIALIZER", &c);
    return 0;
}
