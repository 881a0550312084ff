/*
 * test_preempt_aware - the preempt-aware waiting policy (src/core/wait.c,
 * "Preemption-aware waiting") decides as its rule says, for every
 * algorithm that offers it, with each mechanism of ll_oncpu_state.
 *
 * The policy's decisions are counted per thread (ll_aware_tls): parks
 * because the thread waited for was preempted, parks because the budget
 * ran out, parks at the cap, and waits that spun past the budget.  Each
 * scenario sets up a holder whose state the scheduler records without
 * doubt, has one waiter wait for it, and asserts which of those the
 * waiter did:
 *  asleep     the holder blocks in read() while it holds the lock: the
 *             waiter parks by the budget rule (never "preempted", never
 *             past the budget), with every mechanism;
 *  preempted  the holder spins while it holds the lock and a SCHED_FIFO
 *             thread pinned on its CPU takes that CPU: with ebpf the
 *             waiter parks because the holder is preempted, never by its
 *             budget (20 ms here; the rule looks at the holder's state
 *             before the clock, so not even a waiter descheduled past its
 *             budget parks by it); with the fallback and none, by the
 *             budget rule;
 *  running    holder and waiter are SCHED_FIFO on two CPUs, the holder
 *             spins 50 ms holding the lock: the waiter spins past its
 *             budget (2 us here) where the algorithm waits for the holder
 *             itself (ttas, mcs), and does not where it does not know that
 *             its predecessor holds the lock (mcscr, mcscrn: they only act
 *             on a preemption); with the fallback and none, it never does
 *             (the policy uses eBPF only: without it, it is
 *             spin-then-park).
 * Root is needed for SCHED_FIFO (preempted, running: SKIP otherwise) and
 * for ebpf (the test loads the program with BUILD/bin/liblock-oncpu when
 * it is not loaded, and unloads it again then).  Two CPUs are needed for
 * preempted and running (SKIP otherwise).  The waits are event-driven
 * (until a thread is seen asleep or preempted), bounded only by the
 * watchdog; no timing is asserted.  Also: the policy's name, the value
 * liblock_getwait returns, and ENOTSUP from algorithms that lack it.
 */
#include "harness.h"
#include "internal.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

static int cpu_a = -1, cpu_b = -1;

static void pick_cpus(void)
{
    cpu_set_t s;
    if (sched_getaffinity(0, sizeof s, &s) != 0)
        return;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &s)) {
            if (cpu_a < 0)
                cpu_a = c;
            else if (cpu_b < 0)
                cpu_b = c;
        }
}

static void relax(void)
{
    for (volatile int i = 0; i < 1000; i++)
        ;
}

static int set_fifo(pthread_t t, int on)
{
    struct sched_param sp = {.sched_priority = on ? 1 : 0};
    return pthread_setschedparam(t, on ? SCHED_FIFO : SCHED_OTHER, &sp);
}

/* ---- the holder: takes the lock, then blocks, spins until told, or spins a while ---- */

enum { H_BLOCK, H_SPIN, H_SPIN_50MS };

struct scene {
    liblock_t lock;
    int how;
    int cpu;             /* the holder's CPU, or -1 */
    int fifo;            /* the holder runs SCHED_FIFO */
    int pipe[2];         /* H_BLOCK: the holder reads one byte */
    _Atomic int held;    /* the holder holds the lock */
    _Atomic int release; /* H_SPIN: let go */
    _Atomic pid_t tid;
    struct ll_aware_counts got; /* the waiter's counts for its one wait */
    _Atomic pid_t wtid;
    _Atomic int wdone;
    int wcpu, wfifo;
};

static void *holder_main(void *arg)
{
    struct scene *s = arg;
    if (s->cpu >= 0)
        ll_pin_self(s->cpu);
    if (s->fifo && set_fifo(pthread_self(), 1) != 0)
        s->fifo = -1;
    atomic_store(&s->tid, gettid_());
    CHECK_EQ(liblock_lock(&s->lock), 0);
    atomic_store(&s->held, 1);
    if (s->how == H_BLOCK) {
        char c;
        CHECK_EQ(read(s->pipe[0], &c, 1), 1);
    } else if (s->how == H_SPIN) {
        while (!atomic_load_explicit(&s->release, memory_order_relaxed))
            ll_pause();
    } else {
        uint64_t end = th_now_ns() + 50000000ull;
        while (th_now_ns() < end)
            ll_pause();
    }
    CHECK_EQ(liblock_unlock(&s->lock), 0);
    return NULL;
}

static void *waiter_main(void *arg)
{
    struct scene *s = arg;
    if (s->wcpu >= 0)
        ll_pin_self(s->wcpu);
    if (s->wfifo && set_fifo(pthread_self(), 1) != 0)
        s->wfifo = -1;
    atomic_store(&s->wtid, gettid_());
    struct ll_aware_counts before = ll_aware_tls;
    CHECK_EQ(liblock_lock(&s->lock), 0);
    struct ll_aware_counts after = ll_aware_tls;
    CHECK_EQ(liblock_unlock(&s->lock), 0);
    s->got.park_off = after.park_off - before.park_off;
    s->got.park_budget = after.park_budget - before.park_budget;
    s->got.park_cap = after.park_cap - before.park_cap;
    s->got.extended = after.extended - before.extended;
    atomic_store(&s->wdone, 1);
    return NULL;
}

static int init_aware(liblock_t *l, const char *algo)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_PREEMPT_AWARE);
    int r = liblock_init(l, algo, &a);
    liblock_attr_destroy(&a);
    return r;
}

static pthread_t start(void *(*fn)(void *), struct scene *s)
{
    pthread_t t;
    if (pthread_create(&t, NULL, fn, s) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
    return t;
}

static void wait_sleeping(_Atomic pid_t *tid)
{
    pid_t t;
    while (!(t = atomic_load(tid)))
        relax();
    while (th_task_sleeping(t) != 1)
        relax();
}

/* the waiter sleeps or is done */
static void wait_waiter_parked(struct scene *s)
{
    pid_t t;
    while (!(t = atomic_load(&s->wtid)))
        relax();
    while (!atomic_load(&s->wdone) && th_task_sleeping(t) != 1)
        relax();
}

static void asleep(const char *algo, const char *mech)
{
    struct scene s = {.how = H_BLOCK, .cpu = cpu_b, .wcpu = cpu_a};
    CHECK_EQ(init_aware(&s.lock, algo), 0);
    CHECK_EQ(pipe(s.pipe), 0);
    pthread_t h = start(holder_main, &s);
    while (!atomic_load(&s.held))
        relax();
    wait_sleeping(&s.tid);
    pthread_t w = start(waiter_main, &s);
    wait_waiter_parked(&s);
    CHECK_EQ(write(s.pipe[1], "x", 1), 1);
    pthread_join(h, NULL);
    pthread_join(w, NULL);
    printf("  %s %s asleep: off %lu budget %lu cap %lu extended %lu\n", mech, algo, s.got.park_off,
           s.got.park_budget, s.got.park_cap, s.got.extended);
    /* (on one CPU the restricting locks park at once behind a thread of
     * their own CPU, before any budget: cr.h, "Same-CPU waiters") */
    if (cpu_b >= 0 || strncmp(algo, "mcscr", 5) != 0)
        CHECK(s.got.park_budget >= 1, "%s: behind a sleeping holder the waiter did not park by the budget", algo);
    CHECK_EQ(s.got.park_off, 0ul);
    CHECK_EQ(s.got.extended, 0ul);
    close(s.pipe[0]);
    close(s.pipe[1]);
    CHECK_EQ(liblock_destroy(&s.lock), 0);
}

static void *fifo_main(void *arg)
{
    _Atomic int *ctl = arg; /* stop, running */
    atomic_store(&ctl[1], 1);
    while (!atomic_load_explicit(&ctl[0], memory_order_relaxed))
        ;
    return NULL;
}

static void preempted(const char *algo, const char *mech)
{
    struct scene s = {.how = H_SPIN, .cpu = cpu_b, .wcpu = cpu_a};
    CHECK_EQ(init_aware(&s.lock, algo), 0);
    pthread_t h = start(holder_main, &s);
    while (!atomic_load(&s.held))
        relax();
    pthread_attr_t at;
    struct sched_param sp = {.sched_priority = 1};
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu_b, &one);
    pthread_attr_init(&at);
    pthread_attr_setinheritsched(&at, PTHREAD_EXPLICIT_SCHED);
    pthread_attr_setschedpolicy(&at, SCHED_FIFO);
    pthread_attr_setschedparam(&at, &sp);
    pthread_attr_setaffinity_np(&at, sizeof one, &one);
    _Atomic int ctl[2] = {0, 0};
    pthread_t f;
    int e = pthread_create(&f, &at, fifo_main, ctl);
    pthread_attr_destroy(&at);
    CHECK(e == 0, "SCHED_FIFO thread: %s", strerror(e));
    if (e) {
        atomic_store(&s.release, 1);
        pthread_join(h, NULL);
        liblock_destroy(&s.lock);
        return;
    }
    while (!atomic_load(&ctl[1]))
        relax();
    /* the holder is preempted from now on; with ebpf, wait until its byte says so */
    if (strcmp(mech, "ebpf") == 0)
        while (ll_oncpu_state(atomic_load(&s.tid)) != LL_ONCPU_B_PREEMPTED - 1)
            relax();
    pthread_t w = start(waiter_main, &s);
    wait_waiter_parked(&s);
    atomic_store(&s.release, 1);
    atomic_store(&ctl[0], 1);
    pthread_join(f, NULL);
    pthread_join(h, NULL);
    pthread_join(w, NULL);
    printf("  %s %s preempted: off %lu budget %lu cap %lu extended %lu\n", mech, algo, s.got.park_off,
           s.got.park_budget, s.got.park_cap, s.got.extended);
    if (strcmp(mech, "ebpf") == 0) {
        CHECK(s.got.park_off >= 1, "%s: behind a preempted holder the waiter did not park for it", algo);
        CHECK_EQ(s.got.park_budget, 0ul);
    } else {
        CHECK(s.got.park_budget >= 1, "%s: %s: the waiter did not park by the budget", algo, mech);
        CHECK_EQ(s.got.park_off, 0ul);
    }
    CHECK_EQ(s.got.extended, 0ul);
    CHECK_EQ(liblock_destroy(&s.lock), 0);
}

static void running(const char *algo, const char *mech, int extends)
{
    struct scene s = {.how = H_SPIN_50MS, .cpu = cpu_b, .fifo = 1, .wcpu = cpu_a, .wfifo = 1};
    CHECK_EQ(init_aware(&s.lock, algo), 0);
    pthread_t h = start(holder_main, &s);
    while (!atomic_load(&s.held))
        relax();
    pthread_t w = start(waiter_main, &s);
    pthread_join(h, NULL);
    pthread_join(w, NULL);
    CHECK(s.fifo == 1 && s.wfifo == 1, "SCHED_FIFO refused");
    printf("  %s %s running: off %lu budget %lu cap %lu extended %lu\n", mech, algo, s.got.park_off,
           s.got.park_budget, s.got.park_cap, s.got.extended);
    CHECK(s.got.park_off + s.got.park_budget + s.got.park_cap + s.got.extended >= 1,
          "%s: %s: the waiter did not wait (the holder was done before it started)", algo, mech);
    if (extends && strcmp(mech, "ebpf") == 0)
        CHECK(s.got.extended >= 1, "%s: %s: behind a running holder the waiter did not spin past its budget", algo,
              mech);
    else
        CHECK_EQ(s.got.extended, 0ul);
    /* (not asserted: no park for a preemption -- a SCHED_FIFO holder can
     * still be switched out briefly by the kernel's own stop-class work) */
    CHECK_EQ(liblock_destroy(&s.lock), 0);
}

static int in_child(const char *mech, const char *spin_ns, int which)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        th_checks = th_failures = 0;
        setenv("LIBLOCK_ONCPU", mech, 1);
        setenv("LIBLOCK_SPIN_NS", spin_ns, 1);
        th_context = mech;
        /* off the holder's CPU: a SCHED_FIFO thread there (the holder, or
         * the thread that preempts it) would starve this one, which starts
         * the waiter */
        if (cpu_a >= 0)
            ll_pin_self(cpu_a);
        CHECK(strcmp(ll_oncpu_mechanism(), mech) == 0, "mechanism %s (%s)", ll_oncpu_mechanism(),
              ll_oncpu_reason());
        for (const char *const *a = liblock_algorithms(); *a; a++) {
            liblock_algorithm_info_t in;
            if (liblock_algorithm_info(*a, &in) != 0 || !(in.policies & (1u << LIBLOCK_WAIT_PREEMPT_AWARE)))
                continue;
            int extends = strcmp(*a, "ttas") == 0 || strcmp(*a, "mcs") == 0 || strcmp(*a, "auto") == 0; /* auto: on ttas */
            if (which == 0)
                asleep(*a, mech);
            else if (which == 1)
                preempted(*a, mech);
            else
                running(*a, mech, extends);
        }
        printf("%s: %d checks, %d failed\n", mech, th_checks, th_failures);
        fflush(stdout);
        _exit(th_failures ? 1 : 0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int helper(const char *self, const char *cmd)
{
    char path[4096], line[4200];
    th_sibling_path(self, "../bin/liblock-oncpu", path, sizeof path);
    snprintf(line, sizeof line, "'%s' %s", path, cmd);
    fflush(stdout);
    int r = system(line);
    return WIFEXITED(r) ? WEXITSTATUS(r) : 128;
}

static void api(void)
{
    th_context = "api";
    CHECK(strcmp(liblock_wait_name(LIBLOCK_WAIT_PREEMPT_AWARE), "preempt-aware") == 0, "name");
    int p = -1;
    CHECK_EQ(liblock_wait_parse("preempt-aware", &p), 0);
    CHECK_EQ(p, LIBLOCK_WAIT_PREEMPT_AWARE);
    int offered = 0;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        liblock_algorithm_info_t in;
        CHECK_EQ(liblock_algorithm_info(*a, &in), 0);
        liblock_t l;
        int r = init_aware(&l, *a);
        if (in.policies & (1u << LIBLOCK_WAIT_PREEMPT_AWARE)) {
            offered++;
            CHECK(r == 0, "%s: init with preempt-aware: %d", *a, r);
            if (r == 0) {
                int got = -1;
                CHECK_EQ(liblock_getwait(&l, &got), 0);
                CHECK(got == LIBLOCK_WAIT_PREEMPT_AWARE, "%s: getwait %d", *a, got);
                CHECK_EQ(liblock_destroy(&l), 0);
            }
        } else {
            CHECK(r == ENOTSUP, "%s: preempt-aware not offered, init gave %d", *a, r);
            if (r == 0)
                liblock_destroy(&l);
        }
    }
    CHECK(offered >= 4, "only %d algorithms offer preempt-aware", offered);
}

int main(int argc, char **argv)
{
    (void)argc;
    th_watchdog(240);
    pick_cpus();
    api();
    int root = geteuid() == 0, two = cpu_b >= 0, loaded_here = 0;
    const char *mechs[3] = {"none", "fallback", "ebpf"};
    for (int m = 0; m < 3; m++) {
        if (m == 2) {
            if (!root) {
                th_skip("ebpf: not root");
                continue;
            }
            if (helper(argv[0], "status >/dev/null") != 0) {
                int r = helper(argv[0], "load >/dev/null");
                CHECK(r == 0, "liblock-oncpu load exited %d", r);
                if (r != 0)
                    continue;
                loaded_here = 1;
            }
        }
        CHECK_EQ(in_child(mechs[m], "20000000", 0), 0);
        if (!two) {
            th_skip("%s: preempted and running: one CPU only", mechs[m]);
            continue;
        }
        if (!root) {
            th_skip("%s: preempted and running: SCHED_FIFO needs root", mechs[m]);
            continue;
        }
        CHECK_EQ(in_child(mechs[m], "20000000", 1), 0);
        CHECK_EQ(in_child(mechs[m], "2000", 2), 0);
    }
    if (loaded_here)
        CHECK_EQ(helper(argv[0], "unload >/dev/null"), 0);
    return th_report("test_preempt_aware");
}
