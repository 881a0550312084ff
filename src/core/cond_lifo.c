/*
 * cond_lifo.c - mostly-LIFO condition variables and semaphores.
 *
 * Source: D. Dice, "Malthusian Locks", EuroSys 2017 (extended version, arXiv:1511.06035),
 * sections 6.10 (mostly-LIFO condition variables, the perl benchmark) and
 * 6.11 (condition variables and semaphores, the Buffer Pool benchmark).
 * Concurrency restriction applied to
 * waiting lists: a waiter is appended to the tail of the list with
 * probability P and prepended to the head otherwise; signal / post always
 * take the head.  P = 1 is FIFO, P = 0 is LIFO (the most recent waiter is
 * woken first, like folly's LifoSem), and the paper's mostly-LIFO setting
 * P = 1/1000 keeps the few most recently active threads circulating while
 * the occasional append gives every waiter a turn eventually.  P is drawn
 * per wait on the waiting thread's xorshift generator (ll_rand).
 *
 * Structure shared by both primitives: a waiter list protected by a small
 * internal spin lock (`q`, held for O(1) steps, never across a wait or a
 * system call, except that broadcast marks the whole list), and one waiter
 * record per waiting thread, on that thread's stack, whose 32-bit word the
 * thread waits on through the waiting-policy layer (spin-then-park:
 * ll_wait_while_until / ll_wake; bit 31 belongs to the policy).
 * `inside` counts threads between entering and leaving a wait: destroy
 * refuses (EBUSY) while a waiter is still queued (blocked: destroying then
 * is undefined in POSIX), and otherwise waits until every woken waiter has
 * left (`drain`/`drained`: the last one to leave wakes it), so a condition
 * variable or semaphore may be destroyed, and its memory freed, right after
 * the broadcast or post that woke its last waiters, as POSIX allows and
 * glibc does.  A thread that has left touches the object no more.
 *
 * Condition variable wait(c, L):
 *   1. under q: queue our record (append with probability P, else prepend),
 *      inside++;
 *   2. release L (ll_cond_release_outer: the same path as the POSIX-backed
 *      kind, so every algorithm with LIBLOCK_PROP_COND works, including
 *      those with cond_release hooks);
 *   3. wait until our word is 0 (signalled) or the deadline passes;
 *   4. under q: if we timed out and are still queued, unqueue (ETIMEDOUT);
 *      inside--;
 *   5. take L again.
 * No lost wake-up: the record is queued (1) before L is released (2); a
 * signaller that changed the predicate under L did so after (2) and finds
 * our record (or one queued later) in the list.  A signal dequeues the head
 * under q, marks it unqueued, and wakes it after releasing q.
 * Timeout against a racing signal: if the timed-out waiter finds itself
 * already dequeued, a signaller owns the wake-up of its record; the waiter
 * then waits (briefly: the signaller is running) until its word is 0 before
 * returning, so the signaller never writes a dead stack frame, and it
 * reports success (the signal was consumed, not lost).  The signaller may
 * still call futex_wake on the address after that: a spurious wake-up for
 * whatever waits there now, which every waiter of this library tolerates.
 * Broadcast detaches the whole list under q, then wakes each record after
 * reading its successor (a woken record may vanish at once).
 *
 * Cancellation (pthread_cond_wait and sem_wait are cancellation points):
 * step 3's sleep is cancellable (wait.c, "Cancellable sleeps"); the
 * clean-up, run on the cancelled thread before it unwinds, under q: if our
 * record is still queued, unqueue it -- nobody signalled us and nothing is
 * owed; otherwise a signaller (or poster) dequeued it and owns its wake-up:
 * wait until our word is 0 (as for a timeout), then pass the wake-up on:
 * a condition wakes the head waiter in our place, a semaphore gives the
 * unit back exactly as sem_post would (to the head waiter, else to the
 * value).  Then leave, and a condition wait takes L again, so the cleanup
 * handlers of the program run with the mutex held, as POSIX requires.
 * No signal is lost to a cancelled waiter: a signal dequeues exactly one
 * record, under q; that record's thread either returns from the wait
 * (consuming it, as any woken waiter does) or, cancelled, finds itself
 * dequeued under q and re-issues the signal to the current head, which is
 * a waiter that was blocked when the signal came or arrived later (a
 * waiter woken by it re-checks its predicate, as POSIX lets every waiter).
 * A broadcast's record passes a wake-up on too: one spurious wake-up at
 * most.  If nobody is queued the pass is dropped: no thread was blocked to
 * receive it.
 *
 * Semaphore: value and waiter list.  wait: fast path CAS value -> value-1
 * while value > 0; otherwise, under q, re-check value and either take a
 * unit or queue (append with probability P).  post, under q: if a waiter is
 * queued, dequeue the head and hand the unit to it directly (the value is
 * not incremented); otherwise value++.  Invariant: list non-empty => value
 * == 0 (a waiter queues only after seeing value == 0 under q; value only
 * grows under q when the list is empty; the lock-free fast path only
 * decrements a positive value), so no unit sits unused while a thread
 * sleeps.  Timeout against a racing post: as for conditions, the waiter
 * that finds itself dequeued waits for its word and keeps the unit.
 *
 * Orderings: q is an acquire/release spin lock, so list edits are ordered;
 * the hand-off of a signal or unit is ll_wake (release) read by the
 * waiter's acquire load in ll_wait_while_until.  The semaphore's value is
 * changed by acq_rel CAS or under q, and a unit taken on the fast path
 * synchronises with the post that produced it.
 */
#include "cond_lifo.h"

#include <limits.h>
#include <string.h>
#include <time.h>

#define LL_SEM_MAGIC 0x4c4c534du /* "LLSM" */
#define WQ_POLICY LIBLOCK_WAIT_SPIN_THEN_PARK

struct waiter {
    struct waiter *prev, *next;
    _Atomic uint32_t word; /* 1 = waiting, 0 = woken (bit 31: policy) */
    int queued;            /* under q */
};

struct wq {
    _Atomic uint32_t q;    /* internal spin lock */
    unsigned inside;       /* under q */
    unsigned drain;        /* under q: a destroyer waits on `drained` for inside to reach 0 */
    _Atomic uint32_t drained; /* 0 while it waits; the last leaver's ll_wake (release) sets 1 */
    struct waiter *head, *tail;
    uint64_t append_threshold; /* append iff draw < threshold (unless always) */
    bool append_always;
    double p;
};

struct lifo_cond {
    struct wq wq;
};

struct lifo_sem {
    struct wq wq;
    _Atomic int value;
};

_Static_assert(sizeof(struct lifo_cond) <= sizeof(((liblock_cond_t *)0)->_storage), "cond storage too small");
_Static_assert(sizeof(struct lifo_sem) <= sizeof(((liblock_sem_t *)0)->_storage), "sem storage too small");

/* ---- the waiter list ------------------------------------------------------ */
static void wq_init(struct wq *w, double p)
{
    memset(w, 0, sizeof *w);
    w->p = p;
    w->append_always = p >= 1.0;
    w->append_threshold = w->append_always ? 0 : (uint64_t)(p * 18446744073709551616.0);
}

static void q_lock(struct wq *w)
{
    unsigned n = 0;
    for (;;) {
        uint32_t v = 0;
        if (atomic_compare_exchange_weak_explicit(&w->q, &v, 1, memory_order_acquire, memory_order_relaxed))
            return;
        while (atomic_load_explicit(&w->q, memory_order_relaxed)) {
            if (++n < 200)
                ll_pause();
            else
                ll_yield(); /* the holder may be preempted: let it run */
        }
    }
}

static void q_unlock(struct wq *w) { atomic_store_explicit(&w->q, 0, memory_order_release); }

static bool draw_append(const struct wq *w)
{
    if (w->append_always)
        return true;
    if (w->append_threshold == 0)
        return false;
    ll_thread_t *self = ll_self();
    return self ? ll_rand(self) < w->append_threshold : true;
}

/* under q */
static void wq_insert(struct wq *w, struct waiter *r, bool append)
{
    r->queued = 1;
    if (append) {
        r->next = NULL;
        r->prev = w->tail;
        if (w->tail)
            w->tail->next = r;
        else
            w->head = r;
        w->tail = r;
    } else {
        r->prev = NULL;
        r->next = w->head;
        if (w->head)
            w->head->prev = r;
        else
            w->tail = r;
        w->head = r;
    }
}

/* under q */
static void wq_remove(struct wq *w, struct waiter *r)
{
    if (r->prev)
        r->prev->next = r->next;
    else
        w->head = r->next;
    if (r->next)
        r->next->prev = r->prev;
    else
        w->tail = r->prev;
    r->queued = 0;
}

/* under q */
static struct waiter *wq_pop_head(struct wq *w)
{
    struct waiter *r = w->head;
    if (r)
        wq_remove(w, r);
    return r;
}

static void wake(struct waiter *r) { ll_wake(&r->word, 0, WQ_POLICY); }

/* CLOCK_REALTIME abstime -> CLOCK_MONOTONIC deadline in ns (never 0).
 * Saturating (ll_ts_diff_ns): a deadline centuries away stays in the
 * future, one far in the past has passed. */
static uint64_t deadline_of(const struct timespec *abstime)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t rel = ll_ts_diff_ns(abstime, &now);
    uint64_t d = ll_now_ns() + (rel > 0 ? (uint64_t)rel : 0);
    return d ? d : 1;
}

/* Wait for r to be woken or for the deadline; returns 0 if woken (a
 * signal / unit was consumed) or ETIMEDOUT (r is no longer queued).  The
 * sleep is a cancellation point whose clean-up is cancel (header). */
static int wq_wait(struct wq *w, struct waiter *r, uint64_t deadline, struct ll_cancel *cancel)
{
    uint32_t out;
    ll_cancel_tls = cancel;
    int e = ll_wait_while_until(&r->word, 1, WQ_POLICY, deadline, &out);
    ll_cancel_tls = NULL;
    if (e == 0)
        return 0;
    q_lock(w);
    int still = r->queued;
    if (still)
        wq_remove(w, r);
    q_unlock(w);
    if (still)
        return ETIMEDOUT;
    /* dequeued by a signaller/poster that is about to write our word */
    ll_wait_while(&r->word, 1, LIBLOCK_WAIT_YIELD);
    return 0;
}

static void leave(struct wq *w)
{
    q_lock(w);
    bool last = --w->inside == 0 && w->drain;
    if (last)
        w->drain = 0;
    q_unlock(w);
    /* The destroyer frees the object only after it has seen `drained` change
     * (this exchange); a futex_wake that follows on freed memory is the
     * harmless spurious wake-up of wait.c's header. */
    if (last)
        ll_wake(&w->drained, 1, WQ_POLICY);
}

/* destroy: EBUSY while a waiter is queued; otherwise wait until every woken
 * waiter has left (header). */
static int wq_quiesce(struct wq *w)
{
    q_lock(w);
    for (;;) {
        if (w->head) {
            q_unlock(w);
            return EBUSY;
        }
        if (!w->inside) {
            q_unlock(w);
            return 0;
        }
        w->drain = 1;
        atomic_store_explicit(&w->drained, 0, memory_order_relaxed); /* under q, before any leaver reads drain */
        q_unlock(w);
        ll_wait_while(&w->drained, 0, WQ_POLICY);
        q_lock(w);
    }
}

/* A cancelled waiter's share of the clean-up (header): 1 if a signaller or
 * poster had dequeued r (its wake-up is then ours to pass on). */
static bool withdraw(struct wq *w, struct waiter *r)
{
    q_lock(w);
    bool still = r->queued;
    if (still)
        wq_remove(w, r);
    q_unlock(w);
    if (still)
        return false;
    ll_wait_while(&r->word, 1, LIBLOCK_WAIT_YIELD); /* the signaller is about to write it */
    return true;
}

struct cancel_ctx {
    struct ll_cancel c;
    struct wq *w;
    struct waiter *r;
    liblock_t *l;         /* condition: the lock to take back */
    struct lifo_sem *sem; /* semaphore */
};

static void sem_give(struct lifo_sem *s);

static void cancelled(void *arg)
{
    struct cancel_ctx *x = arg;
    if (withdraw(x->w, x->r)) {
        if (x->sem) {
            sem_give(x->sem);
        } else {
            q_lock(x->w);
            struct waiter *p = wq_pop_head(x->w);
            q_unlock(x->w);
            if (p)
                wake(p);
        }
    }
    leave(x->w);
    if (x->l) {
        ll_cond_reacquire_outer(x->l);
        ll_cond_cancel_finish();
    }
}

/* ======================================================================
 * condition variables (called from cond.c after argument checks)
 * ====================================================================== */
int ll_cond_lifo_init(liblock_cond_t *cond, double p)
{
    struct lifo_cond *c = (struct lifo_cond *)cond->_storage;
    wq_init(&c->wq, p);
    cond->_impl = c;
    cond->_kind = LL_COND_KIND_LIFO;
    cond->_magic = LL_COND_MAGIC;
    return 0;
}

int ll_cond_lifo_wait(liblock_cond_t *cond, liblock_t *l, const struct timespec *abstime)
{
    struct lifo_cond *c = cond->_impl;
    if (!ll_self())
        return ENOMEM;
    uint64_t deadline = abstime ? deadline_of(abstime) : 0;
    struct waiter r;
    atomic_store_explicit(&r.word, 1, memory_order_relaxed);
    bool append = draw_append(&c->wq);
    q_lock(&c->wq);
    wq_insert(&c->wq, &r, append);
    c->wq.inside++;
    q_unlock(&c->wq);

    int e = ll_cond_release_outer(l);
    if (e) {
        /* we never waited: withdraw, passing on a signal we may have got */
        struct waiter *pass = NULL;
        q_lock(&c->wq);
        int still = r.queued;
        if (still)
            wq_remove(&c->wq, &r);
        else
            pass = wq_pop_head(&c->wq);
        q_unlock(&c->wq);
        if (!still)
            ll_wait_while(&r.word, 1, LIBLOCK_WAIT_YIELD);
        if (pass)
            wake(pass);
        leave(&c->wq);
        return e;
    }
    struct cancel_ctx x = {{cancelled, NULL, NULL, 0}, &c->wq, &r, l, NULL};
    x.c.arg = &x;
    int w = wq_wait(&c->wq, &r, deadline, &x.c);
    leave(&c->wq);
    e = ll_cond_reacquire_outer(l);
    if (e)
        return e;
    return w;
}

int ll_cond_lifo_signal(liblock_cond_t *cond)
{
    struct lifo_cond *c = cond->_impl;
    q_lock(&c->wq);
    struct waiter *r = wq_pop_head(&c->wq);
    q_unlock(&c->wq);
    if (r)
        wake(r);
    return 0;
}

int ll_cond_lifo_broadcast(liblock_cond_t *cond)
{
    struct lifo_cond *c = cond->_impl;
    q_lock(&c->wq);
    struct waiter *list = c->wq.head;
    for (struct waiter *r = list; r; r = r->next)
        r->queued = 0;
    c->wq.head = c->wq.tail = NULL;
    q_unlock(&c->wq);
    while (list) {
        struct waiter *next = list->next; /* read before the record can vanish */
        wake(list);
        list = next;
    }
    return 0;
}

int ll_cond_lifo_destroy(liblock_cond_t *cond)
{
    struct lifo_cond *c = cond->_impl;
    if (wq_quiesce(&c->wq))
        return EBUSY;
    cond->_magic = 0;
    return 0;
}

/* ======================================================================
 * semaphores (public API)
 * ====================================================================== */
static struct lifo_sem *sem_of(liblock_sem_t *sem)
{
    if (!sem || sem->_magic != LL_SEM_MAGIC)
        return NULL;
    return (struct lifo_sem *)sem->_storage;
}

LL_EXPORT int liblock_sem_init(liblock_sem_t *sem, unsigned value, double fifo_probability)
{
    if (!sem || value > (unsigned)INT_MAX || !(fifo_probability >= 0.0 && fifo_probability <= 1.0))
        return EINVAL;
    struct lifo_sem *s = (struct lifo_sem *)sem->_storage;
    wq_init(&s->wq, fifo_probability);
    atomic_store_explicit(&s->value, (int)value, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    sem->_magic = LL_SEM_MAGIC;
    return 0;
}

LL_EXPORT int liblock_sem_destroy(liblock_sem_t *sem)
{
    struct lifo_sem *s = sem_of(sem);
    if (!s)
        return EINVAL;
    if (wq_quiesce(&s->wq))
        return EBUSY;
    sem->_magic = 0;
    return 0;
}

static bool sem_take_fast(struct lifo_sem *s)
{
    int v = atomic_load_explicit(&s->value, memory_order_relaxed);
    while (v > 0)
        if (atomic_compare_exchange_weak_explicit(&s->value, &v, v - 1, memory_order_acq_rel, memory_order_relaxed))
            return true;
    return false;
}

LL_EXPORT int liblock_sem_trywait(liblock_sem_t *sem)
{
    struct lifo_sem *s = sem_of(sem);
    if (!s)
        return EINVAL;
    return sem_take_fast(s) ? 0 : EAGAIN;
}

static int sem_wait_common(struct lifo_sem *s, const struct timespec *abstime)
{
    if (sem_take_fast(s))
        return 0;
    if (!ll_self())
        return ENOMEM;
    uint64_t deadline = abstime ? deadline_of(abstime) : 0;
    struct waiter r;
    atomic_store_explicit(&r.word, 1, memory_order_relaxed);
    bool append = draw_append(&s->wq);
    q_lock(&s->wq);
    if (sem_take_fast(s)) {
        q_unlock(&s->wq);
        return 0;
    }
    wq_insert(&s->wq, &r, append);
    s->wq.inside++;
    q_unlock(&s->wq);
    struct cancel_ctx x = {{cancelled, NULL, NULL, 0}, &s->wq, &r, NULL, s};
    x.c.arg = &x;
    int w = wq_wait(&s->wq, &r, deadline, &x.c);
    leave(&s->wq);
    return w;
}

LL_EXPORT int liblock_sem_wait(liblock_sem_t *sem)
{
    struct lifo_sem *s = sem_of(sem);
    return s ? sem_wait_common(s, NULL) : EINVAL;
}

LL_EXPORT int liblock_sem_timedwait(liblock_sem_t *sem, const struct timespec *abstime)
{
    struct lifo_sem *s = sem_of(sem);
    if (!s || !abstime || abstime->tv_nsec < 0 || abstime->tv_nsec >= 1000000000L)
        return EINVAL;
    return sem_wait_common(s, abstime);
}

/* A cancelled waiter's unit goes where a post would put it. */
static void sem_give(struct lifo_sem *s)
{
    q_lock(&s->wq);
    struct waiter *r = wq_pop_head(&s->wq);
    if (!r && atomic_load_explicit(&s->value, memory_order_relaxed) < INT_MAX) /* (at INT_MAX, as post: EOVERFLOW) */
        atomic_fetch_add_explicit(&s->value, 1, memory_order_acq_rel);
    q_unlock(&s->wq);
    if (r)
        wake(r);
}

LL_EXPORT int liblock_sem_post(liblock_sem_t *sem)
{
    struct lifo_sem *s = sem_of(sem);
    if (!s)
        return EINVAL;
    q_lock(&s->wq);
    struct waiter *r = wq_pop_head(&s->wq);
    if (!r) {
        int v = atomic_load_explicit(&s->value, memory_order_relaxed);
        if (v == INT_MAX) {
            q_unlock(&s->wq);
            return EOVERFLOW;
        }
        /* fast-path takers may decrement concurrently: add, don't store */
        atomic_fetch_add_explicit(&s->value, 1, memory_order_acq_rel);
    }
    q_unlock(&s->wq);
    if (r)
        wake(r); /* direct hand-off of the unit */
    return 0;
}

LL_EXPORT int liblock_sem_getvalue(liblock_sem_t *sem, int *value)
{
    struct lifo_sem *s = sem_of(sem);
    if (!s || !value)
        return EINVAL;
    *value = atomic_load_explicit(&s->value, memory_order_acquire);
    return 0;
}

/* For tests: number of threads queued on a semaphore / condition. */
static unsigned wq_count(struct wq *w)
{
    unsigned n = 0;
    q_lock(w);
    for (struct waiter *r = w->head; r; r = r->next)
        n++;
    q_unlock(w);
    return n;
}

int ll_sem_debug_queued(liblock_sem_t *sem)
{
    struct lifo_sem *s = sem_of(sem);
    return s ? (int)wq_count(&s->wq) : -1;
}

int ll_cond_debug_queued(liblock_cond_t *cond)
{
    if (!cond || cond->_magic != LL_COND_MAGIC || cond->_kind != LL_COND_KIND_LIFO)
        return -1;
    return (int)wq_count(&((struct lifo_cond *)cond->_impl)->wq);
}
