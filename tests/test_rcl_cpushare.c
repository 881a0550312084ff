/*
 * test_rcl_cpushare - does another process run an RCL server on this CPU?
 * (src/runtime/rcl/cpushare.c: the answer that decides whether servicing
 * threads breathe.)  A CPU number far above any real one is used, so that
 * servers of other processes on this machine do not count.
 *
 *   - alone: no other process (this process's own share does not count);
 *   - a child that joined: yes, and its pid is remembered;
 *   - that child left and lives on: yes for a bounded number of checks,
 *     then no;
 *   - a child that joined, dropped its share and is exiting (main thread a
 *     zombie, another thread still running; this is what a process whose
 *     last thread is preempted mid-exit looks like): yes for as long as it
 *     is, even past that bound; once reaped: no.
 */
#include "harness.h"

#include <stdatomic.h>
#include <sys/syscall.h>
#include <sys/wait.h>

void rcl_cpushare_join(int cpu);
void rcl_cpushare_leave(int cpu);
int rcl_cpushare_others(int cpu, _Atomic int *seen);

#define MANY_CHECKS 1000 /* far beyond the bound on checks for a process that left */

static int cpu;

static void put(int fd) { (void)!write(fd, "x", 1); }
static int get(int fd)
{
    char c;
    return read(fd, &c, 1) == 1;
}

/* State letter of pid's main thread, 0 if gone. */
static int state_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int st = th_stat_state(path);
    return st < 0 ? 0 : st;
}

static int others_within(int n, _Atomic int *seen, int want)
{
    for (int i = 0; i < n; i++)
        if (rcl_cpushare_others(cpu, seen) == want)
            return i + 1;
    return 0;
}

static void left_and_lives(void)
{
    int go[2], ack[2];
    CHECK(pipe(go) == 0 && pipe(ack) == 0, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        close(ack[0]);
        rcl_cpushare_join(cpu);
        put(ack[1]);
        get(go[0]);
        rcl_cpushare_leave(cpu);
        put(ack[1]);
        get(go[0]); /* until the parent closes it */
        _exit(0);
    }
    CHECK(pid > 0, "fork: %s", strerror(errno));
    get(ack[0]);
    _Atomic int seen = 0;
    CHECK_EQ(rcl_cpushare_others(cpu, &seen), 1);
    CHECK_EQ(atomic_load(&seen), pid);
    put(go[1]);
    get(ack[0]);
    CHECK_EQ(rcl_cpushare_others(cpu, &seen), 1); /* it may be exiting: not forgotten at once */
    int n = others_within(MANY_CHECKS, &seen, 0);
    CHECK(n > 0, "a process that left and lives on still counts after %d checks", MANY_CHECKS);
    printf("  left and alive: forgotten after %d more checks\n", n);
    CHECK_EQ(atomic_load(&seen), 0);
    close(go[1]);
    CHECK_EQ(th_wait_child(pid, 30, "child"), 0);
    close(go[0]);
    close(ack[0]);
    close(ack[1]);
}

static int hold_fd;
static void *linger(void *arg)
{
    (void)arg;
    get(hold_fd); /* until the parent closes its end */
    return NULL;
}

static void exiting(void)
{
    int go[2], ack[2], hold[2];
    CHECK(pipe(go) == 0 && pipe(ack) == 0 && pipe(hold) == 0, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid == 0) {
        rcl_cpushare_join(cpu);
        hold_fd = hold[0];
        close(hold[1]);
        pthread_t t;
        if (pthread_create(&t, NULL, linger, NULL) != 0)
            _exit(3);
        put(ack[1]);
        get(go[0]);
        rcl_cpushare_leave(cpu); /* what the kernel does once the last thread dropped its files */
        syscall(SYS_exit, 0);    /* this thread only: the main thread becomes a zombie */
    }
    CHECK(pid > 0, "fork: %s", strerror(errno));
    close(hold[0]);
    get(ack[0]);
    _Atomic int seen = 0;
    CHECK_EQ(rcl_cpushare_others(cpu, &seen), 1);
    CHECK_EQ(atomic_load(&seen), pid);
    put(go[1]);
    uint64_t deadline = th_now_ns() + 30ull * 1000000000ull;
    while (state_of(pid) != 'Z' && th_now_ns() < deadline)
        usleep(1000);
    CHECK(state_of(pid) == 'Z', "the child's main thread did not become a zombie (state %c)", state_of(pid));
    int n = others_within(MANY_CHECKS, &seen, 0);
    CHECK(n == 0, "an exiting process (main thread a zombie, a thread left) was forgotten after %d checks", n);
    CHECK_EQ(atomic_load(&seen), pid);
    close(hold[1]); /* the last thread ends */
    CHECK_EQ(th_wait_child(pid, 30, "child"), 0);
    CHECK_EQ(rcl_cpushare_others(cpu, &seen), 0);
    CHECK_EQ(atomic_load(&seen), 0);
    close(go[0]);
    close(go[1]);
    close(ack[0]);
    close(ack[1]);
}

int main(void)
{
    cpu = 1000000 + (int)(getpid() % 100000);
    rcl_cpushare_join(cpu);
    _Atomic int seen = 0;
    if (rcl_cpushare_others(cpu, &seen) != 0) {
        /* the documented fallback: the share file cannot be used */
        printf("SKIP: /dev/shm/liblock-rcl-cpus cannot be opened or locked here (breathing is always on)\n");
        return 77;
    }
    CHECK_EQ(atomic_load(&seen), 0);
    left_and_lives();
    exiting();
    CHECK_EQ(rcl_cpushare_others(cpu, &seen), 0);
    rcl_cpushare_leave(cpu);
    return th_report("test_rcl_cpushare");
}
