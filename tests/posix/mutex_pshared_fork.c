/* A process-shared mutex in shared memory excludes across fork: the child
 * sees it held by the parent (trylock EBUSY), and two processes of two
 * threads each add 4 x 20000 to a shared counter exactly; also an
 * errorcheck one (unlock by the other process: EPERM). */
#include "common.h"
#include <sys/mman.h>
#include <sys/wait.h>
struct shm { pthread_mutex_t m, e; long counter; };
static struct shm *s;
static void *adder(void *a)
{
    (void)a;
    for (int i = 0; i < 20000; i++) {
        pthread_mutex_lock(&s->m);
        s->counter++;
        pthread_mutex_unlock(&s->m);
    }
    return NULL;
}
static void add2(void)
{
    pthread_t t = spawn(adder, NULL);
    adder(NULL);
    pthread_join(t, NULL);
}
int main(void)
{
    s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    SHOW("setpshared", pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED));
    SHOW("init", pthread_mutex_init(&s->m, &a));
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    SHOW("init errorcheck", pthread_mutex_init(&s->e, &a));
    SHOW("lock", pthread_mutex_lock(&s->m));
    SHOW("lock errorcheck", pthread_mutex_lock(&s->e));
    pid_t p = fork();
    if (p == 0) {
        printf("child: trylock held by parent: %s\n", en(pthread_mutex_trylock(&s->m)));
        printf("child: unlock errorcheck held by parent: %s\n", en(pthread_mutex_unlock(&s->e)));
        _exit(0);
    }
    int st;
    waitpid(p, &st, 0);
    SHOW("unlock", pthread_mutex_unlock(&s->m));
    SHOW("unlock errorcheck", pthread_mutex_unlock(&s->e));
    p = fork();
    if (p == 0) {
        add2();
        _exit(0);
    }
    add2();
    waitpid(p, &st, 0);
    printf("child exit: %d, counter: %ld\n", WEXITSTATUS(st), s->counter);
    SHOW("destroy", pthread_mutex_destroy(&s->m));
    return 0;
}
