/*
 * cpuid.c - the two CPUID registers liblock looks at, read from glibc's copy.
 *
 * In a virtual machine every CPUID instruction traps to the hypervisor
 * (microseconds each, in every process that loads us), and the dynamic loader has
 * already executed them all while the process started: glibc keeps the raw
 * registers and hands them out through <sys/platform/x86.h> (glibc 2.33 and
 * later).  Reading them there costs a function call.  Where that header is
 * missing (older glibc, another libc) the instruction is executed, once per
 * register, and the value cached.
 */
#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#if defined(__has_include)
#if __has_include(<sys/platform/x86.h>) && defined(__GLIBC__)
#include <sys/platform/x86.h>
#define LL_GLIBC_CPUID 1
#endif
#endif
#include <cpuid.h>
#endif

#if defined(LL_GLIBC_CPUID)
/* the register that holds feature index i, as glibc's own x86_cpu_present
 * finds it: leaves of four 32-bit registers */
static unsigned glibc_reg(unsigned i)
{
    const struct cpuid_feature *f = __x86_get_cpuid_feature_leaf(i / (8 * sizeof(unsigned) * 4));
    return f->cpuid_array[(i & (8 * sizeof(unsigned) * 4 - 1)) / (8 * sizeof(unsigned))];
}
unsigned ll_cpuid_7_ecx(void) { return glibc_reg(x86_cpu_index_7_ecx); }
unsigned ll_cpuid_ext_ecx(void) { return glibc_reg(x86_cpu_index_80000001_ecx); }
#elif defined(__x86_64__) || defined(__i386__)
/* ECX of leaf (subleaf 0), 0 where the leaf is beyond the maximum of its
 * range; executed once and cached.  Relaxed is enough: every thread that
 * computes the value computes the same one, so a racing second execution
 * only repeats the first. */
static unsigned cached_ecx(unsigned leaf, _Atomic long *cache)
{
    long v = atomic_load_explicit(cache, memory_order_relaxed);
    if (v < 0) {
        unsigned a, b, c = 0, d;
        if (__get_cpuid_max(leaf & 0x80000000u, NULL) >= leaf)
            __cpuid_count(leaf, 0, a, b, c, d);
        v = c;
        atomic_store_explicit(cache, v, memory_order_relaxed);
    }
    return (unsigned)v;
}
static _Atomic long leaf7_ecx = -1, ext1_ecx = -1;
unsigned ll_cpuid_7_ecx(void) { return cached_ecx(7, &leaf7_ecx); }
unsigned ll_cpuid_ext_ecx(void) { return cached_ecx(0x80000001u, &ext1_ecx); }
#else
unsigned ll_cpuid_7_ecx(void) { return 0; }
unsigned ll_cpuid_ext_ecx(void) { return 0; }
#endif
