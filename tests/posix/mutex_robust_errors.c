/* A robust ERRORCHECK mutex: relock EDEADLK, unlock by a non-owner EPERM;
 * pthread_mutex_consistent on a consistent robust mutex or a non-robust
 * one: EINVAL. */
#include "common.h"
int main(void)
{
    pthread_mutexattr_t a;
    pthread_mutex_t m, plain;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&m, &a);
    SHOW("lock", pthread_mutex_lock(&m));
    SHOW("relock", pthread_mutex_lock(&m));
    SHOW("unlock by other thread", in_thread(unlock_fn, &m));
    SHOW("consistent on a consistent mutex", pthread_mutex_consistent(&m));
    SHOW("unlock", pthread_mutex_unlock(&m));
    SHOW("unlock again", pthread_mutex_unlock(&m));
    SHOW("destroy", pthread_mutex_destroy(&m));
    mutex_of(&plain, PTHREAD_MUTEX_NORMAL);
    pthread_mutex_lock(&plain);
    SHOW("consistent on a non-robust mutex", pthread_mutex_consistent(&plain));
    pthread_mutex_unlock(&plain);
    return 0;
}
