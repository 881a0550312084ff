/*
 * lock.c - the operations of an mp-server lock: execute (a request to the
 * server, or, in direct mode, the section run here under the lock word),
 * lock, trylock, unlock and the condition-variable hooks.  The algorithm,
 * invariants and memory-ordering argument are in mpserver.h; direct mode's
 * lock word is direct.c.
 */
#include "mpserver.h"

__thread const liblock_t *ll_mps_serving LL_TLS_IE;

/* Direct mode: run cs on the calling thread under the lock word. */
static void *run_own(liblock_t *l, struct mps_lock *s, void *(*cs)(void *), void *arg)
{
    struct ll_cs_scope sc = ll_cs_enter(&ll_mps_serving, l);
    void *ret = cs(arg);
    ll_cs_leave(&ll_mps_serving, sc);
    ll_mps_word_unlock(s);
    return ret;
}

/* Direct mode (mpserver.h, "Direct mode"): the server is asleep or cannot be
 * running (it last ran on our CPU): take the word and run cs here if it is
 * free; on our CPU, wait for the word (the server is not running anyway).
 * Otherwise post the request; withdrawn after the window: take the word. */
static void *exec_direct(liblock_t *l, struct mps_lock *s, void *(*cs)(void *), void *arg)
{
    int e = ll_mps_ensure_server(l, s);
    if (LL_UNLIKELY(e)) {
        errno = e;
        return NULL;
    }
    uint32_t parked = atomic_load_explicit(&s->server_parked, memory_order_relaxed);
    if (parked || ll_current_cpu() == atomic_load_explicit(&s->server_cpu, memory_order_relaxed)) {
        if (ll_mps_word_trylock(s, MPS_W_EXEC))
            return run_own(l, s, cs, arg);
        if (!parked) {
            ll_mps_word_lock(s, ll_policy(l), MPS_W_EXEC);
            return run_own(l, s, cs, arg);
        }
        /* asleep and the word is taken: contention, delegation pays again */
    }
    uint64_t v = 0;
    e = ll_mps_request(l, MPS_EXEC, cs, arg, &v);
    if (e == MPS_WITHDRAWN) {
        ll_mps_word_lock(s, ll_policy(l), MPS_W_EXEC);
        return run_own(l, s, cs, arg);
    }
    if (LL_UNLIKELY(e)) {
        errno = e;
        return NULL;
    }
    return (void *)(uintptr_t)v;
}

void *ll_mps_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    if (LL_UNLIKELY(ll_cs_held_by_caller(ll_mps_serving, l))) {
        errno = EDEADLK;
        return NULL;
    }
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (s->direct)
        return exec_direct(l, s, cs, arg);
    uint64_t v = 0;
    int e = ll_mps_request(l, MPS_EXEC, cs, arg, &v);
    if (LL_UNLIKELY(e)) {
        errno = e;
        return NULL;
    }
    return (void *)(uintptr_t)v;
}

int ll_mps_lock_lock(liblock_t *l, void *node)
{
    (void)node;
    if (ll_mps_serving == l)
        return EDEADLK;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (s->direct) {
        int e = ll_mps_ensure_direct(l, s);
        if (LL_UNLIKELY(e))
            return e;
        ll_mps_word_lock(s, ll_policy(l), 0);
        return 0;
    }
    uint64_t v = 0;
    return ll_mps_request(l, MPS_LOCK, NULL, NULL, &v);
}

/* Is the lock held by a thread that has not asked to release it?  (Held,
 * and the holder's slot has no UNLOCK in flight.)  An asynchronous UNLOCK
 * still in flight has already returned to its caller, so for trylock the
 * lock is free: a trylock that happens after an unlock (in any thread)
 * must not fail because the server has not served that unlock yet.
 * The answer "held" must be true at one instant, but locked, locked_by and
 * the slot are read at different times: a reader delayed between them
 * could see locked == 1 and locked_by == h from before the server served
 * h's UNLOCK, and the slot's reply from after it (the server stores locked
 * = 0, locked_by = -1, then the reply), and call a free lock held -- a
 * trylock then failed after the unlocking thread had been joined (seen
 * once under load: test_interpose_cond, "cancel in wait").  So "held" is
 * confirmed by reading locked and locked_by again after the slot: if both
 * are unchanged, then either no release was served in between (the lock
 * was held by h, with no UNLOCK in flight, when the slot was read) or h was
 * granted the lock again in between (held by h, before its next UNLOCK
 * was posted, at some instant of the window); either way it was held for
 * real during the call.  Anything else answers "not held" and the caller
 * looks again. */
static int held_for_real(struct mps_lock *s)
{
    if (!atomic_load_explicit(&s->locked, memory_order_acquire))
        return 0;
    int h = atomic_load_explicit(&s->locked_by, memory_order_acquire);
    if (h < 0)
        return 0; /* a release under way (server.c stores locked before locked_by): look again */
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    if (!dir)
        return 1;
    struct mps_chunk *c = atomic_load_explicit(&dir[(unsigned)h / MPS_CHUNK], memory_order_acquire);
    if (!c)
        return 1;
    struct mps_slot *p = mps_slot(s, c, (unsigned)h % MPS_CHUNK);
    uint64_t r = atomic_load_explicit(&p->req, memory_order_acquire);
    if (MPS_OP(r) == MPS_UNLOCK && (atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) == MPS_PENDING)
        return 0;
    /* confirm (see above); acquire loads keep these after the slot's */
    return atomic_load_explicit(&s->locked, memory_order_acquire) &&
           atomic_load_explicit(&s->locked_by, memory_order_acquire) == h;
}

int ll_mps_lock_trylock(liblock_t *l, void *node)
{
    (void)node;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (ll_mps_serving == l)
        return EBUSY;
    if (s->direct) {
        int e = ll_mps_ensure_direct(l, s);
        return e ? e : ll_mps_word_trylock(s, 0) ? 0 : EBUSY;
    }
    int e = ll_mps_ensure_server(l, s); /* (in a forked child: first applies the parent's pending UNLOCKs) */
    if (LL_UNLIKELY(e))
        return e;
    ll_mps_settle_own(l, s); /* our own UNLOCK first */
    /* Fail only on a real holder (or a running delegated section, see
     * try_wait); a release in flight is waited for and we try again.
     * Each retry follows a release by somebody, so a bounded number of
     * them is enough; after that the lock was taken by others during the
     * call, and EBUSY is a correct answer. */
    for (int tries = 0; tries < 64; tries++) {
        for (unsigned spins = 0; atomic_load_explicit(&s->locked, memory_order_acquire); spins++) {
            if (held_for_real(s))
                return EBUSY;
            if (spins < 64) /* the server serves the UNLOCK within a scan */
                ll_pause();
            else
                ll_yield();
        }
        uint64_t v = 0;
        e = ll_mps_request(l, MPS_TRY, NULL, NULL, &v);
        if (e || v)
            return e;
        if (atomic_load_explicit(&s->in_cs, memory_order_relaxed) || held_for_real(s))
            return EBUSY;
    }
    return EBUSY;
}

int ll_mps_lock_unlock(liblock_t *l, void *node)
{
    (void)node;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (s->direct) {
        ll_mps_word_unlock(s);
        return 0;
    }
    /* An unlock of a lock another thread's slot holds (a NORMAL mutex
     * unlocked by another thread, which glibc allows: the interposer passes
     * it on) waits until the server has served it: held_for_real looks for
     * an UNLOCK in flight only in the holder's slot, so a trylock after this
     * unlock, in any thread, would otherwise fail.  locked_by names this
     * thread's slot when it holds the lock (the server wrote it before the
     * reply this thread acquired); any other value makes the wait happen,
     * which is always correct. */
    ll_thread_t *self = ll_self();
    int foreign = !self || atomic_load_explicit(&s->locked_by, memory_order_relaxed) != (int)self->id;
    uint64_t v;
    int e = ll_mps_request(l, MPS_UNLOCK, NULL, NULL, &v);
    if (!e && foreign)
        ll_mps_settle_own(l, s);
    return e;
}

/* EPERM inside a delegated section: a wait would stop the server */
int ll_mps_cond_release(liblock_t *l) { return ll_cs_cond_release(ll_mps_serving, l); }

int ll_mps_cond_reacquire(liblock_t *l) { return ll_api_lock(l); }
