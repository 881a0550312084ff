/* Named semaphores (sem_open/sem_close/sem_unlink): O_CREAT|O_EXCL on an
 * existing name EEXIST, values, trywait EAGAIN, shared with a child
 * process, sem_open of an unlinked name without O_CREAT ENOENT. */
#include "common.h"
#include <fcntl.h>
#include <semaphore.h>
#include <sys/wait.h>
int main(void)
{
    char name[64];
    snprintf(name, sizeof name, "/liblock-posix-%d", (int)getpid());
    sem_t *s = sem_open(name, O_CREAT | O_EXCL, 0600, 1);
    printf("sem_open create: %s\n", s == SEM_FAILED ? en(errno) : "ok");
    errno = 0;
    sem_t *s2 = sem_open(name, O_CREAT | O_EXCL, 0600, 1);
    printf("sem_open O_EXCL again: %s\n", s2 == SEM_FAILED ? (errno == EEXIST ? "EEXIST" : en(errno)) : "ok");
    SHOWE("trywait", sem_trywait(s));
    SHOWE("trywait", sem_trywait(s));
    pid_t p = fork();
    if (p == 0) {
        sem_t *c = sem_open(name, 0);
        int r = c == SEM_FAILED ? 1 : sem_post(c) | sem_post(c);
        _exit(r ? 1 : 0);
    }
    int st, v = -1;
    waitpid(p, &st, 0);
    sem_getvalue(s, &v);
    printf("child exit %d, value %d\n", WEXITSTATUS(st), v);
    SHOWE("wait", sem_wait(s));
    SHOWE("unlink", sem_unlink(name));
    SHOWE("close", sem_close(s));
    errno = 0;
    s = sem_open(name, 0);
    printf("sem_open after unlink: %s\n", s == SEM_FAILED ? (errno == ENOENT ? "ENOENT" : en(errno)) : "ok");
    return 0;
}
