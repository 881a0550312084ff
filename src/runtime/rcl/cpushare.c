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
 * Where the file cannot be opened or locked, rcl_cpushare_others answers
 * yes: breathing then happens always, which costs a little CPU and never
 * a hang.
 *
 * The descriptor is opened once (a CAS publishes it; the loser closes its
 * own): the first callers may race, and no mutex is needed in a forked
 * child, which keeps the descriptor.
 */
#include "rcl.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define CPUSHARE_PATH "/dev/shm/liblock-rcl-cpus"

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

int rcl_cpushare_others(int cpu)
{
    int fd = atomic_load_explicit(&share_fd, memory_order_acquire);
    struct flock fl;
    if (fd < 0 || lock_byte(fd, F_GETLK, F_WRLCK, cpu, &fl) != 0)
        return 1;
    return fl.l_type != F_UNLCK;
}
