/*
 * lrucache.c - the LRUCache workload: as keymap, on a shared LRU cache (hash
 * table + doubly linked recency list) of C.lru_capacity (10,000) entries,
 * keys in [0, C.keys) (1M), replacement probability C.replace (0.01); a
 * miss installs key -> key, evicting the least recently used when full.
 */
#include "malthus.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>

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
static void lru_report(void)
{
    keyset_report();
    f_num("lru_capacity", "%.0f", C.lru_capacity);
    f_u64("hits", L.hits);
    f_u64("misses", L.misses);
    f_num("miss_rate", "%.4f", L.hits + L.misses ? (double)L.misses / (double)(L.hits + L.misses) : NAN);
}

const struct workload wl_lrucache = {lru_setup, lru_thread_init, lru_loop, lru_check, lru_report, 0};
