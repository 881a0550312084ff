/* ERRORCHECK (attribute and PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP): relock
 * EDEADLK, trylock by the holder EBUSY, timedlock by the holder EDEADLK,
 * unlock by a non-owner EPERM, unlock of an unlocked mutex EPERM. */
#include "common.h"
static pthread_mutex_t st = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static void seq(const char *name, pthread_mutex_t *m)
{
    printf("[%s]\n", name);
    SHOW("unlock unlocked", pthread_mutex_unlock(m));
    SHOW("lock", pthread_mutex_lock(m));
    SHOW("relock", pthread_mutex_lock(m));
    SHOW("trylock by holder", pthread_mutex_trylock(m));
    struct timespec d = deadline(CLOCK_REALTIME, 10);
    SHOW("timedlock by holder", pthread_mutex_timedlock(m, &d));
    d = deadline(CLOCK_MONOTONIC, 10);
    SHOW("clocklock by holder", pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &d));
    SHOW("unlock by other thread", in_thread(unlock_fn, m));
    SHOW("trylock by other thread", in_thread(trylock_fn, m));
    SHOW("unlock", pthread_mutex_unlock(m));
    SHOW("unlock again", pthread_mutex_unlock(m));
    SHOW("destroy", pthread_mutex_destroy(m));
}
int main(void)
{
    pthread_mutex_t m;
    mutex_of(&m, PTHREAD_MUTEX_ERRORCHECK);
    seq("attribute", &m);
    seq("static", &st);
    return 0;
}
