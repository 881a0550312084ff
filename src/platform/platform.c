/*
 * platform.c - the OS and hardware layer: clocks, CPUs and topology,
 * pinning, aligned/NUMA allocation, futexes, environment and warnings.
 *
 * Topology comes from hwloc when liblock was built with it (HAVE_HWLOC),
 * otherwise from Linux sysfs.  LIBLOCK_NUMA_MAP overrides the NUMA node of
 * each CPU ("0,0,1,1" gives CPUs 0-1 node 0 and CPUs 2-3 node 1) so that
 * NUMA-aware algorithms can be exercised on a one-node machine.
 */
#include "../internal.h"

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
#ifdef HAVE_NUMA
#include <numa.h>
#endif

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
 * more than 0.5 %, three 2 ms windows decide instead.  This runs at the
 * start of every interposed program (`liblock run`), where three 2 ms
 * windows were 6 of the 11 ms the interposer added to a program's start.
 * Computed once; racing first callers compute the same value and the last
 * store wins, which is harmless. */
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

double ll_cycles_per_ns(void)
{
    double v = atomic_load_explicit(&cycles_per_ns_cache, memory_order_relaxed);
    if (v > 0)
        return v;
    double a = calibrate_once(250000), b = calibrate_once(250000), c = calibrate_once(250000);
    double lo = a < b ? (a < c ? a : c) : (b < c ? b : c), hi = a > b ? (a > c ? a : c) : (b > c ? b : c);
    double med = median3(a, b, c);
    if (!(lo > 0) || hi / lo > 1.005)
        med = median3(calibrate_once(2000000), calibrate_once(2000000), calibrate_once(2000000));
    if (!(med > 0.01))
        med = 1.0; /* no usable cycle counter: cycles are nanoseconds */
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

/* ---- topology ----------------------------------------------------------- */
#define LL_MAX_CPUS 1024
static pthread_once_t topo_once = PTHREAD_ONCE_INIT;
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

#ifdef HAVE_HWLOC
static int topo_from_hwloc(void)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0)
        return -1;
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return -1;
    }
    int npu = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    for (int i = 0; i < npu; i++) {
        hwloc_obj_t pu = hwloc_get_obj_by_type(t, HWLOC_OBJ_PU, i);
        int c = (int)pu->os_index;
        if (c < 0 || c >= LL_MAX_CPUS)
            continue;
        hwloc_obj_t o;
        o = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_PACKAGE, pu);
        topo_pkg[c] = o ? (short)o->logical_index : 0;
        o = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_CORE, pu);
        topo_core[c] = o ? (short)o->logical_index : (short)c;
        topo_node[c] = 0;
        if (pu->nodeset) {
            int node = hwloc_bitmap_first(pu->nodeset);
            if (node >= 0)
                topo_node[c] = (short)node;
        }
    }
    hwloc_topology_destroy(t);
    topo_source = "hwloc";
    return 0;
}
#endif

static void topo_init(void)
{
    LL_KEEP_ERRNO; /* reached from a lock call on first use (mcscrn: the node of a CPU) */
#ifdef HAVE_HWLOC
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

static int topo_get(short *arr, int cpu, int dflt)
{
    pthread_once(&topo_once, topo_init);
    if (cpu < 0 || cpu >= LL_MAX_CPUS)
        return dflt;
    return arr[cpu];
}

int ll_cpu_node(int cpu) { return topo_get(topo_node, cpu, 0); }
int ll_cpu_package(int cpu) { return topo_get(topo_pkg, cpu, 0); }
int ll_cpu_core(int cpu) { return topo_get(topo_core, cpu, cpu); }
const char *ll_topology_source(void)
{
    pthread_once(&topo_once, topo_init);
    return topo_source;
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
void *ll_alloc_aligned(size_t size)
{
    size_t sz = (size + LL_CACHELINE - 1) & ~(size_t)(LL_CACHELINE - 1);
    if (sz == 0)
        sz = LL_CACHELINE;
    void *p = aligned_alloc(LL_CACHELINE, sz);
    if (p)
        memset(p, 0, sz);
    return p;
}

void *ll_alloc_on_node(size_t size, int node)
{
#ifdef HAVE_NUMA
    if (node >= 0 && numa_available() >= 0 && numa_max_node() > 0) {
        void *p = numa_alloc_onnode(size, node); /* page aligned, zeroed */
        if (p)
            return p;
    }
#endif
    (void)node;
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ll_free_on_node(void *p, size_t size)
{
    if (!p)
        return;
#ifdef HAVE_NUMA
    if (numa_available() >= 0 && numa_max_node() > 0) {
        numa_free(p, size);
        return;
    }
#endif
    munmap(p, size);
}

/* ---- futex ------------------------------------------------------------------ */
/* Both return their error instead of leaving it in errno, and keep the
 * caller's errno: a lock call must not change it (glibc's do not, and
 * programs read errno across them -- CPython after readdir(), across its
 * GIL), while a futex wait that finds the word changed fails with EAGAIN
 * all the time. */
int ll_futex_wait(_Atomic uint32_t *addr, uint32_t val, const struct timespec *rel)
{
    int saved = errno;
    long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, rel, NULL, 0);
    int e = r == 0 ? 0 : errno;
    errno = saved;
    return e;
}

int ll_futex_wake(_Atomic uint32_t *addr, int n)
{
    int saved = errno;
    long r = syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
    int e = r < 0 ? -errno : (int)r;
    errno = saved;
    return e;
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

void ll_warn_once(const char *key, const char *fmt, ...)
{
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
