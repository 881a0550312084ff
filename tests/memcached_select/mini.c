/* A miniature of memcached's locking, for tests/test_memcached_select.sh
 * (the site selection of `liblock bench apps memcached`):
 *  - bucket locks taken through a computed wrapper b_lock(h) (memcached's
 *    item_lock(hv)): the profiler names the lock call inside b_lock as the
 *    call site, which selects every section locked through the wrapper;
 *  - b_trylock (item_trylock): a call site with no section;
 *  - store() reaches per-thread data through another function (memcached's
 *    store_item -> ... -> LOGGER_LOG): the transform does not see it, the
 *    selection leaves it out; delegated, note() would count on the server's
 *    thread, where the key has no value, and the output would change;
 *  - count_set() reads per-thread data itself: the transform refuses it.
 * The output is the same whatever the interleaving. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#define NB 16
#define THREADS 2
#define ITERS 20000

static pthread_mutex_t bucket_locks[NB];
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t other_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t logger_key;
static long table[NB], stats_gets, stats_sets, with_logger, others;
static long logged[THREADS];

void b_lock(unsigned h)
{
    pthread_mutex_lock(&bucket_locks[h % NB]);
}

void b_unlock(unsigned h)
{
    pthread_mutex_unlock(&bucket_locks[h % NB]);
}

void *b_trylock(unsigned h)
{
    pthread_mutex_t *m = &bucket_locks[h % NB];
    return pthread_mutex_trylock(m) == 0 ? m : NULL;
}

static long spin(long v)
{
    for (int i = 0; i < 300; i++)
        v = v * 31 + i;
    return v & 1;
}

static void note(void)
{
    long *l = pthread_getspecific(logger_key);
    if (l)
        (*l)++;
}

long get(unsigned h)
{
    long v;
    b_lock(h);
    v = table[h % NB] + spin(h) * 0;
    b_unlock(h);
    return v;
}

void put(unsigned h, long v)
{
    b_lock(h);
    table[h % NB] += v + spin(v) * 0;
    b_unlock(h);
}

void store(unsigned h, long v)
{
    b_lock(h);
    table[h % NB] += v;
    note();
    b_unlock(h);
}

static void count_get(void)
{
    pthread_mutex_lock(&stats_lock);
    stats_gets++;
    pthread_mutex_unlock(&stats_lock);
}

static void count_set(void)
{
    pthread_mutex_lock(&stats_lock);
    stats_sets++;
    if (pthread_getspecific(logger_key))
        with_logger++;
    pthread_mutex_unlock(&stats_lock);
}

static void other(void)
{
    pthread_mutex_lock(&other_lock);
    others++;
    pthread_mutex_unlock(&other_lock);
}

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    pthread_setspecific(logger_key, &logged[id]);
    for (unsigned i = 0; i < ITERS; i++) {
        unsigned h = i * 7 + (unsigned)id;
        get(h);
        put(h, 1);
        if (i % 10 == 0)
            store(h, 2);
        if (i % 100 == 0) {
            pthread_mutex_t *m = b_trylock(h);
            if (m)
                pthread_mutex_unlock(m);
            other();
        }
        count_get();
        count_set();
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    long sum = 0, notes = 0;
    for (int i = 0; i < NB; i++)
        pthread_mutex_init(&bucket_locks[i], NULL);
    pthread_key_create(&logger_key, NULL);
    for (long i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int i = 0; i < NB; i++)
        sum += table[i];
    for (int i = 0; i < THREADS; i++)
        notes += logged[i];
    printf("table %ld gets %ld sets %ld with-logger %ld notes %ld others %ld\n", sum, stats_gets, stats_sets,
           with_logger, notes, others);
    return 0;
}
