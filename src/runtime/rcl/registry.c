/*
 * registry.c - Remote Core Locking servers as objects: starting and
 * stopping them (liblock_server_start/stop), the list of every server, the
 * default servers of LIBLOCK_SERVERS, binding locks to servers, statistics,
 * fork(), and what happens at exit.  The servers' threads and what they do
 * are in server.c (its header: threads, request slots, invariants I1-I4,
 * idle parking); this file only creates, finds, counts and retires them.
 *
 * Concurrency: the list `all_servers` and every server's start, stop and
 * revival are under servers_mutex; the default-server table under
 * default_mutex (taken before servers_mutex when both are needed: fork
 * prepares them in that order).  Records of stopped servers are kept, so a
 * stale handle is found not running rather than freed memory.  `stopping`,
 * `dormant`, `idle` and `nlocks` are atomics read by clients without the
 * mutex (client.c, direct.c, rcl_wake_idle in server.c): `nlocks` is incremented under
 * servers_mutex only for a server not stopping, and a server is stopped
 * only with nlocks == 0 under the same mutex, so no lock can bind to a
 * server being stopped.
 */
#include "rcl.h"

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ThreadSanitizer's runtime takes internal locks and busy-waits (for
 * example in its pthread_create interceptor) without regard to priorities;
 * under SCHED_FIFO on one CPU a higher-priority server thread can then spin
 * for ever waiting for a lower-priority one.  AddressSanitizer's allocator
 * does the same (seen: the exiting manager, priority P+1, draining its
 * quarantine spins with sched_yield on an allocator spin lock held by a
 * servicing thread, priority P, which never runs again).  Sanitizer builds
 * therefore run servers in degraded mode unless LIBLOCK_RCL_DEGRADED=0. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define RCL_DEGRADED_DEFAULT 1
#else
#define RCL_DEGRADED_DEFAULT 0
#endif

static pthread_mutex_t servers_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t default_mutex = PTHREAD_MUTEX_INITIALIZER;
static struct rcl_server *all_servers;    /* every server ever started (records are kept) */

static struct rcl_server *find_running(int cpu)
{
    for (struct rcl_server *s = all_servers; s; s = s->next_all)
        if (s->cpu == cpu && !atomic_load_explicit(&s->stopping, memory_order_relaxed))
            return s;
    return NULL;
}

int rcl_cpu_is_server(int cpu)
{
    pthread_mutex_lock(&servers_mutex);
    int r = find_running(cpu) != NULL;
    pthread_mutex_unlock(&servers_mutex);
    return r;
}

/* The server's own mutexes: the pool's (priority inheritance: servicing
 * threads of two priorities take it) and the overflow list's.  At start,
 * and again in a forked child (make_dormant), where the parent's may have
 * been held by a thread that is not there. */
static void init_server_mutexes(struct rcl_server *s)
{
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setprotocol(&ma, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&s->pool_mutex, &ma);
    pthread_mutexattr_destroy(&ma);
    pthread_mutex_init(&s->ovf_mutex, NULL);
}

/* The manager's default period: "the operating system's timeslice value"
 * (thesis, section 4.1.2.1).  For threads of a real-time policy that is the
 * kernel's round-robin slice, /proc/sys/kernel/sched_rr_timeslice_ms
 * (100 ms unless changed); 100 ms where the file cannot be read.  In us,
 * within LIBLOCK_RCL_TICK_US's bounds. */
static long rr_timeslice_us(void)
{
    long ms = 100;
    int fd = open("/proc/sys/kernel/sched_rr_timeslice_ms", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[32];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) {
            buf[n] = 0;
            char *end;
            long v = strtol(buf, &end, 10);
            if (end != buf && v >= 1 && v <= 10000)
                ms = v;
        }
    }
    return ms * 1000;
}

LL_EXPORT liblock_server_t *liblock_server_start(int cpu)
{
    int ncpus = ll_ncpus();
    if (cpu < 0 || cpu >= ncpus || cpu >= CPU_SETSIZE) {
        errno = EINVAL;
        return NULL;
    }
    pthread_mutex_lock(&servers_mutex);
    if (find_running(cpu)) {
        pthread_mutex_unlock(&servers_mutex);
        errno = EBUSY;
        return NULL;
    }
    struct rcl_server *s = ll_alloc_pair_aligned(sizeof *s); /* (rcl.h: the pairs of its lines) */
    int err = ENOMEM;
    if (!s)
        goto fail_unlock;
    s->cpu = cpu;
    s->node = ll_cpu_node(cpu);
    s->nslots = rcl_slot_capacity() + 1; /* + the overflow slot */
    s->slots = ll_alloc_on_node((size_t)s->nslots * sizeof(struct rcl_slot), s->node);
    s->busy = ll_alloc_aligned((size_t)s->nslots * sizeof(uint32_t));
    s->maxthreads = (int)ll_env_long("LIBLOCK_RCL_MAX_THREADS", 64, 2, RCL_ELECT_MAX);
    s->threads = calloc((size_t)s->maxthreads, sizeof *s->threads);
    if (!s->slots || !s->busy || !s->threads)
        goto fail_free;
    long slice_us = rr_timeslice_us();
    s->tick_ns = (uint64_t)ll_env_long("LIBLOCK_RCL_TICK_US", slice_us, 100, 10000000) * 1000ull;
    long idle_us = ll_env_long("LIBLOCK_RCL_IDLE_US", 5000, 0, 1000000000L);
    s->idle_cycles = idle_us ? ll_ns_to_cycles((uint64_t)idle_us * 1000ull) : 0;
    long share_us = ll_env_long("LIBLOCK_RCL_SHARE_US", 200, 0, 1000000000L);
    s->share_cycles = share_us ? ll_ns_to_cycles((uint64_t)share_us * 1000ull) : 0;
    long breath_us = ll_env_long("LIBLOCK_RCL_BREATHE_US", 100, 0, 100000);
    s->breath_ns = (uint64_t)breath_us * 1000ull;
    s->breathe_cycles = breath_us ? ll_ns_to_cycles((uint64_t)slice_us * 1000ull) : 0;
    s->degraded = ll_env_long("LIBLOCK_RCL_DEGRADED", RCL_DEGRADED_DEFAULT, 0, 1) != 0 || ncpus < 2;
    int pmin = sched_get_priority_min(SCHED_FIFO);
    s->prio_backup = pmin;
    s->prio_serv = pmin + 1;
    s->prio_mgr = pmin + 2;
    s->local = 1; /* every server thread is created bound to `cpu` (make_attr) */
    init_server_mutexes(s);

    err = rcl_threads_start(s);
    if (err)
        goto fail_free;
    if (s->degraded && ll_env_long("LIBLOCK_RCL_DEGRADED", RCL_DEGRADED_DEFAULT, 0, 1))
        ll_warn_once("rcl_degraded_env", "liblock: rcl: %s: servers run in degraded mode (no SCHED_FIFO)",
                     RCL_DEGRADED_DEFAULT && !getenv("LIBLOCK_RCL_DEGRADED")
                         ? "sanitizer build (LIBLOCK_RCL_DEGRADED=0 forces SCHED_FIFO)"
                         : "LIBLOCK_RCL_DEGRADED=1");
    s->next_all = all_servers;
    all_servers = s;
    pthread_mutex_unlock(&servers_mutex);
    rcl_server_cpus_changed();
    return s;

fail_free:
    if (s) {
        rcl_server_free_arrays(s);
        free(s);
    }
fail_unlock:
    pthread_mutex_unlock(&servers_mutex);
    errno = err ? err : ENOMEM;
    return NULL;
}

static int valid_server(struct rcl_server *h)
{
    for (struct rcl_server *s = all_servers; s; s = s->next_all)
        if (s == h)
            return 1;
    return 0;
}

/* For lock init: a running server, or EINVAL.  Counts the lock. */
int rcl_server_bind(struct rcl_server *s)
{
    pthread_mutex_lock(&servers_mutex);
    int ok = valid_server(s) && !atomic_load_explicit(&s->stopping, memory_order_relaxed);
    if (ok)
        atomic_fetch_add_explicit(&s->nlocks, 1, memory_order_relaxed);
    pthread_mutex_unlock(&servers_mutex);
    return ok ? 0 : EINVAL;
}

void rcl_server_unbind(struct rcl_server *s) { atomic_fetch_sub_explicit(&s->nlocks, 1, memory_order_relaxed); }

/* ---- default servers (LIBLOCK_SERVERS) ---------------------------------- */
#define MAX_DEFAULT 64
static int default_cpus[MAX_DEFAULT], ndefault = -1;
static struct rcl_server *default_srv[MAX_DEFAULT];
static unsigned default_rr;

static void parse_default_cpus(void)
{
    ndefault = 0;
    int ncpus = ll_ncpus();
    const char *e = getenv("LIBLOCK_SERVERS");
    if (e && *e) {
        const char *p = e;
        while (*p && ndefault < MAX_DEFAULT) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v < 0 || v >= ncpus) {
                ll_warn_once("LIBLOCK_SERVERS", "liblock: LIBLOCK_SERVERS=\"%s\" is not a comma-separated list of "
                                                "CPUs below %d; using CPU %d",
                             e, ncpus, ncpus - 1);
                ndefault = 0;
                break;
            }
            default_cpus[ndefault++] = (int)v;
            p = *end == ',' ? end + 1 : end;
            if (*end && *end != ',') {
                ndefault = 0;
                break;
            }
        }
    }
    if (ndefault == 0)
        default_cpus[ndefault++] = ncpus - 1;
}

static struct rcl_server *default_get(int idx)
{
    struct rcl_server *s = default_srv[idx];
    if (s && !atomic_load_explicit(&s->stopping, memory_order_acquire))
        return s;
    s = liblock_server_start(default_cpus[idx]);
    if (!s && errno == EBUSY) { /* the application started one there itself: share it */
        pthread_mutex_lock(&servers_mutex);
        s = find_running(default_cpus[idx]);
        pthread_mutex_unlock(&servers_mutex);
    }
    if (s)
        default_srv[idx] = s;
    return s;
}

/* The server for a lock initialised without liblock_attr_setserver: the
 * LIBLOCK_SERVERS CPUs in turn (round robin in initialisation order). */
struct rcl_server *rcl_default_server(void)
{
    pthread_mutex_lock(&default_mutex);
    if (ndefault < 0)
        parse_default_cpus();
    struct rcl_server *s = default_get((int)(default_rr++ % (unsigned)ndefault));
    int e = errno;
    pthread_mutex_unlock(&default_mutex);
    errno = e;
    return s;
}

LL_EXPORT liblock_server_t *liblock_server_default(void)
{
    pthread_mutex_lock(&default_mutex);
    if (ndefault < 0)
        parse_default_cpus();
    struct rcl_server *s = default_get(0);
    int e = errno;
    pthread_mutex_unlock(&default_mutex);
    errno = e;
    return s;
}

LL_EXPORT int liblock_server_stop(liblock_server_t *h)
{
    struct rcl_server *s = h;
    pthread_mutex_lock(&servers_mutex);
    if (!s || !valid_server(s) || atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
        pthread_mutex_unlock(&servers_mutex);
        return EINVAL;
    }
    if (rcl_tls.my_server == s) {
        pthread_mutex_unlock(&servers_mutex);
        return EDEADLK; /* a thread of the server cannot stop it */
    }
    if (atomic_load_explicit(&s->nlocks, memory_order_acquire) > 0) {
        pthread_mutex_unlock(&servers_mutex);
        return EBUSY;
    }
    pthread_mutex_lock(&s->pool_mutex);
    int in_cs = 0;
    for (int i = 0; i < s->nthreads; i++)
        in_cs |= (int)atomic_load_explicit(&s->threads[i]->in_cs, memory_order_relaxed);
    pthread_mutex_unlock(&s->pool_mutex);
    if (in_cs) {
        pthread_mutex_unlock(&servers_mutex);
        return EBUSY;
    }
    rcl_threads_stop(s);
    rcl_server_free_arrays(s);
    pthread_mutex_unlock(&servers_mutex);
    rcl_server_cpus_changed();
    return 0;
}

LL_EXPORT liblock_server_t *liblock_server_of(const liblock_t *l)
{
    if (!l || l->_magic != LL_LOCK_MAGIC || LL_OPS(l) != &ll_ops_rcl) {
        errno = EINVAL;
        return NULL;
    }
    return rcl_server_of_lock((liblock_t *)l); /* binds a lock not used yet */
}

/* ---- statistics ----------------------------------------------------------- */
static uint64_t rd(_Atomic uint64_t *p) { return atomic_load_explicit(p, memory_order_relaxed); }

LL_EXPORT int liblock_server_stats(liblock_server_t *h, liblock_server_stats_t *o)
{
    struct rcl_server *s = h;
    if (!o)
        return EINVAL;
    pthread_mutex_lock(&servers_mutex);
    if (!s || !valid_server(s)) {
        pthread_mutex_unlock(&servers_mutex);
        return EINVAL;
    }
    memset(o, 0, sizeof *o);
    o->cpu = s->cpu;
    o->degraded = s->degraded;
    o->running = !atomic_load_explicit(&s->stopping, memory_order_relaxed);
    int32_t ns = atomic_load_explicit(&s->n_servicing, memory_order_relaxed);
    o->pool_size = o->running && ns > 0 ? (unsigned)ns : 0;
    pthread_mutex_lock(&s->pool_mutex);
    o->prepared = (unsigned)s->nprepared;
    pthread_mutex_unlock(&s->pool_mutex);
    o->threads_total = (unsigned)rd(&s->st.created);
    o->clients = rcl_clients_in_use();
    o->client_watermark = rcl_client_watermark();
    o->slots = s->nslots - 1; /* the overflow slot is not a client's */
    o->cs_executed = rd(&s->st.cs);
    o->lock_ops = rd(&s->st.lock_ops);
    o->passes = rd(&s->st.passes);
    o->active_passes = rd(&s->st.active_passes);
    o->slow_path_passes = rd(&s->st.slow_passes);
    o->skipped_held = rd(&s->st.skipped_held);
    o->manager_wakeups = rd(&s->st.mgr_wakeups);
    o->alive_misses = rd(&s->st.alive_misses);
    o->elections = rd(&s->st.elections);
    o->backup_runs = rd(&s->st.backup_runs);
    o->threads_created = rd(&s->st.created);
    o->threads_woken = rd(&s->st.woken);
    o->threads_parked = rd(&s->st.parked);
    o->idle_parks = rd(&s->st.idle_parks);
    uint64_t clients = rd(&s->st.clients_in_active);
    o->use_rate = clients ? (double)rd(&s->st.cs_in_active) / (double)clients : 0.0;
    o->false_serialisation_rate = clients ? (double)rd(&s->st.locks_in_active) / (double)clients : 0.0;
    o->slow_path_rate = o->passes ? (double)o->slow_path_passes / (double)o->passes : 0.0;
    pthread_mutex_unlock(&servers_mutex);
    return 0;
}

/* ---- fork() ----------------------------------------------------------------
 * The child of a fork has only the forking thread: every server's threads
 * are gone.  The child handler makes each running server DORMANT: it drops
 * the requests of threads that do not exist in the child, clears the slot
 * claims and the pool, and sets `dormant` and `idle`, creating no thread.
 * Locks keep their state: a lock held through liblock_lock by the forking
 * thread is still held by it; one held by another thread, or by a CS that
 * was running on the server, stays held (as a glibc mutex would).
 *
 * A dormant server's threads are created by the first client that needs it
 * (revive): every client that finds `idle` set calls rcl_wake_idle, which
 * revives a dormant server instead of waking it.  So a child that only
 * execs, or never uses RCL, creates no thread.  The revived server is on
 * the same CPU at the same priorities as the parent's; the two servers
 * take turns on that CPU (a busy servicing thread yields every
 * LIBLOCK_RCL_SHARE_US, "Sharing the CPU" above) instead of one holding
 * it for milliseconds at a time (docs/rcl.md, "fork").  The handlers are registered by a high-priority constructor so
 * that the child handler runs before those of other components (the
 * interposer's child handler takes locks). */
static void fork_prepare(void)
{
    pthread_mutex_lock(&default_mutex);
    pthread_mutex_lock(&servers_mutex);
    rcl_ids_fork_prepare();
}

static void fork_parent(void)
{
    rcl_ids_fork_parent();
    pthread_mutex_unlock(&servers_mutex);
    pthread_mutex_unlock(&default_mutex);
}

static void make_dormant(struct rcl_server *s)
{
    init_server_mutexes(s);
    for (unsigned i = 0; i < s->nslots; i++) {
        atomic_store_explicit(&s->slots[i].fn, NULL, memory_order_relaxed);
        atomic_store_explicit(&s->slots[i].parked, 0, memory_order_relaxed);
        atomic_store_explicit(&s->busy[i], 0, memory_order_relaxed);
    }
    for (int i = 0; i < s->nthreads; i++)
        free(s->threads[i]); /* their threads do not exist here */
    s->nthreads = 0;
    s->prepared = NULL;
    s->nprepared = 0;
    atomic_store_explicit(&s->n_free, 0, memory_order_relaxed);
    atomic_store_explicit(&s->n_servicing, 0, memory_order_relaxed);
    atomic_store_explicit(&s->backup_req, 0, memory_order_relaxed);
    atomic_store_explicit(&s->coloc_recent, 0, memory_order_relaxed);
    s->have_manager = s->have_backup = 0;
    atomic_store_explicit(&s->dormant, 1, memory_order_relaxed);
    atomic_store_explicit(&s->idle, 1, memory_order_relaxed); /* clients call rcl_wake_idle */
}

/* First use of a dormant server (called by a client through rcl_wake_idle). */
void rcl_server_revive(struct rcl_server *s)
{
    pthread_mutex_lock(&servers_mutex);
    if (atomic_load_explicit(&s->dormant, memory_order_relaxed) &&
        !atomic_load_explicit(&s->stopping, memory_order_relaxed)) {
        atomic_store_explicit(&s->idle, 0, memory_order_relaxed);
        int err = rcl_threads_start(s);
        if (err) {
            atomic_store_explicit(&s->idle, 1, memory_order_relaxed); /* the next client tries again */
            ll_warn_once("rcl_fork", "liblock: rcl: cannot start the server on CPU %d in this child process (%s); "
                                     "retrying",
                         s->cpu, strerror(err));
        } else {
            atomic_store_explicit(&s->dormant, 0, memory_order_release);
        }
    }
    pthread_mutex_unlock(&servers_mutex);
}

static void fork_child(void)
{
    rcl_ids_fork_child();
    pthread_mutex_init(&servers_mutex, NULL);
    pthread_mutex_init(&default_mutex, NULL);
    if (rcl_tls.my_server)
        return; /* forked from a server thread: leave the servers alone */
    for (struct rcl_server *s = all_servers; s; s = s->next_all)
        if (!atomic_load_explicit(&s->stopping, memory_order_relaxed))
            make_dormant(s);
}

__attribute__((constructor(101))) static void rcl_register_fork(void)
{
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* At exit: print statistics when LIBLOCK_STATS=1.  Servers are NOT
 * stopped: destructors of other libraries and atexit handlers that run
 * after this one (and threads still running while another calls exit())
 * may lock mutexes, and their requests must be served.  The threads end
 * with the process. */
__attribute__((destructor)) static void rcl_at_exit(void)
{
    if (!all_servers || ll_env_long("LIBLOCK_STATS", 0, 0, 1000) == 0)
        return;
    for (struct rcl_server *s = all_servers; s; s = s->next_all) {
        liblock_server_stats_t st;
        if (liblock_server_stats(s, &st) == 0)
            fprintf(stderr,
                    "liblock: rcl server cpu %d%s: %llu CS, %llu lock ops, use rate %.3f, false serialisation "
                    "%.3f, slow path %.4f, manager wake-ups %llu, is_alive unset %llu, elections %llu, backup "
                    "%llu, threads created %llu woken %llu parked %llu, idle parks %llu\n",
                    st.cpu, st.degraded ? " (degraded)" : "", (unsigned long long)st.cs_executed,
                    (unsigned long long)st.lock_ops, st.use_rate, st.false_serialisation_rate, st.slow_path_rate,
                    (unsigned long long)st.manager_wakeups, (unsigned long long)st.alive_misses,
                    (unsigned long long)st.elections, (unsigned long long)st.backup_runs,
                    (unsigned long long)st.threads_created, (unsigned long long)st.threads_woken,
                    (unsigned long long)st.threads_parked, (unsigned long long)st.idle_parks);
    }
}
