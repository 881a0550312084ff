/*
 * test_hapax - what is particular to the hapax lock
 * (src/locks/queue/hapax.c): strict FIFO admission, values that are never
 * used twice, and holds that belong to their node, not their thread.
 *
 *  order   A controller drives NT worker threads through a random script of
 *          single events, each complete before the next: "thread t calls
 *          lock()" (complete when the lock's `arrive` probe changes: the
 *          new value is t's hapax), "thread t calls trylock()", "the holder
 *          unlocks", "another thread unlocks the holder's hold" (the
 *          controller, with the holder's node), "the holder exits holding"
 *          (its hold is then released by the controller and a new thread
 *          takes its place), "destroy() while busy".  The controller keeps
 *          the model beside the lock: a FIFO queue of waiters in arrival
 *          order.  Checked at every event: each admission is the queue's
 *          head; a lock() on a busy lock is not admitted at once; trylock
 *          succeeds iff nobody holds or waits, and a failed one leaves
 *          `arrive` unchanged; after each release `depart` is the released
 *          hold's value, and `arrive == depart` exactly when the model is
 *          free; each new hapax is non-zero and differs from every value
 *          taken before (all of them, compared at the end); destroy() is
 *          EBUSY while busy and 0 at the end.
 *  relock  A holder locks again with a second node and waits behind its
 *          own hold; a third thread queues behind it; another thread
 *          unlocks the first hold: the relocker is admitted, then the
 *          third thread (each queueing seen as a change of `arrive`).
 *  values  One thread takes more holds than a block has values (2^16 - 1),
 *          then short-lived threads take a few each, one after the other:
 *          values read from `arrive` inside each hold increase strictly
 *          within a thread (across the block boundary too),
 *          every new thread's first value exceeds every value taken before
 *          (an exited thread's block is not reused), and none repeats.
 * Each under spin, yield, spin-then-park, and spin-then-park with
 * LIBLOCK_SPIN_NS=0 (waiters sleep at once: the wake-ups, early ones
 * included, are what admits them), in a child process with a time bound
 * (parking.h); no timing assertions.
 */
#include "parking.h"

#include <stdlib.h>

#define NT 4
#define MAXVALS 200000

enum { C_NONE, C_LOCK, C_TRY, C_RELEASE, C_EXIT, C_QUIT };

struct worker {
    pthread_t th;
    int id;
    void *node;
    _Atomic int cmd;
    _Atomic unsigned acks;
    _Atomic int tryres;
};

static const struct ll_ops *ops;
static liblock_t L;
static struct worker W[NT];
static int admit_log[MAXVALS];
static _Atomic int nlog;
static uint64_t vals[MAXVALS];
static int nvals;

static int64_t probe(const char *name)
{
    struct ll_stats st;
    if (ll_lock_stats(&L, &st) != 0)
        return -1;
    return ll_stat(&st, name, -1);
}

static void *node_new(void)
{
    void *n = aligned_alloc(LL_CACHELINE, LL_NODE_BYTES);
    if (!n)
        abort();
    memset(n, 0, LL_NODE_BYTES);
    return n;
}

static void admitted(int id)
{
    int i = atomic_load_explicit(&nlog, memory_order_relaxed); /* inside the critical section */
    if (i < MAXVALS)
        admit_log[i] = id;
    atomic_store_explicit(&nlog, i + 1, memory_order_release);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (;;) {
        int c;
        while ((c = atomic_load_explicit(&w->cmd, memory_order_acquire)) == C_NONE)
            usleep(20);
        atomic_store_explicit(&w->cmd, C_NONE, memory_order_relaxed);
        switch (c) {
        case C_LOCK:
            ops->lock(&L, w->node);
            admitted(w->id);
            break;
        case C_TRY: {
            int r = ops->trylock(&L, w->node);
            if (r == 0)
                admitted(w->id);
            atomic_store_explicit(&w->tryres, r, memory_order_relaxed);
            break;
        }
        case C_RELEASE:
            ops->unlock(&L, w->node);
            break;
        case C_EXIT:
            atomic_fetch_add_explicit(&w->acks, 1, memory_order_release);
            return NULL; /* holding */
        case C_QUIT:
            return NULL;
        }
        atomic_fetch_add_explicit(&w->acks, 1, memory_order_release);
    }
}

static void send(int t, int c) { atomic_store_explicit(&W[t].cmd, c, memory_order_release); }

static void wait_acks(int t, unsigned n)
{
    while (atomic_load_explicit(&W[t].acks, memory_order_acquire) < n)
        usleep(10);
}

static int wait_admission(int n)
{
    while (atomic_load_explicit(&nlog, memory_order_acquire) < n)
        usleep(10);
    return n - 1 < MAXVALS ? admit_log[n - 1] : -1;
}

/* A new hapax: non-zero, not one of the values held or waited with now
 * (all earlier ones are compared at the end). */
static void new_value(uint64_t v, const uint64_t *live, int nlive)
{
    CHECK(v != 0, "hapax 0");
    for (int i = 0; i < nlive; i++)
        CHECK(v != live[i], "hapax %llu taken twice", (unsigned long long)v);
    if (nvals < MAXVALS)
        vals[nvals++] = v;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void check_all_distinct(void)
{
    qsort(vals, (size_t)nvals, sizeof *vals, cmp_u64);
    int dups = 0;
    for (int i = 1; i < nvals; i++)
        dups += vals[i] == vals[i - 1];
    CHECK(dups == 0, "%d hapax values taken twice among %d", dups, nvals);
}

/* ---- order: the model ---- */
static int holder;             /* -1: free */
static int queue[NT], nq;      /* waiters, next first */
static int waiting[NT];
static int exited[NT];         /* t's thread exited holding */
static uint64_t hap[NT];       /* t's current hold's (or wait's) value */
static unsigned acks_expected[NT];
static long byother, exits;

static void start_worker(int t)
{
    W[t].id = t;
    atomic_store(&W[t].cmd, C_NONE);
    atomic_store(&W[t].acks, 0);
    acks_expected[t] = 0;
    exited[t] = 0;
    CHECK_EQ(pthread_create(&W[t].th, NULL, worker_main, &W[t]), 0);
}

static int live_values(uint64_t *out)
{
    int n = 0;
    for (int t = 0; t < NT; t++)
        if (t == holder || waiting[t])
            out[n++] = hap[t];
    return n;
}

static void ev_lock(int t)
{
    uint64_t live[NT];
    int nlive = live_values(live);
    int before = atomic_load(&nlog);
    int64_t prev = probe("arrive");
    if (holder < 0) {
        CHECK_EQ(nq, 0);
        send(t, C_LOCK);
        wait_acks(t, ++acks_expected[t]);
        CHECK_EQ(wait_admission(before + 1), t);
        int64_t a = probe("arrive");
        CHECK(probe("depart") == prev, "admitted on a free lock: depart %lld, the previous arrival %lld",
              (long long)probe("depart"), (long long)prev);
        new_value((uint64_t)a, live, nlive);
        hap[t] = (uint64_t)a;
        holder = t;
        return;
    }
    send(t, C_LOCK);
    acks_expected[t]++; /* completes at its admission */
    int64_t a;
    while ((a = probe("arrive")) == prev)
        usleep(10);
    CHECK(atomic_load(&nlog) == before, "a lock() on a held lock was admitted at once");
    new_value((uint64_t)a, live, nlive);
    hap[t] = (uint64_t)a;
    queue[nq++] = t;
    waiting[t] = 1;
}

static void ev_try(int t)
{
    uint64_t live[NT];
    int nlive = live_values(live);
    int before = atomic_load(&nlog);
    int64_t prev = probe("arrive");
    int free_now = holder < 0 && nq == 0;
    send(t, C_TRY);
    wait_acks(t, ++acks_expected[t]);
    int r = atomic_load(&W[t].tryres);
    CHECK_EQ(r, free_now ? 0 : EBUSY);
    if (r == 0) {
        CHECK_EQ(wait_admission(before + 1), t);
        int64_t a = probe("arrive");
        new_value((uint64_t)a, live, nlive);
        hap[t] = (uint64_t)a;
        holder = t;
    } else {
        CHECK(probe("arrive") == prev, "a failed trylock changed arrive");
    }
}

static void ev_release(int by_other)
{
    int h = holder, before = atomic_load(&nlog);
    int next = nq ? queue[0] : -1;
    if (nq) {
        memmove(queue, queue + 1, (size_t)(nq - 1) * sizeof *queue);
        nq--;
    }
    if (by_other || exited[h]) {
        ops->unlock(&L, W[h].node); /* not the thread that locked it */
        byother++;
    } else {
        send(h, C_RELEASE);
        wait_acks(h, ++acks_expected[h]);
    }
    if (exited[h])
        start_worker(h); /* the hold is released: a new thread takes the node */
    holder = next;
    if (next < 0) {
        CHECK_EQ(probe("depart"), (int64_t)hap[h]);
        CHECK_EQ(probe("arrive"), probe("depart"));
        CHECK_EQ(atomic_load(&nlog), before);
        return;
    }
    int got = wait_admission(before + 1);
    CHECK(got == next, "admitted thread %d, FIFO says %d", got, next);
    CHECK(probe("arrive") != probe("depart"), "arrive == depart while held");
    if (got != next)
        return;
    wait_acks(next, acks_expected[next]);
    CHECK_EQ(probe("depart"), (int64_t)hap[h]);
    waiting[next] = 0;
}

static void ev_exit(void)
{
    int h = holder;
    send(h, C_EXIT);
    wait_acks(h, ++acks_expected[h]);
    pthread_join(W[h].th, NULL);
    exited[h] = 1;
    exits++;
}

static void run_script(long events, uint64_t *rng)
{
    atomic_store(&nlog, 0);
    holder = -1;
    nq = 0;
    byother = exits = 0;
    memset(waiting, 0, sizeof waiting);
    for (int t = 0; t < NT; t++) {
        W[t].node = node_new();
        start_worker(t);
    }
    for (long e = 0; e < events && atomic_load(&nlog) < MAXVALS - 1 && nvals < MAXVALS - 1; e++) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        unsigned r = (unsigned)(*rng % 100);
        int idle[NT], nidle = 0;
        for (int t = 0; t < NT; t++)
            if (t != holder && !waiting[t])
                idle[nidle++] = t;
        int t = nidle ? idle[(*rng >> 32) % (unsigned)nidle] : -1;
        if (holder >= 0 && (r < 25 || t < 0))
            ev_release(0);
        else if (holder >= 0 && r < 33)
            ev_release(1);
        else if (holder >= 0 && !exited[holder] && r < 36)
            ev_exit();
        else if (t >= 0 && r < 88)
            ev_lock(t);
        else if (t >= 0 && r < 97)
            ev_try(t);
        else if (holder >= 0)
            CHECK_EQ(ops->destroy(&L), EBUSY);
    }
    while (holder >= 0)
        ev_release(0);
    /* whatever the script drew: a holder that exits with a waiter queued,
     * its hold released by another thread, then a live holder's too */
    ev_lock(0);
    ev_lock(1);
    ev_exit();
    ev_release(1);
    ev_release(1);
    CHECK_EQ(probe("arrive"), probe("depart"));
    for (int t = 0; t < NT; t++) {
        send(t, C_QUIT);
        pthread_join(W[t].th, NULL);
        free(W[t].node);
    }
}

/* ---- relock: a thread waits on a lock it holds ---- */
static void *relock_nodes[3];
static _Atomic int relock_stage;
static _Atomic int64_t relock_first; /* the first hold's value */

static void *relocker(void *arg)
{
    (void)arg;
    ops->lock(&L, relock_nodes[0]);
    atomic_store(&relock_first, probe("arrive")); /* ours: nobody else has arrived */
    atomic_store(&relock_stage, 1);
    ops->lock(&L, relock_nodes[1]); /* behind its own first hold */
    admitted(1);
    ops->unlock(&L, relock_nodes[1]);
    return NULL;
}

static void *relock_third(void *arg)
{
    (void)arg;
    ops->lock(&L, relock_nodes[2]);
    admitted(2);
    ops->unlock(&L, relock_nodes[2]);
    return NULL;
}

/* The holder locks again with a second node and waits (a binary semaphore);
 * a third thread queues behind it; another thread (this one) unlocks the
 * first hold: the relocker is admitted, then the third thread. */
static void run_relock(int rounds)
{
    for (int i = 0; i < 3; i++)
        relock_nodes[i] = node_new();
    for (int r = 0; r < rounds; r++) {
        atomic_store(&nlog, 0);
        atomic_store(&relock_stage, 0);
        pthread_t a, c;
        pthread_create(&a, NULL, relocker, NULL);
        while (atomic_load(&relock_stage) == 0)
            usleep(10);
        int64_t first = atomic_load(&relock_first);
        while (probe("arrive") == first) /* the relocker's second lock() queues */
            usleep(10);
        int64_t second = probe("arrive");
        pthread_create(&c, NULL, relock_third, NULL);
        while (probe("arrive") == second)
            usleep(10);
        CHECK_EQ(atomic_load(&nlog), 0); /* nobody is in yet */
        ops->unlock(&L, relock_nodes[0]); /* not the thread that locked it */
        pthread_join(a, NULL);
        pthread_join(c, NULL);
        CHECK_EQ(atomic_load(&nlog), 2);
        CHECK_EQ(admit_log[0], 1);
        CHECK_EQ(admit_log[1], 2);
        CHECK_EQ(probe("arrive"), probe("depart"));
    }
    for (int i = 0; i < 3; i++)
        free(relock_nodes[i]);
}

/* ---- values ---- */
struct vthread {
    int holds;
    uint64_t first, last;
    int increasing;
};

static void *value_taker(void *arg)
{
    struct vthread *v = arg;
    void *n = node_new();
    v->increasing = 1;
    for (int i = 0; i < v->holds; i++) {
        ops->lock(&L, n);
        uint64_t a = (uint64_t)probe("arrive"); /* ours: nobody else uses the lock now */
        ops->unlock(&L, n);
        if (i == 0)
            v->first = a;
        else if (a <= v->last)
            v->increasing = 0;
        v->last = a;
        if (nvals < MAXVALS)
            vals[nvals++] = a;
    }
    free(n);
    return NULL;
}

static void run_values(void)
{
    struct vthread big = {.holds = (1 << 16) + 100}; /* more than one block */
    pthread_t th;
    pthread_create(&th, NULL, value_taker, &big);
    pthread_join(th, NULL);
    CHECK(big.increasing, "one thread's values are not increasing");
    uint64_t max = big.last;
    for (int k = 0; k < (th_scale_small() ? 20 : 200); k++) {
        struct vthread v = {.holds = 3};
        pthread_create(&th, NULL, value_taker, &v);
        pthread_join(th, NULL);
        CHECK(v.increasing, "thread %d's values are not increasing", k);
        CHECK(v.first > max, "thread %d's first value %llu is not above every earlier one (%llu)", k,
              (unsigned long long)v.first, (unsigned long long)max);
        max = v.last;
    }
    CHECK_EQ(probe("arrive"), probe("depart"));
}

/* The child of spec "hapax:POLICY". */
static int hapax_child(const char *spec)
{
    int policy;
    if (sscanf(spec, "hapax:%d", &policy) != 1)
        return 127;
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    if (liblock_init(&L, "hapax", &a))
        return 2;
    ops = LL_OPS(&L);
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)policy;
    long events = th_scale_small() ? 300 : 2000;
    th_context = "order";
    run_script(policy == LIBLOCK_WAIT_SPIN ? events / 4 : events, &rng);
    int admissions = atomic_load(&nlog);
    CHECK_EQ(liblock_destroy(&L), 0);
    CHECK_EQ(liblock_init(&L, "hapax", &a), 0);
    th_context = "relock";
    run_relock(th_scale_small() ? 20 : 100);
    th_context = "values";
    run_values();
    th_context = "distinct";
    check_all_distinct();
    printf("  %s: %d admissions in the script (%ld releases by another thread, %ld holders exited), %d values in "
           "all, distinct\n",
           liblock_wait_name(policy), admissions, byother, exits, nvals);
    return th_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 500, hapax_child);
    if (rc >= 0)
        return rc;
    if (!th_selected(argc, argv, "hapax"))
        return th_report("test_hapax");
    if (!ll_find_ops("hapax")) {
        th_skip("test_hapax: no hapax lock in this build");
        return TH_SKIPPED;
    }
    parking_spawn_policies("hapax");
    return th_report("test_hapax");
}
