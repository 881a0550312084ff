/*
 * test_cond_requeue - condition variables that requeue waiters onto the
 * lock's queue (src/core/cond.c, "Requeue"; mcs under spin-then-park), and
 * the same scenarios on posix (ordinary wake-up) as a control:
 *  1. token stress: 6 threads pass 3 tokens through one condition with
 *     timedwaits of 0.2-2 ms racing signals sent under the lock or (second
 *     run) after releasing it; the run reaches its token count and ends
 *     with the 3 tokens back (no wake-up lost for good, none invented:
 *     a lost one shows as threads asleep past the watchdog while tokens
 *     are free), and every wait returns with the lock held (exclusion
 *     checked);
 *  2. broadcast barrier: 8 threads x 300 generations, the last arrival
 *     broadcasts (a requeue of every waiter in order);
 *  3. signal with nobody waiting, then a waiter that must time out
 *     (ETIMEDOUT, lock held) and destroy refusing while a requeue waiter
 *     sleeps (EBUSY), then succeeding.
 * Policies: the default (spin-then-park, requeue) and yield (the ordinary
 * path on the same lock kind), so both paths of one condition are run.
 * 4. mcs's fast hand-over (src/locks/queue/mcs.c) with requeued waiters: the
 *    token stress and the barrier once more in a child process with the
 *    spin budget cut to 0 (LIBLOCK_SPIN_NS=0, read once per process), so
 *    that first and second waiters park and announce at nearly every
 *    wait; a lost wake-up fails the child's bound.
 */
#include "harness.h"

#include <time.h>

/* ---- 1. token stress ---- */
#define TOK_THREADS 6
struct tok {
    liblock_t lock;
    liblock_cond_t cond;
    int tokens;       /* available tokens (under lock) */
    long taken;       /* tokens taken in all (under lock) */
    long target;
    int inside;       /* exclusion check */
    int bad;          /* exclusion violations / wrong errors */
    int signal_unlocked;
};

static void *tok_thread(void *p)
{
    struct tok *t = p;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    for (;;) {
        if (liblock_lock(&t->lock)) {
            __atomic_add_fetch(&t->bad, 1, __ATOMIC_RELAXED);
            return NULL;
        }
        while (t->tokens == 0 && t->taken < t->target) {
            struct timespec ts = ts_in_ns(200000 + (long)(rand_r(&seed) % 1800000));
            int e = liblock_cond_timedwait(&t->cond, &t->lock, &ts);
            if (e && e != ETIMEDOUT)
                t->bad++;
            if (t->inside++)
                t->bad++; /* we must hold the lock here */
            t->inside--;
        }
        if (t->taken >= t->target) {
            liblock_cond_broadcast(&t->cond); /* let the others see the end */
            liblock_unlock(&t->lock);
            return NULL;
        }
        t->tokens--;
        t->taken++;
        liblock_unlock(&t->lock);
        /* hold the token a little, then put it back and tell one waiter */
        for (volatile int i = 0; i < 200; i++)
            ;
        liblock_lock(&t->lock);
        t->tokens++;
        if (t->signal_unlocked && (rand_r(&seed) & 1)) {
            liblock_unlock(&t->lock);
            liblock_cond_signal(&t->cond); /* signal without the lock */
        } else {
            liblock_cond_signal(&t->cond); /* signal under the lock */
            liblock_unlock(&t->lock);
        }
    }
}

static void run_tokens(const char *algo, int policy, int unlocked)
{
    static struct tok t;
    memset(&t, 0, sizeof t);
    liblock_attr_t a;
    liblock_attr_init(&a);
    if (policy >= 0)
        liblock_attr_setwait(&a, policy);
    CHECK_EQ(liblock_init(&t.lock, algo, &a), 0);
    CHECK_EQ(liblock_cond_init(&t.cond, NULL), 0);
    t.tokens = 3;
    t.target = th_scale_small() ? 3000 : 20000;
    t.signal_unlocked = unlocked;
    pthread_t th[TOK_THREADS];
    for (int i = 0; i < TOK_THREADS; i++)
        pthread_create(&th[i], NULL, tok_thread, &t);
    uint64_t deadline = th_now_ns() + 60000000000ull;
    for (int i = 0; i < TOK_THREADS; i++)
        CHECK(th_join_by(th[i], deadline) == 0, "%s: token thread %d stuck (lost wake-up?)", algo, i);
    CHECK_EQ(t.bad, 0);
    CHECK(t.taken >= t.target, "%s: %ld tokens taken, target %ld", algo, t.taken, t.target);
    CHECK_EQ(t.tokens, 3);
    CHECK_EQ(liblock_cond_destroy(&t.cond), 0);
    CHECK_EQ(liblock_destroy(&t.lock), 0);
}

/* ---- 2. broadcast barrier ---- */
#define BAR_THREADS 8
struct bar {
    liblock_t lock;
    liblock_cond_t cond;
    int arrived;
    long gen;
    int rounds;
    int bad;
};

static void *bar_thread(void *p)
{
    struct bar *b = p;
    for (int r = 0; r < b->rounds; r++) {
        liblock_lock(&b->lock);
        long g = b->gen;
        if (++b->arrived == BAR_THREADS) {
            b->arrived = 0;
            b->gen++;
            liblock_cond_broadcast(&b->cond);
        } else {
            while (b->gen == g)
                if (liblock_cond_wait(&b->cond, &b->lock))
                    b->bad++;
        }
        liblock_unlock(&b->lock);
    }
    return NULL;
}

static void run_barrier(const char *algo, int policy)
{
    static struct bar b;
    memset(&b, 0, sizeof b);
    liblock_attr_t a;
    liblock_attr_init(&a);
    if (policy >= 0)
        liblock_attr_setwait(&a, policy);
    CHECK_EQ(liblock_init(&b.lock, algo, &a), 0);
    CHECK_EQ(liblock_cond_init(&b.cond, NULL), 0);
    b.rounds = th_scale_small() ? 60 : 300;
    pthread_t th[BAR_THREADS];
    for (int i = 0; i < BAR_THREADS; i++)
        pthread_create(&th[i], NULL, bar_thread, &b);
    uint64_t deadline = th_now_ns() + 60000000000ull;
    for (int i = 0; i < BAR_THREADS; i++)
        CHECK(th_join_by(th[i], deadline) == 0, "%s: barrier thread %d stuck (lost wake-up?)", algo, i);
    CHECK_EQ(b.bad, 0);
    CHECK_EQ(b.gen, b.rounds);
    CHECK_EQ(liblock_cond_destroy(&b.cond), 0);
    CHECK_EQ(liblock_destroy(&b.lock), 0);
}

/* ---- 3. edges ---- */
struct edge {
    liblock_t lock;
    liblock_cond_t cond;
    volatile int go;
    int result;
};

static void *edge_waiter(void *p)
{
    struct edge *e = p;
    liblock_lock(&e->lock);
    while (!e->go)
        e->result = liblock_cond_wait(&e->cond, &e->lock);
    liblock_unlock(&e->lock);
    return NULL;
}

static void run_edges(const char *algo)
{
    static struct edge e;
    memset(&e, 0, sizeof e);
    CHECK_EQ(liblock_init(&e.lock, algo, NULL), 0);
    CHECK_EQ(liblock_cond_init(&e.cond, NULL), 0);
    CHECK_EQ(liblock_cond_signal(&e.cond), 0); /* nobody waits: nothing happens */
    CHECK_EQ(liblock_cond_broadcast(&e.cond), 0);
    CHECK_EQ(liblock_lock(&e.lock), 0);
    struct timespec ts = ts_in_ns(20000000);
    CHECK_EQ(liblock_cond_timedwait(&e.cond, &e.lock, &ts), ETIMEDOUT);
    CHECK_EQ(liblock_lock(&e.lock), EDEADLK); /* still ours */
    CHECK_EQ(liblock_unlock(&e.lock), 0);
    CHECK_EQ(liblock_unlock(&e.lock), EPERM); /* exactly one hold after the timed-out wait */
    pthread_t th;
    pthread_create(&th, NULL, edge_waiter, &e);
    int busy = 0;
    for (int i = 0; i < 2000 && !busy; i++) { /* until the waiter sleeps on the condition */
        /* under the lock, so the waiter is either asleep in the wait (which
         * released it) or not yet inside: never entering a condition that
         * is being destroyed and made again */
        liblock_lock(&e.lock);
        busy = liblock_cond_destroy(&e.cond) == EBUSY;
        if (!busy)
            CHECK_EQ(liblock_cond_init(&e.cond, NULL), 0); /* destroyed before it waited: again */
        liblock_unlock(&e.lock);
        if (!busy)
            usleep(1000);
    }
    CHECK(busy, "%s: destroy never saw the waiter", algo);
    liblock_lock(&e.lock);
    e.go = 1;
    liblock_cond_signal(&e.cond); /* requeued behind us: granted at our unlock */
    liblock_unlock(&e.lock);
    CHECK(th_join_by(th, th_now_ns() + 20000000000ull) == 0, "%s: signalled waiter stuck", algo);
    CHECK_EQ(e.result, 0);
    CHECK_EQ(liblock_cond_destroy(&e.cond), 0);
    CHECK_EQ(liblock_destroy(&e.lock), 0);
}

/* ---- 4. zero spin budget, in a child ---- */
static int zero_budget_child(void)
{
    th_context = "mcs, LIBLOCK_SPIN_NS=0";
    run_tokens("mcs", -1, 0);
    run_tokens("mcs", -1, 1);
    run_barrier("mcs", -1);
    return th_report("test_cond_requeue (LIBLOCK_SPIN_NS=0 child)");
}

static void zero_budget(const char *self)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LIBLOCK_SPIN_NS", "0", 1);
        setenv("LIBLOCK_REQUEUE_CHILD", "1", 1);
        execl(self, self, (char *)NULL);
        _exit(126);
    }
    CHECK(pid > 0, "fork: %s", strerror(errno));
    uint64_t t0 = th_now_ns();
    int rc = th_wait_child(pid, 120, "LIBLOCK_SPIN_NS=0 child");
    CHECK(rc == 0, "mcs with LIBLOCK_SPIN_NS=0: child exit %d", rc);
    printf("  mcs    LIBLOCK_SPIN_NS=0 child done, %.1f s\n", (th_now_ns() - t0) / 1e9);
}

int main(int argc, char **argv)
{
    if (getenv("LIBLOCK_REQUEUE_CHILD")) {
        th_watchdog(100);
        return zero_budget_child();
    }
    th_watchdog(360);
    static const char *const algos[] = {"mcs", "posix"};
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++) {
        const char *a = algos[i];
        if (!th_selected(argc, argv, a))
            continue;
        th_context = a;
        uint64_t t0 = th_now_ns();
        run_tokens(a, -1, 0);
        run_tokens(a, -1, 1);
        run_barrier(a, -1);
        if (!strcmp(a, "mcs")) { /* the ordinary path on the same kind of lock */
            run_tokens(a, LIBLOCK_WAIT_YIELD, 1);
            run_barrier(a, LIBLOCK_WAIT_YIELD);
        }
        run_edges(a);
        printf("  %-6s done, %.1f s\n", a, (th_now_ns() - t0) / 1e9);
    }
    if (th_selected(argc, argv, "mcs"))
        zero_budget(argv[0]);
    return th_report("test_cond_requeue");
}
