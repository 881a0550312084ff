/*
 * real.c - bootstrap: glibc's own pthread/sem functions, found with
 * dlsym(RTLD_NEXT) (shim.h "Bootstrap"), and the __wrap_* entry points
 * through which the liblock objects linked into a preload library reach
 * them (the Makefile links those objects with -Wl,--wrap=pthread_<fn>).
 */
#include "shim.h"

struct shim_real shim_real;
_Atomic int shim_resolved;
__thread int ip_resolving __attribute__((tls_model("initial-exec")));
__thread int ip_in_setup __attribute__((tls_model("initial-exec")));
__thread struct shim_tls shim_tls __attribute__((tls_model("initial-exec")));
__thread int shim_c11_init __attribute__((tls_model("initial-exec")));

static void *must(const char *name)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) {
        static const char msg[] = SHIM_NAME ": cannot find the real pthread functions (dlsym)\n";
        ssize_t r = write(2, msg, sizeof msg - 1);
        (void)r;
        _exit(127);
    }
    return p;
}

/* One thread resolves; `busy` makes the others wait.  Orderings: the
 * exchange that takes `busy` is acquire and its release store pairs with
 * it, so a thread that takes it after a resolver finished sees
 * shim_resolved == 1 and returns; shim_resolved's release store, after
 * every pointer is written, pairs with the acquire loads here and in
 * shim_real_ready (shim.h), so a reader that sees 1 sees all the pointers.
 * A fork while another thread resolves leaves `busy` taken in the child,
 * as the glibc mutex it replaced would have stayed locked; the window is
 * once per process, inside the first call that needs glibc. */
void ip_resolve(void)
{
    static _Atomic int busy;
    if (atomic_load_explicit(&shim_resolved, memory_order_acquire) || ip_resolving)
        return; /* done, or re-entered from our own dlsym: callers check (Bootstrap) */
    while (atomic_exchange_explicit(&busy, 1, memory_order_acquire)) {
        if (atomic_load_explicit(&shim_resolved, memory_order_acquire))
            return;
        sched_yield();
    }
    if (atomic_load_explicit(&shim_resolved, memory_order_relaxed)) {
        atomic_store_explicit(&busy, 0, memory_order_release);
        return;
    }
    ip_resolving = 1;
    shim_real.mutex_init = must("pthread_mutex_init");
    shim_real.mutex_destroy = must("pthread_mutex_destroy");
    shim_real.mutex_lock = must("pthread_mutex_lock");
    shim_real.mutex_trylock = must("pthread_mutex_trylock");
    shim_real.mutex_unlock = must("pthread_mutex_unlock");
    shim_real.mutex_timedlock = must("pthread_mutex_timedlock");
    shim_real.mutex_clocklock = dlsym(RTLD_NEXT, "pthread_mutex_clocklock"); /* glibc >= 2.30; may be NULL */
    shim_real.cond_init = must("pthread_cond_init");
    shim_real.cond_destroy = must("pthread_cond_destroy");
    shim_real.cond_wait = must("pthread_cond_wait");
    shim_real.cond_timedwait = must("pthread_cond_timedwait");
    shim_real.cond_clockwait = dlsym(RTLD_NEXT, "pthread_cond_clockwait"); /* glibc >= 2.30; may be NULL */
    shim_real.cond_signal = must("pthread_cond_signal");
    shim_real.cond_broadcast = must("pthread_cond_broadcast");
    shim_real.sem_init = must("sem_init");
    shim_real.sem_destroy = must("sem_destroy");
    shim_real.sem_wait = must("sem_wait");
    shim_real.sem_trywait = must("sem_trywait");
    shim_real.sem_timedwait = must("sem_timedwait");
    shim_real.sem_clockwait = dlsym(RTLD_NEXT, "sem_clockwait"); /* glibc >= 2.30; may be NULL */
    shim_real.sem_post = must("sem_post");
    shim_real.sem_getvalue = must("sem_getvalue");
    shim_real.create = must("pthread_create");
    ip_resolving = 0;
    atomic_store_explicit(&shim_resolved, 1, memory_order_release);
    atomic_store_explicit(&busy, 0, memory_order_release);
}

/* The library runs another library's code on first need (hwloc's topology,
 * dlopen): every mutex that code meets for the first time stays glibc's, as
 * during set-up (internal.h). */
void ll_foreign_enter(void) { ip_in_setup++; }
void ll_foreign_leave(void) { ip_in_setup--; }

/* Calls from the liblock objects linked into this .so (see the header). */
#define WRAP_READY() (LL_LIKELY(atomic_load_explicit(&shim_resolved, memory_order_acquire)) || (ip_resolve(), 1))
int __wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a) { WRAP_READY(); return R.mutex_init(m, a); }
int __wrap_pthread_mutex_destroy(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_destroy(m); }
int __wrap_pthread_mutex_lock(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_lock(m); }
int __wrap_pthread_mutex_trylock(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_trylock(m); }
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m) { WRAP_READY(); return R.mutex_unlock(m); }
int __wrap_pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *t) { WRAP_READY(); return R.mutex_timedlock(m, t); }
int __wrap_pthread_mutex_clocklock(pthread_mutex_t *m, clockid_t c, const struct timespec *t) { WRAP_READY(); return R.mutex_clocklock ? R.mutex_clocklock(m, c, t) : EINVAL; }
int __wrap_pthread_cond_init(pthread_cond_t *c, const pthread_condattr_t *a) { WRAP_READY(); return R.cond_init(c, a); }
int __wrap_pthread_cond_destroy(pthread_cond_t *c) { WRAP_READY(); return R.cond_destroy(c); }
int __wrap_pthread_cond_wait(pthread_cond_t *c, pthread_mutex_t *m) { WRAP_READY(); return R.cond_wait(c, m); }
int __wrap_pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) { WRAP_READY(); return R.cond_timedwait(c, m, t); }
int __wrap_pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k, const struct timespec *t) { WRAP_READY(); return R.cond_clockwait ? R.cond_clockwait(c, m, k, t) : EINVAL; }
int __wrap_pthread_cond_signal(pthread_cond_t *c) { WRAP_READY(); return R.cond_signal(c); }
int __wrap_pthread_cond_broadcast(pthread_cond_t *c) { WRAP_READY(); return R.cond_broadcast(c); }
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) { WRAP_READY(); return R.create(t, a, fn, arg); }
