/*
 * oncpu.c - whether a given thread is on a CPU right now: the detection
 * layer for waiting that spins while the thread waited for runs and parks
 * when it does not.
 *
 * Mechanisms, in the order ll_oncpu tries them on its first call:
 *
 *  ebpf      One program on the sched_switch tracepoint for the whole
 *            system, loaded once by `liblock oncpu load`
 *            (tools/liblock-oncpu.c) and pinned in bpffs with its map; it
 *            writes one byte per tid (OFF for the thread leaving the CPU
 *            to sleep, PREEMPTED for one leaving it runnable -- the
 *            tracepoint's preempt flag, or a prev_state of TASK_RUNNING
 *            (a yield) -- and ON for the one entering).  Every process opens the pinned map
 *            (BPF_OBJ_GET) and maps it read-only: a call is one byte load,
 *            minus one (LL_ONCPU_B_* in internal.h).  Mapping needs the
 *            pin opened read-write (the kernel maps a BPF map only as a
 *            shared mapping, which a read-only file does not get), so root
 *            (the pins are mode 0444), and the initial pid namespace (the
 *            program sees global tids).
 *  fallback  The thread's CPU-time clock (clock_gettime on the thread clock
 *            id of that tid), read twice: a thread on a CPU has its clock
 *            brought up to date at each read, so the second read is larger;
 *            a thread off every CPU has a clock that does not move.  Two
 *            system calls, and only for threads of this process (the
 *            kernel refuses other processes' thread clocks: -1 for those).
 *  none      -1 for every tid.
 *
 * LIBLOCK_ONCPU=ebpf|fallback|none forces one (ebpf forced but not there
 * gives none, with the reason).
 *
 * Start-up: nothing happens until the first call; the interposer's start
 * does not grow.  The first call resolves under a once-flag; `kind` is then
 * stored with release after the map's address and length, and read with
 * acquire, so a caller that sees LL_ONCPU_EBPF sees the mapping.
 *
 * The byte loads are relaxed: a byte is written by the program on some CPU
 * at each switch, and the reader wants the latest value coherence gives it,
 * nothing ordered around it.  A thread that migrates is switched out on one
 * CPU (OFF) strictly before it can be switched in on another (ON): the
 * scheduler only runs a task elsewhere once its old CPU has released it
 * (on_cpu cleared with release after the tracepoint ran, acquired by the
 * next CPU), so the last value stored for a thread is its real state.  A
 * value read may be stale by the time it is used; the caller's waiting
 * policy must stay correct whatever it reads (it only chooses between
 * spinning and parking).
 *
 * Not known (-1): no mechanism; a tid out of the map's range (pid_max
 * raised after the load) or <= 0; with ebpf, a thread not seen switching
 * since the load when the loader could not visit every CPU; a map that was
 * unloaded after this process mapped it (the unloader resets every byte to
 * UNKNOWN); with the fallback, a tid of another process.
 */
#include "internal.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The initial pid namespace's inode number (fixed by the kernel since 3.8) */
#define LL_PID_INIT_INO 0xEFFFFFFCu

static pthread_once_t oncpu_once = PTHREAD_ONCE_INIT;
static _Atomic int oncpu_kind;                  /* 0 until resolved */
static const _Atomic unsigned char *oncpu_map;  /* byte per tid (ebpf) */
static size_t oncpu_len;
static char oncpu_why[384]; /* "none: " + both causes below */

long ll_bpf(int cmd, void *attr, unsigned size)
{
    int saved = errno;
    long r = syscall(SYS_bpf, cmd, attr, size);
    if (r < 0)
        r = -errno;
    errno = saved;
    return r;
}

int ll_oncpu_map_open(unsigned flags, size_t *len)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.pathname = (uint64_t)(uintptr_t)LL_ONCPU_MAP_PIN;
    a.file_flags = flags;
    long fd = ll_bpf(BPF_OBJ_GET, &a, sizeof a);
    if (fd < 0)
        return (int)fd;
    struct bpf_map_info info;
    memset(&info, 0, sizeof info);
    memset(&a, 0, sizeof a);
    a.info.bpf_fd = (uint32_t)fd;
    a.info.info_len = sizeof info;
    a.info.info = (uint64_t)(uintptr_t)&info;
    long r = ll_bpf(BPF_OBJ_GET_INFO_BY_FD, &a, sizeof a);
    if (r < 0 || info.type != BPF_MAP_TYPE_ARRAY || info.key_size != 4 || info.value_size != 8 ||
        !(info.map_flags & BPF_F_MMAPABLE) || strcmp(info.name, LL_ONCPU_NAME) != 0) {
        close((int)fd);
        return r < 0 ? (int)r : -EINVAL;
    }
    *len = (size_t)info.max_entries * 8;
    return (int)fd;
}

/* The calling thread is on a CPU: its own byte must say so, or the map is
 * not being written for this thread (unloaded, or another namespace).  A
 * byte seen wrong is looked at again after up to two yields (each a switch
 * when anything else is runnable), so that one stale value does not decide
 * the mechanism of the whole process. */
static int self_on(const _Atomic unsigned char *m, size_t len)
{
    pid_t t = (pid_t)syscall(SYS_gettid);
    if ((size_t)t >= len)
        return 0;
    for (int i = 0; i < 3; i++) {
        if (atomic_load_explicit(&m[t], memory_order_relaxed) == LL_ONCPU_B_ON)
            return 1;
        sched_yield();
    }
    return 0;
}

/* The unlikely cases of the open, as a reason */
static void open_failed(char *why, size_t n, int e)
{
    if (e == -ENOENT) {
        snprintf(why, n, "no map pinned at %s (`liblock oncpu load` as root)", LL_ONCPU_MAP_PIN);
    } else if (e == -EPERM || e == -EACCES) {
        FILE *f = fopen("/proc/sys/kernel/unprivileged_bpf_disabled", "r");
        int u = -1;
        if (f) {
            if (fscanf(f, "%d", &u) != 1)
                u = -1;
            fclose(f);
        }
        snprintf(why, n, "cannot open %s: %s (%s; unprivileged_bpf_disabled = %d)", LL_ONCPU_MAP_PIN,
                 strerror(-e), geteuid() == 0 ? "root" : "not root", u);
    } else {
        snprintf(why, n, "cannot open %s: %s", LL_ONCPU_MAP_PIN, strerror(-e));
    }
}

/* LL_ONCPU_EBPF with the mapping installed, or 0 with the reason in why */
static int try_ebpf(char *why, size_t n)
{
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0 && st.st_ino != LL_PID_INIT_INO) {
        snprintf(why, n, "not in the initial pid namespace (the program records global tids)");
        return 0;
    }
    size_t len = 0;
    /* read-write: the kernel maps a BPF map only shared, and a shared
     * mapping of a read-only file is not; PROT_READ alone below, and the
     * kernel then refuses any later PROT_WRITE on it */
    int fd = ll_oncpu_map_open(0, &len);
    if (fd < 0) {
        open_failed(why, n, fd);
        return 0;
    }
    void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(why, n, "cannot map %s: %s", LL_ONCPU_MAP_PIN, strerror(e));
        return 0;
    }
    if (!self_on(m, len)) {
        munmap(m, len);
        snprintf(why, n, "the map at %s does not show this thread running (unloaded?)", LL_ONCPU_MAP_PIN);
        return 0;
    }
    oncpu_map = m;
    oncpu_len = len;
    snprintf(why, n, "ebpf: sched_switch program, map pinned at %s (%zu tids), mapped", LL_ONCPU_MAP_PIN, len);
    return LL_ONCPU_EBPF;
}

/* CPUCLOCK_SCHED | CPUCLOCK_PERTHREAD_MASK with the tid in the high bits:
 * the clock id pthread_getcpuclockid builds, from a tid */
static clockid_t thread_clock(pid_t tid) { return (clockid_t)(((unsigned)~tid << 3) | 6); }

static int clock_ok(char *why, size_t n)
{
    struct timespec ts;
    if (clock_gettime(thread_clock((pid_t)syscall(SYS_gettid)), &ts) != 0) {
        snprintf(why, n, "the thread CPU-time clock is not readable: %s", strerror(errno));
        return 0;
    }
    return 1;
}

/* The first call may come from inside a lock() (a preempt-aware waiter's
 * first check), which is no cancellation point under glibc: the opens and
 * reads here must not act on a pending cancellation, nor change errno. */
static void resolve(void)
{
    LL_KEEP_ERRNO;
    LL_NO_CANCEL;
    const char *f = getenv("LIBLOCK_ONCPU");
    char no_ebpf[200] = "", no_clock[120] = "";
    int kind = 0;
    if (f && *f && strcmp(f, "ebpf") && strcmp(f, "fallback") && strcmp(f, "none"))
        snprintf(oncpu_why, sizeof oncpu_why, "none: LIBLOCK_ONCPU=%s is not ebpf, fallback or none", f);
    else if (f && strcmp(f, "none") == 0)
        snprintf(oncpu_why, sizeof oncpu_why, "none: LIBLOCK_ONCPU=none");
    else if (!(f && strcmp(f, "fallback") == 0) && (kind = try_ebpf(no_ebpf, sizeof no_ebpf)) != 0)
        snprintf(oncpu_why, sizeof oncpu_why, "%s", no_ebpf);
    else if (f && strcmp(f, "ebpf") == 0)
        snprintf(oncpu_why, sizeof oncpu_why, "none: LIBLOCK_ONCPU=ebpf but %s", no_ebpf);
    else if (clock_ok(no_clock, sizeof no_clock))
        snprintf(oncpu_why, sizeof oncpu_why, "fallback: thread CPU-time clock, 2 syscalls a call (%s)",
                 f ? "LIBLOCK_ONCPU=fallback" : no_ebpf), kind = LL_ONCPU_FALLBACK;
    else
        snprintf(oncpu_why, sizeof oncpu_why, "none: %s; %s", no_ebpf, no_clock);
    atomic_store_explicit(&oncpu_kind, kind ? kind : LL_ONCPU_NONE, memory_order_release);
}

int ll_oncpu_kind(void)
{
    int k = atomic_load_explicit(&oncpu_kind, memory_order_acquire);
    if (LL_UNLIKELY(k == 0)) {
        pthread_once(&oncpu_once, resolve);
        k = atomic_load_explicit(&oncpu_kind, memory_order_acquire);
    }
    return k;
}

const char *ll_oncpu_mechanism(void)
{
    switch (ll_oncpu_kind()) {
    case LL_ONCPU_EBPF: return "ebpf";
    case LL_ONCPU_FALLBACK: return "fallback";
    default: return "none";
    }
}

const char *ll_oncpu_reason(void)
{
    ll_oncpu_kind();
    return oncpu_why;
}

/* Two reads of the thread's CPU-time clock.  A tid the clock refuses
 * (EINVAL) has exited, or belongs to another process: kill(tid, 0) tells
 * them apart (it finds any live task by its tid). */
static int oncpu_clock(pid_t tid)
{
    int saved = errno;
    struct timespec a, b;
    clockid_t c = thread_clock(tid);
    int r;
    if (clock_gettime(c, &a) == 0 && clock_gettime(c, &b) == 0)
        r = b.tv_sec != a.tv_sec || b.tv_nsec != a.tv_nsec;
    else
        r = kill(tid, 0) == 0 || errno == EPERM ? -1 : 0;
    errno = saved;
    return r;
}

/* Everything but the ebpf path, out of line (the first call lands here) */
__attribute__((noinline)) static int oncpu_other(pid_t tid, int k)
{
    if (k == 0)
        k = ll_oncpu_kind();
    if (tid <= 0)
        return -1;
    if (k == LL_ONCPU_EBPF)
        return (size_t)tid < oncpu_len ? (int)atomic_load_explicit(&oncpu_map[tid], memory_order_relaxed) - 1 : -1;
    return k == LL_ONCPU_FALLBACK ? oncpu_clock(tid) : -1;
}

int ll_oncpu_state(pid_t tid)
{
    int k = atomic_load_explicit(&oncpu_kind, memory_order_acquire);
    if (LL_LIKELY(k == LL_ONCPU_EBPF)) {
        if (LL_UNLIKELY(tid <= 0 || (size_t)tid >= oncpu_len))
            return -1;
        return (int)atomic_load_explicit(&oncpu_map[tid], memory_order_relaxed) - 1;
    }
    return oncpu_other(tid, k);
}

int ll_oncpu(pid_t tid)
{
    int s = ll_oncpu_state(tid);
    return s == LL_ONCPU_B_PREEMPTED - 1 ? 0 : s;
}
