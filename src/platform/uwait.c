/*
 * uwait.c - x86 user-mode waiting instructions, detected with CPUID (cpuid.c).
 *
 *   WAITPKG (Intel):  UMONITOR addr / UMWAIT until a TSC deadline / TPAUSE;
 *                     CPUID.(EAX=7,ECX=0):ECX[5].
 *   MONITORX (AMD):   MONITORX addr / MWAITX with an optional timer (cycles);
 *                     CPUID.(EAX=0x80000001):ECX[29].
 *
 * Both let a waiter sleep in a light C0 sub-state until another core writes
 * the monitored cache line (or a deadline passes), which is the closest
 * commodity x86 gets to the blocking receive of the message-passing model
 * in D. Petrovic, "Efficient Communication and Synchronization on Manycore
 * Processors", PhD thesis no. 6552, EPFL, 2015, section 5.2.  They are
 * used only where CPUID reports them, and
 * LIBLOCK_UWAIT=0 turns them off; ll_uwait_name() says which one is in use
 * so that `liblock list` can show it.  Where neither exists (the 2-CPU
 * development machine) ll_uwait_change() is never called by the transport:
 * it pauses instead, and `liblock list` says "not available" -- nothing is
 * emulated.
 *
 * Semantics of ll_uwait_change(w, v, deadline): arm the monitor on w,
 * re-check *w (a write between the check and the arm would otherwise be
 * missed), and if it still equals v sleep until the line is written, the
 * deadline (TSC) passes, an interrupt arrives, or the OS limit (Linux caps
 * UMWAIT at 100 us by default) expires.  Spurious returns are normal: the
 * caller re-checks in a loop.
 */
#include "internal.h"

static _Atomic int uwait_kind = -1; /* -1 unknown; else LL_UWAIT_* */

static int detect(void)
{
    int k = LL_UWAIT_NONE;
    if (ll_cpu_has_waitpkg())
        k = LL_UWAIT_WAITPKG;
    else if (ll_cpu_has_monitorx())
        k = LL_UWAIT_MONITORX;
    if (k != LL_UWAIT_NONE && ll_env_long("LIBLOCK_UWAIT", 1, 0, 1) == 0)
        k = LL_UWAIT_DISABLED;
    return k;
}

int ll_cpu_has_waitpkg(void) { return (ll_cpuid_7_ecx() >> 5) & 1; }

int ll_cpu_has_monitorx(void) { return (ll_cpuid_ext_ecx() >> 29) & 1; }

int ll_uwait_kind(void)
{
    int k = atomic_load_explicit(&uwait_kind, memory_order_relaxed);
    if (LL_UNLIKELY(k < 0)) {
        k = detect();
        atomic_store_explicit(&uwait_kind, k, memory_order_relaxed);
    }
    return k;
}

const char *ll_uwait_name(void)
{
    switch (ll_uwait_kind()) {
    case LL_UWAIT_WAITPKG:
        return "umwait";
    case LL_UWAIT_MONITORX:
        return "mwaitx";
    case LL_UWAIT_DISABLED:
        return "off (LIBLOCK_UWAIT=0)";
    default:
        return "not available";
    }
}

/* Encodings by bytes so that no -mwaitpkg/-mmwaitx flag is needed; they
 * run only after CPUID said the instruction exists. */
void ll_uwait_change(_Atomic uint32_t *w, uint32_t v, uint64_t deadline_tsc)
{
#if defined(__x86_64__)
    int k = ll_uwait_kind();
    if (k == LL_UWAIT_WAITPKG) {
        /* umonitor %rax: f3 0f ae f0 (rax = address) */
        __asm__ __volatile__(".byte 0xf3, 0x0f, 0xae, 0xf0" ::"a"(w) : "memory");
        if ((atomic_load_explicit(w, memory_order_acquire) & ~LL_PARKED) != v)
            return;
        /* umwait %ecx: f2 0f ae f1; ecx bit 0 = 1 asks for the lighter C0.1
         * state (faster wake-up), edx:eax = TSC deadline */
        uint32_t lo = (uint32_t)deadline_tsc, hi = (uint32_t)(deadline_tsc >> 32);
        __asm__ __volatile__(".byte 0xf2, 0x0f, 0xae, 0xf1" ::"c"(1u), "a"(lo), "d"(hi) : "memory", "cc");
        return;
    }
    if (k == LL_UWAIT_MONITORX) {
        /* monitorx: 0f 01 fa (rax = address, ecx = extensions 0, edx = hints 0) */
        __asm__ __volatile__(".byte 0x0f, 0x01, 0xfa" ::"a"(w), "c"(0u), "d"(0u) : "memory");
        if ((atomic_load_explicit(w, memory_order_acquire) & ~LL_PARKED) != v)
            return;
        uint64_t now = ll_cycles();
        uint64_t left = deadline_tsc > now ? deadline_tsc - now : 1;
        uint32_t timer = left > 0xffffffffu ? 0xffffffffu : (uint32_t)left;
        /* mwaitx: 0f 01 fb; ecx bit 1 = timer in ebx (TSC cycles), eax = 0xf0
         * (C0, no deeper state) */
        __asm__ __volatile__(".byte 0x0f, 0x01, 0xfb" ::"a"(0xf0u), "b"(timer), "c"(2u) : "memory");
        return;
    }
#endif
    (void)w;
    (void)v;
    (void)deadline_tsc;
    ll_pause();
}
