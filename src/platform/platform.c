/*
 * platform.c - the OS and hardware layer: clocks, CPUs and topology,
 * pinning, aligned/NUMA allocation, futexes, environment and warnings.
 *
 * Topology comes from hwloc when liblock was built with it (HAVE_HWLOC;
 * opened with dlopen on first need, "topology" below), otherwise from Linux
 * sysfs.  LIBLOCK_NUMA_MAP overrides the NUMA node of
 * each CPU ("0,0,1,1" gives CPUs 0-1 node 0 and CPUs 2-3 node 1) so that
 * NUMA-aware algorithms can be exercised on a one-node machine.
 */
#include "internal.h"

#include <linux/futex.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif
#include <dlfcn.h>
#include <fcntl.h>

uint64_t ll_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* TSC calibration: count cycles across a window of CLOCK_MONOTONIC, three
 * times, and take the median.  Short windows first (250 us each): with the
 * vDSO clock read to within ~50 ns the error is ~0.02 %, far below what any
 * use here needs (spin budgets, timeouts, reports).  A preemption inside a
 * window makes that try disagree with the others; if the three differ by
 * more than 0.5 %, three 2 ms windows decide instead.  Done on first need,
 * and only when no figure was measured before (calibration.c: the figure
 * `liblock run` hands down, else the machine's cache, to which a new
 * measurement is written).  Computed once; racing first callers compute
 * the same value and the last store wins, which is harmless. */
static _Atomic double cycles_per_ns_cache;

static double calibrate_once(uint64_t window_ns)
{
    uint64_t t0 = ll_now_ns(), c0 = ll_cycles();
    uint64_t t1;
    do
        t1 = ll_now_ns();
    while (t1 - t0 < window_ns);
    uint64_t c1 = ll_cycles();
    return (double)(c1 - c0) / (double)(t1 - t0);
}

static double median3(double a, double b, double c)
{
    return a > b ? (b > c ? b : (a > c ? c : a)) : (a > c ? a : (b > c ? c : b));
}

static double calibrate(void)
{
    double a = calibrate_once(250000), b = calibrate_once(250000), c = calibrate_once(250000);
    double lo = a < b ? (a < c ? a : c) : (b < c ? b : c), hi = a > b ? (a > c ? a : c) : (b > c ? b : c);
    double med = median3(a, b, c);
    if (!(lo > 0) || hi / lo > 1.005)
        med = median3(calibrate_once(2000000), calibrate_once(2000000), calibrate_once(2000000));
    return med;
}

double ll_cycles_per_ns(void)
{
    double v = atomic_load_explicit(&cycles_per_ns_cache, memory_order_relaxed);
    if (LL_LIKELY(v > 0))
        return v;
    struct ll_calibration known;
    const char *src;
    double med;
    if (ll_calibration_lookup(&known, &src) == 0 && known.cycles_per_ns > 0) {
        med = known.cycles_per_ns;
    } else {
        med = calibrate();
        if (!(med > 0.01))
            med = 1.0; /* no usable cycle counter: cycles are nanoseconds */
        else
            (void)ll_calibration_store(&(struct ll_calibration){med, 0});
    }
    atomic_store_explicit(&cycles_per_ns_cache, med, memory_order_relaxed);
    return med;
}

uint64_t ll_ns_to_cycles(uint64_t ns) { return (uint64_t)((double)ns * ll_cycles_per_ns()); }

int ll_ncpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static long read_sysfs_long(const char *path, long dflt)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return dflt;
    long v;
    if (fscanf(f, "%ld", &v) != 1)
        v = dflt;
    fclose(f);
    return v;
}

int ll_cacheline(void)
{
    static _Atomic int cached;
    int v = atomic_load_explicit(&cached, memory_order_relaxed);
    if (v)
        return v;
    long l = read_sysfs_long("/sys/devices/system/cpu/cpu0/cache/index0/coherency_line_size", 0);
    if (l <= 0)
        l = sysconf(_SC_LEVEL1_DCACHE_LINESIZE);
    if (l <= 0)
        l = LL_CACHELINE;
    atomic_store_explicit(&cached, (int)l, memory_order_relaxed);
    return (int)l;
}

/* ---- topology -----------------------------------------------------------
 * Loaded on first need (an RCL server's placement, mcscrn's node of a
 * waiter, a report), never at start-up: hwloc opens a hundred files, and
 * its x86 backend moves the calling thread across every CPU.  libhwloc is
 * opened then (dlopen of the ABI this was compiled against), so a process
 * that never needs the topology does not even load it; without it (or
 * without HAVE_HWLOC) the topology comes from sysfs.  The x86 backend is
 * left out (hwloc_topology_set_components, hwloc >= 2.1): the Linux backend
 * gives packages, cores and nodes from sysfs without moving the thread.
 *
 * Reentrancy: hwloc takes pthread mutexes, which under the interposer would
 * come back into the library (and, under mcscrn, ask a waiter's node; under
 * rcl, start a server while liblock_server_start holds its mutex): the load
 * runs between ll_foreign_enter and ll_foreign_leave, so the preload
 * libraries leave those mutexes to glibc, as during their own set-up.  The
 * load is not a pthread_once, which would deadlock on itself: state 0 (not
 * loaded) -> 1 (one thread loading) -> 2 (loaded), by CAS; while it is 1,
 * the loading thread itself and every other thread get the defaults (node
 * 0, package 0, core = cpu: a placement heuristic answered approximately
 * once), except ll_topology_source(), a report, which waits when asked by
 * another thread.  The arrays are written before the release store of 2 and
 * read after an acquire load of 2. */
#define LL_MAX_CPUS 1024
static _Atomic int topo_state; /* 0 not loaded, 1 loading, 2 loaded */
static __thread int topo_loading_here;
static short topo_node[LL_MAX_CPUS], topo_pkg[LL_MAX_CPUS], topo_core[LL_MAX_CPUS];
static const char *topo_source = "none";

static void topo_from_sysfs(void)
{
    char path[160];
    int n = ll_ncpus();
    for (int c = 0; c < n && c < LL_MAX_CPUS; c++) {
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/physical_package_id", c);
        topo_pkg[c] = (short)read_sysfs_long(path, 0);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/core_id", c);
        topo_core[c] = (short)read_sysfs_long(path, c);
        topo_node[c] = 0;
        for (int node = 0; node < 64; node++) {
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/node%d", c, node);
            if (access(path, F_OK) == 0) {
                topo_node[c] = (short)node;
                break;
            }
        }
        topo_source = "sysfs";
    }
}

#if defined(HAVE_HWLOC) && defined(LL_HWLOC_SONAME)
/* The nearest ancestor of type t (what hwloc's inline
 * hwloc_get_ancestor_obj_by_type does, written here so that nothing links
 * against libhwloc). */
static hwloc_obj_t ancestor(hwloc_obj_t o, hwloc_obj_type_t t)
{
    for (o = o->parent; o; o = o->parent)
        if (o->type == t)
            return o;
    return NULL;
}

static int topo_from_hwloc(void)
{
    void *h = dlopen(LL_HWLOC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return -1;
    int (*t_init)(hwloc_topology_t *) = (int (*)(hwloc_topology_t *))dlsym(h, "hwloc_topology_init");
    int (*t_load)(hwloc_topology_t) = (int (*)(hwloc_topology_t))dlsym(h, "hwloc_topology_load");
    void (*t_destroy)(hwloc_topology_t) = (void (*)(hwloc_topology_t))dlsym(h, "hwloc_topology_destroy");
    int (*t_comp)(hwloc_topology_t, unsigned long, const char *) =
        (int (*)(hwloc_topology_t, unsigned long, const char *))dlsym(h, "hwloc_topology_set_components");
    int (*depth_of)(hwloc_topology_t, hwloc_obj_type_t) =
        (int (*)(hwloc_topology_t, hwloc_obj_type_t))dlsym(h, "hwloc_get_type_depth");
    unsigned (*nb_at)(hwloc_topology_t, int) = (unsigned (*)(hwloc_topology_t, int))dlsym(h, "hwloc_get_nbobjs_by_depth");
    hwloc_obj_t (*obj_at)(hwloc_topology_t, int, unsigned) =
        (hwloc_obj_t(*)(hwloc_topology_t, int, unsigned))dlsym(h, "hwloc_get_obj_by_depth");
    int (*bm_first)(hwloc_const_bitmap_t) = (int (*)(hwloc_const_bitmap_t))dlsym(h, "hwloc_bitmap_first");
    if (!t_init || !t_load || !t_destroy || !depth_of || !nb_at || !obj_at || !bm_first)
        return -1; /* (the library stays open: closing it gains nothing) */
    hwloc_topology_t t;
    if (t_init(&t) != 0)
        return -1;
    if (t_comp)
        (void)t_comp(t, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
    if (t_load(t) != 0) {
        t_destroy(t);
        return -1;
    }
    int d = depth_of(t, HWLOC_OBJ_PU);
    unsigned npu = d >= 0 ? nb_at(t, d) : 0;
    for (unsigned i = 0; i < npu; i++) {
        hwloc_obj_t pu = obj_at(t, d, i);
        if (!pu)
            continue;
        int c = (int)pu->os_index;
        if (c < 0 || c >= LL_MAX_CPUS)
            continue;
        hwloc_obj_t o = ancestor(pu, HWLOC_OBJ_PACKAGE);
        topo_pkg[c] = o ? (short)o->logical_index : 0;
        o = ancestor(pu, HWLOC_OBJ_CORE);
        topo_core[c] = o ? (short)o->logical_index : (short)c;
        topo_node[c] = 0;
        if (pu->nodeset) {
            int node = bm_first(pu->nodeset);
            if (node >= 0)
                topo_node[c] = (short)node;
        }
    }
    t_destroy(t);
    topo_source = "hwloc";
    return npu ? 0 : -1;
}
#endif

static void topo_load(void)
{
    LL_KEEP_ERRNO; /* reached from a lock call on first use (mcscrn: the node of a CPU) */
    LL_NO_CANCEL;
#if defined(HAVE_HWLOC) && defined(LL_HWLOC_SONAME)
    if (topo_from_hwloc() != 0)
        topo_from_sysfs();
#else
    topo_from_sysfs();
#endif
    const char *map = getenv("LIBLOCK_NUMA_MAP");
    if (map && *map) {
        int c = 0;
        const char *p = map;
        while (*p && c < LL_MAX_CPUS) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v > 255) {
                ll_warn_once("numa_map", "liblock: LIBLOCK_NUMA_MAP=\"%s\" is not a comma-separated list of node numbers; ignored", map);
                break;
            }
            topo_node[c++] = (short)v;
            p = (*end == ',') ? end + 1 : end;
            if (*end && *end != ',')
                break;
        }
    }
}

/* 1 once the topology is loaded (loading it now if nobody is); 0 while
 * another thread, or this one further up its stack, loads it. */
static int topo_ready(void)
{
    int st = atomic_load_explicit(&topo_state, memory_order_acquire);
    if (LL_LIKELY(st == 2))
        return 1;
    if (st == 0 && atomic_compare_exchange_strong_explicit(&topo_state, &st, 1, memory_order_acquire,
                                                           memory_order_acquire)) {
        topo_loading_here = 1;
        if (ll_foreign_enter)
            ll_foreign_enter();
        topo_load();
        if (ll_foreign_leave)
            ll_foreign_leave();
        topo_loading_here = 0;
        atomic_store_explicit(&topo_state, 2, memory_order_release);
        return 1;
    }
    return atomic_load_explicit(&topo_state, memory_order_acquire) == 2;
}

static int topo_get(short *arr, int cpu, int dflt)
{
    if (cpu < 0 || cpu >= LL_MAX_CPUS || !topo_ready())
        return dflt;
    return arr[cpu];
}

/* 1 if the machine has one NUMA node (/sys/devices/system/node/online says
 * "0", or there is no such file) and LIBLOCK_NUMA_MAP does not say
 * otherwise: every CPU is then on node 0 without loading the topology
 * (mcscrn asks the node of every acquirer).  Racing first callers compute
 * and store the same answer. */
static _Atomic int many_nodes_state; /* 0 not known, 1 several nodes online, -1 one */

/* More than one NUMA node online according to sysfs (racing first callers
 * compute and store the same answer). */
static int many_nodes(void)
{
    int st = atomic_load_explicit(&many_nodes_state, memory_order_relaxed);
    if (LL_LIKELY(st))
        return st > 0;
    LL_KEEP_ERRNO;
    LL_NO_CANCEL; /* reached from a lock call on first need (the open and read are cancellation points) */
    char buf[64];
    ll_read_file("/sys/devices/system/node/online", buf, sizeof buf);
    st = buf[0] && strcmp(buf, "0\n") != 0 && strcmp(buf, "0") != 0 ? 1 : -1;
    atomic_store_explicit(&many_nodes_state, st, memory_order_relaxed);
    return st > 0;
}

static _Atomic int one_node_state; /* 0 not known, 1 one node, -1 more (or a LIBLOCK_NUMA_MAP) */

static int one_node(void)
{
    int st = atomic_load_explicit(&one_node_state, memory_order_relaxed);
    if (LL_LIKELY(st))
        return st > 0;
    const char *map = getenv("LIBLOCK_NUMA_MAP");
    st = !(map && *map) && !many_nodes() ? 1 : -1;
    atomic_store_explicit(&one_node_state, st, memory_order_relaxed);
    return st > 0;
}

int ll_cpu_node(int cpu)
{
    if (atomic_load_explicit(&topo_state, memory_order_acquire) != 2 && one_node())
        return 0;
    return topo_get(topo_node, cpu, 0);
}
int ll_cpu_package(int cpu) { return topo_get(topo_pkg, cpu, 0); }
int ll_cpu_core(int cpu) { return topo_get(topo_core, cpu, cpu); }
const char *ll_topology_source(void)
{
    while (!topo_ready() && !topo_loading_here)
        ll_yield(); /* another thread is loading it */
    return atomic_load_explicit(&topo_state, memory_order_acquire) == 2 ? topo_source : "none";
}

int ll_current_cpu(void) { return sched_getcpu(); }

int ll_pin_thread(pthread_t t, int cpu)
{
    if (cpu < 0 || cpu >= CPU_SETSIZE)
        return EINVAL;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t, sizeof set, &set);
}

int ll_pin_self(int cpu) { return ll_pin_thread(pthread_self(), cpu); }

/* ---- memory --------------------------------------------------------------- */
/* size rounded up to a multiple of align (a power of two), zeroed */
static void *alloc_zeroed(size_t align, size_t size)
{
    size_t sz = (size + align - 1) & ~(align - 1);
    if (sz == 0)
        sz = align;
    void *p = aligned_alloc(align, sz);
    if (p)
        memset(p, 0, sz);
    return p;
}

void *ll_alloc_aligned(size_t size) { return alloc_zeroed(LL_CACHELINE, size); }

void *ll_alloc_pair_aligned(size_t size) { return alloc_zeroed(LL_PAIR, size); }

/* libnuma, opened on first need and only on a machine with more than one
 * node (/sys/devices/system/node/online is not just "0"): a one-node
 * machine gains nothing from it, and loading it (its constructor reads
 * several files) at every process start would cost every program.
 * numa_state: 0 not known, 1 in use, -1 not used; every racing first caller
 * computes and stores the same answer; the function pointers are written
 * before the release store of 1 and read after an acquire load of 1. */
static _Atomic int numa_state;
static void *(*numa_alloc_onnode_fn)(size_t, int);
static void (*numa_free_fn)(void *, size_t);

static int numa_on(void)
{
    int st = atomic_load_explicit(&numa_state, memory_order_acquire);
    if (LL_LIKELY(st))
        return st > 0;
    st = -1;
#if defined(HAVE_NUMA) && defined(LL_NUMA_SONAME)
    LL_KEEP_ERRNO;
    if (many_nodes()) {
        if (ll_foreign_enter)
            ll_foreign_enter();
        void *h = dlopen(LL_NUMA_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (ll_foreign_leave)
            ll_foreign_leave();
        int (*avail)(void) = h ? (int (*)(void))dlsym(h, "numa_available") : NULL;
        int (*maxnode)(void) = h ? (int (*)(void))dlsym(h, "numa_max_node") : NULL;
        void *(*al)(size_t, int) = h ? (void *(*)(size_t, int))dlsym(h, "numa_alloc_onnode") : NULL;
        void (*fr)(void *, size_t) = h ? (void (*)(void *, size_t))dlsym(h, "numa_free") : NULL;
        if (avail && maxnode && al && fr && avail() >= 0 && maxnode() > 0) {
            numa_alloc_onnode_fn = al;
            numa_free_fn = fr;
            st = 1;
        }
    }
#endif
    atomic_store_explicit(&numa_state, st, memory_order_release);
    return st > 0;
}

void *ll_alloc_on_node(size_t size, int node)
{
    if (node >= 0 && numa_on()) {
        void *p = numa_alloc_onnode_fn(size, node); /* page aligned, zeroed */
        if (p)
            return p;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ll_free_on_node(void *p, size_t size)
{
    if (!p)
        return;
    if (numa_on()) {
        numa_free_fn(p, size); /* numa_free is munmap: right for the mmap fallback too */
        return;
    }
    munmap(p, size);
}

/* ---- futex ------------------------------------------------------------------ */
/* Both return their error instead of leaving it in errno, and keep the
 * caller's errno: a lock call must not change it (glibc's do not, and
 * programs read errno across them -- CPython after readdir(), across its
 * GIL), while a futex wait that finds the word changed fails with EAGAIN
 * all the time. */
/* They do not touch errno at all, not even to save and restore it: a
 * thread waiting for its delegated section, which runs elsewhere with this
 * thread's identity and may set errno meanwhile, would put back a stale
 * value (platform/identity.h, I2).  On x86-64 the system call is made
 * directly (its result is -errno in rax); elsewhere through syscall(). */
long ll_syscall_raw(long nr, long a, long b, long c, long d, long e, long f)
{
#if defined(__x86_64__)
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ __volatile__("syscall"
                         : "=a"(ret)
                         : "0"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                         : "rcx", "r11", "memory");
    return ret;
#else
    int saved = errno;
    long r = syscall(nr, a, b, c, d, e, f);
    if (r < 0)
        r = -errno;
    errno = saved;
    return r;
#endif
}

int ll_futex_wait(_Atomic uint32_t *addr, uint32_t val, const struct timespec *rel)
{
    long r = ll_syscall_raw(SYS_futex, (long)addr, FUTEX_WAIT_PRIVATE, val, (long)rel, 0, 0);
    return r == 0 ? 0 : (int)-r;
}

int ll_futex_wake(_Atomic uint32_t *addr, int n)
{
    return (int)ll_syscall_raw(SYS_futex, (long)addr, FUTEX_WAKE_PRIVATE, n, 0, 0, 0);
}

void ll_yield(void) { sched_yield(); }

/* ---- environment and warnings -------------------------------------------------- */
long ll_env_long(const char *name, long dflt, long min, long max)
{
    LL_KEEP_ERRNO; /* read lazily, inside lock calls too */
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || *end || v < min || v > max) {
        ll_warn_once(name, "liblock: %s=\"%s\" is not an integer in [%ld, %ld]; using %ld", name, s, min, max, dflt);
        return dflt;
    }
    return v;
}

int ll_mutex_lock_bounded(pthread_mutex_t *m)
{
    for (int i = 0; i < 1000; i++) {
        if (pthread_mutex_trylock(m) == 0)
            return 1;
        ll_yield();
    }
    return 0;
}

double ll_env_double(const char *name, double dflt, double min, double max)
{
    LL_KEEP_ERRNO;
    const char *s = getenv(name);
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= min && v <= max)) {
        ll_warn_once(name, "liblock: %s=\"%s\" is not a number in [%g, %g]; using %g", name, s, min, max, dflt);
        return dflt;
    }
    return v;
}

#define LL_WARN_KEYS 64
static const char *warned_keys[LL_WARN_KEYS];
static pthread_mutex_t warn_mutex = PTHREAD_MUTEX_INITIALIZER;

long ll_read_file(const char *path, char *buf, size_t n)
{
    if (n)
        buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || n < 2) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    ssize_t k = read(fd, buf, n - 1);
    close(fd);
    if (k <= 0)
        return -1;
    buf[k] = '\0';
    return k;
}

void ll_warn_once(const char *key, const char *fmt, ...)
{
    LL_KEEP_ERRNO;
    LL_NO_CANCEL; /* reached from lock calls; fprintf may be a cancellation point */
    pthread_mutex_lock(&warn_mutex);
    int i;
    for (i = 0; i < LL_WARN_KEYS && warned_keys[i]; i++)
        if (strcmp(warned_keys[i], key) == 0) {
            pthread_mutex_unlock(&warn_mutex);
            return;
        }
    if (i < LL_WARN_KEYS)
        warned_keys[i] = key;
    pthread_mutex_unlock(&warn_mutex);
    va_list ap;
    va_start(ap, fmt);
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", buf);
}
