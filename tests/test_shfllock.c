/*
 * test_shfllock - what is particular to ShflLock (src/locks/queue/shfllock.c),
 * with LIBLOCK_NUMA_MAP=0,1 (CPU 0 on node 0, CPU 1 on node 1) and every
 * queued thread pinned, through the ops table with a node per hold:
 *  order      the main thread holds the lock while waiters pinned to a
 *             pattern of CPUs queue one by one; each step (an arrival, an
 *             admission) waits for the shuffle pass it causes (the `passes`
 *             probe), so the run is deterministic, and the admission order
 *             must be that of a model of the header's shuffle rules run at
 *             the same points (under spin and yield the head also walks on
 *             each arrival; under spin-then-park it sleeps on the word and
 *             walks only when it becomes head).  With the default cap the
 *             same-node waiters are admitted in runs; with
 *             LIBLOCK_SHFL_BATCH=2 a batch stops at two; in both the bound
 *             of the header holds on the actual log: a waiter that had k
 *             waiters ahead of it is passed by at most k (cap - 1) later
 *             arrivals;
 *  barge      a waiter queues behind the main thread, which then unlocks
 *             (under spin-then-park once it sleeps on the word) and
 *             trylocks in a row: at most 4 trylocks succeed while the
 *             waiter has not been admitted (the fast path's cap), the
 *             waiter is admitted in the end, and afterwards, with nobody
 *             queued, trylock of the free lock always succeeds (the unlock
 *             reopened the fast path);
 *  foreign    a thread holding the lock locks it again with a second node
 *             and waits; a third thread queues; another thread unlocks the
 *             first hold: the relocker, then the third, get in;
 *  exit-held  a thread locks and exits; a waiter queues; another thread
 *             unlocks the exited thread's hold: the waiter gets in;
 *  count      4 threads mixing lock, trylock and execute: exact count, no
 *             overlap (tests/parking.h).
 * Under spin, yield and spin-then-park, the last also with
 * LIBLOCK_SPIN_NS=0, each in a child process with a time bound.  No timing
 * assertions.  Needs 2 CPUs.
 */
#include "parking.h"

#include <sched.h>
#include <stdlib.h>

static const struct ll_ops *ops;
static liblock_t L;
static int policy_of_child;
static _Atomic int inside, overlap;

static void *node_new(void)
{
    void *n = aligned_alloc(LL_CACHELINE, LL_NODE_BYTES);
    if (!n)
        abort();
    memset(n, 0, LL_NODE_BYTES);
    return n;
}

static int64_t probe(const char *name)
{
    struct ll_stats st;
    if (ll_lock_stats(&L, &st) != 0)
        return -1;
    return ll_stat(&st, name, -1);
}

static void await_probe_ge(const char *name, int64_t v)
{
    while (probe(name) < v)
        sched_yield();
}

static void cs_check(void)
{
    if (atomic_exchange(&inside, 1))
        atomic_fetch_add(&overlap, 1);
    for (volatile int i = 0; i < 100; i++)
        ;
    atomic_store(&inside, 0);
}

/* ---- order: the model ---- */
#define NW 10
struct mnode {
    int id, nid;
    unsigned batch;
};
struct model {
    struct mnode q[NW];
    int len;
    unsigned cap;
    long passes;
};

/* The header's pass by the head q[0]; 1 if it ended at the end of the
 * queue (the head walks again when a node links behind it), 0 at the cap. */
static int model_pass(struct model *m)
{
    struct mnode *q = m->q;
    int nid = q[0].nid;
    if (q[0].batch == 0)
        q[0].batch = 1;
    int last = 0, prev = 0;
    while (q[last].batch < m->cap) {
        int cur = prev + 1;
        if (cur >= m->len)
            goto at_end;
        int has_next = cur + 1 < m->len;
        if (q[cur].nid != nid) {
            if (!has_next)
                goto at_end;
            prev = cur;
            continue;
        }
        if (prev == last) {
            if (q[cur].batch == 0)
                q[cur].batch = q[last].batch + 1;
            last = prev = cur;
            continue;
        }
        if (!has_next)
            goto at_end;
        struct mnode moved = q[cur];
        memmove(&q[last + 2], &q[last + 1], (size_t)(cur - last - 1) * sizeof *q);
        q[last + 1] = moved;
        q[last + 1].batch = q[last].batch + 1;
        last++;
        prev = cur; /* the same node as before the move, one place further back */
    }
    m->passes++;
    return 0;
at_end:
    m->passes++;
    return 1;
}

static const int cpu_pattern[NW] = {0, 1, 0, 1, 1, 0, 0, 1, 0, 1};
static void *wnode[NW];
static pthread_t wth[NW];
static int64_t want_after[NW]; /* passes to wait for in the critical section */
static int alog[NW];
static _Atomic int nalog;

static void *order_waiter(void *arg)
{
    int i = (int)(long)arg;
    ll_pin_self(cpu_pattern[i]);
    ops->lock(&L, wnode[i]);
    cs_check();
    alog[atomic_fetch_add(&nalog, 1)] = i;
    await_probe_ge("passes", want_after[i]); /* the next head's pass, if there is one */
    ops->unlock(&L, wnode[i]);
    return NULL;
}

static void order_round(unsigned cap, int policy, int first_round)
{
    char capbuf[16];
    snprintf(capbuf, sizeof capbuf, "%u", cap);
    setenv("LIBLOCK_SHFL_BATCH", capbuf, 1);
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    CHECK_EQ(liblock_init(&L, "shfllock", &a), 0);
    unsetenv("LIBLOCK_SHFL_BATCH");
    CHECK_EQ(probe("max_batch"), (int64_t)cap);
    const int walks_on_arrival = policy != LIBLOCK_WAIT_SPIN_THEN_PARK;
    /* the model, step by step, with the pass counts each step leads to */
    struct model m = {.len = 0, .cap = cap, .passes = 0};
    int64_t want_arrival[NW];
    int passed = 0, at_end = 0; /* the head's: walked yet, and its last walk reached the end */
    for (int i = 0; i < NW; i++) {
        m.q[m.len++] = (struct mnode){i, cpu_pattern[i], 0};
        if (walks_on_arrival && m.len >= 2 && (!passed || at_end)) {
            at_end = model_pass(&m);
            passed = 1;
        }
        want_arrival[i] = m.passes;
    }
    int expect[NW];
    for (int k = 0; k < NW; k++) {
        expect[k] = m.q[0].id;
        memmove(&m.q[0], &m.q[1], (size_t)(m.len - 1) * sizeof *m.q);
        m.len--;
        if (m.len >= 2)
            model_pass(&m);
        want_after[expect[k]] = m.passes;
    }
    /* the run */
    void *hn = node_new();
    atomic_store(&nalog, 0);
    CHECK_EQ(ops->lock(&L, hn), 0);
    for (int i = 0; i < NW; i++) {
        pthread_create(&wth[i], NULL, order_waiter, (void *)(long)i);
        while (probe("tail") != (int64_t)(intptr_t)wnode[i])
            sched_yield();
        if (i == 0 && !walks_on_arrival)
            while (!(probe("word") & LL_PARKED)) /* the head sleeps on the word */
                sched_yield();
        await_probe_ge("passes", want_arrival[i]);
    }
    CHECK_EQ(probe("passes"), want_arrival[NW - 1]);
    ops->unlock(&L, hn);
    for (int i = 0; i < NW; i++)
        pthread_join(wth[i], NULL);
    CHECK_EQ(atomic_load(&nalog), NW);
    char got[64] = "", exp[64] = "";
    int same = 1;
    for (int k = 0; k < NW; k++) {
        snprintf(got + strlen(got), sizeof got - strlen(got), "%d%d ", alog[k], cpu_pattern[alog[k]]);
        snprintf(exp + strlen(exp), sizeof exp - strlen(exp), "%d%d ", expect[k], cpu_pattern[expect[k]]);
        same &= alog[k] == expect[k];
    }
    CHECK(same, "cap %u: admissions (waiter, node) %s, the model's %s", cap, got, exp);
    if (first_round)
        printf("  %s, cap %u: admissions (waiter, node) %s\n", liblock_wait_name(policy), cap, got);
    /* the bound, on the log: waiter i had i waiters ahead of it */
    for (int k = 0; k < NW; k++) {
        int i = alog[k], passed = 0;
        for (int j = 0; j < k; j++)
            passed += alog[j] > i;
        CHECK(passed <= i * (int)(cap - 1), "cap %u: waiter %d passed by %d later arrivals", cap, i, passed);
    }
    if (cap >= NW) { /* nothing capped: some batch grouped waiters that were apart */
        CHECK(probe("moves") > 0, "cap %u: no waiter was moved", cap);
    }
    CHECK_EQ(probe("tail"), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
    free(hn);
}

/* ---- barge ---- */
static _Atomic int w_in;
static void *barge_waiter(void *arg)
{
    ll_pin_self(1);
    ops->lock(&L, arg);
    cs_check();
    atomic_store(&w_in, 1);
    ops->unlock(&L, arg);
    return NULL;
}

static long barges_total;
static void barge_round(int policy, void *mn, void *wn)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    CHECK_EQ(liblock_init(&L, "shfllock", &a), 0);
    atomic_store(&w_in, 0);
    CHECK_EQ(ops->lock(&L, mn), 0);
    pthread_t w;
    pthread_create(&w, NULL, barge_waiter, wn);
    while (probe("tail") != (int64_t)(intptr_t)wn)
        sched_yield();
    if (policy == LIBLOCK_WAIT_SPIN_THEN_PARK)
        while (!(probe("word") & LL_PARKED)) /* asleep on the word: our trylocks run while it wakes */
            sched_yield();
    int in_row = 0, held = 1;
    for (int r = 0; r < 50; r++) {
        ops->unlock(&L, mn);
        held = 0;
        if (ops->trylock(&L, mn) != 0)
            break;
        held = 1;
        cs_check();
        if (!atomic_load(&w_in)) {
            in_row++;
            barges_total++;
        }
    }
    CHECK(in_row <= 4, "%d trylocks in a row took the lock from the queue's head", in_row);
    if (held)
        ops->unlock(&L, mn);
    pthread_join(w, NULL);
    CHECK_EQ(atomic_load(&w_in), 1);
    CHECK_EQ(probe("tail"), 0);
    for (int r = 0; r < 10; r++) { /* nobody queued: the fast path is open */
        CHECK_EQ(ops->trylock(&L, mn), 0);
        CHECK_EQ(ops->unlock(&L, mn), 0);
    }
    CHECK_EQ(probe("word"), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- foreign unlock, relock ---- */
static _Atomic int stage, norder, order[4];
static void mark(int who)
{
    cs_check();
    order[atomic_fetch_add(&norder, 1) & 3] = who;
}

struct relock {
    void *first, *second, *third;
};
static void *relocker(void *arg)
{
    struct relock *r = arg;
    ops->lock(&L, r->first);
    atomic_store(&stage, 1);
    ops->lock(&L, r->second); /* waits until another thread unlocks `first` */
    mark(1);
    ops->unlock(&L, r->second);
    return NULL;
}
static void *third(void *arg)
{
    struct relock *r = arg;
    while (atomic_load(&stage) < 2)
        sched_yield();
    ops->lock(&L, r->third);
    mark(2);
    ops->unlock(&L, r->third);
    return NULL;
}
static void relock_round(struct relock *r)
{
    atomic_store(&stage, 0);
    atomic_store(&norder, 0);
    pthread_t a, c;
    pthread_create(&a, NULL, relocker, r);
    while (probe("tail") != (int64_t)(intptr_t)r->second)
        sched_yield();
    pthread_create(&c, NULL, third, r);
    atomic_store(&stage, 2);
    while (probe("tail") != (int64_t)(intptr_t)r->third)
        sched_yield();
    CHECK_EQ(atomic_load(&norder), 0);
    ops->unlock(&L, r->first); /* not the thread that locked it */
    pthread_join(a, NULL);
    pthread_join(c, NULL);
    CHECK_EQ(atomic_load(&norder), 2);
    CHECK_EQ(order[0], 1);
    CHECK_EQ(order[1], 2);
}

static void *exit_locker(void *arg)
{
    ops->lock(&L, arg);
    return NULL; /* exits holding */
}
static void *exit_waiter(void *arg)
{
    ops->lock(&L, arg);
    mark(3);
    ops->unlock(&L, arg);
    return NULL;
}
static void exit_round(void *held, void *mine)
{
    atomic_store(&norder, 0);
    pthread_t a, w;
    pthread_create(&a, NULL, exit_locker, held);
    pthread_join(a, NULL);
    pthread_create(&w, NULL, exit_waiter, mine);
    while (probe("tail") != (int64_t)(intptr_t)mine)
        sched_yield();
    CHECK_EQ(atomic_load(&norder), 0);
    ops->unlock(&L, held);
    pthread_join(w, NULL);
    CHECK_EQ(atomic_load(&norder), 1);
}

/* The child of spec "shfl:POLICY". */
static int shfl_child(const char *spec)
{
    if (sscanf(spec, "shfl:%d", &policy_of_child) != 1)
        return 127;
    const int policy = policy_of_child;
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    if (liblock_init(&L, "shfllock", &a))
        return 2;
    ops = LL_OPS(&L);
    CHECK_EQ(liblock_destroy(&L), 0);
    const int small = th_scale_small();
    for (int i = 0; i < NW; i++)
        wnode[i] = node_new();
    if (ll_cpu_node(0) != 0 || ll_cpu_node(1) != 1) {
        th_skip("order: LIBLOCK_NUMA_MAP=0,1 did not take effect (nodes %d, %d)", ll_cpu_node(0), ll_cpu_node(1));
    } else {
        th_context = "order";
        for (int r = 0; r < (small ? 1 : 3); r++) {
            order_round(16, policy, r == 0);
            order_round(2, policy, r == 0);
        }
    }
    th_context = "barge";
    void *mn = node_new(), *wn = node_new();
    for (int r = 0; r < (small ? 20 : 100); r++)
        barge_round(policy, mn, wn);
    printf("  %s: %ld trylocks took the lock from a queued waiter in %d rounds\n", liblock_wait_name(policy),
           barges_total, small ? 20 : 100);
    if (barges_total == 0)
        th_skip("barge (%s): the waiter always took the lock first; the cap was not reached",
                liblock_wait_name(policy));
    CHECK_EQ(liblock_init(&L, "shfllock", &a), 0);
    struct relock rl = {node_new(), node_new(), node_new()};
    void *held = node_new(), *mine = node_new();
    for (int r = 0; r < (small ? 20 : 100); r++) {
        th_context = "foreign";
        relock_round(&rl);
        th_context = "exit-held";
        exit_round(held, mine);
    }
    th_context = "end";
    CHECK_EQ(liblock_destroy(&L), 0);
    CHECK_EQ(atomic_load(&overlap), 0);
    th_context = "count";
    CHECK_EQ(parking_count_run("shfllock", policy, 4, small ? 500 : 5000, 1), 0);
    void *nodes[] = {mn, wn, rl.first, rl.second, rl.third, held, mine};
    for (size_t i = 0; i < sizeof nodes / sizeof *nodes; i++)
        free(nodes[i]);
    for (int i = 0; i < NW; i++)
        free(wnode[i]);
    return th_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    setenv("LIBLOCK_NUMA_MAP", "0,1", 1); /* before liblock reads the topology; the children inherit it */
    int rc = parking_start(argv, 300, shfl_child);
    if (rc >= 0)
        return rc;
    if (!ll_find_ops("shfllock"))
        return TH_SKIPPED;
    if (ll_ncpus() < 2) {
        printf("SKIP: needs 2 CPUs\n");
        return TH_SKIPPED;
    }
    parking_spawn_policies("shfl");
    (void)argc;
    return th_report("test_shfllock");
}
