/*
 * test_delegation - semantics of a delegated critical section
 * (docs/api.md, "Delegated critical sections"): a critical section passed to
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
 *  (what a delegated cs may wait on, and what it sees of its caller's
 *  thread: tests/test_delegation_cs.c)
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
    if (C.waits == 0)
        return (void *)1; /* no waiter has blocked yet: a FIFO lock could otherwise hand every token
                             over before any waiter finds the queue empty, and the scenario not happen */
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
        int cond = (sc_props(a) & LIBLOCK_PROP_COND) != 0;
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
            printf("     (%s: inner lock %s)\n", a, other_name[i % 64]);
            sc_run(a, "hoh-other", bound, hoh_body, other_name[i % 64]);
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
    }
    return sc_report("test_delegation");
}
