/*
 * server.c - the mp-server's server thread: scan the client slots, run
 * requests, reply, sleep when idle.  One thread per mp-server lock, started
 * on the lock's first request (lifecycle.c; mpserver.h has the algorithm,
 * the invariants and the memory-ordering argument).
 */
#include "mpserver.h"
#include "platform/nt_store.h"
#include "platform/identity.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The lock whose critical sections this thread runs (the server thread's
 * own TLS; ll_cs_enter sets it around each delegated section). */
extern __thread const liblock_t *ll_mps_serving LL_TLS_IE;

void ll_mps_wake_server(struct mps_lock *s)
{
    if (atomic_load_explicit(&s->server_parked, memory_order_relaxed) &&
        atomic_exchange_explicit(&s->server_parked, 0, memory_order_seq_cst))
        ll_futex_wake(&s->server_parked, 1);
}

/* Reply v to slot p.  Normal mode: value (or out-of-line value) then the
 * word with release.  Streaming mode: MOVNTI of the packed word; an
 * out-of-line value needs an SFENCE between its two streaming stores (two
 * lines' worth of write-combining buffers are not ordered with each other).
 * `grant`: a LOCK/TRY grant; its holder will read data our earlier critical
 * sections wrote with ordinary stores, which a streaming store may overtake,
 * so an SFENCE comes first. */
LL_IDENT_SCOPE_WRAPPER(mps_as_caller, ll_mps_serving)

static inline void reply(struct mps_lock *s, struct mps_slot *p, uint64_t v, int grant)
{
    if (s->stream) {
        if (grant)
            ll_sfence();
        if (LL_LIKELY(v < MPS_INLINE_MAX)) {
            ll_store_nt64(&p->resp, v << 2);
        } else {
            ll_store_nt64(&p->ret, v);
            ll_sfence();
            ll_store_nt64(&p->resp, MPS_OUTLINE);
        }
        return;
    }
    if (LL_LIKELY(v < MPS_INLINE_MAX)) {
        atomic_store_explicit(&p->resp, v << 2, memory_order_release);
    } else {
        atomic_store_explicit(&p->ret, v, memory_order_relaxed);
        atomic_store_explicit(&p->resp, MPS_OUTLINE, memory_order_release);
    }
}

/* Wake the clients sleeping on a reply that is in.  Called after every pass
 * when the sleepers counter is non-zero (relaxed read: a sleeper that the
 * read misses is seen at a later pass, and always by the fenced sweep before
 * the server itself sleeps). */
static void sweep_sleepers(struct mps_lock *s, unsigned nslots)
{
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    for (unsigned i = 0; i < nslots; i += MPS_CHUNK) {
        struct mps_chunk *c = atomic_load_explicit(&dir[i / MPS_CHUNK], memory_order_acquire);
        if (!c)
            continue;
        for (unsigned k = 0; k < MPS_CHUNK; k++) {
            struct mps_slot *p = mps_slot(s, c, k);
            if (atomic_load_explicit(&p->parked, memory_order_relaxed) &&
                (atomic_load_explicit(&p->resp, memory_order_relaxed) & 3u) != MPS_PENDING &&
                atomic_exchange_explicit(&p->parked, 0, memory_order_seq_cst))
                ll_futex_wake(&p->parked, 1);
        }
    }
}

static unsigned nslots_now(struct mps_lock *s)
{
    return atomic_load_explicit(&s->hw, memory_order_acquire);
}

/* Serve slot i if it has a request the server can serve now.  Returns 1 if
 * it served, 0 if nothing was pending, -1 if a request waits for the lock. */
static inline int serve(liblock_t *l, struct mps_lock *s, struct mps_chunk *c, unsigned i, int *have)
{
    unsigned k = i % MPS_CHUNK;
    struct mps_slot *p = mps_slot(s, c, k);
    uint64_t r = atomic_load_explicit(&p->req, memory_order_acquire);
    if (LL_LIKELY(r == c->last[k]))
        return 0;
    unsigned locked = atomic_load_explicit(&s->locked, memory_order_relaxed);
    switch (MPS_OP(r)) {
    case MPS_EXEC: {
        if (s->direct) {
            /* direct.c: hold the lock word for the rest of the pass, then
             * claim the request (the client may have withdrawn it) */
            if (!*have) {
                if (!ll_mps_server_take_word(s))
                    return -1;
                *have = 1;
            }
            uint64_t pend = MPS_PENDING_WORD(r >> 2);
            c->last[k] = r;
            if (!atomic_compare_exchange_strong_explicit(&p->resp, &pend, pend | MPS_CLAIM, memory_order_relaxed,
                                                         memory_order_relaxed))
                return 0; /* withdrawn: the client runs it itself */
        } else if (locked) {
            return -1;
        }
        void *(*cs)(void *) = p->cs;
        void *arg = p->arg;
        c->last[k] = r;
        atomic_store_explicit(&s->in_cs, 1, memory_order_relaxed);
        struct ll_cs_scope sc = ll_cs_enter(&ll_mps_serving, l);
        void *ret = ll_ident_run(p->tp, ll_ident_self(), mps_as_caller, l, cs, arg, NULL);
        ll_cs_leave(&ll_mps_serving, sc);
        atomic_store_explicit(&s->in_cs, 0, memory_order_relaxed);
        reply(s, p, (uint64_t)(uintptr_t)ret, 0);
        return 1;
    }
    case MPS_LOCK:
        if (locked)
            return -1;
        c->last[k] = r;
        /* holder before flag, and flag before holder on release: a reader
         * that sees locked == 1 with locked_by == -1 knows a release is
         * under way (lock.c, held_for_real) */
        atomic_store_explicit(&s->locked_by, (int)i, memory_order_relaxed);
        atomic_store_explicit(&s->locked, 1, memory_order_release);
        reply(s, p, 1, 1);
        return 1;
    case MPS_TRY: {
        /* The client may have withdrawn (see ll_mps_try_wait in client.c):
         * reply by CAS from this request's own PENDING word, and take the
         * lock only if that CAS wins. */
        c->last[k] = r;
        uint64_t pend = MPS_PENDING_WORD(r >> 2);
        if (locked) {
            atomic_compare_exchange_strong_explicit(&p->resp, &pend, 0, memory_order_relaxed,
                                                    memory_order_relaxed);
            return 1;
        }
        if (s->stream)
            ll_sfence(); /* see reply(): a grant orders earlier sections' stores */
        if (atomic_compare_exchange_strong_explicit(&p->resp, &pend, 1u << 2, memory_order_seq_cst,
                                                    memory_order_relaxed)) {
            atomic_store_explicit(&s->locked_by, (int)i, memory_order_relaxed);
            atomic_store_explicit(&s->locked, 1, memory_order_release);
        }
        return 1;
    }
    default: /* MPS_UNLOCK: the holder's writes precede its req (release) */
        c->last[k] = r;
        atomic_store_explicit(&s->locked, 0, memory_order_release);
        atomic_store_explicit(&s->locked_by, -1, memory_order_release);
        reply(s, p, 0, 0);
        return 1;
    }
}

/* Is any request pending that could be served now?  (Used after announcing
 * sleep: requests posted before the announcement are seen here.) */
static int any_servable(struct mps_lock *s, unsigned nslots)
{
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    unsigned locked = atomic_load_explicit(&s->locked, memory_order_relaxed);
    if (s->direct) {
        /* only EXEC requests come here; one that waits for the lock word
         * makes us sleep as 2, so that the word's release wakes us (Dekker
         * with ll_mps_word_unlock: our seq_cst exchange, then the word) */
        int pending = 0;
        for (unsigned i = 0; i < nslots && !pending; i++) {
            struct mps_chunk *c = atomic_load_explicit(&dir[i / MPS_CHUNK], memory_order_acquire);
            if (!c) {
                i += MPS_CHUNK - 1;
                continue;
            }
            unsigned k = i % MPS_CHUNK;
            pending = atomic_load_explicit(&mps_slot(s, c, k)->req, memory_order_acquire) != c->last[k];
        }
        if (!pending)
            return 0;
        if (!locked)
            return 1;
        atomic_exchange_explicit(&s->server_parked, 2, memory_order_seq_cst);
        return atomic_load_explicit(&s->locked, memory_order_relaxed) == 0;
    }
    for (unsigned i = 0; i < nslots; i++) {
        struct mps_chunk *c = atomic_load_explicit(&dir[i / MPS_CHUNK], memory_order_acquire);
        if (!c) {
            i += MPS_CHUNK - 1;
            continue;
        }
        unsigned k = i % MPS_CHUNK;
        uint64_t r = atomic_load_explicit(&mps_slot(s, c, k)->req, memory_order_acquire);
        if (r != c->last[k] && (!locked || MPS_OP(r) == MPS_UNLOCK || MPS_OP(r) == MPS_TRY))
            return 1;
    }
    return 0;
}

static void server_sleep(struct mps_lock *s)
{
    /* Dekker with the clients: we store server_parked=1 and then read the
     * slots; a client stores its req and then (fenced) reads
     * server_parked.  seq_cst exchange = full fence (and, on x86, a locked
     * instruction, which also drains our streaming stores). */
    ll_sfence();
    atomic_exchange_explicit(&s->server_parked, 1, memory_order_seq_cst);
    unsigned n = nslots_now(s);
    if (atomic_load_explicit(&s->stop, memory_order_acquire) || any_servable(s, n)) {
        atomic_store_explicit(&s->server_parked, 0, memory_order_relaxed);
        return;
    }
    sweep_sleepers(s, n); /* nobody may sleep on a reply that is in while we sleep */
    atomic_fetch_add_explicit(&s->parks, 1, memory_order_relaxed);
    uint32_t v;
    while ((v = atomic_load_explicit(&s->server_parked, memory_order_acquire)) != 0 &&
           !atomic_load_explicit(&s->stop, memory_order_acquire))
        ll_futex_wait(&s->server_parked, v, NULL); /* 1, or 2: a request waits for the lock word */
    atomic_fetch_add_explicit(&s->wakeups, 1, memory_order_relaxed);
}

/* Random permutation of [0, n) for the shuffled scan (xorshift). */
static void make_perm(unsigned *perm, unsigned n, uint64_t *rng)
{
    for (unsigned i = 0; i < n; i++)
        perm[i] = i;
    for (unsigned i = n; i > 1; i--) {
        uint64_t x = *rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *rng = x;
        unsigned j = (unsigned)(x % i);
        unsigned t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
}

static void *server_main(void *arg)
{
    struct mps_lock *s = arg;
    liblock_t *l = s->self;
    if (s->cpu >= 0)
        ll_pin_self(s->cpu);
    (void)ll_self(); /* a thread record, so nested liblock calls work */
    atomic_store_explicit(&s->started, 1, memory_order_release);
    const uint64_t budget = ll_spin_budget_cycles();
    unsigned *perm = NULL, perm_n = 0;
    uint64_t rng = 0x2545f4914f6cdd1dull ^ ll_cycles();
    uint64_t idle_since = 0;
    int flushed = 1; /* streaming stores drained since the last reply */
    while (!atomic_load_explicit(&s->stop, memory_order_relaxed)) {
        unsigned n = nslots_now(s);
        _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
        uint64_t t0 = ll_cycles();
        unsigned served = 0;
        int have = 0; /* direct mode: we hold the lock word for this pass */
        if (s->direct) {
            int cpu = ll_current_cpu();
            if (cpu != atomic_load_explicit(&s->server_cpu, memory_order_relaxed))
                atomic_store_explicit(&s->server_cpu, cpu, memory_order_relaxed);
        }
        if (s->shuffle) {
            if (n != perm_n) {
                free(perm);
                perm = malloc(n * sizeof *perm);
                perm_n = perm ? n : 0;
                if (perm)
                    make_perm(perm, n, &rng);
            }
            for (unsigned j = 0; j < perm_n; j++) {
                unsigned i = perm[j];
                struct mps_chunk *c = atomic_load_explicit(&dir[i / MPS_CHUNK], memory_order_acquire);
                if (c && serve(l, s, c, i, &have) > 0)
                    served++;
            }
        } else {
            for (unsigned i = 0; i < n; i += MPS_CHUNK) {
                struct mps_chunk *c = atomic_load_explicit(&dir[i / MPS_CHUNK], memory_order_acquire);
                if (!c)
                    continue;
                unsigned m = n - i < MPS_CHUNK ? n - i : MPS_CHUNK;
                for (unsigned k = 0; k < m; k++)
                    if (serve(l, s, c, i + k, &have) > 0)
                        served++;
            }
        }
        if (have)
            ll_mps_server_drop_word(s);
        atomic_store_explicit(&s->passes, atomic_load_explicit(&s->passes, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        if (served) {
            uint64_t t1 = ll_cycles();
            atomic_store_explicit(&s->served, atomic_load_explicit(&s->served, memory_order_relaxed) + served,
                                  memory_order_relaxed);
            atomic_store_explicit(&s->busy_passes,
                                  atomic_load_explicit(&s->busy_passes, memory_order_relaxed) + 1,
                                  memory_order_relaxed);
            atomic_store_explicit(&s->busy_cycles,
                                  atomic_load_explicit(&s->busy_cycles, memory_order_relaxed) + (t1 - t0),
                                  memory_order_relaxed);
            idle_since = 0;
            flushed = 0;
        } else {
            /* First empty pass after replies: drain the write-combining
             * buffers so no streaming reply waits for an eviction while we
             * have nothing else to do (under load passes are never empty
             * and this costs nothing). */
            if (!flushed && s->stream) {
                ll_sfence();
                flushed = 1;
            }
            uint64_t now = ll_cycles();
            if (!idle_since)
                idle_since = now;
            else if (now - idle_since > budget) {
                server_sleep(s);
                idle_since = 0;
                continue;
            }
            ll_pause();
        }
        if (atomic_load_explicit(&s->sleepers, memory_order_relaxed))
            sweep_sleepers(s, n);
    }
    ll_sfence();
    free(perm);
    return NULL;
}

int ll_mps_server_start(liblock_t *l, struct mps_lock *s)
{
    (void)l;
    atomic_store_explicit(&s->stop, 0, memory_order_relaxed);
    atomic_store_explicit(&s->started, 0, memory_order_relaxed);
    atomic_store_explicit(&s->server_parked, 0, memory_order_relaxed);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* signals go to application threads */
    pthread_attr_t a;
    pthread_attr_init(&a);
    int e = ll_internal_thread_create(&s->thread, &a, server_main, s);
    pthread_attr_destroy(&a);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e == 0) {
        pthread_setname_np(s->thread, "mp-server");
        /* The server has its thread record when the lock's first request
         * returns, even one its caller ran itself (direct mode): the
         * process's live-record count does not change later (test_threads) */
        while (!atomic_load_explicit(&s->started, memory_order_acquire))
            ll_yield();
    }
    return e;
}

void ll_mps_server_stop(struct mps_lock *s)
{
    atomic_store_explicit(&s->stop, 1, memory_order_release);
    atomic_store_explicit(&s->server_parked, 0, memory_order_seq_cst);
    ll_futex_wake(&s->server_parked, 1);
    pthread_join(s->thread, NULL);
}

/* Statistics (struct ll_ops .stats), for `liblock bench delegation`:
 * served, requests the server ran; passes, its passes over the client
 * lines; busy_passes, those that found a request; busy_cycles, cycles
 * spent in them; parks, client sleeps; stream, streaming-store replies on
 * (1) and available (ll_nt_available).  served / busy_passes is the
 * thesis's "combining rate" analogue, busy_cycles / served the server's
 * cycles per request while busy. */
void ll_mps_stats(const liblock_t *l, struct ll_stats *o)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    ll_stats_put(o, "served", (int64_t)atomic_load_explicit(&s->served, memory_order_relaxed));
    ll_stats_put(o, "passes", (int64_t)atomic_load_explicit(&s->passes, memory_order_relaxed));
    ll_stats_put(o, "busy_passes", (int64_t)atomic_load_explicit(&s->busy_passes, memory_order_relaxed));
    ll_stats_put(o, "busy_cycles", (int64_t)atomic_load_explicit(&s->busy_cycles, memory_order_relaxed));
    ll_stats_put(o, "parks", (int64_t)atomic_load_explicit(&s->parks, memory_order_relaxed));
    ll_stats_put(o, "stream", s->stream);
    ll_stats_put(o, "stream_available", ll_nt_available());
}
