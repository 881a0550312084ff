/* fork while ANOTHER thread holds private mutexes: in the child (where that
 * thread does not exist) each stays locked for ever, as glibc leaves it:
 * trylock EBUSY, also from a new thread of the child, timedlock ETIMEDOUT,
 * destroy EBUSY.  The child can still unlock a NORMAL one (glibc's unlock
 * of a NORMAL mutex does not look at the owner), which is then free; an
 * ERRORCHECK or RECURSIVE one answers unlock with EPERM (its owner is the
 * parent thread's id, which no thread of the child has).  A mutex the
 * other thread locked and unlocked again is free in the child.  A plain
 * lock() is never tried: it would wait for ever. */
#include "common.h"
#include <sys/wait.h>

static pthread_mutex_t n, r, e, used;
static int go[2]; /* the holder blocks reading it until the child has been made */
static atomic_int holding;

static void *holder(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&used);
    pthread_mutex_unlock(&used);
    pthread_mutex_lock(&n);
    pthread_mutex_lock(&r);
    pthread_mutex_lock(&r);
    pthread_mutex_lock(&e);
    atomic_store(&holding, 1);
    char c;
    while (read(go[0], &c, 1) < 0 && errno == EINTR)
        ;
    SHOW("holder unlock errorcheck", pthread_mutex_unlock(&e));
    SHOW("holder unlock recursive", pthread_mutex_unlock(&r));
    SHOW("holder unlock recursive", pthread_mutex_unlock(&r));
    SHOW("holder unlock normal", pthread_mutex_unlock(&n));
    return NULL;
}

static int timedlock_fn(void *m)
{
    struct timespec d = deadline(CLOCK_REALTIME, 50);
    return pthread_mutex_timedlock(m, &d);
}

int main(void)
{
    mutex_of(&n, PTHREAD_MUTEX_NORMAL);
    mutex_of(&r, PTHREAD_MUTEX_RECURSIVE);
    mutex_of(&e, PTHREAD_MUTEX_ERRORCHECK);
    mutex_of(&used, PTHREAD_MUTEX_NORMAL);
    if (pipe(go) != 0) {
        printf("pipe failed\n");
        return 1;
    }
    pthread_t t = spawn(holder, NULL);
    wait_for(&holding, 1);
    pid_t p = fork();
    if (p == 0) {
        alarm(10);
        printf("child: trylock normal: %s\n", en(pthread_mutex_trylock(&n)));
        printf("child: trylock recursive: %s\n", en(pthread_mutex_trylock(&r)));
        printf("child: trylock errorcheck: %s\n", en(pthread_mutex_trylock(&e)));
        printf("child: trylock by a new thread of normal: %s\n", en(in_thread(trylock_fn, &n)));
        printf("child: trylock by a new thread of recursive: %s\n", en(in_thread(trylock_fn, &r)));
        printf("child: trylock by a new thread of errorcheck: %s\n", en(in_thread(trylock_fn, &e)));
        printf("child: timedlock normal: %s\n", en(timedlock_fn(&n)));
        printf("child: timedlock recursive: %s\n", en(timedlock_fn(&r)));
        printf("child: timedlock errorcheck: %s\n", en(timedlock_fn(&e)));
        printf("child: destroy normal: %s\n", en(pthread_mutex_destroy(&n)));
        printf("child: destroy errorcheck: %s\n", en(pthread_mutex_destroy(&e)));
        printf("child: unlock recursive: %s\n", en(pthread_mutex_unlock(&r)));
        printf("child: unlock errorcheck: %s\n", en(pthread_mutex_unlock(&e)));
        printf("child: trylock recursive: %s\n", en(pthread_mutex_trylock(&r)));
        printf("child: trylock errorcheck: %s\n", en(pthread_mutex_trylock(&e)));
        printf("child: unlock normal: %s\n", en(pthread_mutex_unlock(&n)));
        printf("child: trylock normal: %s\n", en(pthread_mutex_trylock(&n)));
        printf("child: unlock normal: %s\n", en(pthread_mutex_unlock(&n)));
        printf("child: timedlock normal: %s\n", en(timedlock_fn(&n)));
        printf("child: unlock normal: %s\n", en(pthread_mutex_unlock(&n)));
        printf("child: trylock locked and unlocked: %s\n", en(pthread_mutex_trylock(&used)));
        printf("child: unlock locked and unlocked: %s\n", en(pthread_mutex_unlock(&used)));
        _exit(0);
    }
    int st = -1;
    waitpid(p, &st, 0);
    printf("child exit: %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
    if (write(go[1], "x", 1) != 1)
        printf("write failed\n");
    pthread_join(t, NULL);
    SHOW("parent trylock normal", pthread_mutex_trylock(&n));
    SHOW("parent unlock normal", pthread_mutex_unlock(&n));
    SHOW("parent trylock recursive", pthread_mutex_trylock(&r));
    SHOW("parent unlock recursive", pthread_mutex_unlock(&r));
    SHOW("parent trylock errorcheck", pthread_mutex_trylock(&e));
    SHOW("parent unlock errorcheck", pthread_mutex_unlock(&e));
    return 0;
}
