/*
 * request.c - an mp-server client's request: find the calling thread's
 * slot, post one request word and wait for its reply, or wait for its own
 * asynchronous UNLOCK to be served.  The algorithm, invariants (I1, I4) and
 * memory-ordering argument are in mpserver.h; how a client waits is
 * client.c.
 */
#include "mpserver.h"
#include "platform/identity.h"

#include <stdlib.h>

/* The calling thread's slot (its chunk allocated on first use). */
struct mps_chunk *ll_mps_my_chunk(struct mps_lock *s, ll_thread_t *self, unsigned *k)
{
    unsigned id = self->id;
    if (LL_UNLIKELY(id >= MPS_CHUNK * MPS_MAX_CHUNKS))
        return NULL;
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    _Atomic(struct mps_chunk *) *e = &dir[id / MPS_CHUNK];
    struct mps_chunk *c = atomic_load_explicit(e, memory_order_acquire);
    if (LL_UNLIKELY(!c)) {
        struct mps_chunk *n = ll_alloc_aligned(sizeof *n);
        if (!n)
            return NULL;
        if (atomic_compare_exchange_strong_explicit(e, &c, n, memory_order_acq_rel, memory_order_acquire))
            c = n;
        else
            free(n);
    }
    unsigned hw = atomic_load_explicit(&s->hw, memory_order_relaxed);
    while (hw <= id && !atomic_compare_exchange_weak_explicit(&s->hw, &hw, id + 1, memory_order_release,
                                                              memory_order_relaxed))
        ;
    *k = id % MPS_CHUNK;
    return c;
}

static inline uint64_t reply_value(struct mps_slot *p, uint64_t w)
{
    if ((w & 3u) == MPS_OUTLINE)
        return atomic_load_explicit(&p->ret, memory_order_relaxed); /* ordered by the word (see reply()) */
    return w >> 2;
}

/* Post one request and (unless it is an UNLOCK) wait for its reply.
 * Returns 0 and the reply value, or an errno, or (direct mode, EXEC)
 * MPS_WITHDRAWN: the caller runs the section itself. */
int ll_mps_request(liblock_t *l, unsigned op, void *(*cs)(void *), void *arg, uint64_t *out)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    ll_thread_t *self = ll_self();
    if (LL_UNLIKELY(!self))
        return ENOMEM;
    int e = ll_mps_ensure_server(l, s);
    if (LL_UNLIKELY(e))
        return e;
    unsigned k;
    struct mps_chunk *c = ll_mps_my_chunk(s, self, &k);
    if (LL_UNLIKELY(!c))
        return self->id >= MPS_CHUNK * MPS_MAX_CHUNKS ? EAGAIN : ENOMEM;
    struct mps_slot *p = mps_slot(s, c, k);
    struct mps_cpriv *cp = &c->cpriv[k];
    /* I1: a previous asynchronous UNLOCK must have been served */
    if (LL_UNLIKELY((atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) == MPS_PENDING))
        ll_mps_wait_reply(l, s, p, cp, ll_cycles(), 0);
    p->cs = cs;
    p->arg = arg;
    uintptr_t tp = ll_ident_self();
    if (p->tp != tp) /* one thread's slot: the same value every time */
        p->tp = tp;
    uint64_t seq = ++cp->seq;
    atomic_store_explicit(&p->resp, MPS_PENDING_WORD(seq), memory_order_relaxed);
    uint64_t r = (seq << 2) | op;
    uint64_t t0 = ll_cycles();
    atomic_store_explicit(&p->req, r, memory_order_release);
    if (op == MPS_UNLOCK) {
        /* Nobody waits on this request, so the Dekker half of I4 is done
         * now: a server that went to sleep because the lock was held must
         * see the UNLOCK or be woken. */
        ll_mps_server_check_fenced(s);
        return 0;
    }
    if (atomic_load_explicit(&s->server_parked, memory_order_relaxed))
        ll_mps_wake_server(s);
    if (op == MPS_TRY)
        return ll_mps_try_wait(l, s, p, cp, t0, seq, out);
    uint64_t w;
    if (s->direct) {
        if (ll_mps_exec_wait(l, s, p, cp, t0, seq, &w))
            return MPS_WITHDRAWN;
    } else {
        w = ll_mps_wait_reply(l, s, p, cp, t0, op != MPS_LOCK);
    }
    *out = reply_value(p, w);
    return 0;
}

/* Wait until the calling thread's previous request on l (an asynchronous
 * UNLOCK) has been served. */
void ll_mps_settle_own(liblock_t *l, struct mps_lock *s)
{
    ll_thread_t *self = ll_self_tls;
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    if (!self || !dir || self->id >= MPS_CHUNK * MPS_MAX_CHUNKS)
        return;
    struct mps_chunk *c = atomic_load_explicit(&dir[self->id / MPS_CHUNK], memory_order_acquire);
    if (!c)
        return;
    unsigned k = self->id % MPS_CHUNK;
    struct mps_slot *p = mps_slot(s, c, k);
    if ((atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) == MPS_PENDING &&
        ll_mps_ensure_server(l, s) == 0)
        ll_mps_wait_reply(l, s, p, &c->cpriv[k], ll_cycles(), 0);
}
