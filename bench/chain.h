/*
 * chain.h - the dependent, non-prefetchable chain of cache lines that a
 * benchmark critical section walks (the microbenchmark of J.-P. Lozi,
 * "Towards More Scalable Mutual Exclusion for Multicore Architectures",
 * PhD thesis, UPMC (Paris 6), 2014, section 5.2; the "shared variables" of
 * J.-P. Lozi, "Improving the Performance of Java Applications on Multicore
 * Architectures", internship report, LIP6, 2010, section 3.3).
 *
 * A chain of K lines lives in a region of `slots` slots of two cache lines
 * each (128 bytes).  Only the first line of a slot is ever used, so no two
 * chain lines are adjacent and the adjacent-line / 128-byte-pair prefetchers
 * (the internship report: "two full cache lines between them") never bring in the next
 * chain line with the current one.  The K slots are drawn at random and
 * linked in random order, and each line stores the byte offset of the next
 * one: a walker can only compute the next address from the value it has just
 * read, so the loads are serialised (one miss after the other) and a stride
 * prefetcher has no pattern to follow.
 *
 * Every step reads `next` and increments `count` (read and write, as the
 * thesis's critical sections do).  After a run of N critical sections under
 * mutual exclusion, every line's count is exactly N: the benchmark checks
 * this, which also catches a lock that lets two critical sections overlap.
 */
#ifndef LIBLOCK_BENCH_CHAIN_H
#define LIBLOCK_BENCH_CHAIN_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN_LINE 64
#define CHAIN_SLOT 128 /* two lines: the second one of each slot is never touched */

struct chain_line {
    _Alignas(CHAIN_LINE) volatile uint64_t next; /* byte offset of the next line from base */
    volatile uint64_t count;
    char pad[CHAIN_LINE - 2 * sizeof(uint64_t)];
};

struct chain {
    unsigned char *base; /* region, CHAIN_SLOT-aligned */
    size_t slots;        /* region size in slots */
    int k;               /* lines in the chain */
    uint64_t head;       /* offset of the first line */
    uint64_t *order;     /* offsets in walk order (k entries), for checks */
};

static inline uint64_t chain_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

/* Build a chain of k >= 1 lines in a fresh region of max(64, 8k) slots.
 * Returns 0, or -1 on allocation failure. */
static inline int chain_init(struct chain *c, int k, uint64_t seed)
{
    memset(c, 0, sizeof *c);
    if (k < 1)
        return -1;
    size_t slots = (size_t)k * 8;
    if (slots < 64)
        slots = 64;
    void *mem = NULL;
    if (posix_memalign(&mem, 4096, slots * CHAIN_SLOT))
        return -1;
    memset(mem, 0, slots * CHAIN_SLOT);
    size_t *perm = malloc(slots * sizeof *perm);
    c->order = malloc((size_t)k * sizeof *c->order);
    if (!perm || !c->order) {
        free(mem);
        free(perm);
        free(c->order);
        return -1;
    }
    uint64_t s = seed ? seed : 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < slots; i++)
        perm[i] = i;
    for (size_t i = slots - 1; i > 0; i--) { /* Fisher-Yates */
        size_t j = (size_t)(chain_rand(&s) % (i + 1));
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    /* A random permutation can still put consecutive chain steps in
     * consecutive slots; swap such a step with a later one when possible so
     * the walk never moves by exactly one slot (a stride a prefetcher could
     * guess). */
    for (int i = 1; i < k; i++) {
        long d = (long)perm[i] - (long)perm[i - 1];
        if (d == 1 || d == -1) {
            for (size_t j = (size_t)k; j < slots; j++) {
                long d2 = (long)perm[j] - (long)perm[i - 1];
                if (d2 != 1 && d2 != -1) {
                    size_t t = perm[i];
                    perm[i] = perm[j];
                    perm[j] = t;
                    break;
                }
            }
        }
    }
    c->base = mem;
    c->slots = slots;
    c->k = k;
    for (int i = 0; i < k; i++)
        c->order[i] = (uint64_t)perm[i] * CHAIN_SLOT;
    for (int i = 0; i < k; i++) {
        struct chain_line *l = (struct chain_line *)(c->base + c->order[i]);
        l->next = c->order[(i + 1) % k]; /* the last line points back to the head */
        l->count = 0;
    }
    c->head = c->order[0];
    free(perm);
    return 0;
}

static inline void chain_destroy(struct chain *c)
{
    free(c->base);
    free(c->order);
    memset(c, 0, sizeof *c);
}

/* Walk the chain once: read each line's `next` (the next address depends on
 * it) and increment its count.  Returns the offset after the last step (the
 * head again), so the compiler must perform every load.  If `visited` is
 * non-NULL, the k offsets are stored there (used by the tests). */
static inline uint64_t chain_walk(const struct chain *c, uint64_t *visited)
{
    unsigned char *base = c->base;
    uint64_t off = c->head;
    for (int i = 0; i < c->k; i++) {
        struct chain_line *l = (struct chain_line *)(base + off);
        if (visited)
            visited[i] = off;
        uint64_t nx = l->next;
        l->count = l->count + 1;
        off = nx;
    }
    return off;
}

/* Walk without recording: the benchmark's hot path. */
static inline uint64_t chain_walk_fast(unsigned char *base, uint64_t head, int k)
{
    uint64_t off = head;
    for (int i = 0; i < k; i++) {
        struct chain_line *l = (struct chain_line *)(base + off);
        uint64_t nx = l->next;
        l->count = l->count + 1;
        off = nx;
    }
    return off;
}

/* 1 when every line of the chain has count == expect. */
static inline int chain_counts_are(const struct chain *c, uint64_t expect)
{
    for (int i = 0; i < c->k; i++)
        if (((struct chain_line *)(c->base + c->order[i]))->count != expect)
            return 0;
    return 1;
}

#endif
