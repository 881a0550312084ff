/*
 * fork.c - fork handlers (shim.h "fork") and the constructor.
 */
#include "shim.h"

#define reg_mutexes shim_reg_mutexes
#define reg_conds shim_reg_conds

/* Between this prepare handler and our parent/child handler, the prepare,
 * parent and child handlers of other components run with reg_mutex held by
 * this thread; one that locks a mutex not set up yet would wait for
 * reg_mutex forever (liblock.so's own RCL handlers, when a program linked
 * with -llock runs under the interposer: a transformed memcached's
 * daemon()).  Such a mutex becomes glibc's for life, like an allocator's met
 * during set-up (ip_in_setup); mutexes already set up are unaffected. */
static void fork_prepare(void)
{
    R.mutex_lock(&reg_mutex);
    ip_in_setup++;
}

static void fork_parent(void)
{
    ip_in_setup--;
    R.mutex_unlock(&reg_mutex);
}

/* Every mutex as glibc leaves it in the child (shim.h "fork"): free, or
 * still held - by the forking thread (the child's thread, which may unlock
 * a NORMAL one) or by a thread the child does not have (for ever, unless
 * the child unlocks a NORMAL one).  Held means a non-zero owner word: a
 * thread the fork stopped inside lock or unlock, between its acquire and
 * its owner store (or between clearing it and its release), counts as not
 * holding (shim.h "fork"). */
static void fork_child(void)
{
    ip_in_setup--; /* (fork_prepare) */
    R.mutex_init(&reg_mutex, NULL);
    uintptr_t me = self_tag();
    for (struct ip_mutex *w = reg_mutexes; w; w = w->next) {
        uintptr_t owner = atomic_load_explicit(&w->owner, memory_order_relaxed);
        int mine = owner == me;
        int other = owner != 0 && !mine;
        if (SHIM_GLIBC(w)) {
            /* glibc mode (profiler): glibc's mutex keeps its own state; the
             * bookkeeping names no thread of the child for another's hold */
            if (other)
                atomic_store_explicit(&w->owner, IP_OWNER_PARENT, memory_order_relaxed);
            continue;
        }
        if (IP_INPLACE(w))
            continue; /* posix in place: glibc's words in m, as glibc left them */
        if (other) {
            /* the holder's hold is counted in a record the child does not have */
            w->trk = 0;
            atomic_store_explicit(&w->owner, IP_OWNER_PARENT, memory_order_relaxed);
        }
        liblock_t fresh;
        if (liblock_init(&fresh, LL_OPS(&w->lock)->name, &w->algo->attr) != 0)
            continue; /* out of memory: left as it was */
        w->lock = fresh; /* the old state (and node) is leaked on purpose */
        w->hold = NULL;
        mutex_set_fns(w); /* rcl: the fresh lock is bound on first use */
        if (owner == 0)
            continue; /* free */
        if (w_raw_lock(w) == 0) {
            if (mine && w->type != PTHREAD_MUTEX_NORMAL)
                /* Still held, but as glibc's: its owner is the forking
                 * thread's id, which the child's thread does not have, so
                 * there trylock is EBUSY, unlock EPERM and lock waits for
                 * ever.  A tag no thread has (thread pointers are aligned). */
                atomic_store_explicit(&w->owner, IP_OWNER_PARENT, memory_order_relaxed);
            /* held: a NORMAL one by the child's thread or, with
             * IP_OWNER_PARENT, by no thread of the child; the child may
             * unlock either (glibc's NORMAL unlock looks at no owner), and
             * the node in w->hold is the child thread's, so the release
             * works from it */
            continue;
        }
        /* (the fresh lock could not be taken: out of memory) */
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
    config_ensure();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    lp_start();
}
