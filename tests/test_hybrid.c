/*
 * test_hybrid - what is particular to hyblock and hybcomb (Petrovic, EPFL
 * 2015, section 6.1; the
 * generic tests cover the rest: test_stress, test_mixed, test_delegation,
 * test_oversub, test_cond, test_api loop over the registry):
 *
 *  hyblock-nest    4 threads each take up to 80 hyblock locks at once
 *                  (ascending order, so more levels than the first lane
 *                  chunk holds), then release them in a random order; the
 *                  other threads contend on the same locks.  Exact counts
 *                  per lock, no error.
 *  hybcomb-combine deterministic combining: main holds the lock (lock());
 *                  E1 executes and registers as the next combiner (its node
 *                  opens), then E2..E4 execute one at a time, each seen
 *                  registered on E1's node (its n_ops) before the next
 *                  starts; main unlocks: E1 runs its own and the three
 *                  registered critical sections, on its own thread.
 *                  MAX_OPS = 3: a fifth executor cannot register with E1.
 *  hybcomb-options 6 threads mixing execute and lock/unlock with
 *                  LIBLOCK_HYBCOMB_CAS_TRIES=0 (always the SWAP fallback),
 *                  with LIBLOCK_HYBCOMB_DRAIN=0, and with MAX_OPS=1: exact
 *                  counts; the statistics agree (no CAS with CAS_TRIES=0,
 *                  no pass above MAX_OPS, own + served = executes).
 *  hybcomb-two     two hybcomb locks used alternately by 6 threads (nodes
 *                  migrate between locks, change 3 of hybcomb.c): exact
 *                  counts on both.
 *  bad-input       a malformed LIBLOCK_HYBCOMB_MAX_OPS falls back to 200;
 *                  hybcomb's statistics of a hyblock lock: ENOTSUP.
 *
 * Usage: test_hybrid
 */
#include "harness.h"

#include <sys/syscall.h>
#include "hybcomb_stats.h"

#include <stdatomic.h>

static int small;
static pthread_barrier_t start_line; /* the workers start together, so they contend */

/* ---------------------------------------------------------------- hyblock nesting */
#define NEST 80
#define NEST_THREADS 4
static liblock_t nest_locks[NEST];
static long nest_count[NEST];
static _Atomic long nest_errors;

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 16;
}

static void *nest_main(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    int iters = small ? 60 : 400;
    int order[NEST];
    pthread_barrier_wait(&start_line);
    for (int it = 0; it < iters; it++) {
        int k = 1 + (int)(rnd(&seed) % NEST);
        int first = (int)(rnd(&seed) % (unsigned)(NEST - k + 1));
        for (int i = 0; i < k; i++) {
            int e = liblock_lock(&nest_locks[first + i]);
            if (e)
                atomic_fetch_add(&nest_errors, 1);
            nest_count[first + i]++;
            order[i] = first + i;
        }
        for (int i = k - 1; i > 0; i--) { /* random release order */
            int j = (int)(rnd(&seed) % (unsigned)(i + 1));
            int t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < k; i++)
            if (liblock_unlock(&nest_locks[order[i]]))
                atomic_fetch_add(&nest_errors, 1);
    }
    return (void *)(intptr_t)iters;
}

static void test_hyblock_nest(void)
{
    th_context = "hyblock-nest";
    for (int i = 0; i < NEST; i++) {
        CHECK_EQ(liblock_init(&nest_locks[i], "hyblock", NULL), 0);
        nest_count[i] = 0;
    }
    /* expected counts: replay each thread's random choices */
    long want[NEST] = {0};
    for (int t = 0; t < NEST_THREADS; t++) {
        unsigned seed = (unsigned)t * 7919u + 1;
        for (int it = 0, iters = small ? 60 : 400; it < iters; it++) {
            int k = 1 + (int)(rnd(&seed) % NEST);
            int first = (int)(rnd(&seed) % (unsigned)(NEST - k + 1));
            for (int i = 0; i < k; i++)
                want[first + i]++;
            for (int i = k - 1; i > 0; i--)
                (void)rnd(&seed);
        }
    }
    pthread_t th[NEST_THREADS];
    pthread_barrier_init(&start_line, NULL, NEST_THREADS);
    for (int t = 0; t < NEST_THREADS; t++)
        pthread_create(&th[t], NULL, nest_main, (void *)(uintptr_t)t);
    for (int t = 0; t < NEST_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start_line);
    CHECK_EQ(atomic_load(&nest_errors), 0);
    for (int i = 0; i < NEST; i++) {
        CHECK(nest_count[i] == want[i], "lock %d: %ld critical sections, expected %ld", i, nest_count[i], want[i]);
        CHECK_EQ(liblock_destroy(&nest_locks[i]), 0);
    }
}

/* ---------------------------------------------------------------- hybcomb combining */
static liblock_t cl;
static long cl_count;
/* where a section ran: the kernel thread (gettid), since pthread_self()
 * inside is its caller's wherever it runs (docs/internals.md, "Delegated
 * sections and thread identity") */
static pid_t cl_ran_on[8], cl_tid[8];

static void *record_cs(void *arg)
{
    intptr_t i = (intptr_t)arg;
    cl_ran_on[i] = (pid_t)syscall(SYS_gettid);
    cl_count++;
    return (void *)(i + 100);
}

static void *exec_main(void *arg)
{
    cl_tid[(intptr_t)arg] = (pid_t)syscall(SYS_gettid); /* read after the join */
    return liblock_execute(&cl, record_cs, arg);
}

static void wait_tail_ops(int64_t want)
{
    uint64_t dl = th_now_ns() + 20000000000ull;
    while (hc_tail_ops(&cl) != want && th_now_ns() < dl)
        usleep(200);
    CHECK(hc_tail_ops(&cl) == want, "tail node n_ops %lld, expected %lld",
          (long long)hc_tail_ops(&cl), (long long)want);
}

static void test_hybcomb_combine(void)
{
    th_context = "hybcomb-combine";
    setenv("LIBLOCK_HYBCOMB_MAX_OPS", "3", 1);
    CHECK_EQ(liblock_init(&cl, "hybcomb", NULL), 0);
    unsetenv("LIBLOCK_HYBCOMB_MAX_OPS");
    cl_count = 0;
    CHECK_EQ(hc_tail_ops(&cl), -1); /* free */
    CHECK_EQ(liblock_lock(&cl), 0);
    CHECK_EQ(hc_tail_ops(&cl), -1); /* a lock() holder's node never opens */
    pthread_t e[5];
    pthread_create(&e[0], NULL, exec_main, (void *)(intptr_t)0);
    wait_tail_ops(0); /* E1 registered behind us and opened its node */
    for (intptr_t i = 1; i <= 3; i++) {
        pthread_create(&e[i], NULL, exec_main, (void *)i);
        wait_tail_ops(i);
    }
    /* E5: E1 is full (MAX_OPS = 3): it registers as the next combiner */
    pthread_create(&e[4], NULL, exec_main, (void *)(intptr_t)4);
    uint64_t dl = th_now_ns() + 20000000000ull;
    while (hc_tail_ops(&cl) != 0 && th_now_ns() < dl)
        usleep(200);
    CHECK_EQ(hc_tail_ops(&cl), 0);
    CHECK_EQ(cl_count, 0);
    CHECK_EQ(liblock_unlock(&cl), 0);
    for (intptr_t i = 0; i < 5; i++) {
        void *r = NULL;
        pthread_join(e[i], &r);
        CHECK(r == (void *)(i + 100), "executor %d got %p", (int)i, r);
    }
    CHECK_EQ(cl_count, 5);
    for (int i = 1; i <= 3; i++)
        CHECK(cl_ran_on[i] == cl_tid[0], "request %d did not run on the combiner E1", i);
    CHECK(cl_ran_on[0] == cl_tid[0], "E1's own request ran elsewhere");
    CHECK(cl_ran_on[4] == cl_tid[4], "E5's request ran elsewhere");
    struct hc_stats st;
    CHECK_EQ(hc_stats_of(&cl, &st), 0);
    CHECK_EQ(st.max_ops, 3);
    CHECK_EQ(st.served, 3);
    CHECK_EQ(st.own, 2);
    CHECK_EQ(st.max_pass, 3);
    CHECK_EQ(liblock_destroy(&cl), 0);
}

/* ---------------------------------------------------------------- options under stress */
#define OPT_THREADS 6
static liblock_t ol[2];
static long ocount[2];
static volatile int oinside[2];
static _Atomic long oviol, oerr, oexec;

static void *ocs(void *arg)
{
    int k = (int)(intptr_t)arg;
    if (oinside[k])
        atomic_fetch_add(&oviol, 1);
    oinside[k] = 1;
    ocount[k]++;
    for (volatile int i = 0; i < 50; i++)
        ;
    oinside[k] = 0;
    return (void *)0x77;
}

struct owork {
    int two;
    long n;
};

static void *opt_main(void *arg)
{
    struct owork *w = arg;
    unsigned seed = (unsigned)atomic_fetch_add(&oexec, 0) ^ (unsigned)(uintptr_t)&seed;
    pthread_barrier_wait(&start_line);
    for (long i = 0; i < w->n; i++) {
        int k = w->two ? (int)(i & 1) : 0;
        if (rnd(&seed) % 4 == 0) {
            if (liblock_lock(&ol[k])) {
                atomic_fetch_add(&oerr, 1);
                continue;
            }
            ocs((void *)(intptr_t)k);
            if (liblock_unlock(&ol[k]))
                atomic_fetch_add(&oerr, 1);
        } else {
            atomic_fetch_add(&oexec, 1);
            if (liblock_execute(&ol[k], ocs, (void *)(intptr_t)k) != (void *)0x77)
                atomic_fetch_add(&oerr, 1);
        }
    }
    return NULL;
}

/* var=val for ol[0]; for ol[1] var=val1 if given, else val */
static void run_opts(const char *what, const char *var, const char *val, const char *val1, int two)
{
    th_context = what;
    for (int k = 0; k < 2; k++) {
        if (var)
            setenv(var, k == 1 && val1 ? val1 : val, 1);
        CHECK_EQ(liblock_init(&ol[k], "hybcomb", NULL), 0);
        ocount[k] = 0;
    }
    if (var)
        unsetenv(var);
    atomic_store(&oviol, 0);
    atomic_store(&oerr, 0);
    atomic_store(&oexec, 0);
    struct owork w = {two, small ? 2000 : 30000};
    pthread_t th[OPT_THREADS];
    pthread_barrier_init(&start_line, NULL, OPT_THREADS);
    for (int t = 0; t < OPT_THREADS; t++)
        pthread_create(&th[t], NULL, opt_main, &w);
    for (int t = 0; t < OPT_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&start_line);
    CHECK_EQ(atomic_load(&oerr), 0);
    CHECK_EQ(atomic_load(&oviol), 0);
    CHECK_EQ(ocount[0] + ocount[1], OPT_THREADS * w.n);
    if (two)
        CHECK_EQ(ocount[0], ocount[1]);
    struct hc_stats st[2];
    uint64_t own = 0, served = 0;
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(hc_stats_of(&ol[k], &st[k]), 0);
        CHECK(st[k].max_pass <= st[k].max_ops, "a pass served %llu > MAX_OPS %u", (unsigned long long)st[k].max_pass,
              st[k].max_ops);
        own += st[k].own;
        served += st[k].served;
        CHECK_EQ(liblock_destroy(&ol[k]), 0);
    }
    /* own counts execute()s run in the combiner role by their caller */
    CHECK(own + served == (uint64_t)atomic_load(&oexec), "own %llu + served %llu != executes %ld",
          (unsigned long long)own, (unsigned long long)served, atomic_load(&oexec));
    if (var && strcmp(var, "LIBLOCK_HYBCOMB_CAS_TRIES") == 0) {
        CHECK_EQ(st[0].cas, 0);
        CHECK_EQ(st[0].cas_tries, 0);
    }
    if (var && strcmp(var, "LIBLOCK_HYBCOMB_DRAIN") == 0)
        CHECK_EQ(st[0].drain, 0);
    printf("  %-28s own %llu served %llu (%.0f%% combined) cas %llu failed %llu swaps %llu cancelled %llu\n", what,
           (unsigned long long)own, (unsigned long long)served, 100.0 * (double)served / (double)(own + served + !own),
           (unsigned long long)(st[0].cas + st[1].cas), (unsigned long long)(st[0].cas_failed + st[1].cas_failed),
           (unsigned long long)(st[0].swaps + st[1].swaps), (unsigned long long)(st[0].cancelled + st[1].cancelled));
}

static void test_bad_input(void)
{
    th_context = "bad-input";
    liblock_t l;
    setenv("LIBLOCK_HYBCOMB_MAX_OPS", "lots", 1);
    CHECK_EQ(liblock_init(&l, "hybcomb", NULL), 0);
    unsetenv("LIBLOCK_HYBCOMB_MAX_OPS");
    struct hc_stats st;
    CHECK_EQ(hc_stats_of(&l, &st), 0);
    CHECK_EQ(st.max_ops, 200);
    CHECK_EQ(liblock_lock(&l), 0);
    CHECK_EQ(liblock_destroy(&l), EBUSY);
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK_EQ(liblock_destroy(&l), 0);
    CHECK_EQ(liblock_init(&l, "hyblock", NULL), 0);
    CHECK_EQ(hc_stats_of(&l, &st), ENOTSUP);
    CHECK_EQ(liblock_lock(&l), 0);
    CHECK_EQ(liblock_destroy(&l), EBUSY);
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK_EQ(liblock_destroy(&l), 0);
}

int main(void)
{
    th_watchdog(120);
    small = th_scale_small();
    setenv("LIBLOCK_WARN", "0", 1);
    test_hyblock_nest();
    test_hybcomb_combine();
    run_opts("hybcomb default", NULL, NULL, NULL, 0);
    run_opts("hybcomb CAS_TRIES=0 (SWAP)", "LIBLOCK_HYBCOMB_CAS_TRIES", "0", NULL, 0);
    run_opts("hybcomb DRAIN=0", "LIBLOCK_HYBCOMB_DRAIN", "0", NULL, 0);
    run_opts("hybcomb MAX_OPS=1", "LIBLOCK_HYBCOMB_MAX_OPS", "1", NULL, 0);
    run_opts("hybcomb two locks", NULL, NULL, NULL, 1);
    /* nodes move between locks with different limits: a client's FAA must
     * carry the limit of the opening it hit (hybcomb.c, change 1) */
    run_opts("hybcomb MAX_OPS 1 and 3", "LIBLOCK_HYBCOMB_MAX_OPS", "1", "3", 1);
    test_bad_input();
    return th_report("test_hybrid");
}
