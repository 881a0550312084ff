/* The static initialisers (PTHREAD_MUTEX_INITIALIZER, the _NP recursive,
 * errorcheck and adaptive ones) and zeroed memory give working mutexes of
 * their type without pthread_mutex_init. */
#include "common.h"
static pthread_mutex_t m_def = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t m_rec = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_err = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;
static pthread_mutex_t m_ada = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static void seq(const char *name, pthread_mutex_t *m)
{
    printf("[%s]\n", name);
    SHOW("lock", pthread_mutex_lock(m));
    int r = pthread_mutex_trylock(m);
    printf("trylock by holder: %s\n", en(r));
    if (r == 0)
        SHOW("unlock (recursion)", pthread_mutex_unlock(m));
    SHOW("trylock by other thread", in_thread(trylock_fn, m));
    SHOW("unlock", pthread_mutex_unlock(m));
    SHOW("trylock free", pthread_mutex_trylock(m));
    SHOW("unlock", pthread_mutex_unlock(m));
    SHOW("destroy", pthread_mutex_destroy(m));
}
int main(void)
{
    seq("PTHREAD_MUTEX_INITIALIZER", &m_def);
    seq("PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP", &m_rec);
    seq("PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP", &m_err);
    seq("PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP", &m_ada);
    pthread_mutex_t *z = calloc(1, sizeof *z);
    seq("zeroed memory", z);
    free(z);
    return 0;
}
