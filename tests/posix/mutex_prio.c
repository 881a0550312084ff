/* PRIO_INHERIT and PRIO_PROTECT mutexes: lock/trylock/unlock, ERRORCHECK
 * relock EDEADLK, trylock by another thread EBUSY, the priority ceiling
 * read and set. */
#include "common.h"
#include <sched.h>
int main(void)
{
    static const int protos[] = {PTHREAD_PRIO_INHERIT, PTHREAD_PRIO_PROTECT};
    for (int i = 0; i < 2; i++) {
        pthread_mutexattr_t a;
        pthread_mutex_t m;
        pthread_mutexattr_init(&a);
        printf("[%s]\n", i ? "PRIO_PROTECT" : "PRIO_INHERIT");
        SHOW("setprotocol", pthread_mutexattr_setprotocol(&a, protos[i]));
        if (i)
            SHOW("attr setprioceiling max", pthread_mutexattr_setprioceiling(&a, sched_get_priority_max(SCHED_FIFO)));
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
        SHOW("init", pthread_mutex_init(&m, &a));
        SHOW("lock", pthread_mutex_lock(&m));
        SHOW("relock", pthread_mutex_lock(&m));
        SHOW("trylock by other thread", in_thread(trylock_fn, &m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("trylock", pthread_mutex_trylock(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        if (i) {
            int c = -1, old = -1;
            SHOW("getprioceiling", pthread_mutex_getprioceiling(&m, &c));
            printf("ceiling: %d\n", c);
            SHOW("setprioceiling min", pthread_mutex_setprioceiling(&m, sched_get_priority_min(SCHED_FIFO), &old));
        }
        SHOW("destroy", pthread_mutex_destroy(&m));
        pthread_mutexattr_destroy(&a);
    }
    return 0;
}
