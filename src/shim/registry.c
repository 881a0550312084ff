/*
 * registry.c - every wrapper and condvar the shim made, on lists (for fork)
 * and in an address table (for reuse).  Touched only when a lock is set up
 * or destroyed and at fork, never on the lock path.
 */
#include "shim.h"

pthread_mutex_t shim_reg_mutex = PTHREAD_MUTEX_INITIALIZER; /* real glibc mutex */
struct ip_mutex *shim_reg_mutexes;
struct ip_cond *shim_reg_conds;
#define reg_mutexes shim_reg_mutexes
#define reg_conds shim_reg_conds

/* ---- the registry: a list (for fork) and an address table (for reuse) -----
 * Both are guarded by reg_mutex and touched only when a lock is set up or
 * destroyed, never on the lock path.  The table maps a pthread_mutex_t's
 * address to the wrapper last made for it.  A mutex that is never destroyed
 * (std::mutex, whose destructor does not call pthread_mutex_destroy; C code
 * that frees a mutex without destroying it) leaves its wrapper behind; when
 * a new mutex later appears at the same address (zeroed again, or
 * initialised again), the old wrapper is reused if it is idle, so the memory
 * kept is bounded by the number of distinct addresses ever used as mutexes
 * rather than growing with every object. */
static struct ip_mutex **tab;
static size_t tab_cap, tab_n;
_Atomic long shim_live_wrappers;

static size_t tab_hash(const void *a)
{
    uint64_t x = (uint64_t)(uintptr_t)a;
    x ^= x >> 29;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 17);
}

struct ip_mutex *tab_at(long i) { return tab[i]; }

long tab_index(const void *a)
{
    if (!tab_cap)
        return -1;
    for (size_t i = tab_hash(a) & (tab_cap - 1);; i = (i + 1) & (tab_cap - 1)) {
        if (!tab[i])
            return -1;
        if (tab[i]->addr == a)
            return (long)i;
    }
}

void tab_put(struct ip_mutex *w) /* w->addr not in the table */
{
    if ((tab_n + 1) * 2 > tab_cap) {
        size_t nc = tab_cap ? tab_cap * 2 : 256;
        struct ip_mutex **nt = calloc(nc, sizeof *nt);
        if (!nt)
            return; /* no reuse for this one; nothing else depends on the table */
        for (size_t i = 0; i < tab_cap; i++)
            if (tab[i]) {
                size_t j = tab_hash(tab[i]->addr) & (nc - 1);
                while (nt[j])
                    j = (j + 1) & (nc - 1);
                nt[j] = tab[i];
            }
        free(tab);
        tab = nt;
        tab_cap = nc;
    }
    size_t i = tab_hash(w->addr) & (tab_cap - 1);
    while (tab[i])
        i = (i + 1) & (tab_cap - 1);
    tab[i] = w;
    tab_n++;
}

void tab_del_at(size_t i) /* linear probing: shift the cluster back */
{
    tab[i] = NULL;
    tab_n--;
    for (size_t j = (i + 1) & (tab_cap - 1); tab[j]; j = (j + 1) & (tab_cap - 1)) {
        struct ip_mutex *e = tab[j];
        size_t h = tab_hash(e->addr) & (tab_cap - 1);
        /* e may move to the hole i if its home h is not in (i, j] */
        if ((j > i && (h <= i || h > j)) || (j < i && h <= i && h > j)) {
            tab[i] = e;
            tab[j] = NULL;
            i = j;
        }
    }
}

void list_add_locked(struct ip_mutex *w)
{
    w->prev = NULL;
    w->next = reg_mutexes;
    if (reg_mutexes)
        reg_mutexes->prev = w;
    reg_mutexes = w;
}

void list_del_locked(struct ip_mutex *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else
        reg_mutexes = w->next;
    if (w->next)
        w->next->prev = w->prev;
}

void reg_del_mutex(struct ip_mutex *w)
{
    R.mutex_lock(&reg_mutex);
    list_del_locked(w);
    long i = tab_index(w->addr);
    if (i >= 0 && tab[i] == w)
        tab_del_at((size_t)i);
    R.mutex_unlock(&reg_mutex);
}

void reg_add_cond(struct ip_cond *c)
{
    R.mutex_lock(&reg_mutex);
    c->prev = NULL;
    c->next = reg_conds;
    if (reg_conds)
        reg_conds->prev = c;
    reg_conds = c;
    R.mutex_unlock(&reg_mutex);
}

void reg_del_cond(struct ip_cond *c)
{
    R.mutex_lock(&reg_mutex);
    if (c->prev)
        c->prev->next = c->next;
    else
        reg_conds = c->next;
    if (c->next)
        c->next->prev = c->prev;
    R.mutex_unlock(&reg_mutex);
}
