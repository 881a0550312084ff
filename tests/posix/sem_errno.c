/* The sem_* calls leave errno alone when they succeed (POSIX sets it only
 * on failure), also after a wait that slept. */
#include "common.h"
#include <semaphore.h>
static sem_t s;
static void *poster(void *a)
{
    (void)a;
    ms_sleep(20);
    sem_post(&s);
    return NULL;
}
int main(void)
{
    int changed = 0;
#define KEEP(expr)                               \
    do {                                         \
        errno = 4242;                            \
        int r_ = (expr);                         \
        if (r_ == 0 && errno != 4242) {          \
            printf("%s changed errno\n", #expr); \
            changed++;                           \
        }                                        \
    } while (0)
    KEEP(sem_init(&s, 0, 1));
    KEEP(sem_wait(&s));
    KEEP(sem_post(&s));
    KEEP(sem_trywait(&s));
    int v;
    KEEP(sem_getvalue(&s, &v));
    pthread_t t = spawn(poster, NULL);
    KEEP(sem_wait(&s));
    pthread_join(t, NULL);
    t = spawn(poster, NULL);
    struct timespec d = deadline(CLOCK_REALTIME, 60000);
    KEEP(sem_timedwait(&s, &d));
    pthread_join(t, NULL);
    KEEP(sem_destroy(&s));
    printf("successful calls that changed errno: %d\n", changed);
    return 0;
}
