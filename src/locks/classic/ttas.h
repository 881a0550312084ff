/*
 * ttas.h - ttas's state and its uncontended acquire and release, so that a
 * lock built on ttas (auto) takes it without a call through its ops
 * table.  The protocol, its invariant and its orderings are ttas.c's
 * header: these are the same instructions, not a second protocol.
 */
#ifndef LIBLOCK_TTAS_H
#define LIBLOCK_TTAS_H
#include "tas_park.h"

struct ttas_lock {
    _Atomic uint32_t word;
    _Atomic uint32_t waiters; /* contended path only; for destroy */
    uint32_t max_backoff;     /* read-only after init */
    _Atomic int32_t holder;   /* preempt-aware: tid of the last thread to acquire (ttas.c) */
};

static inline void ttas_note_holder(struct ttas_lock *s) { ll_note_self_tid(&s->holder); }

static inline bool ttas_attempt(struct ttas_lock *s, int parks)
{
    return parks ? tas_try_cas(&s->word)
                 : !atomic_exchange_explicit(&s->word, TAS_HELD, memory_order_acquire);
}

/* One attempt, read first, on s under the waiting policy of pol (the
 * liblock_t of s, or of a lock that embeds s with the same policy): 0
 * (acquired) or EBUSY. */
static inline int ttas_try_on(struct ttas_lock *s, const liblock_t *pol)
{
    if (atomic_load_explicit(&s->word, memory_order_relaxed) != TAS_FREE ||
        !ttas_attempt(s, ll_policy(pol) == LIBLOCK_WAIT_SPIN_THEN_PARK))
        return EBUSY;
    if (ll_aware(pol))
        ttas_note_holder(s);
    return 0;
}

static inline int ttas_try(liblock_t *l) { return ttas_try_on(LL_STATE(l, struct ttas_lock), l); }

/* The contended acquisition of s, after a failed first attempt, under
 * policy (that of l, the liblock_t of s or of a lock that embeds s with the
 * same policy): returns 0 holding s.  ttas.c. */
LL_SLOW int ttas_lock_slow(const liblock_t *l, struct ttas_lock *s, int policy);

static inline void ttas_release_on(struct ttas_lock *s, const liblock_t *pol)
{
    tas_release(&s->word, ll_policy(pol));
}

static inline void ttas_release(liblock_t *l) { ttas_release_on(LL_STATE(l, struct ttas_lock), l); }

#endif
