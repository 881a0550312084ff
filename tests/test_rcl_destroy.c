/*
 * test_rcl_destroy - liblock_destroy of an RCL lock right after the last
 * section on it returned answers 0 (server.c, "Completion order" I4: the
 * servicing thread releases the lock before it publishes the reply).
 *
 * For each server mode (normal: SCHED_FIFO servicing threads; degraded:
 * LIBLOCK_RCL_DEGRADED=1, CFS) and each lock kind (request-only, and direct
 * as under the interposer, LIBLOCK_RCL_DIRECT=1) a server is started on
 * the last CPU, and two client threads each loop on FRESH locks bound to it:
 *     init, execute(cs), destroy                       -> destroy returns 0
 *     init, lock, unlock, destroy                      -> 0
 *     init, execute(cs), lock, unlock, destroy         -> 0
 * cycling the waiting policies (spin-then-park, spin, park, yield).  Every
 * execute's return value and the total count of sections are checked.  A
 * destroy that answered EBUSY is counted and retried until it answers 0
 * (so the server can be stopped at the end of the phase, which must then
 * answer 0 too).
 * No timing is asserted; the watchdog only catches a hang.
 * usage: test_rcl_destroy
 */
#include "harness.h"

#include <sched.h>
#include <stdatomic.h>

#define NCLIENTS 2

static liblock_server_t *srv;
static int srv_cpu;
static int rounds;
static _Atomic long ebusy_exec, ebusy_lock, ebusy_mixed, total_cs, errors;

/* CHECK for the client threads (the harness's counters are not atomic):
 * counted here, checked by the main thread after the join */
#define EXPECT(cond, ...)                                                                   \
    do {                                                                                    \
        if (!(cond)) {                                                                      \
            atomic_fetch_add_explicit(&errors, 1, memory_order_relaxed);                    \
            fprintf(stderr, "FAIL %s:%d [%s] %s: ", __FILE__, __LINE__, th_context, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                   \
            fputc('\n', stderr);                                                            \
        }                                                                                   \
    } while (0)

static void *cs_inc(void *p)
{
    atomic_fetch_add_explicit((_Atomic long *)p, 1, memory_order_relaxed);
    return p;
}

/* destroy l: 0 expected; an EBUSY is counted, then retried until 0 */
static void destroy_counted(liblock_t *l, _Atomic long *ebusy)
{
    int r = liblock_destroy(l);
    if (r == 0)
        return;
    EXPECT(r == EBUSY, "liblock_destroy = %d", r);
    atomic_fetch_add_explicit(ebusy, 1, memory_order_relaxed);
    while (r == EBUSY) {
        sched_yield();
        r = liblock_destroy(l);
    }
    EXPECT(r == 0, "liblock_destroy = %d", r);
}

static const int policies[] = {LIBLOCK_WAIT_SPIN_THEN_PARK, LIBLOCK_WAIT_SPIN, LIBLOCK_WAIT_PARK,
                               LIBLOCK_WAIT_YIELD};

static void *client(void *arg)
{
    long done = 0;
    _Atomic long count = 0;
    (void)arg;
    for (int i = 0; i < rounds; i++) {
        liblock_attr_t a;
        liblock_attr_init(&a);
        liblock_attr_setserver(&a, srv);
        liblock_attr_setwait(&a, policies[(i / 3) % 4]);
        liblock_t l;
        if (liblock_init(&l, "rcl", &a) != 0) {
            EXPECT(0, "liblock_init: %s", strerror(errno));
            break;
        }
        switch (i % 3) {
        case 0: /* execute, destroy */
            EXPECT(liblock_execute(&l, cs_inc, (void *)&count) == &count, "execute: %s", strerror(errno));
            done++;
            destroy_counted(&l, &ebusy_exec);
            break;
        case 1: /* lock, unlock, destroy */
            EXPECT(liblock_lock(&l) == 0, "lock");
            count++;
            done++;
            EXPECT(liblock_unlock(&l) == 0, "unlock");
            destroy_counted(&l, &ebusy_lock);
            break;
        default: /* execute, lock, unlock, destroy */
            EXPECT(liblock_execute(&l, cs_inc, (void *)&count) == &count, "execute: %s", strerror(errno));
            EXPECT(liblock_lock(&l) == 0, "lock");
            count++;
            done += 2;
            EXPECT(liblock_unlock(&l) == 0, "unlock");
            destroy_counted(&l, &ebusy_mixed);
            break;
        }
    }
    EXPECT(count == done, "%ld sections counted, %ld done", (long)count, done);
    atomic_fetch_add_explicit(&total_cs, done, memory_order_relaxed);
    return NULL;
}

static void phase(int degraded, int direct)
{
    char ctx[64];
    snprintf(ctx, sizeof ctx, "%s server, %s locks", degraded ? "degraded" : "normal",
             direct ? "direct" : "request-only");
    th_context = ctx;
    /* the server's mode is read when it starts, a lock's kind at its init;
     * no other thread runs here */
    setenv("LIBLOCK_RCL_DEGRADED", degraded ? "1" : "0", 1);
    setenv("LIBLOCK_RCL_DIRECT", direct ? "1" : "0", 1);
    srv = liblock_server_start(srv_cpu);
    if (!srv) {
        CHECK(0, "liblock_server_start(%d): %s", srv_cpu, strerror(errno));
        return;
    }
    liblock_server_stats_t st;
    CHECK_EQ(liblock_server_stats(srv, &st), 0);
    if (!degraded && st.degraded) {
        th_skip("%s: SCHED_FIFO refused, the server runs degraded", ctx);
    } else {
        atomic_store(&ebusy_exec, 0);
        atomic_store(&ebusy_lock, 0);
        atomic_store(&ebusy_mixed, 0);
        atomic_store(&total_cs, 0);
        atomic_store(&errors, 0);
        pthread_t th[NCLIENTS];
        for (int i = 0; i < NCLIENTS; i++)
            CHECK_EQ(pthread_create(&th[i], NULL, client, NULL), 0);
        for (int i = 0; i < NCLIENTS; i++)
            pthread_join(th[i], NULL);
        long per = rounds / 3;
        printf("%s: EBUSY from destroy after execute %ld of %ld, after lock/unlock %ld of %ld, after "
               "execute+lock/unlock %ld of %ld\n",
               ctx, atomic_load(&ebusy_exec), per * NCLIENTS, atomic_load(&ebusy_lock), per * NCLIENTS,
               atomic_load(&ebusy_mixed), per * NCLIENTS);
        CHECK_EQ(atomic_load(&errors), 0);
        CHECK_EQ(atomic_load(&ebusy_exec), 0);
        CHECK_EQ(atomic_load(&ebusy_lock), 0);
        CHECK_EQ(atomic_load(&ebusy_mixed), 0);
        CHECK_EQ(atomic_load(&total_cs), (long)NCLIENTS * (rounds / 3) * 4);
    }
    CHECK_EQ(liblock_server_stop(srv), 0);
    srv = NULL;
}

int main(void)
{
    th_watchdog(120);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int ncpus = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpus < 2) {
        th_skip("one CPU: every server runs degraded and shares the clients' CPU");
        return TH_SKIPPED;
    }
    srv_cpu = ncpus - 1;
    rounds = th_scale_small() ? 30000 : 300000; /* a multiple of 3 */
    int first = 0;
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    /* sanitizer runtimes spin on their own locks without regard to
     * priorities: their builds keep servers degraded (src/runtime/rcl/registry.c) */
    th_skip("normal (SCHED_FIFO) servers under a sanitizer: degraded mode only");
    first = 1;
#endif
    for (int degraded = first; degraded < 2; degraded++)
        for (int direct = 0; direct < 2; direct++)
            phase(degraded, direct);
    return th_report("test_rcl_destroy");
}
