/*
 * test_lazy - lazy engagement in the interposer (src/shim/): a NORMAL,
 * DEFAULT or ADAPTIVE mutex, whatever its algorithm, starts lazy (a
 * one-word compare-and-swap lock in the program's own pthread_mutex_t, no
 * algorithm state, no thread) and engages its algorithm, for the rest of
 * its life, at the first pthread_mutex_lock that finds it held, its first
 * condition wait, or its first liblock_execute_mutex.  A failed trylock or
 * timedlock does not engage it; LIBLOCK_LAZY=0 engages every such mutex at
 * its first use; RECURSIVE, ERRORCHECK, process-shared and robust mutexes
 * never use lazy mode.  The state is read through the
 * interposer's liblock_interpose_debug_engaged(m): 1 engaged, 0 lazy, -1 no
 * lazy mode for m.
 *
 * Run without arguments (as tests/run.sh does) it is a driver: it runs the
 * child once on glibc alone (no LD_PRELOAD: the semantic expectations below
 * are glibc's, checked against glibc itself; the engagement checks are
 * skipped there), then, for every algorithm of the registry, twice under
 * LD_PRELOAD=<build>/lib/liblock-interpose.so (or LIBLOCK_TEST_INTERPOSER)
 * with LIBLOCK_LOCK=<name> and LIBLOCK_STRICT=1: with LIBLOCK_LAZY unset
 * and with LIBLOCK_LAZY=0; and once with a mixed configuration
 * (LIBLOCK_CONFIG: mcs by default, rcl for the static mutex lz_static);
 * then under the profiler (liblock-profile.so beside the interposer) on mcs
 * and rcl, where no mutex is ever lazy (-1 throughout).
 * Each algorithm runs under its default waiting policy (one that parks
 * unless the default is pure spin: the stress has 8 threads on 2 cores).
 * Names on the command line restrict the algorithms; LIBLOCK_LAZY_SECTIONS
 * ("stress fork") restricts the child's sections.
 *
 * The child's sections (exact results, no timing assertion; "engaged" below
 * is the value expected of the debug function: 0 lazy, 1 engaged, for
 * 1 for "lazy" under LIBLOCK_LAZY=0):
 *  lazy       a static PTHREAD_MUTEX_INITIALIZER mutex (-1 before its first
 *             use), the adaptive static initializer, mutexes initialised
 *             with no attribute, NORMAL, DEFAULT and ADAPTIVE, and a C11
 *             mtx_plain: 10,000 lock/unlock pairs, 1,000 trylock pairs
 *             (with the holder's trylock EBUSY), a timedlock and a clocklock
 *             of a free mutex, a condition signal and broadcast while
 *             holding it: all stay lazy; then (lazy mode) the process
 *             still has exactly one thread (/proc/self/task), which under
 *             rcl means no RCL server was started.  A delegating algorithm
 *             (or the mixed configuration) counts each hold for
 *             liblock_interpose_debug_held.
 *  nofail     another thread holds m lazily: trylock EBUSY, timedlock and
 *             clocklock ETIMEDOUT; m stays lazy.
 *  contention the main thread holds m (initialised, static, adaptive) and
 *             keeps it until a second thread, announced as about to lock,
 *             has engaged it (engaged becomes 1: polled, bounded); that
 *             thread has not returned from lock while m was held, gets m
 *             after the unlock, and m stays engaged after more use.
 *  relock     a NORMAL relock by the holder waits (and engages m) until
 *             another thread unlocks m, then holds it.
 *  stress     4 and 8 threads (more than the cores) increment a counter
 *             under a fresh mutex per round (zeroed memory or initialised,
 *             a few thousand increments each, then destroyed), by lock,
 *             trylock loops, timedlock, with now and then a
 *             pthread_cond_timedwait of 200 us and a broadcast or signal:
 *             the count is exact and no two threads are ever inside at
 *             once, so the lazy->engaged transition races many times.
 *  foreign    unlock by another thread of a lazily held mutex (0, then
 *             free, still lazy); a lazy holder that exited (trylock EBUSY,
 *             unlock 0); a mutex held lazily that a contender engages,
 *             released by the lazy holder's own unlock, by a third thread,
 *             and after the lazy holder exited: the contender gets it.
 *  cond       a pthread_cond_timedwait and a clockwait (timing out alone)
 *             on a lazy mutex engage it and return with it held; a
 *             consumer waiting on a lazy mutex engages it (the main thread
 *             checks after it took m from the waiter), then 1,000 items go
 *             through a one-slot buffer, each received once, in order.
 *  execute    liblock_execute_mutex (the interposer's, through dlsym) on a
 *             lazy mutex of a delegating algorithm engages it (the section
 *             goes to the algorithm); of any other algorithm it is a lock,
 *             the section and an unlock, and the mutex stays lazy; on one
 *             held lazily by another thread it engages it (a delegated
 *             section, or a contended lock) and runs only after the
 *             unlock; a thread using execute and one using
 *             pthread_mutex_lock exclude each other (exact count).
 *  destroy    destroy of a lazily held mutex is EBUSY and leaves it held;
 *             after unlock 0; re-init after destroy is lazy again, also
 *             after an engaged life.
 *  fork       from a thread holding m1 (lazy) and m3 (engaged) while
 *             another thread holds m2 lazily: in the child trylock m1 and
 *             m3 EBUSY, unlock 0, trylock 0; trylock m2 EBUSY (m2 lazy:
 *             it stays locked, as on glibc).
 *  types      RECURSIVE and ERRORCHECK (initialised and static), and
 *             process-shared and robust NORMAL mutexes report -1, before
 *             and after contention, and keep their semantics (recursive
 *             counts, errorcheck EDEADLK/EPERM, EBUSY, exact counters).
 */
#include "harness.h"
#include "interpose_policy.h"

#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <threads.h>

static int scale(int n) { return th_scale_small() ? (n / 10 > 0 ? n / 10 : 1) : n; }

/* ---------------------------------------------------------------- child state */
static long (*eng_fn)(pthread_mutex_t *);
static long (*held_fn)(void);
typedef void *(*exec_fn_t)(pthread_mutex_t *, void *(*)(void *), void *);
static exec_fn_t exec_fn;
static const char *algo = "glibc"; /* LIBLOCK_LOCK, "mixed" or "glibc" */
static int interposed;             /* under the interposer (else glibc alone) */
static int lazy_mode;              /* NORMAL mutexes start lazy here */
static int tracked;                /* holds counted for liblock_interpose_debug_held */
static int delegating;             /* the mutexes of mk() are a delegating algorithm's (execute engages) */
static long w_lazy, w_eng;         /* engaged() expected before / after an engagement */
static const char *volatile section = "start";

/* Public symbol: a site of its own in the mixed configuration (rcl there). */
pthread_mutex_t lz_static = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lz_static2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lz_adaptive_static = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t lz_rec_static = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static pthread_mutex_t lz_ec_static = PTHREAD_ERRORCHECK_MUTEX_INITIALIZER_NP;

static void on_alarm(int sig)
{
    (void)sig;
    const char *parts[] = {"FAIL: test_lazy watchdog expired (deadlock?) in section ", section, " under ", algo, "\n"};
    for (unsigned i = 0; i < sizeof parts / sizeof *parts; i++) {
        ssize_t r = write(2, parts[i], strlen(parts[i]));
        (void)r;
    }
    _exit(3);
}

static long eng(pthread_mutex_t *m) { return eng_fn ? eng_fn(m) : -2; }
static long held(void) { return held_fn ? held_fn() : 0; }

/* engaged(m) as expected; skipped on glibc alone (no debug function) */
#define CHECK_ENG(m, want)                                                                  \
    do {                                                                                    \
        if (eng_fn)                                                                         \
            CHECK_EQ(eng_fn(m), (want));                                                    \
    } while (0)

static void mk(pthread_mutex_t *m, int type)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    if (type >= 0)
        pthread_mutexattr_settype(&a, type);
    CHECK_EQ(pthread_mutex_init(m, type >= 0 ? &a : NULL), 0);
    pthread_mutexattr_destroy(&a);
}

static int task_count(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void wait_flag(atomic_int *f, int v)
{
    while (atomic_load(f) != v)
        usleep(100);
}

/* A thread (tid) has announced that it is about to block in lock(m) (or in
 * an execute on m) while m is held: wait, bounded, until it really waits.
 * Where m engages (lazy mode), until engaged(m) is 1, a check (the lock
 * call that finds m held engages it); elsewhere until the thread sleeps in
 * the kernel, not checked (it only makes the wait likely to have begun). */
static void wait_blocked(pthread_mutex_t *m, pid_t tid)
{
    uint64_t end = th_now_ns() + 10ull * 1000000000ull;
    if (eng_fn && w_eng == 1 && eng_fn(m) == 0) { /* lazy: until it engages (other values: checked by the caller) */
        while (eng_fn(m) == 0 && th_now_ns() < end)
            usleep(200);
        CHECK(eng_fn(m) == 1, "a thread blocked in lock did not engage the mutex in 10 s (engaged %ld)", eng_fn(m));
    }
    end = th_now_ns() + 2ull * 1000000000ull;
    while (th_task_sleeping(tid) == 0 && th_now_ns() < end)
        usleep(200);
}

/* ---- helper threads */
/* Locks m, says so, waits for `go`, then unlocks it (unless keep) and ends;
 * with exit_holding it ends at once holding m. */
struct holder {
    pthread_mutex_t *m;
    int keep, exit_holding;
    atomic_int locked, go;
    int lock_r, unlock_r;
    long held_locked, held_after, eng_locked;
};

static void *holder_main(void *arg)
{
    struct holder *h = arg;
    h->lock_r = pthread_mutex_lock(h->m);
    h->held_locked = held();
    h->eng_locked = eng(h->m);
    atomic_store(&h->locked, 1);
    if (h->exit_holding)
        return NULL;
    wait_flag(&h->go, 1);
    if (!h->keep) {
        h->unlock_r = pthread_mutex_unlock(h->m);
        h->held_after = held();
    }
    return NULL;
}

static void holder_start(struct holder *h, pthread_t *t, pthread_mutex_t *m, int keep, int exit_holding)
{
    memset(h, 0, sizeof *h);
    h->m = m;
    h->keep = keep;
    h->exit_holding = exit_holding;
    CHECK_EQ(pthread_create(t, NULL, holder_main, h), 0);
    wait_flag(&h->locked, 1);
    CHECK_EQ(h->lock_r, 0);
}

/* Announces, locks m (blocking), records, unlocks. */
struct contender {
    pthread_mutex_t *m;
    atomic_int tid, announced, got;
    int lock_r, unlock_r;
    long eng_after, held_in, held_out;
};

static void *contender_main(void *arg)
{
    struct contender *c = arg;
    atomic_store(&c->tid, (int)gettid());
    atomic_store(&c->announced, 1);
    c->lock_r = pthread_mutex_lock(c->m);
    atomic_store(&c->got, 1);
    c->eng_after = eng(c->m);
    c->held_in = held();
    c->unlock_r = pthread_mutex_unlock(c->m);
    c->held_out = held();
    return NULL;
}

static void contender_start(struct contender *c, pthread_t *t, pthread_mutex_t *m)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    CHECK_EQ(pthread_create(t, NULL, contender_main, c), 0);
    wait_flag(&c->announced, 1);
    wait_blocked(m, atomic_load(&c->tid));
    CHECK_EQ(atomic_load(&c->got), 0); /* m is held: it cannot have returned */
}

static void contender_join(struct contender *c, pthread_t t)
{
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(c->lock_r, 0);
    CHECK_EQ(c->unlock_r, 0);
    if (eng_fn)
        CHECK_EQ(c->eng_after, w_eng);
    if (tracked) {
        CHECK(c->held_in >= 1, "contender's held count while holding: %ld", c->held_in);
        CHECK_EQ(c->held_out, c->held_in - 1);
    }
}

enum { OP_TRYLOCK, OP_UNLOCK, OP_LOCK_EXIT };
struct op {
    pthread_mutex_t *m;
    int op, result;
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
    case OP_LOCK_EXIT:
        o->result = pthread_mutex_lock(o->m);
        break;
    }
    return NULL;
}

/* op on m in a new thread: its result */
static int in_thread(pthread_mutex_t *m, int op)
{
    struct op o = {m, op, -1};
    pthread_t t;
    if (pthread_create(&t, NULL, op_main, &o))
        return -2;
    pthread_join(t, NULL);
    return o.result;
}

/* ---------------------------------------------------------------- lazy */
static pthread_cond_t lz_cv = PTHREAD_COND_INITIALIZER;

static void single_thread_use(pthread_mutex_t *m, const char *what, int n)
{
    th_context = what;
    CHECK_EQ(pthread_mutex_lock(m), 0);
    long h1 = held();
    if (tracked)
        CHECK(h1 >= 1, "held count while holding: %ld", h1);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    if (tracked)
        CHECK_EQ(held(), h1 - 1);
    int bad = 0, badheld = 0;
    for (int i = 0; i < n; i++) {
        bad += pthread_mutex_lock(m) != 0;
        if (tracked)
            badheld += held() != h1;
        bad += pthread_mutex_unlock(m) != 0;
    }
    for (int i = 0; i < n / 10; i++) {
        bad += pthread_mutex_trylock(m) != 0;
        if (tracked)
            badheld += held() != h1;
        bad += pthread_mutex_trylock(m) != EBUSY; /* the holder's own try */
        bad += pthread_mutex_unlock(m) != 0;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(badheld, 0);
    struct timespec t;
    ts_after(CLOCK_REALTIME, &t, 10000);
    CHECK_EQ(pthread_mutex_timedlock(m, &t), 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    ts_after(CLOCK_MONOTONIC, &t, 10000);
    CHECK_EQ(pthread_mutex_clocklock(m, CLOCK_MONOTONIC, &t), 0);
    /* signalling is not waiting: no engagement */
    CHECK_EQ(pthread_cond_signal(&lz_cv), 0);
    CHECK_EQ(pthread_cond_broadcast(&lz_cv), 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    if (tracked)
        CHECK_EQ(held(), h1 - 1);
    CHECK_ENG(m, w_lazy);
}

static pthread_mutex_t l_plain, l_normal, l_default, l_adaptive;

static void sec_lazy(void)
{
    int n = scale(10000);
    th_context = "static, before use";
    if (eng_fn)
        CHECK_EQ(eng(&lz_static), -1); /* not set up yet */
    single_thread_use(&lz_static, "static initializer", n);
    single_thread_use(&lz_adaptive_static, "adaptive static initializer", n);
    mk(&l_plain, -1);
    single_thread_use(&l_plain, "initialised (no attribute)", n);
    mk(&l_normal, PTHREAD_MUTEX_NORMAL);
    single_thread_use(&l_normal, "NORMAL", n);
    mk(&l_default, PTHREAD_MUTEX_DEFAULT);
    single_thread_use(&l_default, "DEFAULT", n);
    mk(&l_adaptive, PTHREAD_MUTEX_ADAPTIVE_NP);
    single_thread_use(&l_adaptive, "ADAPTIVE", n);
    th_context = "C11 mtx_plain";
    mtx_t x;
    CHECK_EQ(mtx_init(&x, mtx_plain), thrd_success);
    int bad = 0;
    for (int i = 0; i < n / 10; i++) {
        bad += mtx_lock(&x) != thrd_success;
        bad += mtx_trylock(&x) != thrd_busy;
        bad += mtx_unlock(&x) != thrd_success;
    }
    CHECK_EQ(bad, 0);
    CHECK_ENG((pthread_mutex_t *)&x, w_lazy);
    mtx_destroy(&x);
    th_context = "no thread";
    if (lazy_mode || !interposed)
        CHECK_EQ(task_count(), 1); /* under rcl: no server started */
    CHECK_EQ(pthread_mutex_destroy(&l_plain), 0);
    CHECK_EQ(pthread_mutex_destroy(&l_normal), 0);
    CHECK_EQ(pthread_mutex_destroy(&l_default), 0);
    CHECK_EQ(pthread_mutex_destroy(&l_adaptive), 0);
}

/* ---------------------------------------------------------------- nofail */
static void sec_nofail(void)
{
    th_context = "failed trylock/timedlock";
    pthread_mutex_t m;
    mk(&m, -1);
    struct holder h;
    pthread_t t;
    holder_start(&h, &t, &m, 0, 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY);
    struct timespec ts;
    ts_after(CLOCK_REALTIME, &ts, 5);
    CHECK_EQ(pthread_mutex_timedlock(&m, &ts), ETIMEDOUT);
    ts_after(CLOCK_MONOTONIC, &ts, 5);
    CHECK_EQ(pthread_mutex_clocklock(&m, CLOCK_MONOTONIC, &ts), ETIMEDOUT);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_ENG(&m, w_lazy); /* a failed try does not engage */
    atomic_store(&h.go, 1);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(h.unlock_r, 0);
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ---------------------------------------------------------------- contention */
static void contend_once(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_ENG(m, w_lazy);
    struct contender c;
    pthread_t t;
    contender_start(&c, &t, m); /* returns once engaged (lazy mode) */
    CHECK_ENG(m, w_eng);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    contender_join(&c, t);
    CHECK_EQ(atomic_load(&c.got), 1);
    CHECK_ENG(m, w_eng);
    /* engaged for the rest of its life: more use, alone, does not undo it */
    int bad = 0;
    for (int i = 0; i < scale(1000); i++) {
        bad += pthread_mutex_lock(m) != 0;
        bad += pthread_mutex_unlock(m) != 0;
        bad += pthread_mutex_trylock(m) != 0;
        bad += pthread_mutex_unlock(m) != 0;
    }
    CHECK_EQ(bad, 0);
    CHECK_ENG(m, w_eng);
}

static void sec_contention(void)
{
    pthread_mutex_t m, ma;
    mk(&m, -1);
    contend_once(&m, "contention, initialised");
    contend_once(&lz_static2, "contention, static");
    mk(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
    contend_once(&ma, "contention, adaptive");
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&ma), 0);
}

/* ---------------------------------------------------------------- relock */
struct relocker {
    pthread_mutex_t *m;
    atomic_int tid, first, relocked;
    int r1, r2, r3;
};

static void *relocker_main(void *arg)
{
    struct relocker *r = arg;
    atomic_store(&r->tid, (int)gettid());
    r->r1 = pthread_mutex_lock(r->m);
    atomic_store(&r->first, 1);
    r->r2 = pthread_mutex_lock(r->m); /* deadlocks until another thread unlocks */
    atomic_store(&r->relocked, 1);
    r->r3 = pthread_mutex_unlock(r->m);
    return NULL;
}

static void sec_relock(void)
{
    th_context = "NORMAL relock";
    pthread_mutex_t m;
    mk(&m, PTHREAD_MUTEX_NORMAL);
    struct relocker r = {.m = &m};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, relocker_main, &r), 0);
    wait_flag(&r.first, 1);
    wait_blocked(&m, atomic_load(&r.tid));
    CHECK_EQ(atomic_load(&r.relocked), 0);
    CHECK_ENG(&m, w_eng); /* the relock found it held */
    CHECK_EQ(pthread_mutex_unlock(&m), 0); /* releases the first hold */
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(r.r1, 0);
    CHECK_EQ(r.r2, 0);
    CHECK_EQ(r.r3, 0);
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ---------------------------------------------------------------- stress */
static struct {
    int nthreads, rounds, per_round;
    pthread_barrier_t start, end;
    pthread_mutex_t *m;
    pthread_cond_t *cv;
    volatile long counter;
    atomic_int inside, arrived;
    atomic_long overlaps, errors, busy, waits;
} S;

static inline void cs_enter(void)
{
    if (atomic_fetch_add(&S.inside, 1) != 0)
        atomic_fetch_add(&S.overlaps, 1);
}
static inline void cs_leave(void) { atomic_fetch_sub(&S.inside, 1); }

static void *stress_worker(void *arg)
{
    uint64_t x = 0x9e3779b97f4a7c15ull * ((uintptr_t)arg + 1);
    for (int r = 0; r < S.rounds; r++) {
        pthread_barrier_wait(&S.start);
        pthread_mutex_t *m = S.m;
        pthread_cond_t *cv = S.cv;
        /* start together: the first holds of the lazy mutex meet */
        atomic_fetch_add(&S.arrived, 1);
        while (atomic_load(&S.arrived) < (r + 1) * S.nthreads)
            sched_yield();
        for (int i = 0; i < S.per_round; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            unsigned k = (unsigned)(x % 256);
            int e;
            if (k < 48) {
                while ((e = pthread_mutex_trylock(m)) == EBUSY) {
                    atomic_fetch_add(&S.busy, 1);
                    sched_yield();
                }
            } else if (k < 56) {
                struct timespec t;
                ts_after(CLOCK_REALTIME, &t, 20000);
                e = pthread_mutex_timedlock(m, &t);
            } else {
                e = pthread_mutex_lock(m);
            }
            if (e) {
                atomic_fetch_add(&S.errors, 1);
                continue;
            }
            cs_enter();
            if (k >= 253) { /* a short condition wait: m released and retaken */
                cs_leave();
                struct timespec t = ts_in_ns(200000);
                int w = pthread_cond_timedwait(cv, m, &t);
                if (w != 0 && w != ETIMEDOUT)
                    atomic_fetch_add(&S.errors, 1);
                atomic_fetch_add(&S.waits, 1);
                cs_enter();
            }
            long v = S.counter;
            for (int d = 0; d < 20; d++) /* a critical section long enough to be met held */
                __asm__ volatile("" ::: "memory");
            S.counter = v + 1;
            if (k == 250)
                pthread_cond_broadcast(cv);
            else if (k == 251)
                pthread_cond_signal(cv);
            cs_leave();
            if (pthread_mutex_unlock(m) != 0)
                atomic_fetch_add(&S.errors, 1);
            for (int d = 0; d < 20; d++)
                __asm__ volatile("" ::: "memory");
        }
        pthread_barrier_wait(&S.end);
    }
    return NULL;
}

static int stress_engaged, stress_mutexes;

static void stress(int nthreads, int rounds, int per_round)
{
    char ctx[64];
    snprintf(ctx, sizeof ctx, "stress, %d threads", nthreads);
    th_context = ctx;
    memset((void *)&S, 0, sizeof S);
    S.nthreads = nthreads;
    S.rounds = rounds;
    S.per_round = per_round;
    pthread_barrier_init(&S.start, NULL, (unsigned)nthreads + 1);
    pthread_barrier_init(&S.end, NULL, (unsigned)nthreads + 1);
    pthread_t th[16];
    for (int i = 0; i < nthreads; i++)
        CHECK_EQ(pthread_create(&th[i], NULL, stress_worker, (void *)(uintptr_t)i), 0);
    int bad_state = 0;
    long first_bad = 0;
    for (int r = 0; r < rounds; r++) {
        pthread_mutex_t *m = malloc(sizeof *m);
        pthread_cond_t *cv = malloc(sizeof *cv);
        if (r % 2) { /* zeroed memory: PTHREAD_MUTEX_INITIALIZER, set up at first use (racing) */
            memset(m, 0, sizeof *m);
            memset(cv, 0, sizeof *cv);
        } else {
            mk(m, r % 4 == 0 ? -1 : PTHREAD_MUTEX_NORMAL);
            CHECK_EQ(pthread_cond_init(cv, NULL), 0);
        }
        S.m = m;
        S.cv = cv;
        pthread_barrier_wait(&S.start);
        pthread_barrier_wait(&S.end);
        CHECK_EQ(S.counter, (long)(r + 1) * nthreads * per_round);
        long e = eng(m);
        /* the profiler: -1; LIBLOCK_LAZY=0: engaged from the first use; else either */
        if (eng_fn && ((w_eng == -1 || w_lazy == 1) ? e != w_lazy : e != 0 && e != 1) && !bad_state++)
            first_bad = e;
        stress_engaged += e == 1;
        stress_mutexes++;
        CHECK_EQ(pthread_mutex_destroy(m), 0);
        CHECK_EQ(pthread_cond_destroy(cv), 0);
        free(m);
        free(cv);
    }
    for (int i = 0; i < nthreads; i++)
        CHECK_EQ(pthread_join(th[i], NULL), 0);
    CHECK(bad_state == 0, "%d of %d mutexes in an unexpected state after their round (the first: engaged = %ld, expected %s)",
          bad_state, rounds, first_bad, w_eng == -1 ? "-1" : w_lazy == 1 ? "1" : "0 or 1");
    CHECK_EQ(atomic_load(&S.overlaps), 0);
    CHECK_EQ(atomic_load(&S.errors), 0);
    CHECK_EQ(S.counter, (long)rounds * nthreads * per_round);
    pthread_barrier_destroy(&S.start);
    pthread_barrier_destroy(&S.end);
}

static void sec_stress(void)
{
    stress(4, 64, scale(600));
    stress(8, 64, scale(300));
}

/* ---------------------------------------------------------------- foreign */
static void sec_foreign(void)
{
    pthread_mutex_t m;
    mk(&m, -1);
    th_context = "lazy, unlocked by another thread";
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    long hm = held();
    CHECK_EQ(in_thread(&m, OP_UNLOCK), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), 0); /* free */
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    (void)hm;

    th_context = "lazy, holder exited";
    CHECK_EQ(in_thread(&m, OP_LOCK_EXIT), 0);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    /* engaged while held lazily; released three ways */
    for (int how = 0; how < 3; how++) {
        static const char *const what[] = {"engaged while held, the lazy holder unlocks",
                                           "engaged while held, a third thread unlocks",
                                           "engaged while held, the lazy holder exited"};
        th_context = what[how];
        pthread_mutex_t mm;
        mk(&mm, -1);
        struct holder h;
        pthread_t ht, ct;
        holder_start(&h, &ht, &mm, how == 1, how == 2);
        CHECK_EQ(h.eng_locked, eng_fn ? w_lazy : -2);
        if (how == 2)
            CHECK_EQ(pthread_join(ht, NULL), 0);
        struct contender c;
        contender_start(&c, &ct, &mm);
        CHECK_ENG(&mm, w_eng);
        CHECK_EQ(pthread_mutex_trylock(&mm), EBUSY);
        if (how == 0) {
            atomic_store(&h.go, 1);
            CHECK_EQ(pthread_join(ht, NULL), 0);
            CHECK_EQ(h.unlock_r, 0);
            if (tracked) {
                CHECK(h.held_locked >= 1, "lazy holder's held count: %ld", h.held_locked);
                CHECK_EQ(h.held_after, h.held_locked - 1);
            }
        } else {
            CHECK_EQ(pthread_mutex_unlock(&mm), 0);
        }
        contender_join(&c, ct);
        if (how == 1) {
            atomic_store(&h.go, 1);
            CHECK_EQ(pthread_join(ht, NULL), 0);
        }
        CHECK_ENG(&mm, w_eng);
        CHECK_EQ(pthread_mutex_trylock(&mm), 0);
        CHECK_EQ(in_thread(&mm, OP_TRYLOCK), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(&mm), 0);
        CHECK_EQ(in_thread(&mm, OP_TRYLOCK), 0);
        CHECK_EQ(pthread_mutex_destroy(&mm), 0);
    }
}

/* ---------------------------------------------------------------- cond */
#define PC_ITEMS 1000
static pthread_mutex_t pc_m;
static pthread_cond_t pc_notempty = PTHREAD_COND_INITIALIZER, pc_notfull = PTHREAD_COND_INITIALIZER;
static int pc_full;
static long pc_slot;
static atomic_int pc_waiting;
static long pc_bad, pc_sum;

static void *pc_consumer(void *arg)
{
    (void)arg;
    for (long i = 1; i <= PC_ITEMS; i++) {
        if (pthread_mutex_lock(&pc_m) != 0)
            pc_bad++;
        if (i == 1)
            atomic_store(&pc_waiting, 1); /* under m: the main thread takes m only once we wait */
        while (!pc_full)
            if (pthread_cond_wait(&pc_notempty, &pc_m) != 0)
                pc_bad++;
        pc_bad += pc_slot != i;
        pc_sum += pc_slot;
        pc_full = 0;
        pthread_cond_signal(&pc_notfull);
        if (pthread_mutex_unlock(&pc_m) != 0)
            pc_bad++;
    }
    return NULL;
}

static void sec_cond(void)
{
    pthread_mutex_t m;
    pthread_cond_t cv;
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    struct timespec t;

    th_context = "timedwait engages";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ts_after(CLOCK_REALTIME, &t, 2);
    int r = pthread_cond_timedwait(&cv, &m, &t);
    CHECK(r == ETIMEDOUT || r == 0, "timedwait: %d", r);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY); /* held again */
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), 0);
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "clockwait engages";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ts_after(CLOCK_MONOTONIC, &t, 2);
    r = pthread_cond_clockwait(&cv, &m, CLOCK_MONOTONIC, &t);
    CHECK(r == ETIMEDOUT || r == 0, "clockwait: %d", r);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "wait engages; one-slot buffer";
    mk(&pc_m, -1);
    CHECK_EQ(pthread_mutex_lock(&pc_m), 0);
    CHECK_EQ(pthread_mutex_unlock(&pc_m), 0);
    CHECK_ENG(&pc_m, w_lazy);
    pthread_t c;
    CHECK_EQ(pthread_create(&c, NULL, pc_consumer, NULL), 0);
    wait_flag(&pc_waiting, 1);
    CHECK_EQ(pthread_mutex_lock(&pc_m), 0); /* the consumer released it: it is in its wait */
    CHECK_ENG(&pc_m, w_eng);
    long bad = 0;
    for (long i = 1; i <= PC_ITEMS; i++) {
        if (i > 1)
            bad += pthread_mutex_lock(&pc_m) != 0;
        while (pc_full)
            bad += pthread_cond_wait(&pc_notfull, &pc_m) != 0;
        pc_slot = i;
        pc_full = 1;
        pthread_cond_signal(&pc_notempty);
        bad += pthread_mutex_unlock(&pc_m) != 0;
    }
    CHECK_EQ(pthread_join(c, NULL), 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(pc_bad, 0);
    CHECK_EQ(pc_sum, (long)PC_ITEMS * (PC_ITEMS + 1) / 2);
    CHECK_ENG(&pc_m, w_eng);
    CHECK_EQ(pthread_mutex_destroy(&pc_m), 0);
}

/* ---------------------------------------------------------------- execute */
static volatile long ex_counter;
static atomic_int ex_inside;
static atomic_long ex_overlaps;

static void *ex_cs(void *arg)
{
    if (atomic_fetch_add(&ex_inside, 1) != 0)
        atomic_fetch_add(&ex_overlaps, 1);
    long v = ex_counter;
    __asm__ volatile("" ::: "memory");
    ex_counter = v + 1;
    atomic_fetch_sub(&ex_inside, 1);
    return arg;
}

struct exec_arg {
    pthread_mutex_t *m;
    int n, by_lock;
    atomic_int tid, announced;
    long bad;
};

static void *ex_thread(void *arg)
{
    struct exec_arg *a = arg;
    atomic_store(&a->tid, (int)gettid());
    atomic_store(&a->announced, 1);
    for (int i = 0; i < a->n; i++) {
        if (a->by_lock) {
            if (pthread_mutex_lock(a->m) != 0) {
                a->bad++;
                continue;
            }
            ex_cs(NULL);
            a->bad += pthread_mutex_unlock(a->m) != 0;
        } else {
            a->bad += exec_fn(a->m, ex_cs, a) != a;
        }
    }
    return NULL;
}

static void sec_execute(void)
{
    th_context = "execute engages";
    pthread_mutex_t m;
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ex_counter = 0;
    CHECK(exec_fn(&m, ex_cs, &m) == &m, "execute did not return the section's result");
    CHECK_EQ(ex_counter, 1);
    CHECK_ENG(&m, delegating ? w_eng : w_lazy); /* a delegated section engages; lock, cs, unlock does not */
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "execute on a mutex held lazily";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ex_counter = 0;
    struct exec_arg a = {.m = &m, .n = 1};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, ex_thread, &a), 0);
    wait_flag(&a.announced, 1);
    wait_blocked(&m, atomic_load(&a.tid));
    CHECK_EQ(ex_counter, 0); /* m is held: the section has not run */
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(a.bad, 0);
    CHECK_EQ(ex_counter, 1);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "execute and lock exclude each other";
    mk(&m, -1);
    ex_counter = 0;
    int n = scale(2000);
    struct exec_arg ea = {.m = &m, .n = n}, la = {.m = &m, .n = n, .by_lock = 1};
    pthread_t t1, t2;
    CHECK_EQ(pthread_create(&t1, NULL, ex_thread, &ea), 0);
    CHECK_EQ(pthread_create(&t2, NULL, ex_thread, &la), 0);
    CHECK_EQ(pthread_join(t1, NULL), 0);
    CHECK_EQ(pthread_join(t2, NULL), 0);
    CHECK_EQ(ea.bad, 0);
    CHECK_EQ(la.bad, 0);
    CHECK_EQ(atomic_load(&ex_overlaps), 0);
    CHECK_EQ(ex_counter, 2L * n);
    if (delegating || !eng_fn)
        CHECK_ENG(&m, w_eng);
    else /* lock, cs, unlock: engaged only if the two threads happened to contend */
        CHECK(eng_fn(&m) == w_lazy || eng_fn(&m) == w_eng, "engaged() = %ld", eng_fn(&m));
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ---------------------------------------------------------------- destroy */
static void engage_by_wait(pthread_mutex_t *m)
{
    pthread_cond_t cv;
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    struct timespec t;
    ts_after(CLOCK_REALTIME, &t, 1);
    int r = pthread_cond_timedwait(&cv, m, &t);
    CHECK(r == ETIMEDOUT || r == 0, "timedwait: %d", r);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);
    CHECK_ENG(m, w_eng);
}

static void sec_destroy(void)
{
    th_context = "destroy of a lazily held mutex";
    pthread_mutex_t m;
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), EBUSY);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY); /* still held */
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "re-init after destroy";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    engage_by_wait(&m);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), EBUSY); /* engaged and held */
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy); /* lazy again */
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "re-init of a static mutex after an engaged life";
    pthread_mutex_t *s = &lz_static2; /* engaged by "contention" when it ran; engaged here anyway */
    engage_by_wait(s);
    CHECK_EQ(pthread_mutex_destroy(s), 0);
    mk(s, -1);
    CHECK_EQ(pthread_mutex_lock(s), 0);
    CHECK_ENG(s, w_lazy);
    CHECK_EQ(pthread_mutex_unlock(s), 0);

    th_context = "destroy of a never-used zeroed mutex";
    pthread_mutex_t z = PTHREAD_MUTEX_INITIALIZER;
    CHECK_EQ(pthread_mutex_destroy(&z), 0);
}

/* ---------------------------------------------------------------- fork */
static pthread_mutex_t fk_self, fk_other, fk_eng;
static int fk_rc = -1;

static void *forker(void *arg)
{
    (void)arg;
    CHECK_EQ(pthread_mutex_lock(&fk_self), 0);
    CHECK_EQ(pthread_mutex_lock(&fk_eng), 0);
    long e_self = eng(&fk_self), e_other = eng(&fk_other), e_eng = eng(&fk_eng);
    if (eng_fn) {
        CHECK_EQ(e_self, w_lazy);
        CHECK_EQ(e_other, w_lazy);
        CHECK_EQ(e_eng, w_eng);
    }
    /* lazily held by another thread: stays locked in the child (glibc's
     * behaviour too); an engaged one may be made free there (docs) */
    int other_locked = !interposed || e_other == 0;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        int f0 = th_failures;
        th_context = "fork child";
        CHECK_EQ(pthread_mutex_trylock(&fk_self), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_trylock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_lock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_trylock(&fk_eng), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(&fk_eng), 0);
        CHECK_EQ(pthread_mutex_trylock(&fk_eng), 0);
        CHECK_EQ(pthread_mutex_unlock(&fk_eng), 0);
        if (other_locked)
            CHECK_EQ(pthread_mutex_trylock(&fk_other), EBUSY);
        _exit(th_failures != f0 ? 1 : 0);
    }
    CHECK(pid > 0, "fork: %s", strerror(errno));
    if (pid > 0)
        fk_rc = th_wait_child(pid, 30, "fork child");
    CHECK_EQ(pthread_mutex_unlock(&fk_eng), 0);
    CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
    return NULL;
}

static void sec_fork(void)
{
    th_context = "fork";
    mk(&fk_self, -1);
    mk(&fk_other, -1);
    mk(&fk_eng, -1);
    engage_by_wait(&fk_eng);
    struct holder h;
    pthread_t ht, ft;
    holder_start(&h, &ht, &fk_other, 0, 0);
    CHECK_EQ(pthread_create(&ft, NULL, forker, NULL), 0);
    CHECK_EQ(pthread_join(ft, NULL), 0);
    th_context = "fork";
    CHECK_EQ(fk_rc, 0);
    atomic_store(&h.go, 1);
    CHECK_EQ(pthread_join(ht, NULL), 0);
    CHECK_EQ(h.unlock_r, 0);
    CHECK_EQ(pthread_mutex_trylock(&fk_other), 0);
    CHECK_EQ(pthread_mutex_unlock(&fk_other), 0);
    CHECK_EQ(pthread_mutex_destroy(&fk_self), 0);
    CHECK_EQ(pthread_mutex_destroy(&fk_other), 0);
    CHECK_EQ(pthread_mutex_destroy(&fk_eng), 0);
}

/* ---------------------------------------------------------------- types */
static long ty_counter;
static pthread_mutex_t *ty_m;
static int ty_recursive;

static void *ty_worker(void *arg)
{
    long bad = 0;
    for (int i = 0; i < scale(2000); i++) {
        bad += pthread_mutex_lock(ty_m) != 0;
        if (ty_recursive && (i & 1)) {
            bad += pthread_mutex_lock(ty_m) != 0;
            ty_counter++;
            bad += pthread_mutex_unlock(ty_m) != 0;
        } else {
            ty_counter++;
        }
        bad += pthread_mutex_unlock(ty_m) != 0;
    }
    *(long *)arg = bad;
    return NULL;
}

static void contend_counter(pthread_mutex_t *m, int recursive)
{
    ty_m = m;
    ty_recursive = recursive;
    ty_counter = 0;
    long b1 = -1, b2 = -1;
    pthread_t t1, t2;
    CHECK_EQ(pthread_create(&t1, NULL, ty_worker, &b1), 0);
    CHECK_EQ(pthread_create(&t2, NULL, ty_worker, &b2), 0);
    CHECK_EQ(pthread_join(t1, NULL), 0);
    CHECK_EQ(pthread_join(t2, NULL), 0);
    CHECK_EQ(b1, 0);
    CHECK_EQ(b2, 0);
    CHECK_EQ(ty_counter, 2L * scale(2000));
}

static void check_recursive(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_ENG(m, -1);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_trylock(m), 0);
    CHECK_ENG(m, -1);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(in_thread(m, OP_UNLOCK), EPERM);
    CHECK_EQ(pthread_mutex_destroy(m), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY); /* still held once */
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_mutex_unlock(m), EPERM);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), 0);
    contend_counter(m, 1);
    CHECK_ENG(m, -1);
}

static void check_errorcheck(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_ENG(m, -1);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_EQ(pthread_mutex_lock(m), EDEADLK);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    CHECK_ENG(m, -1);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(in_thread(m, OP_UNLOCK), EPERM);
    CHECK_EQ(pthread_mutex_destroy(m), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_mutex_unlock(m), EPERM);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), 0);
    contend_counter(m, 0);
    CHECK_ENG(m, -1);
}

static void check_glibc_normal(pthread_mutex_t *m, const char *what)
{
    th_context = what;
    CHECK_EQ(pthread_mutex_lock(m), 0);
    CHECK_ENG(m, -1);
    CHECK_EQ(pthread_mutex_trylock(m), EBUSY);
    CHECK_EQ(in_thread(m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    contend_counter(m, 0);
    CHECK_ENG(m, -1);
}

static void sec_types(void)
{
    pthread_mutex_t r, e, ps, rb;
    pthread_mutexattr_t a;
    mk(&r, PTHREAD_MUTEX_RECURSIVE);
    check_recursive(&r, "RECURSIVE");
    check_recursive(&lz_rec_static, "RECURSIVE static initializer");
    mk(&e, PTHREAD_MUTEX_ERRORCHECK);
    check_errorcheck(&e, "ERRORCHECK");
    check_errorcheck(&lz_ec_static, "ERRORCHECK static initializer");
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    CHECK_EQ(pthread_mutex_init(&ps, &a), 0);
    pthread_mutexattr_destroy(&a);
    check_glibc_normal(&ps, "process-shared NORMAL");
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    CHECK_EQ(pthread_mutex_init(&rb, &a), 0);
    pthread_mutexattr_destroy(&a);
    check_glibc_normal(&rb, "robust NORMAL");
    CHECK_EQ(pthread_mutex_destroy(&r), 0);
    CHECK_EQ(pthread_mutex_destroy(&e), 0);
    CHECK_EQ(pthread_mutex_destroy(&ps), 0);
    CHECK_EQ(pthread_mutex_destroy(&rb), 0);
}

/* ---------------------------------------------------------------- child main */
static int want_section(const char *name)
{
    const char *only = getenv("LIBLOCK_LAZY_SECTIONS");
    if (only && *only && !th_list_has(only, name))
        return 0;
    section = name;
    return 1;
}

static int child(const char *mode)
{
    signal(SIGALRM, on_alarm);
    const char *to = getenv("LIBLOCK_TEST_TIMEOUT");
    alarm(to && atoi(to) > 0 ? (unsigned)atoi(to) : 30); /* a child takes about 0.5 s */
    uint64_t t0 = th_now_ns();
    interposed = strcmp(mode, "glibc") != 0;
    int mixed = strcmp(mode, "mixed") == 0;
    int profiler = strcmp(mode, "profile") == 0; /* liblock-profile.so: never lazy */
    if (interposed)
        algo = mixed ? "mixed" : getenv("LIBLOCK_LOCK");
    if (!algo)
        algo = "?";
    const char *lz = getenv("LIBLOCK_LAZY");
    int lazy_off = lz && strcmp(lz, "0") == 0;
    th_context = "set-up";
    if (interposed) {
        eng_fn = (long (*)(pthread_mutex_t *))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_engaged");
        CHECK(eng_fn != NULL, "liblock_interpose_debug_engaged not exported by the %s", profiler ? "profiler" : "interposer");
        held_fn = (long (*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_held");
        CHECK(held_fn != NULL, "liblock_interpose_debug_held not exported");
        /* The interposer's liblock_execute_mutex: this program links
         * liblock.a, whose weak glibc version it binds at link time. */
        exec_fn = (exec_fn_t)dlsym(RTLD_NEXT, "liblock_execute_mutex");
        CHECK(exec_fn != NULL, "liblock_execute_mutex not exported by the interposer");
        Dl_info de, dx;
        if (exec_fn && held_fn && dladdr((void *)exec_fn, &dx) && dladdr((void *)held_fn, &de))
            CHECK(strcmp(dx.dli_fname, de.dli_fname) == 0, "liblock_execute_mutex is %s's, not the interposer's (%s)",
                  dx.dli_fname, de.dli_fname);
        if (!exec_fn)
            exec_fn = liblock_execute_mutex;
        liblock_algorithm_info_t in;
        delegating = !mixed && liblock_algorithm_info(algo, &in) == 0 && (in.properties & LIBLOCK_PROP_DELEGATES);
        tracked = mixed || delegating;
        if (!held_fn || profiler)
            tracked = 0;
        lazy_mode = !lazy_off && !profiler;
        w_eng = profiler ? -1 : 1;
        w_lazy = profiler ? -1 : lazy_off ? 1 : 0;
    } else {
        exec_fn = liblock_execute_mutex; /* glibc's lock, cs, unlock */
    }
    /* "lazy" first: no thread may have been created before its count */
    if (want_section("lazy"))
        sec_lazy();
    if (want_section("nofail"))
        sec_nofail();
    if (want_section("contention"))
        sec_contention();
    if (want_section("relock"))
        sec_relock();
    if (want_section("foreign"))
        sec_foreign();
    if (want_section("cond"))
        sec_cond();
    if (want_section("execute"))
        sec_execute();
    if (want_section("destroy"))
        sec_destroy();
    if (want_section("fork"))
        sec_fork();
    if (want_section("types"))
        sec_types();
    if (want_section("stress"))
        sec_stress();
    section = "end";
    char name[128];
    snprintf(name, sizeof name, "  %-15s %-14s", algo,
             !interposed ? "(glibc alone)" : profiler ? "(profiler)" : lazy_off ? "LIBLOCK_LAZY=0" : "lazy");
    printf("%s %s: %d checks, %d failed; stress: %d of %d mutexes engaged (%.1f s)\n", name,
           th_failures ? "FAILED" : "ok", th_checks, th_failures, stress_engaged, stress_mutexes,
           (th_now_ns() - t0) / 1e9);
    fflush(stdout);
    return th_failures ? 1 : 0;
}

/* ---------------------------------------------------------------- driver */
/* The algorithm's default policy, unless it is pure spin (8 threads on 2
 * cores would crawl): then the one test_interpose picks (ip_policy). */
static const char *pick_policy(const char *name)
{
    liblock_algorithm_info_t in;
    if (liblock_algorithm_info(name, &in) || in.default_policy != LIBLOCK_WAIT_SPIN)
        return NULL;
    return ip_policy(name);
}

static char prof_out[128];

/* Remove directory dir and the files in it (the profiler's reports). */
static void remove_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d) {
        char path[512];
        for (struct dirent *e; (e = readdir(d));) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

static int run_child(const char *prog, const char *lib, const char *mode, const char *algo_name, const char *config,
                     int lazy_off)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        th_unset_interposer_env();
        unsetenv("LIBLOCK_CONFIG");
        unsetenv("LIBLOCK_LAZY");
        if (lib) {
            setenv("LD_PRELOAD", lib, 1);
            setenv("LIBLOCK_STRICT", "1", 1);
            if (algo_name)
                setenv("LIBLOCK_LOCK", algo_name, 1);
            if (config)
                setenv("LIBLOCK_CONFIG", config, 1);
            const char *policy = algo_name ? pick_policy(algo_name) : NULL;
            if (policy)
                setenv("LIBLOCK_WAIT", policy, 1);
            if (lazy_off)
                setenv("LIBLOCK_LAZY", "0", 1);
            if (strcmp(mode, "profile") == 0)
                setenv("LIBLOCK_PROFILE_OUT", prof_out, 1);
        } else {
            unsetenv("LD_PRELOAD");
        }
        setenv("LIBLOCK_LAZY_CHILD", mode, 1);
        execl(prog, prog, (char *)NULL);
        _exit(126);
    }
    char what[256];
    snprintf(what, sizeof what, "%s under %s%s", prog, algo_name ? algo_name : mode, lazy_off ? " LIBLOCK_LAZY=0" : "");
    return th_wait_child(pid, 45, what);
}

int main(int argc, char **argv)
{
    const char *mode = getenv("LIBLOCK_LAZY_CHILD");
    if (mode)
        return child(mode);
    th_watchdog(600);
    uint64_t t0 = th_now_ns();
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report("test_lazy");
    int rc = run_child(argv[0], NULL, "glibc", NULL, NULL, 0);
    CHECK(rc == 0, "on glibc alone: exit %d (the test's expectations are not glibc's)", rc);
    int n = 0;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        n++;
        rc = run_child(argv[0], real, "algo", *a, NULL, 0);
        CHECK(rc == 0, "under %s: exit %d", *a, rc);
        rc = run_child(argv[0], real, "algo", *a, NULL, 1);
        CHECK(rc == 0, "under %s with LIBLOCK_LAZY=0: exit %d", *a, rc);
    }
    CHECK(n > 0 || argc > 1, "no algorithm in the registry");
    if (argc < 2 || th_selected(argc, argv, "mixed")) {
        char cfgpath[] = "/tmp/test_lazy.XXXXXX";
        int fd = mkstemp(cfgpath);
        CHECK(fd >= 0, "mkstemp");
        if (fd >= 0) {
            static const char text[] = "default mcs\nsite lz_static rcl\n";
            CHECK_EQ(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
            close(fd);
            rc = run_child(argv[0], real, "mixed", NULL, cfgpath, 0);
            CHECK(rc == 0, "under the mixed configuration (mcs, rcl for lz_static): exit %d", rc);
            unlink(cfgpath);
        }
    }
    /* the profiler, beside the interposer: never lazy */
    char prof[4200];
    snprintf(prof, sizeof prof, "%s", real);
    char *slash = strrchr(prof, '/');
    snprintf(slash ? slash + 1 : prof, sizeof prof - (size_t)(slash ? slash + 1 - prof : 0), "liblock-profile.so");
    char prof_dir[] = "/tmp/test_lazy.XXXXXX"; /* the reports (a forked child writes one of its own) */
    CHECK(mkdtemp(prof_dir) != NULL, "mkdtemp: %s", strerror(errno));
    snprintf(prof_out, sizeof prof_out, "%s/profile.json", prof_dir);
    static const char *const prof_algos[] = {"mcs", "rcl"};
    for (size_t i = 0; i < sizeof prof_algos / sizeof *prof_algos; i++) {
        if (!th_selected(argc, argv, prof_algos[i]))
            continue;
        if (access(prof, R_OK) != 0) {
            th_skip("no profiler at %s", prof);
            break;
        }
        rc = run_child(argv[0], prof, "profile", prof_algos[i], NULL, 0);
        CHECK(rc == 0, "under the profiler on %s: exit %d", prof_algos[i], rc);
    }
    remove_dir(prof_dir);
    free(real);
    printf("  total %.1f s\n", (th_now_ns() - t0) / 1e9);
    return th_report("test_lazy");
}
