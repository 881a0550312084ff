/*
 * test_cna - the admission order of the cna lock (src/locks/queue/cna.c),
 * checked event by event against its rule, with two NUMA nodes made up by
 * LIBLOCK_NUMA_MAP=0,1 (CPU 0 on node 0, CPU 1 on node 1) and on the
 * machine's own single node.
 *
 * A controller drives NW workers, worker t pinned to CPU t % 2 (node t % 2
 * under the map), through single events -- "t calls lock()", "t calls
 * trylock()", "the hold is released" (by its holder, by another worker or
 * by the controller: unlock by another thread), "destroy() while busy" --
 * each complete before the next: a lock() that must wait once the lock's
 * `tail` probe names its node, a release once the next holder has logged
 * its admission or the tail is nil.  Workers call the ops table with a node
 * each, as the interposer does for a NORMAL mutex.  The controller runs the
 * header's rule beside it as a model (main queue, secondary queue, count):
 * a release grants the first waiter of the holder's node and moves those it
 * skips to the end of the secondary queue; with no such waiter it splices
 * the secondary queue back in front (or grants the first waiter); after H
 * hand-offs with a non-empty secondary queue it splices it back anyway.
 * Checked: every admission is the model's (so every skipped remote waiter
 * went to the secondary queue and came back in order: none is lost), the
 * trylock answers, destroy() EBUSY while busy and 0 at the end, the tail
 * nil whenever the model is free, the lock's counters (moved, splices,
 * flushes, requeues) equal the model's, and, from the log itself, the
 * header's bound: a waiter moved to the secondary queue is admitted after
 * at most H + NW - 2 admissions of other threads.
 * The controller cannot see whether a waiter that swapped the tail has
 * linked itself; a release whose scan reaches a node not linked yet stops
 * there (cna.c: less local, never wrong).  So where the model's scan finds
 * a local waiter the other outcome is accepted too, counted and printed,
 * and a scripted order that met it is reported as skipped, not checked.
 *
 * Parts, each in a child process with a time bound (parking.h), under spin,
 * yield, spin-then-park and spin-then-park with LIBLOCK_SPIN_NS=0:
 *  prefer  node-0 holder 0, waiters 1 2 3 4 6 5 (odd ones on node 1):
 *          admitted 2 4 6 1 3 5 (1 and 3 moved, spliced back when no node-0
 *          waiter is left);
 *  bound   H = 3: waiters 1 2 4 6, then 0 again: admitted 2 4 6 1 0 (1
 *          after exactly H local hand-offs);
 *  exit    a node-0 thread locks and exits; a node-1 and a node-0 worker
 *          queue; the controller unlocks the exited thread's hold: the
 *          node-0 worker first (the preference is the hold's node);
 *  relock  a thread relocks the lock it holds with a second node; the
 *          controller unlocks the first hold; the relocker gets in;
 *  random  a random script, H = 2 and the default H;
 *  one node (no LIBLOCK_NUMA_MAP; under spin-then-park and yield) the
 *          random script: admissions in arrival order (FIFO, as MCS),
 *          nothing moved.
 * Bounded by the watchdogs; no timing assertions.
 */
#include "parking.h"

#include <sched.h>
#include <stdlib.h>

#define NW 8
#define MAXLOG 4096
#define CNA_TEST_H_DEFAULT 1024u

enum { C_NONE, C_LOCK, C_TRY, C_UNLOCK, C_QUIT };

struct worker {
    pthread_t th;
    int id;
    _Atomic int cmd;
    _Atomic int arg; /* C_UNLOCK: the worker whose hold to release */
    _Atomic unsigned acks;
    _Atomic int tryres;
    void *node;
};

static const struct ll_ops *ops;
static liblock_t L;
static int policy_of_run;
static struct worker W[NW];
static int admit_log[MAXLOG];
static _Atomic int nlog;
static int node_of[NW];

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

/* Wait until node n is the lock's tail (its holder has swapped it in). */
static void await_tail(const void *n)
{
    while (probe("tail") != (int64_t)(intptr_t)n)
        usleep(10);
}

static void admitted(int id)
{
    int i = atomic_load_explicit(&nlog, memory_order_relaxed); /* inside the critical section */
    if (i < MAXLOG)
        admit_log[i] = id;
    atomic_store_explicit(&nlog, i + 1, memory_order_release);
}

static void pin(int cpu)
{
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (pthread_setaffinity_np(pthread_self(), sizeof one, &one) != 0) {
        fprintf(stderr, "FAIL: cannot pin a thread to CPU %d\n", cpu); /* not CHECK: other threads count checks */
        abort();
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pin(w->id % 2);
    for (;;) {
        int c;
        while ((c = atomic_load_explicit(&w->cmd, memory_order_acquire)) == C_NONE)
            usleep(20);
        atomic_store_explicit(&w->cmd, C_NONE, memory_order_relaxed);
        switch (c) {
        case C_LOCK:
            if (ops->lock(&L, w->node) == 0)
                admitted(w->id);
            break;
        case C_TRY: {
            int r = ops->trylock(&L, w->node);
            if (r == 0)
                admitted(w->id);
            atomic_store_explicit(&w->tryres, r, memory_order_relaxed);
            break;
        }
        case C_UNLOCK:
            ops->unlock(&L, W[atomic_load_explicit(&w->arg, memory_order_relaxed)].node);
            break;
        case C_QUIT:
            return NULL;
        }
        atomic_fetch_add_explicit(&w->acks, 1, memory_order_release);
    }
}

static unsigned acks_expected[NW];

static void send(int t, int c) { atomic_store_explicit(&W[t].cmd, c, memory_order_release); }

static void wait_acks(int t)
{
    while (atomic_load_explicit(&W[t].acks, memory_order_acquire) < acks_expected[t])
        usleep(10);
}

static int wait_admission(int n)
{
    while (atomic_load_explicit(&nlog, memory_order_acquire) < n)
        usleep(10);
    return n - 1 < MAXLOG ? admit_log[n - 1] : -1;
}

/* ---- the model ---- */
static int holder; /* -1: free */
static int mainq[NW], nmain; /* behind the holder, first first */
static int secq[NW], nsec;   /* secondary queue, eldest first */
static unsigned local;       /* hand-offs since the secondary queue became non-empty */
static unsigned H;
static int waiting[NW];
static int moved_at[NW]; /* log length when t was last moved to the secondary queue, -1 if not */
static long m_moved, m_splices, m_flushes, m_requeues, late_links, worst_after_move;
static int fifo_mode; /* one node: also check that admissions are in arrival order */
static long arrivals_seq[NW], next_fifo_seq, seq;

static void model_reset(void)
{
    holder = -1;
    nmain = nsec = 0;
    local = 0;
    m_moved = m_splices = m_flushes = m_requeues = late_links = worst_after_move = 0;
    seq = next_fifo_seq = 0;
    for (int t = 0; t < NW; t++) {
        waiting[t] = 0;
        moved_at[t] = -1;
    }
}

static int pop_main(void)
{
    int x = mainq[0];
    memmove(mainq, mainq + 1, (size_t)(nmain - 1) * sizeof *mainq);
    nmain--;
    return x;
}

/* the secondary queue goes in front of the main queue */
static void model_splice(void)
{
    memmove(mainq + nsec, mainq, (size_t)nmain * sizeof *mainq);
    memcpy(mainq, secq, (size_t)nsec * sizeof *mainq);
    nmain += nsec;
    nsec = 0;
    local = 0;
}

/* The model's release, given who was admitted (-1: the lock went free);
 * returns the model's choice. */
static int model_release(int who)
{
    int hn = node_of[holder];
    int next;
    if (nmain == 0) {
        if (nsec == 0)
            return -1;
        memcpy(mainq, secq, (size_t)nsec * sizeof *mainq); /* the secondary queue becomes the queue */
        nmain = nsec;
        nsec = 0;
        local = 0;
        m_requeues++;
        return pop_main();
    }
    if (nsec && local >= H) {
        m_flushes++;
        model_splice();
        return pop_main();
    }
    if (node_of[mainq[0]] == hn) {
        local = nsec ? local + 1 : 0;
        return pop_main();
    }
    int j = 1;
    while (j < nmain && node_of[mainq[j]] != hn)
        j++;
    if (j < nmain && who == mainq[j]) {
        int len = atomic_load(&nlog) - 1; /* the admission that came with the move counts */
        for (int i = 0; i < j; i++) {
            secq[nsec++] = mainq[i];
            moved_at[mainq[i]] = len;
        }
        m_moved += j;
        next = mainq[j];
        memmove(mainq, mainq + j + 1, (size_t)(nmain - j - 1) * sizeof *mainq);
        nmain -= j + 1;
        local++;
        return next;
    }
    if (j < nmain)
        late_links++; /* the scan stopped before mainq[j] (header of this file) */
    if (nsec) {
        m_splices++;
        model_splice();
    }
    return pop_main();
}

/* ---- events ---- */
/* t calls lock() on the held lock; returns once its node is the tail. */
static void queue_up(int t)
{
    acks_expected[t]++; /* completes at its admission */
    send(t, C_LOCK);
    await_tail(W[t].node);
    usleep(100); /* time to link (a hint only: see the header) */
}

static void ev_lock(int t)
{
    int before = atomic_load(&nlog);
    arrivals_seq[t] = seq++;
    if (holder < 0) {
        acks_expected[t]++;
        send(t, C_LOCK);
        wait_acks(t);
        CHECK_EQ(wait_admission(before + 1), t);
        holder = t;
        next_fifo_seq = arrivals_seq[t] + 1;
        return;
    }
    queue_up(t);
    CHECK(atomic_load(&nlog) == before, "a lock() on a held lock was admitted at once");
    mainq[nmain++] = t;
    waiting[t] = 1;
    moved_at[t] = -1;
}

static void ev_try(int t)
{
    int before = atomic_load(&nlog);
    int free_now = holder < 0;
    acks_expected[t]++;
    send(t, C_TRY);
    wait_acks(t);
    int r = atomic_load(&W[t].tryres);
    CHECK_EQ(r, free_now ? 0 : EBUSY);
    if (r == 0) {
        CHECK_EQ(wait_admission(before + 1), t);
        holder = t;
        arrivals_seq[t] = seq++;
        next_fifo_seq = seq;
    }
}

/* Release the hold by `by` (a worker that does not wait, or -1: the
 * controller); returns the admitted worker or -1. */
static int ev_release(int by)
{
    int h = holder, before = atomic_load(&nlog);
    int expect_free = nmain == 0 && nsec == 0;
    if (by < 0) {
        ops->unlock(&L, W[h].node);
    } else {
        atomic_store_explicit(&W[by].arg, h, memory_order_relaxed);
        acks_expected[by]++;
        send(by, C_UNLOCK);
        wait_acks(by);
    }
    if (expect_free) {
        CHECK(probe("tail") == 0, "the lock is not free after the last release");
        CHECK(atomic_load(&nlog) == before, "an admission nobody asked for");
        holder = -1;
        return -1;
    }
    int who = wait_admission(before + 1);
    int want = model_release(who);
    CHECK(who == want, "holder %d (node %d) released: admitted %d, the rule says %d", h, node_of[h], who, want);
    if (who < 0 || who >= NW)
        return who;
    if (moved_at[who] >= 0) {
        long after = before - moved_at[who]; /* admissions of others since its move */
        if (after > worst_after_move)
            worst_after_move = after;
        CHECK(after <= (long)H + NW - 2, "waiter %d admitted %ld admissions after its move (bound %u)", who,
              after, H + NW - 2);
    }
    if (fifo_mode) {
        CHECK(arrivals_seq[who] >= next_fifo_seq, "one node: %d admitted out of arrival order", who);
        next_fifo_seq = arrivals_seq[who] + 1;
    }
    waiting[who] = 0;
    moved_at[who] = -1;
    holder = who;
    return who;
}

static void start_lock(unsigned h)
{
    char v[16];
    snprintf(v, sizeof v, "%u", h);
    setenv("LIBLOCK_CNA_THRESHOLD", v, 1);
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy_of_run);
    CHECK_EQ(liblock_init(&L, "cna", &a), 0);
    unsetenv("LIBLOCK_CNA_THRESHOLD");
    CHECK_EQ((int64_t)probe("threshold"), (int64_t)h);
    H = h;
    model_reset();
    atomic_store(&nlog, 0);
}

static void check_counters(void)
{
    CHECK_EQ(probe("moved"), m_moved);
    CHECK_EQ(probe("splices"), m_splices);
    CHECK_EQ(probe("flushes"), m_flushes);
    CHECK_EQ(probe("requeues"), m_requeues);
}

/* Release until the lock is free, each time by the holder itself. */
static void drain(void)
{
    while (holder >= 0)
        ev_release(holder);
}

/* ---- scripted orders ---- */
static void scripted(const char *what, unsigned h, const int *script, int nscript, const int *order, int norder)
{
    th_context = what;
    start_lock(h);
    ev_lock(0);
    for (int i = 0; i < nscript; i++) {
        if (script[i] >= 0)
            ev_lock(script[i]);
        else
            ev_release(holder);
    }
    drain();
    int n = atomic_load(&nlog);
    char buf[128] = "";
    for (int i = 0; i < n && i < 32; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%d ", admit_log[i]);
    if (late_links) {
        th_skip("%s: a waiter had not linked itself when the scan reached it (%ld times); order %s not checked",
                what, late_links, buf);
    } else {
        int same = n == norder;
        for (int i = 0; same && i < n; i++)
            same = admit_log[i] == order[i];
        CHECK(same, "%s: admission order %s", what, buf);
    }
    check_counters();
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- the random script ---- */
static unsigned rng = 12345;
static unsigned rnd(unsigned n)
{
    rng = rng * 1103515245u + 12345u;
    return (rng >> 8) % n;
}

static void random_script(const char *what, unsigned h, int events)
{
    th_context = what;
    start_lock(h);
    for (int e = 0; e < events; e++) {
        unsigned r = rnd(100);
        int idle[NW], nidle = 0;
        for (int t = 0; t < NW; t++)
            if (!waiting[t] && t != holder)
                idle[nidle++] = t;
        if (holder >= 0 && (r < 42 || nidle == 0)) {
            /* release: by the holder, another worker that does not wait, or the controller */
            unsigned k = rnd(4);
            int by = k == 0 ? -1 : k == 1 && nidle ? idle[rnd((unsigned)nidle)] : holder;
            ev_release(by);
        } else if (r < 47 && holder >= 0) {
            CHECK_EQ(liblock_destroy(&L), EBUSY);
        } else if (r < 55) {
            ev_try(idle[rnd((unsigned)nidle)]);
        } else {
            ev_lock(idle[rnd((unsigned)nidle)]);
        }
    }
    drain();
    printf("  %s: %d admissions, %ld moved, %ld splices, %ld flushes, %ld requeues, worst wait after a move %ld "
           "(bound %u), %ld late links\n",
           what, atomic_load(&nlog), m_moved, m_splices, m_flushes, m_requeues, worst_after_move, H + NW - 2,
           late_links);
    check_counters();
    if (fifo_mode)
        CHECK_EQ(m_moved, 0);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- a hold whose thread has exited ---- */
static void *exit_locker(void *arg)
{
    pin(0);
    ops->lock(&L, arg);
    return NULL; /* exits holding */
}

static void exit_round(void *held)
{
    th_context = "exit";
    start_lock(CNA_TEST_H_DEFAULT);
    pthread_t a;
    pthread_create(&a, NULL, exit_locker, held);
    pthread_join(a, NULL);
    CHECK(probe("tail") != 0, "the exited thread does not hold the lock");
    int before = atomic_load(&nlog);
    queue_up(1); /* node 1 */
    queue_up(2); /* node 0 */
    CHECK_EQ(atomic_load(&nlog), before);
    ops->unlock(&L, held); /* the controller releases the exited thread's hold */
    int first = wait_admission(before + 1);
    CHECK(first == 1 || first == 2, "admitted %d", first);
    if (first == 1) /* waiter 2 had not linked itself yet (header) */
        th_skip("exit: waiter 2 had not linked itself at the release; the preference is not checked");
    ops->unlock(&L, W[first].node);
    int second = wait_admission(before + 2);
    CHECK(second == (first == 2 ? 1 : 2), "admitted %d then %d", first, second);
    ops->unlock(&L, W[second].node);
    wait_acks(1);
    wait_acks(2);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- relock by the holder, released by another thread ---- */
static _Atomic int relock_stage;
static void *relocker(void *arg)
{
    void **nodes = arg;
    pin(1);
    ops->lock(&L, nodes[0]);
    atomic_store(&relock_stage, 1);
    ops->lock(&L, nodes[1]); /* waits behind its own first hold */
    atomic_store(&relock_stage, 2);
    ops->unlock(&L, nodes[1]);
    return NULL;
}

static void relock_round(void **nodes)
{
    th_context = "relock";
    start_lock(CNA_TEST_H_DEFAULT);
    atomic_store(&relock_stage, 0);
    pthread_t a;
    pthread_create(&a, NULL, relocker, nodes);
    await_tail(nodes[1]); /* the second hold has queued */
    CHECK_EQ(atomic_load(&relock_stage), 1);
    ops->unlock(&L, nodes[0]); /* not the thread that locked it */
    pthread_join(a, NULL);
    CHECK_EQ(atomic_load(&relock_stage), 2);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* The child of spec "cna:POLICY:MAP" (MAP 1: LIBLOCK_NUMA_MAP=0,1). */
static int cna_child(const char *spec)
{
    int policy, map;
    if (sscanf(spec, "cna:%d:%d", &policy, &map) != 2)
        return 127;
    if (map)
        setenv("LIBLOCK_NUMA_MAP", "0,1", 1); /* before liblock reads the topology */
    else
        unsetenv("LIBLOCK_NUMA_MAP");
    policy_of_run = policy;
    ops = ll_find_ops("cna");
    if (!ops)
        return 2;
    for (int t = 0; t < NW; t++)
        node_of[t] = ll_cpu_node(t % 2);
    if (map) {
        CHECK_EQ(node_of[0], 0);
        CHECK_EQ(node_of[1], 1);
    } else if (node_of[0] != node_of[1]) {
        th_skip("CPUs 0 and 1 are on different NUMA nodes: the one-node part does not apply");
        return th_failures ? 1 : 0;
    }
    for (int t = 0; t < NW; t++) {
        W[t].id = t;
        W[t].node = node_new();
        pthread_create(&W[t].th, NULL, worker_main, &W[t]);
    }
    int small = th_scale_small() || policy == LIBLOCK_WAIT_SPIN;
    if (map) {
        /* prefer: 0 holds; 1 2 3 4 6 5 queue (odd on node 1) */
        static const int s1[] = {1, 2, 3, 4, 6, 5}, o1[] = {0, 2, 4, 6, 1, 3, 5};
        scripted("prefer", CNA_TEST_H_DEFAULT, s1, 6, o1, 7);
        /* bound: H = 3; 0 holds; 1 2 4 6 queue; 0 releases and queues again */
        static const int s2[] = {1, 2, 4, 6, -1, 0}, o2[] = {0, 2, 4, 6, 1, 0};
        scripted("bound", 3, s2, 6, o2, 6);
        CHECK_EQ(m_flushes, 1);
        void *held = node_new();
        exit_round(held);
        free(held);
    }
    void *rn[2] = {node_new(), node_new()};
    relock_round(rn);
    free(rn[0]);
    free(rn[1]);
    fifo_mode = !map;
    int events = small ? 400 : 2000;
    rng = 12345u + (unsigned)policy * 7919u + (unsigned)map * 104729u + (getenv("LIBLOCK_SPIN_NS") ? 1u : 0u);
    random_script(map ? "random, H=2" : "one node, H=2", 2, events);
    random_script(map ? "random, default H" : "one node, default H", CNA_TEST_H_DEFAULT, events);
    for (int t = 0; t < NW; t++) {
        send(t, C_QUIT);
        pthread_join(W[t].th, NULL);
        free(W[t].node);
    }
    return th_failures ? 1 : 0;
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 600, cna_child);
    if (rc >= 0)
        return rc;
    if (!ll_find_ops("cna"))
        return TH_SKIPPED;
    if (ll_ncpus() < 2) {
        th_skip("test_cna: needs 2 CPUs");
        return TH_SKIPPED;
    }
    static const struct {
        int policy, map;
        const char *spin_ns, *what;
    } cfg[] = {
        {LIBLOCK_WAIT_SPIN, 1, NULL, "two nodes, spin"},
        {LIBLOCK_WAIT_YIELD, 1, NULL, "two nodes, yield"},
        {LIBLOCK_WAIT_SPIN_THEN_PARK, 1, NULL, "two nodes, spin-then-park"},
        {LIBLOCK_WAIT_SPIN_THEN_PARK, 1, "0", "two nodes, spin-then-park, LIBLOCK_SPIN_NS=0"},
        {LIBLOCK_WAIT_SPIN_THEN_PARK, 0, NULL, "one node, spin-then-park"},
        {LIBLOCK_WAIT_YIELD, 0, NULL, "one node, yield"},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        char spec[32];
        snprintf(spec, sizeof spec, "cna:%d:%d", cfg[i].policy, cfg[i].map);
        th_context = cfg[i].what;
        parking_spawn(cfg[i].what, spec, cfg[i].spin_ns);
    }
    (void)argc;
    return th_report("test_cna");
}
