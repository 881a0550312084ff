/*
 * test_release_race - one release against one sleeper, for every algorithm
 * under its default waiting policy (no lost wake-up).
 *
 * A stress of many threads hides most lost wake-ups: a sleeper that a
 * release missed is usually woken by the next release, which comes within
 * microseconds, so the program only slows down.  Here each round has
 * exactly one release that can wake the sleeper:
 *   the main thread takes the lock; a second thread (persistent, told by a
 *   flag) arrives with lock()/unlock() (even rounds) or execute() (odd
 *   rounds) and, with the spin budget at its minimum (LIBLOCK_SPIN_NS=0),
 *   goes to sleep at once; the main thread holds the lock for a random
 *   0-16 us, so the arrival's way into the kernel overlaps the release in
 *   some rounds and follows it in others; then it unlocks, once.  The
 *   arrival must finish; a missed wake-up leaves it asleep with the lock
 *   free, and its round misses a 5 s bound (nothing else can take that long:
 *   the round's work is two empty critical sections).
 * The same for condition variables (algorithms with LIBLOCK_PROP_COND): the
 * arrival takes the lock, says so, and waits on a condition (untimed) for
 * the round's flag; the main thread waits until it has said so, pauses a
 * random 0-4 us, takes the lock (which the waiter gave up inside its
 * wait), sets the flag and signals once, under the lock (even rounds) or
 * after releasing it (odd rounds), on both kinds of condition variable
 * (the POSIX-backed one and the explicit FIFO queue of cond_lifo.c, the
 * interposer's default).  The one signal must wake the waiter,
 * or, where the condition requeues waiters onto the lock (mcs), the one
 * hand-over that follows must.
 * For an RCL server (LIBLOCK_PROP_SERVER) also one reply against one
 * client going to sleep: each round the arrival delegates a critical
 * section that spins a random 0-8 us on the server, while the arrival,
 * with the spin budget at its minimum, goes to sleep after its first polls;
 * the one reply must wake it.  Both protocols of src/runtime/rcl/client.c,
 * "Parking": spin-then-park (asymmetric: a plain store of the reply, the
 * sleeper's membarrier) and park (symmetric: the reply's exchange).
 * Checked to fail: without the sleeper's heavy barrier (park_reply in
 * src/runtime/rcl/client.c) the asymmetric configuration strands the arrival
 * within a few hundred to two thousand rounds.
 * For hybcomb the same race with a combiner's reply: each round the main
 * thread calls execute(), and its own critical section, run as combiner
 * with its node open for requests, lets the arrival go and waits until it
 * has registered; the arrival's request (spinning a random 0-32 us) is then
 * run by the main thread as combiner and answered with one message on the
 * arrival's reply lane, while the arrival, spin budget at its minimum,
 * goes to sleep on that lane.  Both protocols of src/runtime/transport/mailbox.h,
 * "Parking": asymmetric (the default; a plain store of the reply, the
 * sleeper's membarrier) and symmetric (LIBLOCK_HYBCOMB_ASYM=0: the reply's
 * exchange).  Checked to fail: with the combiner's look at `parked` taken
 * out of ll_mbox_post_announced the asymmetric configuration strands the
 * arrival (at round 3).  Not caught here: the heavy barrier taken out of
 * ll_fastwake_announce (200,000 rounds passed on a 2-CPU x86 VM).  The
 * sleeper's CAS of LL_PARKED into tail and the kernel's compare in
 * futex_wait read the very word the reply stores, so the store-buffering
 * window the barrier closes is only as long as the reply's store waits in
 * the combiner's store buffer, shorter than the sleeper's way into the
 * kernel; the barrier is what the argument (mailbox.h, "Parking") needs.
 * Configurations: every algorithm with its default policy; for
 * flat-combining also a fresh lock every round (each round's first sleep
 * then also switches the lock's releases from a plain store to an exchange,
 * src/locks/combining/fc_park.h, "Asymmetric") and the symmetric protocol
 * (LIBLOCK_FC_ASYM=0).  Checked to fail: fc_park.h without the heavy
 * barrier at that switch, or without any barrier, strands the arrival
 * within a few thousand rounds.
 * Usage: test_release_race [ALGO...] (or LIBLOCK_TEST_ALGOS).
 */
#include "harness.h"
#include "internal.h"
#include "hybcomb_stats.h"

#include <sched.h>
#include <sys/resource.h>

static liblock_t L;
static volatile int inside;
static _Atomic long violations, errors, cs_count;
static _Atomic long race_go, race_done;

static void *cs(void *arg)
{
    (void)arg;
    if (inside)
        atomic_fetch_add(&violations, 1);
    inside = 1;
    atomic_fetch_add_explicit(&cs_count, 1, memory_order_relaxed);
    inside = 0;
    return (void *)0x5a;
}

static liblock_cond_t C;
static _Atomic long cond_flag, cond_ready;
static int cond_mode; /* the arrival waits on C instead of racing for the lock: 1 the POSIX-backed kind,
                         2 the explicit queue in FIFO order (the interposer's default) */

/* reply races: the arrival's critical section spins this long on the
 * server (reply_mode 1, RCL) or the combiner (reply_mode 2, hybcomb) */
static int reply_mode;
static _Atomic long reply_ns;
static int lock_policy = -1; /* -1: the default policy */

static void *spin_cs(void *arg)
{
    uint64_t until = th_now_ns() + (uint64_t)atomic_load_explicit(&reply_ns, memory_order_relaxed);
    while (th_now_ns() < until)
        ll_pause();
    return cs(arg);
}

/* reply_mode 2: the main thread's own critical section as combiner (its
 * node is open): let the arrival go, and wait until its request is
 * registered on our node, so that we run it and reply in this pass */
static void *combiner_cs(void *arg)
{
    atomic_store(&race_go, (long)(intptr_t)arg);
    uint64_t deadline = th_now_ns() + 5000000000ull;
    while (hc_tail_ops(&L) < 1)
        if (th_now_ns() > deadline) {
            atomic_fetch_add(&errors, 1); /* the arrival did not register: counted, the round then hangs */
            break;
        }
    return (void *)0x77;
}

static int cpus[2] = {-1, -1};
static long racer_sleeps;

static void *racer(void *arg)
{
    if (arg && cpus[1] >= 0)
        (void)ll_pin_self(cpus[1]);
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    long seen = 0;
    for (;;) {
        long g;
        while ((g = atomic_load(&race_go)) == seen) {
            if (reply_mode)
                sched_yield(); /* main may share our CPU (off the server's) */
            else
                ll_pause();
        }
        if (g < 0) {
            getrusage(RUSAGE_THREAD, &r1);
            racer_sleeps = r1.ru_nvcsw - r0.ru_nvcsw;
            return NULL;
        }
        seen = g;
        if (reply_mode) {
            if (liblock_execute(&L, spin_cs, NULL) != (void *)0x5a)
                atomic_fetch_add(&errors, 1);
        } else if (cond_mode) {
            int e = liblock_lock(&L);
            atomic_store(&cond_ready, g);
            while (!e && atomic_load(&cond_flag) != g)
                e = liblock_cond_wait(&C, &L);
            if (e || liblock_unlock(&L))
                atomic_fetch_add(&errors, 1);
        } else if (g & 1) {
            if (liblock_execute(&L, cs, NULL) != (void *)0x5a)
                atomic_fetch_add(&errors, 1);
        } else if (liblock_lock(&L) == 0) {
            cs(NULL);
            if (liblock_unlock(&L))
                atomic_fetch_add(&errors, 1);
        } else {
            atomic_fetch_add(&errors, 1);
        }
        atomic_store(&race_done, seen);
    }
}

static int init_lock(const char *algo)
{
    if (lock_policy < 0)
        return liblock_init(&L, algo, NULL); /* default attributes: the default policy */
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, lock_policy);
    return liblock_init(&L, algo, &a);
}

/* Returns 0, or -1 when the lock could not be made (a failed check: every
 * algorithm takes its default policy, and another is asked for only where
 * the algorithm lists it). */
static int race(const char *what, const char *algo, int fresh, int rounds, int pin)
{
    th_context = what;
    int err = init_lock(algo);
    CHECK(err == 0, "liblock_init: %s", strerror(err));
    if (err)
        return -1;
    if (cond_mode == 1) {
        CHECK_EQ(liblock_cond_init(&C, NULL), 0);
    } else if (cond_mode == 2) {
        liblock_condattr_t ca;
        CHECK_EQ(liblock_condattr_init(&ca), 0);
        CHECK_EQ(liblock_condattr_setfifo(&ca, 1.0), 0);
        CHECK_EQ(liblock_cond_init(&C, &ca), 0);
    }
    if (reply_mode == 1)
        CHECK_EQ(liblock_thread_register(&L), 0); /* off the server's CPU, as the arrival */
    atomic_store(&race_go, 0);
    atomic_store(&race_done, 0);
    atomic_store(&cond_flag, 0);
    atomic_store(&cond_ready, 0);
    atomic_store(&cs_count, 0);
    atomic_store(&violations, 0);
    atomic_store(&errors, 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, racer, pin ? (void *)1 : NULL), 0);
    unsigned seed = 12345;
    long r;
    int stuck = 0;
    uint64_t t0 = th_now_ns();
    for (r = 1; r <= rounds && !stuck; r++) {
        if (fresh && r > 1) {
            CHECK_EQ(liblock_destroy(&L), 0);
            CHECK_EQ(init_lock(algo), 0);
        }
        seed = seed * 1103515245u + 12345u;
        uint64_t pause_ns = (seed >> 16) % (cond_mode ? 4000 : 16000); /* a waiter is asleep within ~4 us */
        uint64_t deadline = th_now_ns() + 5000000000ull;
        if (reply_mode == 1) {
            atomic_store(&reply_ns, (long)((seed >> 16) % 8000));
            atomic_store(&race_go, r);
        } else if (reply_mode == 2) {
            /* longer than the rcl range: the sleeper's membarrier alone
             * takes microseconds, and the reply must also come after it */
            atomic_store(&reply_ns, (long)((seed >> 16) % 32000));
            if (liblock_execute(&L, combiner_cs, (void *)(intptr_t)r) != (void *)0x77)
                atomic_fetch_add(&errors, 1);
        } else if (cond_mode) {
            atomic_store(&race_go, r);
            while (atomic_load(&cond_ready) != r && th_now_ns() < deadline)
                ll_pause();
            uint64_t until = th_now_ns() + pause_ns;
            while (th_now_ns() < until)
                ll_pause();
            CHECK_EQ(liblock_lock(&L), 0);
            atomic_store(&cond_flag, r);
            if (r & 1) {
                CHECK_EQ(liblock_unlock(&L), 0);
                CHECK_EQ(liblock_cond_signal(&C), 0);
            } else {
                CHECK_EQ(liblock_cond_signal(&C), 0);
                CHECK_EQ(liblock_unlock(&L), 0);
            }
        } else {
            CHECK_EQ(liblock_lock(&L), 0);
            cs(NULL);
            atomic_store(&race_go, r);
            uint64_t until = th_now_ns() + pause_ns;
            while (th_now_ns() < until)
                ll_pause();
            CHECK_EQ(liblock_unlock(&L), 0);
        }
        while (atomic_load(&race_done) != r) {
            if (th_now_ns() > deadline) {
                stuck = 1;
                break;
            }
            sched_yield();
        }
    }
    if (stuck) {
        CHECK(0, "round %ld (%s): the arrival was never woken (the lock is free)", r - 1,
              reply_mode ? "reply"
              : cond_mode ? ((r - 1) & 1 ? "cond, signal after unlock" : "cond, signal under the lock")
                          : ((r - 1) & 1 ? "execute" : "lock"));
        fflush(stdout);
        th_report("test_release_race");
        _exit(1); /* the arrival sleeps for ever: no clean way on */
    }
    atomic_store(&race_go, -1);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(atomic_load(&cs_count), cond_mode ? 0 : reply_mode ? rounds : 2L * rounds);
    CHECK_EQ(atomic_load(&violations), 0);
    CHECK_EQ(atomic_load(&errors), 0);
    if (cond_mode)
        CHECK_EQ(liblock_cond_destroy(&C), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
    printf("  %-38s %6d rounds, the arrival slept %6ld times, %.2f s\n", what, rounds, racer_sleeps,
           (th_now_ns() - t0) / 1e9);
    /* with one CPU the arrival runs only when the main thread yields, after its release */
    CHECK(!pin || cpus[1] < 0 || racer_sleeps > 0, "the arrival never slept: nothing raced");
    return 0;
}

/* The main thread and the arrival on two different CPUs of our set, so
 * that the release and the sleep really run at the same time. */
static cpu_set_t orig_set;

static void pick_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return;
    orig_set = set;
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    if (n < 2)
        cpus[0] = cpus[1] = -1; /* one CPU: no pinning */
}

int main(int argc, char **argv)
{
    th_watchdog(300);
    setenv("LIBLOCK_SPIN_NS", "0", 1); /* read once, at the first wait: arrivals sleep at once */
    setenv("LIBLOCK_WARN", "0", 1);
    int rounds = th_scale_small() ? 1000 : 4000;
    pick_cpus();
    if (cpus[0] >= 0)
        (void)ll_pin_self(cpus[0]);
    else
        rounds = 50; /* one CPU: nothing runs at the same time, and each round waits for a tick */
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        char what[96];
        snprintf(what, sizeof what, "%s, default policy", *a);
        liblock_algorithm_info_t info;
        CHECK_EQ(liblock_algorithm_info(*a, &info), 0);
        if (info.properties & LIBLOCK_PROP_SERVER) {
            /* the server has a CPU of its own: main and arrival share the
             * rest (on 2 CPUs, one), and each round costs scheduler rounds */
            (void)sched_setaffinity(0, sizeof orig_set, &orig_set);
            race(what, *a, 0, rounds / 40, 0);
            /* one reply against one sleeper (the header), main and arrival
             * off the server's CPU: register makes main a client, which
             * narrows its affinity as it does the arrival's */
            reply_mode = 1;
            snprintf(what, sizeof what, "%s, reply against a parking client", *a);
            if (race(what, *a, 0, rounds, 0) == 0 && (info.policies & (1u << LIBLOCK_WAIT_PARK))) {
                lock_policy = LIBLOCK_WAIT_PARK;
                snprintf(what, sizeof what, "%s, reply against park (symmetric)", *a);
                race(what, *a, 0, rounds, 0);
                lock_policy = -1;
            }
            reply_mode = 0;
            (void)sched_setaffinity(0, sizeof orig_set, &orig_set);
            if (cpus[0] >= 0)
                (void)ll_pin_self(cpus[0]);
            continue;
        }
        race(what, *a, 0, rounds, 1);
        if (info.properties & LIBLOCK_PROP_COND) {
            snprintf(what, sizeof what, "%s, condition variable", *a);
            cond_mode = 1;
            race(what, *a, 0, rounds, 1);
            snprintf(what, sizeof what, "%s, queue condition variable", *a);
            cond_mode = 2;
            race(what, *a, 0, rounds, 1);
            cond_mode = 0;
        }
        if (strcmp(*a, "flat-combining") == 0) {
            race("flat-combining, fresh lock per round", *a, 1, rounds * 4, 1);
            setenv("LIBLOCK_FC_ASYM", "0", 1);
            race("flat-combining, symmetric", *a, 0, rounds, 1);
            unsetenv("LIBLOCK_FC_ASYM");
        }
        if (strcmp(*a, "hybcomb") == 0) {
            /* one reply against one sleeping client (the header) */
            reply_mode = 2;
            race("hybcomb, reply against a parking one", *a, 0, rounds, 1);
            setenv("LIBLOCK_HYBCOMB_ASYM", "0", 1); /* read at liblock_init */
            race("hybcomb, reply, symmetric", *a, 0, rounds, 1);
            unsetenv("LIBLOCK_HYBCOMB_ASYM");
            reply_mode = 0;
        }
    }
    return th_report("test_release_race");
}
