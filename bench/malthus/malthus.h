/*
 * malthus.h - what the parts of the malthus benchmark share: the run's
 * configuration, the workers, the lock and condition variables every
 * workload uses, the interface of a workload, the random generators and the
 * output record.
 *
 *   main.c          the harness: options, the lock, the workers, the
 *                   measurement window, the drain, the record
 *   options.c       the configuration and its command line
 *   record.c        the output record (one JSON object or CSV line)
 *   mt.c            the Mersenne Twister of keymap and lrucache
 *   randarray.c ringwalker.c prodcons.c keymap.c lrucache.c bufferpool.c
 *                   the six workloads, each a `struct workload`
 */
#ifndef LIBLOCK_BENCH_MALTHUS_H
#define LIBLOCK_BENCH_MALTHUS_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include "liblock.h"

/* ---- configuration (options.c) ---- */
enum { W_RANDARRAY, W_RINGWALKER, W_PC, W_KEYMAP, W_LRU, W_BUFPOOL, W__N };
extern const char *const wnames[W__N];

struct cfg {
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
};
extern struct cfg C;

/* Parses the command line into C: -1 to go on, else the exit status. */
int malthus_options(int argc, char **argv);

/* ---- run state (main.c) ---- */
struct mt;
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

extern liblock_t LOCK;
extern liblock_cond_t COND_A, COND_B; /* not-empty / not-full */
extern _Atomic int stop_flag;
extern struct worker *W;
extern int NW; /* workers */

static inline int stopping(void) { return atomic_load_explicit(&stop_flag, memory_order_relaxed); }
/* One operation done.  Only this worker writes its counter; the main thread
 * reads it (relaxed: a count, ordered by nothing else). */
static inline void count_op(struct worker *w)
{
    atomic_store_explicit(&w->ops, atomic_load_explicit(&w->ops, memory_order_relaxed) + 1, memory_order_relaxed);
}

/* ---- a workload ---- */
struct workload {
    int (*setup)(void);                  /* shared data; 0 or an errno value */
    int (*thread_init)(struct worker *); /* private data (NULL: none) */
    void (*loop)(struct worker *);       /* operations until stopping() */
    /* After every worker has finished: 0 consistent, -1 not (msg says
     * why); ops is the operations of all workers.  NULL: nothing to check. */
    int (*check)(char *msg, size_t len, uint64_t ops);
    void (*report)(void);                /* its parameters and results, into the record */
    int uses_cond;
};
extern const struct workload wl_randarray, wl_ringwalker, wl_prodcons, wl_keymap, wl_lrucache, wl_bufferpool;

/* ---- random numbers ---- */
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

/* mt19937 (32-bit Mersenne Twister, Matsumoto & Nishimura 1998; mt.c) */
struct mt {
    uint32_t s[624];
    int i;
};
void mt_seed(struct mt *m, uint32_t seed);
uint32_t mt_next(struct mt *m);
static inline uint32_t mt_below(struct mt *m, uint32_t n) { return (uint32_t)(((uint64_t)mt_next(m) * n) >> 32); }
static inline double mt_unit(struct mt *m) { return mt_next(m) * (1.0 / 4294967296.0); }

/* ---- the key set of keymap and lrucache (keyset.c) ---- */
int keyset_init(struct worker *w, long range);
void keyset_report(void); /* their common parameters, into the record */
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

/* ---- memory ---- */
static inline void *big_alloc(size_t bytes)
{
    size_t al = 2u << 20;
    size_t sz = (bytes + al - 1) & ~(al - 1);
    void *p = aligned_alloc(al, sz);
    if (p)
        madvise(p, sz, MADV_HUGEPAGE); /* the paper used large pages; best effort */
    return p;
}

/* ---- the output record (record.c): fields in order, then emit() ---- */
void f_str(const char *n, const char *v);
void f_num(const char *n, const char *fmt, double v);
void f_u64(const char *n, uint64_t v);
void f_null(const char *n);
void emit(void);

#endif
