/*
 * test_parking - the classic locks' waiting protocols when threads outnumber
 * CPUs, and the misuses ordinary programs make of them (a stray unlock,
 * destroy while in use).
 *
 *  1. oversubscription: every classic algorithm with its default policy,
 *     8 and 32 threads, each doing a fixed number of critical sections
 *     alternating lock/unlock, liblock_execute and trylock; exact counts,
 *     each configuration in a child process with a time bound (a convoy
 *     that makes each hand-off wait for the scheduler fails it);
 *  2. park/unpark races: spin, ttas, ticket, clh, mcs under spin-then-park
 *     with LIBLOCK_SPIN_NS=0 (every waiter parks at once) and tiny critical
 *     sections, so that parking and waking race on nearly every hand-off; a
 *     lost wake-up hangs and the bound fails it; the same for the barging
 *     lock() of oyama and hybcomb, alone and mixed with execute/trylock;
 *  3. FIFO order of parked waiters (every algorithm with the fifo property:
 *     cc-synch, clh, dsm-synch, hyblock, mcs, ticket): the main thread holds
 *     the lock, K threads arrive one at a time, each only after the previous
 *     one sleeps in the kernel (its /proc state is 'S', so it has queued and
 *     parked); after the release they must get the lock in arrival order;
 *  4. a stray unlock at the algorithm level (what pthread_mutex_unlock too
 *     many does under the interposer) leaves every node-less classic lock
 *     usable, and the same through the interposer with a real extra
 *     pthread_mutex_unlock for ticket, spin, ttas and posix;
 *  5. CLH trylock never waits: while another thread holds the lock, and
 *     while trylock and lock race (exact counts);
 *  6. destroy reports EBUSY while a thread holds or waits, and leaves the
 *     lock usable;
 *  7. pure spin: three waits of over 20 ms print one warning naming the
 *     remedy; LIBLOCK_WARN=0 prints none;
 *  8. a pthread bounded buffer (mutex + two condition variables) under the
 *     interposer with the default policy of ticket, clh, mcs, spin and ttas,
 *     8 and 32 threads: exact sum within the time bound;
 *  9. fork while lock() callers of oyama and hybcomb sleep (barge_sleep.h):
 *     the child, where those sleepers do not exist, uses the lock with new
 *     threads that sleep in turn, and must finish with an exact count.
 */
#include "harness.h"
#include "internal.h"

#include <dirent.h>
#include <sys/syscall.h>
#include <sys/wait.h>

static const char *const classic[] = {"spin",   "ttas", "ticket", "clh",    "mcs",    "mcs-tp",
                                      "posix",  "loiter", "mcscr", "lifocr", "mcscrn"};
#define NCLASSIC (sizeof classic / sizeof *classic)

static int have_algo(const char *name) { return ll_find_ops(name) != NULL; }

/* ---- 1 and 2: counting workers -------------------------------------------------- */
struct shared {
    liblock_t lock;
    volatile long counter;
    volatile int inside;
    _Atomic int violations;
    long per_thread;
    int mix; /* 0 lock/unlock only, 1 lock/execute/trylock mixed */
};

static void *cs(void *arg)
{
    struct shared *sh = arg;
    if (sh->inside)
        atomic_fetch_add(&sh->violations, 1);
    sh->inside = 1;
    sh->counter++;
    for (volatile int i = 0; i < 50; i++) /* long enough for waiters to queue up */
        ;
    sh->inside = 0;
    return arg;
}

static pthread_barrier_t count_start;

static void *count_worker(void *arg)
{
    struct shared *sh = arg;
    pthread_barrier_wait(&count_start);
    for (long i = 0; i < sh->per_thread; i++) {
        for (volatile int k = 0; k < 50; k++)
            ;
        int how = sh->mix ? (int)(i % 3) : 0;
        if (how == 1) {
            if (liblock_execute(&sh->lock, cs, sh) != sh)
                atomic_fetch_add(&sh->violations, 1000);
            continue;
        }
        if (how == 2) {
            int r;
            while ((r = liblock_trylock(&sh->lock)) == EBUSY)
                sched_yield();
            if (r) {
                atomic_fetch_add(&sh->violations, 1000);
                continue;
            }
        } else if (liblock_lock(&sh->lock)) {
            atomic_fetch_add(&sh->violations, 1000);
            continue;
        }
        cs(sh);
        liblock_unlock(&sh->lock);
    }
    return NULL;
}

/* Runs in a child: exit 0 if the count is exact. */
static int count_run(const char *algo, int policy, int nthreads, long per_thread, int mix)
{
    static struct shared sh;
    memset((void *)&sh, 0, sizeof sh);
    liblock_attr_t a;
    liblock_attr_init(&a);
    if (policy)
        liblock_attr_setwait(&a, policy);
    if (liblock_init(&sh.lock, algo, &a)) {
        fprintf(stderr, "init %s failed\n", algo);
        return 2;
    }
    sh.per_thread = per_thread;
    sh.mix = mix;
    pthread_t th[64];
    pthread_barrier_init(&count_start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, count_worker, &sh);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    int ok = sh.counter == per_thread * nthreads && atomic_load(&sh.violations) == 0;
    if (!ok)
        fprintf(stderr, "%s: counter %ld, expected %ld, violations %d\n", algo, sh.counter, per_thread * nthreads,
                atomic_load(&sh.violations));
    return ok && liblock_destroy(&sh.lock) == 0 ? 0 : 1;
}

/* Every configuration runs in a fresh process (this program re-executed
 * with LIBLOCK_PARKING_CHILD=spec), so that process-wide state such as the
 * measured spin budget is that of the environment given. */
static const char *self_path;

static void spawn(const char *what, const char *spec, const char *spin_ns)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        setenv("LIBLOCK_PARKING_CHILD", spec, 1);
        if (spin_ns)
            setenv("LIBLOCK_SPIN_NS", spin_ns, 1);
        execl(self_path, self_path, (char *)NULL);
        _exit(126);
    }
    int rc = th_wait_child(pid, 60, what);
    CHECK(rc == 0, "%s: exit %d", what, rc);
}

static void count_spawn(const char *what, const char *algo, int policy, int n, long per, int mix, const char *spin_ns)
{
    char spec[160];
    snprintf(spec, sizeof spec, "count:%s:%d:%d:%ld:%d", algo, policy, n, per, mix);
    spawn(what, spec, spin_ns);
}

static void oversubscription(void)
{
    long per = th_scale_small() ? 2000 : 20000;
    for (size_t i = 0; i < NCLASSIC; i++) {
        if (!have_algo(classic[i]))
            continue;
        for (int n = 8; n <= 32; n *= 4) {
            char what[128];
            snprintf(what, sizeof what, "%s default policy, %d threads, lock/execute/trylock", classic[i], n);
            th_context = what;
            uint64_t t0 = th_now_ns();
            count_spawn(what, classic[i], 0, n, n == 8 ? per : per / 4, 1, NULL);
            printf("  %-8s %2d threads: %.2f s\n", classic[i], n, (th_now_ns() - t0) / 1e9);
        }
    }
}

static void park_races(void)
{
    static const char *const parkers[] = {"spin", "ttas", "ticket", "clh", "mcs"};
    long per = th_scale_small() ? 1000 : 10000;
    for (size_t i = 0; i < sizeof parkers / sizeof *parkers; i++) {
        for (int n = 2; n <= 8; n *= 2) {
            char what[128];
            snprintf(what, sizeof what, "%s spin-then-park, SPIN_NS=0, %d threads", parkers[i], n);
            th_context = what;
            count_spawn(what, parkers[i], LIBLOCK_WAIT_SPIN_THEN_PARK, n, per * 4 / n, 0, "0");
        }
    }
    /* the combining locks whose lock() barges and sleeps on an eventcount
     * that every release or departure signals (oyama.c change 7, hybcomb.c
     * change 8): lock/unlock alone, then mixed with execute and trylock,
     * where the sleepers also wait out combiners' passes */
    static const char *const bargers[] = {"oyama", "hybcomb"};
    for (size_t i = 0; i < sizeof bargers / sizeof *bargers; i++) {
        for (int mix = 0; mix <= 1; mix++) {
            for (int n = 2; n <= 8; n *= 2) {
                char what[128];
                snprintf(what, sizeof what, "%s spin-then-park, SPIN_NS=0, %d threads, %s", bargers[i], n,
                         mix ? "lock/execute/trylock" : "lock/unlock");
                th_context = what;
                count_spawn(what, bargers[i], LIBLOCK_WAIT_SPIN_THEN_PARK, n, per * 4 / n, mix, "0");
            }
        }
    }
}

/* Fork while lock() callers sleep (oyama, hybcomb: barge_sleep.h).  The
 * forking thread holds the lock, as a pthread_atfork prepare handler
 * would, while K threads sleep in lock() (spin budget 0); in the child,
 * where those sleepers do not exist, it releases the lock and 8 new
 * threads count through it (lock/unlock, so lock() callers sleep again):
 * whatever sleeping state the parent's threads left in the lock must not
 * keep the child's sleepers from being woken.  Exit 0 if the child's
 * count is exact within its bound and the parent's threads finish. */
static liblock_t forkb_lock;
static _Atomic pid_t forkb_tid[8];
static long forkb_counter;

static void *forkb_sleeper(void *arg)
{
    int me = (int)(long)arg;
    atomic_store(&forkb_tid[me], (pid_t)syscall(SYS_gettid));
    liblock_lock(&forkb_lock);
    forkb_counter++;
    liblock_unlock(&forkb_lock);
    return NULL;
}

static _Atomic int forkb_inside, forkb_bad;
static long forkb_child_counter;

static void *forkb_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20000; i++) {
        liblock_lock(&forkb_lock);
        if (atomic_exchange(&forkb_inside, 1))
            atomic_store(&forkb_bad, 1);
        forkb_child_counter++;
        atomic_store(&forkb_inside, 0);
        liblock_unlock(&forkb_lock);
    }
    return NULL;
}

static int hold_with_sleepers(liblock_t *l, const char *algo, int k, pthread_t *th, void *(*fn)(void *),
                              _Atomic pid_t *tids);

static int forkb_child(const char *algo)
{
    enum { K = 4 };
    pthread_t th[K];
    if (hold_with_sleepers(&forkb_lock, algo, K, th, forkb_sleeper, forkb_tid))
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        liblock_unlock(&forkb_lock); /* the parent's sleepers are not here */
        pthread_t c[8];
        for (int i = 0; i < 8; i++)
            pthread_create(&c[i], NULL, forkb_worker, NULL);
        for (int i = 0; i < 8; i++)
            pthread_join(c[i], NULL);
        _exit(forkb_child_counter == 8 * 20000 && !atomic_load(&forkb_bad) ? 0 : 1);
    }
    liblock_unlock(&forkb_lock);
    for (int i = 0; i < K; i++)
        pthread_join(th[i], NULL);
    int rc = th_wait_child(pid, 30, "forked child");
    return rc != 0 ? 1 : forkb_counter == K ? 0 : 3;
}

static void fork_sleepers_test(void)
{
    static const char *const bargers[] = {"oyama", "hybcomb"};
    for (size_t i = 0; i < sizeof bargers / sizeof *bargers; i++) {
        char what[128], spec[96];
        snprintf(what, sizeof what, "%s: fork while lock() callers sleep, the child uses the lock", bargers[i]);
        snprintf(spec, sizeof spec, "forkb:%s", bargers[i]);
        th_context = what;
        spawn(what, spec, "0");
    }
}

/* ---- 3: FIFO order of parked waiters ------------------------------------------ */
static liblock_t fifo_lock;
static _Atomic pid_t fifo_tid[16];
static int fifo_order[16];
static _Atomic int fifo_pos;

static void *fifo_waiter(void *arg)
{
    int me = (int)(long)arg;
    atomic_store(&fifo_tid[me], (pid_t)syscall(SYS_gettid));
    liblock_lock(&fifo_lock);
    fifo_order[atomic_fetch_add(&fifo_pos, 1)] = me;
    liblock_unlock(&fifo_lock);
    return NULL;
}

/* 'S' (sleeping) in /proc/self/task/TID/stat. */
static int sleeping(pid_t tid)
{
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

/* Initialise *l as algo under spin-then-park, take it, and start k threads
 * running fn(i), each only after the previous one sleeps in the kernel (its
 * /proc state is 'S': with a spin budget of 0 it has queued and parked);
 * fn stores its tid in tids[i].  Non-zero if the lock cannot be made. */
static int hold_with_sleepers(liblock_t *l, const char *algo, int k, pthread_t *th, void *(*fn)(void *),
                              _Atomic pid_t *tids)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_SPIN_THEN_PARK);
    if (liblock_init(l, algo, &a))
        return 2;
    liblock_lock(l);
    for (int i = 0; i < k; i++) {
        pthread_create(&th[i], NULL, fn, (void *)(long)i);
        pid_t t;
        while (!(t = atomic_load(&tids[i])))
            usleep(100);
        while (!sleeping(t))
            usleep(200);
    }
    return 0;
}

static int fifo_child(const char *algo)
{
    enum { K = 8 };
    pthread_t th[K];
    if (hold_with_sleepers(&fifo_lock, algo, K, th, fifo_waiter, fifo_tid))
        return 2;
    liblock_unlock(&fifo_lock);
    for (int i = 0; i < K; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < K; i++)
        if (fifo_order[i] != i) {
            fprintf(stderr, "%s: position %d went to waiter %d\n", algo, i, fifo_order[i]);
            return 1;
        }
    return liblock_destroy(&fifo_lock) ? 1 : 0;
}

static void fifo_order_test(void)
{
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        liblock_algorithm_info_t info;
        if (liblock_algorithm_info(*a, &info) || !(info.properties & LIBLOCK_PROP_FIFO) ||
            !(info.policies & (1u << LIBLOCK_WAIT_SPIN_THEN_PARK)))
            continue;
        char what[128], spec[64];
        snprintf(what, sizeof what, "%s: parked waiters woken in arrival order", *a);
        snprintf(spec, sizeof spec, "fifo:%s", *a);
        th_context = what;
        spawn(what, spec, "0");
        printf("  %s\n", what);
    }
}

/* Under a sanitizer the interposer would have to come after the sanitizer's
 * runtime in the preload order: the interposed parts are skipped there. */
static int sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 1;
#else
    return 0;
#endif
}

/* ---- 4: a stray unlock ------------------------------------------------------------ */
static liblock_t stray;
static void *stray_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        liblock_lock(&stray);
        liblock_unlock(&stray);
    }
    return NULL;
}

static void stray_unlock_test(void)
{
    static const char *const nodeless[] = {"spin", "ttas", "ticket", "posix"};
    static const int pols[] = {LIBLOCK_WAIT_DEFAULT, LIBLOCK_WAIT_SPIN};
    for (size_t i = 0; i < 4; i++)
        for (size_t p = 0; p < 2; p++) {
            const struct ll_ops *o = ll_find_ops(nodeless[i]);
            if (!o || (pols[p] && !(o->policies & LL_POLICY_BIT(pols[p]))))
                continue;
            th_context = nodeless[i];
            liblock_attr_t a;
            liblock_attr_init(&a);
            liblock_attr_setwait(&a, pols[p]);
            CHECK_EQ(liblock_init(&stray, nodeless[i], &a), 0);
            CHECK_EQ(liblock_lock(&stray), 0);
            CHECK_EQ(liblock_unlock(&stray), 0);
            o->unlock(&stray, NULL); /* the interposer's direct path, one unlock too many */
            CHECK_EQ(liblock_trylock(&stray), 0);
            CHECK_EQ(liblock_unlock(&stray), 0);
            pthread_t t1, t2;
            pthread_create(&t1, NULL, stray_worker, NULL);
            pthread_create(&t2, NULL, stray_worker, NULL);
            CHECK(th_join_by(t1, th_now_ns() + 30000000000ull) == 0, "%s unusable after a stray unlock", nodeless[i]);
            CHECK(th_join_by(t2, th_now_ns() + 30000000000ull) == 0, "%s unusable after a stray unlock", nodeless[i]);
            CHECK_EQ(liblock_destroy(&stray), 0);
        }
}

/* The same through the interposer: this program re-executed under
 * LD_PRELOAD (LIBLOCK_PARKING_CHILD=stray). */
static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
static long pm_count;
static void *pm_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&pm);
        pm_count++;
        pthread_mutex_unlock(&pm);
    }
    return NULL;
}

static int interposed_stray_child(void)
{
    th_watchdog(30);
    pthread_mutex_lock(&pm);
    pthread_mutex_unlock(&pm);
    pthread_mutex_unlock(&pm); /* one too many */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, pm_worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return pm_count == 20000 ? 0 : 1;
}

static void interposed_stray_test(const char *self)
{
    char lib[4200];
    th_interposer_path(self, lib, sizeof lib);
    char *real = sanitized() ? NULL : realpath(lib, NULL);
    if (!real) {
        th_skip("interposed parking: no interposer at %s, or a sanitizer build", lib);
        return;
    }
    static const char *const algos[] = {"ticket", "spin", "ttas", "posix", "mcs", "clh"};
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("LD_PRELOAD", real, 1);
            setenv("LIBLOCK_LOCK", algos[i], 1);
            setenv("LIBLOCK_STRICT", "1", 1);
            setenv("LIBLOCK_PARKING_CHILD", "stray", 1);
            execl(self, self, (char *)NULL);
            _exit(126);
        }
        char what[128];
        snprintf(what, sizeof what, "extra pthread_mutex_unlock under the interposer with %s", algos[i]);
        th_context = what;
        int rc = th_wait_child(pid, 60, what);
        CHECK(rc == 0, "%s: exit %d", what, rc);
    }
    free(real);
}

/* A bounded buffer on a pthread mutex and two condition variables, run
 * under the interposer (LIBLOCK_PARKING_CHILD=bb:NTHREADS): half producers,
 * half consumers, exact sum.  Every consumer wake-up re-acquires the mutex
 * behind parked threads, the case where FIFO hand-offs pile up. */
#define BB_CAP 8
static pthread_mutex_t bb_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bb_notfull = PTHREAD_COND_INITIALIZER, bb_notempty = PTHREAD_COND_INITIALIZER;
static long bb_buf[BB_CAP], bb_items, bb_sum;
static int bb_head, bb_count;

static void *bb_producer(void *arg)
{
    (void)arg;
    for (long i = 1; i <= bb_items; i++) {
        pthread_mutex_lock(&bb_m);
        while (bb_count == BB_CAP)
            pthread_cond_wait(&bb_notfull, &bb_m);
        bb_buf[(bb_head + bb_count++) % BB_CAP] = i;
        pthread_cond_signal(&bb_notempty);
        pthread_mutex_unlock(&bb_m);
    }
    return NULL;
}

static void *bb_consumer(void *arg)
{
    (void)arg;
    long s = 0;
    for (long i = 0; i < bb_items; i++) {
        pthread_mutex_lock(&bb_m);
        while (bb_count == 0)
            pthread_cond_wait(&bb_notempty, &bb_m);
        s += bb_buf[bb_head];
        bb_head = (bb_head + 1) % BB_CAP;
        bb_count--;
        pthread_cond_signal(&bb_notfull);
        pthread_mutex_unlock(&bb_m);
    }
    pthread_mutex_lock(&bb_m);
    bb_sum += s;
    pthread_mutex_unlock(&bb_m);
    return NULL;
}

static int bb_child(int n)
{
    bb_items = th_scale_small() ? 200 : 2000;
    pthread_t t[64];
    for (int i = 0; i < n / 2; i++) {
        pthread_create(&t[2 * i], NULL, bb_producer, NULL);
        pthread_create(&t[2 * i + 1], NULL, bb_consumer, NULL);
    }
    for (int i = 0; i < n / 2 * 2; i++)
        pthread_join(t[i], NULL);
    long expect = (long)(n / 2) * bb_items * (bb_items + 1) / 2;
    if (bb_sum != expect)
        fprintf(stderr, "bounded buffer: sum %ld, expected %ld\n", bb_sum, expect);
    return bb_sum == expect ? 0 : 1;
}

static void interposed_cond_test(const char *self)
{
    char lib[4200];
    th_interposer_path(self, lib, sizeof lib);
    char *real = sanitized() ? NULL : realpath(lib, NULL);
    if (!real) {
        th_skip("interposed condition variables: no interposer at %s, or a sanitizer build", lib);
        return;
    }
    static const char *const algos[] = {"ticket", "clh", "mcs", "spin", "ttas"};
    for (size_t i = 0; i < sizeof algos / sizeof *algos; i++)
        for (int n = 8; n <= 32; n *= 4) {
            char what[128], spec[32];
            snprintf(what, sizeof what, "bounded buffer under the interposer, %s default policy, %d threads", algos[i], n);
            snprintf(spec, sizeof spec, "bb:%d", n);
            th_context = what;
            uint64_t t0 = th_now_ns();
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                setenv("LD_PRELOAD", real, 1);
                setenv("LIBLOCK_LOCK", algos[i], 1);
                setenv("LIBLOCK_STRICT", "1", 1);
                setenv("LIBLOCK_PARKING_CHILD", spec, 1);
                execl(self, self, (char *)NULL);
                _exit(126);
            }
            int rc = th_wait_child(pid, 60, what);
            CHECK(rc == 0, "%s: exit %d", what, rc);
            printf("  %-8s %2d threads: %.2f s\n", algos[i], n, (th_now_ns() - t0) / 1e9);
        }
    free(real);
}

/* ---- 5: CLH trylock never waits --------------------------------------------------- */
static liblock_t clh;
static _Atomic int clh_phase;

static void *clh_trier(void *arg)
{
    (void)arg;
    while (atomic_load(&clh_phase) != 1)
        ;
    int busy = 0;
    for (int i = 0; i < 1000; i++)
        busy += liblock_trylock(&clh) == EBUSY;
    atomic_store(&clh_phase, busy == 1000 ? 2 : 3);
    return NULL;
}

static void clh_trylock_test(void)
{
    static const int pols[] = {LIBLOCK_WAIT_SPIN, LIBLOCK_WAIT_SPIN_THEN_PARK};
    for (int p = 0; p < 2; p++) {
        th_context = p ? "clh trylock (spin-then-park)" : "clh trylock (spin)";
        liblock_attr_t a;
        liblock_attr_init(&a);
        liblock_attr_setwait(&a, pols[p]);
        CHECK_EQ(liblock_init(&clh, "clh", &a), 0);
        /* trylock while held must return EBUSY without waiting: the holder
         * only releases after the trier has finished. */
        atomic_store(&clh_phase, 0);
        CHECK_EQ(liblock_lock(&clh), 0);
        pthread_t t;
        pthread_create(&t, NULL, clh_trier, NULL);
        atomic_store(&clh_phase, 1);
        uint64_t deadline = th_now_ns() + 30000000000ull;
        while (atomic_load(&clh_phase) == 1 && th_now_ns() < deadline)
            usleep(1000);
        CHECK_EQ(atomic_load(&clh_phase), 2);
        CHECK_EQ(liblock_unlock(&clh), 0);
        pthread_join(t, NULL);
        CHECK_EQ(liblock_destroy(&clh), 0);
        /* trylock racing with lock: exact counts (the mixed workers) */
        count_spawn(th_context, "clh", pols[p], 8, th_scale_small() ? 300 : 3000, 1, NULL);
    }
}

/* ---- 6: destroy while held and waited on --------------------------------------- */
static liblock_t dl;
static _Atomic int dl_state;
static void *dl_waiter(void *arg)
{
    (void)arg;
    atomic_store(&dl_state, 1);
    liblock_lock(&dl);
    atomic_store(&dl_state, 2);
    liblock_unlock(&dl);
    return NULL;
}

static void destroy_test(void)
{
    for (size_t i = 0; i < NCLASSIC; i++) {
        if (!have_algo(classic[i]))
            continue;
        th_context = classic[i];
        CHECK_EQ(liblock_init(&dl, classic[i], NULL), 0);
        CHECK_EQ(liblock_lock(&dl), 0);
        CHECK_EQ(liblock_destroy(&dl), EBUSY);
        atomic_store(&dl_state, 0);
        pthread_t t;
        pthread_create(&t, NULL, dl_waiter, NULL);
        while (atomic_load(&dl_state) == 0)
            usleep(100);
        usleep(5000);
        CHECK_EQ(liblock_destroy(&dl), EBUSY);
        CHECK_EQ(liblock_unlock(&dl), 0);
        pthread_join(t, NULL);
        CHECK_EQ(atomic_load(&dl_state), 2);
        CHECK_EQ(liblock_destroy(&dl), 0);
    }
}

/* ---- 7: the pure-spin warning ------------------------------------------------------- */
static liblock_t wl;
static _Atomic int wl_go;
static void *wl_waiter(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        while (atomic_load(&wl_go) != 2 * i + 1)
            usleep(100);
        liblock_lock(&wl); /* waits ~60 ms, spinning */
        liblock_unlock(&wl);
        atomic_store(&wl_go, 2 * i + 2);
    }
    return NULL;
}

/* Child: three long pure-spin waits; stderr is checked by the parent. */
static int warn_child(void)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_SPIN);
    if (liblock_init(&wl, "mcs", &a))
        return 2;
    pthread_t t;
    pthread_create(&t, NULL, wl_waiter, NULL);
    for (int i = 0; i < 3; i++) {
        liblock_lock(&wl);
        atomic_store(&wl_go, 2 * i + 1);
        usleep(60000);
        liblock_unlock(&wl);
        while (atomic_load(&wl_go) != 2 * i + 2)
            usleep(100);
    }
    pthread_join(t, NULL);
    return liblock_destroy(&wl);
}

static void warning_test(void)
{
    for (int off = 0; off <= 1; off++) {
        th_context = off ? "pure-spin warning, LIBLOCK_WARN=0" : "pure-spin warning";
        int fd[2];
        if (pipe(fd))
            return;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 2);
            close(fd[0]);
            setenv("LIBLOCK_PARKING_CHILD", "warn", 1);
            setenv("LIBLOCK_WARN", off ? "0" : "1", 1);
            execl(self_path, self_path, (char *)NULL);
            _exit(126);
        }
        close(fd[1]);
        char buf[4096];
        size_t len = 0;
        ssize_t r;
        while (len < sizeof buf - 1 && (r = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0)
            len += (size_t)r;
        buf[len] = 0;
        close(fd[0]);
        CHECK_EQ(th_wait_child(pid, 60, th_context), 0);
        int n = 0;
        for (char *p = buf; (p = strstr(p, "liblock: threads waiting")) != NULL; p++)
            n++;
        if (off)
            CHECK(len == 0, "warning printed although LIBLOCK_WARN=0: %s", buf);
        else
            CHECK(n == 1 && strstr(buf, "LIBLOCK_WARN=0") != NULL, "expected one warning naming the remedy, got: %s",
                  buf);
    }
}

int main(int argc, char **argv)
{
    const char *child = getenv("LIBLOCK_PARKING_CHILD");
    if (child) {
        th_watchdog(120);
        if (strcmp(child, "stray") == 0)
            return interposed_stray_child();
        if (strcmp(child, "warn") == 0)
            return warn_child();
        if (strncmp(child, "bb:", 3) == 0)
            return bb_child(atoi(child + 3));
        if (strncmp(child, "fifo:", 5) == 0)
            return fifo_child(child + 5);
        if (strncmp(child, "forkb:", 6) == 0)
            return forkb_child(child + 6);
        char algo[64];
        int policy, n, mix;
        long per;
        if (sscanf(child, "count:%63[^:]:%d:%d:%ld:%d", algo, &policy, &n, &per, &mix) == 5)
            return count_run(algo, policy, n, per, mix);
        return 127;
    }
    self_path = argv[0];
    th_watchdog(600);
    setenv("LIBLOCK_WARN", "0", 1);
    printf("test_parking: pure-spin warning\n");
    warning_test();
    printf("test_parking: stray unlock\n");
    stray_unlock_test();
    interposed_stray_test(argv[0]);
    printf("test_parking: clh trylock\n");
    clh_trylock_test();
    printf("test_parking: destroy\n");
    destroy_test();
    printf("test_parking: FIFO order of parked waiters\n");
    fifo_order_test();
    printf("test_parking: park/unpark races\n");
    park_races();
    printf("test_parking: fork while lock() callers sleep\n");
    fork_sleepers_test();
    printf("test_parking: oversubscription, default policies\n");
    oversubscription();
    printf("test_parking: condition variables under the interposer, default policies\n");
    interposed_cond_test(argv[0]);
    (void)argc;
    return th_report("test_parking");
}
