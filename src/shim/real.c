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

void ip_resolve(void)
{
    if (atomic_load_explicit(&shim_resolved, memory_order_acquire))
        return;
    ip_resolving = 1;
    R.mutex_init = must("pthread_mutex_init");
    R.mutex_destroy = must("pthread_mutex_destroy");
    R.mutex_lock = must("pthread_mutex_lock");
    R.mutex_trylock = must("pthread_mutex_trylock");
    R.mutex_unlock = must("pthread_mutex_unlock");
    R.mutex_timedlock = must("pthread_mutex_timedlock");
    R.mutex_clocklock = dlsym(RTLD_NEXT, "pthread_mutex_clocklock"); /* glibc >= 2.30; may be NULL */
    R.cond_init = must("pthread_cond_init");
    R.cond_destroy = must("pthread_cond_destroy");
    R.cond_wait = must("pthread_cond_wait");
    R.cond_timedwait = must("pthread_cond_timedwait");
    R.cond_clockwait = dlsym(RTLD_NEXT, "pthread_cond_clockwait"); /* glibc >= 2.30; may be NULL */
    R.cond_signal = must("pthread_cond_signal");
    R.cond_broadcast = must("pthread_cond_broadcast");
    R.sem_init = must("sem_init");
    R.sem_destroy = must("sem_destroy");
    R.sem_wait = must("sem_wait");
    R.sem_trywait = must("sem_trywait");
    R.sem_timedwait = must("sem_timedwait");
    R.sem_clockwait = dlsym(RTLD_NEXT, "sem_clockwait"); /* glibc >= 2.30; may be NULL */
    R.sem_post = must("sem_post");
    R.sem_getvalue = must("sem_getvalue");
    R.create = must("pthread_create");
    ip_resolving = 0;
    atomic_store_explicit(&shim_resolved, 1, memory_order_release);
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
