/*
 * cond_lifo.h - the mostly-LIFO condition variable kind (cond_lifo.c),
 * dispatched to from cond.c, and the two helpers of cond.c it shares.
 */
#ifndef LIBLOCK_COND_LIFO_H
#define LIBLOCK_COND_LIFO_H

#include "internal.h"

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

/* Deadlines: a - b in ns, saturated to +-LL_FAR_NS (about 126 years, so a
 * monotonic deadline "now + LL_FAR_NS" cannot overflow 64 bits): a deadline
 * that far away is never reached, one that far back has passed.  Never
 * wraps, whatever tv_sec holds (LONG_MAX, LONG_MIN). */
#define LL_FAR_NS 4000000000000000000ll
static inline int64_t ll_ts_diff_ns(const struct timespec *a, const struct timespec *b)
{
    long long ds;
    if (__builtin_sub_overflow((long long)a->tv_sec, (long long)b->tv_sec, &ds) || ds > LL_FAR_NS / 1000000000ll ||
        ds < -(LL_FAR_NS / 1000000000ll))
        return a->tv_sec > b->tv_sec ? LL_FAR_NS : -LL_FAR_NS;
    int64_t d = (int64_t)ds * 1000000000ll + ((int64_t)a->tv_nsec - (int64_t)b->tv_nsec);
    return d > LL_FAR_NS ? LL_FAR_NS : d < -LL_FAR_NS ? -LL_FAR_NS : d;
}

/* A cancelled condition wait that has retaken the lock (cond.c,
 * cond_lifo.c) then runs the hook of ll_cond_hook_tls, if set: the
 * interposer's bookkeeping (owner, hold stack) that its own code after the
 * wait would have done (src/shim/cond.c).  The caller sets it around one
 * wait and clears it afterwards. */
struct ll_cond_hook {
    void (*fn)(void *);
    void *arg;
};
extern __thread struct ll_cond_hook *ll_cond_hook_tls __attribute__((tls_model("initial-exec")));
void ll_cond_cancel_finish(void);

/* For tests: threads currently queued (-1 if not a mostly-LIFO object). */
int ll_sem_debug_queued(liblock_sem_t *sem);
int ll_cond_debug_queued(liblock_cond_t *cond);

#endif
