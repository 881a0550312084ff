/*
 * lock.c - the life cycle of a Remote Core Locking lock (the RCL of
 * J.-P. Lozi, "Towards More Scalable Mutual Exclusion for Multicore
 * Architectures", PhD thesis, UPMC (Paris 6), 2014, section 4.1): its
 * binding to a server ("lock life cycle" below), init and destroy,
 * liblock_thread_register, and the condition-variable hooks.  The request
 * path is in client.c, lock/trylock/unlock in direct.c.
 *
 * Condition variables (src/core/cond.c calls cond_release/cond_reacquire
 * around the POSIX wait):
 *   - the caller holds the lock through liblock_lock (API hold stack):
 *     release = the API unlock, reacquire = the API lock (remote requests,
 *     or the local path on a servicing thread);
 *   - the caller is a servicing thread running a CS of this lock (delegated
 *     or nested): release = is_locked = 0 (local), so other CSs of the lock
 *     can run on other servicing threads while this one sleeps; reacquire =
 *     local CAS + yield.  The thread stays "busy" (not free) meanwhile, so
 *     the backup/manager provide another servicing thread.
 *   - anything else: EPERM.
 */
#include "client.h"

int rcl_direct_default; /* set to 1 by the interposer's configuration (src/shim/config.c) */

/* The server of a lock that is bound (held or used), without binding. */
static inline struct rcl_server *bound_server(liblock_t *l)
{
    return __atomic_load_n((struct rcl_server **)&l->_aux, __ATOMIC_ACQUIRE);
}

int rcl_cond_release(liblock_t *l)
{
    struct rcl_tls *t = &rcl_tls;
    ll_thread_t *self = ll_self_tls;
    if (self && ll_hold_find(self, l)) {
        int r = ll_api_unlock(l);
        if (r == 0)
            t->cond_mode = 1;
        return r;
    }
    struct rcl_lock *lk = l->_state;
    if (t->my_server && t->my_server == bound_server(l) && held_locally(t, lk)) {
        t->cond_mode = 2;
        atomic_store_explicit(&lk->is_locked, 0, memory_order_release);
        return 0;
    }
    struct rcl_server *s = bound_server(l);
    if (s && !t->my_server && rcl_nested_on(t, s)) {
        /* a section running with this thread's identity (rcl.h): as its
         * servicing thread, which keeps the mode for the reacquire */
        struct rcl_tls saved;
        if (!rcl_nested_enter(&saved))
            return EPERM;
        int r = rcl_cond_release(l);
        rcl_nested_leave(&saved);
        return r;
    }
    return EPERM;
}

int rcl_cond_reacquire(liblock_t *l)
{
    struct rcl_tls *t = &rcl_tls;
    int mode = t->cond_mode;
    t->cond_mode = 0;
    if (mode == 1)
        return ll_api_lock(l);
    if (mode == 2) {
        local_acquire(bound_server(l), l->_state);
        return 0;
    }
    struct rcl_server *s = bound_server(l);
    if (s && !t->my_server && rcl_nested_on(t, s)) {
        struct rcl_tls saved; /* the release's mode is the servicing thread's (rcl_cond_release) */
        if (!rcl_nested_enter(&saved))
            return EPERM;
        int r = rcl_cond_reacquire(l);
        rcl_nested_leave(&saved);
        return r;
    }
    return EPERM;
}

int rcl_thread_register(liblock_t *l)
{
    struct rcl_server *s = rcl_server_of_lock(l);
    if (!s)
        return errno;
    if (rcl_tls.my_server == s)
        return 0;
    return rcl_client_id() < 0 ? errno : 0;
}

/* ---- lock life cycle ------------------------------------------------------------
 * A lock given a server (liblock_attr_setserver) is bound to it at init.
 * Otherwise it is bound on first use (any request, liblock_thread_register
 * or liblock_server_of) to a default server, which is started then if
 * needed: initialising locks starts nothing, so a process that never
 * locks (a shell under the interposer) never has a server.  Racing first
 * users each bind (count the lock on) a server, one CAS on l->_aux wins,
 * the others unbind theirs.  _aux changes only NULL -> server; every
 * reader loads it with acquire, so the server record is seen initialised. */
struct rcl_server *rcl_lock_bind(liblock_t *l)
{
    struct rcl_server *s = NULL;
    for (int tries = 0; tries < 4 && !s; tries++) {
        s = rcl_default_server();
        if (!s) {
            if (!errno)
                errno = EAGAIN;
            return NULL;
        }
        if (rcl_server_bind(s) != 0)
            s = NULL; /* stopped meanwhile: get it again */
    }
    if (!s) {
        errno = EAGAIN;
        return NULL;
    }
    struct rcl_server *cur = NULL;
    if (!__atomic_compare_exchange_n((struct rcl_server **)&l->_aux, &cur, s, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        rcl_server_unbind(s); /* another thread bound it first */
        return cur;
    }
    return s;
}

int rcl_lock_init(liblock_t *l, const liblock_attr_t *attr)
{
    struct rcl_server *s = attr ? attr->_server : NULL;
    if (s) {
        int r = rcl_server_bind(s);
        if (r)
            return r;
    }
    struct rcl_lock *lk = l->_state;
    atomic_store_explicit(&lk->is_locked, 0, memory_order_relaxed);
    atomic_store_explicit(&lk->handed, 0, memory_order_relaxed);
    atomic_store_explicit(&lk->want, 0, memory_order_relaxed);
    int e = errno; /* a lazy init inside pthread_mutex_lock must not change errno */
    lk->direct = (uint32_t)ll_env_long("LIBLOCK_RCL_DIRECT", rcl_direct_default, 0, 1);
    errno = e;
    l->_aux = s; /* NULL: bound on first use */
    return 0;
}

int rcl_lock_destroy(liblock_t *l)
{
    struct rcl_lock *lk = l->_state;
    if (atomic_load_explicit(&lk->is_locked, memory_order_acquire))
        return EBUSY;
    struct rcl_server *s = bound_server(l);
    if (s)
        rcl_server_unbind(s);
    return 0;
}
