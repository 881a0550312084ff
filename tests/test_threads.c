/*
 * test_threads - per-thread state without registration is released when
 * threads exit: 10,000 short-lived threads (in waves of 32) each take a lock
 * once (lock/unlock and execute alternately), for every algorithm.  Afterwards
 * the number of live per-thread records is back where it was, the thread-id
 * space did not grow past the widest wave (ids are reused), and the count of
 * critical sections is exact.
 */
#include "harness.h"

long liblock_debug_live_threads(void);
unsigned ll_thread_max_id(void);

#define WAVE 32

static liblock_t lock;
static long counter;

static void *cs(void *a)
{
    counter++;
    return a;
}

static unsigned max_seen_id; /* highest id bound observed while threads ran */

static void *once(void *p)
{
    long i = (long)p;
    unsigned m = ll_thread_max_id(), cur = __atomic_load_n(&max_seen_id, __ATOMIC_RELAXED);
    while (m > cur && !__atomic_compare_exchange_n(&max_seen_id, &cur, m, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
    if (i % 2) {
        if (liblock_execute(&lock, cs, p) != p)
            return (void *)1;
        m = ll_thread_max_id();
        cur = __atomic_load_n(&max_seen_id, __ATOMIC_RELAXED);
        while (m > cur && !__atomic_compare_exchange_n(&max_seen_id, &cur, m, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    } else {
        if (liblock_lock(&lock))
            return (void *)1;
        cs(p);
        if (liblock_unlock(&lock))
            return (void *)1;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    th_watchdog(400);
    int nthreads = th_scale_small() ? 1000 : 10000;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        th_context = *a;
        CHECK_EQ(liblock_init(&lock, *a, NULL), 0);
        liblock_lock(&lock); /* make sure main's own record exists before the baseline */
        liblock_unlock(&lock);
        /* and the algorithm's own threads: mp-server (direct mode) starts
         * its server at the first execute, not at lock() */
        liblock_execute(&lock, cs, NULL);
        long base = liblock_debug_live_threads();
        counter = 0;
        max_seen_id = 0;
        int errors = 0;
        for (int done = 0; done < nthreads; done += WAVE) {
            pthread_t th[WAVE];
            for (int i = 0; i < WAVE; i++)
                if (pthread_create(&th[i], NULL, once, (void *)(long)(done + i))) {
                    CHECK(0, "pthread_create failed");
                    return th_report("test_threads");
                }
            for (int i = 0; i < WAVE; i++) {
                void *r;
                pthread_join(th[i], &r);
                errors += r != NULL;
            }
        }
        long live = liblock_debug_live_threads();
        unsigned maxid = max_seen_id;
        CHECK(errors == 0, "%d threads failed to take the lock", errors);
        CHECK(counter == (nthreads + WAVE - 1) / WAVE * WAVE, "counter %ld", counter);
        CHECK(live == base, "live per-thread records: %ld before, %ld after %d threads", base, live, nthreads);
        /* main + at most one wave (+ algorithm-internal threads such as
         * servers or helpers, which are few and long-lived) */
        CHECK(maxid <= 4 * WAVE, "thread ids grew to %u", maxid);
        CHECK_EQ(liblock_destroy(&lock), 0);
        printf("  %-16s %d threads, live records %ld -> %ld, max id %u\n", *a, nthreads, base, live, maxid);
        fflush(stdout);
    }
    return th_report("test_threads");
}
