/*
 * liblock-oncpu: load, unload and report the system-wide eBPF program
 * behind ll_oncpu (src/platform/oncpu.c).  Used by `liblock oncpu` and by
 * `liblock run` as root.
 *
 *   liblock-oncpu load     load and pin it, unless it is already (exit 0)
 *   liblock-oncpu unload   remove the pins; the program goes with its link
 *   liblock-oncpu status   what is pinned and loaded (exit 0 loaded, 3 not);
 *                          with kernel.bpf_stats_enabled=1, the program's
 *                          runs and its mean time per run
 *
 * What is loaded: an array map (BPF_F_MMAPABLE, 8-byte values, one byte
 * per tid: tid t is byte t of the mapping; size from pid_max) and a raw
 * tracepoint program on sched_switch, written here as instructions: for
 * prev and then next, read task_struct.pid (its offset found in the
 * kernel's BTF, /sys/kernel/btf/vmlinux) with bpf_probe_read_kernel and
 * store LL_ONCPU_B_OFF (LL_ONCPU_B_PREEMPTED when prev leaves runnable:
 * the preempt argument set, or prev_state 0, TASK_RUNNING), then
 * LL_ONCPU_B_ON, into that tid's byte.  A map of an earlier version (its
 * name is not LL_ONCPU_NAME) is a stale set: load replaces it.  The
 * raw tracepoint's link is global (every CPU) and pinned, so the program
 * outlives this process; the map is pinned beside it.  No compiler and no
 * library beyond libc are needed to build or load it; the one thing taken
 * from the running kernel is the pid offset, checked to be a 4-byte int.
 * The program's license string says GPL because bpf_probe_read_kernel is
 * only given to GPL-compatible programs.
 *
 * Invariants:
 *  - One program: load and unload run under an exclusive flock (on /sys/fs,
 *    which holds the bpffs mount point), and load returns early when both pins are there, so two loads (two
 *    `liblock run` at once) make one program.
 *  - The map's pin is made last, after the link's: a process that finds the
 *    map finds it written by an attached program, initialised.
 *  - Threads already running at attach time: after attaching, the loader
 *    runs once on every online CPU (sched_setaffinity to each in turn; the
 *    call returns on that CPU).  Whoever was running there was switched
 *    out, so it is recorded OFF, and ON again when it resumes; a thread
 *    that did not run at all since the attach is not running.  The loader
 *    then turns every byte still UNKNOWN into OFF with a compare-and-swap,
 *    so that a byte the program set meanwhile is left alone.  A CPU the
 *    loader could not visit (a cpuset) leaves the UNKNOWN bytes as they
 *    are: those threads read -1 until their next switch.
 *  - Unload removes the pins, waits until the program is gone (its id no
 *    longer found), and resets every byte to UNKNOWN, so that a process
 *    that mapped the map earlier reads -1 from then on instead of a state
 *    frozen at the unload.
 *  - bpffs: mounted at /sys/fs/bpf when it is not; a marker directory
 *    records that this program mounted it, and unload unmounts it again
 *    when nothing else is pinned there.
 */
#include "internal.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/btf.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define BPFFS_MAGIC 0xcafe4a11
#define MOUNTED_MARK LL_ONCPU_DIR "/bpffs_mounted_by_liblock"

static int die(const char *what, long e)
{
    fprintf(stderr, "liblock-oncpu: %s: %s\n", what, strerror((int)(e < 0 ? -e : e)));
    return 1;
}

/* ---- task_struct.pid from the kernel's BTF ---- */

static const struct btf_type *bt_at(const char *types, const uint32_t *off, uint32_t n, uint32_t id)
{
    return id >= 1 && id <= n ? (const struct btf_type *)(types + off[id]) : NULL;
}

/* bytes after a btf_type for its kind, or -1 for a kind not known here */
static long bt_extra(const struct btf_type *t)
{
    uint32_t vlen = BTF_INFO_VLEN(t->info);
    switch (BTF_INFO_KIND(t->info)) {
    case BTF_KIND_INT: return 4;
    case BTF_KIND_ARRAY: return sizeof(struct btf_array);
    case BTF_KIND_STRUCT: case BTF_KIND_UNION: return (long)vlen * sizeof(struct btf_member);
    case BTF_KIND_ENUM: return (long)vlen * sizeof(struct btf_enum);
    case BTF_KIND_FUNC_PROTO: return (long)vlen * sizeof(struct btf_param);
    case BTF_KIND_VAR: return sizeof(struct btf_var);
    case BTF_KIND_DATASEC: return (long)vlen * sizeof(struct btf_var_secinfo);
    case BTF_KIND_PTR: case BTF_KIND_FWD: case BTF_KIND_TYPEDEF: case BTF_KIND_VOLATILE:
    case BTF_KIND_CONST: case BTF_KIND_RESTRICT: case BTF_KIND_FUNC: case BTF_KIND_FLOAT:
    case 18 /* TYPE_TAG */: return 0;
    case 17 /* DECL_TAG */: return 4;
    case 19 /* ENUM64 */: return (long)vlen * 12;
    default: return -1;
    }
}

/* The byte offset of task_struct.pid, or -1 (message printed) */
static long pid_offset(void)
{
    const char *path = "/sys/kernel/btf/vmlinux";
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "liblock-oncpu: %s: %s (a kernel without BTF: not supported)\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) { free(buf); buf = NULL; }
            else buf = nb;
        }
    }
    fclose(f);
    long result = -1;
    const struct btf_header *h = (const void *)buf;
    if (!buf || len < sizeof *h || h->magic != BTF_MAGIC ||
        (uint64_t)h->hdr_len + h->type_off + h->type_len > len ||
        (uint64_t)h->hdr_len + h->str_off + h->str_len > len) {
        fprintf(stderr, "liblock-oncpu: %s: not BTF\n", path);
        free(buf);
        return -1;
    }
    const char *types = buf + h->hdr_len + h->type_off, *strs = buf + h->hdr_len + h->str_off;
    /* index: offset of each type id (ids start at 1) */
    uint32_t n = 0, ncap = 1 << 16, *off = malloc(ncap * sizeof *off);
    for (uint32_t p = 0; off && p + sizeof(struct btf_type) <= h->type_len;) {
        const struct btf_type *t = (const void *)(types + p);
        long x = bt_extra(t);
        if (x < 0)
            break;
        if (++n >= ncap) {
            uint32_t *no = realloc(off, (ncap *= 2) * sizeof *off);
            if (!no) { free(off); off = NULL; break; }
            off = no;
        }
        off[n] = p;
        p += sizeof(struct btf_type) + (uint32_t)x;
    }
    for (uint32_t id = 1; off && id <= n && result < 0; id++) {
        const struct btf_type *t = bt_at(types, off, n, id);
        if (BTF_INFO_KIND(t->info) != BTF_KIND_STRUCT || t->name_off >= h->str_len ||
            strcmp(strs + t->name_off, "task_struct") != 0)
            continue;
        const struct btf_member *m = (const void *)(t + 1);
        for (uint32_t i = 0; i < BTF_INFO_VLEN(t->info); i++) {
            if (m[i].name_off >= h->str_len || strcmp(strs + m[i].name_off, "pid") != 0)
                continue;
            uint32_t bits = BTF_INFO_KFLAG(t->info) ? BTF_MEMBER_BIT_OFFSET(m[i].offset) : m[i].offset;
            if (BTF_INFO_KFLAG(t->info) && BTF_MEMBER_BITFIELD_SIZE(m[i].offset))
                break;
            const struct btf_type *ty = bt_at(types, off, n, m[i].type);
            while (ty && (BTF_INFO_KIND(ty->info) == BTF_KIND_TYPEDEF || BTF_INFO_KIND(ty->info) == BTF_KIND_CONST ||
                          BTF_INFO_KIND(ty->info) == BTF_KIND_VOLATILE))
                ty = bt_at(types, off, n, ty->type);
            if (ty && BTF_INFO_KIND(ty->info) == BTF_KIND_INT && ty->size == 4 && bits % 8 == 0)
                result = bits / 8;
            break;
        }
        if (result < 0) {
            fprintf(stderr, "liblock-oncpu: %s: task_struct has no 4-byte int member pid\n", path);
            break;
        }
    }
    if (result < 0 && off)
        fprintf(stderr, "liblock-oncpu: %s: task_struct.pid not found\n", path);
    free(off);
    free(buf);
    return result;
}

/* ---- the program ---- */

#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})
#define MOV_REG(d, s) INSN(BPF_ALU64 | BPF_MOV | BPF_X, d, s, 0, 0)
#define MOV_IMM(d, i) INSN(BPF_ALU64 | BPF_MOV | BPF_K, d, 0, 0, i)
#define ALU_IMM(op, d, i) INSN(BPF_ALU64 | (op) | BPF_K, d, 0, 0, i)
#define ALU_REG(op, d, s) INSN(BPF_ALU64 | (op) | BPF_X, d, s, 0, 0)
#define LDX(sz, d, s, o) INSN(BPF_LDX | (sz) | BPF_MEM, d, s, o, 0)
#define STX(sz, d, s, o) INSN(BPF_STX | (sz) | BPF_MEM, d, s, o, 0)
#define JMP_IMM(op, d, i, o) INSN(BPF_JMP | (op) | BPF_K, d, 0, o, i)
#define CALL(f) INSN(BPF_JMP | BPF_CALL, 0, 0, 0, f)
#define EXIT() INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0)
#define LD_MAP_FD(d, fd) INSN(BPF_LD | BPF_DW | BPF_IMM, d, BPF_PSEUDO_MAP_FD, 0, fd), INSN(0, 0, 0, 0, 0)

/* One block: the task in raw tracepoint argument `arg` (1 = prev, 2 =
 * next) gets the byte in r8.  20 instructions; both jumps go to its end. */
#define BLOCK(arg, pidoff, mapfd)                                               \
    LDX(BPF_DW, BPF_REG_3, BPF_REG_6, 8 * (arg)),   /* r3 = the task */         \
    ALU_IMM(BPF_ADD, BPF_REG_3, pidoff),            /* r3 = &task->pid */       \
    MOV_REG(BPF_REG_1, BPF_REG_10), ALU_IMM(BPF_ADD, BPF_REG_1, -8),            \
    MOV_IMM(BPF_REG_2, 4),                                                      \
    CALL(BPF_FUNC_probe_read_kernel),               /* fp[-8] = pid */          \
    JMP_IMM(BPF_JNE, BPF_REG_0, 0, 13),                                         \
    LDX(BPF_W, BPF_REG_7, BPF_REG_10, -8),          /* r7 = tid */              \
    MOV_REG(BPF_REG_1, BPF_REG_7), ALU_IMM(BPF_RSH, BPF_REG_1, 3),              \
    STX(BPF_W, BPF_REG_10, BPF_REG_1, -4),          /* key = tid / 8 */         \
    LD_MAP_FD(BPF_REG_1, mapfd),                                                \
    MOV_REG(BPF_REG_2, BPF_REG_10), ALU_IMM(BPF_ADD, BPF_REG_2, -4),            \
    CALL(BPF_FUNC_map_lookup_elem),                                             \
    JMP_IMM(BPF_JEQ, BPF_REG_0, 0, 3),              /* beyond pid_max */        \
    ALU_IMM(BPF_AND, BPF_REG_7, 7),                                             \
    ALU_REG(BPF_ADD, BPF_REG_0, BPF_REG_7),                                     \
    STX(BPF_B, BPF_REG_0, BPF_REG_8, 0)

static int load_prog(int mapfd, long pidoff)
{
    struct bpf_insn prog[] = {
        MOV_REG(BPF_REG_6, BPF_REG_1), /* r6 = ctx: u64 args[] = {preempt, prev, next, prev_state} */
        MOV_IMM(BPF_REG_8, LL_ONCPU_B_OFF),
        LDX(BPF_DW, BPF_REG_1, BPF_REG_6, 0),   /* preempt */
        JMP_IMM(BPF_JNE, BPF_REG_1, 0, 2),
        LDX(BPF_DW, BPF_REG_1, BPF_REG_6, 24),  /* prev_state */
        JMP_IMM(BPF_JNE, BPF_REG_1, 0, 1),
        MOV_IMM(BPF_REG_8, LL_ONCPU_B_PREEMPTED),
        BLOCK(1, (int)pidoff, mapfd),
        MOV_IMM(BPF_REG_8, LL_ONCPU_B_ON),
        BLOCK(2, (int)pidoff, mapfd),
        MOV_IMM(BPF_REG_0, 0),
        EXIT(),
    };
    static char log[65536];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_RAW_TRACEPOINT;
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = sizeof prog / sizeof prog[0];
    a.license = (uint64_t)(uintptr_t)"GPL";
    a.log_buf = (uint64_t)(uintptr_t)log;
    a.log_size = sizeof log;
    a.log_level = 1;
    memcpy(a.prog_name, LL_ONCPU_NAME, sizeof LL_ONCPU_NAME);
    long fd = ll_bpf(BPF_PROG_LOAD, &a, sizeof a);
    if (fd < 0) {
        die("BPF_PROG_LOAD", fd);
        fprintf(stderr, "%s\n", log);
    }
    return (int)fd;
}

/* ---- helpers ---- */

static int obj_pin(int fd, const char *path)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.pathname = (uint64_t)(uintptr_t)path;
    a.bpf_fd = (uint32_t)fd;
    long r = ll_bpf(BPF_OBJ_PIN, &a, sizeof a);
    if (r == 0)
        chmod(path, 0444);
    return (int)r;
}

static int obj_get(const char *path, unsigned flags)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.pathname = (uint64_t)(uintptr_t)path;
    a.file_flags = flags;
    return (int)ll_bpf(BPF_OBJ_GET, &a, sizeof a);
}

static long obj_info(int fd, void *info, unsigned len)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    memset(info, 0, len);
    a.info.bpf_fd = (uint32_t)fd;
    a.info.info_len = len;
    a.info.info = (uint64_t)(uintptr_t)info;
    return ll_bpf(BPF_OBJ_GET_INFO_BY_FD, &a, sizeof a);
}

/* the prog id of the pinned link, 0 if none */
static uint32_t link_prog_id(void)
{
    int fd = obj_get(LL_ONCPU_LINK_PIN, 0); /* a link opens read-write only */
    if (fd < 0)
        return 0;
    struct bpf_link_info li;
    uint32_t id = obj_info(fd, &li, sizeof li) == 0 ? li.prog_id : 0;
    close(fd);
    return id;
}

static int prog_exists(uint32_t id)
{
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_id = id;
    long fd = ll_bpf(BPF_PROG_GET_FD_BY_ID, &a, sizeof a);
    if (fd >= 0)
        close((int)fd);
    return fd >= 0;
}

/* how many programs named LL_ONCPU_NAME the kernel has */
static int count_progs(void)
{
    int count = 0;
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    while (ll_bpf(BPF_PROG_GET_NEXT_ID, &a, sizeof a) == 0) {
        uint32_t id = a.next_id;
        union bpf_attr g;
        memset(&g, 0, sizeof g);
        g.prog_id = id;
        long fd = ll_bpf(BPF_PROG_GET_FD_BY_ID, &g, sizeof g);
        if (fd >= 0) {
            struct bpf_prog_info pi;
            if (obj_info((int)fd, &pi, sizeof pi) == 0 && strcmp(pi.name, LL_ONCPU_NAME) == 0)
                count++;
            close((int)fd);
        }
        memset(&a, 0, sizeof a);
        a.start_id = id;
    }
    return count;
}

static int bpffs_mounted(void)
{
    struct statfs s;
    return statfs(LL_ONCPU_BPFFS, &s) == 0 && (unsigned long)s.f_type == BPFFS_MAGIC;
}

/* Load and unload exclude each other with a flock on the directory that
 * holds the bpffs mount point: it exists before the mount and stays the
 * same inode after it, so two loaders cannot both mount bpffs. */
static int dir_lock(void)
{
    int d = open("/sys/fs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d >= 0)
        flock(d, LOCK_EX);
    return d;
}

/* Run once on every online CPU; 1 if each was visited */
static int visit_cpus(void)
{
    cpu_set_t saved, one;
    if (sched_getaffinity(0, sizeof saved, &saved) != 0)
        return 0;
    int all = 1;
    long n = sysconf(_SC_NPROCESSORS_CONF);
    for (int c = 0; c < n && c < CPU_SETSIZE; c++) {
        char p[64];
        snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d/online", c);
        FILE *f = fopen(p, "r");
        int on = 1;
        if (f) {
            if (fscanf(f, "%d", &on) != 1)
                on = 1;
            fclose(f);
        } else if (access("/sys/devices/system/cpu", F_OK) == 0 && c > 0) {
            snprintf(p, sizeof p, "/sys/devices/system/cpu/cpu%d", c);
            on = access(p, F_OK) == 0;
        }
        if (!on)
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0 || sched_getcpu() != c)
            all = 0;
    }
    sched_setaffinity(0, sizeof saved, &saved);
    return all;
}

static void remove_pins(void)
{
    unlink(LL_ONCPU_MAP_PIN);
    unlink(LL_ONCPU_LINK_PIN);
}

/* ---- the commands ---- */

static int do_load(void)
{
    int d = dir_lock();
    if (d < 0)
        return die("open /sys/fs", errno);
    if (!bpffs_mounted()) {
        if (mount("bpf", LL_ONCPU_BPFFS, "bpf", 0, "mode=0755") != 0)
            return die("mount bpffs at " LL_ONCPU_BPFFS, errno);
        if (mkdir(LL_ONCPU_DIR, 0755) != 0 && errno != EEXIST)
            return die("mkdir " LL_ONCPU_DIR, errno);
        mkdir(MOUNTED_MARK, 0700);
    } else if (mkdir(LL_ONCPU_DIR, 0755) != 0 && errno != EEXIST) {
        return die("mkdir " LL_ONCPU_DIR, errno);
    }
    size_t len;
    int mfd = ll_oncpu_map_open(0, &len);
    uint32_t pid = link_prog_id();
    if (mfd >= 0 && pid && prog_exists(pid)) {
        close(mfd);
        close(d);
        printf("already loaded\n");
        return 0;
    }
    if (mfd >= 0)
        close(mfd);
    remove_pins(); /* a half-made or stale set */

    struct rlimit inf = {RLIM_INFINITY, RLIM_INFINITY};
    setrlimit(RLIMIT_MEMLOCK, &inf); /* kernels before 5.11 charge maps to it */
    long pidoff = pid_offset();
    if (pidoff < 0)
        return 1;
    long pid_max = 4194304;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "r");
    if (f) {
        if (fscanf(f, "%ld", &pid_max) != 1)
            pid_max = 4194304;
        fclose(f);
    }
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_ARRAY;
    a.key_size = 4;
    a.value_size = 8;
    a.max_entries = (uint32_t)((pid_max + 7) / 8);
    a.map_flags = BPF_F_MMAPABLE;
    memcpy(a.map_name, LL_ONCPU_NAME, sizeof LL_ONCPU_NAME);
    long m = ll_bpf(BPF_MAP_CREATE, &a, sizeof a);
    if (m < 0)
        return die("BPF_MAP_CREATE", m);
    len = (size_t)a.max_entries * 8;
    _Atomic unsigned char *bytes = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, (int)m, 0);
    if (bytes == MAP_FAILED)
        return die("mmap the map", errno);
    int p = load_prog((int)m, pidoff);
    if (p < 0)
        return 1;
    memset(&a, 0, sizeof a);
    a.raw_tracepoint.name = (uint64_t)(uintptr_t)"sched_switch";
    a.raw_tracepoint.prog_fd = (uint32_t)p;
    long l = ll_bpf(BPF_RAW_TRACEPOINT_OPEN, &a, sizeof a);
    if (l < 0)
        return die("BPF_RAW_TRACEPOINT_OPEN sched_switch", l);
    int all = visit_cpus();
    size_t unknown = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char want = LL_ONCPU_B_UNKNOWN;
        if (atomic_load_explicit(&bytes[i], memory_order_relaxed) != LL_ONCPU_B_UNKNOWN)
            continue;
        if (!all)
            unknown++;
        else
            atomic_compare_exchange_strong_explicit(&bytes[i], &want, LL_ONCPU_B_OFF, memory_order_relaxed,
                                                    memory_order_relaxed);
    }
    long r = obj_pin((int)l, LL_ONCPU_LINK_PIN);
    if (r < 0)
        return die("pin " LL_ONCPU_LINK_PIN, r);
    r = obj_pin((int)m, LL_ONCPU_MAP_PIN);
    if (r < 0) {
        unlink(LL_ONCPU_LINK_PIN);
        return die("pin " LL_ONCPU_MAP_PIN, r);
    }
    printf("loaded: sched_switch program pinned at %s, map at %s (%zu tids, task_struct.pid at %ld)\n",
           LL_ONCPU_LINK_PIN, LL_ONCPU_MAP_PIN, len, pidoff);
    if (!all)
        printf("not every CPU could be visited: threads not seen switching since read as not known\n");
    close(d);
    return 0;
}

static int do_unload(void)
{
    int d = dir_lock();
    if (!bpffs_mounted() || access(LL_ONCPU_DIR, F_OK) != 0) {
        printf("not loaded\n");
        return 0;
    }
    size_t len = 0;
    int mfd = ll_oncpu_map_open(0, &len);
    uint32_t pid = link_prog_id();
    remove_pins();
    if (pid) {
        struct timespec step = {0, 10 * 1000 * 1000};
        for (int i = 0; i < 1000 && prog_exists(pid); i++)
            nanosleep(&step, NULL);
        /* an instance that had started before the probe went finishes in
         * far less than this */
        nanosleep(&step, NULL);
    }
    if (mfd >= 0) {
        void *bytes = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
        if (bytes != MAP_FAILED) {
            memset(bytes, LL_ONCPU_B_UNKNOWN, len);
            munmap(bytes, len);
        }
        close(mfd);
    }
    int mounted_here = access(MOUNTED_MARK, F_OK) == 0;
    rmdir(MOUNTED_MARK);
    rmdir(LL_ONCPU_DIR);
    if (mounted_here) {
        DIR *dir = opendir(LL_ONCPU_BPFFS);
        int empty = 1;
        struct dirent *e;
        while (dir && (e = readdir(dir)))
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, "maps.debug") &&
                strcmp(e->d_name, "progs.debug")) /* the kernel's own (BPF_PRELOAD) */
                empty = 0;
        if (dir)
            closedir(dir);
        if (empty)
            umount(LL_ONCPU_BPFFS);
    }
    if (d >= 0)
        close(d);
    printf(pid || mfd >= 0 ? "unloaded\n" : "not loaded\n");
    return 0;
}

static int do_status(void)
{
    size_t len = 0;
    int mounted = bpffs_mounted();
    int mfd = mounted ? ll_oncpu_map_open(BPF_F_RDONLY, &len) : -ENOENT;
    uint32_t pid = mounted ? link_prog_id() : 0;
    int root = geteuid() == 0;
    /* only root may look a program up by id, or open the link (mode 0444) */
    int live = pid ? !root || prog_exists(pid) : !root && access(LL_ONCPU_LINK_PIN, F_OK) == 0;
    int loaded = mfd >= 0 && live;
    /* a user who may not call bpf() sees the pins but cannot check them */
    int unverified = !loaded && (mfd == -EPERM || mfd == -EACCES) && access(LL_ONCPU_MAP_PIN, F_OK) == 0 &&
                     access(LL_ONCPU_LINK_PIN, F_OK) == 0;
    if (unverified)
        printf("loaded: yes, not verified (pins present; this user cannot open them: %s)\n", strerror(-mfd));
    else if (loaded && !root)
        printf("loaded: yes, not verified (pins present; only root can check the program)\n");
    else
        printf("loaded: %s\n", loaded ? "yes" : "no");
    loaded |= unverified;
    printf("bpffs: %s\n", mounted ? "mounted at " LL_ONCPU_BPFFS : "not mounted at " LL_ONCPU_BPFFS);
    printf("map: %s", mfd >= 0 ? LL_ONCPU_MAP_PIN : "none");
    if (mfd >= 0)
        printf(" (%zu tids)", len);
    else if (mfd != -ENOENT)
        printf(" (%s)", strerror(-mfd));
    printf("\nlink: %s", pid || live ? LL_ONCPU_LINK_PIN : "none");
    if (pid)
        printf(" (program id %u%s)", pid, live ? "" : ", gone");
    else if (live)
        printf(" (this user cannot open it)");
    if (!root)
        pid = 0; /* its statistics are root's to read */
    union bpf_attr g;
    memset(&g, 0, sizeof g);
    g.prog_id = pid;
    long pfd = live ? ll_bpf(BPF_PROG_GET_FD_BY_ID, &g, sizeof g) : -1;
    struct bpf_prog_info pi;
    if (pfd >= 0 && obj_info((int)pfd, &pi, sizeof pi) == 0 && pi.run_cnt > 0) /* kernel.bpf_stats_enabled=1 */
        printf("\nruns: %llu, %.1f ns each", (unsigned long long)pi.run_cnt,
               (double)pi.run_time_ns / (double)pi.run_cnt);
    if (pfd >= 0)
        close((int)pfd);
    printf("\nprograms: %d named %s in the kernel\n", geteuid() == 0 ? count_progs() : -1, LL_ONCPU_NAME);
    printf("this process: %s\n", ll_oncpu_reason());
    if (mfd >= 0)
        close(mfd);
    return loaded ? 0 : 3;
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "";
    if (strcmp(cmd, "load") == 0)
        return do_load();
    if (strcmp(cmd, "unload") == 0)
        return do_unload();
    if (strcmp(cmd, "status") == 0)
        return do_status();
    fprintf(stderr, "usage: liblock-oncpu load|unload|status\n");
    return 2;
}
