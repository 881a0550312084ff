/*
 * record.c - the profiler's records: lock sites and instances (made at
 * set-up), the per-thread call-site tables (hooks.h P3), thread lifetimes
 * (pthread_create is wrapped; the main thread counts from the constructor)
 * and the per-thread cache-miss counters (perf_event_open).
 */
#include "../shim/shim.h"
#include "profile.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>

uint64_t lp_mult = 1u << 24;
int lp_perf_ok;
struct lp_state lp;

static pthread_mutex_t lp_mutex = PTHREAD_MUTEX_INITIALIZER; /* real glibc mutex: sites, instances, threads */

/* ---- sites and instances ------------------------------------------------------ */
static struct lp_site *site_get(const struct shim_site *s) /* lp_mutex held */
{
    for (struct lp_site *p = lp.sites; p; p = p->next)
        if (p->id == s->id && p->is_static == s->is_static)
            return p;
    struct lp_site *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->id = s->id;
    p->is_static = s->is_static;
    p->nframes = s->nframes;
    memcpy(p->frames, s->frames, sizeof p->frames);
    p->sym = s->sym;
    p->next = lp.sites;
    /* a snapshot (SIGUSR1) may walk the lists while a lock is set up: publish complete records */
    atomic_store_explicit((_Atomic(struct lp_site *) *)&lp.sites, p, memory_order_release);
    return p;
}

void lp_mutex_new(struct ip_mutex *w, const struct shim_site *s)
{
    w->prof = NULL;
    w->cur_cs = NULL;
    if (!s || !lp.started || (lp.only_set && s->id != lp.only))
        return; /* not recorded (LIBLOCK_PROFILE_ONLY names another site) */
    struct lp_inst *in = calloc(1, sizeof *in);
    if (!in)
        return;
    in->addr = w->addr;
    in->type = w->type;
    in->glibc = SHIM_GLIBC(w);
    in->c11 = shim_c11_init;
    R.mutex_lock(&lp_mutex);
    in->site = site_get(s);
    if (in->site) {
        in->next = in->site->insts;
        atomic_store_explicit((_Atomic(struct lp_inst *) *)&in->site->insts, in, memory_order_release);
        in->site->count++;
    }
    R.mutex_unlock(&lp_mutex);
    if (!in->site) {
        free(in);
        return;
    }
    w->prof = in;
}

/* ---- per-thread call-site tables ---------------------------------------------------
 * Open addressing on (instance, return address) -> entry pointer; entries
 * come from mmap'd chunks and never move (w->cur_cs points at one across a
 * critical section).  mmap, not malloc: the allocator may take pthread
 * mutexes, which would come back here. */
static __thread struct lp_table *lp_my_table __attribute__((tls_model("initial-exec")));

static void *lp_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static struct lp_table *table_new(void)
{
    struct lp_table *t = lp_map(sizeof *t);
    if (!t)
        return NULL;
    t->cap = 256;
    t->slots = lp_map(t->cap * sizeof *t->slots);
    if (!t->slots)
        return NULL;
    struct lp_table *head = atomic_load_explicit(&lp.tables, memory_order_relaxed);
    do
        t->next = head;
    while (!atomic_compare_exchange_weak_explicit(&lp.tables, &head, t, memory_order_release, memory_order_relaxed));
    return t;
}

static size_t cs_hash(const void *in, const void *ra)
{
    uint64_t x = (uint64_t)(uintptr_t)in * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)ra;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (size_t)(x ^ (x >> 32));
}

static struct lp_cs *entry_new(struct lp_table *t, const struct lp_inst *in, const void *ra)
{
    if (t->chunk_used == t->chunk_cap) {
        t->chunk_cap = 16;
        t->chunk = lp_map(t->chunk_cap * sizeof(struct lp_cs));
        t->chunk_used = 0;
        if (!t->chunk) {
            t->chunk_cap = 0;
            return NULL;
        }
    }
    struct lp_cs *e = &t->chunk[t->chunk_used++];
    e->inst = in;
    e->ra = ra;
    return e;
}

static int table_grow(struct lp_table *t)
{
    size_t nc = t->cap * 2;
    struct lp_cs **ns = lp_map(nc * sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        struct lp_cs *e = t->slots[i];
        if (!e)
            continue;
        size_t j = cs_hash(e->inst, e->ra) & (nc - 1);
        while (ns[j])
            j = (j + 1) & (nc - 1);
        ns[j] = e;
    }
    struct lp_cs **old = t->slots;
    size_t oc = t->cap;
    /* the report reads slots/cap of other threads' tables: publish the new
     * array before the new capacity (it only ever grows) */
    atomic_store_explicit((_Atomic(struct lp_cs **) *)&t->slots, ns, memory_order_release);
    atomic_store_explicit((_Atomic size_t *)&t->cap, nc, memory_order_release);
    (void)old;
    (void)oc; /* the old array is kept: a concurrent report may still read it */
    return 0;
}

struct lp_cs *lp_cs_get(const struct lp_inst *in, const void *ra)
{
    struct lp_table *t = lp_my_table;
    if (LL_UNLIKELY(!t)) {
        t = table_new();
        lp_my_table = t;
        if (!t)
            return NULL;
    }
    size_t mask = t->cap - 1;
    for (size_t i = cs_hash(in, ra) & mask;; i = (i + 1) & mask) {
        struct lp_cs *e = t->slots[i];
        if (LL_LIKELY(e != NULL)) {
            if (LL_LIKELY(e->inst == in && e->ra == ra))
                return e;
            continue;
        }
        if ((t->n + 1) * 2 > t->cap) {
            if (table_grow(t))
                return NULL;
            return lp_cs_get(in, ra);
        }
        e = entry_new(t, in, ra);
        if (!e)
            return NULL;
        atomic_store_explicit((_Atomic(struct lp_cs *) *)&t->slots[i], e, memory_order_release);
        t->n++;
        return e;
    }
}

/* ---- cache misses ------------------------------------------------------------------ */
static __thread int perf_fd __attribute__((tls_model("initial-exec"))) = -1;

static int perf_open(void)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_CACHE_MISSES;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

uint64_t lp_perf_read(void)
{
    uint64_t v = 0;
    if (perf_fd >= 0 && read(perf_fd, &v, sizeof v) != (ssize_t)sizeof v)
        v = 0;
    return v;
}

static void perf_thread_start(void)
{
    if (lp_perf_ok)
        perf_fd = perf_open();
}

/* ---- threads ------------------------------------------------------------------------ */
struct lp_start {
    void *(*fn)(void *);
    void *arg;
    struct lp_thread *rec;
};

static void thread_end(void *p)
{
    struct lp_thread *t = p;
    atomic_store_explicit(&t->end_ns, ll_now_ns(), memory_order_relaxed);
    if (perf_fd >= 0) {
        close(perf_fd);
        perf_fd = -1;
    }
}

static void *thread_tramp(void *p)
{
    struct lp_start st = *(struct lp_start *)p;
    free(p);
    atomic_store_explicit(&st.rec->start_ns, ll_now_ns(), memory_order_relaxed);
    perf_thread_start();
    void *r;
    pthread_cleanup_push(thread_end, st.rec);
    r = st.fn(st.arg);
    pthread_cleanup_pop(1);
    return r;
}

LL_EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    ip_resolve();
    if (!lp.started)
        return R.create(th, attr, fn, arg);
    struct lp_start *st = malloc(sizeof *st);
    struct lp_thread *rec = calloc(1, sizeof *rec);
    if (!st || !rec) {
        free(st);
        free(rec);
        return R.create(th, attr, fn, arg); /* unmeasured rather than failed */
    }
    st->fn = fn;
    st->arg = arg;
    st->rec = rec;
    atomic_store_explicit(&rec->start_ns, ll_now_ns(), memory_order_relaxed);
    int r = R.create(th, attr, thread_tramp, st);
    if (r) {
        free(st);
        free(rec);
        return r;
    }
    R.mutex_lock(&lp_mutex);
    rec->next = lp.threads;
    lp.threads = rec;
    lp.nthreads++;
    R.mutex_unlock(&lp_mutex);
    return 0;
}

/* ---- start-up ------------------------------------------------------------------------ */
void lp_start(void)
{
    lp.start_ns = ll_now_ns();
    double cpn = ll_cycles_per_ns();
    if (cpn > 0)
        lp_mult = (uint64_t)((double)(1u << 24) / cpn + 0.5);
    const char *only = getenv("LIBLOCK_PROFILE_ONLY");
    if (only && *only) {
        char *end;
        lp.only = strtoull(only, &end, 16);
        if (*end || strlen(only) != 16) {
            fprintf(stderr, "liblock-profile: LIBLOCK_PROFILE_ONLY '%s' is not a 16-hex-digit site id\n", only);
            _exit(2);
        }
        lp.only_set = 1;
    }
    int fd = perf_open();
    if (fd >= 0) {
        lp_perf_ok = 1;
        perf_fd = fd;
    } else {
        snprintf(lp.misses_reason, sizeof lp.misses_reason, "perf_event_open: %s", strerror(errno));
    }
    lp_dump_setup();
    lp.started = 1;
}

void lp_fork_child(void)
{
    /* the child is a new process: its own clock and report (its threads: this one) */
    R.mutex_init(&lp_mutex, NULL);
    lp.threads = NULL;
    lp.nthreads = 0;
    lp.start_ns = ll_now_ns();
    lp_dump_fork_child();
}

/* For tests: is this the profiler. */
LL_EXPORT const char *liblock_preload_kind(void) { return "profile"; }
