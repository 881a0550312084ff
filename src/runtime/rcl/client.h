/*
 * client.h - what the client-side files of the RCL runtime share: client.c
 * (the request path of liblock_execute and of the lock/trylock/unlock
 * requests), direct.c (liblock_lock/trylock/unlock on an RCL lock) and
 * lock.c (the condition-variable hooks).  Posting a request in this
 * thread's slot (client.c, "Remote path"), and a servicing thread's local
 * holds of a lock of its own server (client.c, "Local path").  The helpers
 * are static inline, so that rcl_execute and rcl_lock_* inline them as
 * before; only rcl_submit, the post-and-wait itself, is one out-of-line
 * function shared by every request.
 */
#ifndef LIBLOCK_RCL_CLIENT_H
#define LIBLOCK_RCL_CLIENT_H

#include "rcl.h"

#include <sched.h>

/* Post a request in slot r and wait for the reply (client.c).  Out of line
 * (noinline): one copy serves every request, liblock_execute's and
 * direct.c's, and rcl_execute, its only caller in client.c, does not take
 * its body. */
__attribute__((noinline)) void rcl_submit(struct rcl_server *s, struct rcl_slot *r, struct rcl_lock *lk, rcl_fn fn,
                                          void *ctx, int policy);

/* Post a request in this thread's slot and wait for it; returns the slot
 * (for ret), or NULL with errno = EAGAIN when no client id is available. */
static inline struct rcl_slot *post(struct rcl_server *s, struct rcl_lock *lk, rcl_fn fn, void *ctx, int policy)
{
    int id = rcl_client_index();
    if (LL_UNLIKELY(id < 0))
        return NULL;
    struct rcl_slot *r = &s->slots[id];
    rcl_submit(s, r, lk, fn, ctx, policy);
    return r;
}

static inline int held_locally(struct rcl_tls *t, struct rcl_lock *lk)
{
    for (int i = 0; i < t->nheld; i++)
        if (t->held[i] == lk)
            return 1;
    return 0;
}

/* A servicing thread of `own` that has yielded this many times inside the
 * runtime asks for a free servicing thread if none is left (client.c,
 * "Local path").  n_free is written only on own's CPU, where the caller
 * runs (server.c, I1): a relaxed load reads its current value. */
#define RCL_ASK_FREE_AFTER 64u

static inline void ask_free_if_none(struct rcl_server *own)
{
    if (atomic_load_explicit(&own->n_free, memory_order_relaxed) == 0)
        rcl_ask_free(own);
}

static inline void local_acquire(struct rcl_server *s, struct rcl_lock *lk)
{
    unsigned n = 0;
    while (!rcl_take(s, lk, RCL_HELD_SERVER)) {
        if (++n == RCL_ASK_FREE_AFTER)
            ask_free_if_none(s);
        sched_yield(); /* the holder is another thread of this CPU (or a client): let it run */
    }
}

#endif
