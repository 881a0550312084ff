/*
 * client.c - how an mp-server client waits for its reply: polling with the
 * fixed back-off of D. Petrovic, "Efficient Communication and
 * Synchronization on Manycore Processors", PhD thesis no. 6552, EPFL, 2015,
 * section 7.1.3 ("Backoff with local spinning"), or our adaptive one;
 * sleeping (spin-then-park, park), and trylock's withdrawable wait.  The
 * algorithm, invariants
 * (I4: sleeping clients and server) and memory-ordering argument are in
 * mpserver.h.
 */
#include "mpserver.h"

/* ---- waiting ----------------------------------------------------------- */

static inline void delay(uint64_t cycles)
{
    uint64_t t0 = ll_cycles();
    while (ll_cycles() - t0 < cycles)
        ll_pause();
}

void ll_mps_server_check_fenced(struct mps_lock *s)
{
    atomic_thread_fence(memory_order_seq_cst);
    ll_mps_wake_server(s);
}

/* Sleep until the reply is in (I4); returns the reply word (park_once: or
 * PENDING after a spurious wake-up). */
static uint64_t park_once(struct mps_lock *s, struct mps_slot *p)
{
    ll_mps_server_check_fenced(s);
    atomic_exchange_explicit(&p->parked, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&s->sleepers, 1, memory_order_seq_cst);
    uint64_t w;
    while (((w = atomic_load_explicit(&p->resp, memory_order_acquire)) & 3u) == MPS_PENDING &&
           atomic_load_explicit(&p->parked, memory_order_acquire))
        ll_futex_wait(&p->parked, 1, NULL);
    atomic_exchange_explicit(&p->parked, 0, memory_order_relaxed);
    atomic_fetch_sub_explicit(&s->sleepers, 1, memory_order_relaxed);
    return atomic_load_explicit(&p->resp, memory_order_acquire);
}

static uint64_t park_for(struct mps_lock *s, struct mps_slot *p)
{
    uint64_t w;
    while (((w = park_once(s, p)) & 3u) == MPS_PENDING)
        ;
    return w;
}

/* Wait for the reply to the request posted at t0 and return the reply
 * word.  `learn`: update the adaptive estimate. */
uint64_t ll_mps_wait_reply(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp,
                           uint64_t t0, int learn)
{
    int policy = ll_policy(l);
    if (policy == LIBLOCK_WAIT_PARK)
        return park_for(s, p);
    uint64_t budget = policy == LIBLOCK_WAIT_SPIN_THEN_PARK ? ll_spin_budget_cycles() : 0;
    uint64_t gap = 0, first = 0, w;
    if (s->backoff_mode == MPS_BO_FIXED) {
        first = gap = s->backoff;
    } else if (s->backoff_mode == MPS_BO_ADAPTIVE && learn) {
        first = cp->est - cp->est / 8;
        gap = cp->est / 8 < 64 ? 64 : cp->est / 8;
    }
    if (first)
        delay(first);
    uint64_t last_check = t0, slow_start = 0;
    int counted = 0, polls = 0;
    for (;;) {
        w = atomic_load_explicit(&p->resp, memory_order_acquire);
        if ((w & 3u) != MPS_PENDING)
            break;
        polls++;
        uint64_t now = ll_cycles();
        if (budget && (int64_t)(now - t0) > (int64_t)(budget + first)) {
            learn = 0; /* a wait that slept says nothing about the server's response time */
            w = park_for(s, p);
            break;
        }
        if (now - last_check > MPS_RECHECK) {
            ll_mps_server_check_fenced(s);
            last_check = now;
        }
        if (policy == LIBLOCK_WAIT_YIELD || (policy == LIBLOCK_WAIT_SPIN && polls > 1024)) {
            ll_yield(); /* the reply may need this CPU (server or holder) */
            if (policy == LIBLOCK_WAIT_SPIN && (polls & LL_SPIN_CHECK_MASK) == 0)
                ll_spin_note_slow(&slow_start, &counted);
        } else if (gap) {
            delay(gap);
        } else {
            ll_pause();
        }
    }
    if (polls > 1024)
        learn = 0; /* the wait went through sched_yield: it measured the scheduler, not the server */
    if (learn && s->backoff_mode == MPS_BO_ADAPTIVE) {
        uint64_t took = ll_cycles() - t0;
        if (polls == 0)
            cp->est -= cp->est / 16;
        else if (took > cp->est) { /* bounded step: one slow reply (a preempted server) must not
                                      set the delay of the following requests */
            uint64_t up = (took - cp->est) / 4, lim = cp->est / 8 + 128;
            cp->est += up < lim ? up : lim;
        }
        else
            cp->est -= (cp->est - took) / 4;
        uint64_t cap = budget && budget / 2 < MPS_ADAPTIVE_MAX ? budget / 2 : MPS_ADAPTIVE_MAX;
        if (cp->est > cap)
            cp->est = cap;
    }
    return w;
}

/* trylock must not block: if the server is inside a delegated section
 * (which may block, e.g. on a lock our caller holds) before it answers, we
 * withdraw the request by CAS of our PENDING word to "busy" and fail with
 * EBUSY -- the lock was in use (by that section) at that moment.  The
 * server answers a TRY by CAS from the same word, so exactly one of the two
 * wins. */
int ll_mps_try_wait(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp, uint64_t t0,
                    uint64_t seq, uint64_t *out)
{
    (void)l;
    (void)cp;
    uint64_t pend = MPS_PENDING_WORD(seq), last_check = t0;
    for (;;) {
        uint64_t w = atomic_load_explicit(&p->resp, memory_order_acquire);
        if ((w & 3u) != MPS_PENDING) {
            *out = w >> 2;
            return 0;
        }
        if (atomic_load_explicit(&s->in_cs, memory_order_relaxed) ||
            atomic_load_explicit(&s->locked, memory_order_relaxed)) {
            uint64_t e = pend;
            if (atomic_compare_exchange_strong_explicit(&p->resp, &e, 0, memory_order_acquire,
                                                        memory_order_acquire)) {
                *out = 0;
                return 0;
            }
            continue; /* the server answered first */
        }
        uint64_t now = ll_cycles();
        if (now - last_check > MPS_RECHECK) {
            ll_mps_server_check_fenced(s);
            last_check = now;
            ll_yield(); /* the server may need this CPU */
        } else {
            ll_pause();
        }
    }
}

