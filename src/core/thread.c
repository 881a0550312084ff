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
 * parking announcement of the fast hand-over, src/locks/restricting/cr.h), and a late
 * write must land in a node, not in freed memory.  Memory stays bounded by
 * the most holds ever in use at once.  A thread that exits holding a lock
 * keeps that one record out of the pool on purpose: another thread may
 * still be linked to it.
 */
#include "internal.h"

#include <signal.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

__thread ll_thread_t *ll_self_tls __attribute__((tls_model("initial-exec")));
__thread int ll_servicing_tls __attribute__((tls_model("initial-exec")));
__thread unsigned ll_lazy_held __attribute__((tls_model("initial-exec")));

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

/* ---- the end of the process ------------------------------------------------
 * glibc ends the process with exit(0) when its last thread ends, whatever
 * the main thread did (pthread_exit included).  The library's own threads
 * (RCL servers and servicing threads, mp-server servers) would keep such a
 * process alive for ever -- the main thread a zombie, servers asleep with
 * every signal blocked, so even SIGTERM is never taken (seen: CPython's
 * test_threading test_3_join_in_forked_from_thread under mp-server).  So
 * the library calls exit(0) itself when the last *application* thread ends
 * while library threads remain, and must never do it earlier: an early
 * exit loses the user's data.
 *
 * Application threads.  Under the interposer every thread the program
 * creates goes through its pthread_create (src/interpose/thread_create.c),
 * which counts it here before glibc creates it (ll_app_thread_created, as
 * glibc counts its own threads before clone) and marks it in the new thread
 * (ll_app_thread_begin: a value under app_key); main is counted from the
 * start.  app_key's destructor ends the count of a thread, whatever it did
 * (it need not have used the library), in the last round of the thread's
 * destructors (it re-arms itself until PTHREAD_DESTRUCTOR_ITERATIONS, so
 * the other keys' destructors run first, as they do before glibc's own
 * exit(0)).  The thread that takes the count to 0 is the last one.
 * Without the interposer (a program linked with liblock) threads are not
 * counted, and a thread that used the library checks the kernel's figure
 * at its end instead (below), which misses a last thread that never used
 * the library and two last threads ending at the same moment (each sees
 * the other): the process then stays as it would without this check.
 *
 * Library threads (ll_internal_thread_create) are counted only while they
 * really are running library code: `lib_live` is raised by the new thread
 * itself, first thing, and lowered after its function returned, so it never
 * exceeds the library threads the kernel shows (an over-count is what made
 * an application thread ending while the library was creating a thread see
 * "only library threads left" and exit with main still running).
 * `lib_pending` counts creations under way (raised before pthread_create,
 * lowered by the new thread or on failure), `lib_gen` changes after every
 * change of lib_live.
 *
 * The decision (last_thread_check): with threads counted, when the count
 * reaches 0 and library threads exist (live or pending), wait for pending
 * creations, then compare the kernel's live threads (/proc/self/task, state
 * not Z/X: a main thread that left by pthread_exit stays as a zombie) with
 * lib_live + this thread, read between two equal readings of lib_gen.  Any
 * other live thread is either an application thread still finishing its
 * exit (it vanishes within microseconds: poll) or a thread nobody counted
 * (glibc's helpers for SIGEV_THREAD timers or AIO, which glibc counts and
 * which keep a glibc process alive too): after EXIT_POLL_MS the thread gives
 * up and just ends.  A new application thread made meanwhile (by such a
 * helper) stops the check; its own end checks again.
 *
 * Children.  A child made by fork runs the atfork handler; one made by
 * _Fork, clone or a raw clone system call does not, and inherits the
 * parent's counts.  So the counts carry the pid they belong to; the first
 * count or check in a process with another pid starts over (one
 * application thread: the caller; no library thread: they are the
 * parent's).  A child sharing our memory (CLONE_VM without CLONE_THREAD,
 * vfork) must not create threads or end through here; it execs or _exits.
 *
 * Orderings: the counts are sequentially consistent read-modify-writes and
 * loads: the check reads lib_gen, lib_live, the kernel's list, lib_gen, and
 * a thread that changes lib_live does so before it bumps lib_gen, so two
 * equal readings bracket a lib_live no larger than the number of library
 * threads in the kernel's list (a library thread is in that list from before
 * its raise until after its lowering): errors can only count a library
 * thread as another thread, which delays or forgoes the exit, never hastens
 * it.  app_threads is an atomic counter whose 0 only one
 * decrement can produce. */
static _Atomic int lib_live, lib_pending;
static _Atomic unsigned lib_gen;
static _Atomic int app_threads = 1; /* main */
static _Atomic int app_counting;     /* the interposer counts application threads */
static _Atomic pid_t counts_pid;     /* the process the counts belong to; 0: not known yet */
static __thread int internal_self;
static pthread_key_t app_key;
static pthread_once_t app_key_once = PTHREAD_ONCE_INIT;
static __thread int app_rounds;
#define EXIT_POLL_MS 2000

/* Start the counts over in a child that inherited them without the atfork
 * handler (clone, _Fork): it has one thread, the caller, and no library
 * thread.  Only the child's first thread can get here first, before it
 * makes any other. */
static void counts_for_this_process(void)
{
    pid_t me = getpid(), was = atomic_load(&counts_pid);
    if (LL_LIKELY(was == me))
        return;
    if (was == 0 && atomic_compare_exchange_strong(&counts_pid, &was, me))
        return; /* the first count in this process: the counts are its own */
    atomic_store(&lib_live, 0);
    atomic_store(&lib_pending, 0);
    atomic_store(&app_threads, 1);
    atomic_store(&counts_pid, me);
}

static void counts_child(void)
{
    atomic_store(&counts_pid, getpid());
    atomic_store(&lib_live, 0);
    atomic_store(&lib_pending, 0);
    atomic_store(&app_threads, 1);
}

__attribute__((constructor(101))) static void counts_atfork(void) { pthread_atfork(NULL, NULL, counts_child); }

struct internal_start {
    void *(*fn)(void *);
    void *arg;
};

static void *internal_main(void *p)
{
    struct internal_start st = *(struct internal_start *)p;
    free(p);
    internal_self = 1;
    atomic_fetch_add(&lib_live, 1); /* now it is one */
    atomic_fetch_add(&lib_gen, 1);
    atomic_fetch_sub(&lib_pending, 1);
    void *r = st.fn(st.arg);
    atomic_fetch_sub(&lib_live, 1);
    atomic_fetch_add(&lib_gen, 1);
    return r;
}

int ll_internal_thread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    struct internal_start *st = malloc(sizeof *st);
    if (!st)
        return EAGAIN;
    st->fn = fn;
    st->arg = arg;
    counts_for_this_process();
    atomic_fetch_add(&lib_pending, 1);
    /* A library thread takes no signal: signals are the program's threads'
     * business, and a servicing thread runs sections with their callers'
     * identities (platform/identity.h), under which a handler would run as
     * that caller.  The new thread inherits the mask set around its
     * creation; the creator's is put back. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(th, attr, internal_main, st);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r) {
        atomic_fetch_sub(&lib_pending, 1);
        free(st);
    }
    return r;
}

/* Live threads of this process other than the caller, less lib_live, read
 * consistently (see above); INT_MAX if /proc cannot be read. */
static int live_threads(void);

/* Threads of this process according to the kernel (zombies included), or -1:
 * one read, where a scan of /proc/self/task opens a file per thread. */
static int process_threads(void)
{
    char buf[4096];
    if (ll_read_file("/proc/self/status", buf, sizeof buf) < 0)
        return -1;
    const char *p = strstr(buf, "\nThreads:");
    return p ? atoi(p + 9) : -1;
}

static int others_than_library(void)
{
    for (;;) {
        unsigned g = atomic_load(&lib_gen);
        int lib = atomic_load(&lib_live);
        /* the count with zombies can only be higher than the live one: when
         * it leaves two or more others, so would the scan */
        int n = process_threads();
        if (n < 0 || n - 1 - lib <= 1)
            n = live_threads();
        if (atomic_load(&lib_gen) != g)
            continue;
        return n < 0 ? INT_MAX : n - 1 - lib;
    }
}

/* The caller is an application thread at its end; with threads counted,
 * it took the count to 0. */
static void last_thread_check(int counted)
{
    if (atomic_load(&lib_live) + atomic_load(&lib_pending) <= 0)
        return; /* no library thread: glibc ends the process itself */
    LL_KEEP_ERRNO;
    for (int ms = 0;; ms++) {
        if (counted && atomic_load(&app_threads) > 0)
            return; /* a new application thread: its end checks again */
        if (atomic_load(&lib_pending) == 0 && others_than_library() <= 0)
            exit(0);
        if (!counted || ms >= EXIT_POLL_MS)
            return; /* another thread is alive (not counted: it may be an application thread) */
        usleep(1000);
    }
}

static void app_end(void *v)
{
    /* re-arm until the last round, so that every other key's destructor
     * has run (glibc runs them before its own exit(0)) */
    if (++app_rounds < PTHREAD_DESTRUCTOR_ITERATIONS && pthread_setspecific(app_key, v) == 0)
        return;
    counts_for_this_process();
    if (atomic_fetch_sub(&app_threads, 1) == 1)
        last_thread_check(1);
}

static void app_key_init(void)
{
    if (pthread_key_create(&app_key, app_end) != 0)
        fprintf(stderr, "liblock: pthread_key_create failed; the process may outlive its last thread\n");
    else
        atomic_store(&app_counting, 1);
}

void ll_app_thread_created(void)
{
    pthread_once(&app_key_once, app_key_init);
    counts_for_this_process();
    atomic_fetch_add(&app_threads, 1);
}

void ll_app_thread_create_failed(void) { atomic_fetch_sub(&app_threads, 1); }

void ll_app_thread_begin(void)
{
    app_rounds = 0;
    if (atomic_load(&app_counting))
        pthread_setspecific(app_key, (void *)1);
}

void ll_app_main_begin(void)
{
    pthread_once(&app_key_once, app_key_init);
    counts_for_this_process();
    ll_app_thread_begin();
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
        if (ll_read_file(path, buf, sizeof buf) < 0)
            continue; /* ended meanwhile */
        const char *p = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        if (p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X')
            n++;
    }
    closedir(d);
    return n;
}

/* Without the interposer's count: a thread that used the library ends. */
static void exit_if_last_application_thread(void)
{
    if (atomic_load(&app_counting))
        return; /* counted: app_end decides */
    counts_for_this_process();
    last_thread_check(0);
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

/* Unlink and return the first record of *list whose node belongs to ops,
 * else the first unused one (NULL tag), else NULL. */
static ll_hold_t *take_from(ll_hold_t **list, const struct ll_ops *ops)
{
    ll_hold_t **fresh = NULL;
    for (ll_hold_t **p = list; *p; p = &(*p)->next_free) {
        if ((*p)->ops == ops) {
            ll_hold_t *h = *p;
            *p = h->next_free;
            return h;
        }
        if (!fresh && !(*p)->ops)
            fresh = p;
    }
    if (!fresh)
        return NULL;
    ll_hold_t *h = *fresh;
    *fresh = h->next_free;
    return h;
}

ll_hold_t *ll_hold_take(ll_thread_t *self, const struct ll_ops *ops)
{
    ll_hold_t *h = take_from(&self->free_holds, ops);
    if (!h && ll_mutex_lock_bounded(&hold_pool_mutex)) {
        h = take_from(&hold_pool, ops);
        pthread_mutex_unlock(&hold_pool_mutex);
    }
    if (!h && !(h = ll_alloc_aligned(sizeof *h)))
        return NULL;
    h->ops = ops;
    h->next_free = NULL;
    return h;
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
    ll_hold_t *h = ll_hold_take(self, LL_OPS(lock));
    if (!h)
        return NULL;
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
