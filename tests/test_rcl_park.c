/*
 * test_rcl_park - RCL client parking, lazy server start, colocated clients
 * and fork (docs/rcl.md "Waiting policies", "Colocated clients", "fork").
 *
 *   lazy     liblock_init starts no server (the process still has one
 *            task); the first execute does.
 *   race     park/unpark races: 8 threads, policies park and
 *            spin-then-park with a 0 ns spin budget (LIBLOCK_SPIN_NS=0), CSs
 *            from empty to a few microseconds (so replies land before,
 *            during and after a client parks), execute mixed with
 *            lock/unlock (LOCK requests parked while the lock is held) and
 *            trylock: exact counts, no overlap; a lost wake-up hangs a
 *            client and the watchdog fails the test.
 *   direct   direct lock/unlock (direct.c; LIBLOCK_RCL_DIRECT=1, as under
 *            the interposer): 16 threads lock/unlock one lock
 *            (park, spin-then-park, spin), alone and with 4 threads doing
 *            execute on it: exact counts, no overlap, no lost wake-up
 *            (watchdog); an uncontended pair sends no request; an execute
 *            skipped while a client holds the lock for longer than the
 *            idle time-out completes after the unlock (which wakes the
 *            parked server), and the lock is then taken directly again;
 *            an API lock without LIBLOCK_RCL_DIRECT still sends requests.
 *   coloc    a thread confined to the server's CPU and one on another CPU
 *            use one lock (execute and lock/unlock): exact counts.
 *   deleg    delegation-semantics scenarios for a delegated CS: hand-over-hand (A:
 *            lock L, lock P, unlock L, unlock P; B: execute(L, cs) where cs
 *            locks P) with P a pthread mutex and with P an mcs liblock
 *            lock; A holds M then L while B's CS locks M; a CS signals a
 *            condition variable (FIFO and mostly-LIFO) that a thread
 *            holding L through liblock_lock waits on.  Exact counts, no
 *            deadlock (watchdog).
 *   fork     fork while the forking thread holds the lock: the child has
 *            no server thread until it uses RCL; the hold is still the
 *            forking thread's (its unlock succeeds); then the child's
 *            server starts (same mode as the parent's) and serves it while
 *            the parent keeps its own server busy, and the child exits 0;
 *            the parent's server is unaffected.
 * No timing is asserted.
 * usage: test_rcl_park [SECTION...]   (default: all; lazy must come first)
 */
#include "harness.h"

#include <dirent.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/wait.h>

static int tasks(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}

/* what one lock protects */
struct guarded {
    long count;
    atomic_int inside;
};
static struct guarded g[2];
static atomic_int overlap;
#define counter g[0].count

/* a CS of about `ns` nanoseconds (busy) on g[k] */
struct req {
    int k;
    long ns;
};
static void *cs_busy(void *a)
{
    struct req *q = a;
    struct guarded *d = &g[q->k];
    if (atomic_fetch_add(&d->inside, 1))
        atomic_store(&overlap, 1);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < q->ns);
    d->count++;
    atomic_fetch_sub(&d->inside, 1);
    return a;
}
static void *cs_inc(void *a)
{
    struct req q = {0, 0};
    cs_busy(&q);
    return a;
}
static void *cs_inc1(void *a)
{
    struct req q = {1, 0};
    cs_busy(&q);
    return a;
}

/* ---- lazy ------------------------------------------------------------------------- */
static void test_lazy(void)
{
    th_context = "lazy";
    int before = tasks();
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "rcl", NULL), 0);
    CHECK_EQ(tasks(), before); /* no server yet */
    counter = 0;
    CHECK(liblock_execute(&l, cs_inc, &l) == &l, "first execute");
    CHECK(tasks() > before, "the first use started the server (%d tasks, %d before)", tasks(), before);
    CHECK_EQ(counter, 1);
    CHECK_EQ(liblock_destroy(&l), 0);
}

/* ---- race ------------------------------------------------------------------------- */
#define RT 8
static liblock_t rl[2];
static int race_n;
static atomic_long trylocks_ok;

static void *race_thread(void *p)
{
    long id = (long)p;
    uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
    long bad = 0;
    for (int i = 0; i < race_n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int k = (int)((x >> 8) & 1);
        liblock_t *l = &rl[k];
        struct req q = {k, 0};
        switch ((x >> 16) % 8) {
        case 0: /* a lock/unlock section, held a little (a LOCK request waits, parked) */
            if (liblock_lock(l) != 0) {
                bad++;
                break;
            }
            q.ns = (long)(x % 4000);
            cs_busy(&q);
            if (liblock_unlock(l) != 0)
                bad++;
            break;
        case 1:
            if (liblock_trylock(l) == 0) {
                cs_busy(&q);
                atomic_fetch_add(&trylocks_ok, 1);
                if (liblock_unlock(l) != 0)
                    bad++;
            }
            break;
        case 2:
        case 3:
            if (liblock_execute(l, k ? cs_inc1 : cs_inc, l) != l)
                bad++;
            break;
        default: /* 0..8 us: the reply races with the client's park */
            q.ns = (long)(x % 8000);
            if (liblock_execute(l, cs_busy, &q) != &q)
                bad++;
            break;
        }
    }
    return (void *)bad;
}

static void race(int policy)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    for (int i = 0; i < 2; i++)
        CHECK_EQ(liblock_init(&rl[i], "rcl", &a), 0);
    g[0].count = g[1].count = 0;
    atomic_store(&trylocks_ok, 0);
    pthread_t t[RT];
    for (long i = 0; i < RT; i++)
        pthread_create(&t[i], NULL, race_thread, (void *)i);
    long bad = 0;
    for (int i = 0; i < RT; i++) {
        void *b;
        pthread_join(t[i], &b);
        bad += (long)b;
    }
    CHECK_EQ(bad, 0);
    CHECK(atomic_load(&overlap) == 0, "%s: no two CSs of one lock overlapped", liblock_wait_name(policy));
    /* every operation but a failed trylock adds one */
    long expect = 0;
    for (long id = 0; id < RT; id++) {
        uint64_t x = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
        for (int i = 0; i < race_n; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            expect += (x >> 16) % 8 != 1;
        }
    }
    CHECK_EQ(g[0].count + g[1].count, expect + atomic_load(&trylocks_ok));
    for (int i = 0; i < 2; i++)
        CHECK_EQ(liblock_destroy(&rl[i]), 0);
}

static void test_race(void)
{
    th_context = "race";
    race_n = th_scale_small() ? 1000 : 6000;
    race(LIBLOCK_WAIT_PARK);
    race(LIBLOCK_WAIT_SPIN_THEN_PARK);
    race(LIBLOCK_WAIT_SPIN);
}

/* ---- direct ------------------------------------------------------------------------
 * Direct lock/unlock (src/runtime/rcl/direct.c): clients take the lock word with a
 * CAS and sleep on it (value 3) when a client holds it; a delegated CS
 * still excludes them; a request skipped for a held lock sets `want` and
 * makes clients queue behind it; the unlock wakes an idle-parked server. */
#define DT 16 /* more threads than CPUs: holders are preempted, waiters sleep */
static liblock_t dl;
static int direct_n;

static void *direct_locker(void *p)
{
    long bad = 0;
    for (int i = 0; i < direct_n; i++) {
        if (liblock_lock(&dl) != 0) {
            bad++;
            continue;
        }
        struct req q = {0, (long)((i * 7 + (long)p) % 3) * 1000}; /* 0-2 us held */
        cs_busy(&q);
        if (liblock_unlock(&dl) != 0)
            bad++;
    }
    return (void *)bad;
}

static void *direct_executor(void *p)
{
    long bad = 0;
    for (int i = 0; i < direct_n / 4; i++)
        if (liblock_execute(&dl, cs_inc, p) != p)
            bad++;
    return (void *)bad;
}

static void direct_round(int policy, int executors)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, policy);
    CHECK_EQ(liblock_init(&dl, "rcl", &a), 0);
    g[0].count = 0;
    pthread_t t[DT];
    for (long i = 0; i < DT; i++)
        pthread_create(&t[i], NULL, i < executors ? direct_executor : direct_locker, (void *)(i + 1));
    long bad = 0;
    for (int i = 0; i < DT; i++) {
        void *b;
        pthread_join(t[i], &b);
        bad += (long)b;
    }
    CHECK_EQ(bad, 0);
    CHECK(atomic_load(&overlap) == 0, "%s/%d: no overlap", liblock_wait_name(policy), executors);
    CHECK_EQ(g[0].count, (long)(DT - executors) * direct_n + (long)executors * (direct_n / 4));
    CHECK_EQ(liblock_destroy(&dl), 0);
}

static atomic_int held_flag;
static void *direct_hold(void *p)
{
    (void)p;
    liblock_lock(&dl);
    atomic_store(&held_flag, 1);
    struct timespec d = {0, 60 * 1000 * 1000}; /* longer than the server's idle time-out */
    nanosleep(&d, NULL);
    liblock_unlock(&dl); /* must wake the idle-parked server for the pending execute */
    return NULL;
}

static void test_direct(void)
{
    th_context = "direct";
    setenv("LIBLOCK_RCL_DIRECT", "1", 1); /* as under the interposer (read at each lock init) */
    direct_n = th_scale_small() ? 2000 : 20000;
    /* lock/unlock only: sleepers on a client-held lock (a lost wake-up hangs) */
    direct_round(LIBLOCK_WAIT_PARK, 0);
    direct_round(LIBLOCK_WAIT_SPIN_THEN_PARK, 0);
    direct_round(LIBLOCK_WAIT_SPIN, 0);
    /* mixed with delegated CSs on the same lock: exclusion, and executes complete */
    direct_round(LIBLOCK_WAIT_PARK, 4);
    direct_round(LIBLOCK_WAIT_SPIN_THEN_PARK, 4);

    /* an uncontended pair sends no request; a request skipped for a held
     * lock (execute while a client holds it) is served after the unlock,
     * which wakes the server if it idle-parked meanwhile; after it, the
     * lock is taken directly again (want cleared) */
    CHECK_EQ(liblock_init(&dl, "rcl", NULL), 0);
    g[0].count = 0;
    liblock_server_t *s = liblock_server_of(&dl);
    liblock_server_stats_t a, b;
    CHECK_EQ(liblock_server_stats(s, &a), 0);
    CHECK_EQ(liblock_lock(&dl), 0);
    CHECK_EQ(liblock_trylock(&dl), EBUSY);
    CHECK_EQ(liblock_unlock(&dl), 0);
    CHECK_EQ(liblock_server_stats(s, &b), 0);
    CHECK_EQ(b.lock_ops - a.lock_ops, 0);
    atomic_store(&held_flag, 0);
    pthread_t h;
    pthread_create(&h, NULL, direct_hold, NULL);
    while (!atomic_load(&held_flag))
        sched_yield();
    CHECK(liblock_execute(&dl, cs_inc, &dl) == &dl, "execute behind a client's hold");
    pthread_join(h, NULL);
    CHECK_EQ(g[0].count, 1);
    CHECK_EQ(liblock_server_stats(s, &a), 0);
    CHECK_EQ(liblock_lock(&dl), 0);
    CHECK_EQ(liblock_unlock(&dl), 0);
    CHECK_EQ(liblock_server_stats(s, &b), 0);
    CHECK_EQ(b.lock_ops - a.lock_ops, 0);
    CHECK_EQ(liblock_destroy(&dl), 0);
    unsetenv("LIBLOCK_RCL_DIRECT");
    /* a lock of the liblock API (not direct by default) still sends requests */
    CHECK_EQ(liblock_init(&dl, "rcl", NULL), 0);
    CHECK_EQ(liblock_server_stats(liblock_server_of(&dl), &a), 0);
    CHECK_EQ(liblock_lock(&dl), 0);
    CHECK_EQ(liblock_unlock(&dl), 0);
    CHECK_EQ(liblock_server_stats(liblock_server_of(&dl), &b), 0);
    /* the server counts an op after its reply, so the unlock's may not be in yet */
    CHECK(b.lock_ops - a.lock_ops >= 1, "request-only lock: %llu lock ops", (unsigned long long)(b.lock_ops - a.lock_ops));
    CHECK_EQ(liblock_destroy(&dl), 0);
}

/* ---- coloc -------------------------------------------------------------------------- */
static liblock_t cl;
static void *coloc_thread(void *p)
{
    int cpu = (int)(long)p;
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0)
            return (void *)1;
    }
    long bad = 0;
    for (int i = 0; i < 3000; i++) {
        if (i % 2) {
            bad += liblock_execute(&cl, cs_inc, &cl) != &cl;
        } else {
            bad += liblock_lock(&cl) != 0;
            cs_inc(NULL);
            bad += liblock_unlock(&cl) != 0;
        }
    }
    return (void *)bad;
}

static void test_coloc(void)
{
    th_context = "coloc";
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        th_skip("coloc: one CPU");
        return;
    }
    liblock_attr_t a;
    liblock_attr_init(&a); /* the default policy */
    CHECK_EQ(liblock_init(&cl, "rcl", &a), 0);
    liblock_server_stats_t st;
    CHECK_EQ(liblock_server_stats(liblock_server_of(&cl), &st), 0);
    counter = 0;
    pthread_t t[2];
    pthread_create(&t[0], NULL, coloc_thread, (void *)(long)st.cpu); /* on the server's CPU */
    pthread_create(&t[1], NULL, coloc_thread, (void *)-1L);          /* narrowed off it */
    long bad = 0;
    for (int i = 0; i < 2; i++) {
        void *b;
        pthread_join(t[i], &b);
        bad += (long)b;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(counter, 6000);
    CHECK(atomic_load(&overlap) == 0, "no overlap");
    CHECK_EQ(liblock_destroy(&cl), 0);
}

/* ---- deleg ---------------------------------------------------------------------------- */
static liblock_t dL, dM;
static pthread_mutex_t dP = PTHREAD_MUTEX_INITIALIZER;
static int d_kind; /* 0: P is a pthread mutex, 1: P is dM (mcs), 2: A holds M then L */
static long d_count, d_n;
static atomic_int d_go;
static atomic_long d_done;
static void p_lock(void) { d_kind == 0 ? (void)pthread_mutex_lock(&dP) : (void)liblock_lock(&dM); }
static void p_unlock(void) { d_kind == 0 ? (void)pthread_mutex_unlock(&dP) : (void)liblock_unlock(&dM); }
static void *d_cs(void *a)
{
    p_lock();
    d_count++;
    p_unlock();
    return a;
}
static void *d_a(void *a)
{
    for (long i = 0; i < d_n; i++) {
        if (d_kind == 2) {
            /* A holds M, then L; B's request for L is posted meanwhile; its
             * CS (run once A releases L) locks M, which A still holds.  One
             * round at a time: looping without the handshake would be a
             * plain lock-order inversion (A: M then L; B's CS: L then M). */
            liblock_lock(&dM);
            liblock_lock(&dL);
            atomic_store(&d_go, 1);
            usleep(50);
            liblock_unlock(&dL);
            usleep(20);
            d_count++;
            liblock_unlock(&dM);
            while (atomic_load(&d_done) != i + 1)
                sched_yield();
        } else {
            liblock_lock(&dL);
            p_lock();
            liblock_unlock(&dL);
            d_count++;
            p_unlock();
        }
    }
    return a;
}
static void *d_b(void *a)
{
    long bad = 0;
    for (long i = 0; i < d_n; i++) {
        if (d_kind == 2) {
            while (!atomic_load(&d_go))
                sched_yield();
            atomic_store(&d_go, 0);
        }
        bad += liblock_execute(&dL, d_cs, &dL) != &dL;
        atomic_store(&d_done, i + 1);
    }
    return (void *)bad;
}

static liblock_cond_t dC;
static int d_flag;
static long d_rounds;
static void *d_signal_cs(void *a)
{
    d_flag = 1;
    liblock_cond_signal(&dC);
    return a;
}
static void *d_waiter(void *a)
{
    long bad = 0;
    for (long i = 0; i < d_n; i++) {
        bad += liblock_lock(&dL) != 0;
        while (!d_flag)
            bad += liblock_cond_wait(&dC, &dL) != 0;
        d_flag = 0;
        d_rounds++;
        bad += liblock_unlock(&dL) != 0;
    }
    return (void *)bad;
}
static void *d_signaller(void *a)
{
    /* signal only once the previous round was consumed */
    long bad = 0;
    for (long i = 0; i < d_n; i++) {
        for (;;) {
            bad += liblock_lock(&dL) != 0;
            int ready = !d_flag && d_rounds == i;
            bad += liblock_unlock(&dL) != 0;
            if (ready)
                break;
            sched_yield();
        }
        bad += liblock_execute(&dL, d_signal_cs, &dL) != &dL;
    }
    return (void *)bad;
}

static void test_deleg(void)
{
    th_context = "deleg";
    d_n = th_scale_small() ? 300 : 2000;
    CHECK_EQ(liblock_init(&dL, "rcl", NULL), 0);
    CHECK_EQ(liblock_init(&dM, "mcs", NULL), 0);
    long n_all = d_n;
    for (d_kind = 0; d_kind < 3; d_kind++) {
        d_n = d_kind == 2 ? n_all / 10 : n_all;
        d_count = 0;
        atomic_store(&d_go, 0);
        atomic_store(&d_done, 0);
        pthread_t a, b;
        pthread_create(&a, NULL, d_a, NULL);
        pthread_create(&b, NULL, d_b, NULL);
        void *bad;
        pthread_join(a, NULL);
        pthread_join(b, &bad);
        CHECK((long)bad == 0, "kind %d: execute failed %ld times", d_kind, (long)bad);
        CHECK(d_count == 2 * d_n, "kind %d: count %ld, expected %ld", d_kind, d_count, 2 * d_n);
    }
    d_n = n_all;
    for (int kind = 0; kind < 2; kind++) {
        liblock_condattr_t ca;
        liblock_condattr_init(&ca);
        if (kind)
            liblock_condattr_setfifo(&ca, 0.5); /* mostly-LIFO */
        CHECK_EQ(liblock_cond_init(&dC, &ca), 0);
        d_flag = 0;
        d_rounds = 0;
        pthread_t w, sg;
        pthread_create(&w, NULL, d_waiter, NULL);
        pthread_create(&sg, NULL, d_signaller, NULL);
        void *b1, *b2;
        pthread_join(w, &b1);
        pthread_join(sg, &b2);
        CHECK((long)b1 == 0 && (long)b2 == 0, "cond kind %d: errors %ld %ld", kind, (long)b1, (long)b2);
        CHECK(d_rounds == d_n, "cond kind %d: rounds %ld, expected %ld", kind, d_rounds, d_n);
        CHECK_EQ(liblock_cond_destroy(&dC), 0);
    }
    CHECK_EQ(liblock_destroy(&dL), 0);
    CHECK_EQ(liblock_destroy(&dM), 0);
}

/* ---- fork ------------------------------------------------------------------------------ */
static void test_fork(void)
{
    th_context = "fork";
#if defined(__SANITIZE_THREAD__)
    /* ThreadSanitizer does not support creating threads in the child of a
     * multithreaded fork (it reports and exits 66), which starting the
     * child's server requires. */
    th_skip("fork: ThreadSanitizer cannot create threads after a multi-threaded fork");
    return;
#endif
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "rcl", NULL), 0);
    counter = 0;
    CHECK(liblock_execute(&l, cs_inc, &l) == &l, "before fork");
    liblock_server_stats_t pst;
    CHECK_EQ(liblock_server_stats(liblock_server_of(&l), &pst), 0);
    CHECK_EQ(liblock_lock(&l), 0); /* held by the forking thread across the fork */
    pid_t pid = fork();
    if (pid == 0) {
        alarm(30);
        int code = 0;
        if (tasks() != 1)
            code |= 1; /* a server thread exists before any use */
        if (liblock_unlock(&l) != 0)
            code |= 32; /* the hold is still the forking thread's */
        for (int i = 0; i < 1000; i++)
            if (liblock_execute(&l, cs_inc, &l) != &l)
                code |= 2;
        if (liblock_lock(&l) != 0 || liblock_unlock(&l) != 0)
            code |= 4;
        liblock_server_stats_t st;
        if (liblock_server_stats(liblock_server_of(&l), &st) != 0 || !st.running || st.degraded != pst.degraded)
            code |= 8; /* the child's server runs as the parent's does */
        if (counter != 1001)
            code |= 16;
        _exit(code);
    }
    CHECK(pid > 0, "fork: %s", strerror(errno));
    CHECK_EQ(liblock_unlock(&l), 0);
    /* the parent keeps using its server meanwhile */
    for (int i = 0; i < 1000; i++)
        liblock_execute(&l, cs_inc, &l);
    int status = 0;
    if (pid > 0) {
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child exit status %d (bits: 1 early thread, 2 execute, "
              "4 lock, 8 server mode, 16 count, 32 unlock of the hold)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
    CHECK_EQ(counter, 1001);
    liblock_server_stats_t st;
    CHECK_EQ(liblock_server_stats(liblock_server_of(&l), &st), 0);
    CHECK(st.running && st.degraded == pst.degraded, "the parent's server is unchanged");
    CHECK_EQ(liblock_destroy(&l), 0);
}

int main(int argc, char **argv)
{
    th_watchdog(60);
    setenv("LIBLOCK_SPIN_NS", "0", 1); /* park at once after the first polls: the most races */
    if (th_section(argc, argv, "lazy"))
        test_lazy();
    if (th_section(argc, argv, "race"))
        test_race();
    if (th_section(argc, argv, "direct"))
        test_direct();
    if (th_section(argc, argv, "coloc"))
        test_coloc();
    if (th_section(argc, argv, "deleg"))
        test_deleg();
    if (th_section(argc, argv, "fork"))
        test_fork();
    liblock_server_t *d = liblock_server_default();
    CHECK(d && liblock_server_stop(d) == 0, "stop the default server");
    return th_report("test_rcl_park");
}
