/*
 * test_parking_fork - fork while lock() callers of oyama and hybcomb sleep
 * (barge_sleep.h).  The forking thread holds the lock, as a pthread_atfork
 * prepare handler would, while K threads sleep in lock() (spin budget 0);
 * in the child, where those sleepers do not exist, it releases the lock and
 * 8 new threads count through it (lock/unlock, so lock() callers sleep
 * again): whatever sleeping state the parent's threads left in the lock
 * must not keep the child's sleepers from being woken.  Passes if the
 * child's count is exact within its bound and the parent's threads finish.
 * Each algorithm in a child process (parking.h).
 */
#include "parking.h"

static liblock_t forkb_lock;
static _Atomic pid_t forkb_tid[8];
static long forkb_counter;

static void *forkb_sleeper(void *arg)
{
    int me = (int)(long)arg;
    atomic_store(&forkb_tid[me], parking_gettid());
    liblock_lock(&forkb_lock);
    forkb_counter++;
    liblock_unlock(&forkb_lock);
    return NULL;
}

static _Atomic int forkb_inside, forkb_bad;
static long forkb_child_counter;

static void *forkb_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        liblock_lock(&forkb_lock);
        if (atomic_exchange(&forkb_inside, 1))
            atomic_store(&forkb_bad, 1);
        forkb_child_counter++;
        atomic_store(&forkb_inside, 0);
        liblock_unlock(&forkb_lock);
    }
    return NULL;
}

/* The child of spec "forkb:ALGO". */
static int forkb_child(const char *spec)
{
    if (strncmp(spec, "forkb:", 6) != 0)
        return 127;
    const char *algo = spec + 6;
    enum { K = 4 };
    pthread_t th[K];
    if (parking_hold_with_sleepers(&forkb_lock, algo, K, th, forkb_sleeper, forkb_tid))
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        liblock_unlock(&forkb_lock); /* the parent's sleepers are not here */
        pthread_t c[8];
        for (int i = 0; i < 8; i++)
            pthread_create(&c[i], NULL, forkb_worker, NULL);
        for (int i = 0; i < 8; i++)
            pthread_join(c[i], NULL);
        _exit(forkb_child_counter == 8 * 20000 && !atomic_load(&forkb_bad) ? 0 : 1);
    }
    liblock_unlock(&forkb_lock);
    for (int i = 0; i < K; i++)
        pthread_join(th[i], NULL);
    int rc = th_wait_child(pid, 30, "forked child");
    return rc != 0 ? 1 : forkb_counter == K ? 0 : 3;
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 300, forkb_child);
    if (rc >= 0)
        return rc;
    static const char *const bargers[] = {"oyama", "hybcomb"};
    for (size_t i = 0; i < sizeof bargers / sizeof *bargers; i++) {
        char what[128], spec[96];
        snprintf(what, sizeof what, "%s: fork while lock() callers sleep, the child uses the lock", bargers[i]);
        snprintf(spec, sizeof spec, "forkb:%s", bargers[i]);
        th_context = what;
        parking_spawn(what, spec, "0");
    }
    (void)argc;
    return th_report("test_parking_fork");
}
