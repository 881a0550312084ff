/*
 * cpushare.c - Remote Core Locking: does another process run an RCL server
 * on this server's CPU?  Servicing threads breathe only then (server.c,
 * "Breathing"): the thread a breath is for, another process's backup
 * thread (FIFO, below the servicing threads), exists only in that case.
 *
 * Every process that runs a server's threads on CPU c holds a shared
 * (F_RDLCK) POSIX record lock on byte c of one file, /dev/shm/liblock-rcl-
 * cpus (mode 0666, so that every user shares it).  Asking F_GETLK whether
 * an exclusive lock on byte c could be taken answers "held by another
 * process" exactly when another process holds its shared lock there: a
 * process's own locks never conflict with its own request.  The kernel
 * drops a process's record locks when it exits, however it exits, so a
 * crash leaves no stale entry; a forked child does not inherit them and
 * takes its own when it revives its servers.  Record locks of a process
 * on a file go away when it closes ANY descriptor of that file: nothing
 * but this file opens it, and the descriptor stays open.
 *
 * A process's lock goes before its last thread does: an exiting thread
 * drops its files before it is gone, and one preempted between the two
 * (by the spinning servicing thread that woke from its breath) still
 * needs the CPU, with no lock left to say so.  So the pid that F_GETLK
 * names as the holder is remembered, and breathing goes on while that
 * process is exiting: its main thread is a zombie (state Z in
 * /proc/PID/stat) until the last thread is gone and its parent has reaped
 * it.  A process whose main thread is not a zombie either left
 * (rcl_cpushare_leave, after joining its server's threads) and lives on,
 * or is exiting with its main thread not yet done: breathing goes on for
 * UNKNOWN_PID_CHECKS more checks, then it is forgotten.  The same holds
 * for a holder whose pid F_GETLK cannot give (another pid namespace: 0).
 * Where /proc/PID/stat cannot be read but the pid exists (kill(pid, 0)
 * does not fail with ESRCH), breathing goes on.
 *
 * `seen` (the server's share_seen) is read and written with relaxed
 * atomics: it orders nothing else, and two servicing threads of one server
 * that check at once can only leave one's value or the other's, each a
 * pid seen or a countdown, so the worst a race does is one breath more or
 * one fewer.
 *
 * Where the file cannot be opened or locked, rcl_cpushare_others answers
 * yes: breathing then happens always, which costs a little CPU and never
 * a hang.
 *
 * The descriptor is opened once (a CAS publishes it; the loser closes its
 * own): the first callers may race, and no mutex is needed in a forked
 * child, which keeps the descriptor.
 */
#include "rcl.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CPUSHARE_PATH "/dev/shm/liblock-rcl-cpus"
#define UNKNOWN_PID_CHECKS 20 /* checks (one per round-robin slice) */

static _Atomic int share_fd = -1; /* -2: cannot be opened */

static int fd_get(void)
{
    int fd = atomic_load_explicit(&share_fd, memory_order_acquire);
    if (fd != -1)
        return fd;
    int mine = open(CPUSHARE_PATH, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (mine >= 0)
        (void)fchmod(mine, 0666); /* whatever the umask; fails harmlessly if another user created it */
    int want = mine >= 0 ? mine : -2;
    int expected = -1;
    if (!atomic_compare_exchange_strong_explicit(&share_fd, &expected, want, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        if (mine >= 0)
            close(mine);
        return expected;
    }
    return want;
}

static int lock_byte(int fd, int cmd, short type, int cpu, struct flock *out)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = cpu, .l_len = 1};
    int r = fcntl(fd, cmd, &fl);
    if (out)
        *out = fl;
    return r;
}

void rcl_cpushare_join(int cpu)
{
    int fd = fd_get();
    if (fd >= 0)
        (void)lock_byte(fd, F_SETLK, F_RDLCK, cpu, NULL); /* a shared lock is never refused by another's */
}

void rcl_cpushare_leave(int cpu)
{
    int fd = atomic_load_explicit(&share_fd, memory_order_acquire);
    if (fd >= 0)
        (void)lock_byte(fd, F_SETLK, F_UNLCK, cpu, NULL);
}

/* The state letter of process pid's main thread, 0 if it cannot be read
 * (gone, or hidden by the /proc mount). */
static int proc_state(int pid)
{
    char path[32], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (ll_read_file(path, buf, sizeof buf) <= 0)
        return 0;
    const char *p = strrchr(buf, ')'); /* the name may hold anything */
    return p && p[1] == ' ' ? (unsigned char)p[2] : 0;
}

int rcl_cpushare_others(int cpu, _Atomic int *seen)
{
    LL_KEEP_ERRNO; /* the servicing thread's errno stays as it was (docs/api.md) */
    int fd = atomic_load_explicit(&share_fd, memory_order_acquire);
    struct flock fl;
    if (fd < 0 || lock_byte(fd, F_GETLK, F_WRLCK, cpu, &fl) != 0)
        return 1;
    if (fl.l_type != F_UNLCK) {
        atomic_store_explicit(seen, fl.l_pid > 0 ? (int)fl.l_pid : -UNKNOWN_PID_CHECKS, memory_order_relaxed);
        return 1;
    }
    int pid = atomic_load_explicit(seen, memory_order_relaxed);
    if (pid == 0)
        return 0;
    if (pid < 0) {
        atomic_store_explicit(seen, pid + 1, memory_order_relaxed);
        return 1;
    }
    int st = proc_state(pid);
    if (st == 'Z' || (st == 0 && (kill(pid, 0) == 0 || errno != ESRCH)))
        return 1;
    if (st == 0) { /* gone */
        atomic_store_explicit(seen, 0, memory_order_relaxed);
        return 0;
    }
    atomic_store_explicit(seen, -UNKNOWN_PID_CHECKS, memory_order_relaxed);
    return 1;
}
