/*
 * bufferpool.c - the BufferPool workload: a LIFO pool of C.buffers (5)
 * buffers of C.buffer_kb (1 MB) under the lock with a not-empty condition
 * variable (COND_A); an operation takes a buffer, swaps C.swaps (500) random
 * words with a private buffer, gives it back, then updates C.updates (5000)
 * random private words.
 */
#include "malthus.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

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
static int bp_check(char *msg, size_t len, uint64_t ops)
{
    int ok = B.n == C.buffers && B.takes == B.returns && B.takes == ops;
    for (long i = 0; ok && i < C.buffers; i++) {
        int seen = 0;
        for (long k = 0; k < B.n; k++)
            seen += B.stack[k] == B.all[i];
        ok = seen == 1;
    }
    if (!ok) {
        snprintf(msg, len, "bufferpool: %ld of %ld buffers back, takes %llu, returns %llu, ops %llu", B.n, C.buffers,
                 (unsigned long long)B.takes, (unsigned long long)B.returns, (unsigned long long)ops);
        return -1;
    }
    return 0;
}
static void bp_report(void)
{
    f_num("buffers", "%.0f", C.buffers);
    f_num("buffer_kb", "%.0f", C.buffer_kb);
    f_num("swaps", "%.0f", C.swaps);
    f_num("updates", "%.0f", C.updates);
    f_num("cond_fifo", "%g", C.cond_fifo >= 0 ? C.cond_fifo : NAN);
    f_u64("pool_waits", B.waits);
}

const struct workload wl_bufferpool = {bp_setup, bp_thread_init, bp_loop, bp_check, bp_report, 1};
