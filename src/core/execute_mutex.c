/*
 * execute_mutex.c - liblock_execute_mutex for a program linked normally:
 * glibc's lock, the critical section, glibc's unlock.
 *
 * These definitions are weak on purpose.  The interposer (liblock-interpose.so,
 * src/shim/mutex.c, also in liblock-profile.so) links the same library objects and defines both
 * functions strongly, so inside it the linker takes its own; and when a
 * program linked with liblock.so runs under LD_PRELOAD of the interposer, the
 * dynamic linker resolves the program's call to the preloaded (interposer's)
 * definition first.  So `liblock run --lock rcl` ships the critical sections
 * of a transformed program (docs/transform.md) to the RCL server while a
 * plain run keeps glibc's behaviour.  (A program linked with liblock.a binds
 * the call at link time and always gets this version.)
 */
#include "internal.h"

static void *glibc_execute(pthread_mutex_t *m, void *(*cs)(void *), void *ctx)
{
    if (!m || !cs) {
        errno = EINVAL;
        return NULL;
    }
    int r = pthread_mutex_lock(m);
    if (r) {
        errno = r;
        return NULL;
    }
    void *ret = cs(ctx);
    int saved = errno; /* the cs's errno is the caller's, not the unlock's */
    pthread_mutex_unlock(m);
    errno = saved;
    return ret;
}

LL_EXPORT __attribute__((weak)) void *liblock_execute_mutex(pthread_mutex_t *m, void *(*cs)(void *), void *ctx)
{
    return glibc_execute(m, cs, ctx);
}

LL_EXPORT __attribute__((weak)) void *liblock_execute_mutex_cond(pthread_mutex_t *m, void *(*cs)(void *), void *ctx)
{
    return glibc_execute(m, cs, ctx);
}
