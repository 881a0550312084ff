/*
 * test_lifo_cond - mostly-LIFO condition variables and semaphores
 * (src/core/cond_lifo.c, docs/malthusian.md):
 *  - wake order: waiters queued one by one (known order) are woken newest
 *    first with P = 0, oldest first with P = 1 (condvar and semaphore);
 *  - no lost wake-up: a bounded buffer moves every item exactly once with
 *    P = 0, 0.001 and 1, signal and broadcast, plain and timed waits (short
 *    timeouts racing with signals), over several lock algorithms;
 *  - timedwait: ETIMEDOUT with the lock held again, nothing left queued;
 *  - semaphores count exactly: never more holders than the initial value,
 *    every post consumed by exactly one wait, value restored;
 *  - bad input: setfifo outside [0, 1], sem_init with a bad probability or
 *    value, trywait on 0 (EAGAIN), post at INT_MAX (EOVERFLOW), destroy
 *    while waited on (EBUSY, object still usable).
 * Counted in events, never in time; bounded by timed joins and a watchdog.
 */
#include "harness.h"
#include "internal.h"
#include "core/cond_lifo.h"

#include <limits.h>
#include <math.h>
#include <sched.h>

static int cond_init_p(liblock_cond_t *c, double p)
{
    liblock_condattr_t a;
    liblock_condattr_init(&a);
    int e = liblock_condattr_setfifo(&a, p);
    return e ? e : liblock_cond_init(c, &a);
}

/* ======================================================================
 * wake order
 * ====================================================================== */
#define NORD 8
struct ord {
    liblock_t lock;
    liblock_cond_t cond;
    liblock_sem_t sem;
    int ready[NORD];
    int woken[NORD];
    int nwoken;
    int use_sem;
};
struct oarg {
    struct ord *o;
    int id;
};

static void *ord_waiter(void *arg)
{
    struct oarg *a = arg;
    struct ord *o = a->o;
    if (o->use_sem) {
        liblock_sem_wait(&o->sem);
        liblock_lock(&o->lock);
        o->woken[o->nwoken++] = a->id;
        liblock_unlock(&o->lock);
        return NULL;
    }
    liblock_lock(&o->lock);
    o->ready[a->id] = 1;
    int e = liblock_cond_wait(&o->cond, &o->lock);
    if (e == 0)
        o->woken[o->nwoken++] = a->id;
    liblock_unlock(&o->lock);
    return NULL;
}

static void test_order(double p, int use_sem)
{
    static struct ord o;
    memset(&o, 0, sizeof o);
    o.use_sem = use_sem;
    CHECK_EQ(liblock_init(&o.lock, "mcs", NULL), 0);
    if (use_sem)
        CHECK_EQ(liblock_sem_init(&o.sem, 0, p), 0);
    else
        CHECK_EQ(cond_init_p(&o.cond, p), 0);
    pthread_t th[NORD];
    struct oarg args[NORD];
    for (int i = 0; i < NORD; i++) {
        args[i] = (struct oarg){&o, i};
        pthread_create(&th[i], NULL, ord_waiter, &args[i]);
        /* until waiter i is queued */
        for (;;) {
            int q = use_sem ? ll_sem_debug_queued(&o.sem) : ll_cond_debug_queued(&o.cond);
            if (q == i + 1)
                break;
            sched_yield();
        }
    }
    /* wake one at a time, waiting for each to record itself */
    for (int i = 0; i < NORD; i++) {
        if (use_sem) {
            liblock_sem_post(&o.sem);
        } else {
            liblock_lock(&o.lock);
            liblock_cond_signal(&o.cond);
            liblock_unlock(&o.lock);
        }
        for (;;) {
            liblock_lock(&o.lock);
            int n = o.nwoken;
            liblock_unlock(&o.lock);
            if (n == i + 1)
                break;
            CHECK(n <= i + 1, "one signal woke %d threads", n - i);
            if (n > i + 1)
                break;
            sched_yield();
        }
    }
    for (int i = 0; i < NORD; i++)
        CHECK(th_join_by(th[i], th_now_ns() + 20000000000ull) == 0, "waiter %d stuck", i);
    char buf[64] = "";
    int lifo = 1, fifo = 1;
    for (int i = 0; i < o.nwoken; i++) {
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%d ", o.woken[i]);
        lifo &= o.woken[i] == NORD - 1 - i;
        fifo &= o.woken[i] == i;
    }
    CHECK_EQ(o.nwoken, NORD);
    if (p == 0)
        CHECK(lifo, "%s P=0: wake order %s, expected newest first", use_sem ? "sem" : "cond", buf);
    else
        CHECK(fifo, "%s P=1: wake order %s, expected oldest first", use_sem ? "sem" : "cond", buf);
    if (use_sem) {
        int v = -1;
        liblock_sem_getvalue(&o.sem, &v);
        CHECK_EQ(v, 0);
        CHECK_EQ(liblock_sem_destroy(&o.sem), 0);
    } else {
        CHECK_EQ(liblock_cond_destroy(&o.cond), 0);
    }
    CHECK_EQ(liblock_destroy(&o.lock), 0);
}

/* ======================================================================
 * bounded buffer: no lost wake-up
 * ====================================================================== */
#define NP 4
#define NC 4
#define CAP 4
struct buf {
    liblock_t lock;
    liblock_cond_t not_full, not_empty;
    int items[CAP];
    int head, count;
    int per_producer;
    unsigned char *seen;
    int dup, err;
    int broadcast, timed;
    long timeouts;
    int consumed;
};
struct barg {
    struct buf *b;
    int id;
};

static int bwait(struct buf *b, liblock_cond_t *c)
{
    if (!b->timed)
        return liblock_cond_wait(c, &b->lock);
    struct timespec ts = ts_in_ns(500000); /* 0.5 ms: some timeouts race with signals */
    int e = liblock_cond_timedwait(c, &b->lock, &ts);
    if (e == ETIMEDOUT) {
        b->timeouts++;
        return 0; /* re-check the predicate */
    }
    return e;
}

static void bsignal(struct buf *b, liblock_cond_t *c)
{
    if (b->broadcast)
        liblock_cond_broadcast(c);
    else
        liblock_cond_signal(c);
}

static void *bprod(void *arg)
{
    struct barg *a = arg;
    struct buf *b = a->b;
    for (int i = 0; i < b->per_producer; i++) {
        int e = liblock_lock(&b->lock);
        while (!e && b->count == CAP)
            e = bwait(b, &b->not_full);
        if (e) {
            b->err = e;
            return NULL;
        }
        b->items[(b->head + b->count++) % CAP] = a->id * b->per_producer + i;
        bsignal(b, &b->not_empty);
        liblock_unlock(&b->lock);
    }
    return NULL;
}

static void *bcons(void *arg)
{
    struct barg *a = arg;
    struct buf *b = a->b;
    int total = NP * b->per_producer;
    for (;;) {
        int e = liblock_lock(&b->lock);
        while (!e && b->count == 0 && b->consumed < total)
            e = bwait(b, &b->not_empty);
        if (e) {
            b->err = e;
            return NULL;
        }
        if (b->consumed >= total) {
            liblock_cond_broadcast(&b->not_empty); /* let the other consumers finish */
            liblock_unlock(&b->lock);
            return NULL;
        }
        int v = b->items[b->head];
        b->head = (b->head + 1) % CAP;
        b->count--;
        b->consumed++;
        if (b->seen[v])
            b->dup++;
        b->seen[v] = 1;
        bsignal(b, &b->not_full);
        if (b->consumed == total)
            liblock_cond_broadcast(&b->not_empty);
        liblock_unlock(&b->lock);
    }
}

static void test_buffer(const char *algo, double p, int broadcast, int timed)
{
    static struct buf b;
    memset(&b, 0, sizeof b);
    b.per_producer = th_scale_small() ? 100 : 400;
    b.broadcast = broadcast;
    b.timed = timed;
    int total = NP * b.per_producer;
    b.seen = calloc((size_t)total, 1);
    /* spin-then-park where the algorithm has it: 8 threads spinning in a
     * FIFO queue on 2 cores hand the lock to preempted threads (convoys) */
    liblock_algorithm_info_t info;
    liblock_algorithm_info(algo, &info);
    liblock_attr_t la;
    liblock_attr_init(&la);
    if (info.policies & (1u << LIBLOCK_WAIT_SPIN_THEN_PARK))
        liblock_attr_setwait(&la, LIBLOCK_WAIT_SPIN_THEN_PARK);
    CHECK_EQ(liblock_init(&b.lock, algo, &la), 0);
    CHECK_EQ(cond_init_p(&b.not_full, p), 0);
    CHECK_EQ(cond_init_p(&b.not_empty, p), 0);
    pthread_t th[NP + NC];
    struct barg args[NP + NC];
    for (int i = 0; i < NP + NC; i++) {
        args[i] = (struct barg){&b, i < NP ? i : i - NP};
        pthread_create(&th[i], NULL, i < NP ? bprod : bcons, &args[i]);
    }
    uint64_t deadline = th_now_ns() + 30000000000ull;
    int stuck = 0;
    for (int i = 0; i < NP + NC; i++)
        stuck += th_join_by(th[i], deadline) != 0;
    CHECK(stuck == 0, "%s P=%g %s%s: %d threads stuck (lost wake-up?)", algo, p, broadcast ? "broadcast" : "signal",
          timed ? " timed" : "", stuck);
    if (stuck) {
        fprintf(stderr, "FAIL: cannot continue with stuck threads\n");
        exit(1);
    }
    int missing = 0;
    for (int i = 0; i < total; i++)
        missing += !b.seen[i];
    CHECK(b.err == 0 && b.dup == 0 && missing == 0, "%s P=%g: err %d, %d duplicated, %d missing", algo, p, b.err,
          b.dup, missing);
    CHECK_EQ(liblock_cond_destroy(&b.not_full), 0);
    CHECK_EQ(liblock_cond_destroy(&b.not_empty), 0);
    CHECK_EQ(liblock_destroy(&b.lock), 0);
    free(b.seen);
}

/* ======================================================================
 * semaphores count exactly
 * ====================================================================== */
struct semrun {
    liblock_sem_t sem;
    int inside, max_inside;
    long iters;
    int timed;
    long timeouts;
    int err;
};

static void *sem_worker(void *arg)
{
    struct semrun *s = arg;
    for (long i = 0; i < s->iters; i++) {
        int e;
        if (s->timed) {
            struct timespec ts = ts_in_ns(500000);
            while ((e = liblock_sem_timedwait(&s->sem, &ts)) == ETIMEDOUT) {
                __atomic_add_fetch(&s->timeouts, 1, __ATOMIC_RELAXED);
                ts = ts_in_ns(500000);
            }
        } else {
            e = liblock_sem_wait(&s->sem);
        }
        if (e) {
            s->err = e;
            return NULL;
        }
        int n = __atomic_add_fetch(&s->inside, 1, __ATOMIC_ACQ_REL);
        int m = __atomic_load_n(&s->max_inside, __ATOMIC_RELAXED);
        while (n > m && !__atomic_compare_exchange_n(&s->max_inside, &m, n, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
        for (volatile int k = 0; k < 200; k++)
            ;
        __atomic_sub_fetch(&s->inside, 1, __ATOMIC_ACQ_REL);
        if ((e = liblock_sem_post(&s->sem)) != 0) {
            s->err = e;
            return NULL;
        }
    }
    return NULL;
}

static void test_sem_count(int value, double p, int timed)
{
    static struct semrun s;
    memset(&s, 0, sizeof s);
    s.iters = th_scale_small() ? 200 : 1000;
    s.timed = timed;
    CHECK_EQ(liblock_sem_init(&s.sem, (unsigned)value, p), 0);
    enum { N = 12 };
    pthread_t th[N];
    for (int i = 0; i < N; i++)
        pthread_create(&th[i], NULL, sem_worker, &s);
    uint64_t deadline = th_now_ns() + 30000000000ull;
    int stuck = 0;
    for (int i = 0; i < N; i++)
        stuck += th_join_by(th[i], deadline) != 0;
    CHECK(stuck == 0, "sem value %d P=%g%s: %d threads stuck", value, p, timed ? " timed" : "", stuck);
    if (stuck)
        exit(1);
    CHECK_EQ(s.err, 0);
    CHECK(s.max_inside <= value, "sem value %d: %d threads inside at once", value, s.max_inside);
    CHECK(s.max_inside >= 1, "sem: nobody got in");
    int v = -1;
    liblock_sem_getvalue(&s.sem, &v);
    CHECK_EQ(v, value);
    CHECK_EQ(ll_sem_debug_queued(&s.sem), 0);
    CHECK_EQ(liblock_sem_destroy(&s.sem), 0);
}

/* producers post, consumers wait: every post consumed exactly once */
struct pc {
    liblock_sem_t sem;
    long per;
    long got;
};
static void *pc_post(void *arg)
{
    struct pc *p = arg;
    for (long i = 0; i < p->per; i++)
        liblock_sem_post(&p->sem);
    return NULL;
}
static void *pc_wait(void *arg)
{
    struct pc *p = arg;
    for (long i = 0; i < p->per; i++)
        if (liblock_sem_wait(&p->sem) == 0)
            __atomic_add_fetch(&p->got, 1, __ATOMIC_RELAXED);
    return NULL;
}

static void test_sem_pc(double p)
{
    static struct pc s;
    memset(&s, 0, sizeof s);
    s.per = th_scale_small() ? 1000 : 20000;
    CHECK_EQ(liblock_sem_init(&s.sem, 0, p), 0);
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, i % 2 ? pc_post : pc_wait, &s);
    uint64_t deadline = th_now_ns() + 30000000000ull;
    int stuck = 0;
    for (int i = 0; i < 8; i++)
        stuck += th_join_by(th[i], deadline) != 0;
    CHECK(stuck == 0, "sem producer/consumer P=%g: %d stuck (lost post?)", p, stuck);
    if (stuck)
        exit(1);
    CHECK_EQ(s.got, 4 * s.per);
    int v = -1;
    liblock_sem_getvalue(&s.sem, &v);
    CHECK_EQ(v, 0);
    CHECK_EQ(liblock_sem_destroy(&s.sem), 0);
}

/* ======================================================================
 * timedwait and bad input
 * ====================================================================== */
static void *sem_blocker(void *arg)
{
    liblock_sem_wait(arg);
    return NULL;
}

struct cw {
    liblock_t lock;
    liblock_cond_t cond;
    int go;
};
static void *cond_blocker(void *arg)
{
    struct cw *c = arg;
    liblock_lock(&c->lock);
    while (!c->go)
        liblock_cond_wait(&c->cond, &c->lock);
    liblock_unlock(&c->lock);
    return NULL;
}

static void test_timed_and_bad(void)
{
    liblock_condattr_t a;
    CHECK_EQ(liblock_condattr_init(&a), 0);
    CHECK_EQ(liblock_condattr_setfifo(&a, -0.1), EINVAL);
    CHECK_EQ(liblock_condattr_setfifo(&a, 1.5), EINVAL);
    CHECK_EQ(liblock_condattr_setfifo(&a, NAN), EINVAL);
    CHECK_EQ(liblock_condattr_setfifo(NULL, 0.5), EINVAL);

    /* timedwait times out with the lock held; nothing stays queued */
    static struct cw c;
    memset(&c, 0, sizeof c);
    CHECK_EQ(liblock_init(&c.lock, "mcscr", NULL), 0);
    CHECK_EQ(cond_init_p(&c.cond, 0.001), 0);
    CHECK_EQ(liblock_lock(&c.lock), 0);
    struct timespec ts = ts_in_ns(2000000);
    CHECK_EQ(liblock_cond_timedwait(&c.cond, &c.lock, &ts), ETIMEDOUT);
    CHECK_EQ(liblock_trylock(&c.lock), EBUSY); /* still ours */
    CHECK_EQ(ll_cond_debug_queued(&c.cond), 0);
    struct timespec bad = {0, 1000000000L};
    CHECK_EQ(liblock_cond_timedwait(&c.cond, &c.lock, &bad), EINVAL);
    CHECK_EQ(liblock_cond_timedwait(&c.cond, &c.lock, NULL), EINVAL);
    /* an abstime in the past times out at once */
    struct timespec past = {1, 0};
    CHECK_EQ(liblock_cond_timedwait(&c.cond, &c.lock, &past), ETIMEDOUT);
    CHECK_EQ(liblock_unlock(&c.lock), 0);
    CHECK_EQ(liblock_cond_wait(&c.cond, &c.lock), EPERM); /* not held */
    /* destroy while waited on: EBUSY, still usable */
    pthread_t th;
    pthread_create(&th, NULL, cond_blocker, &c);
    while (ll_cond_debug_queued(&c.cond) != 1)
        sched_yield();
    CHECK_EQ(liblock_cond_destroy(&c.cond), EBUSY);
    liblock_lock(&c.lock);
    c.go = 1;
    CHECK_EQ(liblock_cond_signal(&c.cond), 0);
    liblock_unlock(&c.lock);
    CHECK(th_join_by(th, th_now_ns() + 20000000000ull) == 0, "cond waiter stuck after EBUSY destroy");
    CHECK_EQ(liblock_cond_destroy(&c.cond), 0);
    CHECK_EQ(liblock_cond_signal(&c.cond), EINVAL); /* destroyed */
    /* a lock without condition support answers ENOTSUP, if there is one */
    CHECK_EQ(liblock_destroy(&c.lock), 0);

    /* semaphores */
    liblock_sem_t s;
    CHECK_EQ(liblock_sem_init(NULL, 0, 0.5), EINVAL);
    CHECK_EQ(liblock_sem_init(&s, 0, -1), EINVAL);
    CHECK_EQ(liblock_sem_init(&s, 0, 2), EINVAL);
    CHECK_EQ(liblock_sem_init(&s, (unsigned)INT_MAX + 1u, 0.5), EINVAL);
    CHECK_EQ(liblock_sem_init(&s, 1, 0.001), 0);
    CHECK_EQ(liblock_sem_trywait(&s), 0);
    CHECK_EQ(liblock_sem_trywait(&s), EAGAIN);
    struct timespec soon = ts_in_ns(2000000);
    CHECK_EQ(liblock_sem_timedwait(&s, &soon), ETIMEDOUT);
    CHECK_EQ(liblock_sem_timedwait(&s, &bad), EINVAL);
    CHECK_EQ(liblock_sem_timedwait(&s, NULL), EINVAL);
    CHECK_EQ(ll_sem_debug_queued(&s), 0);
    int v = -1;
    CHECK_EQ(liblock_sem_getvalue(&s, &v), 0);
    CHECK_EQ(v, 0);
    CHECK_EQ(liblock_sem_getvalue(&s, NULL), EINVAL);
    pthread_create(&th, NULL, sem_blocker, &s);
    while (ll_sem_debug_queued(&s) != 1)
        sched_yield();
    CHECK_EQ(liblock_sem_destroy(&s), EBUSY);
    CHECK_EQ(liblock_sem_post(&s), 0);
    CHECK(th_join_by(th, th_now_ns() + 20000000000ull) == 0, "sem waiter stuck after EBUSY destroy");
    CHECK_EQ(liblock_sem_getvalue(&s, &v), 0);
    CHECK_EQ(v, 0); /* the unit went to the waiter */
    CHECK_EQ(liblock_sem_destroy(&s), 0);
    CHECK_EQ(liblock_sem_post(&s), EINVAL);
    CHECK_EQ(liblock_sem_init(&s, INT_MAX, 1), 0);
    CHECK_EQ(liblock_sem_post(&s), EOVERFLOW);
    CHECK_EQ(liblock_sem_getvalue(&s, &v), 0);
    CHECK_EQ(v, INT_MAX);
    CHECK_EQ(liblock_sem_destroy(&s), 0);
}

int main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    th_watchdog(150);
    uint64_t t0 = th_now_ns();
    th_context = "order";
    for (int sem = 0; sem < 2; sem++) {
        test_order(0.0, sem);
        test_order(1.0, sem);
    }
    th_context = "timed/bad";
    test_timed_and_bad();
    th_context = "buffer";
    static const char *const algos[] = {"mcs", "mcscr", "lifocr", "loiter", "posix", "ttas"};
    static const double ps[] = {0.0, 0.001, 1.0};
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++) {
        liblock_algorithm_info_t info;
        if (liblock_algorithm_info(algos[i], &info) != 0 || !(info.properties & LIBLOCK_PROP_COND))
            continue;
        for (size_t k = 0; k < 3; k++) {
            uint64_t s0 = th_now_ns();
            test_buffer(algos[i], ps[k], (int)(k == 1), (int)(i % 2 == 0 && k != 1));
            if (getenv("TEST_VERBOSE"))
                printf("  buffer %s P=%g: %.2f s\n", algos[i], ps[k], (th_now_ns() - s0) / 1e9);
        }
    }
    if (getenv("TEST_VERBOSE"))
        printf("  before sem: %.1f s\n", (th_now_ns() - t0) / 1e9);
    th_context = "sem";
    test_sem_count(1, 0.001, 0);
    test_sem_count(3, 0.0, 0);
    test_sem_count(2, 1.0, 1);
    test_sem_pc(0.001);
    test_sem_pc(0.0);
    printf("  %.1f s\n", (th_now_ns() - t0) / 1e9);
    return th_report("test_lifo_cond");
}
