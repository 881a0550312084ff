/*
 * fork.c - fork handlers (shim.h "fork") and the constructor.
 */
#include "shim.h"

#include <sys/uio.h>

#define reg_mutexes shim_reg_mutexes
#define reg_conds shim_reg_conds

/* Between this prepare handler and our parent/child handler, the prepare,
 * parent and child handlers of other components run with reg_mutex held by
 * this thread; one that locks a mutex not set up yet would wait for
 * reg_mutex forever (liblock.so's own RCL handlers, when a program linked
 * with -llock runs under the interposer: a transformed memcached's
 * daemon()).  Such a mutex becomes glibc's for life, like an allocator's met
 * during set-up (ip_in_setup); mutexes already set up are unaffected. */
static pid_t fork_tid; /* the forking thread's id (fork_prepare), for inplace_child */

static void fork_prepare(void)
{
    R.mutex_lock(&reg_mutex);
    ip_in_setup++;
    fork_tid = gettid();
}

/* posix in place (shim.h) in the child: the lock is glibc's state in the
 * program's own mutex m, which is rebuilt like every other lock: held by
 * the forking thread (glibc's __owner is its id, as glibc's lock writes
 * it): left held, and the child may unlock it; held by another thread
 * (which does not exist here): made free by clearing glibc's lock, owner,
 * user-count and recursion words (glibc's initial values; no waiter can
 * exist in the child, which runs one thread).  m may have been freed
 * without pthread_mutex_destroy (std::mutex never calls it) while its
 * wrapper stayed registered, so m is first read through process_vm_readv
 * on ourselves, which reports an unmapped or unreadable address instead
 * of faulting, and written only if its pointer word still names this
 * wrapper with the in-place tag (only a live mutex set up on this wrapper
 * holds that value).  If the read is not allowed, m is left as glibc
 * leaves it.  Single-threaded here: plain accesses. */
static void inplace_child(struct ip_mutex *w)
{
    pthread_mutex_t *m = IP_INPLACE_MUTEX(w), copy;
    struct iovec local = {&copy, sizeof copy}, remote = {m, sizeof copy};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof copy)
        return;
    if ((uintptr_t)copy.__data.__list.__prev != ip_word(w) || (copy.__data.__kind & IP_KIND_PASS))
        return; /* no longer this wrapper's mutex */
    if (copy.__data.__lock == 0 || copy.__data.__owner == fork_tid)
        return; /* free, or the forking thread's */
    m->__data.__lock = 0;
    m->__data.__owner = 0;
    m->__data.__nusers = 0;
    m->__data.__count = 0;
}
static void fork_parent(void)
{
    ip_in_setup--;
    R.mutex_unlock(&reg_mutex);
}

static void fork_child(void)
{
    ip_in_setup--; /* (fork_prepare) */
    R.mutex_init(&reg_mutex, NULL);
    uintptr_t me = self_tag();
    for (struct ip_mutex *w = reg_mutexes; w; w = w->next) {
        int mine = atomic_load_explicit(&w->owner, memory_order_relaxed) == me;
        if (SHIM_GLIBC(w)) {
            /* glibc mode (profiler): glibc's atfork handling of the mutex
             * itself; the bookkeeping follows it */
            if (!mine) {
                atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
                w->count = 0;
            }
            continue;
        }
        if (IP_INPLACE(w)) {
            inplace_child(w); /* (its unused algorithm state is left as it is) */
            continue;
        }
        liblock_t fresh;
        if (liblock_init(&fresh, LL_OPS(&w->lock)->name, &w->algo->attr) != 0)
            continue; /* out of memory: left as it was */
        w->lock = fresh; /* the old state (and node) is leaked on purpose */
        w->hold = NULL;
        mutex_set_fns(w); /* rcl: the fresh lock is bound on first use */
        if (mine && w_raw_lock(w) == 0) {
            if (w->type != PTHREAD_MUTEX_NORMAL)
                /* Still held, but as glibc's: its owner is the forking
                 * thread's id, which the child's thread does not have, so
                 * there trylock is EBUSY, unlock EPERM and lock waits for
                 * ever.  A tag no thread has (thread pointers are aligned). */
                atomic_store_explicit(&w->owner, IP_OWNER_PARENT, memory_order_relaxed);
            continue; /* still held (NORMAL: the child may unlock it, as on glibc) */
        }
        if (mine)
            w_track_released(w_track_releasing(w));
        atomic_store_explicit(&w->owner, 0, memory_order_relaxed);
        w->count = 0;
    }
    for (struct ip_cond *n = reg_conds; n; n = n->next) {
        liblock_cond_init(&n->lc, &cfg.cattr);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, n->clock);
        R.cond_init(&n->rc, &ca);
        pthread_condattr_destroy(&ca);
        R.mutex_init(&n->im, NULL);
        n->gen_waiters = n->gen_unblocked = 0;
    }
    cond_fork_child();
    sem_fork_child();
    shim_to_glibc_fork_child();
    lp_fork_child();
}

__attribute__((constructor)) static void ip_ctor(void)
{
    ip_resolve();
    config_ensure();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    lp_start();
}
