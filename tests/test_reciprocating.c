/*
 * test_reciprocating - the admission order and the bypass bound of the
 * reciprocating lock (src/locks/queue/reciprocating.c), checked exactly.
 *
 * The generic tests check exclusion and progress; none checks whose turn
 * it is.  Here a controller drives NT worker threads through a random
 * script of single events -- "thread t calls lock()", "thread t calls
 * trylock()", "the holder unlocks", "destroy() while busy" -- and waits
 * for each event to be complete before the next: a lock() that must wait
 * is complete when its node is on the arrival stack (the lock's `arrivals`
 * probe changes: every pushed node is a different live node), an unlock
 * when the next holder has written its admission into the log.  The events
 * being serialised, the algorithm is deterministic, and the controller
 * runs the paper's admission rule beside it as a model:
 *   arrival on a free lock: it is taken; otherwise pushed on the stack;
 *   release: the next member of the entry segment if any, else the whole
 *   stack becomes the entry segment, most recent arrival first, else free;
 *   trylock: succeeds iff the lock is free with nobody waiting.
 * Checked: every admission is the model's, every trylock answer is the
 * model's (EBUSY while held or waited on), destroy() is EBUSY while held or
 * waited on and 0 at the end, `arrivals` is 0 whenever the model is free,
 * the detached stacks (`segments` probe) are the model's, and the bypass
 * bound of the source's header from the actual log: while a thread waits
 * (from its push to its admission) no other thread is admitted more than
 * twice, nor more than once after having arrived later than it.  Under
 * every waiting policy the lock supports (under spin-then-park the waiters
 * sleep, since the controller is slow, so the promotions of parked waiters
 * run too).  Bounded by the watchdog; no timing assertions.
 *
 * Usage: test_reciprocating [ALGORITHM...]  (only "reciprocating" applies)
 */
#include "harness.h"
#include "internal.h"

#include <sched.h>
#include <stdatomic.h>

#define NT 5
#define MAXLOG 20000

enum { C_NONE, C_LOCK, C_TRY, C_RELEASE, C_QUIT };

struct worker {
    pthread_t th;
    int id;
    _Atomic int cmd;
    _Atomic unsigned acks; /* commands completed (a lock(): admitted) */
    _Atomic int tryres;
};

static liblock_t L;
static struct worker W[NT];
static int admit_log[MAXLOG];
static _Atomic int nlog;

static int64_t probe(const char *name)
{
    struct ll_stats st;
    if (ll_lock_stats(&L, &st) != 0)
        return -1;
    return ll_stat(&st, name, -1);
}

static void admitted(int id)
{
    int i = atomic_load_explicit(&nlog, memory_order_relaxed); /* inside the critical section */
    if (i < MAXLOG)
        admit_log[i] = id;
    atomic_store_explicit(&nlog, i + 1, memory_order_release);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    for (;;) {
        int c;
        while ((c = atomic_load_explicit(&w->cmd, memory_order_acquire)) == C_NONE)
            usleep(20);
        atomic_store_explicit(&w->cmd, C_NONE, memory_order_relaxed);
        switch (c) {
        case C_LOCK:
            if (liblock_lock(&L) == 0)
                admitted(w->id);
            break;
        case C_TRY: {
            int r = liblock_trylock(&L);
            if (r == 0)
                admitted(w->id);
            atomic_store_explicit(&w->tryres, r, memory_order_relaxed);
            break;
        }
        case C_RELEASE:
            liblock_unlock(&L);
            break;
        case C_QUIT:
            return NULL;
        }
        atomic_fetch_add_explicit(&w->acks, 1, memory_order_release);
    }
}

static void send(int t, int c) { atomic_store_explicit(&W[t].cmd, c, memory_order_release); }

static void wait_acks(int t, unsigned n)
{
    while (atomic_load_explicit(&W[t].acks, memory_order_acquire) < n)
        usleep(10);
}

/* ---- the model and the bookkeeping for the bypass check ---- */
static int holder;                 /* -1: free */
static int segment[NT], nseg;      /* entry segment, next first */
static int stack[NT], nstack;      /* arrival stack, top last */
static int waiting[NT];            /* thread waits (pushed) */
static int push_len[NT];           /* log length when t's push was confirmed */
static long push_seq[NT];          /* event number of t's current push */
static long entry_seq[MAXLOG];     /* for each admission: the event number of its arrival */
static long model_segments;
static unsigned acks_expected[NT];
static int worst_entries, worst_overtakes;

/* t was admitted at log index idx: check the bypass bound over its wait. */
static void check_bypass(int t, int idx)
{
    int entries[NT] = {0}, overtakes[NT] = {0};
    for (int i = push_len[t]; i < idx && i < MAXLOG; i++) {
        int x = admit_log[i];
        entries[x]++;
        if (entry_seq[i] > push_seq[t])
            overtakes[x]++;
    }
    for (int x = 0; x < NT; x++) {
        if (x == t)
            continue;
        CHECK(entries[x] <= 2, "thread %d waited through %d admissions of thread %d", t, entries[x], x);
        CHECK(overtakes[x] <= 1, "thread %d was overtaken %d times by thread %d", t, overtakes[x], x);
        if (entries[x] > worst_entries)
            worst_entries = entries[x];
        if (overtakes[x] > worst_overtakes)
            worst_overtakes = overtakes[x];
    }
}

/* Wait for admission number n to be logged; returns the thread, or -1. */
static int wait_admission(int n)
{
    while (atomic_load_explicit(&nlog, memory_order_acquire) < n)
        usleep(10);
    return n - 1 < MAXLOG ? admit_log[n - 1] : -1;
}

static long seq;

static void ev_lock(int t)
{
    long s = ++seq;
    int before = atomic_load(&nlog);
    if (holder < 0 && nseg == 0 && nstack == 0) {
        holder = t;
        acks_expected[t]++;
        send(t, C_LOCK);
        wait_acks(t, acks_expected[t]);
        CHECK_EQ(wait_admission(before + 1), t);
        entry_seq[before] = s;
        return;
    }
    int64_t prev = probe("arrivals");
    send(t, C_LOCK);
    acks_expected[t]++; /* completes at its admission */
    while (probe("arrivals") == prev)
        usleep(10);
    CHECK(atomic_load(&nlog) == before, "a lock() on a held lock was admitted at once");
    stack[nstack++] = t;
    waiting[t] = 1;
    push_len[t] = before;
    push_seq[t] = s;
}

static void ev_try(int t)
{
    long s = ++seq;
    int before = atomic_load(&nlog);
    int free_now = holder < 0 && nseg == 0 && nstack == 0;
    send(t, C_TRY);
    wait_acks(t, ++acks_expected[t]);
    int r = atomic_load(&W[t].tryres);
    CHECK_EQ(r, free_now ? 0 : EBUSY);
    if (r == 0) {
        CHECK_EQ(wait_admission(before + 1), t);
        entry_seq[before] = s;
        holder = t;
    }
}

static void ev_release(void)
{
    int h = holder, before = atomic_load(&nlog);
    int next = -1;
    if (nseg == 0 && nstack > 0) { /* detach: the stack, most recent first */
        for (int i = 0; i < nstack; i++)
            segment[i] = stack[nstack - 1 - i];
        nseg = nstack;
        nstack = 0;
        model_segments++;
    }
    if (nseg > 0) {
        next = segment[0];
        memmove(segment, segment + 1, (size_t)(nseg - 1) * sizeof *segment);
        nseg--;
    }
    send(h, C_RELEASE);
    wait_acks(h, ++acks_expected[h]);
    holder = next;
    if (next < 0) {
        CHECK_EQ(probe("arrivals"), 0);
        CHECK_EQ(atomic_load(&nlog), before);
        return;
    }
    int got = wait_admission(before + 1);
    CHECK(got == next, "admitted thread %d, the rule says %d", got, next);
    if (got != next)
        return;
    wait_acks(next, acks_expected[next]);
    entry_seq[before] = push_seq[next];
    waiting[next] = 0;
    check_bypass(next, before);
}

static void run_script(int policy, long events, uint64_t *rng)
{
    liblock_attr_t a;
    liblock_attr_init(&a);
    CHECK_EQ(liblock_attr_setwait(&a, policy), 0);
    CHECK_EQ(liblock_init(&L, "reciprocating", &a), 0);
    atomic_store(&nlog, 0);
    holder = -1;
    nseg = nstack = 0;
    seq = 0;
    model_segments = 0;
    memset(waiting, 0, sizeof waiting);
    for (int i = 0; i < NT; i++) {
        W[i].id = i;
        atomic_store(&W[i].cmd, C_NONE);
        atomic_store(&W[i].acks, 0);
        acks_expected[i] = 0;
        CHECK_EQ(pthread_create(&W[i].th, NULL, worker_main, &W[i]), 0);
    }
    for (long e = 0; e < events && atomic_load(&nlog) < MAXLOG - 1; e++) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        unsigned r = (unsigned)(*rng % 100);
        int idle[NT], nidle = 0;
        for (int t = 0; t < NT; t++)
            if (t != holder && !waiting[t])
                idle[nidle++] = t;
        int t = nidle ? idle[(*rng >> 32) % (unsigned)nidle] : -1;
        if (holder >= 0 && (r < 35 || t < 0))
            ev_release();
        else if (t >= 0 && r < 88)
            ev_lock(t);
        else if (t >= 0 && r < 97)
            ev_try(t);
        else if (holder >= 0)
            CHECK_EQ(liblock_destroy(&L), EBUSY);
    }
    while (holder >= 0)
        ev_release();
    CHECK_EQ(probe("segments"), model_segments);
    CHECK_EQ(probe("arrivals"), 0);
    for (int i = 0; i < NT; i++) {
        send(i, C_QUIT);
        pthread_join(W[i].th, NULL);
    }
    CHECK_EQ(liblock_destroy(&L), 0);
}

int main(int argc, char **argv)
{
    th_watchdog(600);
    setenv("LIBLOCK_WARN", "0", 1); /* pure-spin waiters wait for the controller on purpose */
    if (!th_selected(argc, argv, "reciprocating"))
        return th_report("test_reciprocating");
    liblock_algorithm_info_t info;
    if (liblock_algorithm_info("reciprocating", &info) != 0) {
        th_skip("test_reciprocating: no reciprocating lock in this build");
        return TH_SKIPPED;
    }
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    long events = th_scale_small() ? 300 : 2000;
    for (int p = 1; p < LIBLOCK_WAIT__COUNT; p++) {
        if (!(info.policies & (1u << p)))
            continue;
        char what[96];
        snprintf(what, sizeof what, "reciprocating, %s", liblock_wait_name(p));
        th_context = what;
        uint64_t t0 = th_now_ns();
        int f0 = th_failures;
        worst_entries = worst_overtakes = 0;
        /* pure spin: up to NT-1 spinning waiters share 2 CPUs with the controller */
        run_script(p, p == LIBLOCK_WAIT_SPIN ? events / 4 : events, &rng);
        printf("  %-32s %5d admissions, %3ld stacks detached, most admissions of one thread during a wait %d, "
               "most overtakes %d, %s, %.2f s\n",
               what, atomic_load(&nlog), model_segments, worst_entries, worst_overtakes,
               th_failures == f0 ? "as the rule says" : "FAILED", (th_now_ns() - t0) / 1e9);
    }
    th_context = "";
    return th_report("test_reciprocating");
}
