/*
 * test_delegation - semantics of a delegated critical section
 * (ARCHITECTURE.md section 8, issue 11): a critical section passed to
 * liblock_execute must behave as if it ran under the lock on its caller's
 * thread, whichever thread actually runs it (a combiner, an RCL servicing
 * thread).  Every scenario runs for every algorithm it applies to (the
 * catalogue's, so algorithms added later are covered), each (algorithm,
 * scenario) pair in its own child process with a time bound (scenario.h):
 *
 *  hoh-pthread   A: lock(L); pthread_mutex_lock(P); unlock(L); pthread_mutex_unlock(P)
 *                B x2: execute(L, cs) where cs locks P.  Same order L -> P
 *                everywhere, so it must complete; exact counts on both.
 *  hoh-same      the same with P a liblock lock of the same algorithm
 *                (A's unlocks are not in LIFO order).
 *  hoh-other     P a liblock lock of the next algorithm in the catalogue.
 *  runner-holds  A: lock(M), then trylock(L) (backing off M on EBUSY, so
 *                the program has no lock-order deadlock), unlock(L),
 *                unlock(M); B x2: execute(L, cs) where cs locks M (M the same
 *                algorithm).  No EDEADLK in cs, no EPERM on A's unlocks, no
 *                crash, exact counts, exclusion on M's data.
 *  cond-default  A x2 hold L (liblock_lock) and wait in liblock_cond_wait(C, L)
 *                for tokens; B's delegated cs adds a token and signals C (a
 *                broadcast every 4th); default condition variable.
 *  cond-lifo     the same with a mostly-LIFO condition variable
 *                (liblock_condattr_setfifo).
 *  cs-condwait   delegating algorithms: a delegated cs waits on C until
 *                another delegated cs signals it.  rcl documents that this
 *                works (docs/rcl.md, "Condition variables"); the combining
 *                locks document EPERM without sleeping (docs/combining.md).
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
 * (spin-then-park, else park, else yield: scenario.h sc_progress_policy),
 * so that these scenarios test delegation, not oversubscription
 * (test_oversub does); LIBLOCK_TEST_WAIT=default runs them with defaults.
 *
 * Usage: test_delegation [ALGORITHM...] [--scenario=a,b]
 * Bound per pair: 10 s (LIBLOCK_TEST_TIMEOUT overrides); iterations per
 * thread LIBLOCK_TEST_ITERS (default 2000).
 */
#include "scenario.h"

#define NB 2 /* executing threads besides A */

static long iters;

/* ---------------------------------------------------------------- hand over hand */

enum inner_kind { INNER_PTHREAD, INNER_LIBLOCK };

static struct hoh {
    liblock_t L;
    enum inner_kind kind;
    pthread_mutex_t pm;
    liblock_t pl;
    struct sc_guard gL, gP;
    struct sc_gate gate;
    atomic_long errors;
    atomic_int last_error;
    atomic_long pending; /* B requests in flight */
} H;

static void note_error(atomic_long *count, atomic_int *last, int e)
{
    atomic_fetch_add(count, 1);
    atomic_store(last, e);
}

static int inner_lock(void)
{
    return H.kind == INNER_PTHREAD ? pthread_mutex_lock(&H.pm) : liblock_lock(&H.pl);
}

static int inner_unlock(void)
{
    return H.kind == INNER_PTHREAD ? pthread_mutex_unlock(&H.pm) : liblock_unlock(&H.pl);
}

static void *hoh_cs(void *arg)
{
    (void)arg;
    sc_enter(&H.gL);
    int e = inner_lock();
    if (e) {
        sc_leave(&H.gL);
        return (void *)(intptr_t)e;
    }
    sc_enter(&H.gP);
    sc_leave(&H.gP);
    e = inner_unlock();
    sc_leave(&H.gL);
    return (void *)(intptr_t)(e ? e : -1); /* -1: success, so NULL means execute failed */
}

static void *hoh_a(void *arg)
{
    (void)arg;
    sc_gate_wait(&H.gate);
    for (long i = 0; i < iters; i++) {
        int e = liblock_lock(&H.L);
        if (e) {
            note_error(&H.errors, &H.last_error, e);
            continue;
        }
        sc_enter(&H.gL);
        e = inner_lock();
        sc_leave(&H.gL);
        if (e) {
            note_error(&H.errors, &H.last_error, e);
            liblock_unlock(&H.L);
            continue;
        }
        sc_await_pending(&H.pending, 200); /* holding both: a B request queues on L */
        e = liblock_unlock(&H.L);
        if (e)
            note_error(&H.errors, &H.last_error, e);
        sc_enter(&H.gP);
        sc_pause(200);
        sc_leave(&H.gP);
        e = inner_unlock();
        if (e)
            note_error(&H.errors, &H.last_error, e);
    }
    return NULL;
}

static void *hoh_b(void *arg)
{
    (void)arg;
    sc_gate_wait(&H.gate);
    for (long i = 0; i < iters; i++) {
        errno = 0;
        atomic_fetch_add(&H.pending, 1);
        void *r = liblock_execute(&H.L, hoh_cs, NULL);
        atomic_fetch_sub(&H.pending, 1);
        if (r != (void *)(intptr_t)-1)
            note_error(&H.errors, &H.last_error, r ? (int)(intptr_t)r : errno ? errno : -2);
    }
    return NULL;
}

static void hoh_body(const char *algo, void *arg)
{
    const char *inner = arg; /* NULL: a pthread mutex */
    memset(&H, 0, sizeof H);
    H.kind = inner ? INNER_LIBLOCK : INNER_PTHREAD;
    int e = sc_init_progress(&H.L, algo);
    CHECK(e == 0, "init L: %s", strerror(e));
    if (inner)
        e = sc_init_progress(&H.pl, inner);
    else
        e = pthread_mutex_init(&H.pm, NULL);
    CHECK(e == 0, "init P (%s): %s", inner ? inner : "pthread", strerror(e));
    if (th_failures)
        return;
    H.gate.n = 1 + NB;
    pthread_t a, b[NB];
    pthread_create(&a, NULL, hoh_a, NULL);
    for (int i = 0; i < NB; i++)
        pthread_create(&b[i], NULL, hoh_b, NULL);
    pthread_join(a, NULL);
    for (int i = 0; i < NB; i++)
        pthread_join(b[i], NULL);
    long want = iters * (1 + NB);
    CHECK(atomic_load(&H.errors) == 0, "%ld calls failed, last error %d (%s)", (long)atomic_load(&H.errors),
          atomic_load(&H.last_error), strerror(atomic_load(&H.last_error)));
    CHECK_EQ(H.gL.count, want);
    CHECK_EQ(H.gP.count, want);
    CHECK_EQ(H.gL.violations, 0);
    CHECK_EQ(H.gP.violations, 0);
    CHECK_EQ(liblock_destroy(&H.L), 0);
    if (inner)
        CHECK_EQ(liblock_destroy(&H.pl), 0);
}

/* ---------------------------------------------------------------- runner holds M */

static struct rh {
    liblock_t L, M;
    struct sc_guard gL, gM;
    struct sc_gate gate;
    atomic_long a_errors, cs_errors;
    atomic_int a_last, cs_last;
    atomic_long backoffs;
    atomic_long pending;
} R;

static void *rh_cs(void *arg)
{
    (void)arg;
    sc_enter(&R.gL);
    int e = liblock_lock(&R.M);
    if (e) {
        note_error(&R.cs_errors, &R.cs_last, e);
    } else {
        sc_enter(&R.gM);
        sc_leave(&R.gM);
        e = liblock_unlock(&R.M);
        if (e)
            note_error(&R.cs_errors, &R.cs_last, e);
    }
    sc_leave(&R.gL);
    return (void *)1;
}

static void *rh_a(void *arg)
{
    (void)arg;
    sc_gate_wait(&R.gate);
    for (long i = 0; i < iters; i++) {
        int e = liblock_lock(&R.M);
        if (e) {
            note_error(&R.a_errors, &R.a_last, e);
            continue;
        }
        while ((e = liblock_trylock(&R.L)) == EBUSY) {
            atomic_fetch_add(&R.backoffs, 1);
            if ((e = liblock_unlock(&R.M)) != 0)
                break;
            sched_yield();
            if ((e = liblock_lock(&R.M)) != 0)
                break;
        }
        if (e) {
            note_error(&R.a_errors, &R.a_last, e);
            return NULL; /* state unknown: stop here, the counts will show it */
        }
        sc_enter(&R.gL);
        sc_await_pending(&R.pending, 200); /* holding M and L: a B request queues on L */
        sc_leave(&R.gL);
        e = liblock_unlock(&R.L);
        if (e)
            note_error(&R.a_errors, &R.a_last, e);
        sc_enter(&R.gM);
        sc_pause(100);
        sc_leave(&R.gM);
        e = liblock_unlock(&R.M);
        if (e)
            note_error(&R.a_errors, &R.a_last, e);
    }
    return NULL;
}

static void *rh_b(void *arg)
{
    (void)arg;
    sc_gate_wait(&R.gate);
    for (long i = 0; i < iters; i++) {
        errno = 0;
        atomic_fetch_add(&R.pending, 1);
        void *r = liblock_execute(&R.L, rh_cs, NULL);
        atomic_fetch_sub(&R.pending, 1);
        if (r != (void *)1)
            note_error(&R.cs_errors, &R.cs_last, errno ? errno : -2);
        sc_pause(300);
    }
    return NULL;
}

static void runner_holds_body(const char *algo, void *arg)
{
    (void)arg;
    memset(&R, 0, sizeof R);
    int e1 = sc_init_progress(&R.L, algo), e2 = sc_init_progress(&R.M, algo);
    CHECK(e1 == 0 && e2 == 0, "init: %s / %s", strerror(e1), strerror(e2));
    if (e1 || e2)
        return;
    R.gate.n = 1 + NB;
    pthread_t a, b[NB];
    pthread_create(&a, NULL, rh_a, NULL);
    for (int i = 0; i < NB; i++)
        pthread_create(&b[i], NULL, rh_b, NULL);
    pthread_join(a, NULL);
    for (int i = 0; i < NB; i++)
        pthread_join(b[i], NULL);
    long want = iters * (1 + NB);
    CHECK(atomic_load(&R.a_errors) == 0, "A (holds M, takes L): %ld calls failed, last %d (%s)",
          (long)atomic_load(&R.a_errors), atomic_load(&R.a_last), strerror(atomic_load(&R.a_last)));
    CHECK(atomic_load(&R.cs_errors) == 0, "delegated cs locking M: %ld calls failed, last %d (%s)",
          (long)atomic_load(&R.cs_errors), atomic_load(&R.cs_last), strerror(atomic_load(&R.cs_last)));
    CHECK_EQ(R.gL.count, want);
    CHECK_EQ(R.gM.count, want);
    CHECK_EQ(R.gL.violations, 0);
    CHECK_EQ(R.gM.violations, 0);
    CHECK_EQ(liblock_destroy(&R.L), 0);
    CHECK_EQ(liblock_destroy(&R.M), 0);
}

/* ---------------------------------------------------------------- cond: cs signals the holder */

#define NW 2 /* waiting threads */

static struct cs_cond {
    liblock_t L;
    liblock_cond_t C;
    long tokens, produced, consumed, target, waits;
    struct sc_guard g;
    atomic_long errors;
    atomic_int last;
    atomic_long pending;
} C;

static void *cond_produce_cs(void *arg)
{
    (void)arg;
    sc_enter(&C.g);
    sc_leave(&C.g);
    if (C.tokens > 0)
        return (void *)1; /* not yet consumed: try again */
    C.tokens++;
    C.produced++;
    int e = (C.produced % 4 == 0) ? liblock_cond_broadcast(&C.C) : liblock_cond_signal(&C.C);
    if (e)
        note_error(&C.errors, &C.last, e);
    return (void *)2;
}

static void *cond_waiter(void *arg)
{
    (void)arg;
    for (;;) {
        int e = liblock_lock(&C.L);
        if (e) {
            note_error(&C.errors, &C.last, e);
            return NULL;
        }
        sc_enter(&C.g);
        sc_leave(&C.g);
        while (C.tokens == 0 && C.consumed < C.target) {
            C.waits++;
            sc_await_pending(&C.pending, 200); /* the producer's request queues on L */
            e = liblock_cond_wait(&C.C, &C.L);
            if (e) {
                note_error(&C.errors, &C.last, e);
                liblock_unlock(&C.L);
                return NULL;
            }
            sc_enter(&C.g);
            sc_leave(&C.g);
        }
        int done = C.consumed >= C.target;
        if (!done) {
            C.tokens--;
            C.consumed++;
            if (C.consumed == C.target)
                liblock_cond_broadcast(&C.C); /* the other waiter may be asleep */
        }
        e = liblock_unlock(&C.L);
        if (e)
            note_error(&C.errors, &C.last, e);
        if (done)
            return NULL;
    }
}

static void *cond_producer(void *arg)
{
    (void)arg;
    long made = 0;
    while (made < C.target) {
        errno = 0;
        atomic_fetch_add(&C.pending, 1);
        void *r = liblock_execute(&C.L, cond_produce_cs, NULL);
        atomic_fetch_sub(&C.pending, 1);
        if (r == (void *)2)
            made++;
        else if (r == (void *)1)
            sched_yield();
        else {
            note_error(&C.errors, &C.last, errno ? errno : -2);
            return NULL;
        }
    }
    return NULL;
}

static void cond_body(const char *algo, void *arg)
{
    int lifo = arg != NULL;
    memset(&C, 0, sizeof C);
    int e = sc_init_progress(&C.L, algo);
    CHECK(e == 0, "init: %s", strerror(e));
    liblock_condattr_t ca;
    liblock_condattr_init(&ca);
    if (lifo)
        liblock_condattr_setfifo(&ca, 0.001);
    int e2 = liblock_cond_init(&C.C, lifo ? &ca : NULL);
    CHECK(e2 == 0, "cond init: %s", strerror(e2));
    if (e || e2)
        return;
    C.target = iters;
    pthread_t w[NW], p;
    for (int i = 0; i < NW; i++)
        pthread_create(&w[i], NULL, cond_waiter, NULL);
    pthread_create(&p, NULL, cond_producer, NULL);
    pthread_join(p, NULL);
    for (int i = 0; i < NW; i++)
        pthread_join(w[i], NULL);
    CHECK(atomic_load(&C.errors) == 0, "%ld calls failed, last %d (%s)", (long)atomic_load(&C.errors),
          atomic_load(&C.last), strerror(atomic_load(&C.last)));
    CHECK_EQ(C.produced, C.target);
    CHECK_EQ(C.consumed, C.target);
    CHECK_EQ(C.tokens, 0);
    CHECK_EQ(C.g.violations, 0);
    CHECK(C.waits > 0, "the waiters never waited (the scenario did not happen)");
    CHECK_EQ(liblock_cond_destroy(&C.C), 0);
    CHECK_EQ(liblock_destroy(&C.L), 0);
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
        /* execute = lock, call, unlock on the caller's thread (ARCHITECTURE.md
         * section 3); what errno holds afterwards is not documented: printed */
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
    const char *const *all = liblock_algorithms();
    int n = 0;
    while (all[n])
        n++;
    for (int i = 0; i < n; i++) {
        const char *a = all[i];
        if (!sc_algo_selected(a))
            continue;
        unsigned p = sc_props(a);
        int deleg = (p & LIBLOCK_PROP_DELEGATES) != 0;
        int cond = (p & LIBLOCK_PROP_COND) != 0;
        printf("== %s (policy %s)\n", a, liblock_wait_name(sc_progress_policy(a)));
        if (sc_scenario_selected("hoh-pthread"))
            sc_run(a, "hoh-pthread", bound, hoh_body, NULL);
        if (sc_scenario_selected("hoh-same"))
            sc_run(a, "hoh-same", bound, hoh_body, (void *)a);
        if (sc_scenario_selected("hoh-other")) {
            /* P: the next algorithm of the catalogue, so every algorithm is
             * somebody's inner lock once. */
            static char other_name[64][64];
            snprintf(other_name[i % 64], sizeof other_name[0], "%s", all[(i + 1) % n]);
            char scen[] = "hoh-other";
            printf("     (%s: inner lock %s)\n", a, other_name[i % 64]);
            sc_run(a, scen, bound, hoh_body, other_name[i % 64]);
        }
        if (sc_scenario_selected("runner-holds"))
            sc_run(a, "runner-holds", bound, runner_holds_body, NULL);
        if (sc_scenario_selected("cond-default")) {
            if (cond)
                sc_run(a, "cond-default", bound, cond_body, NULL);
            else
                sc_not_applicable(a, "cond-default");
        }
        if (sc_scenario_selected("cond-lifo")) {
            if (cond)
                sc_run(a, "cond-lifo", bound, cond_body, (void *)1);
            else
                sc_not_applicable(a, "cond-lifo");
        }
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
    return sc_report("test_delegation");
}
