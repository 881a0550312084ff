/*
 * record.c - the profiler's records: lock sites and instances (made at
 * set-up), the per-thread call-site tables (hooks.h P3), thread lifetimes
 * (pthread_create is wrapped; the main thread counts from the constructor)
 * and the per-thread cache-miss counters (perf_event_open).
 */
#include "shim/shim.h"
#include "profile.h"

#include <linux/perf_event.h>
#include <sys/mman.h>
#include <sys/syscall.h>

uint64_t lp_mult = 1u << 24;
uint32_t lp_every = 1;
__thread uint64_t lp_rng __attribute__((tls_model("initial-exec")));
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
    p->index = lp.nsites++;
    p->next = lp.sites;
    /* a snapshot (SIGUSR1) may walk the lists while a lock is set up: publish complete records */
    atomic_store_explicit((_Atomic(struct lp_site *) *)&lp.sites, p, memory_order_release);
    return p;
}

void lp_mutex_new(struct ip_mutex *w, const struct shim_site *s)
{
    w->prof = NULL;
    w->lp_hidx = 0;
    w->lp_iid = 0;
    if (!s || !lp.started || (lp.only_set && s->id != lp.only))
        return; /* not recorded (LIBLOCK_PROFILE_ONLY names another site) */
    struct lp_inst *in = calloc(1, sizeof *in);
    if (!in)
        return;
    in->addr = w->addr;
    in->lock = &w->lock;
    in->type = w->type;
    in->glibc = SHIM_GLIBC(w);
    in->c11 = shim_c11_init;
    R.mutex_lock(&lp_mutex);
    in->site = site_get(s);
    if (in->site) {
        in->id = lp.ninst++;
        in->next = in->site->insts;
        atomic_store_explicit((_Atomic(struct lp_inst *) *)&in->site->insts, in, memory_order_release);
        in->site->count++;
    }
    R.mutex_unlock(&lp_mutex);
    if (!in->site) {
        free(in);
        return;
    }
    w->lp_hidx = in->site->index;
    w->lp_iid = in->id;
    w->prof = in;
}

/* ---- per-thread tables (hooks.h P3) -------------------------------------------
 * Records by (lock site, call site), histograms by lock site, the held
 * stack.  Records and histograms come from mmap'd chunks and never move (a
 * held entry points at its record across a critical section).  mmap, not
 * malloc: the allocator may take pthread mutexes, which would come back
 * here. */
__thread struct lp_table *lp_my __attribute__((tls_model("initial-exec")));

static void *lp_map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

struct lp_table *lp_table_slow(void)
{
    if (lp_my)
        return lp_my;
    struct lp_table *t = lp_map(sizeof *t);
    if (!t)
        return NULL;
    t->cap = 64;
    t->slots = lp_map(t->cap * sizeof *t->slots);
    if (!t->slots) {
        munmap(t, sizeof *t);
        return NULL;
    }
    struct lp_table *head = atomic_load_explicit(&lp.tables, memory_order_relaxed);
    do
        t->next = head;
    while (!atomic_compare_exchange_weak_explicit(&lp.tables, &head, t, memory_order_release, memory_order_relaxed));
    lp_my = t;
    return t;
}

static size_t crec_hash(int site, const void *ra)
{
    uint64_t x = (uint64_t)(unsigned)site * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)ra;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    return (size_t)(x ^ (x >> 32));
}

/* Grow the thread's pointer array *arr (length *n, a power of two, 16 at
 * first) until index i fits; 0: no memory.  A report reads the length, then
 * the array: the array is published before its length, and the old array is
 * kept (a report may still read it). */
static int lp_grow(void ***arr, size_t *n, size_t i)
{
    if (i < *n)
        return 1;
    size_t nn = *n ? *n : 16;
    while (nn <= i)
        nn *= 2;
    void **na = lp_map(nn * sizeof *na);
    if (!na)
        return 0;
    if (*n)
        memcpy(na, *arr, *n * sizeof *na);
    atomic_store_explicit((_Atomic(void **) *)arr, na, memory_order_release);
    atomic_store_explicit((_Atomic size_t *)n, nn, memory_order_release);
    return 1;
}

/* The thread's histograms of a site, made on its first acquisition there. */
struct lp_hist *lp_hist_slow(struct lp_table *t, int site)
{
    size_t i = (size_t)site;
    if (!lp_grow((void ***)&t->hists, &t->nhists, i))
        return NULL;
    struct lp_hist *h = t->hists[i];
    if (h)
        return h;
    if (t->hchunk_used == t->hchunk_cap) {
        t->hchunk_cap = 65536 / sizeof(struct lp_hist);
        t->hchunk = lp_map(t->hchunk_cap * sizeof(struct lp_hist));
        t->hchunk_used = 0;
        if (!t->hchunk) {
            t->hchunk_cap = 0;
            return NULL;
        }
    }
    h = &t->hchunk[t->hchunk_used++];
    atomic_store_explicit((_Atomic(struct lp_hist *) *)&t->hists[i], h, memory_order_release);
    return h;
}

/* The thread's slot of instance id, its page made on first use; NULL: no memory. */
struct lp_islot *lp_islot_slow(struct lp_table *t, uint32_t id)
{
    size_t p = id / LP_IPAGE;
    if (!lp_grow((void ***)&t->ipages, &t->nipages, p))
        return NULL;
    if (!t->ipages[p]) {
        struct lp_islot *pg = lp_map(LP_IPAGE * sizeof *pg);
        if (!pg)
            return NULL;
        atomic_store_explicit((_Atomic(struct lp_islot *) *)&t->ipages[p], pg, memory_order_release);
    }
    return &t->ipages[p][id % LP_IPAGE];
}

/* The calling thread's id (cached; the forked child's thread resets it). */
__thread int lp_tid __attribute__((tls_model("initial-exec")));
int lp_tid_slow(void)
{
    lp_tid = (int)syscall(SYS_gettid);
    return lp_tid;
}

/* An acquisition no histogram could be made for (no memory): the site's
 * shared histograms, with atomic adds (several threads may meet there). */
void lp_fallback_hist(const struct ip_mutex *w, int hold, unsigned bucket, uint64_t n)
{
    struct lp_site *s = w->prof->site;
    uint64_t *b = hold ? &s->fallback_h.hold[bucket] : &s->fallback_h.wait[bucket];
    __atomic_fetch_add(b, n, __ATOMIC_RELAXED);
}

static int table_grow(struct lp_table *t)
{
    size_t nc = t->cap * 2;
    struct lp_crec **ns = lp_map(nc * sizeof *ns);
    if (!ns)
        return -1;
    for (size_t i = 0; i < t->cap; i++) {
        struct lp_crec *e = t->slots[i];
        if (!e)
            continue;
        size_t j = crec_hash(e->site, e->ra) & (nc - 1);
        while (ns[j])
            j = (j + 1) & (nc - 1);
        ns[j] = e;
    }
    /* the report reads cap, then slots: publish the new array before the
     * new capacity; the old array is kept (a report may still read it) */
    atomic_store_explicit((_Atomic(struct lp_crec **) *)&t->slots, ns, memory_order_release);
    atomic_store_explicit((_Atomic size_t *)&t->cap, nc, memory_order_release);
    return 0;
}

/* The thread's record of (site, ra), made on first use; NULL: no memory. */
struct lp_crec *lp_crec_slow(struct lp_table *t, int site, const void *ra)
{
    size_t mask = t->cap - 1;
    for (size_t i = crec_hash(site, ra) & mask;; i = (i + 1) & mask) {
        struct lp_crec *e = t->slots[i];
        if (e) {
            if (e->ra == ra && e->site == site)
                return e;
            continue;
        }
        if ((t->n + 1) * 2 > t->cap)
            return table_grow(t) ? NULL : lp_crec_slow(t, site, ra);
        if (t->chunk_used == t->chunk_cap) {
            t->chunk_cap = 65536 / sizeof(struct lp_crec);
            t->chunk = lp_map(t->chunk_cap * sizeof(struct lp_crec));
            t->chunk_used = 0;
            if (!t->chunk) {
                t->chunk_cap = 0;
                return NULL;
            }
        }
        e = &t->chunk[t->chunk_used++];
        e->ra = ra;
        e->site = site;
        e->h = lp_hist_slow(t, site); /* NULL (no memory): looked up again, or the fallback */
        atomic_store_explicit((_Atomic(struct lp_crec *) *)&t->slots[i], e, memory_order_release);
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
    const char *every = getenv("LIBLOCK_PROFILE_TIME_EVERY");
    if (every && *every) {
        char *end;
        errno = 0;
        unsigned long n = strtoul(every, &end, 10);
        if (*end || errno || n < 1 || n > LP_EVERY_MAX || *every == '-') {
            fprintf(stderr, "liblock-profile: LIBLOCK_PROFILE_TIME_EVERY '%s' is not a whole number from 1 to %u\n",
                    every, LP_EVERY_MAX);
            _exit(2);
        }
        lp_every = (uint32_t)n;
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
    lp_tid = 0;
    /* the child is a new process: its own clock and report (its threads: this one) */
    R.mutex_init(&lp_mutex, NULL);
    lp.threads = NULL;
    lp.nthreads = 0;
    lp.start_ns = ll_now_ns();
    lp_dump_fork_child();
}

/* For tests: is this the profiler. */
LL_EXPORT const char *liblock_preload_kind(void) { return "profile"; }
