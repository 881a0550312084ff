/*
 * test_hemlock - the hemlock lock's holds are its nodes, not its threads
 * (src/locks/queue/hemlock.c, "Where the Grant word lives"): what a
 * per-thread Grant word could not do, through the ops table with a node
 * per hold, as the interposer calls it for a NORMAL mutex:
 *  relock     a thread holding the lock locks it again with a second node
 *             and waits (a binary semaphore); a third thread queues behind
 *             it; another thread unlocks the first hold, which lets the
 *             relocker in, and then the third thread, in that order;
 *  two-locks  a thread holds two locks, a waiter queued on each; another
 *             thread unlocks one hold at the moment the holder unlocks the
 *             other: both waiters get their lock;
 *  exit-held  a thread locks and exits; a waiter queues; another thread
 *             unlocks the exited thread's hold: the waiter gets the lock.
 * Every critical section checks an "inside" flag; every round ends with
 * destroy == 0.  Under spin, yield and spin-then-park, the last also with
 * LIBLOCK_SPIN_NS=0 (waiters sleep on their own node at once and are
 * granted there), each in a child process (parking.h) with a time bound:
 * a hold the lock lost track of hangs, and the bound fails it.
 */
#include "parking.h"

#include <stdlib.h>

static const struct ll_ops *ops;
static liblock_t L1, L2;
static _Atomic int inside, overlap, stage;
static _Atomic int order[4], norder;

static void *node_new(void)
{
    void *n = aligned_alloc(LL_CACHELINE, LL_NODE_BYTES);
    if (!n)
        abort();
    memset(n, 0, LL_NODE_BYTES);
    return n;
}

static void cs(int who)
{
    if (atomic_exchange(&inside, 1))
        atomic_fetch_add(&overlap, 1);
    order[atomic_fetch_add(&norder, 1) & 3] = who;
    for (volatile int i = 0; i < 200; i++)
        ;
    atomic_store(&inside, 0);
}

/* Wait until stage reaches s; then give a thread that is about to queue
 * time to do so (the test is only weaker, never wrong, if it has not). */
static void await_stage(int s)
{
    while (atomic_load(&stage) < s)
        sched_yield();
}

/* ---- relock ---- */
struct relock {
    void *first, *second, *third;
};

static void *relocker(void *arg)
{
    struct relock *r = arg;
    ops->lock(&L1, r->first);
    atomic_store(&stage, 1);
    ops->lock(&L1, r->second); /* waits until another thread unlocks `first` */
    cs(1);
    ops->unlock(&L1, r->second);
    return NULL;
}

static void *third(void *arg)
{
    struct relock *r = arg;
    await_stage(2);
    ops->lock(&L1, r->third);
    cs(2);
    ops->unlock(&L1, r->third);
    return NULL;
}

static void relock_round(struct relock *r)
{
    atomic_store(&stage, 0);
    atomic_store(&norder, 0);
    pthread_t a, c;
    pthread_create(&a, NULL, relocker, r);
    await_stage(1);
    usleep(300); /* the relocker queues behind its own first hold */
    pthread_create(&c, NULL, third, r);
    atomic_store(&stage, 2);
    usleep(300);
    CHECK_EQ(atomic_load(&norder), 0); /* nobody is in yet */
    ops->unlock(&L1, r->first);        /* not the thread that locked it */
    pthread_join(a, NULL);
    pthread_join(c, NULL);
    CHECK_EQ(atomic_load(&norder), 2);
    CHECK_EQ(order[0], 1);
    CHECK_EQ(order[1], 2);
}

/* ---- two-locks ---- */
struct two {
    void *h1, *h2, *w1, *w2;
    pthread_barrier_t go;
};

static void *two_holder(void *arg)
{
    struct two *t = arg;
    ops->lock(&L1, t->h1);
    ops->lock(&L2, t->h2);
    atomic_store(&stage, 1);
    pthread_barrier_wait(&t->go);
    ops->unlock(&L2, t->h2); /* while the main thread unlocks L1's hold */
    return NULL;
}

static _Atomic int got1, got2;

static void *two_w1(void *arg)
{
    struct two *t = arg;
    ops->lock(&L1, t->w1);
    atomic_store(&got1, 1);
    ops->unlock(&L1, t->w1);
    return NULL;
}

static void *two_w2(void *arg)
{
    struct two *t = arg;
    ops->lock(&L2, t->w2);
    atomic_store(&got2, 1);
    ops->unlock(&L2, t->w2);
    return NULL;
}

static void two_round(struct two *t)
{
    atomic_store(&stage, 0);
    atomic_store(&got1, 0);
    atomic_store(&got2, 0);
    pthread_t h, a, b;
    pthread_create(&h, NULL, two_holder, t);
    await_stage(1);
    pthread_create(&a, NULL, two_w1, t);
    pthread_create(&b, NULL, two_w2, t);
    usleep(500); /* both waiters queue */
    pthread_barrier_wait(&t->go);
    ops->unlock(&L1, t->h1);
    pthread_join(h, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK_EQ(atomic_load(&got1), 1);
    CHECK_EQ(atomic_load(&got2), 1);
}

/* ---- exit-held ---- */
static void *exit_locker(void *arg)
{
    ops->lock(&L1, arg);
    return NULL; /* exits holding */
}

static void *exit_waiter(void *arg)
{
    atomic_store(&stage, 1);
    ops->lock(&L1, arg);
    cs(3);
    ops->unlock(&L1, arg);
    return NULL;
}

static void exit_round(void *held, void *mine)
{
    atomic_store(&stage, 0);
    atomic_store(&norder, 0);
    pthread_t a, w;
    pthread_create(&a, NULL, exit_locker, held);
    pthread_join(a, NULL);
    pthread_create(&w, NULL, exit_waiter, mine);
    await_stage(1);
    usleep(300);
    CHECK_EQ(atomic_load(&norder), 0);
    ops->unlock(&L1, held);
    pthread_join(w, NULL);
    CHECK_EQ(atomic_load(&norder), 1);
}

/* The child of spec "hem:POLICY". */
static int hem_child(const char *spec)
{
    int policy;
    if (sscanf(spec, "hem:%d", &policy) != 1)
        return 127;
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    if (liblock_init(&L1, "hemlock", &a) || liblock_init(&L2, "hemlock", &a))
        return 2;
    ops = LL_OPS(&L1);
    int rounds = th_scale_small() ? 20 : 150;
    struct relock r = {node_new(), node_new(), node_new()};
    struct two t = {node_new(), node_new(), node_new(), node_new()};
    pthread_barrier_init(&t.go, NULL, 2);
    void *held = node_new(), *mine = node_new();
    for (int i = 0; i < rounds; i++) {
        th_context = "relock";
        relock_round(&r);
        th_context = "two-locks";
        two_round(&t);
        th_context = "exit-held";
        exit_round(held, mine);
    }
    th_context = "end";
    CHECK_EQ(atomic_load(&overlap), 0);
    CHECK_EQ(liblock_destroy(&L1), 0);
    CHECK_EQ(liblock_destroy(&L2), 0);
    void *nodes[] = {r.first, r.second, r.third, t.h1, t.h2, t.w1, t.w2, held, mine};
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
        free(nodes[i]);
    pthread_barrier_destroy(&t.go);
    return th_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 300, hem_child);
    if (rc >= 0)
        return rc;
    if (!ll_find_ops("hemlock"))
        return TH_SKIPPED;
    parking_spawn_policies("hem");
    (void)argc;
    return th_report("test_hemlock");
}
