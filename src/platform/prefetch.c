/*
 * prefetch.c - detection for prefetch.h.
 */
#include "prefetch.h"

#include <stddef.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

int ll_prefetchw_ok;

int ll_cpu_has_prefetchw(void)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000u, NULL) < 0x80000001u)
        return 0;
    __cpuid(0x80000001u, a, b, c, d);
    return (c >> 8) & 1;
#else
    return 0;
#endif
}

__attribute__((constructor)) static void prefetch_init(void) { ll_prefetchw_ok = ll_cpu_has_prefetchw(); }
