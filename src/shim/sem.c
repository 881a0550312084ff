/*
 * sem.c - sem_* (only with LIBLOCK_SEM).
 *
 * A sem_t (32 bytes on x86-64) is smaller than a liblock_sem_t, so, as for
 * mutexes, the sem_t holds a pointer to a heap `struct ip_sem`.  glibc's
 * semaphore (struct new_sem: a 64-bit value/waiters word, `private`, `pad`)
 * uses only the first 16 bytes; we keep our marker in the last 16:
 *   word 2: IP_SEM_MAGIC      word 3: pointer to the struct ip_sem
 * and the ip_sem points back at the sem_t.  A sem_t is ours iff word 2 is
 * the magic and the ip_sem it points to names this sem_t as its home.
 * Everything else is glibc's and passed through untouched: semaphores from
 * sem_open (glibc zeroes their last 16 bytes), process-shared ones (we clear
 * the marker words before handing them to glibc's sem_init, since the memory
 * may hold a marker from an earlier semaphore), and every sem_t initialised
 * while LIBLOCK_SEM was not in effect.
 * Ordering: sem_init stores the pointer and then the magic with release;
 * a user loads the magic with acquire before the pointer.  (POSIX requires
 * that init happen before any use anyway, so this only makes the
 * recognition itself race-free.)  The semaphore operations themselves are
 * liblock_sem_* (src/core/cond_lifo.c: value + mostly-LIFO waiter list,
 * direct hand-off of a posted unit to the head waiter); waiting is that
 * file's spin-then-park, whatever LIBLOCK_WAIT says.
 * Signals: a thread blocked in an interposed sem_wait is not interrupted by
 * a signal handler; the handler runs and the wait continues (never EINTR).
 * Cancellation: sem_wait/timedwait/clockwait act on a pending cancellation
 * request on entry (as glibc's, even with a unit available); a thread
 * cancelled while it sleeps is cancelled there, and a unit a post had
 * already handed it goes on as a post would (src/core/cond_lifo.c,
 * "Cancellation").  Destroy waits for woken waiters to leave and is EBUSY
 * only while one is still queued. */
#include "shim.h"
#include "core/cond_lifo.h" /* ll_sem_debug_queued, for tests */

#define IP_SEM_MAGIC 0x4c4c53454d495053ull /* "LLSEMIPS" */
_Static_assert(sizeof(sem_t) >= 4 * sizeof(uint64_t), "sem_t holds our two marker words after glibc's 16 bytes");

struct ip_sem {
    liblock_sem_t s;
    sem_t *home;
    struct ip_sem *prev, *next;            /* registry (fork) */
};

static struct ip_sem *reg_sems;

static inline _Atomic uint64_t *sem_magic_word(sem_t *s) { return (_Atomic uint64_t *)(void *)((char *)s + 16); }
static inline _Atomic uintptr_t *sem_ptr_word(sem_t *s) { return (_Atomic uintptr_t *)(void *)((char *)s + 24); }

/* Ours: the wrapper; otherwise NULL (glibc's semaphore, or LIBLOCK_SEM unset). */
static inline struct ip_sem *sem_ours(sem_t *s)
{
    if (LL_UNLIKELY(!atomic_load_explicit(&shim_cfg_ready, memory_order_acquire)))
        config_ensure();
    if (!cfg.sem || !s)
        return NULL;
    if (atomic_load_explicit(sem_magic_word(s), memory_order_acquire) != IP_SEM_MAGIC)
        return NULL;
    struct ip_sem *w = (struct ip_sem *)atomic_load_explicit(sem_ptr_word(s), memory_order_relaxed);
    return w && w->home == s ? w : NULL;
}

static void sem_clear_marker(sem_t *s)
{
    atomic_store_explicit(sem_magic_word(s), 0, memory_order_relaxed);
    atomic_store_explicit(sem_ptr_word(s), 0, memory_order_relaxed);
}

static int sem_fail(int e)
{
    errno = e;
    return -1;
}

LL_EXPORT int sem_init(sem_t *s, int pshared, unsigned value)
{
    ip_resolve();
    config_ensure();
    if (!cfg.sem || pshared) {
        if (!cfg.sem)
            return R.sem_init(s, pshared, value);
        sem_clear_marker(s); /* a stale marker must not make glibc's semaphore look like ours */
        int r = R.sem_init(s, pshared, value);
        if (r == 0)
            shim_to_glibc(SG_SEM, SG_PSHARED);
        return r;
    }
    if (value > (unsigned)SEM_VALUE_MAX)
        return sem_fail(EINVAL);
    struct ip_sem *w = sem_ours(s);
    if (w && liblock_sem_destroy(&w->s) == 0) {
        /* initialised again without sem_destroy (undefined in POSIX): reuse
         * the wrapper when nobody waits on it */
        liblock_sem_init(&w->s, value, cfg.sem_prob);
        return 0;
    }
    ip_in_setup++;
    w = ll_alloc_aligned(sizeof *w);
    ip_in_setup--;
    if (!w) {
        /* out of memory: this semaphore stays glibc's (it still works) */
        sem_clear_marker(s);
        int r = R.sem_init(s, pshared, value);
        if (r == 0)
            shim_to_glibc(SG_SEM, SG_NOMEM);
        return r;
    }
    liblock_sem_init(&w->s, value, cfg.sem_prob); /* cannot fail: value and P checked */
    w->home = s;
    R.mutex_lock(&reg_mutex);
    w->prev = NULL;
    w->next = reg_sems;
    if (reg_sems)
        reg_sems->prev = w;
    reg_sems = w;
    R.mutex_unlock(&reg_mutex);
    memset(s, 0, 16); /* glibc's part: value 0, so a call that bypasses us cannot take a unit */
    atomic_store_explicit(sem_ptr_word(s), (uintptr_t)w, memory_order_relaxed);
    atomic_store_explicit(sem_magic_word(s), IP_SEM_MAGIC, memory_order_release);
    return 0;
}

LL_EXPORT int sem_destroy(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_destroy(s);
    int r = liblock_sem_destroy(&w->s);
    if (r)
        return sem_fail(r); /* EBUSY: threads wait on it; left intact */
    sem_clear_marker(s);
    R.mutex_lock(&reg_mutex);
    if (w->prev)
        w->prev->next = w->next;
    else
        reg_sems = w->next;
    if (w->next)
        w->next->prev = w->prev;
    R.mutex_unlock(&reg_mutex);
    free(w);
    return 0;
}

LL_EXPORT int sem_wait(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_wait(s);
    pthread_testcancel(); /* a cancellation point (see above) */
    int r = liblock_sem_wait(&w->s);
    return r ? sem_fail(r) : 0;
}

LL_EXPORT int sem_trywait(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_trywait(s);
    int r = liblock_sem_trywait(&w->s);
    return r ? sem_fail(r) : 0;
}

/* sem_timedwait / sem_clockwait on ours.  As in glibc, a bad timespec is
 * EINVAL even when a unit is available (POSIX allows either), and a unit
 * available now is taken whatever the deadline says. */
static int sem_timed(struct ip_sem *w, clockid_t clk, const struct timespec *abstime)
{
    pthread_testcancel();
    if (!abstime || !ts_valid(abstime))
        return sem_fail(EINVAL);
    if (liblock_sem_trywait(&w->s) == 0)
        return 0;
    struct timespec rt = to_realtime(clk, abstime);
    int r = liblock_sem_timedwait(&w->s, &rt);
    return r ? sem_fail(r) : 0;
}

LL_EXPORT int sem_timedwait(sem_t *s, const struct timespec *abstime)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_timedwait(s, abstime);
    return sem_timed(w, CLOCK_REALTIME, abstime);
}

LL_EXPORT int sem_clockwait(sem_t *s, clockid_t clk, const struct timespec *abstime)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_clockwait ? R.sem_clockwait(s, clk, abstime) : sem_fail(EINVAL);
    if (clk != CLOCK_REALTIME && clk != CLOCK_MONOTONIC)
        return sem_fail(EINVAL);
    return sem_timed(w, clk, abstime);
}

LL_EXPORT int sem_post(sem_t *s)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_post(s);
    int r = liblock_sem_post(&w->s);
    return r ? sem_fail(r) : 0; /* EOVERFLOW at SEM_VALUE_MAX, value unchanged */
}

LL_EXPORT int sem_getvalue(sem_t *restrict s, int *restrict value)
{
    ip_resolve();
    struct ip_sem *w = sem_ours(s);
    if (!w)
        return R.sem_getvalue(s, value);
    int r = liblock_sem_getvalue(&w->s, value);
    return r ? sem_fail(r) : 0;
}

/* For tests: threads queued on one of our semaphores, -1 if not ours. */
LL_EXPORT int liblock_interpose_sem_queued(sem_t *s)
{
    struct ip_sem *w = sem_ours(s);
    return w ? ll_sem_debug_queued(&w->s) : -1;
}


/* fork child: semaphores keep their value; their waiters were other
 * threads, and the internal spin lock may have been held by one of them. */
void sem_fork_child(void)
{
    for (struct ip_sem *w = reg_sems; w; w = w->next) {
        int v = 0;
        liblock_sem_getvalue(&w->s, &v);
        liblock_sem_init(&w->s, (unsigned)(v > 0 ? v : 0), cfg.sem_prob);
    }
}
