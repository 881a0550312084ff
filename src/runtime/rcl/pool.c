/*
 * pool.c - Remote Core Locking: a server's threads other than the
 * servicing loop (server.c): creation of servicing threads, the management
 * and backup threads (Algorithm 11: making sure a free servicing thread
 * exists, forced elections), and starting and stopping a server's threads.
 * Servers as objects are in registry.c.
 *
 * Source: J.-P. Lozi, "Towards More Scalable Mutual Exclusion for
 * Multicore Architectures", PhD thesis, UPMC (Paris 6), 2014, section 4.1,
 * Algorithm 11 (manager and backup threads, written here from the prose of
 * sections 4.1.2.1-4.1.2.2).
 *
 * ---- Threads of a server (all bound to the server's CPU) ----------------
 *   servicing threads  SCHED_FIFO, priority P.  Scan the request array and
 *                      run critical sections (CSs).  A pool: more than one
 *                      exists only while CSs block, spin or are preempted.
 *   management thread  SCHED_FIFO, priority P+1 (highest).  Wakes every tick
 *                      (LIBLOCK_RCL_TICK_US, default the kernel's round-
 *                      robin slice, 100 ms: registry.c); if no servicing
 *                      thread completed a scan since the last tick (is_alive
 *                      unset) it makes sure a free servicing thread exists
 *                      and forces an election: it lowers then raises the
 *                      priority of the pool's threads, least CPU-hungry
 *                      since the last election first, which reorders the
 *                      FIFO queue so that the threads that did not run
 *                      (the free one, a CS that became runnable behind a
 *                      spinner) run before the spinner.
 *   backup thread      SCHED_FIFO, priority P-1 (lowest; the thesis's
 *                      choice).  FIFO never runs it while a servicing or
 *                      management thread of this CPU can run, so it runs
 *                      when every servicing thread is blocked in the
 *                      kernel (or while one breathes, server.c: then it
 *                      finds a free thread and does nothing); if none is
 *                      free it pokes the manager (section 4.1.2.2), which
 *                      preempts it at once and provides a free servicing
 *                      thread (waking a parked one or creating one).  The
 *                      backup itself takes no lock and allocates nothing:
 *                      at the bottom priority it can be preempted anywhere,
 *                      and a lock held by it (a glibc allocator or
 *                      thread-stack lock) could stall the manager behind a
 *                      CS that spins forever.  All pool changes are made by
 *                      the manager, which nothing on the CPU preempts.
 *                      Why not a CFS thread: one that waits to run on a CPU
 *                      a FIFO thread keeps busy is a starved fair task, and
 *                      Linux then hands the CPU to the fair class for its
 *                      reserved share (the fair server: 50 ms of each
 *                      second by default), taking it from the servicing
 *                      thread in one piece; a backup that is CFS is such a
 *                      task every time its nap ends.  A FIFO thread below
 *                      the servicing threads never runs while ANOTHER
 *                      process's servicing thread is busy on the same CPU,
 *                      not even to exit: that is why servicing threads
 *                      breathe (server.c, "Breathing").

 * Degraded mode (LIBLOCK_RCL_DEGRADED=1, or automatically when the kernel
 * refuses SCHED_FIFO, with a one-line warning): the same threads under CFS:
 * servicing and management threads SCHED_OTHER, the backup SCHED_IDLE (runs
 * only when the CPU would otherwise idle, plus tiny slivers), no forced
 * elections (CFS time-slices spinning threads anyway).  Liveness is kept;
 * latency under blocking is worse.
 *
 * Invariants (I1-I4 of server.c): the pool counters (n_free, n_servicing)
 * and the statistics are written only by threads bound to the server CPU,
 * so their local (non-LOCK) atomics are correct; pool changes (the
 * prepared stack, the threads array) are made under pool_mutex.  The
 * orderings of each flag are given where it is written.
 */
#include "rcl.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void name_thread(const char *what, int cpu)
{
    char name[16];
    snprintf(name, sizeof name, "rcl-%s-%d", what, cpu);
    pthread_setname_np(pthread_self(), name);
}

/* What every thread of a server (servicing, manager, backup) does first:
 * its name, the server it belongs to, and the core's servicing mark, which
 * the interposer's pthread_create reads (internal.h).  Both are this
 * thread's own thread-local variables: no ordering is involved. */
static void enter_server_thread(struct rcl_server *s, const char *what)
{
    name_thread(what, s->cpu);
    rcl_tls.my_server = s;
    ll_servicing_tls = 1;
}

static void *sthread_main(void *arg)
{
    struct rcl_sthread *me = arg;
    struct rcl_server *s = me->server;
    enter_server_thread(s, "srv");
    rcl_tls.me = me;
    rcl_serve_loop(s, me);
    rcl_servicing_id_release();
    return NULL;
}

/* Thread attributes: bound to the server CPU; FIFO at `prio` unless
 * degraded. */
static int make_attr(struct rcl_server *s, pthread_attr_t *a, int prio)
{
    pthread_attr_init(a);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(s->cpu, &set);
    pthread_attr_setaffinity_np(a, sizeof set, &set);
    if (!s->degraded) {
        struct sched_param sp = {.sched_priority = prio};
        pthread_attr_setinheritsched(a, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(a, SCHED_FIFO);
        pthread_attr_setschedparam(a, &sp);
    } else {
        pthread_attr_setinheritsched(a, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(a, SCHED_OTHER);
        struct sched_param sp = {.sched_priority = 0};
        pthread_attr_setschedparam(a, &sp);
    }
    return 0;
}

/* Create a servicing thread counted as free.  Caller holds pool_mutex. */
static int spawn_sthread(struct rcl_server *s)
{
    if (s->nthreads >= s->maxthreads) {
        ll_warn_once("rcl_maxthreads",
                     "liblock: rcl: server on CPU %d reached LIBLOCK_RCL_MAX_THREADS=%d servicing threads; "
                     "not adding more",
                     s->cpu, s->maxthreads);
        return EAGAIN;
    }
    struct rcl_sthread *t = ll_alloc_aligned(sizeof *t);
    if (!t)
        return ENOMEM;
    t->server = s;
    t->index = s->nthreads;
    atomic_store_explicit(&t->wake, ST_SERVICING, memory_order_relaxed);
    rcl_add32(s, &s->n_servicing, 1);
    rcl_add32(s, &s->n_free, 1);
    pthread_attr_t a;
    make_attr(s, &a, s->prio_serv);
    int r = ll_internal_thread_create(&t->th, &a, sthread_main, t);
    pthread_attr_destroy(&a);
    if (r) {
        rcl_add32(s, &s->n_servicing, -1);
        rcl_add32(s, &s->n_free, -1);
        free(t);
        return r;
    }
    s->threads[s->nthreads++] = t;
    rcl_add(s, &s->st.created, 1);
    return 0;
}

/* Make sure a free servicing thread exists (Algorithm 11, lines 8-19).
 * Caller holds pool_mutex and runs on the server CPU.  Returns 1 if it
 * provided one. */
static int ensure_free(struct rcl_server *s)
{
    if (atomic_load_explicit(&s->n_free, memory_order_relaxed) > 0)
        return 0;
    if (s->prepared) {
        struct rcl_sthread *t = s->prepared;
        s->prepared = t->next_prepared;
        s->nprepared--;
        rcl_add32(s, &s->n_servicing, 1);
        rcl_add32(s, &s->n_free, 1);
        atomic_store_explicit(&t->wake, ST_SERVICING, memory_order_release);
        ll_futex_wake(&t->wake, 1);
        rcl_add(s, &s->st.woken, 1);
        return 1;
    }
    return spawn_sthread(s) == 0;
}

/* CPU time a thread has used, in ns (0 if unavailable). */
static uint64_t thread_cpu_ns(pthread_t th)
{
    clockid_t cid;
    struct timespec ts;
    if (pthread_getcpuclockid(th, &cid) != 0 || clock_gettime(cid, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Forced election (Algorithm 11, lines 20-27).  Under FIFO a thread that
 * spins inside a CS never yields, so the manager reorders the run queue:
 * lowering then raising a thread's priority puts it at the tail of its
 * level (Linux).  "Elect a thread that has not been elected recently": the
 * manager measures how much CPU each pool thread used since the previous
 * election and moves them to the tail in increasing order of that usage,
 * so the threads that got no CPU (a free thread, or a CS that became
 * runnable again behind a spinner) come first and the spinner last.  A
 * fixed order would let one spinning CS starve another runnable CS for
 * ever. */
static void force_election(struct rcl_server *s)
{
    struct rcl_sthread *v[RCL_ELECT_MAX];
    uint64_t used[RCL_ELECT_MAX];
    int n = 0;
    for (int i = 0; i < s->nthreads && n < RCL_ELECT_MAX; i++) {
        struct rcl_sthread *t = s->threads[i];
        if (atomic_load_explicit(&t->wake, memory_order_relaxed) != ST_SERVICING)
            continue;
        uint64_t now = thread_cpu_ns(t->th);
        uint64_t u = now - t->cpu_at_election;
        t->cpu_at_election = now;
        /* insertion sort by CPU used, ascending */
        int j = n++;
        while (j > 0 && used[j - 1] > u) {
            v[j] = v[j - 1];
            used[j] = used[j - 1];
            j--;
        }
        v[j] = t;
        used[j] = u;
    }
    for (int j = 0; j < n; j++) {
        pthread_setschedprio(v[j]->th, s->prio_backup);
        pthread_setschedprio(v[j]->th, s->prio_serv);
    }
    if (n)
        rcl_add(s, &s->st.elections, 1);
}

static void *manager_main(void *arg)
{
    struct rcl_server *s = arg;
    enter_server_thread(s, "mgr");
    for (;;) {
        atomic_store_explicit(&s->is_alive, 0, memory_order_relaxed);
        uint32_t w = atomic_load_explicit(&s->mgr_word, memory_order_acquire);
        if (atomic_load_explicit(&s->stopping, memory_order_acquire))
            break;
        struct timespec ts = {.tv_sec = (time_t)(s->tick_ns / 1000000000ull),
                              .tv_nsec = (long)(s->tick_ns % 1000000000ull)};
        ll_futex_wait(&s->mgr_word, w, &ts);
        if (atomic_load_explicit(&s->stopping, memory_order_acquire))
            break;
        if (atomic_load_explicit(&s->idle, memory_order_acquire)) {
            while (atomic_load_explicit(&s->idle, memory_order_acquire) == 1 &&
                   !atomic_load_explicit(&s->stopping, memory_order_acquire))
                ll_futex_wait(&s->idle, 1, NULL);
            continue;
        }
        rcl_add(s, &s->st.mgr_wakeups, 1);
        rcl_add(s, &s->timestamp, 1);
        int poked = atomic_exchange_explicit(&s->backup_req, 0, memory_order_acq_rel) != 0;
        int alive = atomic_load_explicit(&s->is_alive, memory_order_relaxed) != 0;
        if (!alive)
            rcl_add(s, &s->st.alive_misses, 1);
        if (poked || !alive) {
            pthread_mutex_lock(&s->pool_mutex);
            ensure_free(s);
            if (!alive && !s->degraded)
                force_election(s);
            pthread_mutex_unlock(&s->pool_mutex);
        }
    }
    return NULL;
}

/* Ask the manager for a free servicing thread (it preempts the caller at
 * once: backup_req is read after its wake-up).  From the backup, and from
 * a servicing thread that has waited a while inside the runtime (client.c,
 * "Local path"): no free thread is left then, and without the request the
 * wait would last until the manager's tick. */
void rcl_ask_free(struct rcl_server *s)
{
    atomic_store_explicit(&s->backup_req, 1, memory_order_release);
    atomic_fetch_add_explicit(&s->mgr_word, 1, memory_order_acq_rel);
    ll_futex_wake(&s->mgr_word, 1);
}

static void *backup_main(void *arg)
{
    struct rcl_server *s = arg;
    enter_server_thread(s, "bkp");
    if (s->degraded) {
        struct sched_param sp = {.sched_priority = 0};
        sched_setscheduler(0, SCHED_IDLE, &sp);
    }
    for (;;) {
        if (atomic_load_explicit(&s->stopping, memory_order_acquire))
            break;
        if (atomic_load_explicit(&s->idle, memory_order_acquire)) {
            ll_futex_wait(&s->idle, 1, NULL);
            continue;
        }
        if (s->degraded) {
            /* SCHED_IDLE also gets slivers of CPU while servicing threads
             * run: act only if no scan completed during a 1 ms nap and no
             * thread is free (all blocked or stuck in CSs). */
            uint64_t p0 = atomic_load_explicit(&s->st.passes, memory_order_relaxed);
            uint32_t w = atomic_load_explicit(&s->bkp_word, memory_order_acquire);
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
            ll_futex_wait(&s->bkp_word, w, &ts);
            if (atomic_load_explicit(&s->stopping, memory_order_acquire))
                break;
            if (atomic_load_explicit(&s->st.passes, memory_order_relaxed) != p0)
                continue;
        }
        /* We run only when every servicing thread is blocked (or one
         * breathes: then n_free is nonzero). If
         * none is free, ask the manager for one (thesis section 4.1.2.2: the
         * backup only pokes the manager).  The backup itself takes no lock
         * and calls no allocator: at the bottom priority it can be preempted
         * anywhere, and a lock it held could then stall the manager. */
        if (atomic_load_explicit(&s->n_free, memory_order_relaxed) == 0) {
            rcl_add(s, &s->st.backup_runs, 1);
            rcl_ask_free(s);
        }
        if (!s->degraded) {
            /* Nap: either the manager just provided a thread (which runs
             * before us anyway), or a free thread exists but is briefly
             * blocked (page fault, pool mutex). */
            uint32_t w = atomic_load_explicit(&s->bkp_word, memory_order_acquire);
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000};
            if (!atomic_load_explicit(&s->stopping, memory_order_acquire))
                ll_futex_wait(&s->bkp_word, w, &ts);
        }
    }
    return NULL;
}

/* ======================================================================
 * server life cycle
 * ====================================================================== */
static int create_aux(struct rcl_server *s, pthread_t *th, void *(*fn)(void *), int prio)
{
    pthread_attr_t a;
    make_attr(s, &a, prio);
    int r = ll_internal_thread_create(th, &a, fn, s);
    pthread_attr_destroy(&a);
    return r;
}

static void wake_all(struct rcl_server *s)
{
    atomic_fetch_add_explicit(&s->mgr_word, 1, memory_order_acq_rel);
    ll_futex_wake(&s->mgr_word, 1 << 30);
    atomic_fetch_add_explicit(&s->bkp_word, 1, memory_order_acq_rel);
    ll_futex_wake(&s->bkp_word, 1 << 30);
    atomic_store_explicit(&s->idle, 0, memory_order_release);
    ll_futex_wake(&s->idle, 1 << 30);
}

/* Stop the threads and join them.  The caller (liblock_server_stop)
 * checked that no lock is bound and no CS runs.  Servers are not stopped at
 * process exit (see rcl_at_exit). */
void rcl_threads_stop(struct rcl_server *s)
{
    atomic_store_explicit(&s->stopping, 1, memory_order_release);
    wake_all(s);
    pthread_mutex_lock(&s->pool_mutex);
    for (struct rcl_sthread *t = s->prepared; t; t = t->next_prepared) {
        atomic_store_explicit(&t->wake, ST_EXIT, memory_order_release);
        ll_futex_wake(&t->wake, 1);
    }
    pthread_mutex_unlock(&s->pool_mutex);
    atomic_store_explicit(&s->dormant, 0, memory_order_release);
    if (s->have_manager)
        pthread_join(s->manager, NULL);
    if (s->have_backup)
        pthread_join(s->backup, NULL);
    s->have_manager = s->have_backup = 0;
    /* No new thread can appear now: only the manager and backup create them. */
    for (int i = 0; i < s->nthreads; i++) {
        pthread_join(s->threads[i]->th, NULL);
        free(s->threads[i]);
    }
    s->nthreads = 0;
    s->prepared = NULL;
    s->nprepared = 0;
    rcl_cpushare_leave(s->cpu);
}

void rcl_server_free_arrays(struct rcl_server *s)
{
    ll_free_on_node(s->slots, (size_t)s->nslots * sizeof(struct rcl_slot));
    s->slots = NULL;
    free((void *)s->busy);
    s->busy = NULL;
    free(s->threads);
    s->threads = NULL;
}

/* Create the first servicing thread, the manager and the backup (server
 * start, and a dormant server's first use after fork).  Falls back to
 * degraded mode when SCHED_FIFO is refused.  0 or an errno. */
int rcl_threads_start(struct rcl_server *s)
{
    pthread_mutex_lock(&s->pool_mutex);
    int err = spawn_sthread(s);
    if (err == EPERM && !s->degraded) {
        s->degraded = 1;
        ll_warn_once("rcl_degraded", "liblock: rcl: SCHED_FIFO refused (EPERM); servers run in degraded mode "
                                     "(CFS scheduling, see docs/rcl.md)");
        err = spawn_sthread(s);
    }
    pthread_mutex_unlock(&s->pool_mutex);
    if (err)
        return err;
    if (!s->degraded)
        rcl_cpushare_join(s->cpu); /* server.c, "Breathing" */
    if (create_aux(s, &s->manager, manager_main, s->prio_mgr) == 0)
        s->have_manager = 1;
    if (create_aux(s, &s->backup, backup_main, s->prio_backup) == 0)
        s->have_backup = 1;
    if (!s->have_manager || !s->have_backup)
        ll_warn_once("rcl_aux", "liblock: rcl: could not create the management/backup thread of the server on "
                                "CPU %d; blocking critical sections may stall it",
                     s->cpu);
    return 0;
}
