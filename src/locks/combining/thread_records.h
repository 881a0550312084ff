/*
 * thread_records.h - per-thread, per-lock records for algorithms whose
 * records outlive a call (Flat Combining's publication records, DSM-Synch's
 * two nodes per thread per lock).  Included by those algorithm files only
 * (a header, so it is not an algorithm in the registry).
 *
 * Source: ours: the papers (Hendler et al., SPAA 2010; Fatourou and
 * Kallimanis, PPoPP 2012) leave the records' lifetime to the runtime.
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
 * The thread side is a hash table of (lock list, lock uid, record), open
 * addressing with linear probing, at most half full, keyed by the list's
 * address, so a lookup costs O(1) whatever the number of locks the thread
 * has used (a thread that touches 40,000 std::mutexes under the interposer
 * must not pay a scan per lock).  A one-entry cache in front of it serves
 * the common case of a thread using one lock repeatedly without hashing.
 * The uid (a global counter assigned at init) tells a record of a destroyed
 * lock from one of a new lock initialised at the same address: an entry
 * whose uid differs is stale and is replaced in place.  Entries of
 * destroyed locks (DEAD set) are dropped, and their records freed, whenever
 * the table is rebuilt (it is rebuilt when it would pass half full, and
 * only grows if live entries still fill more than a quarter of it), so the
 * work is amortised O(1) per insertion.  Records of locks that are never
 * destroyed (std::mutex has no destroy call) stay until the thread exits:
 * one record per lock the thread used.  The table is released by an
 * ll_thread_on_exit hook.  Lookups never dereference a list pointer from
 * the table, only records the thread owns.
 */
#ifndef LIBLOCK_THREAD_RECORDS_H
#define LIBLOCK_THREAD_RECORDS_H

#include "internal.h"

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
    const struct ll_trec_list *list; /* NULL: empty slot */
    uint64_t uid;
    struct ll_trec *rec;
};

struct ll_trec_tls {
    struct ll_trec_entry last;  /* one-entry cache of the latest lookup */
    struct ll_trec_entry *v;    /* hash table, cap slots (power of two) */
    unsigned n, cap;            /* n: used slots */
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
    for (unsigned i = 0; i < t->cap; i++)
        if (t->v[i].list)
            ll_trec_release(t->v[i].rec);
    free(t->v);
    t->v = NULL;
    t->n = t->cap = 0;
    t->last = (struct ll_trec_entry){NULL, 0, NULL};
    t->hooked = 0;
}

static inline unsigned ll_trec_hash(const struct ll_trec_list *L, unsigned mask)
{
    uint64_t x = (uint64_t)(uintptr_t)L;
    x ^= x >> 29;
    x *= 0x9e3779b97f4a7c15ull;
    return (unsigned)(x >> 32) & mask;
}

/* The slot of L in the table: its entry, or the empty slot where it goes. */
static inline struct ll_trec_entry *ll_trec_slot(struct ll_trec_tls *t, const struct ll_trec_list *L)
{
    unsigned mask = t->cap - 1;
    for (unsigned i = ll_trec_hash(L, mask);; i = (i + 1) & mask)
        if (t->v[i].list == L || t->v[i].list == NULL)
            return &t->v[i];
}

/* Rebuild with room for one more entry: drop (and free) records of
 * destroyed locks, grow if live entries fill more than a quarter. */
static int ll_trec_rebuild(struct ll_trec_tls *t)
{
    unsigned live = 0;
    for (unsigned i = 0; i < t->cap; i++) {
        struct ll_trec_entry *e = &t->v[i];
        if (!e->list)
            continue;
        if (atomic_load_explicit(&e->rec->own, memory_order_acquire) & TR_DEAD) {
            free(e->rec); /* its lock is gone and we own it */
            e->list = NULL;
            continue;
        }
        live++;
    }
    unsigned nc = t->cap ? t->cap : 8;
    while ((live + 1) * 4 > nc)
        nc *= 2;
    struct ll_trec_entry *nv = calloc(nc, sizeof *nv);
    if (!nv)
        return ENOMEM;
    struct ll_trec_entry *old = t->v;
    unsigned oldcap = t->cap;
    t->v = nv;
    t->cap = nc;
    t->n = 0;
    for (unsigned i = 0; i < oldcap; i++)
        if (old[i].list) {
            *ll_trec_slot(t, old[i].list) = old[i];
            t->n++;
        }
    free(old);
    t->last = (struct ll_trec_entry){NULL, 0, NULL}; /* may name a freed record */
    return 0;
}

/* Adopt an orphan of L or allocate a record (alloc_rec returns a zeroed,
 * initialised record of the algorithm's type whose first member is struct
 * ll_trec). */
static struct ll_trec *ll_trec_obtain(struct ll_trec_list *L, struct ll_trec *(*alloc_rec)(void))
{
    struct ll_trec *r;
    for (r = atomic_load_explicit(&L->head, memory_order_acquire); r; r = r->all_next) {
        uint32_t expect = 0;
        if (atomic_load_explicit(&r->own, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&r->own, &expect, TR_OWNED, memory_order_acq_rel,
                                                    memory_order_relaxed))
            return r; /* adopted an orphan */
    }
    r = alloc_rec();
    if (!r)
        return NULL;
    atomic_store_explicit(&r->own, TR_OWNED, memory_order_relaxed);
    struct ll_trec *h = atomic_load_explicit(&L->head, memory_order_relaxed);
    do
        r->all_next = h;
    while (!atomic_compare_exchange_weak_explicit(&L->head, &h, r, memory_order_release, memory_order_relaxed));
    return r;
}

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
    struct ll_trec_entry *e = t->cap ? ll_trec_slot(t, L) : NULL;
    if (e && e->list == L && e->uid == L->uid) {
        t->last = *e;
        return e->rec;
    }
    if (e && e->list == L) {
        /* a record of an earlier lock at this address (stale uid): that
         * lock was destroyed (DEAD is set: release frees the record) or its
         * memory was reused without destroy (the record becomes an orphan
         * of a list nobody walks any more: one record lost, never touched) */
        ll_trec_release(e->rec);
        t->last = (struct ll_trec_entry){NULL, 0, NULL};
    } else if ((t->n + 1) * 2 > t->cap) {
        if (ll_trec_rebuild(t))
            return NULL;
    }
    struct ll_trec *r = ll_trec_obtain(L, alloc_rec);
    if (!r)
        return NULL;
    e = ll_trec_slot(t, L);
    if (!e->list)
        t->n++;
    *e = (struct ll_trec_entry){L, L->uid, r};
    t->last = *e;
    return r;
}

static inline struct ll_trec *ll_trec_lookup(struct ll_trec_tls *t, struct ll_trec_list *L,
                                             struct ll_trec *(*alloc_rec)(void))
{
    if (LL_LIKELY(t->last.list == L && t->last.uid == L->uid))
        return t->last.rec;
    return ll_trec_lookup_slow(t, L, alloc_rec);
}

#endif
