/*
 * prefetch.h - write prefetch of a cache line the caller is about to read
 * and then write.
 *
 * A load of a line another CPU holds modified brings it over in shared
 * state; a store to it afterwards needs a second transaction to take it
 * exclusive.  PREFETCHW asks for the line exclusive at once, so the load
 * and the store that follow both hit.  The queue locks' arrival is that
 * pattern: it reads its predecessor's node (its CPU, whether its grant is
 * pending) and then links itself into the same line (src/locks/restricting/cr.h,
 * cr_arrive).  It is only a hint: it changes no value and no ordering.
 *
 * PREFETCHW is used where CPUID reports it (leaf 0x80000001, ECX bit 8,
 * "3DNowPrefetch"/PRFCHW; ll_cpu_has_prefetchw, read once when the library
 * is loaded), so it is never executed where it might fault; elsewhere, not
 * on x86, and under ThreadSanitizer (which cannot see inline asm) nothing is
 * done.  Encoded with inline asm so that no -mprfchw flag is needed.
 */
#ifndef LIBLOCK_PREFETCH_H
#define LIBLOCK_PREFETCH_H

extern int ll_prefetchw_ok; /* set by a constructor in prefetch.c; read-only afterwards */
int ll_cpu_has_prefetchw(void);

static inline void ll_prefetchw(const void *p)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__SANITIZE_THREAD__)
    if (ll_prefetchw_ok)
        __asm__ __volatile__("prefetchw %0" ::"m"(*(const char *)p));
#else
    (void)p;
#endif
}

#endif
