/*
 * api.c - the public lock API over the algorithm registry.
 *
 * Argument checking, state allocation, and the per-thread hold stack live
 * here, once, so algorithm files contain only their algorithm.  The hold
 * stack gives every algorithm EDEADLK on self-deadlock and EPERM on unlock
 * by a thread that does not hold the lock, and gives queue locks a node that
 * survives from liblock_lock() to liblock_unlock() at another call site.
 */
#include "internal.h"
#include "fairness.h"

#include <stdlib.h>
#include <string.h>

/* ---- registry ------------------------------------------------------------ */
const struct ll_ops *ll_find_ops(const char *name)
{
    if (!name)
        return NULL;
    for (const struct ll_ops *const *o = ll_registry; *o; o++)
        if (strcmp((*o)->name, name) == 0)
            return *o;
    return NULL;
}

static const char **names_cache;
static pthread_once_t names_once = PTHREAD_ONCE_INIT;
static const char *const empty_names[] = {NULL};

static void names_init(void)
{
    size_t n = 0;
    while (ll_registry[n])
        n++;
    const char **v = calloc(n + 1, sizeof *v);
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        v[i] = ll_registry[i]->name;
    names_cache = v;
}

LL_EXPORT const char *const *liblock_algorithms(void)
{
    pthread_once(&names_once, names_init);
    return names_cache ? names_cache : empty_names;
}

LL_EXPORT int liblock_algorithm_info(const char *name, liblock_algorithm_info_t *info)
{
    if (!name || !info)
        return EINVAL;
    const struct ll_ops *o = ll_find_ops(name);
    if (!o)
        return EINVAL;
    info->name = o->name;
    info->description = o->description;
    info->source = o->source;
    info->properties = o->props;
    info->policies = o->policies;
    info->default_policy = o->default_policy;
    info->lock_bytes = sizeof(liblock_t) + ((o->state_size + LL_CACHELINE - 1) & ~(size_t)(LL_CACHELINE - 1));
    info->waiter_bytes = o->node_size ? sizeof(ll_hold_t) : 0;
    return 0;
}

/* ---- waiting-policy names ------------------------------------------------ */
static const char *const wait_names[LIBLOCK_WAIT__COUNT] = {"default", "spin", "spin-then-park", "yield", "park",
                                                                "preempt-aware"};

LL_EXPORT const char *liblock_wait_name(int policy)
{
    if (policy < 0 || policy >= LIBLOCK_WAIT__COUNT)
        return NULL;
    return wait_names[policy];
}

LL_EXPORT int liblock_wait_parse(const char *name, int *policy)
{
    if (!name || !policy)
        return EINVAL;
    for (int i = 0; i < LIBLOCK_WAIT__COUNT; i++)
        if (strcmp(name, wait_names[i]) == 0) {
            *policy = i;
            return 0;
        }
    if (strcmp(name, "stp") == 0) {
        *policy = LIBLOCK_WAIT_SPIN_THEN_PARK;
        return 0;
    }
    return EINVAL;
}

/* ---- attributes ------------------------------------------------------------ */
LL_EXPORT int liblock_attr_init(liblock_attr_t *attr)
{
    if (!attr)
        return EINVAL;
    memset(attr, 0, sizeof *attr);
    attr->_magic = LL_ATTR_MAGIC;
    attr->_wait = LIBLOCK_WAIT_DEFAULT;
    return 0;
}

LL_EXPORT int liblock_attr_destroy(liblock_attr_t *attr)
{
    if (!attr || attr->_magic != LL_ATTR_MAGIC)
        return EINVAL;
    attr->_magic = 0;
    return 0;
}

LL_EXPORT int liblock_attr_setwait(liblock_attr_t *attr, int policy)
{
    if (!attr || attr->_magic != LL_ATTR_MAGIC || policy < 0 || policy >= LIBLOCK_WAIT__COUNT)
        return EINVAL;
    attr->_wait = policy;
    return 0;
}

LL_EXPORT int liblock_attr_getwait(const liblock_attr_t *attr, int *policy)
{
    if (!attr || attr->_magic != LL_ATTR_MAGIC || !policy)
        return EINVAL;
    *policy = attr->_wait;
    return 0;
}

LL_EXPORT int liblock_attr_setserver(liblock_attr_t *attr, liblock_server_t *server)
{
    if (!attr || attr->_magic != LL_ATTR_MAGIC || !server)
        return EINVAL;
    attr->_server = server;
    return 0;
}

/* ---- lock life cycle ------------------------------------------------------------ */
LL_EXPORT int liblock_init(liblock_t *l, const char *algorithm, const liblock_attr_t *attr)
{
    if (!l || !algorithm)
        return EINVAL;
    if (attr && attr->_magic != LL_ATTR_MAGIC)
        return EINVAL;
    const struct ll_ops *o = ll_find_ops(algorithm);
    if (!o)
        return EINVAL;
    int policy = attr ? attr->_wait : LIBLOCK_WAIT_DEFAULT;
    if (policy == LIBLOCK_WAIT_DEFAULT)
        policy = o->default_policy;
    if (!(o->policies & LL_POLICY_BIT(policy)))
        return ENOTSUP;
    /* preempt-aware is spin-then-park for the algorithm, plus a flag that
     * ll_behind reads (internal.h, "Preemption-aware waiting") */
    if (policy == LIBLOCK_WAIT_PREEMPT_AWARE)
        policy = LIBLOCK_WAIT_SPIN_THEN_PARK | LL_WAIT_AWARE;
    void *state = ll_alloc_aligned(o->state_size ? o->state_size : 1);
    if (!state)
        return ENOMEM;
    liblock_t tmp = {._ops = o, ._state = state, ._magic = 0, ._wait = policy, ._aux = NULL, ._stats = NULL};
    int r = o->init ? o->init(&tmp, attr) : 0;
    if (r) {
        free(state);
        return r;
    }
    if ((attr && attr->_fairness) || ll_fairness_env()) { /* docs/fairness.md */
        tmp._stats = ll_fairness_create();
        if (!tmp._stats) {
            if (o->destroy)
                o->destroy(&tmp);
            free(state);
            return ENOMEM;
        }
    }
    tmp._magic = LL_LOCK_MAGIC;
    *l = tmp;
    return 0;
}

LL_EXPORT int liblock_destroy(liblock_t *l)
{
    if (!l || l->_magic != LL_LOCK_MAGIC)
        return EINVAL;
    ll_thread_t *self = ll_self_tls;
    if (self && ll_hold_find(self, l))
        return EBUSY;
    const struct ll_ops *o = LL_OPS(l);
    if (o->destroy) {
        int r = o->destroy(l);
        if (r)
            return r;
    }
    l->_magic = 0;
    free(l->_state);
    l->_state = NULL;
    ll_fairness_free(l->_stats);
    l->_stats = NULL;
    return 0;
}

LL_EXPORT const char *liblock_algorithm(const liblock_t *l)
{
    if (!l || l->_magic != LL_LOCK_MAGIC)
        return NULL;
    return LL_OPS(l)->name;
}

/* The door to an algorithm's statistics (struct ll_ops .stats). */
LL_EXPORT int ll_lock_stats(const liblock_t *l, struct ll_stats *out)
{
    if (!l || !out || l->_magic != LL_LOCK_MAGIC)
        return EINVAL;
    out->n = 0;
    if (!LL_OPS(l)->stats)
        return ENOTSUP;
    LL_OPS(l)->stats(l, out);
    return 0;
}

LL_EXPORT int ll_stats_get(const struct ll_stats *s, const char *name, int64_t *value)
{
    for (unsigned i = 0; s && i < s->n && i < LL_STATS_MAX; i++)
        if (strcmp(s->v[i].name, name) == 0) {
            *value = s->v[i].value;
            return 0;
        }
    return ENOENT;
}

LL_EXPORT int liblock_getwait(const liblock_t *l, int *policy)
{
    if (!l || l->_magic != LL_LOCK_MAGIC || !policy)
        return EINVAL;
    *policy = (l->_wait & LL_WAIT_AWARE) ? LIBLOCK_WAIT_PREEMPT_AWARE : ll_policy(l);
    return 0;
}

/* ---- acquire / release ---------------------------------------------------------- */
int ll_api_lock(liblock_t *l)
{
    ll_thread_t *self = ll_self();
    if (LL_UNLIKELY(!self))
        return ENOMEM;
    if (LL_UNLIKELY(ll_hold_find(self, l) != NULL))
        return EDEADLK;
    ll_hold_t *h = ll_hold_push(self, l);
    if (LL_UNLIKELY(!h))
        return ENOMEM;
    int r = LL_OPS(l)->lock(l, h->node);
    if (LL_UNLIKELY(r))
        ll_hold_pop(self, h);
    else if (LL_UNLIKELY(l->_stats != NULL))
        ll_fairness_note(l, self);
    return r;
}

int ll_api_unlock(liblock_t *l)
{
    ll_thread_t *self = ll_self_tls;
    int i = self ? ll_hold_index(self, l) : -1;
    if (LL_UNLIKELY(i < 0))
        return EPERM;
    ll_hold_t *h = self->held[i];
    int r = LL_OPS(l)->unlock(l, h->node);
    /* The algorithm's unlock may have run code that pushed and popped other
     * holds (an RCL or combining path), so pop by record, not by the index
     * taken before it ran. */
    if (LL_LIKELY(r == 0)) {
        if (LL_LIKELY((unsigned)i < self->nheld && self->held[i] == h))
            ll_hold_pop_at(self, (unsigned)i);
        else
            ll_hold_pop(self, h);
    }
    return r;
}

LL_EXPORT int liblock_lock(liblock_t *l)
{
    if (LL_UNLIKELY(!l || l->_magic != LL_LOCK_MAGIC))
        return EINVAL;
    return ll_api_lock(l);
}

LL_EXPORT int liblock_trylock(liblock_t *l)
{
    if (LL_UNLIKELY(!l || l->_magic != LL_LOCK_MAGIC))
        return EINVAL;
    ll_thread_t *self = ll_self();
    if (LL_UNLIKELY(!self))
        return ENOMEM;
    if (ll_hold_find(self, l))
        return EBUSY; /* held by the caller: not free */
    ll_hold_t *h = ll_hold_push(self, l);
    if (LL_UNLIKELY(!h))
        return ENOMEM;
    int r = LL_OPS(l)->trylock(l, h->node);
    if (r)
        ll_hold_pop(self, h);
    else if (LL_UNLIKELY(l->_stats != NULL))
        ll_fairness_note(l, self);
    return r;
}

LL_EXPORT int liblock_unlock(liblock_t *l)
{
    if (LL_UNLIKELY(!l || l->_magic != LL_LOCK_MAGIC))
        return EINVAL;
    return ll_api_unlock(l);
}

LL_EXPORT void *liblock_execute(liblock_t *l, void *(*cs)(void *), void *arg)
{
    if (LL_UNLIKELY(!l || l->_magic != LL_LOCK_MAGIC || !cs)) {
        errno = EINVAL;
        return NULL;
    }
    const struct ll_ops *o = LL_OPS(l);
    if (o->execute)
        return LL_UNLIKELY(l->_stats != NULL) ? ll_fairness_execute(l, cs, arg) : o->execute(l, cs, arg);
    int r = ll_api_lock(l);
    if (LL_UNLIKELY(r)) {
        errno = r;
        return NULL;
    }
    void *ret = cs(arg);
    ll_api_unlock(l);
    return ret;
}

LL_EXPORT int liblock_thread_register(liblock_t *l)
{
    if (!l || l->_magic != LL_LOCK_MAGIC)
        return EINVAL;
    if (!ll_self())
        return ENOMEM;
    const struct ll_ops *o = LL_OPS(l);
    return o->thread_register ? o->thread_register(l) : 0;
}
