/* fork while the forking thread holds private mutexes: in the child the
 * mutexes are still locked (trylock EBUSY, also from another thread) and
 * the child's thread can unlock a NORMAL one (the pthread_atfork pattern);
 * ERRORCHECK and RECURSIVE ones answer as glibc's (whose owner is the
 * parent thread's id, so the child's trylock is EBUSY and unlock EPERM). */
#include "common.h"
#include <sys/wait.h>
int main(void)
{
    pthread_mutex_t n, r, e, free_m;
    mutex_of(&n, PTHREAD_MUTEX_NORMAL);
    mutex_of(&r, PTHREAD_MUTEX_RECURSIVE);
    mutex_of(&e, PTHREAD_MUTEX_ERRORCHECK);
    mutex_of(&free_m, PTHREAD_MUTEX_NORMAL);
    pthread_mutex_lock(&e);
    pthread_mutex_lock(&n);
    pthread_mutex_lock(&r);
    pthread_mutex_lock(&r);
    pid_t p = fork();
    if (p == 0) {
        printf("child: trylock normal: %s\n", en(pthread_mutex_trylock(&n)));
        printf("child: unlock normal: %s\n", en(pthread_mutex_unlock(&n)));
        printf("child: trylock normal: %s\n", en(pthread_mutex_trylock(&n)));
        printf("child: trylock free: %s\n", en(pthread_mutex_trylock(&free_m)));
        printf("child: trylock by other thread of recursive: %s\n", en(in_thread(trylock_fn, &r)));
        printf("child: trylock by other thread of errorcheck: %s\n", en(in_thread(trylock_fn, &e)));
        printf("child: trylock recursive: %s\n", en(pthread_mutex_trylock(&r)));
        printf("child: trylock errorcheck: %s\n", en(pthread_mutex_trylock(&e)));
        printf("child: unlock errorcheck: %s\n", en(pthread_mutex_unlock(&e)));
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    printf("child exit: %d\n", WEXITSTATUS(st));
    SHOW("parent unlock normal", pthread_mutex_unlock(&n));
    SHOW("parent unlock recursive", pthread_mutex_unlock(&r));
    SHOW("parent unlock recursive", pthread_mutex_unlock(&r));
    SHOW("parent unlock errorcheck", pthread_mutex_unlock(&e));
    return 0;
}
