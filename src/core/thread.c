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
 * Holds are recycled through a per-thread free list; at thread exit the
 * free ones go to a process-wide pool that new holds are taken from, and are
 * never freed: a waiter may still write into the node of the thread it
 * queued behind after that thread has handed over, returned and exited (the
 * parking announcement of the fast hand-over, src/locks/cr.h), and a late
 * write must land in a node, not in freed memory.  Memory stays bounded by
 * the most holds ever in use at once.  A thread that exits holding a lock
 * keeps that one record out of the pool on purpose: another thread may
 * still be linked to it.
 */
#include "../internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
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
static pthread_mutex_t hold_pool_mutex = PTHREAD_MUTEX_INITIALIZER;
static ll_hold_t *hold_pool; /* free holds of exited threads; guarded by hold_pool_mutex, taken with
                             * ll_mutex_lock_bounded: a forked child may inherit it locked */

static void thread_exit(void *arg);

/* ---- the library's own threads ------------------------------------------------
 * glibc ends the process with exit(0) when its last thread ends, whatever
 * the main thread did (pthread_exit included).  The library's own threads
 * (RCL servers, mp-server servers) would keep such a process alive for ever
 * -- the main thread a zombie, servers asleep with every signal blocked, so
 * even SIGTERM is never taken (seen: CPython's test_threading
 * test_3_join_in_forked_from_thread under mp-server).  So every library
 * thread is made by ll_internal_thread_create, which counts the live ones,
 * and when an application thread that used the library ends, it checks
 * whether it is the last one: the kernel's thread count (/proc/self/status;
 * near the end the live ones in /proc/self/task, since a main thread that
 * left by pthread_exit stays counted as a zombie) minus the library's
 * threads minus itself; if nothing is left it calls exit(0), as glibc would
 * once it was gone.
 *  - Errors only on the safe side: the count is raised before
 *    pthread_create and lowered after the thread's function returned (the
 *    kernel may still count it then), so it never exceeds the library's
 *    threads the kernel counts, and a miscount can only leave the process
 *    running, never end it early.  fork resets it in the child (the
 *    parent's library threads are not there; the child's own are counted as
 *    they are made).
 *  - Not covered: an application thread that never used the library ends
 *    last (it has no record, so nothing runs at its exit), or two end at
 *    the same moment (each sees the other): the process then stays as
 *    before.
 *  - Orderings: the count is an atomic read-modify-write, read relaxed: it
 *    is compared with a kernel figure read at the same moment, not used to
 *    order memory. */
static _Atomic int internal_threads;
static __thread int internal_self;

struct internal_start {
    void *(*fn)(void *);
    void *arg;
};

static void *internal_main(void *p)
{
    struct internal_start st = *(struct internal_start *)p;
    free(p);
    internal_self = 1;
    void *r = st.fn(st.arg);
    atomic_fetch_sub_explicit(&internal_threads, 1, memory_order_relaxed);
    return r;
}

int ll_internal_thread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    struct internal_start *st = malloc(sizeof *st);
    if (!st)
        return EAGAIN;
    st->fn = fn;
    st->arg = arg;
    atomic_fetch_add_explicit(&internal_threads, 1, memory_order_relaxed);
    int r = pthread_create(th, attr, internal_main, st);
    if (r) {
        atomic_fetch_sub_explicit(&internal_threads, 1, memory_order_relaxed);
        free(st);
    }
    return r;
}

static void internal_threads_child(void) { atomic_store_explicit(&internal_threads, 0, memory_order_relaxed); }

__attribute__((constructor(101))) static void internal_threads_atfork(void)
{
    pthread_atfork(NULL, NULL, internal_threads_child);
}

/* Threads of this process according to the kernel, or -1. */
static int process_threads(void)
{
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    const char *p = strstr(buf, "\nThreads:");
    return p ? atoi(p + 9) : -1;
}

/* Threads of this process that have not ended (state not Z or X), or -1. */
static int live_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/self/task/%s/stat", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* ended meanwhile */
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0)
            continue;
        buf[k] = '\0';
        const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        if (p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X')
            n++;
    }
    closedir(d);
    return n;
}

static void exit_if_last_application_thread(void)
{
    int internal = atomic_load_explicit(&internal_threads, memory_order_relaxed);
    if (internal <= 0)
        return;
    LL_KEEP_ERRNO;
    int n = process_threads();
    /* a main thread that left by pthread_exit stays counted as a zombie
     * until the process ends: when at most one application thread besides
     * us remains, count the live ones */
    if (n > 0 && n - internal - 1 <= 1)
        n = live_threads();
    if (n > 0 && n - internal - 1 <= 0)
        exit(0);
}

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
    /* relaxed: only uniqueness matters, which the RMW gives */
    static _Atomic uint64_t next_serial = 1;
    t->serial = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
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
    if (t->free_holds) {
        ll_hold_t *last = t->free_holds;
        while (last->next_free)
            last = last->next_free;
        if (ll_mutex_lock_bounded(&hold_pool_mutex)) {
            last->next_free = hold_pool;
            hold_pool = t->free_holds;
            pthread_mutex_unlock(&hold_pool_mutex);
        } /* else (a fork child's inherited lock): keep them out of use, never free them */
        t->free_holds = NULL;
    }
    if (t->nheld)
        fprintf(stderr, "liblock: thread %d exited holding %u lock(s)\n", (int)t->tid, t->nheld);
    free(t->held);
    free(t->clh_spare);
    id_free(t->id);
    free(t);
    atomic_fetch_sub_explicit(&live_records, 1, memory_order_relaxed);
    if (!internal_self)
        exit_if_last_application_thread();
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
        if (ll_mutex_lock_bounded(&hold_pool_mutex)) {
            if ((h = hold_pool))
                hold_pool = h->next_free;
            pthread_mutex_unlock(&hold_pool_mutex);
        }
        if (!h && !(h = ll_alloc_aligned(sizeof *h)))
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
