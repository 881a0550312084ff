/*
 * prodcons.c - the producer-consumer workload (from the COZ profiler's
 * benchmarks): a bounded queue of C.queue (10,000) under the lock with two
 * condition variables, not-empty (COND_A) and not-full (COND_B); the
 * first C.consumers (3) workers consume, the other -t workers produce.  An
 * operation is a message; the run counts the consumers' operations.
 */
#include "malthus.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

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
static int pc_check(char *msg, size_t len, uint64_t ops)
{
    (void)ops;
    uint64_t left = 0, lsum = 0;
    for (long k = 0; k < Q.count; k++) {
        left++;
        lsum += Q.buf[(Q.head + k) % Q.cap];
    }
    uint64_t pops = 0, cops = 0;
    for (int i = 0; i < NW; i++)
        *(W[i].role ? &cops : &pops) += atomic_load(&W[i].ops);
    if (Q.produced != Q.consumed + left || Q.psum != Q.csum + lsum || pops != Q.produced || cops != Q.consumed) {
        snprintf(msg, len, "producer-consumer: produced %llu != consumed %llu + left %llu (or sums/ops differ)",
                 (unsigned long long)Q.produced, (unsigned long long)Q.consumed, (unsigned long long)left);
        return -1;
    }
    return 0;
}
static void pc_report(void)
{
    f_num("producers", "%.0f", C.threads);
    f_num("consumers", "%.0f", C.consumers);
    f_num("queue", "%.0f", C.queue);
    f_num("cond_fifo", "%g", C.cond_fifo >= 0 ? C.cond_fifo : NAN);
    f_u64("produced", Q.produced);
    f_u64("consumed", Q.consumed);
    f_u64("left", (uint64_t)Q.count);
    f_u64("producer_waits", Q.pwaits);
    f_u64("consumer_waits", Q.cwaits);
}

const struct workload wl_prodcons = {pc_setup, NULL, pc_loop, pc_check, pc_report, 1};
