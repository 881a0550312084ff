/*
 * fairness.c - per-lock admission history and the fairness metrics of the
 * Malthusian-locks paper (D. Dice, "Malthusian Locks", EuroSys 2017 (extended version, arXiv:1511.06035):
 * LWSS and MTTR in section 1, RSTDDEV and the Gini coefficient in
 * section 6):
 * average lock working-set size (LWSS) over disjoint windows of W
 * admissions, median time to reacquire (MTTR), and the relative standard
 * deviation (RSTDDEV) and Gini coefficient of per-thread admission counts.
 * Formulas and the choices the paper leaves open: docs/fairness.md.
 *
 * Off by default: liblock_t._stats is NULL and the API layer's only cost is
 * one predictable `if (l->_stats)` per acquisition.
 *
 * What is recorded, per admission (ll_fairness_record), in O(1):
 *   seq      ordinal of this admission (0, 1, 2, ...);
 *   TTR      seq - last_seq(thread) - 1 when the thread was admitted before
 *            (admissions of others in between), into a histogram;
 *   window   seq / W; a thread counts once per window it appears in;
 *   count    the thread's admissions.
 * Nothing stores the whole history, so memory is bounded: a histogram of
 * 2752 bins (exact below 1024, 32 bins per octave above) and one entry per
 * thread id.
 *
 * Thread identity.  Entries are indexed by the small reusable id of
 * ll_thread_t (dense, so the table stays small), and tagged with a 64-bit
 * serial that is never reused (a thread-local drawn from a global counter on
 * first use).  When an id is reused by a new thread, the entry's tag does
 * not match: the old thread's count is moved to the append-only `retired`
 * array (it still takes part in Gini/RSTDDEV as a separate thread) and the
 * entry starts afresh (so the new thread's first admission has no TTR).
 *
 * Concurrency.  Recorders are serialised by the lock itself (the API layer
 * calls ll_fairness_record while the caller holds the lock, or from inside
 * a delegated critical section), so their plain read-modify-write sequences
 * do not race with each other, and the lock's acquire/release ordering makes
 * one recorder's writes visible to the next.  A reader (liblock_fairness)
 * may run concurrently: every field it reads is an atomic accessed with
 * relaxed loads/stores (plain moves on x86), so it never tears a value, and
 * memory it follows (table chunks) is published with release stores and
 * never freed before the lock is destroyed.  The snapshot may be a few
 * admissions out of step across fields; it is exact when the lock is quiet.
 * liblock_fairness_reset excludes recorders by holding the lock.
 */
#include "fairness.h"

#include <math.h> /* NAN only: no libm function is called */
#include <stdlib.h>
#include <string.h>

#define HIST_EXACT 1024u                 /* TTR values below this are exact */
#define HIST_SUB 32u                     /* bins per octave above           */
#define HIST_NBINS (HIST_EXACT + (64u - 10u) * HIST_SUB)
#define CHUNK 256u                       /* entries per table chunk         */
#define DIR 4096u                        /* chunks: ids below 1,048,576     */
#define RCHUNK 1024u                     /* retired counts per chunk        */
#define RDIR 4096u                       /* retired chunks: 4M exited threads */
#define NONE UINT64_MAX

#define LD(x) atomic_load_explicit(&(x), memory_order_relaxed)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_relaxed)
#define INC(x) ST(x, LD(x) + 1)

struct fair_entry {
    _Atomic uint64_t serial; /* owner thread's serial; 0 = never used / reset */
    _Atomic uint64_t count;  /* admissions of that thread */
    uint64_t last_seq;       /* recorder-only */
    uint64_t last_window;    /* recorder-only */
};

struct ll_fairness {
    uint64_t W;                   /* window size */
    _Atomic uint64_t seq;         /* admissions recorded (tracked ones) */
    _Atomic uint64_t untracked;
    _Atomic uint64_t threads;     /* entries ever claimed + retired, i.e. distinct threads */
    _Atomic uint64_t windows;     /* complete windows */
    _Atomic uint64_t lwss_sum;    /* sum of distinct threads over complete windows */
    _Atomic uint64_t cur_distinct;/* distinct threads in the current window */
    _Atomic uint64_t reacq;       /* TTR samples */
    _Atomic uint64_t nretired;
    _Atomic(struct fair_entry *) dir[DIR];
    _Atomic(_Atomic uint64_t *) rdir[RDIR];
    _Atomic uint64_t hist[HIST_NBINS];
};

static __thread uint64_t my_serial;
static _Atomic uint64_t next_serial = 1;

uint64_t ll_fairness_serial(void)
{
    uint64_t s = my_serial;
    if (LL_UNLIKELY(s == 0))
        my_serial = s = atomic_fetch_add_explicit(&next_serial, 1, memory_order_relaxed);
    return s;
}

int ll_fairness_env(void)
{
    static int cached = -1; /* benign race: every thread computes the same value */
    int c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (c < 0) {
        c = ll_env_long("LIBLOCK_FAIRNESS", 0, 0, 1) != 0;
        __atomic_store_n(&cached, c, __ATOMIC_RELAXED);
    }
    return c;
}

struct ll_fairness *ll_fairness_create(void)
{
    struct ll_fairness *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->W = (uint64_t)ll_env_long("LIBLOCK_FAIRNESS_WINDOW", 1000, 1, 1000000000L);
    return f;
}

void ll_fairness_free(struct ll_fairness *f)
{
    if (!f)
        return;
    for (unsigned i = 0; i < DIR; i++)
        free(atomic_load_explicit(&f->dir[i], memory_order_relaxed));
    for (unsigned i = 0; i < RDIR; i++)
        free((void *)atomic_load_explicit(&f->rdir[i], memory_order_relaxed));
    free(f);
}

static unsigned hist_bin(uint64_t v)
{
    if (v < HIST_EXACT)
        return (unsigned)v;
    unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= 10 */
    unsigned sub = (unsigned)(v >> (e - 5)) & (HIST_SUB - 1);
    return HIST_EXACT + (e - 10u) * HIST_SUB + sub;
}

/* Value a bin stands for: exact below HIST_EXACT, else the bin's midpoint. */
static double hist_value(unsigned b)
{
    if (b < HIST_EXACT)
        return (double)b;
    unsigned e = 10u + (b - HIST_EXACT) / HIST_SUB, sub = (b - HIST_EXACT) % HIST_SUB;
    double width = (double)(1ull << (e - 5)); /* 5 <= e - 5 <= 58: exact */
    double lo = (double)(HIST_SUB + sub) * width;
    return lo + (width - 1.0) / 2.0;
}

static void retire(struct ll_fairness *f, uint64_t count)
{
    uint64_t n = LD(f->nretired);
    uint64_t c = n / RCHUNK;
    if (c >= RDIR)
        goto lost;
    _Atomic uint64_t *chunk = atomic_load_explicit(&f->rdir[c], memory_order_relaxed);
    if (!chunk) {
        chunk = calloc(RCHUNK, sizeof *chunk);
        if (!chunk)
            goto lost;
        atomic_store_explicit(&f->rdir[c], chunk, memory_order_release);
    }
    ST(chunk[n % RCHUNK], count);
    atomic_store_explicit(&f->nretired, n + 1, memory_order_release);
    return;
lost:
    ST(f->untracked, LD(f->untracked) + count);
}

void ll_fairness_record(struct ll_fairness *f, unsigned id, uint64_t serial)
{
    unsigned c = id / CHUNK;
    if (LL_UNLIKELY(c >= DIR))
        goto untracked;
    struct fair_entry *chunk = atomic_load_explicit(&f->dir[c], memory_order_relaxed);
    if (LL_UNLIKELY(!chunk)) {
        chunk = calloc(CHUNK, sizeof *chunk);
        if (!chunk)
            goto untracked;
        atomic_store_explicit(&f->dir[c], chunk, memory_order_release);
    }
    struct fair_entry *e = &chunk[id % CHUNK];
    if (LL_UNLIKELY(LD(e->serial) != serial)) {
        uint64_t old = LD(e->serial);
        if (old != 0) /* the id belonged to a thread that has exited */
            retire(f, LD(e->count));
        ST(e->count, 0);
        e->last_seq = NONE;
        e->last_window = NONE;
        ST(e->serial, serial);
        INC(f->threads);
    }
    uint64_t seq = LD(f->seq);
    if (e->last_seq != NONE) {
        INC(f->hist[hist_bin(seq - e->last_seq - 1)]);
        INC(f->reacq);
    }
    e->last_seq = seq;
    INC(e->count);
    uint64_t w = seq / f->W;
    if (e->last_window != w) {
        e->last_window = w;
        INC(f->cur_distinct);
    }
    if ((seq + 1) % f->W == 0) { /* this admission completes window w */
        ST(f->lwss_sum, LD(f->lwss_sum) + LD(f->cur_distinct));
        ST(f->cur_distinct, 0);
        INC(f->windows);
    }
    ST(f->seq, seq + 1);
    return;
untracked:
    INC(f->untracked);
}

/* ---- metrics over counts ----------------------------------------------- */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* G = sum_i sum_j |x_i - x_j| / (2 n^2 mean); with x sorted ascending and
 * i counted from 1 this equals (2 sum_i i x_i) / (n sum x) - (n + 1) / n. */
static double gini_sorted(const uint64_t *x, size_t n)
{
    if (n == 0)
        return 0;
    long double sum = 0, wsum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += x[i];
        wsum += (long double)(i + 1) * x[i];
    }
    if (sum == 0)
        return 0;
    double g = (double)(2.0L * wsum / ((long double)n * sum) - (long double)(n + 1) / (long double)n);
    return g < 0 ? 0 : g; /* rounding */
}

double ll_fairness_gini(const uint64_t *counts, size_t n)
{
    if (!counts || n == 0)
        return 0;
    uint64_t *x = malloc(n * sizeof *x);
    if (!x)
        return NAN;
    memcpy(x, counts, n * sizeof *x);
    qsort(x, n, sizeof *x, cmp_u64);
    double g = gini_sorted(x, n);
    free(x);
    return g;
}

/* Square root by Newton's iteration from above (decreasing to the root, so
 * it stops when a step no longer decreases): written here so that the
 * library, and the preload libraries built from it, need no libm (loading
 * it is a tenth of a millisecond at every process start). */
static long double sqrt_ld(long double s)
{
    if (!(s > 0))
        return 0;
    long double x = s > 1 ? s : 1;
    for (int i = 0; i < 4096; i++) {
        long double y = (x + s / x) / 2;
        if (!(y < x))
            break;
        x = y;
    }
    return x;
}

/* Population standard deviation / mean. */
double ll_fairness_rstddev(const uint64_t *counts, size_t n)
{
    if (!counts || n == 0)
        return 0;
    long double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += counts[i];
    long double mean = sum / n;
    if (mean == 0)
        return 0;
    long double ss = 0;
    for (size_t i = 0; i < n; i++) {
        long double d = (long double)counts[i] - mean;
        ss += d * d;
    }
    return (double)(sqrt_ld(ss / n) / mean);
}

/* ---- public API ------------------------------------------------------------ */
LL_EXPORT int liblock_attr_setfairness(liblock_attr_t *attr, int on)
{
    if (!attr || attr->_magic != LL_ATTR_MAGIC || (on != 0 && on != 1))
        return EINVAL;
    attr->_fairness = on;
    return 0;
}

LL_EXPORT int liblock_attr_getfairness(const liblock_attr_t *attr, int *on)
{
    if (!attr || attr->_magic != LL_ATTR_MAGIC || !on)
        return EINVAL;
    *on = attr->_fairness;
    return 0;
}

LL_EXPORT int liblock_fairness(const liblock_t *l, liblock_fairness_t *out)
{
    if (!l || l->_magic != LL_LOCK_MAGIC || !out)
        return EINVAL;
    struct ll_fairness *f = l->_stats;
    if (!f)
        return ENOTSUP;
    liblock_fairness_t r;
    memset(&r, 0, sizeof r);
    r.window = f->W;
    r.acquisitions = LD(f->seq);
    r.untracked = LD(f->untracked);
    r.windows = LD(f->windows);
    uint64_t cur = LD(f->cur_distinct);
    r.avg_lwss = r.windows ? (double)LD(f->lwss_sum) / (double)r.windows : (double)cur;

    /* MTTR: median of the histogram (mean of the two middle samples). */
    uint64_t total = 0;
    for (unsigned b = 0; b < HIST_NBINS; b++)
        total += LD(f->hist[b]);
    r.reacquisitions = total;
    r.mttr = -1;
    if (total) {
        uint64_t lo_rank = (total - 1) / 2, hi_rank = total / 2, seen = 0;
        double lo = -1, hi = -1;
        for (unsigned b = 0; b < HIST_NBINS && hi < 0; b++) {
            uint64_t h = LD(f->hist[b]);
            if (!h)
                continue;
            if (lo < 0 && lo_rank < seen + h)
                lo = hist_value(b);
            if (hi_rank < seen + h)
                hi = hist_value(b);
            seen += h;
        }
        if (lo >= 0 && hi >= 0)
            r.mttr = (lo + hi) / 2.0;
    }

    /* Per-thread counts: live entries, then threads whose id was reused. */
    size_t cap = 256, n = 0;
    uint64_t *x = malloc(cap * sizeof *x);
    if (!x)
        return ENOMEM;
    for (unsigned c = 0; c < DIR; c++) {
        struct fair_entry *chunk = atomic_load_explicit(&f->dir[c], memory_order_acquire);
        if (!chunk)
            continue;
        for (unsigned i = 0; i < CHUNK; i++) {
            if (LD(chunk[i].serial) == 0)
                continue;
            uint64_t v = LD(chunk[i].count);
            if (v == 0)
                continue; /* claimed by a reset race; no admission yet */
            if (n == cap) {
                uint64_t *nx = realloc(x, 2 * cap * sizeof *x);
                if (!nx) {
                    free(x);
                    return ENOMEM;
                }
                x = nx;
                cap *= 2;
            }
            x[n++] = v;
        }
    }
    uint64_t nret = atomic_load_explicit(&f->nretired, memory_order_acquire);
    for (uint64_t k = 0; k < nret; k++) {
        _Atomic uint64_t *chunk = atomic_load_explicit(&f->rdir[k / RCHUNK], memory_order_acquire);
        if (!chunk)
            break;
        uint64_t v = LD(chunk[k % RCHUNK]);
        if (v == 0)
            continue;
        if (n == cap) {
            uint64_t *nx = realloc(x, 2 * cap * sizeof *x);
            if (!nx) {
                free(x);
                return ENOMEM;
            }
            x = nx;
            cap *= 2;
        }
        x[n++] = v;
    }
    qsort(x, n, sizeof *x, cmp_u64);
    r.threads = n;
    r.gini = gini_sorted(x, n);
    r.rstddev = ll_fairness_rstddev(x, n);
    r.min_count = n ? x[0] : 0;
    r.max_count = n ? x[n - 1] : 0;
    free(x);
    *out = r;
    return 0;
}

static void clear(struct ll_fairness *f)
{
    for (unsigned c = 0; c < DIR; c++) {
        struct fair_entry *chunk = atomic_load_explicit(&f->dir[c], memory_order_relaxed);
        if (!chunk)
            continue;
        for (unsigned i = 0; i < CHUNK; i++) {
            ST(chunk[i].serial, 0);
            ST(chunk[i].count, 0);
            chunk[i].last_seq = NONE;
            chunk[i].last_window = NONE;
        }
    }
    for (unsigned b = 0; b < HIST_NBINS; b++)
        ST(f->hist[b], 0);
    ST(f->nretired, 0);
    ST(f->seq, 0);
    ST(f->untracked, 0);
    ST(f->threads, 0);
    ST(f->windows, 0);
    ST(f->lwss_sum, 0);
    ST(f->cur_distinct, 0);
    ST(f->reacq, 0);
}

LL_EXPORT int liblock_fairness_reset(liblock_t *l)
{
    if (!l || l->_magic != LL_LOCK_MAGIC)
        return EINVAL;
    struct ll_fairness *f = l->_stats;
    if (!f)
        return ENOTSUP;
    ll_thread_t *self = ll_self();
    if (!self)
        return ENOMEM;
    if (ll_hold_find(self, l)) { /* the caller holds it: recorders are excluded */
        clear(f);
        return 0;
    }
    int r = ll_api_lock(l);
    if (r)
        return r;
    clear(f);
    ll_api_unlock(l);
    return 0;
}

/* ---- execute for delegating algorithms --------------------------------------- */
struct fair_cs {
    void *(*cs)(void *);
    void *arg;
    struct ll_fairness *f;
    unsigned id;
    uint64_t serial;
    int tracked;
};

static void *fair_cs_run(void *p)
{
    struct fair_cs *w = p;
    if (w->tracked)
        ll_fairness_record(w->f, w->id, w->serial);
    else
        INC(w->f->untracked);
    return w->cs(w->arg);
}

void *ll_fairness_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    ll_thread_t *self = ll_self();
    struct fair_cs w = {cs, arg, l->_stats, self ? self->id : 0, ll_fairness_serial(), self != NULL};
    return LL_OPS(l)->execute(l, fair_cs_run, &w);
}
