/*
 * thread.c - per-thread state without registration.
 *
 * A thread's record is created on its first liblock call and released by a
 * pthread key destructor when the thread exits, so thousands of short-lived
 * threads do not leak.  Each record gets a small integer id; ids are reused
 * lowest-first after their thread exits, so arrays indexed by id (RCL request
 * slots, statistics) stay dense and a scan can stop at ll_thread_max_id().
 *
 * The hold stack records which locks the thread holds (or is acquiring) and
 * gives each hold a node of LL_NODE_BYTES that stays at one address from
 * lock() to unlock(), which is what queue locks link their waiters through.
 * Holds are recycled through a per-thread free list; they are freed at thread
 * exit unless still in use (a thread that exits holding a lock leaks that one
 * record on purpose: another thread may still be linked to it).
 */
#include "../internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread ll_thread_t *ll_self_tls __attribute__((tls_model("initial-exec")));

static pthread_key_t self_key;
static pthread_once_t self_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ids_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *id_bits;          /* bit set = id in use; guarded by ids_mutex */
static unsigned id_words;
/* 1 + highest id in use.  Written under ids_mutex with release, read
 * without it (acquire) as a scan bound for arrays indexed by id (today only
 * tests read it; RCL keeps its own client-id space): a stale bound can only
 * include a freed id, or miss one being handed out at that moment whose
 * owner has not published anything under it yet. */
static _Atomic unsigned id_watermark;
static _Atomic long live_records; /* a count for leak tests; relaxed: it orders nothing */

static void thread_exit(void *arg);

static void self_key_init(void)
{
    if (pthread_key_create(&self_key, thread_exit) != 0) {
        fprintf(stderr, "liblock: pthread_key_create failed; per-thread state will not be released\n");
    }
}

static int id_alloc(unsigned *out)
{
    pthread_mutex_lock(&ids_mutex);
    for (unsigned w = 0; w < id_words; w++) {
        if (~id_bits[w]) {
            unsigned b = (unsigned)__builtin_ctzll(~id_bits[w]);
            id_bits[w] |= 1ull << b;
            *out = w * 64 + b;
            goto found;
        }
    }
    {
        unsigned nw = id_words ? id_words * 2 : 4;
        uint64_t *nb = realloc(id_bits, nw * sizeof *nb);
        if (!nb) {
            pthread_mutex_unlock(&ids_mutex);
            return ENOMEM;
        }
        memset(nb + id_words, 0, (nw - id_words) * sizeof *nb);
        id_bits = nb;
        *out = id_words * 64;
        id_bits[id_words] |= 1;
        id_words = nw;
    }
found:
    if (*out + 1 > atomic_load_explicit(&id_watermark, memory_order_relaxed))
        atomic_store_explicit(&id_watermark, *out + 1, memory_order_release);
    pthread_mutex_unlock(&ids_mutex);
    return 0;
}

static void id_free(unsigned id)
{
    pthread_mutex_lock(&ids_mutex);
    id_bits[id / 64] &= ~(1ull << (id % 64));
    unsigned wm = atomic_load_explicit(&id_watermark, memory_order_relaxed);
    while (wm > 0 && !(id_bits[(wm - 1) / 64] & (1ull << ((wm - 1) % 64))))
        wm--;
    atomic_store_explicit(&id_watermark, wm, memory_order_release);
    pthread_mutex_unlock(&ids_mutex);
}

unsigned ll_thread_max_id(void) { return atomic_load_explicit(&id_watermark, memory_order_acquire); }

long liblock_debug_live_threads(void) { return atomic_load_explicit(&live_records, memory_order_relaxed); }

ll_thread_t *ll_self_slow(void)
{
    LL_KEEP_ERRNO;
    pthread_once(&self_once, self_key_init);
    ll_thread_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    if (id_alloc(&t->id) != 0) {
        free(t);
        return NULL;
    }
    t->tid = (pid_t)syscall(SYS_gettid);
    t->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)t->tid << 17) ^ ll_cycles();
    if (!t->rng)
        t->rng = 1;
    ll_self_tls = t;
    pthread_setspecific(self_key, t);
    atomic_fetch_add_explicit(&live_records, 1, memory_order_relaxed);
    return t;
}

void ll_thread_on_exit(ll_thread_t *self, struct ll_exit_hook *hook)
{
    hook->next = self->hooks;
    self->hooks = hook;
}

static void thread_exit(void *arg)
{
    ll_thread_t *t = arg;
    /* Hooks may call back into liblock; keep the record reachable meanwhile. */
    ll_self_tls = t;
    while (t->hooks) {
        struct ll_exit_hook *h = t->hooks;
        t->hooks = h->next;
        h->fn(t, h->arg);
    }
    ll_self_tls = NULL;
    for (ll_hold_t *h = t->free_holds, *n; h; h = n) {
        n = h->next_free;
        free(h);
    }
    if (t->nheld)
        fprintf(stderr, "liblock: thread %d exited holding %u lock(s)\n", (int)t->tid, t->nheld);
    free(t->held);
    free(t->clh_spare);
    id_free(t->id);
    free(t);
    atomic_fetch_sub_explicit(&live_records, 1, memory_order_relaxed);
}

ll_hold_t *ll_hold_push_slow(ll_thread_t *self, liblock_t *lock)
{
    if (self->nheld == self->capheld) {
        unsigned nc = self->capheld ? self->capheld * 2 : 8;
        ll_hold_t **nh = realloc(self->held, nc * sizeof *nh);
        if (!nh)
            return NULL;
        self->held = nh;
        self->capheld = nc;
    }
    ll_hold_t *h = self->free_holds;
    if (h) {
        self->free_holds = h->next_free;
    } else {
        h = ll_alloc_aligned(sizeof *h);
        if (!h)
            return NULL;
    }
    h->lock = lock;
    self->held[self->nheld++] = h;
    return h;
}

void ll_hold_remove_at(ll_thread_t *self, unsigned idx)
{
    ll_hold_t *h = self->held[idx];
    memmove(&self->held[idx], &self->held[idx + 1], (self->nheld - idx - 1) * sizeof *self->held);
    self->nheld--;
    h->lock = NULL;
    h->next_free = self->free_holds;
    self->free_holds = h;
}
