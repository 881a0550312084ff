/*
 * lifecycle.c - an mp-server lock's life: init (options), the start of its
 * server thread on first need, the fix-up of a forked child's copy, the
 * registration of a client thread, destroy.  The algorithm, invariants and
 * memory-ordering argument are in mpserver.h.
 */
#include "mpserver.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Atomic uint64_t ll_mps_generation = 1;

/* The generation is bumped in every forked child.  The handler is
 * registered by an early constructor, so it runs before the child handlers
 * registered later (the interposer's rebuilds locks in its own); and a
 * server whose recorded pid is the caller's is never restarted, whatever
 * the order (ensure_server). */
static void mps_child(void) { atomic_fetch_add_explicit(&ll_mps_generation, 1, memory_order_relaxed); }
static pthread_once_t mps_once = PTHREAD_ONCE_INIT;
static void mps_once_init(void) { pthread_atfork(NULL, NULL, mps_child); }
__attribute__((constructor(101))) static void mps_ctor(void) { pthread_once(&mps_once, mps_once_init); }

int ll_mps_lock_init(liblock_t *l, const liblock_attr_t *attr)
{
    (void)attr;
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    pthread_once(&mps_once, mps_once_init);
    s->self = l;
    s->stride = (unsigned)ll_env_long("LIBLOCK_MPSERVER_STRIDE", 1, 1, 2);
    s->stream = (int)ll_env_long("LIBLOCK_MPSERVER_STREAM", 0, 0, 1);
    s->shuffle = (int)ll_env_long("LIBLOCK_MPSERVER_SHUFFLE", 0, 0, 1);
    s->cpu = (int)ll_env_long("LIBLOCK_MPSERVER_CPU", -1, -1, 1 << 20);
    s->direct = ll_mps_direct_default(ll_policy(l), s->cpu >= 0);
    long win = ll_env_long("LIBLOCK_MPSERVER_WINDOW_NS", 0, 0, 60000000000L);
    s->window = win ? ll_ns_to_cycles((uint64_t)win) : 0; /* 0: an eighth of the spin budget */
    long ws = ll_env_long("LIBLOCK_MPSERVER_WORD_SPIN_NS", -1, -1, 1000000000L);
    s->word_spin = ws > 0 ? ll_ns_to_cycles((uint64_t)ws) : ws == 0 ? 1 : 0; /* 0: an eighth of the budget */
    atomic_store_explicit(&s->server_cpu, -1, memory_order_relaxed);
    const char *b = getenv("LIBLOCK_MPSERVER_BACKOFF");
    if (b && strcmp(b, "adaptive") == 0) {
        s->backoff_mode = MPS_BO_ADAPTIVE;
    } else {
        s->backoff = (uint64_t)ll_env_long("LIBLOCK_MPSERVER_BACKOFF", 0, 0, (long)MPS_BACKOFF_MAX);
        s->backoff_mode = s->backoff ? MPS_BO_FIXED : MPS_BO_NONE;
    }
    atomic_store_explicit(&s->locked_by, -1, memory_order_relaxed);
    return 0;
}

/* The start lock's value is the generation of its holder, so a holder that
 * was another thread of the parent (it does not exist in a forked child) is
 * recognised and overtaken. */
static void start_lock(struct mps_lock *s, uint64_t g)
{
    for (;;) {
        uint64_t v = atomic_load_explicit(&s->start_lock, memory_order_relaxed);
        if ((v == 0 || v != g) &&
            atomic_compare_exchange_weak_explicit(&s->start_lock, &v, g, memory_order_acquire,
                                                  memory_order_relaxed))
            return;
        ll_yield();
    }
}

/* In a forked child, before its server starts: apply the UNLOCKs pending in
 * the parent's slots, drop every other pending request (its thread does
 * not exist here), wake nobody (no thread sleeps). */
static void fork_fixup(struct mps_lock *s)
{
    atomic_store_explicit(&s->sleepers, 0, memory_order_relaxed);
    atomic_store_explicit(&s->server_parked, 0, memory_order_relaxed);
    /* held by the parent's server for a pass, or by a client running its
     * own execute() section: neither thread exists here (a lock() holder
     * other than the forking thread keeps it held, as with glibc) */
    if (s->direct && (atomic_load_explicit(&s->locked, memory_order_relaxed) & (MPS_W_SERVER | MPS_W_EXEC)))
        atomic_store_explicit(&s->locked, 0, memory_order_relaxed);
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_relaxed);
    if (!dir)
        return;
    for (unsigned j = 0; j < MPS_MAX_CHUNKS; j++) {
        struct mps_chunk *c = atomic_load_explicit(&dir[j], memory_order_relaxed);
        if (!c)
            continue;
        for (unsigned k = 0; k < MPS_CHUNK; k++) {
            struct mps_slot *p = mps_slot(s, c, k);
            uint64_t r = atomic_load_explicit(&p->req, memory_order_relaxed);
            atomic_store_explicit(&p->parked, 0, memory_order_relaxed);
            /* unserved, or served without its reply (the parent's server
             * was between the two when fork copied memory) */
            int unreplied = (atomic_load_explicit(&p->resp, memory_order_relaxed) & 3u) == MPS_PENDING;
            if (r == c->last[k] && !unreplied)
                continue;
            int release = MPS_OP(r) == MPS_UNLOCK ||
                          (MPS_OP(r) != MPS_EXEC && r == c->last[k] &&
                           atomic_load_explicit(&s->locked_by, memory_order_relaxed) == (int)(j * MPS_CHUNK + k));
            if (release) { /* an unlock, or a grant nobody received */
                atomic_store_explicit(&s->locked, 0, memory_order_relaxed);
                atomic_store_explicit(&s->locked_by, -1, memory_order_relaxed);
            }
            c->last[k] = r;
            atomic_store_explicit(&p->resp, 0, memory_order_relaxed);
        }
    }
}

/* ll_mps_ensure_server (mpserver.h) found the lock's server missing from
 * generation g: start it (in a forked child, after fork_fixup). */
int ll_mps_ensure_server_slow(liblock_t *l, struct mps_lock *s, uint64_t g)
{
    start_lock(s, g);
    int e = 0;
    uint64_t cur = atomic_load_explicit(&s->gen, memory_order_relaxed);
    if (cur != g && cur != 0 && s->pid == getpid()) {
        /* our server was started in this process before the generation
         * was bumped (a fork handler that ran before ours): keep it */
        atomic_store_explicit(&s->gen, g, memory_order_release);
    } else if (cur != g) {
        if (cur != 0)
            fork_fixup(s); /* state copied from the parent; its server is not here */
        if (!atomic_load_explicit(&s->dir, memory_order_relaxed)) {
            void *d = calloc(MPS_MAX_CHUNKS, sizeof(_Atomic(struct mps_chunk *)));
            if (!d)
                e = ENOMEM;
            else
                atomic_store_explicit(&s->dir, d, memory_order_release);
        }
        if (!e) {
            /* the lock's real address: init saw a temporary copy of the
             * liblock_t (api.c), and the server's nested-call checks
             * (EDEADLK) compare against this; published to the server by
             * its creation */
            s->self = l;
            e = ll_mps_server_start(l, s);
        }
        if (!e) {
            s->pid = getpid();
            atomic_store_explicit(&s->gen, g, memory_order_release);
        }
    }
    atomic_store_explicit(&s->start_lock, 0, memory_order_release);
    return e;
}

int ll_mps_thread_register(liblock_t *l)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    ll_thread_t *self = ll_self();
    if (!self)
        return ENOMEM;
    int e = ll_mps_ensure_server(l, s);
    if (e)
        return e;
    unsigned k;
    return ll_mps_my_chunk(s, self, &k) ? 0 : self->id >= MPS_CHUNK * MPS_MAX_CHUNKS ? EAGAIN : ENOMEM;
}


/* Any request pending?  UNLOCKs in flight are waited for (they are served
 * within a pass: "unlock; destroy" must work). */
static int busy(struct mps_lock *s)
{
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_acquire);
    if (!dir)
        return 0;
    for (unsigned j = 0; j < MPS_MAX_CHUNKS; j++) {
        struct mps_chunk *c = atomic_load_explicit(&dir[j], memory_order_acquire);
        if (!c)
            continue;
        for (unsigned k = 0; k < MPS_CHUNK; k++) {
            struct mps_slot *p = mps_slot(s, c, k);
            for (;;) {
                uint64_t r = atomic_load_explicit(&p->req, memory_order_acquire);
                if ((atomic_load_explicit(&p->resp, memory_order_acquire) & 3u) != MPS_PENDING)
                    break;
                if (MPS_OP(r) != MPS_UNLOCK)
                    return 1;
                ll_yield();
            }
        }
    }
    return 0;
}

int ll_mps_lock_destroy(liblock_t *l)
{
    struct mps_lock *s = LL_STATE(l, struct mps_lock);
    if (ll_mps_serving == l)
        return EBUSY;
    uint64_t g = atomic_load_explicit(&ll_mps_generation, memory_order_relaxed);
    uint64_t cur = atomic_load_explicit(&s->gen, memory_order_acquire);
    int ours = cur == g || (cur != 0 && s->pid == getpid());
    if (ours && busy(s))
        return EBUSY;
    /* Direct mode: the server holds the lock word (MPS_W_SERVER) to the end
     * of the pass in which it answered (server.c, serve), so a caller can
     * have its last answer before the word is given back.  No request is
     * pending (busy) and no section runs (in_cs), so the rest of that pass
     * is a scan: wait for it instead of answering EBUSY. */
    if (ours)
        while ((atomic_load_explicit(&s->locked, memory_order_acquire) & MPS_W_SERVER) &&
               !atomic_load_explicit(&s->in_cs, memory_order_acquire))
            ll_yield();
    if (atomic_load_explicit(&s->locked, memory_order_acquire))
        return EBUSY; /* (in a forked child: held by a thread of the parent) */
    if (ours)
        ll_mps_server_stop(s);
    atomic_store_explicit(&s->gen, 0, memory_order_relaxed);
    _Atomic(struct mps_chunk *) *dir = atomic_load_explicit(&s->dir, memory_order_relaxed);
    if (dir) {
        for (unsigned j = 0; j < MPS_MAX_CHUNKS; j++)
            free(atomic_load_explicit(&dir[j], memory_order_relaxed));
        free(dir);
        atomic_store_explicit(&s->dir, NULL, memory_order_relaxed);
    }
    return 0;
}
