/*
 * test_rcl - behaviour of the Remote Core Locking runtime (docs/rcl.md).
 *
 *   fig43    thesis Figure 4.3: a CS waits on a condition variable, a CS of
 *            a second lock busy-waits on a variable, a CS of a third lock
 *            sets it; the busy-waiting CS then signals (through a nested CS
 *            of the first lock); all three complete, and the pool shrinks
 *            back to one servicing thread afterwards.
 *   blockio  a CS blocks reading a pipe while 1,000 CSs of another lock on
 *            the same server complete; then the pipe is written.
 *   nested   nested RCL locks on the same server (local path), and across
 *            two servers (A on server 1 -> B on server 2 -> C on server 1).
 *   mix      execute and lock/unlock on one lock from 6 threads: exact count,
 *            no overlap.
 *   trylock  0 when free; EBUSY while a client holds it, while a delegated CS
 *            runs, and for the holder itself; EPERM for a non-holder unlock.
 *   condbuf  bounded buffer whose producer and consumer CSs wait on
 *            condition variables on the server; then consumers that use
 *            liblock_lock + liblock_cond_wait from ordinary threads.
 *   chaos    8 clients, 4 locks: CSs that block (usleep), busy-wait, nest
 *            into another lock of the server, and lock/unlock sections, all
 *            at once; exact counts, no overlap, pool back to one thread.
 *   bad      bad input: errno values and nothing changed.
 *   stats    statistics readable through the API.
 * Every section runs under the watchdog; no timing is asserted.  Fork is
 * tested in test_rcl_park (fork).
 * usage: test_rcl [SECTION...]   (default: all)
 */
#include "harness.h"

#include <sched.h>
#include <stdatomic.h>

static void wait_flag(atomic_int *f, int v)
{
    while (atomic_load(f) != v)
        usleep(200);
}

static liblock_server_stats_t stats_of(liblock_t *l)
{
    liblock_server_stats_t st;
    memset(&st, 0, sizeof st);
    CHECK_EQ(liblock_server_stats(liblock_server_of(l), &st), 0);
    return st;
}

/* Wait (bounded by the watchdog) until the pool of l's server is back to one thread. */
static void wait_pool_one(liblock_t *l)
{
    for (;;) {
        liblock_server_stats_t st = stats_of(l);
        if (st.pool_size == 1)
            return;
        usleep(1000);
    }
}

/* ---- fig43 ------------------------------------------------------------------ */
static liblock_t L1, L2, L3;
static liblock_cond_t cond1;
static int flag1;
static atomic_int var, c1_waiting, c2_spinning;

static void *cs1(void *a)
{
    while (!flag1) {
        atomic_store(&c1_waiting, 1);
        liblock_cond_wait(&cond1, &L1);
    }
    return a;
}
static void *cs_set_flag1(void *a)
{
    flag1 = 1;
    liblock_cond_signal(&cond1);
    return a;
}
static void *cs2(void *a)
{
    atomic_store(&c2_spinning, 1);
    while (!atomic_load(&var))
        ; /* ad hoc synchronisation: busy-wait without yielding */
    /* signal c1 under L1: a nested CS of another lock of the same server */
    if (liblock_execute(&L1, cs_set_flag1, a) != a)
        return NULL;
    return a;
}
static unsigned pool_in_cs3;
static void *cs3(void *a)
{
    liblock_server_stats_t st;
    if (liblock_server_stats(liblock_server_of(&L3), &st) == 0)
        pool_in_cs3 = st.pool_size;
    atomic_store(&var, 1);
    return a;
}
struct exec_arg {
    liblock_t *l;
    void *(*cs)(void *);
    void *ret;
};
static void *exec_thread(void *p)
{
    struct exec_arg *e = p;
    e->ret = liblock_execute(e->l, e->cs, p);
    return NULL;
}

static void test_fig43(void)
{
    th_context = "fig43";
    CHECK_EQ(liblock_init(&L1, "rcl", NULL), 0);
    CHECK_EQ(liblock_init(&L2, "rcl", NULL), 0);
    CHECK_EQ(liblock_init(&L3, "rcl", NULL), 0);
    CHECK(liblock_server_of(&L1) == liblock_server_of(&L2) && liblock_server_of(&L2) == liblock_server_of(&L3),
          "the three locks share the default server");
    CHECK_EQ(liblock_cond_init(&cond1, NULL), 0);
    flag1 = 0;
    atomic_store(&var, 0);
    liblock_server_stats_t before = stats_of(&L1);
    struct exec_arg e1 = {&L1, cs1, NULL}, e2 = {&L2, cs2, NULL}, e3 = {&L3, cs3, NULL};
    pthread_t t1, t2, t3;
    pthread_create(&t1, NULL, exec_thread, &e1);
    wait_flag(&c1_waiting, 1); /* c1's CS is (about to be) blocked in cond_wait */
    pthread_create(&t2, NULL, exec_thread, &e2);
    wait_flag(&c2_spinning, 1); /* c2's CS busy-waits on the server CPU */
    pthread_create(&t3, NULL, exec_thread, &e3);
    pthread_join(t3, NULL);
    pthread_join(t2, NULL);
    pthread_join(t1, NULL);
    CHECK(e1.ret == &e1 && e2.ret == &e2 && e3.ret == &e3, "all three critical sections completed");
    liblock_server_stats_t after = stats_of(&L1);
    /* cs3 ran while cs1 (blocked) and cs2 (spinning) were in progress:
     * three servicing threads were in the pool. */
    CHECK(pool_in_cs3 >= 3, "pool size %u while cs3 ran", pool_in_cs3);
    if (!after.degraded)
        CHECK(after.alive_misses > before.alive_misses, "the manager found is_alive unset while cs2 spun");
    wait_pool_one(&L1);
    CHECK_EQ(liblock_cond_destroy(&cond1), 0);
    CHECK_EQ(liblock_destroy(&L1), 0);
    CHECK_EQ(liblock_destroy(&L2), 0);
    CHECK_EQ(liblock_destroy(&L3), 0);
}

/* ---- blockio ------------------------------------------------------------------ */
static int pipefd[2];
static atomic_int reader_in;
static void *cs_read(void *a)
{
    atomic_store(&reader_in, 1);
    char c = 0;
    ssize_t n = read(pipefd[0], &c, 1);
    return n == 1 ? (void *)(intptr_t)c : NULL;
}
static long qcount;
static void *cs_inc(void *a)
{
    qcount++;
    return a;
}

static void test_blockio(void)
{
    th_context = "blockio";
    liblock_t P, Q;
    CHECK_EQ(liblock_init(&P, "rcl", NULL), 0);
    CHECK_EQ(liblock_init(&Q, "rcl", NULL), 0);
    CHECK_EQ(pipe(pipefd), 0);
    struct exec_arg e = {&P, cs_read, NULL};
    pthread_t th;
    pthread_create(&th, NULL, exec_thread, &e);
    wait_flag(&reader_in, 1);
    qcount = 0;
    for (int i = 0; i < 1000; i++)
        if (liblock_execute(&Q, cs_inc, &qcount) != &qcount)
            break;
    CHECK_EQ(qcount, 1000); /* completed while P's CS was blocked in read() */
    CHECK_EQ(liblock_trylock(&P), EBUSY); /* P stays held by the blocked CS */
    CHECK_EQ(write(pipefd[1], "x", 1), 1);
    pthread_join(th, NULL);
    CHECK(e.ret == (void *)(intptr_t)'x', "the blocked CS returned what it read");
    close(pipefd[0]);
    close(pipefd[1]);
    wait_pool_one(&P);
    CHECK_EQ(liblock_destroy(&P), 0);
    CHECK_EQ(liblock_destroy(&Q), 0);
}

/* ---- nested -------------------------------------------------------------------- */
static liblock_t NA, NB, NC, ND;
static long nested_count;
static void *cs_inner_c(void *a)
{
    nested_count++;
    return a;
}
static void *cs_inner_b(void *a)
{
    /* on server 2: a lock of server 1 again (remote from here) */
    return liblock_execute(&NC, cs_inner_c, a);
}
static void *cs_outer_two(void *a)
{
    /* on server 1: a lock of server 2 (remote) */
    return liblock_execute(&NB, cs_inner_b, a);
}
static void *cs_outer_same(void *a)
{
    /* on server 1: another lock of server 1 (local path), and the same
     * lock again (EDEADLK, not a hang) */
    void *r = liblock_execute(&ND, cs_inner_c, a);
    errno = 0;
    void *again = liblock_execute(&NA, cs_inner_c, a);
    if (again != NULL || errno != EDEADLK)
        return NULL;
    /* liblock_lock/unlock of a same-server lock inside a CS */
    if (liblock_lock(&ND) != 0)
        return NULL;
    nested_count++;
    if (liblock_unlock(&ND) != 0)
        return NULL;
    return r;
}

static void test_nested(void)
{
    th_context = "nested";
    CHECK_EQ(liblock_init(&NA, "rcl", NULL), 0);
    CHECK_EQ(liblock_init(&ND, "rcl", NULL), 0);
    nested_count = 0;
    for (int i = 0; i < 100; i++)
        CHECK(liblock_execute(&NA, cs_outer_same, &nested_count) == &nested_count, "same-server nesting");
    CHECK_EQ(nested_count, 200);

    /* two servers: the default one and one on another CPU */
    liblock_server_t *s1 = liblock_server_of(&NA);
    liblock_server_stats_t st1;
    CHECK_EQ(liblock_server_stats(s1, &st1), 0);
    int other = st1.cpu == 0 ? 1 : 0;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        th_skip("nested: one CPU, the two-server case");
    } else {
        setenv("LIBLOCK_RCL_IDLE_US", "300", 1); /* the clients share a CPU with server 2 */
        liblock_server_t *s2 = liblock_server_start(other);
        unsetenv("LIBLOCK_RCL_IDLE_US");
        CHECK(s2 != NULL, "server_start(%d): %s", other, strerror(errno));
        if (s2) {
            liblock_attr_t a1, a2;
            liblock_attr_init(&a1);
            liblock_attr_init(&a2);
            liblock_attr_setserver(&a1, s1);
            liblock_attr_setserver(&a2, s2);
            CHECK_EQ(liblock_init(&NB, "rcl", &a2), 0);
            CHECK_EQ(liblock_init(&NC, "rcl", &a1), 0);
            CHECK(liblock_server_of(&NB) == s2 && liblock_server_of(&NC) == s1, "mapping by attribute");
            nested_count = 0;
            for (int i = 0; i < 20; i++)
                CHECK(liblock_execute(&NA, cs_outer_two, &nested_count) == &nested_count, "two-server nesting");
            CHECK_EQ(nested_count, 20);
            CHECK_EQ(liblock_server_stop(s2), EBUSY); /* NB still bound */
            CHECK_EQ(liblock_destroy(&NB), 0);
            CHECK_EQ(liblock_destroy(&NC), 0);
            CHECK_EQ(liblock_server_stop(s2), 0);
            CHECK_EQ(liblock_server_stop(s2), EINVAL);
        }
    }
    CHECK_EQ(liblock_destroy(&NA), 0);
    CHECK_EQ(liblock_destroy(&ND), 0);
}

/* ---- mix ------------------------------------------------------------------------- */
struct mixsh {
    liblock_t l;
    long counter;
    int inside, violations;
};
static struct mixsh mx __attribute__((aligned(64)));
static void *cs_mix(void *a)
{
    if (mx.inside)
        mx.violations++;
    mx.inside = 1;
    long c = mx.counter;
    for (volatile int i = 0; i < 20; i++)
        ;
    mx.counter = c + 1;
    mx.inside = 0;
    return a;
}
static void *mix_thread(void *p)
{
    long id = (long)p, done = 0;
    for (int i = 0; i < 3000; i++) {
        if ((i + id) % 3 == 0) {
            if (liblock_lock(&mx.l))
                break;
            cs_mix(NULL);
            if (liblock_unlock(&mx.l))
                break;
        } else if (liblock_execute(&mx.l, cs_mix, p) != p) {
            break;
        }
        done++;
    }
    return (void *)done;
}

static void test_mix(void)
{
    th_context = "mix";
    for (int pol = LIBLOCK_WAIT_SPIN; pol <= LIBLOCK_WAIT_YIELD; pol += LIBLOCK_WAIT_YIELD - LIBLOCK_WAIT_SPIN) {
        memset(&mx, 0, sizeof mx);
        liblock_attr_t a;
        liblock_attr_init(&a);
        liblock_attr_setwait(&a, pol);
        CHECK_EQ(liblock_init(&mx.l, "rcl", &a), 0);
        pthread_t th[6];
        for (long i = 0; i < 6; i++)
            pthread_create(&th[i], NULL, mix_thread, (void *)(i + 1));
        long total = 0;
        for (int i = 0; i < 6; i++) {
            void *r;
            pthread_join(th[i], &r);
            total += (long)r;
        }
        CHECK_EQ(total, 6 * 3000);
        CHECK_EQ(mx.counter, total);
        CHECK_EQ(mx.violations, 0);
        CHECK_EQ(liblock_destroy(&mx.l), 0);
    }
}

/* ---- trylock ----------------------------------------------------------------------- */
static liblock_t TL;
static atomic_int hold_phase;
static void *holder_thread(void *p)
{
    if (liblock_lock(&TL))
        return (void *)1;
    atomic_store(&hold_phase, 1);
    while (atomic_load(&hold_phase) != 2)
        usleep(100);
    return (void *)(intptr_t)liblock_unlock(&TL);
}
static atomic_int cs_phase;
static void *cs_hold(void *a)
{
    atomic_store(&cs_phase, 1);
    while (atomic_load(&cs_phase) != 2)
        sched_yield();
    return a;
}

static void test_trylock(void)
{
    th_context = "trylock";
    CHECK_EQ(liblock_init(&TL, "rcl", NULL), 0);
    CHECK_EQ(liblock_trylock(&TL), 0);
    CHECK_EQ(liblock_trylock(&TL), EBUSY); /* the caller holds it */
    errno = 0;
    CHECK(liblock_execute(&TL, cs_inc, NULL) == NULL && errno == EDEADLK, "execute while holding: EDEADLK");
    CHECK_EQ(liblock_destroy(&TL), EBUSY);
    CHECK_EQ(liblock_unlock(&TL), 0);
    CHECK_EQ(liblock_unlock(&TL), EPERM);

    /* held by another client thread */
    atomic_store(&hold_phase, 0);
    pthread_t th;
    pthread_create(&th, NULL, holder_thread, NULL);
    wait_flag(&hold_phase, 1);
    CHECK_EQ(liblock_trylock(&TL), EBUSY);
    CHECK_EQ(liblock_unlock(&TL), EPERM);
    CHECK_EQ(liblock_destroy(&TL), EBUSY);
    atomic_store(&hold_phase, 2);
    void *r;
    pthread_join(th, &r);
    CHECK(r == NULL, "holder's unlock");

    /* held by a delegated CS running on the server */
    atomic_store(&cs_phase, 0);
    struct exec_arg e = {&TL, cs_hold, NULL};
    pthread_create(&th, NULL, exec_thread, &e);
    wait_flag(&cs_phase, 1);
    CHECK_EQ(liblock_trylock(&TL), EBUSY);
    atomic_store(&cs_phase, 2);
    pthread_join(th, NULL);
    CHECK(e.ret == &e, "CS completed");
    CHECK_EQ(liblock_trylock(&TL), 0);
    CHECK_EQ(liblock_unlock(&TL), 0);
    CHECK_EQ(liblock_destroy(&TL), 0);
}

/* ---- condbuf ---------------------------------------------------------------------- */
#define BUFN 4
#define ITEMS 1500
static struct {
    liblock_t l;
    liblock_cond_t notfull, notempty;
    long buf[BUFN];
    int head, count;
    long produced_sum, consumed_sum, consumed_n;
} bb;

static void *cs_put(void *a)
{
    long v = (long)(intptr_t)a;
    while (bb.count == BUFN)
        if (liblock_cond_wait(&bb.notfull, &bb.l))
            return NULL;
    bb.buf[(bb.head + bb.count) % BUFN] = v;
    bb.count++;
    bb.produced_sum += v;
    liblock_cond_signal(&bb.notempty);
    return a;
}
static void *cs_get(void *a)
{
    while (bb.count == 0)
        if (liblock_cond_wait(&bb.notempty, &bb.l))
            return NULL;
    long v = bb.buf[bb.head];
    bb.head = (bb.head + 1) % BUFN;
    bb.count--;
    bb.consumed_sum += v;
    bb.consumed_n++;
    liblock_cond_signal(&bb.notfull);
    return a;
}
static void *producer(void *p)
{
    long base = (long)p;
    for (long i = 1; i <= ITEMS; i++)
        if (liblock_execute(&bb.l, cs_put, (void *)(intptr_t)(base + i)) != (void *)(intptr_t)(base + i))
            return (void *)1;
    return NULL;
}
static void *consumer_exec(void *p)
{
    for (long i = 0; i < ITEMS; i++)
        if (liblock_execute(&bb.l, cs_get, p) != p)
            return (void *)1;
    return NULL;
}
static void *consumer_lock(void *p)
{
    for (long i = 0; i < ITEMS; i++) {
        if (liblock_lock(&bb.l))
            return (void *)1;
        if (cs_get(p) != p) /* the consumer's section, run by this thread under the lock */
            return (void *)2;
        if (liblock_unlock(&bb.l))
            return (void *)3;
    }
    return NULL;
}

static void run_condbuf(void *(*consumer)(void *), const char *what)
{
    th_context = what;
    memset(&bb, 0, sizeof bb);
    /* four client threads share the one non-server CPU and producers wait
     * for consumers: yield, or each waiter burns its whole time slice */
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_YIELD);
    CHECK_EQ(liblock_init(&bb.l, "rcl", &a), 0);
    CHECK_EQ(liblock_cond_init(&bb.notfull, NULL), 0);
    CHECK_EQ(liblock_cond_init(&bb.notempty, NULL), 0);
    pthread_t p[2], c[2];
    for (long i = 0; i < 2; i++) {
        pthread_create(&p[i], NULL, producer, (void *)(i * 1000000));
        pthread_create(&c[i], NULL, consumer, (void *)(i + 1));
    }
    for (int i = 0; i < 2; i++) {
        void *r1, *r2;
        pthread_join(p[i], &r1);
        pthread_join(c[i], &r2);
        CHECK(r1 == NULL && r2 == NULL, "producer/consumer %d errors %p %p", i, r1, r2);
    }
    long expect = 0;
    for (long b = 0; b < 2; b++)
        for (long i = 1; i <= ITEMS; i++)
            expect += b * 1000000 + i;
    CHECK_EQ(bb.produced_sum, expect);
    CHECK_EQ(bb.consumed_sum, expect);
    CHECK_EQ(bb.consumed_n, 2 * ITEMS);
    CHECK_EQ(bb.count, 0);
    wait_pool_one(&bb.l);
    CHECK_EQ(liblock_cond_destroy(&bb.notfull), 0);
    CHECK_EQ(liblock_cond_destroy(&bb.notempty), 0);
    CHECK_EQ(liblock_destroy(&bb.l), 0);
}

static void test_condbuf(void)
{
    uint64_t t0 = th_now_ns();
    run_condbuf(consumer_exec, "condbuf/execute");
    uint64_t t1 = th_now_ns();
    run_condbuf(consumer_lock, "condbuf/lock+cond_wait");
    printf("  condbuf: %.2f s execute, %.2f s lock+cond_wait\n", (t1 - t0) / 1e9, (th_now_ns() - t1) / 1e9);
}

/* ---- chaos: CSs that block, spin, nest, and lock/unlock sections, at once ----------- */
#define NCH 4
static struct chaos_lock {
    liblock_t l;
    long count;
    int inside, violations;
} __attribute__((aligned(64))) ch[NCH];
static atomic_long ch_total;

static void ch_enter(struct chaos_lock *c)
{
    if (c->inside)
        c->violations++;
    c->inside = 1;
}
static void ch_leave(struct chaos_lock *c)
{
    c->count++;
    c->inside = 0;
}
static void *cs_chaos(void *a)
{
    long v = (long)(intptr_t)a;
    int k = (int)(v & 3), kind = (int)((v >> 2) % 5);
    struct chaos_lock *c = &ch[k];
    ch_enter(c);
    if (kind == 1) {
        usleep(50); /* blocks in the kernel */
    } else if (kind == 2) {
        uint64_t until = th_now_ns() + 20000;
        while (th_now_ns() < until) /* busy-waits 20 us */
            ;
    } else if (kind == 3 && k + 1 < NCH) {
        /* nested CS of a higher-numbered lock of the same server (ordered: no deadlock) */
        void *r = liblock_execute(&ch[k + 1].l, cs_chaos, (void *)(intptr_t)((k + 1) | (0 << 2)));
        if (r != (void *)(intptr_t)((k + 1) | (0 << 2)))
            c->violations += 1000;
    }
    ch_leave(c);
    atomic_fetch_add(&ch_total, 1);
    return a;
}
static void *chaos_thread(void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull + 1;
    for (int i = 0; i < 400; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        long v = (long)(x & 0xffff);
        if (v % 7 == 0) {
            struct chaos_lock *c = &ch[v & 3];
            if (liblock_lock(&c->l))
                return (void *)1;
            ch_enter(c);
            ch_leave(c);
            atomic_fetch_add(&ch_total, 1);
            if (liblock_unlock(&c->l))
                return (void *)2;
        } else if (liblock_execute(&ch[v & 3].l, cs_chaos, (void *)(intptr_t)v) != (void *)(intptr_t)v) {
            return (void *)3;
        }
    }
    return NULL;
}

static void test_chaos(void)
{
    th_context = "chaos";
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_YIELD);
    memset(ch, 0, sizeof ch);
    for (int i = 0; i < NCH; i++)
        CHECK_EQ(liblock_init(&ch[i].l, "rcl", &a), 0);
    atomic_store(&ch_total, 0);
    liblock_server_stats_t before = stats_of(&ch[0].l);
    pthread_t th[8];
    for (long i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, chaos_thread, (void *)(i + 1));
    for (int i = 0; i < 8; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK(r == NULL, "chaos thread %d error %ld", i, (long)(intptr_t)r);
    }
    long sum = 0;
    for (int i = 0; i < NCH; i++) {
        sum += ch[i].count;
        CHECK_EQ(ch[i].violations, 0);
    }
    CHECK_EQ(sum, atomic_load(&ch_total));
    CHECK(sum >= 8 * 400, "every operation counted (%ld)", sum);
    wait_pool_one(&ch[0].l);
    liblock_server_stats_t after = stats_of(&ch[0].l);
    printf("  chaos: %ld sections; pool: %llu created, %llu woken, %llu parked; backup %llu, manager misses %llu, "
           "elections %llu\n",
           sum, (unsigned long long)(after.threads_created - before.threads_created),
           (unsigned long long)(after.threads_woken - before.threads_woken),
           (unsigned long long)(after.threads_parked - before.threads_parked),
           (unsigned long long)(after.backup_runs - before.backup_runs),
           (unsigned long long)(after.alive_misses - before.alive_misses),
           (unsigned long long)(after.elections - before.elections));
    for (int i = 0; i < NCH; i++)
        CHECK_EQ(liblock_destroy(&ch[i].l), 0);
}

/* ---- bad input --------------------------------------------------------------------- */
static void test_bad(void)
{
    th_context = "bad";
    int n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    errno = 0;
    CHECK(liblock_server_start(-1) == NULL && errno == EINVAL, "start(-1)");
    errno = 0;
    CHECK(liblock_server_start(n) == NULL && errno == EINVAL, "start(ncpus)");
    liblock_server_t *d = liblock_server_default();
    CHECK(d != NULL, "default server: %s", strerror(errno));
    liblock_server_stats_t st;
    CHECK_EQ(liblock_server_stats(d, &st), 0);
    errno = 0;
    CHECK(liblock_server_start(st.cpu) == NULL && errno == EBUSY, "start on a busy CPU");
    CHECK_EQ(liblock_server_stop(NULL), EINVAL);
    CHECK_EQ(liblock_server_stop((liblock_server_t *)&st), EINVAL);
    CHECK_EQ(liblock_server_stats(NULL, &st), EINVAL);
    CHECK_EQ(liblock_server_stats(d, NULL), EINVAL);
    liblock_attr_t a;
    liblock_attr_init(&a);
    CHECK_EQ(liblock_attr_setserver(&a, NULL), EINVAL);
    liblock_attr_setserver(&a, (liblock_server_t *)&st); /* not a server */
    liblock_t l;
    memset(&l, 0, sizeof l);
    CHECK_EQ(liblock_init(&l, "rcl", &a), EINVAL);
    CHECK(l._magic == 0, "failed init leaves the lock uninitialised");
    liblock_t m;
    CHECK_EQ(liblock_init(&m, "mcs", NULL), 0);
    errno = 0;
    CHECK(liblock_server_of(&m) == NULL && errno == EINVAL, "server_of(non-rcl)");
    errno = 0;
    CHECK(liblock_server_of(NULL) == NULL && errno == EINVAL, "server_of(NULL)");
    liblock_destroy(&m);
    CHECK_EQ(liblock_init(&l, "rcl", NULL), 0);
    errno = 0;
    CHECK(liblock_execute(&l, NULL, NULL) == NULL && errno == EINVAL, "execute(NULL cs)");
    /* a lock is bound to a default server on first use, not at init */
    CHECK(liblock_server_of(&l) == d, "first use binds to the default server");
    CHECK_EQ(liblock_server_stop(d), EBUSY); /* a lock is bound */
    liblock_cond_t c;
    liblock_cond_init(&c, NULL);
    CHECK_EQ(liblock_cond_wait(&c, &l), EPERM); /* not held */
    liblock_cond_destroy(&c);
    liblock_attr_t bad;
    liblock_attr_init(&bad);
    CHECK_EQ(liblock_attr_setwait(&bad, LIBLOCK_WAIT__COUNT), EINVAL);
    CHECK_EQ(liblock_thread_register(&l), 0);
    CHECK(liblock_execute(&l, cs_inc, &l) == &l, "lock still works after the failed calls");
    CHECK_EQ(liblock_destroy(&l), 0);
}

/* ---- stats -------------------------------------------------------------------------- */
static void test_stats(void)
{
    th_context = "stats";
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "rcl", NULL), 0);
    liblock_server_stats_t a = stats_of(&l);
    for (int i = 0; i < 500; i++)
        liblock_execute(&l, cs_inc, NULL);
    liblock_lock(&l);
    liblock_unlock(&l);
    liblock_server_stats_t b = stats_of(&l);
    CHECK_EQ(b.cs_executed - a.cs_executed, 500);
    CHECK_EQ(b.lock_ops - a.lock_ops, 2);
    CHECK(b.active_passes > a.active_passes && b.passes >= b.active_passes, "passes counted");
    CHECK(b.use_rate > 0 && b.use_rate <= 1.0 + 1e-9, "use rate %g in (0,1]", b.use_rate);
    CHECK(b.false_serialisation_rate > 0 && b.false_serialisation_rate <= b.use_rate + 1e-9,
          "false serialisation %g", b.false_serialisation_rate);
    CHECK(b.clients >= 1 && b.client_watermark >= b.clients && b.slots >= b.client_watermark, "client counts");
    CHECK(b.running == 1 && b.pool_size >= 1, "running pool");
    printf("  stats: cpu %d%s, %llu CS, use rate %.3f, false serialisation %.3f, slow path %.4f, manager "
           "wake-ups %llu, is_alive unset %llu, threads created %llu\n",
           b.cpu, b.degraded ? " (degraded)" : "", (unsigned long long)b.cs_executed, b.use_rate,
           b.false_serialisation_rate, b.slow_path_rate, (unsigned long long)b.manager_wakeups,
           (unsigned long long)b.alive_misses, (unsigned long long)b.threads_created);
    CHECK_EQ(liblock_destroy(&l), 0);
}

int main(int argc, char **argv)
{
    th_watchdog(60);
    if (th_section(argc, argv, "bad"))
        test_bad();
    if (th_section(argc, argv, "trylock"))
        test_trylock();
    if (th_section(argc, argv, "mix"))
        test_mix();
    if (th_section(argc, argv, "blockio"))
        test_blockio();
    if (th_section(argc, argv, "fig43"))
        test_fig43();
    if (th_section(argc, argv, "condbuf"))
        test_condbuf();
    if (th_section(argc, argv, "chaos"))
        test_chaos();
    if (th_section(argc, argv, "nested"))
        test_nested();
    if (th_section(argc, argv, "stats"))
        test_stats();
    /* the default server is stopped here so no SCHED_FIFO thread outlives the test */
    liblock_server_t *d = liblock_server_default();
    CHECK(d && liblock_server_stop(d) == 0, "stop the default server");
    return th_report("test_rcl");
}
