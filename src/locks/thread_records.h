/*
 * thread_records.h - per-thread, per-lock records for algorithms whose
 * records outlive a call (Flat Combining's publication records, DSM-Synch's
 * two nodes per thread per lock).  Included by those algorithm files only
 * (a header, so it is not an algorithm in the registry).
 *
 * Why records cannot simply be freed at thread exit: the lock may still
 * reference them (a publication record stays linked in the publication list
 * until a combiner ages it out; a DSM-Synch node may still be read by a
 * combiner that is finishing its pass).  And they cannot be freed by
 * destroy alone: a live thread's lookup table points at them.  So each
 * record carries an ownership word with two bits:
 *   OWNED  a live thread has it in its table (cleared at thread exit);
 *   DEAD   the lock was destroyed (set by destroy).
 * Exactly one party frees a record: thread exit does fetch_and(~OWNED) and
 * frees if DEAD was already set; destroy does fetch_or(DEAD) and frees if
 * OWNED was already clear.  Both are RMWs on one word, so exactly one of
 * them sees the other's bit.  A record whose owner exited (own == 0) is an
 * orphan: the next thread that needs a record for that lock adopts it with
 * CAS(0 -> OWNED) instead of allocating, so a lock used by thousands of
 * short-lived threads keeps at most as many records as threads used it at
 * the same time.  A live thread frees its own records of destroyed locks
 * (DEAD set) when it next misses in its table, so a long-lived thread that
 * uses many short-lived locks does not accumulate them either.
 *
 * The thread side is a small table of (lock list, lock uid, record); the uid
 * (a global counter assigned at init) tells a record of a destroyed lock
 * from one of a new lock initialised at the same address.  The table is
 * released by an ll_thread_on_exit hook.  Lookups never dereference a list
 * pointer from the table, only records the thread owns.
 */
#ifndef LIBLOCK_THREAD_RECORDS_H
#define LIBLOCK_THREAD_RECORDS_H

#include "../internal.h"

#include <stdlib.h>

#define TR_OWNED 1u
#define TR_DEAD 2u

struct ll_trec {
    _Atomic uint32_t own;
    struct ll_trec *all_next; /* the lock's list of every record, push-only until destroy */
};

struct ll_trec_list {
    _Atomic(struct ll_trec *) head;
    uint64_t uid;
};

struct ll_trec_entry {
    const struct ll_trec_list *list;
    uint64_t uid;
    struct ll_trec *rec;
};

struct ll_trec_tls {
    struct ll_trec_entry *v;
    unsigned n, cap;
    int hooked;
    struct ll_exit_hook hook;
};

static inline uint64_t ll_trec_new_uid(void)
{
    static _Atomic uint64_t next_uid = 1;
    return atomic_fetch_add_explicit(&next_uid, 1, memory_order_relaxed);
}

static inline void ll_trec_list_init(struct ll_trec_list *L)
{
    atomic_store_explicit(&L->head, NULL, memory_order_relaxed);
    L->uid = ll_trec_new_uid();
}

/* destroy: the lock is idle; free orphans, mark the rest DEAD for their owners. */
static inline void ll_trec_list_destroy(struct ll_trec_list *L)
{
    struct ll_trec *r = atomic_exchange_explicit(&L->head, NULL, memory_order_acq_rel);
    while (r) {
        struct ll_trec *nx = r->all_next;
        uint32_t old = atomic_fetch_or_explicit(&r->own, TR_DEAD, memory_order_acq_rel);
        if (!(old & TR_OWNED))
            free(r);
        r = nx;
    }
}

static inline void ll_trec_release(struct ll_trec *r)
{
    uint32_t old = atomic_fetch_and_explicit(&r->own, ~TR_OWNED, memory_order_acq_rel);
    if (old & TR_DEAD)
        free(r);
}

static void ll_trec_thread_exit(ll_thread_t *self, void *arg)
{
    (void)self;
    struct ll_trec_tls *t = arg;
    for (unsigned i = 0; i < t->n; i++)
        ll_trec_release(t->v[i].rec);
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
    t->hooked = 0;
}

/* Slow path: prune records of destroyed locks, adopt an orphan or allocate
 * (alloc_rec returns a zeroed, initialised record of the algorithm's type
 * whose first member is struct ll_trec). */
static struct ll_trec *ll_trec_lookup_slow(struct ll_trec_tls *t, struct ll_trec_list *L,
                                           struct ll_trec *(*alloc_rec)(void))
{
    if (!t->hooked) {
        ll_thread_t *self = ll_self();
        if (!self)
            return NULL;
        t->hook.fn = ll_trec_thread_exit;
        t->hook.arg = t;
        ll_thread_on_exit(self, &t->hook);
        t->hooked = 1;
    }
    unsigned j = 0;
    for (unsigned i = 0; i < t->n; i++) {
        if (atomic_load_explicit(&t->v[i].rec->own, memory_order_acquire) & TR_DEAD) {
            free(t->v[i].rec); /* its lock is gone and we own it */
            continue;
        }
        t->v[j++] = t->v[i];
    }
    t->n = j;
    if (t->n == t->cap) {
        unsigned nc = t->cap ? t->cap * 2 : 4;
        struct ll_trec_entry *nv = realloc(t->v, nc * sizeof *nv);
        if (!nv)
            return NULL;
        t->v = nv;
        t->cap = nc;
    }
    struct ll_trec *r;
    for (r = atomic_load_explicit(&L->head, memory_order_acquire); r; r = r->all_next) {
        uint32_t expect = 0;
        if (atomic_load_explicit(&r->own, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&r->own, &expect, TR_OWNED, memory_order_acq_rel,
                                                    memory_order_relaxed))
            break; /* adopted an orphan */
    }
    if (!r) {
        r = alloc_rec();
        if (!r)
            return NULL;
        atomic_store_explicit(&r->own, TR_OWNED, memory_order_relaxed);
        struct ll_trec *h = atomic_load_explicit(&L->head, memory_order_relaxed);
        do
            r->all_next = h;
        while (!atomic_compare_exchange_weak_explicit(&L->head, &h, r, memory_order_release, memory_order_relaxed));
    }
    /* newest first: the fast path checks entry 0 */
    t->v[t->n++] = t->v[0];
    t->v[0] = (struct ll_trec_entry){L, L->uid, r};
    return r;
}

static inline struct ll_trec *ll_trec_lookup(struct ll_trec_tls *t, struct ll_trec_list *L,
                                             struct ll_trec *(*alloc_rec)(void))
{
    for (unsigned i = 0; i < t->n; i++) {
        if (t->v[i].list == L && t->v[i].uid == L->uid) {
            struct ll_trec_entry e = t->v[i];
            if (i) { /* move to front */
                t->v[i] = t->v[0];
                t->v[0] = e;
            }
            return e.rec;
        }
    }
    return ll_trec_lookup_slow(t, L, alloc_rec);
}

#endif
