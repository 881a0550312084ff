/* A process-shared condvar with a process-shared mutex in shared memory:
 * a child process waits, the parent signals (and the other way round);
 * both see 0 and the predicate. */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>
struct shm { pthread_mutex_t m; pthread_cond_t c; int stage; };
int main(void)
{
    struct shm *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_mutexattr_t ma;
    pthread_condattr_t ca;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_condattr_init(&ca);
    SHOW("condattr setpshared", pthread_condattr_setpshared(&ca, PTHREAD_PROCESS_SHARED));
    int ps = 0;
    pthread_condattr_getpshared(&ca, &ps);
    printf("getpshared shared: %s\n", ps == PTHREAD_PROCESS_SHARED ? "yes" : "no");
    SHOW("mutex init", pthread_mutex_init(&s->m, &ma));
    SHOW("cond init", pthread_cond_init(&s->c, &ca));
    pid_t p = fork();
    if (p == 0) {
        int e = 0;
        pthread_mutex_lock(&s->m);
        while (s->stage != 1)
            e |= pthread_cond_wait(&s->c, &s->m);
        s->stage = 2;
        e |= pthread_cond_signal(&s->c);
        pthread_mutex_unlock(&s->m);
        _exit(e ? 1 : 0);
    }
    pthread_mutex_lock(&s->m);
    s->stage = 1;
    SHOW("signal", pthread_cond_signal(&s->c));
    int e = 0;
    while (s->stage != 2) {
        struct timespec d = deadline(CLOCK_REALTIME, 50);
        int r = pthread_cond_timedwait(&s->c, &s->m, &d);
        e |= r != 0 && r != ETIMEDOUT;
    }
    pthread_mutex_unlock(&s->m);
    int st;
    waitpid(p, &st, 0);
    printf("child exit %d, parent wait errors %d, stage %d\n", WEXITSTATUS(st), e, s->stage);
    SHOW("cond destroy", pthread_cond_destroy(&s->c));
    return 0;
}
