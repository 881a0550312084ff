/*
 * parking.h - what the test_parking_*.c programs share: the counting
 * workload (threads doing a fixed number of critical sections, mixing
 * lock/unlock, liblock_execute and trylock, with an exact count and an
 * overlap detector), each configuration run in a fresh process (the test
 * program re-executed with LIBLOCK_PARKING_CHILD=spec, so that
 * process-wide state such as the measured spin budget is that of the
 * environment given), and a lock held while threads queue and park on it
 * one at a time.
 */
#ifndef LIBLOCK_TEST_PARKING_H
#define LIBLOCK_TEST_PARKING_H

#include "harness.h"
#include "internal.h"

#include <stdatomic.h>
#include <sys/syscall.h>

/* The classic locks (the queue and spinning families and their Malthusian
 * variants): what test_parking_oversub and test_parking_destroy cover. */
static const char *const parking_classic[] = {"spin",   "ttas",   "ticket", "clh",    "cna",    "hemlock", "mcs",
                                              "mcs-tp", "posix",  "loiter", "mcscr",  "lifocr", "mcscrn",  "reciprocating", "hapax", "shfllock",
                                              "auto"};
#define PARKING_NCLASSIC (sizeof parking_classic / sizeof *parking_classic)

/* The program itself (argv[0]), re-executed for each configuration. */
static const char *parking_self;

/* ---- the counting workload ---- */
struct parking_shared {
    liblock_t lock;
    volatile long counter;
    volatile int inside;
    _Atomic int violations;
    long per_thread;
    int mix; /* 0 lock/unlock only, 1 lock/execute/trylock mixed */
};

static inline void *parking_cs(void *arg)
{
    struct parking_shared *sh = arg;
    if (sh->inside)
        atomic_fetch_add(&sh->violations, 1);
    sh->inside = 1;
    sh->counter++;
    for (volatile int i = 0; i < 50; i++) /* long enough for waiters to queue up */
        ;
    sh->inside = 0;
    return arg;
}

static pthread_barrier_t parking_count_start;

static inline void *parking_count_worker(void *arg)
{
    struct parking_shared *sh = arg;
    pthread_barrier_wait(&parking_count_start);
    for (long i = 0; i < sh->per_thread; i++) {
        for (volatile int k = 0; k < 50; k++)
            ;
        int how = sh->mix ? (int)(i % 3) : 0;
        if (how == 1) {
            if (liblock_execute(&sh->lock, parking_cs, sh) != sh)
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
        parking_cs(sh);
        liblock_unlock(&sh->lock);
    }
    return NULL;
}

/* Runs in a child: exit 0 if the count is exact. */
static inline int parking_count_run(const char *algo, int policy, int nthreads, long per_thread, int mix)
{
    static struct parking_shared sh;
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
    pthread_barrier_init(&parking_count_start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, parking_count_worker, &sh);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    int ok = sh.counter == per_thread * nthreads && atomic_load(&sh.violations) == 0;
    if (!ok)
        fprintf(stderr, "%s: counter %ld, expected %ld, violations %d\n", algo, sh.counter, per_thread * nthreads,
                atomic_load(&sh.violations));
    return ok && liblock_destroy(&sh.lock) == 0 ? 0 : 1;
}

/* The child side of parking_count_spawn: the exit status for spec
 * "count:ALGO:POLICY:THREADS:PER_THREAD:MIX", 127 for another spec. */
static inline int parking_count_child(const char *spec)
{
    char algo[64];
    int policy, n, mix;
    long per;
    if (sscanf(spec, "count:%63[^:]:%d:%d:%ld:%d", algo, &policy, &n, &per, &mix) == 5)
        return parking_count_run(algo, policy, n, per, mix);
    return 127;
}

/* Run the program again with LIBLOCK_PARKING_CHILD=spec (and
 * LIBLOCK_SPIN_NS=spin_ns unless NULL); check that it exits 0 within 60 s. */
static inline void parking_spawn(const char *what, const char *spec, const char *spin_ns)
{
    char child[192], spin[64];
    snprintf(child, sizeof child, "LIBLOCK_PARKING_CHILD=%s", spec);
    snprintf(spin, sizeof spin, "LIBLOCK_SPIN_NS=%s", spin_ns ? spin_ns : "");
    const char *envs[] = {child, spin_ns ? spin : NULL, NULL};
    pid_t pid = th_spawn(parking_self, envs);
    int rc = pid > 0 ? th_wait_child(pid, 60, what) : -1;
    CHECK(rc == 0, "%s: exit %d", what, rc);
}

/* Runs the child "tag:POLICY" (the program's own child, parsed by its
 * parking_start callback) once per waiting policy a queue lock supports:
 * spin, yield, spin-then-park, and spin-then-park with LIBLOCK_SPIN_NS=0
 * (every waiter parks at once). */
static inline void parking_spawn_policies(const char *tag)
{
    static const struct {
        int policy;
        const char *spin_ns, *what;
    } cfg[] = {
        {LIBLOCK_WAIT_SPIN, NULL, "spin"},
        {LIBLOCK_WAIT_YIELD, NULL, "yield"},
        {LIBLOCK_WAIT_SPIN_THEN_PARK, NULL, "spin-then-park"},
        {LIBLOCK_WAIT_SPIN_THEN_PARK, "0", "spin-then-park, LIBLOCK_SPIN_NS=0"},
    };
    for (size_t i = 0; i < sizeof cfg / sizeof *cfg; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "%s:%d", tag, cfg[i].policy);
        th_context = cfg[i].what;
        parking_spawn(cfg[i].what, spec, cfg[i].spin_ns);
    }
}

/* The counting workload with algo, policy (0: its default), n threads of
 * per critical sections each, mixed or not, in a child. */
static inline void parking_count_spawn(const char *what, const char *algo, int policy, int n, long per, int mix,
                                       const char *spin_ns)
{
    char spec[160];
    snprintf(spec, sizeof spec, "count:%s:%d:%d:%ld:%d", algo, policy, n, per, mix);
    parking_spawn(what, spec, spin_ns);
}

/* The start of a parking test's main.  In a re-executed child
 * (LIBLOCK_PARKING_CHILD=spec): arms the child's watchdog and returns
 * child(spec), its exit status.  In the test itself: records argv[0] for
 * parking_spawn, arms the watchdog (seconds), turns the pure-spin warning
 * off and returns -1. */
static inline int parking_start(char **argv, unsigned seconds, int (*child)(const char *spec))
{
    const char *spec = getenv("LIBLOCK_PARKING_CHILD");
    if (spec) {
        th_watchdog(120);
        return child(spec);
    }
    parking_self = argv[0];
    th_watchdog(seconds);
    setenv("LIBLOCK_WARN", "0", 1);
    return -1;
}

/* ---- a held lock with parked waiters ---- */
/* Initialise *l as algo under spin-then-park, take it, and start k threads
 * running fn(i), each only after the previous one sleeps in the kernel (its
 * /proc state is 'S': with a spin budget of 0 it has queued and parked);
 * fn stores its tid in tids[i].  Non-zero if the lock cannot be made. */
static inline int parking_hold_with_sleepers(liblock_t *l, const char *algo, int k, pthread_t *th,
                                             void *(*fn)(void *), _Atomic pid_t *tids)
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
        while (th_task_sleeping(t) == 0)
            usleep(200);
    }
    return 0;
}

static inline pid_t parking_gettid(void) { return (pid_t)syscall(SYS_gettid); }

/* Under a sanitizer the interposer would have to come after the sanitizer's
 * runtime in the preload order: the interposed tests cannot run there. */
static inline int parking_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    return 1;
#else
    return 0;
#endif
}

#endif
