/*
 * ids.c - Remote Core Locking client ids, and keeping clients off the
 * server CPUs (affinity fitting).
 *
 * Client ids.  One id per thread that talks to an RCL server, shared by all
 * servers (slot i of every server's array belongs to the thread with id i).
 * Allocated on the thread's first request, lowest free id first, released
 * by a thread-exit hook, so ids stay dense and the servers' scans (bounded
 * by the watermark = 1 + highest id in use) stay short: the property the
 * thesis gets from adaptive long-lived renaming, obtained here with a
 * bitmap under a mutex (taken once per thread lifetime, not per request).
 * The capacity is the number of slots per server (LIBLOCK_RCL_SLOTS,
 * default 4096 = 256 KB of 64-byte slots).  What a thread does when every
 * id is taken is in direct.c ("Without a client id").
 *
 * Orderings.  The bitmap is read and written only under ids_mutex.  The
 * watermark is stored with release under that mutex and loaded with
 * acquire by the servers' scans; it only bounds the scan (a request is
 * published by the release store of its own fn): a thread waiting for a
 * reply keeps its id, so its slot stays inside the range.  rcl_cpus_gen is bumped (acq_rel) when a server
 * starts or stops; a client compares it relaxed on every request (a stale
 * value only delays the refit of its affinity to its next request) and
 * re-reads it with acquire before refitting.
 */
#include "rcl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- client ids ----------------------------------------------------------- */
static pthread_once_t ids_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t ids_mutex = PTHREAD_MUTEX_INITIALIZER;
static uint64_t *ids_bits;
static unsigned ids_cap;
static _Atomic unsigned ids_watermark, ids_inuse;
_Atomic unsigned rcl_cpus_gen = 1; /* generation of the server-CPU set (rcl.h) */
static int affinity_on = 1;

unsigned rcl_yield_every = 1024;
int rcl_park_asym;

static void ids_init(void)
{
    ids_cap = (unsigned)ll_env_long("LIBLOCK_RCL_SLOTS", 4096, 1, 1L << 20);
    long ye = ll_env_long("LIBLOCK_RCL_YIELD_EVERY", 1024, 0, 1L << 30);
    rcl_yield_every = ye ? (unsigned)ye : UINT32_MAX;
    ids_bits = calloc((ids_cap + 63) / 64, sizeof *ids_bits);
    if (!ids_bits)
        ids_cap = 0;
    affinity_on = ll_env_long("LIBLOCK_RCL_AFFINITY", 1, 0, 1) != 0;
    /* read before this thread's first request: every request (and the
     * server's reply to it) then agrees on the protocol ("Parking") */
    rcl_park_asym = ll_env_long("LIBLOCK_RCL_ASYM", 1, 0, 1) && ll_heavy_barrier_ok();
}

unsigned rcl_slot_capacity(void)
{
    pthread_once(&ids_once, ids_init);
    return ids_cap ? ids_cap : 1;
}

unsigned rcl_client_watermark(void) { return atomic_load_explicit(&ids_watermark, memory_order_acquire); }
unsigned rcl_clients_in_use(void) { return atomic_load_explicit(&ids_inuse, memory_order_relaxed); }

static int id_alloc(void)
{
    pthread_once(&ids_once, ids_init);
    int id = -1;
    pthread_mutex_lock(&ids_mutex);
    for (unsigned w = 0; w < (ids_cap + 63) / 64; w++) {
        uint64_t free_bits = ~ids_bits[w];
        if (w == (ids_cap - 1) / 64 && ids_cap % 64)
            free_bits &= (1ull << (ids_cap % 64)) - 1;
        if (free_bits) {
            unsigned b = (unsigned)__builtin_ctzll(free_bits);
            ids_bits[w] |= 1ull << b;
            id = (int)(w * 64 + b);
            break;
        }
    }
    if (id >= 0) {
        if ((unsigned)id + 1 > atomic_load_explicit(&ids_watermark, memory_order_relaxed))
            atomic_store_explicit(&ids_watermark, (unsigned)id + 1, memory_order_release);
        atomic_fetch_add_explicit(&ids_inuse, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&ids_mutex);
    return id;
}

/* fork() support (server.c): the ids bitmap must not be copied mid-update. */
void rcl_ids_fork_prepare(void) { pthread_mutex_lock(&ids_mutex); }
void rcl_ids_fork_parent(void) { pthread_mutex_unlock(&ids_mutex); }
void rcl_ids_fork_child(void) { pthread_mutex_init(&ids_mutex, NULL); }

static void id_free(int id)
{
    pthread_mutex_lock(&ids_mutex);
    ids_bits[id / 64] &= ~(1ull << (id % 64));
    unsigned wm = atomic_load_explicit(&ids_watermark, memory_order_relaxed);
    while (wm > 0 && !(ids_bits[(wm - 1) / 64] & (1ull << ((wm - 1) % 64))))
        wm--;
    atomic_store_explicit(&ids_watermark, wm, memory_order_release);
    atomic_fetch_sub_explicit(&ids_inuse, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ids_mutex);
}

static void client_exit(ll_thread_t *self, void *arg)
{
    (void)self;
    (void)arg;
    /* The thread waited for each of its requests, so no slot of it is
     * pending: the id can go to another thread. */
    if (rcl_tls.id > 0) {
        id_free(rcl_tls.id - 1);
        rcl_tls.id = 0;
    }
}

void rcl_server_cpus_changed(void) { atomic_fetch_add_explicit(&rcl_cpus_gen, 1, memory_order_acq_rel); }

/* Keep an application thread off the server CPUs (under SCHED_FIFO a
 * thread there would get only the kernel's reserved share for other
 * tasks): narrow its affinity to its allowed CPUs minus the server CPUs,
 * if any remain.  If
 * none remains, the thread is colocated (client.c, "Colocated clients"). */
static void fit_affinity(struct rcl_tls *t)
{
    unsigned gen = atomic_load_explicit(&rcl_cpus_gen, memory_order_acquire);
    t->affinity_gen = gen;
    t->coloc = 0;
    t->one_cpu = 0;
    if (t->my_server)
        return;
    cpu_set_t cur, want;
    if (pthread_getaffinity_np(pthread_self(), sizeof cur, &cur) != 0)
        return;
    CPU_ZERO(&want);
    int removed = 0, left = 0, n = ll_ncpus();
    for (int c = 0; c < n && c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &cur))
            continue;
        if (rcl_cpu_is_server(c)) {
            removed++;
        } else {
            CPU_SET(c, &want);
            left++;
        }
    }
    /* one CPU to run on: a client-held lock's holder shares it (lock_slow) */
    t->one_cpu = left + removed == 1 || (removed && affinity_on && left == 1);
    if (!removed)
        return;
    if (!left) {
        t->coloc = 1;
        ll_warn_once("rcl_affinity", "liblock: rcl: a client thread may run only on RCL server CPUs; each of its "
                                     "requests costs a wake-up and two context switches (see docs/rcl.md)");
        return;
    }
    if (affinity_on)
        pthread_setaffinity_np(pthread_self(), sizeof want, &want);
}

/* Slow part of getting this thread's slot index: fit the affinity,
 * allocate the id, register the exit hook.  Returns the index or -1
 * (EAGAIN: every id is taken; ENOMEM). */
__attribute__((noinline)) int rcl_client_slow(struct rcl_tls *t)
{
    if (t->affinity_gen != atomic_load_explicit(&rcl_cpus_gen, memory_order_acquire))
        fit_affinity(t);
    if (t->id == 0) {
        /* A servicing thread's id is given back by the thread itself when
         * it leaves (rcl_servicing_id_release), not by an exit hook: it may
         * be allocated while the thread runs a section with a client's
         * identity (server.c, rcl_as_caller), when ll_self() is the
         * client's record. */
        ll_thread_t *self = t->my_server ? NULL : ll_self();
        if (!self && !t->my_server) {
            errno = ENOMEM;
            return -1;
        }
        int id = id_alloc();
        if (id < 0) {
            ll_warn_once("rcl_slots", "liblock: rcl: all %u client slots are in use: liblock_execute fails with "
                                      "EAGAIN, lock/unlock go through a shared overflow slot, slower (raise "
                                      "LIBLOCK_RCL_SLOTS)",
                         ids_cap);
            errno = EAGAIN;
            return -1;
        }
        t->id = id + 1;
        if (self) {
            t->hook.fn = client_exit;
            t->hook.arg = NULL;
            ll_thread_on_exit(self, &t->hook);
        }
    }
    return t->id - 1;
}

void rcl_servicing_id_release(void)
{
    if (rcl_tls.id > 0) {
        id_free(rcl_tls.id - 1);
        rcl_tls.id = 0;
    }
}

int rcl_client_id(void) { return rcl_client_index(); }
