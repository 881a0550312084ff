/* expect: transformed=3 refused=1 -- computed wrappers (--wrapper b_lock:b_unlock --wrapper g_lock:g_unlock):
 * functions that compute the mutex from their arguments, like memcached's
 * item_lock(hv) and STATS_LOCK(); used before and after their definition;
 * an early exit; one section unlocked with another argument (refused) */
#include "common.h"
#define NB 8
static pthread_mutex_t bucket_locks[NB];
static long buckets[NB], missed[NB];
struct req { unsigned h; long seen; };
static pthread_mutex_t glock = PTHREAD_MUTEX_INITIALIZER;
static long total;
static void g_lock(void);
static void g_unlock(void);
static void count(long v)
{
    g_lock();
    total += v;
    g_unlock();
}
static void g_lock(void) { pthread_mutex_lock(&glock); }
static void g_unlock(void) { pthread_mutex_unlock(&glock); }
static void b_lock(unsigned h) { pthread_mutex_lock(&bucket_locks[h % NB]); }
static void b_unlock(unsigned h) { pthread_mutex_unlock(&bucket_locks[h % NB]); }
static long bump(unsigned h, long limit)
{
    long v;
    b_lock(h);
    if (buckets[h % NB] >= limit) {
        missed[h % NB]++;
        b_unlock(h);
        return -1;
    }
    v = ++buckets[h % NB];
    b_unlock(h);
    return v;
}
static void peek(struct req *r)
{
    b_lock(r->h);
    r->seen = buckets[r->h % NB];
    b_unlock(r->h);
}
static void odd(unsigned h)
{
    b_lock(h);
    buckets[h % NB] += 0;
    b_unlock(h + NB); /* the same mutex, another argument: not proved */
}
static void work(int id)
{
    long mine = 0;
    for (unsigned i = 0; i < ITERS; i++) {
        unsigned h = i * 7 + (unsigned)id;
        if (bump(h, ITERS / 4) > 0)
            mine++;
        if (i % 100 == 0) {
            struct req r = {h, -1};
            odd(h);
            peek(&r);
            if (r.seen < 0 || r.seen > ITERS / 4)
                abort();
        }
    }
    count(mine);
}
static void report(void)
{
    long s = 0, m = 0;
    for (int i = 0; i < NB; i++)
        s += buckets[i], m += missed[i];
    printf("sum %ld missed %ld total %ld\n", s, m, total);
}
