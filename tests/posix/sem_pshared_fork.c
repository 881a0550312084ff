/* A process-shared semaphore in shared memory works across fork: the child
 * waits for the parent's posts and answers with its own; values exact. */
#include "common.h"
#include <semaphore.h>
#include <sys/mman.h>
#include <sys/wait.h>
int main(void)
{
    sem_t *s = mmap(NULL, 2 * sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    SHOWE("init ping", sem_init(&s[0], 1, 0));
    SHOWE("init pong", sem_init(&s[1], 1, 0));
    pid_t p = fork();
    if (p == 0) {
        int e = 0;
        for (int i = 0; i < 1000; i++) {
            e |= sem_wait(&s[0]);
            e |= sem_post(&s[1]);
        }
        _exit(e ? 1 : 0);
    }
    int e = 0;
    for (int i = 0; i < 1000; i++) {
        e |= sem_post(&s[0]);
        e |= sem_wait(&s[1]);
    }
    int st, v0 = -1, v1 = -1;
    waitpid(p, &st, 0);
    sem_getvalue(&s[0], &v0);
    sem_getvalue(&s[1], &v1);
    printf("child exit %d, parent errors %d, values %d %d\n", WEXITSTATUS(st), e, v0, v1);
    SHOWE("destroy", sem_destroy(&s[0]));
    return 0;
}
