/*
 * cr_stats.h - the statistics of a concurrency-restricting lock (mcscr,
 * mcscrn, lifocr, loiter) read through ll_lock_stats into one struct, for
 * the tests of that family.  The names are those the family's stats hook
 * fills (src/locks/restricting/cr.h); a counter an algorithm does not keep
 * reads 0.
 */
#ifndef LIBLOCK_TESTS_CR_STATS_H
#define LIBLOCK_TESTS_CR_STATS_H

#include "internal.h"

struct cr_stats {
    uint64_t culls, grafts, reprovisions, remote_culls, home_changes, handoffs, pendings, steals, graces;
    unsigned passive, remote;
    int home;
    double fairness;
    const void *tail;
};

/* 0 with *st filled; EINVAL or ENOTSUP as ll_lock_stats. */
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

#endif
