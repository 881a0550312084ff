/*
 * prefetch.c - detection for prefetch.h.
 */
#include "prefetch.h"

#include "internal.h"

int ll_prefetchw_ok;

int ll_cpu_has_prefetchw(void) { return (ll_cpuid_ext_ecx() >> 8) & 1; } /* 3DNowPrefetch / PRFCHW */

__attribute__((constructor)) static void prefetch_init(void) { ll_prefetchw_ok = ll_cpu_has_prefetchw(); }
