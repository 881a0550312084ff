/*
 * rpcprobe.h - the delegation probe: how many critical sections per second
 * one client thread gets through a server on another CPU when each critical
 * section is a request and a reply, sent with nothing but plain stores.
 * The bound of every lock that runs each critical section of a client on a
 * server CPU while that client waits (RCL: Lozi's thesis, UPMC 2014, section
 * 4.1), here where only one CPU is left for clients.
 *
 * Why: with a dedicated server CPU on a 2-CPU machine, the clients share
 * the other CPU, so one of them runs at a time and each of its critical
 * sections costs a round trip: the request travels to the server, the
 * server runs the section (on its own cache, plus the caller's argument,
 * which it reads and writes there), the reply travels back.  A client that
 * leaves the CPU while it waits only adds a context switch (the same-CPU
 * wake-up probe, about 1 us).  So the probe's rate times the number of
 * client CPUs bounds such a lock, however it is written, and a target above
 * it cannot be met here by delegation to a dedicated server.
 *
 * The probe: the server thread pinned to CPU s, the client to CPU c.  One
 * line carries the request (a sequence number) and the reply (the number
 * echoed), the cheapest message layout (bench/nullrpc.c: same-line).  The
 * client, n times: clear the argument's "ran" flag through the caller's
 * hook (lockbench's critical section sets it, as with liblock_execute),
 * read the cycle counter, store request i with release order, wait (pause
 * loop) for reply i with acquire order, read the counter again, check that
 * the section ran, then busy-wait `delay` cycles (the benchmark's
 * non-critical section).  The server waits for request i, runs cs(arg) and
 * stores reply i with release order: the section's writes are visible to
 * the client when it sees the reply.  A batch gives n / its elapsed
 * seconds; the result is the best of `reps` batches after one uncounted
 * warm-up batch, in millions per second (as altprobe.h, for the same
 * reasons), or -1 when it could not be taken (a stall past cap_ns: a CPU
 * held by a real-time thread, e.g. an RCL server of another process).
 */
#ifndef LIBLOCK_BENCH_RPCPROBE_H
#define LIBLOCK_BENCH_RPCPROBE_H

#include "altprobe.h" /* ALT_PAUSE, alt_cycles; probe.h's clock and pinning */

/* Orderings: req and rep carry the request and the critical section's
 * effects (header); started and gave_up carry no data, as in altprobe.h. */
struct rpc_shared {
    _Alignas(64) long req; /* request i (client writes), then reply i (server writes): one line */
    long rep;
    char pad0[48];
    _Alignas(64) int started, gave_up;
    int cpu;
    void *arg;
    void *(*cs)(void *);
    long n;
    uint64_t deadline_ns;
};


static void *rpc_server(void *p)
{
    struct rpc_shared *s = p;
    probe_pin(s->cpu);
    __atomic_store_n(&s->started, 1, __ATOMIC_RELEASE);
    for (long i = 1; i <= s->n; i++) {
        unsigned spins = 0;
        while (__atomic_load_n(&s->req, __ATOMIC_ACQUIRE) != i) {
            if (__atomic_load_n(&s->gave_up, __ATOMIC_ACQUIRE))
                return NULL;
            ALT_PAUSE();
            if ((++spins & 4095) == 0 && probe_now_ns() > s->deadline_ns) {
                __atomic_store_n(&s->gave_up, 1, __ATOMIC_RELEASE);
                return NULL;
            }
        }
        s->cs(s->arg);
        __atomic_store_n(&s->rep, i, __ATOMIC_RELEASE);
    }
    return NULL;
}

struct rpc_params {
    void *(*cs)(void *);
    void *arg;
    void (*reset)(void *);
    int (*ran)(void *);
    long delay, n;
    int client, server;
    uint64_t cap_ns;
};

/* One batch: n round trips; millions per second, or -1. */
static double rpc_batch(void *p)
{
    const struct rpc_params *q = p;
    struct rpc_shared *s = aligned_alloc(64, sizeof *s);
    if (!s)
        return -1;
    *s = (struct rpc_shared){.cpu = q->server, .arg = q->arg, .cs = q->cs, .n = q->n};
    probe_pin(q->client);
    s->deadline_ns = probe_now_ns() + q->cap_ns;
    pthread_t th;
    if (pthread_create(&th, NULL, rpc_server, s)) {
        free(s);
        return -1;
    }
    int ok = probe_wait_flag(&s->started, s->deadline_ns);
    uint64_t t0 = probe_now_ns();
    for (long i = 1; ok && i <= q->n; i++) {
        if (q->reset)
            q->reset(q->arg);
        (void)alt_cycles(); /* the clock around each call, as lockbench's worker reads it */
        __atomic_store_n(&s->req, i, __ATOMIC_RELEASE);
        unsigned spins = 0;
        while (__atomic_load_n(&s->rep, __ATOMIC_ACQUIRE) != i) {
            ALT_PAUSE();
            if ((++spins & 4095) == 0 &&
                (__atomic_load_n(&s->gave_up, __ATOMIC_ACQUIRE) || probe_now_ns() > s->deadline_ns)) {
                ok = 0;
                break;
            }
        }
        uint64_t c1 = alt_cycles();
        if (ok && q->ran && !q->ran(q->arg))
            ok = 0;
        if (ok && q->delay)
            while (alt_cycles() - c1 < (uint64_t)q->delay)
                ALT_PAUSE();
    }
    uint64_t t1 = probe_now_ns();
    if (!ok)
        __atomic_store_n(&s->gave_up, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    free(s);
    return ok && t1 > t0 ? (double)q->n / ((double)(t1 - t0) * 1e-9) / 1e6 : -1;
}

/* Millions of round trips per second of client CPU c through a server on
 * CPU srv running cs(arg) (best of reps batches of n, after one uncounted
 * batch: altprobe.h's driver), or -1.  reset(arg) runs before each request
 * and ran(arg) says afterwards whether the section ran (both may be NULL).
 * The caller's thread is the client, pinned to c for the probe and
 * re-pinned to its previous CPU set afterwards. */
static double rpc_probe(void *(*cs)(void *), void *arg, void (*reset)(void *), int (*ran)(void *), long delay,
                        int c, int srv, long n, int reps, uint64_t cap_ns)
{
    struct rpc_params q = {.cs = cs, .arg = arg, .reset = reset, .ran = ran, .delay = delay, .n = n, .client = c,
                           .server = srv, .cap_ns = cap_ns};
    return probe_best_batch(rpc_batch, &q, reps);
}

#endif
