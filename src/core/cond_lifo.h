/*
 * cond_lifo.h - the mostly-LIFO condition variable kind (cond_lifo.c),
 * dispatched to from cond.c, and the two helpers of cond.c it shares.
 */
#ifndef LIBLOCK_COND_LIFO_H
#define LIBLOCK_COND_LIFO_H

#include "../internal.h"

#define LL_COND_KIND_POSIX 0u
#define LL_COND_KIND_LIFO 1u /* explicit waiter queue, append with probability P */

/* cond.c: release the outer lock around a wait / take it back (algorithm
 * hooks or the API's unlock/lock), exactly as the POSIX-backed kind does. */
int ll_cond_release_outer(liblock_t *l);
int ll_cond_reacquire_outer(liblock_t *l);

/* cond_lifo.c; arguments already validated by cond.c. */
int ll_cond_lifo_init(liblock_cond_t *cond, double fifo_probability);
int ll_cond_lifo_wait(liblock_cond_t *cond, liblock_t *l, const struct timespec *abstime);
int ll_cond_lifo_signal(liblock_cond_t *cond);
int ll_cond_lifo_broadcast(liblock_cond_t *cond);
int ll_cond_lifo_destroy(liblock_cond_t *cond);

/* For tests: threads currently queued (-1 if not a mostly-LIFO object). */
int ll_sem_debug_queued(liblock_sem_t *sem);
int ll_cond_debug_queued(liblock_cond_t *cond);

#endif
