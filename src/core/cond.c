/*
 * cond.c - condition variables for any lock (J.-P. Lozi, "Towards More
 * Scalable Mutual Exclusion for Multicore Architectures", PhD thesis, UPMC
 * (Paris 6), 2014, section 3.2: a POSIX condition variable around the
 * lock; and LiTL, Guiroux, Lachaize and Quema, USENIX ATC 2016).
 *
 * A liblock condition variable is a POSIX condition variable plus an inner
 * POSIX mutex.  wait(cond, L):
 *   1. take the inner mutex          (while still holding L)
 *   2. release L                     (algorithm hook or the API's unlock)
 *   3. pthread_cond_wait(inner)      (atomically releases the inner mutex)
 *   4. drop the inner mutex
 *   5. take L again
 * signal/broadcast take the inner mutex around pthread_cond_signal/broadcast.
 *
 * No lost wake-up: a signaller that changed the predicate under L can only
 * have done so after step 2; it then needs the inner mutex, which the waiter
 * holds from step 1 until it is asleep in step 3, so the signal finds the
 * waiter on the condition's queue.  No deadlock: nobody waits for L while
 * holding the inner mutex (step 4 precedes step 5).
 *
 * Algorithms whose lock is not held by the calling thread in the ordinary
 * sense (RCL critical sections running on a server thread) supply
 * cond_release/cond_reacquire hooks; algorithms that cannot support waiting
 * at all leave LIBLOCK_PROP_COND unset and get ENOTSUP.
 *
 * Requeue (algorithms with the requeue hooks of struct ll_ops: mcs under
 * spin-then-park).  With a FIFO lock, a waiter woken by a signal must run
 * only to queue for the lock behind the threads already waiting, and usually
 * sleep again until its turn: two wake-ups per wait, the first of which
 * buys nothing.  As glibc's old FUTEX_CMP_REQUEUE moved condition waiters to
 * the mutex's futex, a signal here puts the waiter's queue node on the
 * lock's queue (ops->requeue, run by the signaller, which never waits), and
 * the waiter sleeps on that node until the lock is handed to it.  wait:
 *   1. take the inner mutex; release L (the API's unlock);
 *   2. push a hold for L (the node the API's unlock will later use) and
 *      requeue_prepare it; queue a record {lock, node} on the condition's
 *      list (FIFO); waiters++; drop the inner mutex;
 *   3. requeue_wait: sleep until L is granted to the node -- then the
 *      thread holds L exactly as after ll_api_lock (the hold is on its
 *      stack);
 *   4. timed out before a signal took the record (checked under the inner
 *      mutex): unlink it, pop the hold, take L again the ordinary way and
 *      return ETIMEDOUT; a record already taken means the signal was
 *      consumed: wait for the grant (no deadline) and return 0.
 * signal: under the inner mutex take the list's head (marking it taken);
 * after dropping the mutex, requeue its node; with an empty list,
 * pthread_cond_signal.  broadcast: take the whole list, then
 * requeue each record in order (reading the next link first: a requeued
 * waiter may be granted and return at once), and pthread_cond_broadcast.
 * No lost wake-up: the record is queued under the inner mutex that the
 * waiter holds since before it released L (as in the ordinary protocol), so
 * a signaller that changed the predicate under L finds it; a record taken
 * by a signal is always requeued, and a requeued node is granted in FIFO
 * order like any waiter's.  Records live on the waiter's stack; a waiter
 * cannot leave before its node is granted, which needs the signaller's
 * requeue first, and the signaller reads the record's fields before it
 * drops the inner mutex.  A lock whose policy does not park (requeue_prepare
 * says ENOTSUP) waits the ordinary way on the same condition.  Waits under
 * cond_release/cond_reacquire hooks (RCL) never use requeue.
 *
 * Cancellation (a wait is a POSIX cancellation point).  The ordinary wait
 * sleeps in glibc's pthread_cond_wait, itself a cancellation point: a
 * thread cancelled there has glibc's condition retake the inner mutex and
 * make sure it consumed no signal of its own, and then our clean-up
 * (pc_cancelled) leaves as a woken waiter would -- waiters--, drop the
 * inner mutex, take L again -- so the program's cleanup handlers run with
 * L held.  A requeue waiter sleeps in requeue_wait (step 3), cancellable
 * only while it waits for a signal (wait.c, "Cancellable sleeps"; the wait
 * for the grant that follows a requeue is the mutex re-acquisition, as in
 * glibc no cancellation point); its clean-up (rq_cancelled), under the
 * inner mutex: a record still queued is unlinked and L taken the ordinary
 * way; a record a signal took is owed a grant, which it waits for, after
 * passing that signal on with liblock_cond_signal (a broadcast's record
 * passes nothing: every waiter was woken).  So a cancelled waiter never
 * consumes a signal meant for another.
 *
 * Destroy.  `waiters` counts the threads inside the ordinary wait and the
 * requeue records still queued (a record taken by a signal is uncounted by
 * the signaller, under the inner mutex: its waiter touches the condition
 * no more except through the inner mutex after a timeout or cancellation
 * that raced with the signal -- destroying the condition then is not
 * covered); `unblocked` (<= waiters) counts those of them a signal or
 * broadcast woke that have not left yet.  destroy returns EBUSY while some
 * waiter is still blocked (waiters > unblocked: undefined in POSIX) and
 * otherwise waits, yielding, until the woken ones have left, so the
 * condition can be destroyed and freed right after a broadcast, as POSIX
 * allows and glibc does.  A waiter leaves before it takes L again, so a
 * destroyer holding L does not wait for it.
 *
 * Deadlines are converted with saturating arithmetic (cond_lifo.h,
 * ll_ts_diff_ns): a deadline centuries away never passes.
 *
 * Mostly-LIFO condition variables (D. Dice, "Malthusian Locks", EuroSys
 * 2017, extended version arXiv:1511.06035, section 6.10): a condattr on
 * which liblock_condattr_setfifo was called selects the explicit-queue kind
 * (_kind = LL_COND_KIND_LIFO), implemented in cond_lifo.c; the functions
 * here check arguments and dispatch on _kind.
 */
#include "internal.h"
#include "cond_lifo.h"
#include "fairness.h"

#include <string.h>
#include <time.h>

/* A requeue waiter (on its thread's stack); fields guarded by the inner mutex. */
struct rq_waiter {
    struct rq_waiter *next;
    liblock_t *lock;
    void *node;
    int queued;       /* 1 while on the list: no signal has taken it */
    int by_broadcast; /* taken by a broadcast */
};

struct posix_cond {
    pthread_cond_t c;
    pthread_mutex_t m;
    unsigned waiters;   /* guarded by m (header, "Destroy") */
    unsigned unblocked; /* guarded by m: of waiters, those woken and not yet gone */
    struct rq_waiter *rq_head, *rq_tail; /* requeue waiters, FIFO; guarded by m */
};
_Static_assert(sizeof(struct posix_cond) <= sizeof(((liblock_cond_t *)0)->_storage), "cond storage too small");

LL_EXPORT int liblock_condattr_init(liblock_condattr_t *attr)
{
    if (!attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->_magic = LL_CONDATTR_MAGIC;
    attr->_kind = 0;
    attr->_fifo_probability = 1.0;
    return 0;
}

LL_EXPORT int liblock_condattr_setfifo(liblock_condattr_t *attr, double p)
{
    if (!attr || attr->_magic != LL_CONDATTR_MAGIC || !(p >= 0.0 && p <= 1.0))
        return EINVAL;
    attr->_fifo_probability = p;
    attr->_kind = LL_COND_KIND_LIFO; /* choosing an order selects the explicit queue (cond_lifo.c) */
    return 0;
}

LL_EXPORT int liblock_cond_init(liblock_cond_t *cond, const void *attrp)
{
    const liblock_condattr_t *attr = attrp;
    if (!cond || (attr && attr->_magic != LL_CONDATTR_MAGIC))
        return EINVAL;
    if (attr && attr->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_init(cond, attr->_fifo_probability);
    struct posix_cond *pc = (struct posix_cond *)cond->_storage;
    pc->waiters = 0;
    pc->unblocked = 0;
    pc->rq_head = pc->rq_tail = NULL;
    int r = pthread_mutex_init(&pc->m, NULL);
    if (r)
        return r;
    r = pthread_cond_init(&pc->c, NULL);
    if (r) {
        pthread_mutex_destroy(&pc->m);
        return r;
    }
    cond->_kind = 0;
    cond->_impl = pc;
    cond->_magic = LL_COND_MAGIC;
    return 0;
}

static int release_outer(liblock_t *l)
{
    const struct ll_ops *o = LL_OPS(l);
    return o->cond_release ? o->cond_release(l) : ll_api_unlock(l);
}

static int reacquire_outer(liblock_t *l)
{
    const struct ll_ops *o = LL_OPS(l);
    int r;
    /* Retaking a lock we released cannot fail for lack of a reason the
     * caller can act on; retry transient ENOMEM rather than return without
     * the lock the caller's code assumes it holds. */
    while ((r = (o->cond_reacquire ? o->cond_reacquire(l) : ll_api_lock(l))) == ENOMEM)
        ll_yield();
    return r;
}

int ll_cond_release_outer(liblock_t *l) { return release_outer(l); }
int ll_cond_reacquire_outer(liblock_t *l) { return reacquire_outer(l); }

__thread struct ll_cond_hook *ll_cond_hook_tls __attribute__((tls_model("initial-exec")));

void ll_cond_cancel_finish(void)
{
    struct ll_cond_hook *h = ll_cond_hook_tls;
    ll_cond_hook_tls = NULL;
    if (h)
        h->fn(h->arg);
}

/* Under the inner mutex: a waiter of the ordinary wait leaves; consumed: it
 * returns 0 (it was woken, so counted in unblocked if a signal counted it). */
static void pc_leave(struct posix_cond *pc, int consumed)
{
    pc->waiters--;
    if (consumed && pc->unblocked)
        pc->unblocked--;
    if (pc->unblocked > pc->waiters)
        pc->unblocked = pc->waiters;
}

/* CLOCK_REALTIME abstime -> CLOCK_MONOTONIC ns (at least 1: 0 means none);
 * saturating. */
static uint64_t mono_deadline(const struct timespec *abstime)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t left = ll_ts_diff_ns(abstime, &now);
    uint64_t mono = ll_now_ns();
    return left <= 0 ? mono : mono + (uint64_t)left;
}

/* Under the inner mutex: unlink a record no signal has taken. */
static void rq_unlink(struct posix_cond *pc, struct rq_waiter *w)
{
    struct rq_waiter **pp = &pc->rq_head, *prev = NULL;
    while (*pp != w) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = w->next;
    if (pc->rq_tail == w)
        pc->rq_tail = prev;
    pc->waiters--;
}

struct rq_cancel {
    struct ll_cancel c;
    liblock_cond_t *cond;
    struct posix_cond *pc;
    liblock_t *l;
    struct rq_waiter *w;
    ll_thread_t *self;
    ll_hold_t *h;
};

/* A requeue waiter cancelled while it waited for a signal (header). */
static void rq_cancelled(void *arg)
{
    struct rq_cancel *x = arg;
    pthread_mutex_lock(&x->pc->m);
    if (x->w->queued) {
        rq_unlink(x->pc, x->w);
        pthread_mutex_unlock(&x->pc->m);
        ll_hold_pop(x->self, x->h);
        reacquire_outer(x->l);
    } else {
        int pass = !x->w->by_broadcast;
        pthread_mutex_unlock(&x->pc->m);
        if (pass)
            liblock_cond_signal(x->cond);
        (void)LL_OPS(x->l)->requeue_wait(x->l, x->h->node, 0); /* our node is requeued: wait for its grant */
    }
    ll_cond_cancel_finish();
}

/* Steps 2-4 of the requeue wait (header); called with the inner mutex held
 * and L released.  Returns ENOTSUP (inner mutex still held, nothing changed:
 * wait the ordinary way), or the wait's result (inner mutex released, L
 * held again). */
static int requeue_wait(liblock_cond_t *cond, struct posix_cond *pc, liblock_t *l, const struct timespec *abstime)
{
    const struct ll_ops *o = LL_OPS(l);
    ll_thread_t *self = ll_self_tls; /* set: the caller held L through the API */
    ll_hold_t *h = ll_hold_push(self, l);
    if (!h)
        return ENOTSUP;
    if (o->requeue_prepare(l, h->node)) {
        ll_hold_pop(self, h);
        return ENOTSUP;
    }
    struct rq_waiter w = {NULL, l, h->node, 1, 0};
    if (pc->rq_tail)
        pc->rq_tail->next = &w;
    else
        pc->rq_head = &w;
    pc->rq_tail = &w;
    pc->waiters++;
    pthread_mutex_unlock(&pc->m);
    uint64_t deadline = abstime ? mono_deadline(abstime) : 0;
    struct rq_cancel x = {{rq_cancelled, NULL, NULL, 0}, cond, pc, l, &w, self, h};
    x.c.arg = &x;
    ll_cancel_tls = &x.c;
    int rw = o->requeue_wait(l, h->node, deadline);
    ll_cancel_tls = NULL;
    if (rw == ETIMEDOUT) {
        pthread_mutex_lock(&pc->m);
        if (w.queued) {
            /* no signal took us: unlink (singly linked: find the predecessor) */
            rq_unlink(pc, &w);
            pthread_mutex_unlock(&pc->m);
            ll_hold_pop(self, h);
            int r = reacquire_outer(l);
            return r ? r : ETIMEDOUT;
        }
        pthread_mutex_unlock(&pc->m);
        /* a signal took us and requeues (or has requeued) our node: it was
         * consumed, so wait for the lock and report success */
        (void)o->requeue_wait(l, h->node, 0);
    }
    /* (the signaller that took our record uncounted it: header, "Destroy") */
    if (LL_UNLIKELY(l->_stats != NULL))
        ll_fairness_note(l, self);
    return 0;
}

/* Under the inner mutex: take the list's head (or NULL); its waiter is
 * uncounted (header, "Destroy"). */
static struct rq_waiter *rq_take(struct posix_cond *pc)
{
    struct rq_waiter *w = pc->rq_head;
    if (w) {
        pc->rq_head = w->next;
        if (!pc->rq_head)
            pc->rq_tail = NULL;
        w->queued = 0;
        pc->waiters--;
    }
    return w;
}

struct pc_cancel {
    struct posix_cond *pc;
    liblock_t *l;
};

/* A waiter cancelled in glibc's pthread_cond_wait (header): glibc has
 * retaken the inner mutex. */
static void pc_cancelled(void *arg)
{
    struct pc_cancel *x = arg;
    pc_leave(x->pc, 0);
    pthread_mutex_unlock(&x->pc->m);
    reacquire_outer(x->l);
    ll_cond_cancel_finish();
}

static int cond_wait_common(liblock_cond_t *cond, liblock_t *l, const struct timespec *abstime)
{
    if (!cond || cond->_magic != LL_COND_MAGIC || !l || l->_magic != LL_LOCK_MAGIC)
        return EINVAL;
    if (abstime && (abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L))
        return EINVAL;
    const struct ll_ops *o = LL_OPS(l);
    if (!(o->props & LIBLOCK_PROP_COND))
        return ENOTSUP;
    if (!o->cond_release) {
        ll_thread_t *self = ll_self_tls;
        if (!self || !ll_hold_find(self, l))
            return EPERM;
    }
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_wait(cond, l, abstime);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    int r = release_outer(l);
    if (r) {
        pthread_mutex_unlock(&pc->m);
        return r;
    }
    if (o->requeue_prepare && !o->cond_release) {
        int rq = requeue_wait(cond, pc, l, abstime);
        if (rq != ENOTSUP)
            return rq; /* the inner mutex is no longer held */
    }
    pc->waiters++;
    struct pc_cancel x = {pc, l};
    int w;
    pthread_cleanup_push(pc_cancelled, &x);
    w = abstime ? pthread_cond_timedwait(&pc->c, &pc->m, abstime) : pthread_cond_wait(&pc->c, &pc->m);
    pthread_cleanup_pop(0);
    pc_leave(pc, w == 0);
    pthread_mutex_unlock(&pc->m);
    r = reacquire_outer(l);
    if (r)
        return r;
    return w == ETIMEDOUT ? ETIMEDOUT : 0;
}

LL_EXPORT int liblock_cond_wait(liblock_cond_t *cond, liblock_t *l) { return cond_wait_common(cond, l, NULL); }

LL_EXPORT int liblock_cond_timedwait(liblock_cond_t *cond, liblock_t *l, const struct timespec *abstime)
{
    if (!abstime)
        return EINVAL;
    return cond_wait_common(cond, l, abstime);
}

LL_EXPORT int liblock_cond_signal(liblock_cond_t *cond)
{
    if (!cond || cond->_magic != LL_COND_MAGIC)
        return EINVAL;
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_signal(cond);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    struct rq_waiter *w = rq_take(pc);
    if (w) {
        liblock_t *l = w->lock; /* w stays alive until its node is requeued (header) */
        void *node = w->node;
        pthread_mutex_unlock(&pc->m);
        LL_OPS(l)->requeue(l, node);
        return 0;
    }
    pthread_cond_signal(&pc->c);
    if (pc->unblocked < pc->waiters)
        pc->unblocked++;
    pthread_mutex_unlock(&pc->m);
    return 0;
}

LL_EXPORT int liblock_cond_broadcast(liblock_cond_t *cond)
{
    if (!cond || cond->_magic != LL_COND_MAGIC)
        return EINVAL;
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_broadcast(cond);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    struct rq_waiter *all = pc->rq_head;
    for (struct rq_waiter *w = all; w; w = w->next) {
        w->queued = 0;
        w->by_broadcast = 1;
        pc->waiters--;
    }
    pc->rq_head = pc->rq_tail = NULL;
    pthread_cond_broadcast(&pc->c);
    pc->unblocked = pc->waiters;
    pthread_mutex_unlock(&pc->m);
    /* Requeue in order, reading each record before requeueing it: its
     * waiter may be granted and return at once.  A record not yet requeued
     * stays alive: its waiter, even timed out, sees it taken and waits for
     * the grant, which needs our requeue first. */
    for (struct rq_waiter *w = all, *next; w; w = next) {
        next = w->next;
        LL_OPS(w->lock)->requeue(w->lock, w->node);
    }
    return 0;
}

LL_EXPORT int liblock_cond_destroy(liblock_cond_t *cond)
{
    if (!cond || cond->_magic != LL_COND_MAGIC)
        return EINVAL;
    if (cond->_kind == LL_COND_KIND_LIFO)
        return ll_cond_lifo_destroy(cond);
    struct posix_cond *pc = cond->_impl;
    pthread_mutex_lock(&pc->m);
    while (pc->waiters && pc->waiters <= pc->unblocked) {
        /* every waiter left was woken: let them leave (header, "Destroy") */
        pthread_mutex_unlock(&pc->m);
        ll_yield();
        pthread_mutex_lock(&pc->m);
    }
    unsigned waiting = pc->waiters;
    pthread_mutex_unlock(&pc->m);
    if (waiting)
        return EBUSY; /* threads still blocked: the condition is left intact */
    pthread_cond_destroy(&pc->c);
    pthread_mutex_destroy(&pc->m);
    cond->_magic = 0;
    return 0;
}
