/*
 * objects.h - the concurrent objects of D. Petrovic, "Efficient
 * Communication and Synchronization on Manycore Processors", PhD thesis
 * no. 6552, EPFL, 2015, sections 6.2.4 and 7.2.3, as workloads of `liblock
 * bench delegation` (bench/delegation.c).  Every operation is a critical
 * section run through liblock_execute, so each object runs on every
 * algorithm (delegating ones run it on a server or combiner, the others
 * lock, run it and unlock).
 *
 *   counter  fetch-and-increment of one word; returns the old value.
 *   stack    coarse-locked linked list (no elimination layer, as in the
 *            thesis); push and pop alternate per thread.
 *   queue1   Michael-Scott blocking queue with ONE lock for both ends.
 *   queue2   the same with its two locks (enqueue at the tail, dequeue at
 *            the head): two servers or two combiners.
 * Nodes come from per-thread memory pools (the thesis used the CC-Synch
 * authors' pools): a pool belongs to one thread but is only ever touched
 * inside that thread's critical sections, so with a delegating algorithm
 * the node memory is touched by servers/combiners only -- the condition
 * under which mp-server's streaming-store replies are valid (except
 * queue2, whose two servers share nodes: the bench turns streaming off
 * there, as the thesis says).
 */
#ifndef LIBLOCK_BENCH_DELEGATION_OBJECTS_H
#define LIBLOCK_BENCH_DELEGATION_OBJECTS_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include "liblock.h"

/* ---- per-thread pools ---------------------------------------------------- */
struct obj_node {
    _Atomic(struct obj_node *) next; /* queue2: written under the tail lock, read under the head lock */
    uint64_t value;
    struct obj_node *free_next;
} __attribute__((aligned(64)));

#define POOL_CHUNK 256
struct obj_pool {
    struct obj_node *free;
    struct obj_node **chunks;
    size_t nchunks, cap;
} __attribute__((aligned(64)));

static struct obj_node *pool_alloc(struct obj_pool *p)
{
    struct obj_node *n = p->free;
    if (n) {
        p->free = n->free_next;
        return n;
    }
    if (p->nchunks == p->cap) {
        size_t nc = p->cap ? p->cap * 2 : 16;
        struct obj_node **c = realloc(p->chunks, nc * sizeof *c);
        if (!c)
            return NULL;
        p->chunks = c;
        p->cap = nc;
    }
    struct obj_node *blk = aligned_alloc(64, POOL_CHUNK * sizeof *blk);
    if (!blk)
        return NULL;
    p->chunks[p->nchunks++] = blk;
    for (int i = 1; i < POOL_CHUNK; i++) {
        blk[i].free_next = p->free;
        p->free = &blk[i];
    }
    return &blk[0];
}

static void pool_free(struct obj_pool *p, struct obj_node *n)
{
    n->free_next = p->free;
    p->free = n;
}

static void pool_destroy(struct obj_pool *p)
{
    for (size_t i = 0; i < p->nchunks; i++)
        free(p->chunks[i]);
    free(p->chunks);
    p->chunks = NULL;
    p->nchunks = p->cap = 0;
    p->free = NULL;
}

/* ---- the objects ----------------------------------------------------------- */
enum { OBJ_COUNTER, OBJ_STACK, OBJ_QUEUE1, OBJ_QUEUE2, OBJ__COUNT };
static const char *const obj_names[] = {"counter", "stack", "queue1", "queue2"};
#define OBJ_EMPTY UINT64_MAX /* pop/dequeue on an empty object (a value < 2^62: never real) */
/* Critical sections never return NULL on success (liblock_execute's NULL
 * + errno means it failed): values travel as value + 1. */
#define OBJ_EMPTY_RET ((void *)(uintptr_t)((1ull << 61) - 1))
#define OBJ_OK_RET ((void *)(uintptr_t)2)
#define OBJ_NOMEM_RET ((void *)(uintptr_t)3)

struct object {
    int kind;
    liblock_t lock;  /* counter, stack, queue1; queue2: the head lock */
    liblock_t lock2; /* queue2: the tail lock */
    int nlocks;
    uint64_t counter;
    struct obj_node *top;         /* stack */
    struct obj_node *head, *tail; /* queues: head is a dummy */
    struct obj_pool setup_pool;   /* the queues' first dummy */
};

struct obj_arg { /* one per thread, reused for every operation */
    struct object *o;
    struct obj_pool *pool;
    uint64_t value;
};

static void *cs_counter(void *a)
{
    struct object *o = ((struct obj_arg *)a)->o;
    return (void *)(uintptr_t)(++o->counter); /* old value + 1: never NULL */
}

static void *cs_push(void *a)
{
    struct obj_arg *x = a;
    struct obj_node *n = pool_alloc(x->pool);
    if (!n)
        return OBJ_NOMEM_RET;
    n->value = x->value;
    atomic_store_explicit(&n->next, x->o->top, memory_order_relaxed);
    x->o->top = n;
    return OBJ_OK_RET;
}

static void *cs_pop(void *a)
{
    struct obj_arg *x = a;
    struct obj_node *n = x->o->top;
    if (!n)
        return OBJ_EMPTY_RET;
    x->o->top = atomic_load_explicit(&n->next, memory_order_relaxed);
    uint64_t v = n->value;
    pool_free(x->pool, n);
    return (void *)(uintptr_t)(v + 1);
}

/* MS queue (blocking version, [MS96]): enqueue links a node after tail and
 * moves tail (tail lock); dequeue reads head->next, takes its value and
 * makes it the new dummy, freeing the old one (head lock).  With two locks
 * the two ends meet only through a node's next, published with release
 * and read with acquire. */
static void *cs_enqueue(void *a)
{
    struct obj_arg *x = a;
    struct obj_node *n = pool_alloc(x->pool);
    if (!n)
        return OBJ_NOMEM_RET;
    n->value = x->value;
    atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
    atomic_store_explicit(&x->o->tail->next, n, memory_order_release);
    x->o->tail = n;
    return OBJ_OK_RET;
}

static void *cs_dequeue(void *a)
{
    struct obj_arg *x = a;
    struct obj_node *h = x->o->head;
    struct obj_node *n = atomic_load_explicit(&h->next, memory_order_acquire);
    if (!n)
        return OBJ_EMPTY_RET;
    uint64_t v = n->value;
    x->o->head = n;
    pool_free(x->pool, h);
    return (void *)(uintptr_t)(v + 1);
}

static int object_init(struct object *o, int kind, const char *algo, const liblock_attr_t *attr)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->nlocks = kind == OBJ_QUEUE2 ? 2 : 1;
    int e = liblock_init(&o->lock, algo, attr);
    if (e)
        return e;
    if (o->nlocks == 2 && (e = liblock_init(&o->lock2, algo, attr)) != 0) {
        liblock_destroy(&o->lock);
        return e;
    }
    if (kind == OBJ_QUEUE1 || kind == OBJ_QUEUE2) {
        struct obj_node *d = pool_alloc(&o->setup_pool);
        if (!d)
            return ENOMEM;
        atomic_store_explicit(&d->next, NULL, memory_order_relaxed);
        o->head = o->tail = d;
    }
    return 0;
}

/* One operation of thread-local step i.  Returns 0, or an errno. */
static inline int object_op(struct obj_arg *x, uint64_t i, uint64_t *enq_sum, uint64_t *deq_sum)
{
    struct object *o = x->o;
    void *r;
    errno = 0;
    switch (o->kind) {
    case OBJ_COUNTER:
        r = liblock_execute(&o->lock, cs_counter, x);
        return r == NULL ? (errno ? errno : EIO) : 0;
    case OBJ_STACK:
    case OBJ_QUEUE1:
    case OBJ_QUEUE2: {
        int stack = o->kind == OBJ_STACK;
        liblock_t *l = o->kind == OBJ_QUEUE2 && !(i & 1) ? &o->lock2 : &o->lock;
        if (!(i & 1)) {
            r = liblock_execute(l, stack ? cs_push : cs_enqueue, x);
            if (r == NULL)
                return errno ? errno : EIO;
            if (r != OBJ_OK_RET)
                return ENOMEM;
            *enq_sum += x->value;
            x->value += 1;
        } else {
            r = liblock_execute(l, stack ? cs_pop : cs_dequeue, x);
            if (r == NULL)
                return errno ? errno : EIO;
            if (r != OBJ_EMPTY_RET)
                *deq_sum += (uint64_t)(uintptr_t)r - 1;
        }
        return 0;
    }
    }
    return EINVAL;
}

/* What is left in the object (stack/queue values), for the final check. */
static uint64_t object_remaining_sum(struct object *o)
{
    uint64_t s = 0;
    if (o->kind == OBJ_STACK)
        for (struct obj_node *n = o->top; n; n = atomic_load_explicit(&n->next, memory_order_relaxed))
            s += n->value;
    else if (o->kind == OBJ_QUEUE1 || o->kind == OBJ_QUEUE2)
        for (struct obj_node *n = atomic_load_explicit(&o->head->next, memory_order_relaxed); n;
             n = atomic_load_explicit(&n->next, memory_order_relaxed))
            s += n->value;
    return s;
}

static void object_destroy(struct object *o)
{
    liblock_destroy(&o->lock);
    if (o->nlocks == 2)
        liblock_destroy(&o->lock2);
    pool_destroy(&o->setup_pool);
}

#endif
