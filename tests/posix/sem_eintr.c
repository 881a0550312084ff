/* A signal handler installed without SA_RESTART interrupts sem_wait and
 * sem_timedwait: -1/EINTR (POSIX: "may fail"; glibc does), and no unit is
 * taken.  If the wait is not interrupted within 2 s, that is reported and
 * a unit posted. */
#include "common.h"
#include <semaphore.h>
static sem_t s;
static atomic_int started, handled;
static int r, e;
static void on_usr1(int sig)
{
    (void)sig;
    atomic_store(&handled, 1);
}
static void *waiter(void *a)
{
    long k = (long)a;
    atomic_store(&started, 1);
    struct timespec d = deadline(CLOCK_REALTIME, 60000);
    errno = 0;
    r = k ? sem_timedwait(&s, &d) : sem_wait(&s);
    e = errno;
    return NULL;
}
int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    for (long k = 0; k < 2; k++) {
        sem_init(&s, 0, 0);
        atomic_store(&started, 0);
        atomic_store(&handled, 0);
        pthread_t t = spawn(waiter, (void *)k);
        wait_for(&started, 1);
        ms_sleep(20);
        pthread_kill(t, SIGUSR1);
        if (!join_within(t, 2000, NULL)) {
            printf("the handler did not interrupt the wait\n");
            sem_post(&s);
            pthread_join(t, NULL);
        }
        int v = -1;
        sem_getvalue(&s, &v);
        printf("%s: %s (handler ran %d), value %d\n", k ? "sem_timedwait" : "sem_wait", r == 0 ? "0" : en(e),
               atomic_load(&handled), v);
        sem_destroy(&s);
    }
    return 0;
}
