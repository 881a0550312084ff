/*
 * test_mixed - every algorithm of the catalogue, with DEFAULT attributes,
 * in the situations ordinary programs create; each
 * (algorithm, scenario) pair in its own child process with a time bound
 * (scenario.h), so a deadlock or a convoy fails that pair and names it:
 *
 *  trylock-mix  6 threads (more than this machine's 2 CPUs) mix trylock,
 *               lock and execute; trylock returns only 0 or EBUSY; exact
 *               count of critical sections on a plain counter, an
 *               "in critical section" flag never seen set on entry.
 *  hoh3         3 threads walk hand-over-hand chains of 3 locks of the same
 *               algorithm (lock L0, lock L1, unlock L0, lock L2, unlock L1,
 *               unlock L2; one thread starts at L1); every call returns 0,
 *               exact counts and exclusion on each lock's data.
 *  exit         a process whose worker threads use a lock while one of them
 *               calls exit(): an atexit handler and a late destructor
 *               (destructor priority 101, run after the library's own) lock
 *               the lock and execute on it; the process must exit with the
 *               status exit() was given, both handlers having succeeded.
 *  fork         workers use the lock, stop between critical sections (the
 *               lock is free and nobody is queued), the main thread forks;
 *               the child uses the lock from its main thread and two new
 *               threads (lock, trylock, execute; exact counts); the parent's
 *               workers resume, exact counts there too.
 *  unlock-try   a partner thread locks and unlocks, then tells the main
 *               thread, which trylocks: every trylock must succeed (the
 *               unlock happened before it and nobody else uses the lock;
 *               POSIX allows EBUSY only for a held lock).  Every 8th round
 *               the partner is a fresh thread that exits after its unlock
 *               and is joined first (a lock whose unlock completes
 *               asynchronously, mp-server, once failed this after a
 *               cancelled condition waiter's unlock under load).
 *  fork-held    the same, but the forking thread holds the lock through
 *               liblock_lock at fork time: the child and the parent each
 *               unlock it (0) and go on using it.
 *
 * What a forked child may do (this test's contract, as for pthreads): only
 * the forking thread exists in the child.  A lock that was free and had no
 * queued waiter at fork time, or that the forking thread held, is usable in
 * the child.  A lock held by, or with a queued request of, another thread at
 * fork time is undefined territory (glibc leaves such a mutex locked for
 * ever), so it is not tested here; the interposer rebuilds locks in the
 * child (docs/interpose.md, "fork"), which test_interpose_fork covers.
 *
 * Usage: test_mixed [ALGORITHM...] [--scenario=a,b]
 * Bound per pair: 15 s (LIBLOCK_TEST_TIMEOUT overrides); iterations per
 * thread LIBLOCK_TEST_ITERS (default 2000); LIBLOCK_TEST_WAIT=POLICY
 * replaces the default policy.
 */
#include "scenario.h"

#include <poll.h>

static long iters;

static void note_error(atomic_long *count, atomic_int *last, int e)
{
    atomic_fetch_add(count, 1);
    atomic_store(last, e);
}

/* ---------------------------------------------------------------- trylock mixed with lock */

#define NMIX 6

static struct mix {
    liblock_t L;
    struct sc_guard g;
    struct sc_gate gate;
    atomic_long done, busy, bad_try, errors;
    atomic_int bad_try_value, last;
} X;

static void *mix_cs(void *arg)
{
    (void)arg;
    sc_enter(&X.g);
    sc_pause(30);
    /* Now and then the holder loses its CPU inside the critical section,
     * as a preempted holder does, so the other threads really contend (on
     * a loaded 2-CPU machine, 6 threads of short sections would otherwise
     * mostly run one after the other). */
    if (X.g.count % 64 == 0)
        sched_yield();
    sc_leave(&X.g);
    return (void *)1;
}

static void *mix_thread(void *arg)
{
    long me = (long)arg;
    sc_gate_wait(&X.gate);
    for (long i = 0; i < iters; i++) {
        int op = (int)((i + me) % 3);
        if (op == 0) {
            int e = liblock_trylock(&X.L);
            if (e == 0) {
                mix_cs(NULL);
                atomic_fetch_add(&X.done, 1);
                if ((e = liblock_unlock(&X.L)) != 0)
                    note_error(&X.errors, &X.last, e);
            } else if (e == EBUSY) {
                atomic_fetch_add(&X.busy, 1);
            } else {
                atomic_fetch_add(&X.bad_try, 1);
                atomic_store(&X.bad_try_value, e);
            }
        } else if (op == 1) {
            int e = liblock_lock(&X.L);
            if (e) {
                note_error(&X.errors, &X.last, e);
                continue;
            }
            mix_cs(NULL);
            atomic_fetch_add(&X.done, 1);
            if ((e = liblock_unlock(&X.L)) != 0)
                note_error(&X.errors, &X.last, e);
        } else {
            errno = 0;
            if (liblock_execute(&X.L, mix_cs, NULL) == (void *)1)
                atomic_fetch_add(&X.done, 1);
            else
                note_error(&X.errors, &X.last, errno ? errno : -2);
        }
        sc_pause(30);
    }
    return NULL;
}

static void trylock_mix_body(const char *algo, void *arg)
{
    (void)arg;
    memset(&X, 0, sizeof X);
    int e = sc_init_default(&X.L, algo);
    CHECK(e == 0, "init: %s", strerror(e));
    if (e)
        return;
    X.gate.n = NMIX;
    pthread_t t[NMIX];
    for (long i = 0; i < NMIX; i++)
        pthread_create(&t[i], NULL, mix_thread, (void *)i);
    for (int i = 0; i < NMIX; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&X.bad_try) == 0, "trylock returned %ld times something else than 0/EBUSY, last %d (%s)",
          (long)atomic_load(&X.bad_try), atomic_load(&X.bad_try_value), strerror(atomic_load(&X.bad_try_value)));
    CHECK(atomic_load(&X.errors) == 0, "%ld calls failed, last %d (%s)", (long)atomic_load(&X.errors),
          atomic_load(&X.last), strerror(atomic_load(&X.last)));
    CHECK_EQ(X.g.count, atomic_load(&X.done));
    CHECK_EQ(X.g.count + atomic_load(&X.busy) + atomic_load(&X.bad_try) + atomic_load(&X.errors), iters * NMIX);
    CHECK_EQ(X.g.violations, 0);
    printf("     %s: %ld of %ld trylocks got EBUSY\n", algo, (long)atomic_load(&X.busy), (iters * NMIX + 2) / 3);
    CHECK_EQ(liblock_destroy(&X.L), 0);
}

/* ---------------------------------------------------------------- unlock, then trylock elsewhere */

static struct unlock_try {
    liblock_t L;
    atomic_int turn;  /* 1: the partner's turn to lock and unlock; 2: done, main's turn; 3: stop */
    atomic_long errors;
    atomic_int last;
} U;

static void wait_turn(int want)
{
    for (unsigned n = 0; atomic_load_explicit(&U.turn, memory_order_acquire) != want &&
                         atomic_load_explicit(&U.turn, memory_order_acquire) != 3;
         n++)
        if (n > 64)
            sched_yield();
}

static void one_pair(void)
{
    int e = liblock_lock(&U.L);
    if (e)
        note_error(&U.errors, &U.last, e);
    else if ((e = liblock_unlock(&U.L)))
        note_error(&U.errors, &U.last, e);
}

static void *ut_partner(void *arg)
{
    (void)arg;
    for (;;) {
        wait_turn(1);
        if (atomic_load(&U.turn) == 3)
            return NULL;
        one_pair();
        atomic_store_explicit(&U.turn, 2, memory_order_release);
    }
}

static void *ut_once(void *arg)
{
    (void)arg;
    one_pair();
    return NULL;
}

static void unlock_try_body(const char *algo, void *arg)
{
    (void)arg;
    memset(&U, 0, sizeof U);
    int e = sc_init_default(&U.L, algo);
    CHECK(e == 0, "init: %s", strerror(e));
    if (e)
        return;
    pthread_t p;
    pthread_create(&p, NULL, ut_partner, NULL);
    long busy = 0, other = 0, rounds = iters / 4 > 0 ? iters / 4 : 1;
    int other_value = 0;
    /* a quarter of the iterations: each round is a strict hand-off between
     * two threads, which on a machine loaded by other processes costs a
     * scheduler round each (rcl confines both to the one client CPU) */
    for (long i = 0; i < rounds; i++) {
        if (i % 8 == 7) {
            pthread_t t;
            pthread_create(&t, NULL, ut_once, NULL);
            pthread_join(t, NULL);
        } else {
            atomic_store_explicit(&U.turn, 1, memory_order_release);
            wait_turn(2);
        }
        e = liblock_trylock(&U.L);
        if (e == 0) {
            if ((e = liblock_unlock(&U.L)))
                note_error(&U.errors, &U.last, e);
        } else if (e == EBUSY) {
            busy++;
        } else {
            other++;
            other_value = e;
        }
    }
    atomic_store_explicit(&U.turn, 3, memory_order_release);
    pthread_join(p, NULL);
    CHECK(busy == 0, "%ld of %ld trylocks after a completed unlock got EBUSY", busy, rounds);
    CHECK(other == 0, "%ld trylocks returned %d (%s)", other, other_value, strerror(other_value));
    CHECK(atomic_load(&U.errors) == 0, "%ld lock/unlock calls failed, last %d (%s)", (long)atomic_load(&U.errors),
          atomic_load(&U.last), strerror(atomic_load(&U.last)));
    CHECK_EQ(liblock_destroy(&U.L), 0);
}

/* ---------------------------------------------------------------- hand over hand, 3 locks */

#define NHOH 3

static struct hoh3 {
    liblock_t L[3];
    struct sc_guard g[3];
    struct sc_gate gate;
    atomic_long errors, chains;
    atomic_int last;
} K;

static int k_call(int e)
{
    if (e)
        note_error(&K.errors, &K.last, e);
    return e;
}

static void *hoh3_thread(void *arg)
{
    long me = (long)arg;
    int first = me == NHOH - 1 ? 1 : 0; /* one thread walks L1 -> L2 only */
    sc_gate_wait(&K.gate);
    for (long i = 0; i < iters; i++) {
        if (k_call(liblock_lock(&K.L[first])))
            return NULL;
        sc_enter(&K.g[first]);
        sc_leave(&K.g[first]);
        for (int j = first + 1; j < 3; j++) {
            if (k_call(liblock_lock(&K.L[j])))
                return NULL;
            if (k_call(liblock_unlock(&K.L[j - 1])))
                return NULL;
            sc_enter(&K.g[j]);
            sc_pause(30);
            sc_leave(&K.g[j]);
        }
        if (k_call(liblock_unlock(&K.L[2])))
            return NULL;
        atomic_fetch_add(&K.chains, 1);
    }
    return NULL;
}

static void hoh3_body(const char *algo, void *arg)
{
    (void)arg;
    memset(&K, 0, sizeof K);
    for (int j = 0; j < 3; j++) {
        int e = sc_init_default(&K.L[j], algo);
        CHECK(e == 0, "init L%d: %s", j, strerror(e));
        if (e)
            return;
    }
    K.gate.n = NHOH;
    pthread_t t[NHOH];
    for (long i = 0; i < NHOH; i++)
        pthread_create(&t[i], NULL, hoh3_thread, (void *)i);
    for (int i = 0; i < NHOH; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&K.errors) == 0, "%ld calls failed, last %d (%s)", (long)atomic_load(&K.errors),
          atomic_load(&K.last), strerror(atomic_load(&K.last)));
    CHECK_EQ(atomic_load(&K.chains), iters * NHOH);
    CHECK_EQ(K.g[0].count, iters * (NHOH - 1));
    CHECK_EQ(K.g[1].count, iters * NHOH);
    CHECK_EQ(K.g[2].count, iters * NHOH);
    for (int j = 0; j < 3; j++) {
        CHECK_EQ(K.g[j].violations, 0);
        CHECK_EQ(liblock_destroy(&K.L[j]), 0);
    }
}

/* ---------------------------------------------------------------- locks during exit */

#define NEXIT 2
#define EXIT_STATUS 42

static liblock_t xl;
static struct sc_guard xg;
static volatile int xl_ready; /* set only in the process that tests exit */
static int xl_fd = -1;        /* pipe to the watching process */
static atomic_long xl_ops;

static void *xl_cs(void *arg)
{
    (void)arg;
    sc_enter(&xg);
    sc_leave(&xg);
    return (void *)1;
}

/* Lock, unlock, execute from an exit-time handler; report `tag` (upper
 * case on failure) to the watcher. */
static void xl_use_at_exit(char tag)
{
    int ok = liblock_lock(&xl) == 0;
    if (ok) {
        xl_cs(NULL);
        ok = liblock_unlock(&xl) == 0;
    }
    ok = ok && liblock_execute(&xl, xl_cs, NULL) == (void *)1;
    char c = ok ? tag : (char)(tag - 'a' + 'A');
    ssize_t r = write(xl_fd, &c, 1);
    (void)r;
}

static void xl_atexit(void)
{
    if (xl_ready)
        xl_use_at_exit('a');
}

__attribute__((destructor(101))) static void xl_late_destructor(void)
{
    if (xl_ready)
        xl_use_at_exit('d');
}

static void *xl_worker(void *arg)
{
    long me = (long)arg;
    for (long i = 0;; i++) {
        if (i % 2 == 0) {
            if (liblock_lock(&xl) == 0) {
                xl_cs(NULL);
                liblock_unlock(&xl);
            }
        } else {
            liblock_execute(&xl, xl_cs, NULL);
        }
        atomic_fetch_add(&xl_ops, 1);
        if (me == 0 && i == iters)
            exit(EXIT_STATUS); /* the others keep using the lock meanwhile */
    }
    return NULL;
}

static void exit_body(const char *algo, void *arg)
{
    (void)arg;
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe: %s", strerror(errno));
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        xl_fd = fds[1];
        if (sc_init_default(&xl, algo) != 0)
            _exit(2);
        atexit(xl_atexit);
        xl_ready = 1;
        pthread_t t[NEXIT];
        for (long i = 0; i < NEXIT; i++)
            pthread_create(&t[i], NULL, xl_worker, (void *)i);
        for (;;)
            pause(); /* the main thread waits; worker 0 calls exit() */
    }
    close(fds[1]);
    CHECK(pid > 0, "fork: %s", strerror(errno));
    if (pid < 0)
        return;
    unsigned bound = sc_bound(15);
    int rc = sc_wait_nested(pid, bound > 3 ? bound - 3 : bound, "exit test process");
    char got[8] = {0};
    struct pollfd pf = {fds[0], POLLIN, 0};
    size_t n = 0;
    while (n < sizeof got - 1 && poll(&pf, 1, 0) == 1) {
        ssize_t r = read(fds[0], got + n, sizeof got - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fds[0]);
    CHECK(rc == EXIT_STATUS, "process exit status %d, expected %d (-1: killed at the bound, >= 128: signal)", rc,
          EXIT_STATUS);
    CHECK(strcmp(got, "ad") == 0,
          "exit handlers reported '%s', expected 'ad' (a: atexit handler, d: late destructor; upper case: a call "
          "failed)",
          got);
}

/* ---------------------------------------------------------------- fork */

#define NFORKW 2

static struct fk {
    liblock_t L;
    struct sc_guard g;
    atomic_int pause_req, paused, stop;
    atomic_long errors, done;
    atomic_int last;
} F;

static void *fk_cs(void *arg)
{
    (void)arg;
    sc_enter(&F.g);
    sc_leave(&F.g);
    return (void *)1;
}

/* One critical section by lock, trylock or execute; returns 1 if it ran. */
static int fk_one(long i)
{
    int e;
    switch (i % 3) {
    case 0:
        if ((e = liblock_lock(&F.L)) != 0)
            break;
        fk_cs(NULL);
        return (e = liblock_unlock(&F.L)) == 0 ? 1 : (note_error(&F.errors, &F.last, e), 1);
    case 1:
        e = liblock_trylock(&F.L);
        if (e == EBUSY)
            return 0;
        if (e)
            break;
        fk_cs(NULL);
        return (e = liblock_unlock(&F.L)) == 0 ? 1 : (note_error(&F.errors, &F.last, e), 1);
    default:
        errno = 0;
        if (liblock_execute(&F.L, fk_cs, NULL) == (void *)1)
            return 1;
        e = errno ? errno : -2;
    }
    note_error(&F.errors, &F.last, e);
    return 0;
}

static void *fk_worker(void *arg)
{
    (void)arg;
    for (long i = 0; !atomic_load(&F.stop); i++) {
        if (atomic_load(&F.pause_req)) {
            atomic_fetch_add(&F.paused, 1);
            while (atomic_load(&F.pause_req))
                sched_yield();
            atomic_fetch_sub(&F.paused, 1);
        }
        if (fk_one(i))
            atomic_fetch_add(&F.done, 1);
    }
    return NULL;
}

static void *fk_child_thread(void *arg)
{
    (void)arg;
    for (long i = 0; i < iters; i++)
        if (fk_one(i))
            atomic_fetch_add(&F.done, 1);
    return NULL;
}

/* In the forked child: only this thread exists. */
static int fk_child(int held)
{
    int bad = 0;
#define FCHK(c)                                                                          \
    do {                                                                                 \
        if (!(c)) {                                                                      \
            fprintf(stderr, "FAIL in the fork child: %s (line %d)\n", #c, __LINE__); \
            bad = 1;                                                                     \
        }                                                                                \
    } while (0)
    long base = F.g.count;
    atomic_store(&F.done, 0);
    atomic_store(&F.errors, 0);
    if (held)
        FCHK(liblock_unlock(&F.L) == 0);
    FCHK(liblock_trylock(&F.L) == 0); /* free, nobody else exists */
    fk_cs(NULL);
    FCHK(liblock_unlock(&F.L) == 0);
    FCHK(liblock_lock(&F.L) == 0);
    fk_cs(NULL);
    FCHK(liblock_unlock(&F.L) == 0);
    FCHK(liblock_execute(&F.L, fk_cs, NULL) == (void *)1);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        FCHK(pthread_create(&t[i], NULL, fk_child_thread, NULL) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    FCHK(atomic_load(&F.errors) == 0);
    FCHK(F.g.count == base + 3 + atomic_load(&F.done));
    FCHK(F.g.violations == 0);
    FCHK(liblock_destroy(&F.L) == 0);
#undef FCHK
    return bad;
}

static void fork_body(const char *algo, void *arg)
{
    int held = arg != NULL;
    memset(&F, 0, sizeof F);
    int e = sc_init_default(&F.L, algo);
    CHECK(e == 0, "init: %s", strerror(e));
    if (e)
        return;
    pthread_t t[NFORKW];
    for (int i = 0; i < NFORKW; i++)
        pthread_create(&t[i], NULL, fk_worker, NULL);
    for (int round = 0; round < 3; round++) {
        while (atomic_load(&F.done) < (round + 1) * iters / 4)
            usleep(1000);
        atomic_store(&F.pause_req, 1);
        while (atomic_load(&F.paused) < NFORKW)
            sched_yield();
        if (held)
            CHECK_EQ(liblock_lock(&F.L), 0);
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0)
            _exit(fk_child(held));
        CHECK(pid > 0, "fork: %s", strerror(errno));
        if (held)
            CHECK_EQ(liblock_unlock(&F.L), 0);
        atomic_store(&F.pause_req, 0);
        if (pid > 0) {
            unsigned bound = sc_bound(15);
            int rc = sc_wait_nested(pid, bound > 3 ? bound - 3 : bound, "fork child");
            CHECK(rc == 0, "fork child (round %d) exit status %d (-1: killed at the bound, >= 128: signal)", round,
                  rc);
        }
    }
    atomic_store(&F.stop, 1);
    for (int i = 0; i < NFORKW; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&F.errors) == 0, "%ld calls failed in the parent, last %d (%s)", (long)atomic_load(&F.errors),
          atomic_load(&F.last), strerror(atomic_load(&F.last)));
    CHECK_EQ(F.g.count, atomic_load(&F.done));
    CHECK_EQ(F.g.violations, 0);
    CHECK_EQ(liblock_destroy(&F.L), 0);
}

/* ---------------------------------------------------------------- driver */

int main(int argc, char **argv)
{
    sc_setup(argc, argv);
    iters = sc_iters(2000);
    unsigned bound = sc_bound(15);
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!sc_algo_selected(*a))
            continue;
        liblock_algorithm_info_t in;
        liblock_algorithm_info(*a, &in);
        printf("== %s (policy %s)\n", *a,
               liblock_wait_name(getenv("LIBLOCK_TEST_WAIT") ? sc_progress_policy(*a) : in.default_policy));
        if (sc_scenario_selected("trylock-mix"))
            sc_run(*a, "trylock-mix", bound, trylock_mix_body, NULL);
        if (sc_scenario_selected("hoh3"))
            sc_run(*a, "hoh3", bound, hoh3_body, NULL);
        if (sc_scenario_selected("unlock-try"))
            sc_run(*a, "unlock-try", bound, unlock_try_body, NULL);
        if (sc_scenario_selected("exit"))
            sc_run(*a, "exit", bound, exit_body, NULL);
        /* rcl x fork once hung: the child's backup thread (then FIFO
         * below the servicing threads) could not run to exit while the
         * parent's server was busy (src/runtime/rcl/pool.c, "backup thread"). */
        if (sc_scenario_selected("fork"))
            sc_run(*a, "fork", bound, fork_body, NULL);
        if (sc_scenario_selected("fork-held"))
            sc_run(*a, "fork-held", bound, fork_body, (void *)1);
    }
    return sc_report("test_mixed");
}
