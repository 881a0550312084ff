/* tests/profile/test_e2e.py: a program that forks.  The parent locks its
 * mutex 100 times, then forks; the child locks it 7 times.  `liblock
 * profile` reports the parent and, as a forked child, the child (counting
 * from the fork). */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t m;

int main(void)
{
    pthread_mutex_init(&m, NULL);
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        pthread_mutex_unlock(&m);
    }
    pid_t p = fork();
    if (p == 0) {
        for (int i = 0; i < 7; i++) {
            pthread_mutex_lock(&m);
            pthread_mutex_unlock(&m);
        }
        return 0;
    }
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
