/* RECURSIVE (attribute and PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP): the
 * holder relocks (lock, trylock, timedlock, clocklock each count), as many
 * unlocks free it, one more is EPERM; other threads get EBUSY from trylock
 * and EPERM from unlock while it is held, and may take it once free. */
#include "common.h"
static pthread_mutex_t st = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static void seq(const char *name, pthread_mutex_t *m)
{
    printf("[%s]\n", name);
    SHOW("unlock unlocked", pthread_mutex_unlock(m));
    SHOW("lock", pthread_mutex_lock(m));
    SHOW("lock 2", pthread_mutex_lock(m));
    SHOW("trylock 3", pthread_mutex_trylock(m));
    struct timespec d = deadline(CLOCK_REALTIME, -1000); /* past: a relock never waits */
    SHOW("timedlock 4 (past deadline)", pthread_mutex_timedlock(m, &d));
    d = deadline(CLOCK_MONOTONIC, -1000);
    SHOW("clocklock 5 (past deadline)", pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &d));
    SHOW("trylock by other thread", in_thread(trylock_fn, m));
    SHOW("unlock by other thread", in_thread(unlock_fn, m));
    for (int i = 5; i >= 1; i--) {
        char l[32];
        snprintf(l, sizeof l, "unlock %d", i);
        SHOW(l, pthread_mutex_unlock(m));
        if (i == 2)
            SHOW("trylock by other thread (count 1)", in_thread(trylock_fn, m));
    }
    SHOW("unlock once more", pthread_mutex_unlock(m));
    SHOW("lock by other thread", in_thread(lock_fn, m)); /* the thread ends holding it */
    SHOW("trylock by main", pthread_mutex_trylock(m));
}
int main(void)
{
    pthread_mutex_t m;
    mutex_of(&m, PTHREAD_MUTEX_RECURSIVE);
    seq("attribute", &m);
    seq("static", &st);
    return 0;
}
