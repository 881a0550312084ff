/*
 * direct.c - mp-server's direct mode: the lock word that lets a thread run
 * its own critical section when the server thread is not running (more
 * threads than CPUs).  Not in the thesis mp-server comes from (Petrovic,
 * EPFL 2015, chapter 7); ours.  The algorithm, why it is
 * needed and when it applies are in the header of src/locks/delegation/mp-server.c
 * ("Direct mode"); this file has the lock word and the withdrawable wait.
 *
 * The lock word is mps_lock.locked, with bits (mpserver.h)
 *   MPS_W_HELD      held (by a client, or by the server for one pass);
 *   MPS_W_SERVER    the holder is the server thread (fork: mp-server.c);
 *   MPS_W_EXEC      the holder is a client running its own execute()
 *                   section (fork: mp-server.c);
 *   MPS_W_SLEEPERS  clients may sleep on the word: the releaser wakes one.
 * Every write of it is a real atomic read-modify-write (it is written from
 * every CPU): acquire by CAS 0 -> HELD (client; |EXEC for its own
 * section), 0 -> HELD|SERVER (server), 0 -> HELD|SLEEPERS (a client in its
 * futex phase, which may have taken a wake-up meant for others); a waiter marks SLEEPERS by CAS v -> v|SLEEPERS
 * on a held word; release by exchange(0).  It is Drepper's futex mutex
 * ("Futexes are tricky", mutex 2) with a CAS for the marking so that the
 * SERVER bit survives it.
 *
 * No lost wake-up: a client sleeps only in futex_wait(word, v) with
 * SLEEPERS in v, which the kernel lets sleep only while word == v; SLEEPERS
 * is removed only by a releaser's exchange, which then sees it and wakes
 * one sleeper; a woken sleeper acquires with SLEEPERS set, so the sleepers
 * that remain are woken at its own release.
 * A server that sleeps while an EXEC request waits for the word announces
 * it with server_parked = 2 (seq_cst) and then reads the word; every client
 * release exchanges the word (seq_cst) and then reads server_parked and
 * wakes a server that announced 2: Dekker, one side sees the other.
 * Orderings: every acquisition is an acquire CAS and every release an
 * exchange with release (or stronger) order, so a critical section's
 * effects are visible to the next holder, whichever thread (client or
 * server) that is.  The server's streaming replies are drained (SFENCE)
 * before it releases the word, so a direct holder sees every write of the
 * sections the server ran (mp-server.c, "streaming mode").
 *
 * Withdrawal: an EXEC request posted in direct mode carries the client's
 * PENDING word; the server claims it by CAS PENDING -> PENDING|CLAIM before
 * running it, the client withdraws it by CAS PENDING -> 0 (server.c,
 * ll_mps_exec_wait below).  One CAS wins: a withdrawn request is never run,
 * a claimed one is always replied to.
 */
#include "mpserver.h"
#include "platform/nt_store.h"

int ll_mps_direct_default(int policy, int pinned)
{
    /* the explicit spin policy is the thesis's dedicated-core configuration:
     * it keeps the pure request path (no lock word, no CAS on the server);
     * so does a server pinned to a CPU (LIBLOCK_MPSERVER_CPU: the user
     * gave it a core), unless LIBLOCK_MPSERVER_DIRECT=1 */
    if (policy == LIBLOCK_WAIT_SPIN)
        return 0;
    return (int)ll_env_long("LIBLOCK_MPSERVER_DIRECT", !pinned, 0, 1);
}

static inline int cas_w(struct mps_lock *s, uint32_t *expect, uint32_t v)
{
    return atomic_compare_exchange_strong_explicit(&s->locked, expect, v, memory_order_acquire,
                                                   memory_order_relaxed);
}

int ll_mps_word_trylock(struct mps_lock *s, uint32_t bits)
{
    uint32_t e = 0;
    return cas_w(s, &e, MPS_W_HELD | bits);
}

/* Acquire the word as a client: spin (spin-then-park: s->word_spin, by
 * default an eighth of the spin budget, see mp-server.c; yield:
 * sched_yield between looks, never sleeps), then sleep on it. */
void ll_mps_word_lock(struct mps_lock *s, int policy, uint32_t bits)
{
    if (LL_LIKELY(ll_mps_word_trylock(s, bits)))
        return;
    if (policy == LIBLOCK_WAIT_YIELD || policy == LIBLOCK_WAIT_SPIN) {
        for (;;) {
            ll_yield();
            if (atomic_load_explicit(&s->locked, memory_order_relaxed) == 0 && ll_mps_word_trylock(s, bits))
                return;
        }
    }
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK) {
        uint64_t t0 = ll_cycles(), budget = s->word_spin ? s->word_spin : ll_spin_budget_cycles() / 8;
        for (unsigned n = 1;; n++) {
            if (atomic_load_explicit(&s->locked, memory_order_relaxed) == 0 && ll_mps_word_trylock(s, bits))
                return;
            ll_pause();
            if ((n & 63) == 0 && ll_cycles() - t0 > budget)
                break;
        }
    }
    for (;;) {
        uint32_t v = atomic_load_explicit(&s->locked, memory_order_relaxed);
        if (v == 0) {
            if (cas_w(s, &v, MPS_W_HELD | MPS_W_SLEEPERS | bits))
                return;
            continue;
        }
        if (!(v & MPS_W_SLEEPERS)) {
            if (!cas_w(s, &v, v | MPS_W_SLEEPERS))
                continue;
            v |= MPS_W_SLEEPERS;
        }
        ll_futex_wait(&s->locked, v, NULL);
    }
}

void ll_mps_word_unlock(struct mps_lock *s)
{
    uint32_t old = atomic_exchange_explicit(&s->locked, 0, memory_order_seq_cst);
    if (old & MPS_W_SLEEPERS)
        ll_futex_wake(&s->locked, 1);
    /* Dekker with server_sleep (server.c): the exchange is a full fence */
    if (atomic_load_explicit(&s->server_parked, memory_order_relaxed) == 2)
        ll_mps_wake_server(s);
}

int ll_mps_server_take_word(struct mps_lock *s)
{
    uint32_t e = 0;
    return cas_w(s, &e, MPS_W_HELD | MPS_W_SERVER);
}

void ll_mps_server_drop_word(struct mps_lock *s)
{
    if (s->stream)
        ll_sfence(); /* the next holder may be a client reading what our sections wrote */
    uint32_t old = atomic_exchange_explicit(&s->locked, 0, memory_order_release);
    if (old & MPS_W_SLEEPERS)
        ll_futex_wake(&s->locked, 1);
}

/* Wait for the reply to the EXEC request posted at t0 with sequence seq.
 * If it is not in after s->window cycles (the server is not running: a
 * running server answers within a pass), withdraw the request and return
 * 1: the caller then takes the word and runs its section itself.  If the
 * server has claimed it, wait for its reply as usual (ll_mps_wait_reply:
 * the policy's polling and sleeping) and return 0 with the reply word. */
int ll_mps_exec_wait(liblock_t *l, struct mps_lock *s, struct mps_slot *p, struct mps_cpriv *cp, uint64_t t0,
                     uint64_t seq, uint64_t *out)
{
    uint64_t win = s->window ? s->window : ll_spin_budget_cycles() / 8, last_check = t0;
    for (unsigned n = 1;; n++) {
        uint64_t w = atomic_load_explicit(&p->resp, memory_order_acquire);
        if ((w & 3u) != MPS_PENDING) {
            *out = w;
            return 0;
        }
        if ((n & 15) == 0) {
            uint64_t now = ll_cycles();
            if (now - t0 > win)
                break;
            /* the Dekker half of I4 (mp-server.c) for a long window: a
             * server that announced its sleep as we posted is woken */
            if (now - last_check > MPS_RECHECK) {
                ll_mps_server_check_fenced(s);
                last_check = now;
            }
        }
        ll_pause();
    }
    uint64_t pend = MPS_PENDING_WORD(seq);
    if (atomic_compare_exchange_strong_explicit(&p->resp, &pend, 0, memory_order_acquire, memory_order_acquire))
        return 1;
    *out = ll_mps_wait_reply(l, s, p, cp, t0, 0);
    return 0;
}
