/*
 * hybcomb_stats.h - the statistics of a hybcomb lock read through
 * ll_lock_stats into one struct (the names its stats hook fills, in
 * src/locks/hybrid/hybcomb.c), for tests.
 */
#ifndef LIBLOCK_TESTS_HYBCOMB_STATS_H
#define LIBLOCK_TESTS_HYBCOMB_STATS_H

#include "internal.h"

struct hc_stats {
    unsigned max_ops, cas_tries;
    int drain;
    uint64_t passes, own, served, cancelled, cas, cas_failed, swaps, max_pass;
};

/* 0 with *o filled; EINVAL or ENOTSUP as ll_lock_stats, EINVAL for a lock
 * of another algorithm that keeps statistics. */
static inline int hc_stats_of(const liblock_t *l, struct hc_stats *o)
{
    struct ll_stats s;
    int r = ll_lock_stats(l, &s);
    if (r)
        return r;
    int64_t v;
    if (ll_stats_get(&s, "max_ops", &v) != 0)
        return EINVAL;
    o->max_ops = (unsigned)v;
    o->cas_tries = (unsigned)ll_stat(&s, "cas_tries", 0);
    o->drain = (int)ll_stat(&s, "drain", 0);
    o->passes = (uint64_t)ll_stat(&s, "passes", 0);
    o->own = (uint64_t)ll_stat(&s, "own", 0);
    o->served = (uint64_t)ll_stat(&s, "served", 0);
    o->cancelled = (uint64_t)ll_stat(&s, "cancelled", 0);
    o->cas = (uint64_t)ll_stat(&s, "cas", 0);
    o->cas_failed = (uint64_t)ll_stat(&s, "cas_failed", 0);
    o->swaps = (uint64_t)ll_stat(&s, "swaps", 0);
    o->max_pass = (uint64_t)ll_stat(&s, "max_pass", 0);
    return 0;
}

/* The n_ops of the last registered combiner's node if it is open for
 * requests, else -1. */
static inline int64_t hc_tail_ops(const liblock_t *l)
{
    struct ll_stats s;
    return ll_lock_stats(l, &s) == 0 ? ll_stat(&s, "tail_ops", -1) : -1;
}

#endif
