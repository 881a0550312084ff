/*
 * test_wait - the waiting-policy layer on its own (src/core/wait.c):
 *  - two threads hand a token back and forth 5,000 times through
 *    ll_wait_while/ll_wake under every policy; with LIBLOCK_SPIN_NS=0 the
 *    spin-then-park policy parks on nearly every hand-off, so a lost wake-up
 *    would hang (and the watchdog would fail the test);
 *  - many waiters on one word (a broadcast-like wake) all wake;
 *  - ll_wait_while_until returns ETIMEDOUT at its deadline and 0 when woken;
 *  - platform basics: calibrated cycle clock, CPU count, topology, pinning,
 *    and the CPUID registers read from glibc's copy equal the instruction's.
 */
#include "harness.h"
#include "internal.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static _Atomic uint32_t ping, pong;
static int policy_under_test;
static long rounds;

static void *ponger(void *arg)
{
    (void)arg;
    for (long i = 0; i < rounds; i++) {
        ll_wait_while(&ping, (uint32_t)(i & 1), policy_under_test); /* wait for ping to become (i&1)^1 */
        ll_wake(&pong, (uint32_t)((i + 1) & 1), policy_under_test);
    }
    return NULL;
}

static void pingpong(int policy)
{
    atomic_store(&ping, 0);
    atomic_store(&pong, 0);
    policy_under_test = policy;
    pthread_t th;
    pthread_create(&th, NULL, ponger, NULL);
    for (long i = 0; i < rounds; i++) {
        ll_wake(&ping, (uint32_t)((i + 1) & 1), policy);
        ll_wait_while(&pong, (uint32_t)(i & 1), policy);
    }
    pthread_join(th, NULL);
    CHECK_EQ(atomic_load(&ping) & ~LL_PARKED, rounds & 1);
    CHECK_EQ(atomic_load(&pong) & ~LL_PARKED, rounds & 1);
}

static _Atomic uint32_t gate;
static _Atomic int woke;

static void *gate_waiter(void *arg)
{
    ll_wait_while(&gate, 0, (int)(long)arg);
    atomic_fetch_add(&woke, 1);
    return NULL;
}

static void many_waiters(int policy)
{
    atomic_store(&gate, 0);
    atomic_store(&woke, 0);
    pthread_t th[16];
    for (int i = 0; i < 16; i++)
        pthread_create(&th[i], NULL, gate_waiter, (void *)(long)policy);
    usleep(20000);
    ll_wake(&gate, 1, policy);
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(atomic_load(&woke), 16);
}

int main(void)
{
    th_watchdog(120);
    setenv("LIBLOCK_SPIN_NS", "0", 1); /* spin-then-park parks at once: exercises the futex path */
    rounds = th_scale_small() ? 2000 : 5000;
    static const int policies[] = {LIBLOCK_WAIT_SPIN, LIBLOCK_WAIT_YIELD, LIBLOCK_WAIT_SPIN_THEN_PARK, LIBLOCK_WAIT_PARK};
    for (size_t i = 0; i < sizeof policies / sizeof *policies; i++) {
        th_context = liblock_wait_name(policies[i]);
        pingpong(policies[i]);
        many_waiters(policies[i]);
    }
    th_context = "timed";
    for (size_t i = 0; i < sizeof policies / sizeof *policies; i++) {
        _Atomic uint32_t w = 5;
        uint32_t out = 0;
        uint64_t t0 = ll_now_ns();
        int r = ll_wait_while_until(&w, 5, policies[i], t0 + 20 * 1000000ull, &out);
        CHECK(r == ETIMEDOUT, "policy %d: timed wait gave %d", policies[i], r);
        CHECK(ll_now_ns() >= t0 + 20 * 1000000ull, "returned before the deadline");
        ll_wake(&w, 6, policies[i]); /* clears a parked bit left behind */
        CHECK_EQ(atomic_load(&w), 6);
        r = ll_wait_while_until(&w, 5, policies[i], ll_now_ns() + 1000000000ull, &out);
        CHECK(r == 0 && out == 6, "not-equal word: r=%d out=%u", r, out);
    }
    th_context = "platform";
    CHECK(ll_cycles_per_ns() > 0.05 && ll_cycles_per_ns() < 20, "cycles/ns %f", ll_cycles_per_ns());
    {
        /* the start-up calibration (short windows) agrees with a 50 ms
         * window: a preemption inside a window stops both clocks' readers
         * alike, so only a wrong calibration can miss by 0.5 % */
        uint64_t t0 = ll_now_ns(), c0 = ll_cycles(), t1;
        while ((t1 = ll_now_ns()) - t0 < 50000000)
            ;
        double ref = (double)(ll_cycles() - c0) / (double)(t1 - t0), cal = ll_cycles_per_ns();
        CHECK(cal > ref * 0.995 && cal < ref * 1.005, "calibrated %.5f cycles/ns, a 50 ms window gives %.5f", cal,
              ref);
    }
#if defined(__x86_64__) || defined(__i386__)
    {
        unsigned a, b, c = 0, d;
        if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000001u)
            __cpuid(0x80000001u, a, b, c, d);
        CHECK(ll_cpuid_ext_ecx() == c, "CPUID.0x80000001:ECX %#x, the instruction gives %#x", ll_cpuid_ext_ecx(), c);
        c = 0;
        if (__get_cpuid_max(0, NULL) >= 7)
            __cpuid_count(7, 0, a, b, c, d);
        CHECK(ll_cpuid_7_ecx() == c, "CPUID.(7,0):ECX %#x, the instruction gives %#x", ll_cpuid_7_ecx(), c);
    }
#endif
    CHECK(ll_ncpus() >= 1, "ncpus");
    CHECK(ll_cacheline() >= 16 && ll_cacheline() <= 1024, "cache line %d", ll_cacheline());
    CHECK(strcmp(ll_topology_source(), "none") != 0, "no topology source");
    CHECK_EQ(ll_cpu_node(0), 0);
    CHECK_EQ(ll_pin_self(0), 0);
    CHECK_EQ(ll_current_cpu(), 0);
    CHECK_EQ(ll_pin_self(-1), EINVAL);
    void *p = ll_alloc_aligned(100);
    CHECK(p && ((uintptr_t)p % LL_CACHELINE) == 0, "aligned alloc");
    free(p);
    printf("cycles/ns %.3f, cpus %d, line %d, topology from %s\n", ll_cycles_per_ns(), ll_ncpus(), ll_cacheline(),
           ll_topology_source());
    return th_report("test_wait");
}
