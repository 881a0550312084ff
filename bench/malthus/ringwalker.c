/*
 * ringwalker.c - the RingWalker workload: rings of C.ring (50) elements of
 * C.elem_bytes (8 KB), one touched line per element at a random offset; the
 * non-critical section walks the whole private ring, the critical section
 * advances C.ring_cs (10) elements on the shared ring.
 */
#include "malthus.h"

#include <errno.h>
#include <stdio.h>

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
static int rw_check(char *msg, size_t len, uint64_t ops)
{
    if (rw_steps != ops * (uint64_t)C.ring_cs) {
        snprintf(msg, len, "ringwalker: %llu shared steps for %llu operations", (unsigned long long)rw_steps,
                 (unsigned long long)ops);
        return -1;
    }
    return 0;
}
static void rw_report(void)
{
    f_num("ring", "%.0f", C.ring);
    f_num("ring_cs", "%.0f", C.ring_cs);
    f_num("elem_bytes", "%.0f", C.elem_bytes);
}

const struct workload wl_ringwalker = {rw_setup, rw_thread_init, rw_loop, rw_check, rw_report, 0};
