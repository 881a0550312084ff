/* A process-shared robust mutex whose owner process exited holding it:
 * EOWNERDEAD in the other process, consistent, then usable. */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>
int main(void)
{
    pthread_mutex_t *m = mmap(NULL, sizeof *m, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    SHOW("init", pthread_mutex_init(m, &a));
    pid_t p = fork();
    if (p == 0) {
        pthread_mutex_lock(m);
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    SHOW("lock after the owner process exited", pthread_mutex_lock(m));
    SHOW("consistent", pthread_mutex_consistent(m));
    SHOW("unlock", pthread_mutex_unlock(m));
    SHOW("lock", pthread_mutex_lock(m));
    SHOW("unlock", pthread_mutex_unlock(m));
    SHOW("destroy", pthread_mutex_destroy(m));
    return 0;
}
