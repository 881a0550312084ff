/*
 * test_mutex_types - pthread mutex types under the interposer behave as
 * glibc's, for every algorithm of the registry.
 *
 * Run without arguments (as tests/run.sh does) it is a driver: it first runs
 * each scenario on glibc alone (no LD_PRELOAD: the expectations below are
 * glibc's behaviour, checked against glibc itself), then, for every
 * algorithm, with LD_PRELOAD=<build>/lib/liblock-interpose.so (or
 * LIBLOCK_TEST_INTERPOSER) and LIBLOCK_LOCK=<name>, each child process
 * bounded by a watchdog.  Names on the command line restrict the algorithms.
 *
 * Scenario "types" (exact results, no timing):
 *  - a NORMAL, DEFAULT, static (PTHREAD_MUTEX_INITIALIZER) or ADAPTIVE mutex
 *    unlocked by a thread that did not lock it is released (0), and another
 *    thread can then take it: the binary-semaphore pattern, also as a
 *    producer/consumer pair of mutexes handed back and forth HANDOFFS times
 *    with every value received exactly once;
 *  - its owner relocking it waits in the lock until another thread unlocks
 *    it, then holds it (0); trylock by the owner is EBUSY;
 *  - a thread exits holding it (the library may print "exited holding"):
 *    another thread's unlock succeeds and a lock after that succeeds; with a
 *    thread already waiting when the owner exits, that unlock hands the lock
 *    to the waiter;
 *  - ERRORCHECK: relock EDEADLK, trylock by the owner EBUSY, unlock by a
 *    non-owner or of an unlocked mutex EPERM; RECURSIVE: relock counts,
 *    unlock by a non-owner EPERM, free again after the last unlock.
 * Delegating algorithms run "types" once more with the spin policy.
 * Scenario "relock" (deadlock): four threads each lock a NORMAL, a DEFAULT,
 * a static and an ADAPTIVE mutex and relock it.  The relock must never
 * return: the main thread waits RELOCK_OBSERVE_MS and checks that none of
 * them has returned, then ends the process with _exit(0).  (A blocked
 * thread can only be observed as not yet returned; the check cannot fail
 * when the relock really blocks, however slow the machine.)
 */
#include "harness.h"

#include <stdatomic.h>
#include <stdint.h>

#define HANDOFFS 2000
#define RELOCK_OBSERVE_MS 300

/* ---------------------------------------------------------------- driver */
static int run_child(const char *prog, const char *lib, const char *algo, const char *policy, const char *scenario)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (lib) {
            setenv("LD_PRELOAD", lib, 1);
            setenv("LIBLOCK_LOCK", algo, 1);
            setenv("LIBLOCK_STRICT", "1", 1);
            if (policy)
                setenv("LIBLOCK_WAIT", policy, 1);
            else
                unsetenv("LIBLOCK_WAIT");
        } else {
            unsetenv("LD_PRELOAD");
            unsetenv("LIBLOCK_LOCK");
        }
        setenv("LIBLOCK_MUTEX_TYPES_CHILD", scenario, 1);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    char what[256];
    snprintf(what, sizeof what, "%s %s under %s", prog, scenario, algo);
    return th_wait_child(pid, 60, what);
}

static int driver(int argc, char **argv)
{
    static const char *const scenarios[] = {"types", "relock"};
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report("test_mutex_types");
    for (size_t s = 0; s < 2; s++) {
        int rc = run_child(argv[0], NULL, "glibc", NULL, scenarios[s]);
        CHECK(rc == 0, "%s on glibc alone: exit %d (the test's expectations are not glibc's)", scenarios[s], rc);
    }
    printf("  %-16s %s\n", "glibc", th_failures ? "FAILED" : "ok");
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        uint64_t t0 = th_now_ns();
        int rc[3] = {0, 0, 0};
        for (size_t s = 0; s < 2; s++) {
            rc[s] = run_child(argv[0], real, *a, NULL, scenarios[s]);
            CHECK(rc[s] == 0, "%s under %s: exit %d", scenarios[s], *a, rc[s]);
        }
        /* Delegating algorithms take other paths under the spin policy
         * (mp-server: requests to its server; rcl, combining locks: no
         * sleeping): the types once more with it. */
        liblock_algorithm_info_t in;
        int spin = liblock_algorithm_info(*a, &in) == 0 && (in.properties & LIBLOCK_PROP_DELEGATES) &&
                   (in.policies & (1u << LIBLOCK_WAIT_SPIN)) && in.default_policy != LIBLOCK_WAIT_SPIN;
        if (spin) {
            rc[2] = run_child(argv[0], real, *a, "spin", "types");
            CHECK(rc[2] == 0, "types under %s with the spin policy: exit %d", *a, rc[2]);
        }
        printf("  %-16s types %s, relock %s%s%s (%.1f s)\n", *a, rc[0] == 0 ? "ok" : "FAILED",
               rc[1] == 0 ? "ok" : "FAILED", spin ? ", types with spin " : "", spin ? (rc[2] == 0 ? "ok" : "FAILED") : "",
               (th_now_ns() - t0) / 1e9);
        fflush(stdout);
    }
    free(real);
    return th_report("test_mutex_types");
}

/* ---------------------------------------------------------------- helpers */
static void mk(pthread_mutex_t *m, int type)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, type);
    int r = pthread_mutex_init(m, &a);
    CHECK_EQ(r, 0);
    pthread_mutexattr_destroy(&a);
}

enum { OP_TRYLOCK, OP_UNLOCK, OP_LOCK, OP_LOCK_EXIT };

struct op {
    pthread_mutex_t *m;
    int op;
    int result;
};

static void *op_main(void *arg)
{
    struct op *o = arg;
    switch (o->op) {
    case OP_TRYLOCK:
        o->result = pthread_mutex_trylock(o->m);
        if (o->result == 0)
            pthread_mutex_unlock(o->m);
        break;
    case OP_UNLOCK:
        o->result = pthread_mutex_unlock(o->m);
        break;
    case OP_LOCK: /* lock, then unlock */
        o->result = pthread_mutex_lock(o->m);
        if (o->result == 0)
            pthread_mutex_unlock(o->m);
        break;
    case OP_LOCK_EXIT: /* lock and exit holding it */
        o->result = pthread_mutex_lock(o->m);
        break;
    }
    return NULL;
}

/* Run op on m in a new thread, wait for it: its result. */
static int in_thread(pthread_mutex_t *m, int op)
{
    struct op o = {m, op, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, op_main, &o))
        return -2;
    pthread_join(t, NULL);
    return o.result;
}

/* ---------------------------------------------------------------- scenario: types */
/* A thread locks m, tells the main thread, and waits (holding m) until told
 * to end, without unlocking. */
struct holder {
    pthread_mutex_t *m;
    atomic_int locked, go;
    int result;
};

static void *holder_main(void *arg)
{
    struct holder *h = arg;
    h->result = pthread_mutex_lock(h->m);
    atomic_store(&h->locked, 1);
    while (!atomic_load(&h->go))
        usleep(1000);
    return NULL;
}

/* Binary semaphores: `full` starts locked (by the main thread), `empty`
 * unlocked.  The producer takes empty, writes, releases full; the consumer
 * takes full, reads, releases empty.  Every unlock is by the thread that
 * did not lock. */
static pthread_mutex_t *pc_full, *pc_empty;
static volatile long pc_slot;
static long pc_sum, pc_count;

static void *producer(void *arg)
{
    (void)arg;
    for (long i = 1; i <= HANDOFFS; i++) {
        if (pthread_mutex_lock(pc_empty) != 0)
            return (void *)1;
        pc_slot = i;
        if (pthread_mutex_unlock(pc_full) != 0)
            return (void *)2;
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (long i = 1; i <= HANDOFFS; i++) {
        if (pthread_mutex_lock(pc_full) != 0)
            return (void *)1;
        pc_sum += pc_slot;
        pc_count++;
        if (pthread_mutex_unlock(pc_empty) != 0)
            return (void *)2;
    }
    return NULL;
}

/* A thread that unlocks m once the main thread says it is about to relock. */
struct releaser {
    pthread_mutex_t *m;
    atomic_int go;
    int result;
};

static void *releaser_main(void *arg)
{
    struct releaser *r = arg;
    while (!atomic_load(&r->go))
        usleep(100);
    usleep(20000); /* usually after the relock has started to wait; either order is correct */
    r->result = pthread_mutex_unlock(r->m);
    return NULL;
}

static void semaphore_checks(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    /* foreign unlock while the owner is alive, then another thread takes it */
    struct holder h = {.m = m};
    pthread_t t;
    pthread_create(&t, NULL, holder_main, &h);
    while (!atomic_load(&h.locked))
        usleep(100);
    CHECK_EQ(h.result, 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);  /* main did not lock it */
    CHECK_EQ(in_thread(m, OP_TRYLOCK), 0); /* released: a third thread takes it */
    atomic_store(&h.go, 1);
    pthread_join(t, NULL);

    /* owner relock waits until another thread unlocks it */
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    struct releaser r = {.m = m};
    pthread_create(&t, NULL, releaser_main, &r);
    atomic_store(&r.go, 1);
    CHECK_EQ(pthread_mutex_lock(m), 0); /* returns once the other thread unlocked it */
    pthread_join(t, NULL);
    CHECK_EQ(r.result, 0);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY); /* held again, by us */
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), 0);

    /* owner exits holding it; another thread unlocks, then locks */
    CHECK_EQ(in_thread(m, OP_LOCK_EXIT), 0);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(in_thread(m, OP_LOCK_EXIT), 0);
    CHECK_EQ(in_thread(m, OP_UNLOCK), 0); /* a third thread's unlock */
    CHECK_EQ(in_thread(m, OP_LOCK), 0);

    /* owner exits holding it with a thread already waiting: the unlock
     * hands the lock to the waiter */
    CHECK_EQ(pthread_mutex_lock(m), 0);
    struct op w = {m, OP_LOCK, -1};
    pthread_t wt;
    pthread_create(&wt, NULL, op_main, &w);
    usleep(20000); /* usually queued by now; either order is correct */
    CHECK_EQ(in_thread(m, OP_UNLOCK), 0);
    CHECK_EQ(th_join_by(wt, th_now_ns() + 20000000000ull), 0);
    CHECK_EQ(w.result, 0);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), 0);
}

static void handoff_checks(pthread_mutex_t *full, pthread_mutex_t *empty, const char *what)
{
    th_context = what;
    pc_full = full;
    pc_empty = empty;
    pc_sum = pc_count = 0;
    CHECK_EQ(pthread_mutex_lock(full), 0);
    pthread_t p, c;
    void *rp, *rc;
    pthread_create(&c, NULL, consumer, NULL);
    pthread_create(&p, NULL, producer, NULL);
    pthread_join(p, &rp);
    pthread_join(c, &rc);
    CHECK(rp == NULL && rc == NULL, "producer %p consumer %p", rp, rc);
    CHECK_EQ(pc_count, HANDOFFS);
    CHECK_EQ(pc_sum, (long)HANDOFFS * (HANDOFFS + 1) / 2);
    /* the consumer's last lock of full is never unlocked (full is held,
     * by a thread that has exited); its last unlock of empty freed it */
    CHECK_EQ(in_thread(empty, OP_TRYLOCK), 0);
    CHECK_EQ(in_thread(full, OP_TRYLOCK), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(full), 0);
}

static pthread_mutex_t st_a = PTHREAD_MUTEX_INITIALIZER, st_b = PTHREAD_MUTEX_INITIALIZER;

static void typed_checks(void)
{
    pthread_mutex_t ec, rec;
    mk(&ec, PTHREAD_MUTEX_ERRORCHECK);
    mk(&rec, PTHREAD_MUTEX_RECURSIVE);
    th_context = "errorcheck";
    CHECK_EQ(pthread_mutex_unlock(&ec), EPERM); /* unlocked */
    CHECK_EQ(pthread_mutex_lock(&ec), 0);
    CHECK_EQ(pthread_mutex_lock(&ec), EDEADLK);
    CHECK_EQ(pthread_mutex_trylock(&ec), EBUSY);
    CHECK_EQ(in_thread(&ec, OP_UNLOCK), EPERM);
    CHECK_EQ(in_thread(&ec, OP_TRYLOCK), EBUSY); /* still held */
    CHECK_EQ(pthread_mutex_unlock(&ec), 0);
    CHECK_EQ(pthread_mutex_unlock(&ec), EPERM);
    CHECK_EQ(in_thread(&ec, OP_LOCK_EXIT), 0);
    CHECK_EQ(pthread_mutex_unlock(&ec), EPERM); /* its owner exited: still not ours */
    th_context = "recursive";
    CHECK_EQ(pthread_mutex_unlock(&rec), EPERM);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_mutex_lock(&rec), 0);
    CHECK_EQ(pthread_mutex_trylock(&rec), 0);
    CHECK_EQ(in_thread(&rec, OP_UNLOCK), EPERM);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(pthread_mutex_unlock(&rec), 0);
        CHECK_EQ(in_thread(&rec, OP_TRYLOCK), EBUSY);
    }
    CHECK_EQ(pthread_mutex_unlock(&rec), 0);
    CHECK_EQ(in_thread(&rec, OP_TRYLOCK), 0);
    CHECK_EQ(pthread_mutex_unlock(&rec), EPERM);
    CHECK_EQ(pthread_mutex_destroy(&rec), 0);
}

static int scenario_types(void)
{
    static pthread_mutex_t st = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_t n, d, ad, n2, d2;
    mk(&n, PTHREAD_MUTEX_NORMAL);
    mk(&d, PTHREAD_MUTEX_DEFAULT);
    mk(&ad, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&n2, NULL);
    mk(&d2, PTHREAD_MUTEX_DEFAULT);
    semaphore_checks(&st, "static");
    semaphore_checks(&n, "normal");
    semaphore_checks(&d, "default");
    semaphore_checks(&ad, "adaptive");
    handoff_checks(&st_a, &st_b, "handoff static");
    handoff_checks(&n2, &d2, "handoff init");
    typed_checks();
    return th_report("test_mutex_types types");
}

/* ---------------------------------------------------------------- scenario: relock */
struct relocker {
    pthread_mutex_t *m;
    atomic_int locked, returned;
    int first;
};

static void *relocker_main(void *arg)
{
    struct relocker *r = arg;
    r->first = pthread_mutex_lock(r->m);
    atomic_store(&r->locked, 1);
    pthread_mutex_lock(r->m); /* must never return */
    atomic_store(&r->returned, 1);
    return NULL;
}

static int scenario_relock(void)
{
    static pthread_mutex_t st = PTHREAD_MUTEX_INITIALIZER;
    static pthread_mutex_t n, d, ad;
    mk(&n, PTHREAD_MUTEX_NORMAL);
    mk(&d, PTHREAD_MUTEX_DEFAULT);
    mk(&ad, PTHREAD_MUTEX_ADAPTIVE_NP);
    static struct relocker r[4];
    pthread_mutex_t *ms[4] = {&n, &d, &st, &ad};
    static const char *const names[4] = {"normal", "default", "static", "adaptive"};
    pthread_t t[4];
    for (int i = 0; i < 4; i++) {
        r[i].m = ms[i];
        pthread_create(&t[i], NULL, relocker_main, &r[i]);
    }
    for (int i = 0; i < 4; i++)
        while (!atomic_load(&r[i].locked))
            usleep(1000);
    /* wait RELOCK_OBSERVE_MS, leaving early if a relock returned */
    int any = 0;
    for (int ms = 0; ms < RELOCK_OBSERVE_MS && !any; ms++) {
        usleep(1000);
        for (int i = 0; i < 4; i++)
            any |= atomic_load(&r[i].returned);
    }
    for (int i = 0; i < 4; i++) {
        th_context = names[i];
        CHECK_EQ(r[i].first, 0);
        CHECK(!atomic_load(&r[i].returned), "the owner's relock of a %s mutex returned instead of deadlocking",
              names[i]);
    }
    int rc = th_report("test_mutex_types relock");
    fflush(stdout);
    _exit(rc); /* the relocking threads stay blocked for ever */
}

int main(int argc, char **argv)
{
    const char *child = getenv("LIBLOCK_MUTEX_TYPES_CHILD");
    if (!child)
        return driver(argc, argv);
    th_watchdog(40);
    if (strcmp(child, "types") == 0)
        return scenario_types();
    if (strcmp(child, "relock") == 0)
        return scenario_relock();
    fprintf(stderr, "unknown scenario %s\n", child);
    return 2;
}
