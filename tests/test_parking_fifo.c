/*
 * test_parking_fifo - FIFO order of parked waiters, for every algorithm
 * with the fifo property and the spin-then-park policy (cc-synch, clh,
 * dsm-synch, hyblock, mcs, ticket, ...): the main thread holds the lock, K
 * threads arrive one at a time, each only after the previous one sleeps in
 * the kernel (its /proc state is 'S', so it has queued and parked); after
 * the release they must get the lock in arrival order.  Each algorithm in
 * a child process with LIBLOCK_SPIN_NS=0 (parking.h).
 */
#include "parking.h"

static liblock_t fifo_lock;
static _Atomic pid_t fifo_tid[16];
static int fifo_order[16];
static _Atomic int fifo_pos;

static void *fifo_waiter(void *arg)
{
    int me = (int)(long)arg;
    atomic_store(&fifo_tid[me], parking_gettid());
    liblock_lock(&fifo_lock);
    fifo_order[atomic_fetch_add(&fifo_pos, 1)] = me;
    liblock_unlock(&fifo_lock);
    return NULL;
}

/* The child of spec "fifo:ALGO". */
static int fifo_child(const char *spec)
{
    if (strncmp(spec, "fifo:", 5) != 0)
        return 127;
    const char *algo = spec + 5;
    enum { K = 8 };
    pthread_t th[K];
    if (parking_hold_with_sleepers(&fifo_lock, algo, K, th, fifo_waiter, fifo_tid))
        return 2;
    liblock_unlock(&fifo_lock);
    for (int i = 0; i < K; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < K; i++)
        if (fifo_order[i] != i) {
            fprintf(stderr, "%s: position %d went to waiter %d\n", algo, i, fifo_order[i]);
            return 1;
        }
    return liblock_destroy(&fifo_lock) ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 300, fifo_child);
    if (rc >= 0)
        return rc;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        liblock_algorithm_info_t info;
        if (liblock_algorithm_info(*a, &info) || !(info.properties & LIBLOCK_PROP_FIFO) ||
            !(info.policies & (1u << LIBLOCK_WAIT_SPIN_THEN_PARK)))
            continue;
        char what[128], spec[64];
        snprintf(what, sizeof what, "%s: parked waiters woken in arrival order", *a);
        snprintf(spec, sizeof spec, "fifo:%s", *a);
        th_context = what;
        parking_spawn(what, spec, "0");
        printf("  %s\n", what);
    }
    (void)argc;
    return th_report("test_parking_fifo");
}
