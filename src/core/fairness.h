/*
 * fairness.h - admission-history instrumentation (src/core/fairness.c),
 * shared by the API layer and by tests/benchmarks that link the static
 * library.  Public side: liblock_fairness*() in include/liblock.h; formulas
 * in docs/fairness.md.
 */
#ifndef LIBLOCK_FAIRNESS_H
#define LIBLOCK_FAIRNESS_H

#include "internal.h"

struct ll_fairness;

/* 1 when LIBLOCK_FAIRNESS asks for instrumentation on every lock. */
int ll_fairness_env(void);
/* A fresh, empty history (window from LIBLOCK_FAIRNESS_WINDOW, default
 * 1000); NULL on ENOMEM. */
struct ll_fairness *ll_fairness_create(void);
void ll_fairness_free(struct ll_fairness *f);

/* Identity of the calling thread for the history: a 64-bit serial that is
 * never reused (unlike ll_thread_t.id, which is the index). */
uint64_t ll_fairness_serial(void);

/* Record one admission by thread (id, serial).  Must be called by the
 * thread that holds the lock (or, for delegated critical sections, from
 * inside the critical section), so that calls are serialised by the lock
 * itself. */
void ll_fairness_record(struct ll_fairness *f, unsigned id, uint64_t serial);

/* The API hook: admission of the calling thread. */
static inline void ll_fairness_note(liblock_t *l, ll_thread_t *self)
{
    ll_fairness_record((struct ll_fairness *)l->_stats, self->id, ll_fairness_serial());
}

/* liblock_execute with instrumentation, for algorithms with ops->execute:
 * records the caller's admission from inside the critical section. */
void *ll_fairness_execute(liblock_t *l, void *(*cs)(void *), void *arg);

/* Pure metrics over an array of per-thread counts (also used by the tests
 * and the benchmarks).  n may be 0 (both return 0). */
double ll_fairness_gini(const uint64_t *counts, size_t n);
double ll_fairness_rstddev(const uint64_t *counts, size_t n);

#endif
