/*
 * malthus - the workloads of D. Dice, "Malthusian Locks", EuroSys 2017
 * (extended version, arXiv:1511.06035), section 6, on any liblock
 * algorithm and waiting policy, fixed-time, reporting throughput, the
 * fairness metrics of the lock (docs/fairness.md), voluntary context
 * switches and CPU utilisation (getrusage), with a ping-pong probe before
 * and after (bench/probe.h).  One run per invocation; `liblock bench malthus`
 * (tools/liblock_cli/_malthus.py) interleaves runs and summarises them.
 *
 * usage: malthus -w WORKLOAD [-l LOCK] [-p POLICY] [-t THREADS] [-d SECONDS]
 *                [-o json|csv] [options]       (malthus -h for all of them)
 *
 * Workloads (parameters default to the paper's; choices the paper leaves
 * open are listed in docs/malthusian-bench.md):
 *   randarray          CS: 100 random loads from a shared 1 MB array;
 *                      NCS: 400 random loads from a private 1 MB array.
 *   ringwalker         private ring of 50 elements of 8 KB (one touched
 *                      line per element at a random offset); NCS walks 50
 *                      private elements, CS advances 10 on a shared ring.
 *   producer-consumer  COZ bounded queue (10,000) under the lock with two
 *                      condition variables; 3 consumers, -t producers.
 *   keymap             CS updates a central hash map (10M keys pre-inserted)
 *                      with a key of the thread's 1000-key keyset, replaced
 *                      with probability 0.1; NCS: 1000 steps of mt19937.
 *   lrucache           as keymap, on a shared LRU cache of 10,000 entries,
 *                      keys in [0, 1M), replacement probability 0.01.
 *   bufferpool         pool of 5 buffers of 1 MB (LIFO) under the lock with
 *                      a NotEmpty condition variable; take one, swap 500
 *                      random words with a private buffer, give it back,
 *                      update 5000 random private words.
 *
 * Measurement window: the workers start together (barrier); the main
 * thread reads getrusage(RUSAGE_SELF), the clock and the lock's fairness
 * history at the start and at the end of the window, and the per-thread
 * operation counters at the end.  Workers then finish the operation they
 * are in (the "drain"); if that takes longer than the grace period (-g) the
 * record says "drained": false and the process exits without the
 * end-of-run consistency checks.  Exit status: 0 ok, 1 a consistency check
 * failed, 2 bad usage, 3 the lock cannot run this workload (policy or
 * condition variables unsupported), 4 out of memory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include "liblock.h"
#include "probe.h"

/* ======================================================================
 * configuration
 * ====================================================================== */
enum { W_RANDARRAY, W_RINGWALKER, W_PC, W_KEYMAP, W_LRU, W_BUFPOOL, W__N };
static const char *const wnames[W__N] = {"randarray", "ringwalker", "producer-consumer",
                                         "keymap", "lrucache", "bufferpool"};

static struct cfg {
    int workload;
    const char *lock;
    const char *policy_name; /* as given, or NULL */
    int policy;
    int threads;
    double duration, grace;
    int csv, header, probe, fairness;
    uint64_t seed;
    /* randarray */
    long cs_loads, ncs_loads, array_kb;
    /* ringwalker */
    long ring, ring_cs, elem_bytes;
    /* producer-consumer */
    int consumers;
    long queue;
    /* keymap / lrucache */
    long keys, keyset, ncs_steps, lru_capacity;
    double replace;
    /* bufferpool */
    long buffers, buffer_kb, swaps, updates;
    double cond_fifo; /* < 0: the condition variable's default */
} C = {
    .workload = -1, .lock = "mcs", .threads = 4, .duration = 1.0, .grace = 5.0, .header = 1, .probe = 1,
    .fairness = 1, .seed = 1, .cs_loads = 100, .ncs_loads = 400, .array_kb = 1024, .ring = 50, .ring_cs = 10,
    .elem_bytes = 8192, .consumers = 3, .queue = 10000, .keys = -1, .keyset = 1000, .ncs_steps = 1000,
    .lru_capacity = 10000, .replace = -1, .buffers = 5, .buffer_kb = 1024, .swaps = 500, .updates = 5000,
    .cond_fifo = -1,
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: malthus -w WORKLOAD [-l LOCK] [-p POLICY] [-t THREADS] [-d SECONDS] [-o json|csv] [options]\n"
            "  -w WORKLOAD   randarray | ringwalker | producer-consumer | keymap | lrucache | bufferpool\n"
            "  -l LOCK       algorithm name (liblock list), default mcs\n"
            "  -p POLICY     spin | spin-then-park | yield | park (default: the algorithm's)\n"
            "  -t THREADS    worker threads 1..4096, default 4 (producer-consumer: producers)\n"
            "  -d SECONDS    measurement window, default 1\n"
            "  -g SECONDS    grace for workers to finish after the window, default 5\n"
            "  -o FORMAT     json (one JSON object per line, default) or csv\n"
            "  -H            csv without the header line\n"
            "  -n            no ping-pong probe\n"
            "  -F 0|1        fairness instrumentation of the lock (default 1)\n"
            "  -s SEED       random seed (default 1)\n"
            " workload parameters (defaults are the paper's):\n"
            "  --cs-loads N --ncs-loads N --array-kb N            randarray (100, 400, 1024)\n"
            "  --ring N --ring-cs N --elem-bytes N                ringwalker (50, 10, 8192)\n"
            "  --consumers N --queue N                            producer-consumer (3, 10000)\n"
            "  --keys N --keyset N --replace P --ncs-steps N      keymap (10000000, 1000, 0.1, 1000)\n"
            "  --keys N --lru-capacity N --replace P              lrucache (1000000, 10000, 0.01)\n"
            "  --buffers N --buffer-kb N --swaps N --updates N    bufferpool (5, 1024, 500, 5000)\n"
            "  --cond-fifo P   condition variables: append probability (1 FIFO, 0 LIFO)\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "malthus: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (malthus -h for usage)\n");
    return 2;
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi))
        return -1;
    *out = v;
    return 0;
}

/* ======================================================================
 * shared run state
 * ====================================================================== */
struct worker {
    _Alignas(64) _Atomic uint64_t ops; /* written by the worker only */
    int idx;
    int role; /* producer-consumer: 1 consumer, 0 producer */
    pthread_t th;
    uint64_t rng;
    uint64_t sink;
    void *priv;      /* private data of the workload */
    void *priv2;
    long cursor;
    uint64_t waits;  /* condition waits (under the lock) */
    struct mt *mt;
};

static liblock_t LOCK;
static liblock_cond_t COND_A, COND_B; /* not-empty / not-full */
static _Atomic int stop_flag;
static pthread_barrier_t start_bar;
static struct worker *W;
static int NW; /* workers */
static _Atomic int setup_failed;

static inline int stopping(void) { return atomic_load_explicit(&stop_flag, memory_order_relaxed); }
/* One operation done.  Only this worker writes its counter; the main thread
 * reads it (relaxed: a count, ordered by nothing else). */
static inline void count_op(struct worker *w)
{
    atomic_store_explicit(&w->ops, atomic_load_explicit(&w->ops, memory_order_relaxed) + 1, memory_order_relaxed);
}

static inline uint64_t xs(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1Dull;
}
/* uniform in [0, n) for n < 2^32 */
static inline uint32_t below(uint64_t r, uint64_t n) { return (uint32_t)(((r >> 32) * n) >> 32); }

static void *big_alloc(size_t bytes)
{
    size_t al = 2u << 20;
    size_t sz = (bytes + al - 1) & ~(al - 1);
    void *p = aligned_alloc(al, sz);
    if (p)
        madvise(p, sz, MADV_HUGEPAGE); /* the paper used large pages; best effort */
    return p;
}

/* ---- mt19937 (32-bit Mersenne Twister, Matsumoto & Nishimura 1998) ---- */
struct mt {
    uint32_t s[624];
    int i;
};
static void mt_seed(struct mt *m, uint32_t seed)
{
    m->s[0] = seed;
    for (int i = 1; i < 624; i++)
        m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->i = 624;
}
static uint32_t mt_next(struct mt *m)
{
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
            m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}
static inline uint32_t mt_below(struct mt *m, uint32_t n) { return (uint32_t)(((uint64_t)mt_next(m) * n) >> 32); }
static inline double mt_unit(struct mt *m) { return mt_next(m) * (1.0 / 4294967296.0); }

/* ======================================================================
 * RandArray
 * ====================================================================== */
static uint32_t *ra_shared;
static size_t ra_n;

static int ra_setup(void)
{
    ra_n = (size_t)C.array_kb * 1024 / sizeof(uint32_t);
    ra_shared = big_alloc(ra_n * sizeof(uint32_t));
    if (!ra_shared)
        return ENOMEM;
    uint64_t s = C.seed * 7 + 3;
    for (size_t i = 0; i < ra_n; i++)
        ra_shared[i] = (uint32_t)xs(&s);
    return 0;
}
static int ra_thread_init(struct worker *w)
{
    uint32_t *a = big_alloc(ra_n * sizeof(uint32_t));
    if (!a)
        return ENOMEM;
    for (size_t i = 0; i < ra_n; i++)
        a[i] = (uint32_t)xs(&w->rng);
    w->priv = a;
    return 0;
}
static void ra_loop(struct worker *w)
{
    const uint32_t *priv = w->priv;
    uint64_t r = w->rng, sum = 0;
    const size_t n = ra_n;
    const long cs = C.cs_loads, ncs = C.ncs_loads;
    while (!stopping()) {
        liblock_lock(&LOCK);
        for (long i = 0; i < cs; i++)
            sum += ra_shared[below(xs(&r), n)];
        liblock_unlock(&LOCK);
        count_op(w);
        for (long i = 0; i < ncs; i++)
            sum += priv[below(xs(&r), n)];
    }
    w->rng = r;
    w->sink = sum;
}

/* ======================================================================
 * RingWalker
 * ====================================================================== */
struct rnode {
    struct rnode *next;
    uint64_t val;
};
static struct rnode *rw_cursor; /* shared ring position, guarded by LOCK */
static uint64_t rw_steps;       /* CS steps taken, guarded by LOCK */

/* A ring of n elements of elem_bytes each; the node of element i sits at a
 * random 64-byte-aligned offset ("colour") inside its element, and the
 * elements are linked in a random order. */
static struct rnode *ring_build(long n, uint64_t *rng)
{
    char *mem = big_alloc((size_t)n * (size_t)C.elem_bytes);
    long *perm = malloc((size_t)n * sizeof *perm);
    if (!mem || !perm) {
        free(mem);
        free(perm);
        return NULL;
    }
    struct rnode **nodes = malloc((size_t)n * sizeof *nodes);
    if (!nodes) {
        free(mem);
        free(perm);
        return NULL;
    }
    long lines = C.elem_bytes / 64;
    for (long i = 0; i < n; i++) {
        nodes[i] = (struct rnode *)(mem + (size_t)i * (size_t)C.elem_bytes + 64 * (size_t)below(xs(rng), (uint64_t)lines));
        nodes[i]->val = (uint64_t)i;
        perm[i] = i;
    }
    for (long i = n - 1; i > 0; i--) { /* Fisher-Yates */
        long j = (long)below(xs(rng), (uint64_t)i + 1);
        long t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (long i = 0; i < n; i++)
        nodes[perm[i]]->next = nodes[perm[(i + 1) % n]];
    struct rnode *head = nodes[perm[0]];
    free(nodes);
    free(perm);
    return head;
}
static int rw_setup(void)
{
    uint64_t s = C.seed * 11 + 5;
    rw_cursor = ring_build(C.ring, &s);
    return rw_cursor ? 0 : ENOMEM;
}
static int rw_thread_init(struct worker *w)
{
    w->priv = ring_build(C.ring, &w->rng);
    return w->priv ? 0 : ENOMEM;
}
static void rw_loop(struct worker *w)
{
    struct rnode *p = w->priv;
    uint64_t sum = 0;
    const long cs = C.ring_cs, ncs = C.ring;
    while (!stopping()) {
        liblock_lock(&LOCK);
        struct rnode *q = rw_cursor;
        for (long i = 0; i < cs; i++) {
            sum += q->val;
            q = q->next;
        }
        rw_cursor = q;
        rw_steps += (uint64_t)cs;
        liblock_unlock(&LOCK);
        count_op(w);
        for (long i = 0; i < ncs; i++) {
            sum += p->val;
            p = p->next;
        }
    }
    w->priv = p;
    w->sink = sum;
}

/* ======================================================================
 * producer-consumer (COZ): bounded queue, not-empty (A) / not-full (B)
 * ====================================================================== */
static struct {
    uint64_t *buf;
    long cap, head, count;
    uint64_t produced, consumed, psum, csum, pwaits, cwaits; /* guarded by LOCK */
} Q;

static int pc_setup(void)
{
    Q.cap = C.queue;
    Q.buf = calloc((size_t)Q.cap, sizeof *Q.buf);
    return Q.buf ? 0 : ENOMEM;
}
static void pc_loop(struct worker *w)
{
    uint64_t next = ((uint64_t)w->idx << 40) + 1;
    while (!stopping()) {
        liblock_lock(&LOCK);
        if (w->role) { /* consumer */
            while (Q.count == 0 && !stopping()) {
                Q.cwaits++;
                liblock_cond_wait(&COND_A, &LOCK);
            }
            if (Q.count == 0) {
                liblock_unlock(&LOCK);
                break;
            }
            uint64_t v = Q.buf[Q.head];
            Q.head = (Q.head + 1) % Q.cap;
            Q.count--;
            Q.consumed++;
            Q.csum += v;
            liblock_cond_signal(&COND_B);
            liblock_unlock(&LOCK);
            w->sink += v;
        } else {
            while (Q.count == Q.cap && !stopping()) {
                Q.pwaits++;
                liblock_cond_wait(&COND_B, &LOCK);
            }
            if (Q.count == Q.cap) {
                liblock_unlock(&LOCK);
                break;
            }
            Q.buf[(Q.head + Q.count) % Q.cap] = next;
            Q.count++;
            Q.produced++;
            Q.psum += next;
            next++;
            liblock_cond_signal(&COND_A);
            liblock_unlock(&LOCK);
        }
        count_op(w);
    }
}

/* ======================================================================
 * keymap: open-addressing hash map int -> int (keys 0..keys-1 present)
 * ====================================================================== */
struct kv {
    int32_t key, val;
};
static struct kv *km_tab;
static uint64_t km_mask;
static int km_bits;
static uint64_t km_inserts; /* guarded by LOCK after setup */

static inline uint64_t km_hash(int32_t k) { return ((uint32_t)k * 2654435761u) >> (32 - km_bits); }

static void km_update(int32_t key)
{
    uint64_t i = km_hash(key);
    for (;;) {
        struct kv *e = &km_tab[i];
        if (e->key == key) {
            e->val++;
            return;
        }
        if (e->key < 0) { /* absent: insert (never happens once all keys are in) */
            e->key = key;
            e->val = 1;
            km_inserts++;
            return;
        }
        i = (i + 1) & km_mask;
    }
}

static int km_setup(void)
{
    km_bits = 1;
    while ((1ull << km_bits) < (uint64_t)C.keys * 4 / 3 + 1)
        km_bits++;
    if (km_bits > 32)
        return EINVAL;
    km_mask = (1ull << km_bits) - 1;
    km_tab = big_alloc(sizeof *km_tab << km_bits);
    if (!km_tab)
        return ENOMEM;
    memset(km_tab, 0xff, sizeof *km_tab << km_bits);
    for (long k = 0; k < C.keys; k++) { /* pre-insert every key, value 0 */
        uint64_t i = km_hash((int32_t)k);
        while (km_tab[i].key >= 0)
            i = (i + 1) & km_mask;
        km_tab[i].key = (int32_t)k;
        km_tab[i].val = 0;
    }
    return 0;
}

static int keyset_init(struct worker *w, long range)
{
    w->mt = malloc(sizeof *w->mt);
    int32_t *ks = malloc((size_t)C.keyset * sizeof *ks);
    if (!w->mt || !ks)
        return ENOMEM;
    mt_seed(w->mt, (uint32_t)(C.seed * 1000003u + (uint64_t)w->idx * 7919u + 1));
    for (long i = 0; i < C.keyset; i++)
        ks[i] = (int32_t)mt_below(w->mt, (uint32_t)range);
    w->priv = ks;
    return 0;
}
static int km_thread_init(struct worker *w) { return keyset_init(w, C.keys); }

/* Under the lock (keymap, LRUCache): the key of this operation, drawn from
 * the thread's key set, which is refreshed with probability C.replace. */
static inline int32_t keyset_pick(struct worker *w)
{
    int32_t *ks = w->priv;
    uint32_t i = mt_below(w->mt, (uint32_t)C.keyset);
    if (mt_unit(w->mt) < C.replace)
        ks[i] = (int32_t)mt_below(w->mt, (uint32_t)C.keys);
    return ks[i];
}

static void km_loop(struct worker *w)
{
    struct mt *m = w->mt;
    uint64_t sum = 0;
    while (!stopping()) {
        liblock_lock(&LOCK);
        km_update(keyset_pick(w));
        liblock_unlock(&LOCK);
        count_op(w);
        for (long k = 0; k < C.ncs_steps; k++)
            sum += mt_next(m);
    }
    w->sink = sum;
}

/* ======================================================================
 * LRUCache: hash table + doubly linked recency list, fixed capacity
 * ====================================================================== */
struct lnode {
    int32_t key, val;
    struct lnode *hnext;       /* bucket chain */
    struct lnode *prev, *next; /* recency list, most recent first */
};
static struct {
    struct lnode **bucket;
    uint32_t bmask;
    struct lnode *pool, *free_list;
    struct lnode head; /* sentinel: head.next = most recent, head.prev = least */
    long size;
    uint64_t hits, misses; /* guarded by LOCK */
} L;

static inline uint32_t lru_hash(int32_t k) { return ((uint32_t)k * 2654435761u) & L.bmask; }
static inline void list_unlink(struct lnode *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
}
static inline void list_push_front(struct lnode *n)
{
    n->next = L.head.next;
    n->prev = &L.head;
    L.head.next->prev = n;
    L.head.next = n;
}
static void hash_remove(struct lnode *n)
{
    struct lnode **pp = &L.bucket[lru_hash(n->key)];
    while (*pp != n)
        pp = &(*pp)->hnext;
    *pp = n->hnext;
}

static int32_t lru_lookup(int32_t key)
{
    for (struct lnode *n = L.bucket[lru_hash(key)]; n; n = n->hnext)
        if (n->key == key) {
            L.hits++;
            list_unlink(n);
            list_push_front(n);
            return n->val;
        }
    L.misses++;
    struct lnode *n = L.free_list;
    if (n) {
        L.free_list = n->hnext;
        L.size++;
    } else { /* full: evict the least recently used */
        n = L.head.prev;
        list_unlink(n);
        hash_remove(n);
    }
    n->key = key;
    n->val = key; /* a miss installs key -> key */
    uint32_t b = lru_hash(key);
    n->hnext = L.bucket[b];
    L.bucket[b] = n;
    list_push_front(n);
    return n->val;
}

static int lru_setup(void)
{
    uint32_t nb = 1;
    while (nb < (uint64_t)C.lru_capacity * 2)
        nb <<= 1;
    L.bmask = nb - 1;
    L.bucket = calloc(nb, sizeof *L.bucket);
    L.pool = calloc((size_t)C.lru_capacity, sizeof *L.pool);
    if (!L.bucket || !L.pool)
        return ENOMEM;
    for (long i = 0; i < C.lru_capacity; i++) {
        L.pool[i].hnext = L.free_list;
        L.free_list = &L.pool[i];
    }
    L.head.next = L.head.prev = &L.head;
    return 0;
}
static int lru_thread_init(struct worker *w) { return keyset_init(w, C.keys); }
static void lru_loop(struct worker *w)
{
    struct mt *m = w->mt;
    uint64_t sum = 0;
    while (!stopping()) {
        liblock_lock(&LOCK);
        sum += (uint32_t)lru_lookup(keyset_pick(w));
        liblock_unlock(&LOCK);
        count_op(w);
        for (long k = 0; k < C.ncs_steps; k++)
            sum += mt_next(m);
    }
    w->sink = sum;
}
static int lru_check(char *msg, size_t len, uint64_t ops)
{
    long n = 0;
    for (struct lnode *p = L.head.next; p != &L.head; p = p->next, n++) {
        if (p->val != p->key) {
            snprintf(msg, len, "lrucache: entry %d holds %d", p->key, p->val);
            return -1;
        }
        struct lnode *q = L.bucket[lru_hash(p->key)];
        while (q && q != p)
            q = q->hnext;
        if (!q) {
            snprintf(msg, len, "lrucache: key %d on the list but not in the table", p->key);
            return -1;
        }
    }
    long inhash = 0;
    for (uint32_t b = 0; b <= L.bmask; b++)
        for (struct lnode *q = L.bucket[b]; q; q = q->hnext)
            inhash++;
    if (n != L.size || inhash != L.size || L.size > C.lru_capacity) {
        snprintf(msg, len, "lrucache: list %ld, table %ld, size %ld, capacity %ld", n, inhash, L.size, C.lru_capacity);
        return -1;
    }
    if (L.hits + L.misses != ops) {
        snprintf(msg, len, "lrucache: hits %llu + misses %llu != operations %llu", (unsigned long long)L.hits,
                 (unsigned long long)L.misses, (unsigned long long)ops);
        return -1;
    }
    return 0;
}

/* ======================================================================
 * BufferPool: LIFO stack of buffers, NotEmpty condition (A)
 * ====================================================================== */
static struct {
    uint32_t **stack;
    long n;
    uint64_t takes, returns, waits; /* guarded by LOCK */
    uint32_t **all;
} B;
static size_t bp_words;

static int bp_setup(void)
{
    bp_words = (size_t)C.buffer_kb * 1024 / sizeof(uint32_t);
    B.stack = calloc((size_t)C.buffers, sizeof *B.stack);
    B.all = calloc((size_t)C.buffers, sizeof *B.all);
    if (!B.stack || !B.all)
        return ENOMEM;
    uint64_t s = C.seed * 13 + 1;
    for (long i = 0; i < C.buffers; i++) {
        uint32_t *b = big_alloc(bp_words * sizeof *b);
        if (!b)
            return ENOMEM;
        for (size_t k = 0; k < bp_words; k++)
            b[k] = (uint32_t)xs(&s);
        B.all[i] = B.stack[B.n++] = b;
    }
    return 0;
}
static int bp_thread_init(struct worker *w)
{
    uint32_t *p = big_alloc(bp_words * sizeof *p);
    if (!p)
        return ENOMEM;
    for (size_t k = 0; k < bp_words; k++)
        p[k] = (uint32_t)xs(&w->rng);
    w->priv = p;
    return 0;
}
static void bp_loop(struct worker *w)
{
    uint32_t *mine = w->priv;
    uint64_t r = w->rng;
    const size_t n = bp_words;
    while (!stopping()) {
        liblock_lock(&LOCK);
        while (B.n == 0 && !stopping()) {
            B.waits++;
            liblock_cond_wait(&COND_A, &LOCK);
        }
        if (B.n == 0) {
            liblock_unlock(&LOCK);
            break;
        }
        uint32_t *b = B.stack[--B.n]; /* LIFO: the most recently returned */
        B.takes++;
        liblock_unlock(&LOCK);
        for (long k = 0; k < C.swaps; k++) {
            size_t i = below(xs(&r), n);
            uint32_t t = b[i];
            b[i] = mine[i];
            mine[i] = t;
        }
        liblock_lock(&LOCK);
        B.stack[B.n++] = b;
        B.returns++;
        liblock_cond_signal(&COND_A);
        liblock_unlock(&LOCK);
        count_op(w);
        for (long k = 0; k < C.updates; k++)
            mine[below(xs(&r), n)] += (uint32_t)k;
    }
    w->rng = r;
}

/* ======================================================================
 * harness
 * ====================================================================== */
struct workload {
    int (*setup)(void);
    int (*thread_init)(struct worker *);
    void (*loop)(struct worker *);
    int uses_cond;
};
static const struct workload WL[W__N] = {
    [W_RANDARRAY] = {ra_setup, ra_thread_init, ra_loop, 0},
    [W_RINGWALKER] = {rw_setup, rw_thread_init, rw_loop, 0},
    [W_PC] = {pc_setup, NULL, pc_loop, 1},
    [W_KEYMAP] = {km_setup, km_thread_init, km_loop, 0},
    [W_LRU] = {lru_setup, lru_thread_init, lru_loop, 0},
    [W_BUFPOOL] = {bp_setup, bp_thread_init, bp_loop, 1},
};

static void *worker_main(void *p)
{
    struct worker *w = p;
    const struct workload *wl = &WL[C.workload];
    if (wl->thread_init && wl->thread_init(w) != 0)
        atomic_store(&setup_failed, 1);
    pthread_barrier_wait(&start_bar);
    if (!atomic_load(&setup_failed))
        wl->loop(w);
    return NULL;
}

/* ---- output record ---- */
struct field {
    const char *name;
    char val[80];
    int kind; /* 0 number, 1 string, 2 null */
};
static struct field F[128];
static int NF;
static void f_str(const char *n, const char *v)
{
    F[NF].name = n;
    F[NF].kind = 1;
    snprintf(F[NF++].val, sizeof F[0].val, "%s", v ? v : "");
}
static void f_num(const char *n, const char *fmt, double v)
{
    F[NF].name = n;
    F[NF].kind = isfinite(v) ? 0 : 2;
    snprintf(F[NF++].val, sizeof F[0].val, fmt, v);
}
static void f_u64(const char *n, uint64_t v)
{
    F[NF].name = n;
    F[NF].kind = 0;
    snprintf(F[NF++].val, sizeof F[0].val, "%llu", (unsigned long long)v);
}
static void f_null(const char *n)
{
    F[NF].name = n;
    F[NF].kind = 2;
    F[NF++].val[0] = 0;
}
static void emit(void)
{
    if (C.csv) {
        if (C.header)
            for (int i = 0; i < NF; i++)
                printf("%s%s", F[i].name, i + 1 < NF ? "," : "\n");
        for (int i = 0; i < NF; i++)
            printf("%s%s", F[i].kind == 2 ? "" : F[i].val, i + 1 < NF ? "," : "\n");
    } else {
        putchar('{');
        for (int i = 0; i < NF; i++) {
            printf("\"%s\": ", F[i].name);
            if (F[i].kind == 2)
                printf("null");
            else if (F[i].kind == 1) {
                putchar('"');
                for (const char *s = F[i].val; *s; s++) {
                    if (*s == '"' || *s == '\\')
                        putchar('\\');
                    putchar(*s);
                }
                putchar('"');
            } else
                printf("%s", F[i].val);
            printf(i + 1 < NF ? ", " : "}\n");
        }
    }
    fflush(stdout);
}

static double tv(struct timeval t) { return (double)t.tv_sec + (double)t.tv_usec * 1e-6; }

enum {
    O_CS_LOADS = 256, O_NCS_LOADS, O_ARRAY_KB, O_RING, O_RING_CS, O_ELEM_BYTES, O_CONSUMERS, O_QUEUE, O_KEYS,
    O_KEYSET, O_REPLACE, O_NCS_STEPS, O_LRU_CAP, O_BUFFERS, O_BUFFER_KB, O_SWAPS, O_UPDATES, O_COND_FIFO
};

int main(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"cs-loads", 1, 0, O_CS_LOADS}, {"ncs-loads", 1, 0, O_NCS_LOADS}, {"array-kb", 1, 0, O_ARRAY_KB},
        {"ring", 1, 0, O_RING}, {"ring-cs", 1, 0, O_RING_CS}, {"elem-bytes", 1, 0, O_ELEM_BYTES},
        {"consumers", 1, 0, O_CONSUMERS}, {"queue", 1, 0, O_QUEUE}, {"keys", 1, 0, O_KEYS},
        {"keyset", 1, 0, O_KEYSET}, {"replace", 1, 0, O_REPLACE}, {"ncs-steps", 1, 0, O_NCS_STEPS},
        {"lru-capacity", 1, 0, O_LRU_CAP}, {"buffers", 1, 0, O_BUFFERS}, {"buffer-kb", 1, 0, O_BUFFER_KB},
        {"swaps", 1, 0, O_SWAPS}, {"updates", 1, 0, O_UPDATES}, {"cond-fifo", 1, 0, O_COND_FIFO},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int opt;
    long v;
    double d;
    while ((opt = getopt_long(argc, argv, "w:l:p:t:d:g:o:HnF:s:h", lopts, NULL)) != -1) {
        switch (opt) {
        case 'w':
            C.workload = -1;
            for (int i = 0; i < W__N; i++)
                if (strcmp(optarg, wnames[i]) == 0)
                    C.workload = i;
            if (strcmp(optarg, "pc") == 0)
                C.workload = W_PC;
            if (C.workload < 0)
                return bad("unknown workload '%s'", optarg);
            break;
        case 'l': {
            liblock_algorithm_info_t in;
            if (liblock_algorithm_info(optarg, &in) != 0)
                return bad("unknown lock '%s' (liblock list shows them)", optarg);
            C.lock = optarg;
            break;
        }
        case 'p':
            if (liblock_wait_parse(optarg, &C.policy) != 0)
                return bad("unknown waiting policy '%s'", optarg);
            C.policy_name = optarg;
            break;
        case 't':
            if (parse_long(optarg, 1, 4096, &v))
                return bad("-t wants a thread count in 1..4096, not '%s'", optarg);
            C.threads = (int)v;
            break;
        case 'd':
            if (parse_double(optarg, 0.01, 3600, &C.duration))
                return bad("-d wants seconds in 0.01..3600, not '%s'", optarg);
            break;
        case 'g':
            if (parse_double(optarg, 0, 3600, &C.grace))
                return bad("-g wants seconds in 0..3600, not '%s'", optarg);
            break;
        case 'o':
            if (strcmp(optarg, "csv") == 0)
                C.csv = 1;
            else if (strcmp(optarg, "json") == 0)
                C.csv = 0;
            else
                return bad("-o wants json or csv, not '%s'", optarg);
            break;
        case 'H':
            C.header = 0;
            break;
        case 'n':
            C.probe = 0;
            break;
        case 'F':
            if (parse_long(optarg, 0, 1, &v))
                return bad("-F wants 0 or 1, not '%s'", optarg);
            C.fairness = (int)v;
            break;
        case 's':
            if (parse_long(optarg, 0, 1L << 40, &v))
                return bad("-s wants a seed in 0..2^40, not '%s'", optarg);
            C.seed = (uint64_t)v;
            break;
#define LONGOPT(code, field, lo, hi, what)                                     \
    case code:                                                                 \
        if (parse_long(optarg, lo, hi, &v))                                    \
            return bad("--" what " wants an integer in " #lo ".." #hi ", not '%s'", optarg); \
        C.field = v;                                                           \
        break;
            LONGOPT(O_CS_LOADS, cs_loads, 0, 100000000, "cs-loads")
            LONGOPT(O_NCS_LOADS, ncs_loads, 0, 100000000, "ncs-loads")
            LONGOPT(O_ARRAY_KB, array_kb, 1, 4194304, "array-kb")
            LONGOPT(O_RING, ring, 1, 1000000, "ring")
            LONGOPT(O_RING_CS, ring_cs, 0, 1000000, "ring-cs")
            LONGOPT(O_ELEM_BYTES, elem_bytes, 64, 1048576, "elem-bytes")
            LONGOPT(O_QUEUE, queue, 1, 100000000, "queue")
            LONGOPT(O_KEYS, keys, 1, 1000000000, "keys")
            LONGOPT(O_KEYSET, keyset, 1, 100000000, "keyset")
            LONGOPT(O_NCS_STEPS, ncs_steps, 0, 100000000, "ncs-steps")
            LONGOPT(O_LRU_CAP, lru_capacity, 1, 100000000, "lru-capacity")
            LONGOPT(O_BUFFERS, buffers, 1, 4096, "buffers")
            LONGOPT(O_BUFFER_KB, buffer_kb, 1, 1048576, "buffer-kb")
            LONGOPT(O_SWAPS, swaps, 0, 100000000, "swaps")
            LONGOPT(O_UPDATES, updates, 0, 100000000, "updates")
        case O_CONSUMERS:
            if (parse_long(optarg, 1, 4096, &v))
                return bad("--consumers wants an integer in 1..4096, not '%s'", optarg);
            C.consumers = (int)v;
            break;
        case O_REPLACE:
            if (parse_double(optarg, 0, 1, &d))
                return bad("--replace wants a probability in 0..1, not '%s'", optarg);
            C.replace = d;
            break;
        case O_COND_FIFO:
            if (parse_double(optarg, 0, 1, &d))
                return bad("--cond-fifo wants a probability in 0..1, not '%s'", optarg);
            C.cond_fifo = d;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc)
        return bad("unexpected argument '%s'", argv[optind]);
    if (C.workload < 0) {
        fprintf(stderr, "malthus: -w WORKLOAD is required\n");
        usage(stderr);
        return 2;
    }
    if (C.elem_bytes % 64)
        return bad("--elem-bytes must be a multiple of 64%s", "");
    if (C.keys < 0)
        C.keys = C.workload == W_LRU ? 1000000 : 10000000;
    if (C.replace < 0)
        C.replace = C.workload == W_LRU ? 0.01 : 0.1;
    if (C.workload == W_KEYMAP && C.keys > 1000000000L / 2)
        return bad("--keys too large for keymap%s", "");

    /* the lock */
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    if (C.policy_name)
        liblock_attr_setwait(&attr, C.policy);
    liblock_attr_setfairness(&attr, C.fairness);
    int r = liblock_init(&LOCK, C.lock, &attr);
    if (r == ENOTSUP) {
        fprintf(stderr, "malthus: lock '%s' does not support waiting policy '%s'\n", C.lock, C.policy_name);
        return 3;
    }
    if (r) {
        fprintf(stderr, "malthus: cannot initialise lock '%s': %s\n", C.lock, strerror(r));
        return r == ENOMEM ? 4 : 3;
    }
    liblock_getwait(&LOCK, &C.policy);
    const struct workload *wl = &WL[C.workload];
    if (wl->uses_cond) {
        liblock_algorithm_info_t in;
        liblock_algorithm_info(C.lock, &in);
        if (!(in.properties & LIBLOCK_PROP_COND)) {
            fprintf(stderr, "malthus: lock '%s' has no condition variables; %s needs them\n", C.lock,
                    wnames[C.workload]);
            return 3;
        }
        liblock_condattr_t ca;
        liblock_condattr_init(&ca);
        if (C.cond_fifo >= 0)
            liblock_condattr_setfifo(&ca, C.cond_fifo);
        if ((r = liblock_cond_init(&COND_A, &ca)) || (r = liblock_cond_init(&COND_B, &ca))) {
            fprintf(stderr, "malthus: condition variable: %s\n", strerror(r));
            return 3;
        }
    }
    if ((r = wl->setup()) != 0) {
        fprintf(stderr, "malthus: %s set-up: %s\n", wnames[C.workload], strerror(r));
        return r == ENOMEM ? 4 : 2;
    }

    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double probe0 = C.probe && ncpu > 1 ? probe_default() : -1;

    NW = C.threads + (C.workload == W_PC ? C.consumers : 0);
    W = aligned_alloc(64, sizeof *W * (size_t)NW);
    if (!W) {
        fprintf(stderr, "malthus: out of memory\n");
        return 4;
    }
    memset(W, 0, sizeof *W * (size_t)NW);
    pthread_barrier_init(&start_bar, NULL, (unsigned)NW + 1);
    pthread_attr_t ta;
    pthread_attr_init(&ta);
    pthread_attr_setstacksize(&ta, 256 * 1024);
    for (int i = 0; i < NW; i++) {
        W[i].idx = i;
        W[i].role = C.workload == W_PC && i < C.consumers;
        W[i].rng = 0x9E3779B97F4A7C15ull * (C.seed + 1) + (uint64_t)i * 0xBF58476D1CE4E5B9ull + 1;
        if ((r = pthread_create(&W[i].th, &ta, worker_main, &W[i])) != 0) {
            fprintf(stderr, "malthus: cannot create thread %d of %d: %s\n", i + 1, NW, strerror(r));
            _exit(4);
        }
    }
    pthread_barrier_wait(&start_bar);
    if (atomic_load(&setup_failed)) {
        fprintf(stderr, "malthus: out of memory setting up %d threads\n", NW);
        _exit(4);
    }
    struct rusage ru0, ru1;
    liblock_fairness_t f1;
    getrusage(RUSAGE_SELF, &ru0);
    uint64_t t0 = probe_now_ns();
    /* no admission happens before the barrier, so the history starts at t0 */
    uint64_t deadline = t0 + (uint64_t)(C.duration * 1e9);
    for (uint64_t now; (now = probe_now_ns()) < deadline;) {
        uint64_t left = deadline - now;
        struct timespec ts = {(time_t)(left / 1000000000u), (long)(left % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    if (C.fairness)
        liblock_fairness(&LOCK, &f1);
    atomic_store(&stop_flag, 1);
    uint64_t t1 = probe_now_ns();
    getrusage(RUSAGE_SELF, &ru1);
    uint64_t ops = 0, starved = 0;
    for (int i = 0; i < NW; i++) {
        uint64_t o = atomic_load_explicit(&W[i].ops, memory_order_relaxed);
        if (C.workload != W_PC || W[i].role)
            ops += o; /* producer-consumer: messages = consumptions */
        starved += o == 0;
    }
    if (wl->uses_cond) { /* wake the condition waiters so that they see stop */
        liblock_lock(&LOCK);
        liblock_cond_broadcast(&COND_A);
        liblock_cond_broadcast(&COND_B);
        liblock_unlock(&LOCK);
    }
    /* drain */
    uint64_t gdead = t1 + (uint64_t)(C.grace * 1e9);
    int joined = 0;
    for (int i = 0; i < NW; i++) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t now = probe_now_ns(), left = gdead > now ? gdead - now : 0;
        ts.tv_sec += (time_t)(left / 1000000000u);
        ts.tv_nsec += (long)(left % 1000000000u);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_timedjoin_np(W[i].th, NULL, &ts) != 0)
            break;
        joined++;
    }
    int drained = joined == NW;
    uint64_t t2 = probe_now_ns();
    double probe1 = C.probe && ncpu > 1 && drained ? probe_default() : -1;

    /* consistency checks (only when every worker has finished) */
    char msg[256] = "";
    int check = 0; /* 0 ok, -1 failed, 1 not run */
    uint64_t ops_final = 0;
    for (int i = 0; i < NW; i++)
        ops_final += atomic_load(&W[i].ops);
    if (!drained) {
        check = 1;
    } else if (C.workload == W_PC) {
        uint64_t left = 0, lsum = 0;
        for (long k = 0; k < Q.count; k++) {
            left++;
            lsum += Q.buf[(Q.head + k) % Q.cap];
        }
        uint64_t pops = 0, cops = 0;
        for (int i = 0; i < NW; i++)
            *(W[i].role ? &cops : &pops) += atomic_load(&W[i].ops);
        if (Q.produced != Q.consumed + left || Q.psum != Q.csum + lsum || pops != Q.produced || cops != Q.consumed) {
            snprintf(msg, sizeof msg, "producer-consumer: produced %llu != consumed %llu + left %llu (or sums/ops differ)",
                     (unsigned long long)Q.produced, (unsigned long long)Q.consumed, (unsigned long long)left);
            check = -1;
        }
    } else if (C.workload == W_KEYMAP) {
        uint64_t vs = 0, present = 0;
        for (uint64_t i = 0; i <= km_mask; i++)
            if (km_tab[i].key >= 0) {
                vs += (uint64_t)km_tab[i].val;
                present++;
            }
        if (vs != ops_final || present != (uint64_t)C.keys || km_inserts) {
            snprintf(msg, sizeof msg, "keymap: map updates %llu != operations %llu, or %llu keys != %ld",
                     (unsigned long long)vs, (unsigned long long)ops_final, (unsigned long long)present, C.keys);
            check = -1;
        }
    } else if (C.workload == W_LRU) {
        check = lru_check(msg, sizeof msg, ops_final);
    } else if (C.workload == W_BUFPOOL) {
        int ok = B.n == C.buffers && B.takes == B.returns && B.takes == ops_final;
        for (long i = 0; ok && i < C.buffers; i++) {
            int seen = 0;
            for (long k = 0; k < B.n; k++)
                seen += B.stack[k] == B.all[i];
            ok = seen == 1;
        }
        if (!ok) {
            snprintf(msg, sizeof msg, "bufferpool: %ld of %ld buffers back, takes %llu, returns %llu, ops %llu", B.n,
                     C.buffers, (unsigned long long)B.takes, (unsigned long long)B.returns,
                     (unsigned long long)ops_final);
            check = -1;
        }
    } else if (C.workload == W_RINGWALKER) {
        if (rw_steps != ops_final * (uint64_t)C.ring_cs) {
            snprintf(msg, sizeof msg, "ringwalker: %llu shared steps for %llu operations", (unsigned long long)rw_steps,
                     (unsigned long long)ops_final);
            check = -1;
        }
    }

    /* Totals once every worker has stopped: nothing changes any more, so
     * the two can be compared exactly (the window figures above are read a
     * moment apart while workers still run). */
    liblock_fairness_t f2;
    int have_totals = drained && C.fairness && liblock_fairness(&LOCK, &f2) == 0;

    /* the record */
    double el = (double)(t1 - t0) * 1e-9;
    double cpu = tv(ru1.ru_utime) + tv(ru1.ru_stime) - tv(ru0.ru_utime) - tv(ru0.ru_stime);
    f_str("bench", "malthus");
    f_str("workload", wnames[C.workload]);
    f_str("lock", C.lock);
    f_str("policy", liblock_wait_name(C.policy));
    f_num("threads", "%.0f", C.threads);
    f_num("workers", "%.0f", NW);
    f_num("duration_s", "%g", C.duration);
    f_num("elapsed_s", "%.6f", el);
    f_u64("ops", ops);
    f_num("throughput", "%.1f", (double)ops / el);
    f_num("fairness", "%.0f", C.fairness);
    if (C.fairness) {
        f_u64("acquisitions", f1.acquisitions);
        f_num("acq_per_op", "%.4f", ops ? (double)f1.acquisitions / (double)ops : NAN);
        f_num("avg_lwss", "%.3f", f1.avg_lwss);
        f_u64("lwss_windows", f1.windows);
        if (f1.mttr >= 0)
            f_num("mttr", "%.1f", f1.mttr);
        else
            f_null("mttr");
        f_num("gini", "%.4f", f1.gini);
        f_num("rstddev", "%.4f", f1.rstddev);
        f_u64("fair_threads", f1.threads);
    } else {
        const char *nulls[] = {"acquisitions", "acq_per_op", "avg_lwss", "lwss_windows", "mttr", "gini", "rstddev",
                               "fair_threads"};
        for (size_t i = 0; i < sizeof nulls / sizeof *nulls; i++)
            f_null(nulls[i]);
    }
    f_u64("starved", starved);
    f_num("vcsw", "%.0f", (double)(ru1.ru_nvcsw - ru0.ru_nvcsw));
    f_num("ivcsw", "%.0f", (double)(ru1.ru_nivcsw - ru0.ru_nivcsw));
    f_num("cpu_s", "%.3f", cpu);
    f_num("cpu_util", "%.3f", cpu / el);
    f_num("probe_before_ns", "%.1f", probe0 > 0 ? probe0 : NAN);
    f_num("probe_after_ns", "%.1f", probe1 > 0 ? probe1 : NAN);
    f_num("drained", "%.0f", drained);
    if (have_totals) {
        f_u64("ops_total", ops_final);
        f_u64("acquisitions_total", f2.acquisitions);
    } else {
        f_null("ops_total");
        f_null("acquisitions_total");
    }
    f_num("drain_s", "%.3f", (double)(t2 - t1) * 1e-9);
    f_str("check", check == 0 ? "ok" : check < 0 ? "failed" : "not-run");
    f_u64("seed", C.seed);
    f_num("cpus", "%.0f", ncpu);
    /* workload parameters and results */
    switch (C.workload) {
    case W_RANDARRAY:
        f_num("cs_loads", "%.0f", C.cs_loads);
        f_num("ncs_loads", "%.0f", C.ncs_loads);
        f_num("array_kb", "%.0f", C.array_kb);
        break;
    case W_RINGWALKER:
        f_num("ring", "%.0f", C.ring);
        f_num("ring_cs", "%.0f", C.ring_cs);
        f_num("elem_bytes", "%.0f", C.elem_bytes);
        break;
    case W_PC:
        f_num("producers", "%.0f", C.threads);
        f_num("consumers", "%.0f", C.consumers);
        f_num("queue", "%.0f", C.queue);
        f_num("cond_fifo", "%g", C.cond_fifo >= 0 ? C.cond_fifo : NAN);
        f_u64("produced", Q.produced);
        f_u64("consumed", Q.consumed);
        f_u64("left", (uint64_t)Q.count);
        f_u64("producer_waits", Q.pwaits);
        f_u64("consumer_waits", Q.cwaits);
        break;
    case W_KEYMAP:
    case W_LRU:
        f_num("keys", "%.0f", C.keys);
        f_num("keyset", "%.0f", C.keyset);
        f_num("replace", "%g", C.replace);
        f_num("ncs_steps", "%.0f", C.ncs_steps);
        if (C.workload == W_LRU) {
            f_num("lru_capacity", "%.0f", C.lru_capacity);
            f_u64("hits", L.hits);
            f_u64("misses", L.misses);
            f_num("miss_rate", "%.4f", L.hits + L.misses ? (double)L.misses / (double)(L.hits + L.misses) : NAN);
        }
        break;
    case W_BUFPOOL:
        f_num("buffers", "%.0f", C.buffers);
        f_num("buffer_kb", "%.0f", C.buffer_kb);
        f_num("swaps", "%.0f", C.swaps);
        f_num("updates", "%.0f", C.updates);
        f_num("cond_fifo", "%g", C.cond_fifo >= 0 ? C.cond_fifo : NAN);
        f_u64("pool_waits", B.waits);
        break;
    }
    emit();
    if (check < 0)
        fprintf(stderr, "malthus: consistency check failed: %s\n", msg);
    if (!drained) {
        fprintf(stderr, "malthus: %d of %d workers still busy %.1f s after the window; not checked\n", NW - joined, NW,
                C.grace);
        _exit(0); /* the workers may be stuck behind preempted lock holders: end them with the process */
    }
    return check < 0 ? 1 : 0;
}
