/*
 * hybcomb.h - statistics of a hybcomb lock (src/locks/hybrid/hybcomb.c), for
 * tests and `liblock bench delegation` (combining rate, CAS per operation).
 * Counters are kept by the thread in the combiner role (no atomics) except
 * the registration counters, which are relaxed atomic increments on the
 * registration path only.  A snapshot taken while the lock is in use may be
 * a few operations out of step.
 */
#ifndef LIBLOCK_HYBCOMB_H
#define LIBLOCK_HYBCOMB_H

#include <stdint.h>
#include "liblock.h"

struct ll_hybcomb_stats {
    unsigned max_ops;      /* MAX_OPS of this lock */
    unsigned cas_tries;    /* failed CASes before the SWAP fallback */
    int drain;             /* pre-close drain on? */
    uint64_t passes;       /* times a thread held the combiner role (execute or lock) */
    uint64_t own;          /* critical sections run by their own thread as combiner */
    uint64_t served;       /* requests of other threads run by a combiner */
    uint64_t cancelled;    /* request slots written as "cancelled" (node reused by another lock) */
    uint64_t cas;          /* registration CASes attempted */
    uint64_t cas_failed;   /* of which failed */
    uint64_t swaps;        /* registrations by the SWAP fallback */
    uint64_t max_pass;     /* most requests served in one pass (own excluded) */
};

/* 0, or EINVAL when l is not an initialised hybcomb lock. */
int ll_hybcomb_stats(const liblock_t *l, struct ll_hybcomb_stats *out);

/* For tests: the n_ops of the last registered combiner's node (requests
 * registered with it so far, failed FAAs beyond MAX_OPS included) if that
 * node is open for requests, else -1. */
int64_t ll_hybcomb_debug_tail_ops(const liblock_t *l);

#endif
