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

struct cr_stats {
    uint64_t culls, grafts, reprovisions, remote_culls, home_changes, handoffs, pendings, steals, graces;
    unsigned passive, remote;
    int home;
    double fairness;
    const void *tail;
};

/* The statistics of a concurrency-restricting lock, read through
 * ll_lock_stats (the names its stats hook fills, src/locks/restricting/cr.h;
 * a counter the algorithm does not keep reads 0): 0 with *st filled;
 * EINVAL, or ENOTSUP for an algorithm that keeps none. */
static inline int cr_stats_of(const liblock_t *l, struct cr_stats *st)
{
    struct ll_stats s;
    int r = ll_lock_stats(l, &s);
    if (r)
        return r;
    st->culls = (uint64_t)ll_stat(&s, "culls", 0);
    st->grafts = (uint64_t)ll_stat(&s, "grafts", 0);
    st->reprovisions = (uint64_t)ll_stat(&s, "reprovisions", 0);
    st->remote_culls = (uint64_t)ll_stat(&s, "remote_culls", 0);
    st->home_changes = (uint64_t)ll_stat(&s, "home_changes", 0);
    st->handoffs = (uint64_t)ll_stat(&s, "handoffs", 0);
    st->pendings = (uint64_t)ll_stat(&s, "pendings", 0);
    st->steals = (uint64_t)ll_stat(&s, "steals", 0);
    st->graces = (uint64_t)ll_stat(&s, "graces", 0);
    st->passive = (unsigned)ll_stat(&s, "passive", 0);
    st->remote = (unsigned)ll_stat(&s, "remote", 0);
    st->home = (int)ll_stat(&s, "home", 0);
    st->fairness = (double)ll_stat(&s, "fairness_ppb", 0) / 1e9;
    st->tail = (const void *)(intptr_t)ll_stat(&s, "tail", 0);
    return 0;
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
        struct cr_stats st;
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
