/*
 * test_oncpu - ll_oncpu (src/platform/oncpu.c) says whether a thread is on a
 * CPU, for each mechanism: ebpf, fallback and none.
 *
 *   test_oncpu [MECHANISM...]     default: fallback none ebpf
 *
 * Each mechanism runs in its own child process with LIBLOCK_ONCPU set (the
 * mechanism is chosen once per process).  With ebpf or fallback:
 *  - the calling thread is reported running (it is);
 *  - a thread spinning on another CPU than the caller is eventually
 *    reported 1; the same thread blocked in read() on a pipe is eventually
 *    0; running again, 1 again;
 *  - the spinning thread preempted by a SCHED_FIFO thread pinned on its CPU
 *    is eventually 0, and 1 again once that thread stops (root only: SKIP
 *    otherwise);
 *  - ll_oncpu_state: with ebpf, that preempted thread is eventually 2
 *    (preempted) and the thread blocked in read() eventually 0 (asleep);
 *    with the fallback the blocked thread is 0 and it never says 2;
 *  - a thread that returned and was joined is eventually 0;
 *  - the parent process, blocked in waitpid: eventually 0 with ebpf (its
 *    tid is in another process), -1 with the fallback (another process's
 *    thread clock is refused);
 *  - tids <= 0 are -1.
 * With none, every tid is -1.  Only with ebpf does the process map the BPF
 * map, and only from its first call on (nothing happens at start-up).
 * "Eventually": polled until seen, bounded only by a 30 s deadline that a
 * working mechanism never reaches (one context switch suffices), so no
 * timing is asserted.  A value seen once is not asserted to stay.
 *
 * ebpf needs root: the test loads the program with BUILD/bin/liblock-oncpu
 * when it is not loaded and unloads it at the end only then; and, only
 * then, checks that a thread of a process blocked since before the load
 * (it never switches afterwards) is eventually 0 and, once woken to spin,
 * 1; and that a process that mapped the map reads -1 after the
 * unload, and that LIBLOCK_ONCPU=ebpf without a map gives none.  Not root:
 * SKIP for the ebpf parts, and LIBLOCK_ONCPU=ebpf gives none.
 */
#include "harness.h"
#include "internal.h"

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#define DEADLINE_NS (30ull * 1000000000ull)

static pid_t gettid_(void) { return (pid_t)syscall(SYS_gettid); }

static const char *mech_now = "";

/* until ll_oncpu_state(tid) == want; 1 if seen before the deadline */
static int eventually_state(pid_t tid, int want)
{
    uint64_t end = th_now_ns() + DEADLINE_NS;
    while (th_now_ns() < end) {
        if (ll_oncpu_state(tid) == want)
            return 1;
        for (volatile int i = 0; i < 1000; i++)
            ;
    }
    return 0;
}

/* until ll_oncpu(tid) == want; 1 if seen before the deadline */
static int eventually(pid_t tid, int want)
{
    uint64_t end = th_now_ns() + DEADLINE_NS;
    while (th_now_ns() < end) {
        if (ll_oncpu(tid) == want)
            return 1;
        for (volatile int i = 0; i < 1000; i++)
            ;
    }
    return 0;
}

static int cpu_a = -1, cpu_b = -1; /* two CPUs this process may run on */

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

/* ---- the worker: spins, or blocks in read() while asked to ---- */

struct worker {
    _Atomic pid_t tid;
    _Atomic int mode; /* 0 spin, 1 block in read, 2 leave */
    int pipe[2];
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    atomic_store(&w->tid, gettid_());
    for (;;) {
        int m = atomic_load_explicit(&w->mode, memory_order_relaxed);
        if (m == 2)
            break;
        if (m == 1) {
            char c;
            if (read(w->pipe[0], &c, 1) != 1)
                break;
            int one = 1; /* back to spinning, unless told to leave meanwhile */
            atomic_compare_exchange_strong(&w->mode, &one, 0);
        }
    }
    return NULL;
}

static void *fifo_main(void *arg)
{
    _Atomic int *stop = arg;
    uint64_t end = th_now_ns() + 5000000000ull; /* bounded: it starves its CPU */
    atomic_store(&stop[1], 1);                   /* running */
    while (!atomic_load_explicit(stop, memory_order_relaxed) && th_now_ns() < end)
        ;
    return NULL;
}

static void preempted_check(struct worker *w, pid_t wt)
{
    if (geteuid() != 0) {
        th_skip("preempted by SCHED_FIFO: not root");
        return;
    }
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
    _Atomic int ctl[2] = {0, 0}; /* stop, running */
    pthread_t f;
    int e = pthread_create(&f, &at, fifo_main, ctl);
    pthread_attr_destroy(&at);
    if (e != 0) {
        th_skip("preempted by SCHED_FIFO: pthread_create: %s", strerror(e));
        return;
    }
    while (!atomic_load(&ctl[1]))
        ;
    CHECK(eventually(wt, 0), "the spinning worker preempted by a SCHED_FIFO thread on its CPU is not seen off");
    if (strcmp(mech_now, "ebpf") == 0)
        CHECK(eventually_state(wt, 2), "the preempted worker is not seen preempted (state %d)", ll_oncpu_state(wt));
    else
        CHECK(ll_oncpu_state(wt) != 2, "the fallback says preempted");
    atomic_store(&ctl[0], 1);
    pthread_join(f, NULL);
    CHECK(eventually(wt, 1), "the worker is not seen running again after the SCHED_FIFO thread left");
    (void)w;
}

/* whether this process maps a BPF map */
static int maps_bpf(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int found = 0;
    while (f && fgets(line, sizeof line, f))
        found |= strstr(line, "anon_inode:bpf-map") != NULL;
    if (f)
        fclose(f);
    return found;
}

static int run_checks(const char *mech)
{
    th_context = mech;
    mech_now = mech;
    if (strcmp(mech, "ebpf") == 0)
        CHECK(!maps_bpf(), "the map is mapped before the first call");
    CHECK(strcmp(ll_oncpu_mechanism(), mech) == 0, "mechanism %s (%s)", ll_oncpu_mechanism(), ll_oncpu_reason());
    printf("%s: %s\n", mech, ll_oncpu_reason());
    CHECK(maps_bpf() == (strcmp(mech, "ebpf") == 0), "the map is %smapped after the first call",
          maps_bpf() ? "" : "not ");
    CHECK_EQ(ll_oncpu(0), -1);
    CHECK_EQ(ll_oncpu(-3), -1);
    if (strcmp(mech, "none") == 0) {
        CHECK_EQ(ll_oncpu(gettid_()), -1);
        CHECK_EQ(ll_oncpu(getppid()), -1);
    } else {
        CHECK_EQ(ll_oncpu(gettid_()), 1);
    }

    struct worker w = {0};
    if (pipe(w.pipe) != 0) {
        CHECK(0, "pipe: %s", strerror(errno));
        return 1;
    }
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    int two = cpu_b >= 0;
    if (two) {
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpu_a, &one);
        ll_pin_self(cpu_a);
        CPU_ZERO(&one);
        CPU_SET(cpu_b, &one);
        pthread_attr_setaffinity_np(&at, sizeof one, &one);
    }
    CHECK_EQ(pthread_create(&t, &at, worker_main, &w), 0);
    pthread_attr_destroy(&at);
    pid_t wt;
    while (!(wt = atomic_load(&w.tid)))
        ;
    if (strcmp(mech, "none") == 0) {
        CHECK_EQ(ll_oncpu(wt), -1);
    } else {
        if (two)
            CHECK(eventually(wt, 1), "a spinning thread is not seen running");
        else
            th_skip("%s: a spinning thread seen running: one CPU only", mech);
        atomic_store(&w.mode, 1);
        CHECK(eventually(wt, 0), "a thread blocked in read() is not seen off");
        CHECK(eventually_state(wt, 0), "a thread blocked in read() is not seen asleep (state %d)", ll_oncpu_state(wt));
        CHECK_EQ(write(w.pipe[1], "x", 1), 1);
        if (two) {
            CHECK(eventually(wt, 1), "the thread is not seen running again after its read()");
            preempted_check(&w, wt);
        }
    }
    atomic_store(&w.mode, 2);
    CHECK_EQ(write(w.pipe[1], "x", 1), 1); /* in case it blocks again */
    pthread_join(t, NULL);
    if (strcmp(mech, "none") != 0) {
        CHECK(eventually(wt, 0), "a joined thread is not seen off");
        if (strcmp(mech, "ebpf") == 0)
            CHECK(eventually(getppid(), 0), "the parent, blocked in waitpid, is not seen off");
        else
            CHECK_EQ(ll_oncpu(getppid()), -1);
    }
    close(w.pipe[0]);
    close(w.pipe[1]);
    return th_failures ? 1 : 0;
}

static int in_child(const char *mech)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* not outliving a parent killed by its watchdog */
        th_checks = th_failures = 0;      /* the child's own count */
        setenv("LIBLOCK_ONCPU", mech, 1);
        int r = run_checks(mech);
        printf("%s: %d checks, %d failed\n", mech, th_checks, th_failures);
        fflush(stdout);
        _exit(r);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* a child that forces ebpf: its mechanism and reason, through a pipe */
static void forced_ebpf_gives_none(void)
{
    int fd[2];
    if (pipe(fd) != 0)
        return;
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        setenv("LIBLOCK_ONCPU", "ebpf", 1);
        dprintf(fd[1], "%s|%s", ll_oncpu_mechanism(), ll_oncpu_reason());
        _exit(ll_oncpu(gettid_()) == -1 ? 0 : 1);
    }
    close(fd[1]);
    char buf[400] = "";
    ssize_t n = read(fd[0], buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd[0]);
    int st;
    waitpid(p, &st, 0);
    th_context = "forced ebpf, no map";
    CHECK(strncmp(buf, "none|none: LIBLOCK_ONCPU=ebpf but ", 34) == 0, "got '%s'", buf);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ll_oncpu is not -1 there");
}

/* A thread blocked since before the load (it never switches afterwards)
 * is eventually 0; once woken to spin on another CPU, 1.  Told `go` after
 * the load; before it, nothing here calls ll_oncpu. */
static int before_load(int ready, int go)
{
    struct worker w = {0};
    pthread_t t;
    if (pipe(w.pipe) != 0)
        return 1;
    atomic_store(&w.mode, 1);
    if (pthread_create(&t, NULL, worker_main, &w) != 0)
        return 1;
    pid_t wt;
    while (!(wt = atomic_load(&w.tid)))
        ;
    char c;
    if (write(ready, "r", 1) != 1 || read(go, &c, 1) != 1)
        return 1;
    setenv("LIBLOCK_ONCPU", "ebpf", 1);
    th_context = "ebpf, a thread from before the load";
    CHECK(eventually(wt, 0), "a thread blocked since before the load: ll_oncpu = %d (%s)", ll_oncpu(wt),
          ll_oncpu_reason());
    if (cpu_b >= 0) {
        ll_pin_self(cpu_a);
        ll_pin_thread(t, cpu_b);
    }
    CHECK_EQ(write(w.pipe[1], "x", 1), 1); /* it spins from now on */
    if (cpu_b >= 0)
        CHECK(eventually(wt, 1), "the thread from before the load is not seen running once it spins");
    atomic_store(&w.mode, 2);
    CHECK_EQ(write(w.pipe[1], "x", 1), 1);
    pthread_join(t, NULL);
    fflush(stdout);
    return th_failures ? 1 : 0;
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

int main(int argc, char **argv)
{
    th_watchdog(240);
    pick_cpus();
    const char *dflt[] = {"fallback", "none", "ebpf"};
    const char **mechs = argc > 1 ? (const char **)argv + 1 : dflt;
    int n = argc > 1 ? argc - 1 : 3, ran = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(mechs[i], "ebpf") != 0) {
            CHECK_EQ(in_child(mechs[i]), 0);
            ran++;
            continue;
        }
        if (geteuid() != 0) {
            th_skip("ebpf: not root (the pinned map cannot be opened)");
            forced_ebpf_gives_none();
            continue;
        }
        int loaded_here = 0, pre_ready[2] = {-1, -1}, pre_go[2] = {-1, -1};
        pid_t pre = -1;
        if (helper(argv[0], "status >/dev/null") != 0) {
            /* a process with a thread from before the load */
            if (pipe(pre_ready) == 0 && pipe(pre_go) == 0) {
                fflush(stdout);
                pre = fork();
                if (pre == 0) {
                    prctl(PR_SET_PDEATHSIG, SIGKILL);
                    th_checks = th_failures = 0;
                    _exit(before_load(pre_ready[1], pre_go[0]));
                }
                char c;
                if (read(pre_ready[0], &c, 1) != 1)
                    CHECK(0, "the process with a thread from before the load did not start");
            }
            int r = helper(argv[0], "load");
            CHECK(r == 0, "liblock-oncpu load exited %d", r);
            if (pre > 0) {
                CHECK(write(pre_go[1], "x", 1) == 1, "write");
                int st;
                waitpid(pre, &st, 0);
                th_context = "ebpf, a thread from before the load";
                CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit %d", st);
            }
            for (int k = 0; k < 2; k++) {
                close(pre_ready[k]);
                close(pre_go[k]);
            }
            if (r != 0)
                continue;
            loaded_here = 1;
        }
        CHECK_EQ(in_child("ebpf"), 0);
        ran++;
        if (!loaded_here) {
            th_skip("ebpf: loaded before the test, left loaded: its unload is not tested here");
            continue;
        }
        /* a process that mapped the map before the unload reads -1 after it */
        int go[2], back[2];
        if (pipe(go) != 0 || pipe(back) != 0)
            return 1;
        fflush(stdout);
        pid_t p = fork();
        if (p == 0) {
            setenv("LIBLOCK_ONCPU", "ebpf", 1);
            char c = ll_oncpu(gettid_()) == 1 ? 'y' : 'n';
            if (write(back[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
                _exit(2);
            _exit(ll_oncpu(gettid_()) == -1 ? 0 : 1);
        }
        char c = 0;
        CHECK(read(back[0], &c, 1) == 1 && c == 'y', "the child does not see itself running before the unload");
        CHECK_EQ(helper(argv[0], "unload"), 0);
        CHECK(write(go[1], "x", 1) == 1, "write");
        int st;
        waitpid(p, &st, 0);
        th_context = "after unload";
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a process that mapped the map does not read -1 after the unload");
        CHECK(helper(argv[0], "status >/dev/null") == 3, "status does not say 'not loaded' after the unload");
        forced_ebpf_gives_none();
        for (int k = 0; k < 2; k++) {
            close(go[k]);
            close(back[k]);
        }
    }
    if (ran == 0)
        return TH_SKIPPED;
    return th_report("test_oncpu");
}
