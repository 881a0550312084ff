/*
 * test_delegation_cs - what a delegated critical section may do and see
 * (docs/api.md, "Delegated critical sections"), for every algorithm it applies to,
 * each (algorithm, scenario) pair in its own child process with a time
 * bound (scenario.h); the lock-ordering and condition-variable scenarios
 * are in test_delegation.c:
 *
 *  cs-condwait   delegating algorithms: a delegated cs waits on C until
 *                another delegated cs signals it.  rcl documents that this
 *                works (docs/rcl.md, "Condition variables"); the combining
 *                locks document EPERM without sleeping (docs/combining.md).
 *  cs-condwait-lifo  the same with a mostly-LIFO condition variable.
 *  cs-blocks     rcl: delegated css that sleep and that block on a pthread
 *                mutex a client holds (docs/rcl.md, "When a critical section
 *                blocks"); exact counts, other locks of the server progress.
 *  tls           what a cs sees of its caller's __thread variables, and
 *                whether the caller sees errno as the cs left it: the
 *                __thread value is asserted for non-delegating algorithms
 *                (execute is lock, call, unlock on the caller's thread);
 *                the rest is printed only (no document states it yet).
 *
 * Locks use a waiting policy that progresses with more threads than CPUs
 * (scenario.h sc_progress_policy); LIBLOCK_TEST_WAIT=default runs them with
 * defaults.
 *
 * Usage: test_delegation_cs [ALGORITHM...] [--scenario=a,b]
 * Bound per pair: 10 s (LIBLOCK_TEST_TIMEOUT overrides); iterations per
 * thread LIBLOCK_TEST_ITERS (default 2000).
 */
#include "scenario.h"

static long iters;

static void note_error(atomic_long *count, atomic_int *last, int e)
{
    atomic_fetch_add(count, 1);
    atomic_store(last, e);
}

/* ---------------------------------------------------------------- a delegated cs waits */

static struct cw {
    liblock_t L;
    liblock_cond_t C;
    int flag;
    long sets, waits_done, sleeps;
    atomic_long errors;
    atomic_int last;
} W;

static void *cw_wait_cs(void *arg)
{
    (void)arg;
    while (!W.flag) {
        int e = liblock_cond_wait(&W.C, &W.L);
        if (e)
            return (void *)(intptr_t)e;
    }
    W.flag = 0;
    W.waits_done++;
    return (void *)-1;
}

static void *cw_set_cs(void *arg)
{
    (void)arg;
    if (W.flag)
        return (void *)1;
    W.flag = 1;
    W.sets++;
    int e = liblock_cond_signal(&W.C);
    return e ? (void *)(intptr_t)(e + 10) : (void *)2;
}

static void *cw_waiter(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++) {
        errno = 0;
        void *r = liblock_execute(&W.L, cw_wait_cs, NULL);
        if (r != (void *)-1) {
            note_error(&W.errors, &W.last, r ? (int)(intptr_t)r : errno ? errno : -2);
            return NULL;
        }
    }
    return NULL;
}

static void *cw_setter(void *arg)
{
    (void)arg;
    long made = 0;
    while (made < iters) {
        errno = 0;
        void *r = liblock_execute(&W.L, cw_set_cs, NULL);
        if (r == (void *)2)
            made++;
        else if (r == (void *)1)
            sched_yield();
        else {
            note_error(&W.errors, &W.last, r ? (int)(intptr_t)r - 10 : errno ? errno : -2);
            return NULL;
        }
    }
    return NULL;
}

static void *cw_probe_cs(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 2;
    return (void *)(intptr_t)liblock_cond_timedwait(&W.C, &W.L, &ts);
}

static void cs_condwait_body(const char *algo, void *arg)
{
    int lifo = arg != NULL;
    memset(&W, 0, sizeof W);
    int e = sc_init_progress(&W.L, algo);
    liblock_condattr_t ca;
    liblock_condattr_init(&ca);
    if (lifo)
        liblock_condattr_setfifo(&ca, 0.001);
    int e2 = liblock_cond_init(&W.C, lifo ? &ca : NULL);
    CHECK(e == 0 && e2 == 0, "init: %s / %s", strerror(e), strerror(e2));
    if (e || e2)
        return;
    if (strcmp(algo, "rcl") != 0) {
        /* docs/combining.md: cond_wait inside a section run by execute
         * returns EPERM without sleeping. */
        for (int i = 0; i < 10; i++) {
            errno = 0;
            void *r = liblock_execute(&W.L, cw_probe_cs, NULL);
            CHECK((intptr_t)r == EPERM, "cond_timedwait in a delegated cs returned %d (%s), docs say EPERM",
                  (int)(intptr_t)r, strerror((int)(intptr_t)r));
        }
    } else {
        pthread_t a, b;
        pthread_create(&a, NULL, cw_waiter, NULL);
        pthread_create(&b, NULL, cw_setter, NULL);
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        CHECK(atomic_load(&W.errors) == 0, "%ld calls failed, last %d (%s)", (long)atomic_load(&W.errors),
              atomic_load(&W.last), strerror(atomic_load(&W.last)));
        CHECK_EQ(W.sets, iters);
        CHECK_EQ(W.waits_done, iters);
    }
    CHECK_EQ(liblock_cond_destroy(&W.C), 0);
    CHECK_EQ(liblock_destroy(&W.L), 0);
}

/* ---------------------------------------------------------------- rcl: a delegated cs blocks */

static struct cb {
    liblock_t L1, L2;
    pthread_mutex_t pm;
    struct sc_guard g1, g2;
    atomic_long errors;
    atomic_int last;
    long n_sleepers, n_fast;
} B;

static void *cb_sleep_cs(void *arg)
{
    (void)arg;
    sc_enter(&B.g1);
    usleep(100);
    sc_leave(&B.g1);
    return (void *)1;
}

static void *cb_mutex_cs(void *arg)
{
    (void)arg;
    sc_enter(&B.g1);
    int e = pthread_mutex_lock(&B.pm); /* a client thread holds it now and then */
    if (!e)
        e = pthread_mutex_unlock(&B.pm);
    sc_leave(&B.g1);
    return e ? (void *)(intptr_t)(e + 10) : (void *)1;
}

static void *cb_fast_cs(void *arg)
{
    (void)arg;
    sc_enter(&B.g2);
    sc_leave(&B.g2);
    return (void *)1;
}

static void *cb_thread(void *arg)
{
    long kind = (long)arg;
    long n = kind == 2 ? B.n_fast : B.n_sleepers;
    for (long i = 0; i < n; i++) {
        errno = 0;
        void *r;
        if (kind == 0)
            r = liblock_execute(&B.L1, cb_sleep_cs, NULL);
        else if (kind == 1)
            r = liblock_execute(&B.L1, cb_mutex_cs, NULL);
        else
            r = liblock_execute(&B.L2, cb_fast_cs, NULL);
        if (r != (void *)1)
            note_error(&B.errors, &B.last, r ? (int)(intptr_t)r - 10 : errno ? errno : -2);
        if (kind == 1 && i % 8 == 0) { /* hold the mutex the next cs will block on */
            pthread_mutex_lock(&B.pm);
            usleep(200);
            pthread_mutex_unlock(&B.pm);
        }
    }
    return NULL;
}

static void cs_blocks_body(const char *algo, void *arg)
{
    (void)arg;
    memset(&B, 0, sizeof B);
    pthread_mutex_init(&B.pm, NULL);
    int e1 = sc_init_progress(&B.L1, algo), e2 = sc_init_progress(&B.L2, algo);
    CHECK(e1 == 0 && e2 == 0, "init: %s / %s", strerror(e1), strerror(e2));
    if (e1 || e2)
        return;
    B.n_sleepers = iters / 10 + 1;
    B.n_fast = iters * 5;
    pthread_t t[3];
    for (long k = 0; k < 3; k++)
        pthread_create(&t[k], NULL, cb_thread, (void *)k);
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    CHECK(atomic_load(&B.errors) == 0, "%ld calls failed, last %d (%s)", (long)atomic_load(&B.errors),
          atomic_load(&B.last), strerror(atomic_load(&B.last)));
    CHECK_EQ(B.g1.count, 2 * B.n_sleepers);
    CHECK_EQ(B.g2.count, B.n_fast);
    CHECK_EQ(B.g1.violations, 0);
    CHECK_EQ(B.g2.violations, 0);
    CHECK_EQ(liblock_destroy(&B.L1), 0);
    CHECK_EQ(liblock_destroy(&B.L2), 0);
}

/* ---------------------------------------------------------------- thread-local state */

static __thread long tls_tag;

static struct tl {
    liblock_t L;
    atomic_long same_tag, other_tag, errno_kept, errno_changed, calls;
    atomic_long errors;
    struct sc_gate gate;
    atomic_long pending; /* requests of threads other than the first in flight */
    int queue_up;        /* combining locks: make the first thread a combiner of others */
} T;

static void *tl_cs(void *arg)
{
    long caller = (long)arg;
    if (tls_tag == caller)
        atomic_fetch_add(&T.same_tag, 1);
    else
        atomic_fetch_add(&T.other_tag, 1);
    if (caller == 100 && T.queue_up) /* the first thread: let another request queue behind this one */
        sc_await_pending(&T.pending, 100);
    errno = EDOM;  /* does the caller see it after execute? */
    return (void *)(caller + 1);
}

static void *tl_thread(void *arg)
{
    long me = (long)arg;
    tls_tag = me;
    sc_gate_wait(&T.gate);
    for (long i = 0; i < iters; i++) {
        errno = 0;
        if (me != 100)
            atomic_fetch_add(&T.pending, 1);
        void *r = liblock_execute(&T.L, tl_cs, (void *)me);
        int seen = errno;
        if (me != 100)
            atomic_fetch_sub(&T.pending, 1);
        atomic_fetch_add(&T.calls, 1);
        if (r != (void *)(me + 1))
            atomic_fetch_add(&T.errors, 1);
        if (seen == EDOM)
            atomic_fetch_add(&T.errno_kept, 1);
        else
            atomic_fetch_add(&T.errno_changed, 1);
        sc_work_ns(500);
    }
    return NULL;
}

static void tls_body(const char *algo, void *arg)
{
    (void)arg;
    memset(&T, 0, sizeof T);
    int e = sc_init_progress(&T.L, algo);
    CHECK(e == 0, "init: %s", strerror(e));
    if (e)
        return;
    T.gate.n = 3;
    T.queue_up = strcmp(algo, "rcl") != 0; /* rcl runs every cs on its server anyway */
    pthread_t t[3];
    for (long k = 0; k < 3; k++)
        pthread_create(&t[k], NULL, tl_thread, (void *)(k + 100));
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    CHECK_EQ(atomic_load(&T.errors), 0);
    long calls = atomic_load(&T.calls);
    printf("     %s: %ld of %ld delegated css saw the caller's __thread value; the caller saw the cs's errno "
           "after %ld of %ld\n",
           algo, (long)atomic_load(&T.same_tag), calls, (long)atomic_load(&T.errno_kept), calls);
    if (!(sc_props(algo) & LIBLOCK_PROP_DELEGATES)) {
        /* execute = lock, call, unlock on the caller's thread (docs/api.md);
         * what errno holds afterwards is not documented: printed */
        CHECK_EQ(atomic_load(&T.same_tag), calls);
    }
    CHECK_EQ(liblock_destroy(&T.L), 0);
}

/* ---------------------------------------------------------------- driver */

int main(int argc, char **argv)
{
    sc_setup(argc, argv);
    iters = sc_iters(2000);
    unsigned bound = sc_bound(10);
    for (const char *const *p = liblock_algorithms(); *p; p++) {
        const char *a = *p;
        if (!sc_algo_selected(a))
            continue;
        unsigned props = sc_props(a);
        int deleg = (props & LIBLOCK_PROP_DELEGATES) != 0;
        int cond = (props & LIBLOCK_PROP_COND) != 0;
        printf("== %s (policy %s)\n", a, liblock_wait_name(sc_progress_policy(a)));
        if (sc_scenario_selected("cs-condwait")) {
            if (deleg && cond)
                sc_run(a, "cs-condwait", bound, cs_condwait_body, NULL);
            else
                sc_not_applicable(a, "cs-condwait");
        }
        if (sc_scenario_selected("cs-condwait-lifo")) {
            if (deleg && cond)
                sc_run(a, "cs-condwait-lifo", bound, cs_condwait_body, (void *)1);
            else
                sc_not_applicable(a, "cs-condwait-lifo");
        }
        if (sc_scenario_selected("cs-blocks")) {
            if (strcmp(a, "rcl") == 0)
                sc_run(a, "cs-blocks", bound, cs_blocks_body, NULL);
            else
                sc_not_applicable(a, "cs-blocks");
        }
        if (sc_scenario_selected("tls"))
            sc_run(a, "tls", bound, tls_body, NULL);
    }
    return sc_report("test_delegation_cs");
}
