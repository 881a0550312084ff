/*
 * cr_order.h - what test_malthus and test_mcscrn_numa share about the
 * concurrency-restricting locks (mcscr, mcscrn, lifocr, loiter): their
 * statistics, and a deterministic admission order: the main thread holds
 * the lock while waiters 0..n-1 queue one at a time, each only after the
 * previous one has made itself the queue's tail, then it releases and the
 * order the waiters got the lock in is logged.
 */
#ifndef LIBLOCK_TEST_CR_ORDER_H
#define LIBLOCK_TEST_CR_ORDER_H

#include "harness.h"
#include "internal.h"
#include "locks/restricting/cr.h"

#include <sched.h>

/* The statistics of a concurrency-restricting lock; EINVAL for another. */
static inline int cr_stats_of(const liblock_t *l, struct ll_cr_stats *st)
{
    const char *a = liblock_algorithm(l);
    if (!a)
        return EINVAL;
    if (!strcmp(a, "mcscr"))
        return ll_mcscr_stats(l, st);
    if (!strcmp(a, "mcscrn"))
        return ll_mcscrn_stats(l, st);
    if (!strcmp(a, "lifocr"))
        return ll_lifocr_stats(l, st);
    if (!strcmp(a, "loiter"))
        return ll_loiter_stats(l, st);
    return EINVAL;
}

struct cr_order {
    liblock_t lock;
    int log[64]; /* waiter ids in the order they got the lock */
    int n;
};
struct cr_order_arg {
    struct cr_order *o;
    int id;
};

static inline void *cr_order_thread(void *arg)
{
    struct cr_order_arg *a = arg;
    if (liblock_lock(&a->o->lock) == 0) {
        a->o->log[a->o->n++] = a->id;
        liblock_unlock(&a->o->lock);
    }
    return NULL;
}

/* CPUs the order test spreads its threads over: 2, or 1 on a 1-CPU machine */
static inline int cr_order_cpus(void) { return sysconf(_SC_NPROCESSORS_ONLN) >= 2 ? 2 : 1; }

/* Queues n (<= 64) waiters behind the main thread in a known order,
 * releases, and returns the admission order in o->log, with o->lock (algo
 * under policy) still initialised.  The main thread runs on CPU 0 and
 * waiter i on CPU i % cr_order_cpus(): mcscr's culling looks at the CPUs
 * the waiters arrived on (cr.h, "Culling the second waiter"), so the order
 * is known only with the CPUs fixed.  The main thread's affinity is
 * restored at the end. */
static inline void cr_queue_in_order(struct cr_order *o, const char *algo, int policy, int n)
{
    memset(o, 0, sizeof *o);
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setwait(&attr, policy);
    int e = liblock_init(&o->lock, algo, &attr);
    CHECK(e == 0, "init %s: %s", algo, strerror(e));
    if (e)
        return;
    cpu_set_t saved, one;
    CHECK_EQ(pthread_getaffinity_np(pthread_self(), sizeof saved, &saved), 0);
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    CHECK_EQ(pthread_setaffinity_np(pthread_self(), sizeof one, &one), 0);
    liblock_lock(&o->lock);
    pthread_t th[64];
    struct cr_order_arg args[64];
    for (int i = 0; i < n; i++) {
        struct ll_cr_stats st;
        cr_stats_of(&o->lock, &st);
        const void *before = st.tail;
        args[i].o = o;
        args[i].id = i;
        pthread_attr_t at;
        pthread_attr_init(&at);
        CPU_ZERO(&one);
        CPU_SET(i % cr_order_cpus(), &one);
        pthread_attr_setaffinity_np(&at, sizeof one, &one);
        pthread_create(&th[i], &at, cr_order_thread, &args[i]);
        pthread_attr_destroy(&at);
        /* wait until thread i has made itself the tail (bounded by the watchdog) */
        for (;;) {
            cr_stats_of(&o->lock, &st);
            if (st.tail != before)
                break;
            sched_yield();
        }
    }
    liblock_unlock(&o->lock);
    uint64_t deadline = th_now_ns() + 20000000000ull;
    for (int i = 0; i < n; i++)
        CHECK(th_join_by(th[i], deadline) == 0, "%s: waiter %d stranded", algo, i);
    CHECK_EQ(o->n, n);
    pthread_setaffinity_np(pthread_self(), sizeof saved, &saved);
}

/* The admission order as "0 1 2 ...". */
static inline void cr_order_str(const struct cr_order *o, char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < o->n; i++)
        snprintf(buf + strlen(buf), n - strlen(buf), "%d ", o->log[i]);
}

#endif
