/*
 * test_combining - behaviour of the combining locks (cc-synch, dsm-synch,
 * oyama, flat-combining) beyond what test_stress checks:
 *   - delegation: requests queued behind a lock() holder never run on the
 *     holder's thread when it unlocks (docs/api.md, "Delegated critical sections"); the first
 *     requester combines for the others (counted: ran on a thread other than
 *     the requester), deterministically: the holder waits until the requests
 *     are published (debug accessor) before it unlocks;
 *   - hand-over: with MAX_COMBINER_CS = 4 (set through the environment
 *     variable before init), the longest pass is <= 4 (spin) and at least
 *     3 requests run on a thread other than their requester;
 *   - trylock: EBUSY while another thread holds the lock through lock() or
 *     runs a delegated critical section; 0 when free;
 *   - mixing execute() and lock()/unlock() keeps exact counts and exclusion;
 *   - condition variables: bounded buffer, 8 producers / 8 consumers with
 *     lock/unlock + cond, while two more threads run execute() on the same
 *     lock; cond_wait inside a delegated critical section returns EPERM;
 *   - a lock() holder that blocks for 30 ms while requesters and lock()
 *     callers wait (spin-then-park: they park, and must all be woken);
 *   - bad input: EDEADLK, EPERM, EBUSY, EINVAL, ENOTSUP, bad parameters;
 *   - per-thread records (flat-combining, dsm-synch): 1,000 short-lived
 *     threads leave at most as many records as ran at once; a lock re-
 *     initialised at the same address works.
 * Bounded by a watchdog; no timing assertions.
 */
#include "harness.h"

#include <sys/syscall.h>

#include "internal.h"

/* One of the lock's statistics (ll_lock_stats; the names are those the
 * combining algorithms fill), -2 if it keeps no such counter. */
static long stat_of(liblock_t *l, const char *name)
{
    struct ll_stats st;
    return ll_lock_stats(l, &st) == 0 ? (long)ll_stat(&st, name, -2) : -2;
}
/* Requests published behind the caller, who holds l through lock(). */
static long pending_of(liblock_t *l) { return stat_of(l, "pending"); }
/* Longest combining pass; *passes: their number. */
static unsigned max_pass_of(liblock_t *l, unsigned long *passes)
{
    *passes = (unsigned long)stat_of(l, "passes");
    return (unsigned)stat_of(l, "max_pass");
}
/* Per-thread records the lock owns. */
static long records_of(liblock_t *l) { return stat_of(l, "records"); }

struct algo {
    const char *name;
    const char *max_env; /* NULL: no MAX_COMBINER_CS (flat combining) */
    int stp;             /* supports spin-then-park */
};

static const struct algo algos[] = {
    {"cc-synch", "LIBLOCK_CCSYNCH_MAX_COMBINER_CS", 1},
    {"dsm-synch", "LIBLOCK_DSMSYNCH_MAX_COMBINER_CS", 1},
    {"oyama", "LIBLOCK_OYAMA_MAX_COMBINER_CS", 1},
    {"flat-combining", NULL, 1},
};

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static int init_lock(liblock_t *l, const char *name, int policy)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    return liblock_init(l, name, &a);
}

/* ---- delegation and hand-over ------------------------------------------- */
#define NREQ 8
#define TEST_MAX 4

static liblock_t L;
static long seq_counter; /* protected by L */

struct req {
    pthread_t th;
    pid_t requester, ran_on;
    long seq;
    void *ret;
};

static void *cs_record(void *a)
{
    struct req *r = a;
    r->ran_on = tid();
    r->seq = seq_counter++;
    return a;
}

static void *requester_main(void *a)
{
    struct req *r = a;
    r->requester = tid();
    r->ret = liblock_execute(&L, cs_record, r);
    return NULL;
}

/* policy spin: a combiner hands over after exactly MAX_COMBINER_CS when
 * more requests wait.  yield / spin-then-park: it may run up to MAX more in
 * place of waiters that look descheduled (pass <= 2 x MAX). */
static void test_delegation(const struct algo *al, int policy)
{
    int exact = policy == LIBLOCK_WAIT_SPIN;
    if (al->max_env)
        setenv(al->max_env, "4", 1);
    int e = init_lock(&L, al->name, policy);
    if (al->max_env)
        unsetenv(al->max_env);
    CHECK(e == 0, "init: %s", strerror(e));
    if (e)
        return;
    seq_counter = 0;
    pid_t me = tid();
    CHECK_EQ(liblock_lock(&L), 0);
    struct req reqs[NREQ];
    memset(reqs, 0, sizeof reqs);
    for (int i = 0; i < NREQ; i++)
        pthread_create(&reqs[i].th, NULL, requester_main, &reqs[i]);
    /* wait until every request is published behind us */
    while (pending_of(&L) < NREQ)
        usleep(1000);
    CHECK_EQ(liblock_unlock(&L), 0);
    int on_me = 0, other = 0;
    for (int i = 0; i < NREQ; i++) {
        pthread_join(reqs[i].th, NULL);
        CHECK(reqs[i].ret == &reqs[i], "request %d returned %p", i, reqs[i].ret);
        CHECK(reqs[i].ran_on != 0, "request %d never ran", i);
        if (reqs[i].ran_on == me)
            on_me++;
        if (reqs[i].ran_on != reqs[i].requester)
            other++;
    }
    CHECK_EQ(seq_counter, NREQ);
    CHECK(other > 0, "no request ran on a thread other than its requester");
    unsigned long passes = 0;
    unsigned mp = max_pass_of(&L, &passes);
    /* docs/api.md, "Delegated critical sections": unlock() never runs other threads'
     * requests (its caller may hold locks liblock cannot see); the role goes
     * to the first requester, which combines for the others. */
    CHECK(on_me == 0, "holder ran %d requests on unlock, expected none", on_me);
    if (al->max_env && exact) {
        CHECK(mp <= TEST_MAX, "a combining pass ran %u critical sections > MAX_COMBINER_CS %d", mp, TEST_MAX);
        CHECK(other >= TEST_MAX - 1, "only %d requests served by another thread", other);
    } else if (al->max_env) {
        CHECK(mp <= 2 * TEST_MAX, "a combining pass ran %u critical sections > 2 x MAX_COMBINER_CS %d", mp,
              TEST_MAX);
    } else {
        /* every request was published before the unlock: the first
         * requester to win the combiner lock runs them all in one pass */
        CHECK(other == NREQ - 1, "flat combining: the first combiner ran %d of the %d others' requests", other,
              NREQ - 1);
    }
    printf("  %-15s %-6s delegation: %d/%d requests ran on another thread, %d on the unlocking holder, "
           "longest pass %u, %lu passes\n",
           al->name, liblock_wait_name(policy), other, NREQ, on_me, mp, passes);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- trylock --------------------------------------------------------------- */
static volatile int flag_in, flag_go, flag_done;

static void *cs_block(void *a)
{
    __atomic_store_n(&flag_in, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&flag_go, __ATOMIC_ACQUIRE))
        usleep(100);
    return a;
}

static void *blocker_exec(void *a)
{
    (void)a;
    liblock_execute(&L, cs_block, NULL);
    return NULL;
}

static void *try_other(void *a)
{
    (void)a;
    return (void *)(long)liblock_trylock(&L);
}

static void *holder_main(void *a)
{
    (void)a;
    int e = liblock_lock(&L);
    __atomic_store_n(&flag_in, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&flag_go, __ATOMIC_ACQUIRE))
        usleep(100);
    if (!e)
        e = liblock_unlock(&L);
    return (void *)(long)e;
}

static void test_trylock(const struct algo *al)
{
    CHECK_EQ(init_lock(&L, al->name, LIBLOCK_WAIT_YIELD), 0);
    /* held by us through lock(): another thread gets EBUSY */
    CHECK_EQ(liblock_lock(&L), 0);
    CHECK_EQ(liblock_trylock(&L), EBUSY); /* held by the caller */
    pthread_t t;
    void *rv;
    pthread_create(&t, NULL, try_other, NULL);
    pthread_join(t, &rv);
    CHECK_EQ((long)rv, EBUSY);
    CHECK_EQ(liblock_unlock(&L), 0);
    /* held by another thread through lock() */
    flag_in = flag_go = 0;
    pthread_create(&t, NULL, holder_main, NULL);
    while (!__atomic_load_n(&flag_in, __ATOMIC_ACQUIRE))
        usleep(100);
    CHECK_EQ(liblock_trylock(&L), EBUSY);
    __atomic_store_n(&flag_go, 1, __ATOMIC_RELEASE);
    pthread_join(t, &rv);
    CHECK_EQ((long)rv, 0);
    /* a delegated critical section is running */
    flag_in = flag_go = 0;
    pthread_create(&t, NULL, blocker_exec, NULL);
    while (!__atomic_load_n(&flag_in, __ATOMIC_ACQUIRE))
        usleep(100);
    CHECK_EQ(liblock_trylock(&L), EBUSY);
    __atomic_store_n(&flag_go, 1, __ATOMIC_RELEASE);
    pthread_join(t, NULL);
    /* free: succeeds, and excludes execute() from another thread */
    CHECK_EQ(liblock_trylock(&L), 0);
    pthread_create(&t, NULL, try_other, NULL);
    pthread_join(t, &rv);
    CHECK_EQ((long)rv, EBUSY);
    CHECK_EQ(liblock_unlock(&L), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- mixed execute and lock/unlock ------------------------------------------ */
static volatile long mix_counter;
static volatile int mix_occupied, mix_violations;

static void *cs_mix(void *a)
{
    if (mix_occupied)
        mix_violations++;
    mix_occupied = 1;
    long c = mix_counter;
    for (volatile int i = 0; i < 8; i++)
        ;
    mix_counter = c + 1;
    mix_occupied = 0;
    return a;
}

struct mixw {
    pthread_t th;
    int use_lock;
    long iters, done;
    int err;
};

static void *mix_main(void *a)
{
    struct mixw *w = a;
    for (long i = 0; i < w->iters; i++) {
        if (w->use_lock) {
            int e = liblock_lock(&L);
            if (e) {
                w->err = e;
                break;
            }
            cs_mix(NULL);
            if ((e = liblock_unlock(&L))) {
                w->err = e;
                break;
            }
        } else if (liblock_execute(&L, cs_mix, w) != w) {
            w->err = errno ? errno : -1;
            break;
        }
        w->done++;
    }
    return NULL;
}

static void test_mixed(const struct algo *al, int policy, int nthreads, long iters)
{
    CHECK_EQ(init_lock(&L, al->name, policy), 0);
    mix_counter = 0;
    mix_occupied = mix_violations = 0;
    struct mixw w[16];
    memset(w, 0, sizeof w);
    for (int i = 0; i < nthreads; i++) {
        w[i].use_lock = i & 1;
        w[i].iters = iters;
        pthread_create(&w[i].th, NULL, mix_main, &w[i]);
    }
    long total = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(w[i].th, NULL);
        CHECK(w[i].err == 0, "%s thread %d error %d", liblock_wait_name(policy), i, w[i].err);
        total += w[i].done;
    }
    CHECK(total == nthreads * iters, "%s: %ld of %ld sections done", liblock_wait_name(policy), total,
          nthreads * iters);
    CHECK(mix_counter == total, "%s: counter %ld != %ld", liblock_wait_name(policy), mix_counter, total);
    CHECK(mix_violations == 0, "%s: %d exclusion violations", liblock_wait_name(policy), mix_violations);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- condition variables: bounded buffer ----------------------------------- */
#define BB_CAP 4
#define BB_PRODUCERS 8
#define BB_CONSUMERS 8
#define BB_ITEMS 300
static liblock_cond_t not_full, not_empty;
static long bb_buf[BB_CAP];
static int bb_head, bb_count;
static long bb_consumed_sum, bb_consumed_n;
static volatile int bb_stop_exec;
static long bb_exec_count;

static void *producer(void *a)
{
    long base = (long)a * 100000;
    for (long i = 0; i < BB_ITEMS; i++) {
        if (liblock_lock(&L))
            return (void *)1;
        while (bb_count == BB_CAP)
            if (liblock_cond_wait(&not_full, &L))
                return (void *)2;
        bb_buf[(bb_head + bb_count) % BB_CAP] = base + i;
        bb_count++;
        liblock_cond_signal(&not_empty);
        liblock_unlock(&L);
    }
    return NULL;
}

static void *consumer(void *a)
{
    (void)a;
    for (long i = 0; i < BB_ITEMS; i++) {
        if (liblock_lock(&L))
            return (void *)1;
        while (bb_count == 0)
            if (liblock_cond_wait(&not_empty, &L))
                return (void *)2;
        long v = bb_buf[bb_head];
        bb_head = (bb_head + 1) % BB_CAP;
        bb_count--;
        bb_consumed_sum += v;
        bb_consumed_n++;
        liblock_cond_signal(&not_full);
        liblock_unlock(&L);
    }
    return NULL;
}

static void *cs_exec_count(void *a)
{
    bb_exec_count++;
    return a;
}

static void *exec_traffic(void *a)
{
    while (!__atomic_load_n(&bb_stop_exec, __ATOMIC_RELAXED))
        if (liblock_execute(&L, cs_exec_count, a) != a)
            return (void *)1;
    return NULL;
}

static void *cs_condwait(void *a)
{
    (void)a;
    return (void *)(long)liblock_cond_wait(&not_empty, &L);
}

/* ---- a holder that blocks: waiters go past their spinning phase and
 * park (spin-then-park), then every one of them must be woken and served.
 * The holder sleeps 30 ms twice under lock(); 6 threads queue requests and
 * lock() calls meanwhile.  Asserts completion and exact counts only. */
static long lh_count; /* protected by L */
static void *lh_cs(void *a)
{
    lh_count++;
    return a;
}
static void *lh_worker(void *a)
{
    long id = (long)a;
    for (int i = 0; i < 50; i++) {
        if ((i + id) & 1) {
            if (liblock_execute(&L, lh_cs, a) != a)
                return (void *)1;
        } else {
            if (liblock_lock(&L))
                return (void *)1;
            lh_count++;
            if (liblock_unlock(&L))
                return (void *)1;
        }
    }
    return NULL;
}
static void test_long_hold(const struct algo *al)
{
    CHECK_EQ(init_lock(&L, al->name, LIBLOCK_WAIT_SPIN_THEN_PARK), 0);
    lh_count = 0;
    pthread_t th[6];
    for (int round = 0; round < 2; round++) {
        CHECK_EQ(liblock_lock(&L), 0);
        for (long i = 0; i < 6; i++)
            pthread_create(&th[i], NULL, lh_worker, (void *)i);
        usleep(30000);
        lh_count++;
        CHECK_EQ(liblock_unlock(&L), 0);
        for (int i = 0; i < 6; i++) {
            void *r;
            pthread_join(th[i], &r);
            CHECK(r == NULL, "worker %d got an error", i);
        }
    }
    CHECK_EQ(lh_count, 2 * (6 * 50 + 1));
    CHECK_EQ(liblock_destroy(&L), 0);
}

static void test_cond(const struct algo *al, int policy)
{
    CHECK_EQ(init_lock(&L, al->name, policy), 0);
    CHECK_EQ(liblock_cond_init(&not_full, NULL), 0);
    CHECK_EQ(liblock_cond_init(&not_empty, NULL), 0);
    bb_head = bb_count = 0;
    bb_consumed_sum = bb_consumed_n = 0;
    bb_exec_count = 0;
    bb_stop_exec = 0;
    /* inside a delegated critical section: refused, nothing sleeps */
    CHECK_EQ((long)liblock_execute(&L, cs_condwait, NULL), EPERM);
    pthread_t p[BB_PRODUCERS], c[BB_CONSUMERS], x[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&x[i], NULL, exec_traffic, (void *)(long)(i + 1));
    for (int i = 0; i < BB_CONSUMERS; i++)
        pthread_create(&c[i], NULL, consumer, NULL);
    for (int i = 0; i < BB_PRODUCERS; i++)
        pthread_create(&p[i], NULL, producer, (void *)(long)i);
    void *rv;
    for (int i = 0; i < BB_PRODUCERS; i++) {
        pthread_join(p[i], &rv);
        CHECK(rv == NULL, "producer %d failed (%ld)", i, (long)rv);
    }
    for (int i = 0; i < BB_CONSUMERS; i++) {
        pthread_join(c[i], &rv);
        CHECK(rv == NULL, "consumer %d failed (%ld)", i, (long)rv);
    }
    __atomic_store_n(&bb_stop_exec, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 2; i++) {
        pthread_join(x[i], &rv);
        CHECK(rv == NULL, "execute traffic thread %d failed", i);
    }
    long expect = 0;
    for (long pi = 0; pi < BB_PRODUCERS; pi++)
        for (long i = 0; i < BB_ITEMS; i++)
            expect += pi * 100000 + i;
    CHECK_EQ(bb_consumed_n, BB_PRODUCERS * BB_ITEMS);
    CHECK(bb_consumed_sum == expect, "%s: consumed sum %ld, expected %ld", liblock_wait_name(policy),
          bb_consumed_sum, expect);
    CHECK_EQ(bb_count, 0);
    CHECK_EQ(liblock_cond_destroy(&not_full), 0);
    CHECK_EQ(liblock_cond_destroy(&not_empty), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
}

/* ---- bad input ----------------------------------------------------------------- */
static void *cs_nested(void *a)
{
    long *res = a;
    res[0] = liblock_lock(&L);
    errno = 0;
    void *r = liblock_execute(&L, cs_record, NULL);
    res[1] = r == NULL ? errno : 0;
    res[2] = liblock_trylock(&L);
    return a;
}

static void test_bad_input(const struct algo *al)
{
    CHECK_EQ(init_lock(&L, al->name, LIBLOCK_WAIT_SPIN), 0);
    errno = 0;
    CHECK(liblock_execute(&L, NULL, NULL) == NULL && errno == EINVAL, "execute(NULL cs): errno %d", errno);
    errno = 0;
    CHECK(liblock_execute(NULL, cs_record, NULL) == NULL && errno == EINVAL, "execute(NULL lock): errno %d", errno);
    CHECK_EQ(liblock_unlock(&L), EPERM);
    CHECK_EQ(liblock_lock(&L), 0);
    CHECK_EQ(liblock_lock(&L), EDEADLK);
    errno = 0;
    CHECK(liblock_execute(&L, cs_record, NULL) == NULL && errno == EDEADLK, "execute while holding: errno %d",
          errno);
    CHECK_EQ(liblock_destroy(&L), EBUSY);
    CHECK_EQ(liblock_unlock(&L), 0);
    CHECK_EQ(liblock_unlock(&L), EPERM);
    /* the same lock from inside one of its delegated critical sections */
    long res[3] = {-1, -1, -1};
    CHECK(liblock_execute(&L, cs_nested, res) == res, "nested execute failed");
    CHECK_EQ(res[0], EDEADLK);
    CHECK_EQ(res[1], EDEADLK);
    CHECK_EQ(res[2], EBUSY);
    /* still usable */
    seq_counter = 0;
    struct req r;
    CHECK(liblock_execute(&L, cs_record, &r) == &r, "execute after bad calls");
    CHECK_EQ(seq_counter, 1);
    CHECK_EQ(liblock_destroy(&L), 0);
    CHECK_EQ(liblock_destroy(&L), EINVAL);
    /* malformed parameter: warning, default used, lock works */
    if (al->max_env) {
        setenv(al->max_env, "lots", 1);
        int e = init_lock(&L, al->name, LIBLOCK_WAIT_SPIN);
        unsetenv(al->max_env);
        CHECK_EQ(e, 0);
        if (!e) {
            CHECK(liblock_execute(&L, cs_record, &r) == &r, "execute with default parameter");
            CHECK_EQ(liblock_destroy(&L), 0);
        }
    }
    if (!al->stp)
        CHECK_EQ(init_lock(&L, al->name, LIBLOCK_WAIT_SPIN_THEN_PARK), ENOTSUP);
    CHECK_EQ(init_lock(&L, al->name, LIBLOCK_WAIT_PARK), ENOTSUP);
}

/* ---- thread churn and records --------------------------------------------------- */
static void *churn_main(void *a)
{
    for (int i = 0; i < 20; i++)
        if (liblock_execute(&L, cs_exec_count, a) != a)
            return (void *)1;
    return NULL;
}

static void test_churn(const char *name)
{
    CHECK_EQ(init_lock(&L, name, LIBLOCK_WAIT_YIELD), 0);
    long live0 = liblock_debug_live_threads();
    bb_exec_count = 0;
    int failed = 0;
    for (int b = 0; b < 250; b++) {
        pthread_t t[4];
        for (int i = 0; i < 4; i++)
            pthread_create(&t[i], NULL, churn_main, (void *)(long)(i + 1));
        for (int i = 0; i < 4; i++) {
            void *rv;
            pthread_join(t[i], &rv);
            failed += rv != NULL;
        }
    }
    CHECK_EQ(failed, 0);
    CHECK_EQ(bb_exec_count, 1000 * 20);
    long nrec = records_of(&L);
    CHECK(nrec >= 1 && nrec <= 4, "%s: %ld records after 1000 threads, 4 at a time", name, nrec);
    CHECK(liblock_debug_live_threads() == live0, "%s: %ld live thread records, %ld before", name,
          liblock_debug_live_threads(), live0);
    printf("  %-15s 1000 short-lived threads (4 at a time): %ld per-thread records kept\n", name, nrec);
    /* re-initialise at the same address while this thread has a record */
    CHECK(liblock_execute(&L, cs_exec_count, &L) == &L, "execute");
    CHECK_EQ(liblock_destroy(&L), 0);
    CHECK_EQ(init_lock(&L, name, LIBLOCK_WAIT_SPIN), 0);
    CHECK(liblock_execute(&L, cs_exec_count, &L) == &L, "execute after re-init");
    CHECK_EQ(records_of(&L), 1);
    CHECK_EQ(liblock_destroy(&L), 0);
}

int main(int argc, char **argv)
{
    th_watchdog(120);
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++) {
        const struct algo *al = &algos[i];
        if (!th_selected(argc, argv, al->name))
            continue;
        th_context = al->name;
        uint64_t t0 = th_now_ns();
        test_delegation(al, LIBLOCK_WAIT_SPIN);
        test_delegation(al, LIBLOCK_WAIT_YIELD);
        if (al->stp)
            test_delegation(al, LIBLOCK_WAIT_SPIN_THEN_PARK);
        test_trylock(al);
        test_mixed(al, LIBLOCK_WAIT_YIELD, 8, 1500);
        test_mixed(al, LIBLOCK_WAIT_SPIN, 2, 5000);
        if (al->stp)
            test_mixed(al, LIBLOCK_WAIT_SPIN_THEN_PARK, 8, 1500);
        test_cond(al, LIBLOCK_WAIT_YIELD);
        if (al->stp) {
            test_cond(al, LIBLOCK_WAIT_SPIN_THEN_PARK);
            test_long_hold(al);
        }
        test_bad_input(al);
        printf("  %-15s done (%d failures so far), %.1f s\n", al->name, th_failures, (th_now_ns() - t0) / 1e9);
        fflush(stdout);
    }
    th_context = "records";
    if (th_selected(argc, argv, "flat-combining"))
        test_churn("flat-combining");
    if (th_selected(argc, argv, "dsm-synch"))
        test_churn("dsm-synch");
    return th_report("test_combining");
}
