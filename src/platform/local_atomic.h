/*
 * local_atomic.h - "local" read-modify-write operations (J.-P. Lozi,
 * "Towards More Scalable Mutual Exclusion for Multicore Architectures",
 * PhD thesis, UPMC (Paris 6), 2014, section 4.1.2.2): atomic with respect
 * to the threads of ONE hardware thread only.
 *
 * The RCL runtime binds every thread of a server (servicing threads, manager,
 * backup) to the server's CPU.  Those threads can preempt one another at any
 * instruction (page fault, manager's forced election), so their shared words
 * need atomic read-modify-writes, but only against threads on the same CPU.
 * On x86 a single instruction is atomic with respect to interrupts and
 * therefore to preemption on its own CPU; without the LOCK prefix it does not
 * lock the bus or drain the store buffer, so it costs a few cycles instead of
 * ~20-100.
 *
 * CORRECTNESS CONDITION (caller's duty): every write to the word comes from
 * a thread running on the same CPU.  A non-LOCK cmpxchg always performs a
 * write cycle (it writes back the old value when the comparison fails), so if
 * another CPU could write the word between our read and our write-back, its
 * write would be lost.  Reads from other CPUs are harmless.
 *
 * Ordering: x86 (TSO) keeps a CPU's own loads and stores in program order as
 * seen by itself and by other CPUs (except store->load), and the asm has a
 * "memory" clobber so the compiler neither caches nor reorders memory
 * accesses across it: on the server CPU these operations act as full
 * compiler barriers with acquire/release hardware semantics.
 *
 * Elsewhere (not x86), and under ThreadSanitizer (which cannot see inline
 * asm), they fall back to ordinary C11 atomics, which are correct everywhere.
 */
#ifndef LIBLOCK_LOCAL_ATOMIC_H
#define LIBLOCK_LOCAL_ATOMIC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define LL_LOCAL_ASM 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LL_LOCAL_ASM 0
#endif
#endif
#ifndef LL_LOCAL_ASM
#if defined(__x86_64__) || defined(__i386__)
#define LL_LOCAL_ASM 1
#else
#define LL_LOCAL_ASM 0
#endif
#endif

/* Compare-and-swap of a 32-bit word, local to this CPU.  Returns true when
 * *p was `expect` and is now `desired`. */
static inline bool ll_local_cas32(_Atomic uint32_t *p, uint32_t expect, uint32_t desired)
{
#if LL_LOCAL_ASM
    uint32_t prev;
    __asm__ __volatile__("cmpxchgl %2, %1" : "=a"(prev), "+m"(*(volatile uint32_t *)p) : "r"(desired), "0"(expect)
                         : "memory", "cc");
    return prev == expect;
#else
    return atomic_compare_exchange_strong_explicit(p, &expect, desired, memory_order_acq_rel, memory_order_acquire);
#endif
}

/* *p += v, local to this CPU. */
static inline void ll_local_add64(_Atomic uint64_t *p, uint64_t v)
{
#if LL_LOCAL_ASM && defined(__x86_64__)
    __asm__ __volatile__("addq %1, %0" : "+m"(*(volatile uint64_t *)p) : "er"(v) : "memory", "cc");
#else
    atomic_fetch_add_explicit(p, v, memory_order_relaxed);
#endif
}

static inline void ll_local_add32(_Atomic int32_t *p, int32_t v)
{
#if LL_LOCAL_ASM
    __asm__ __volatile__("addl %1, %0" : "+m"(*(volatile int32_t *)p) : "ir"(v) : "memory", "cc");
#else
    atomic_fetch_add_explicit(p, v, memory_order_acq_rel);
#endif
}

static inline bool ll_local_cas32s(_Atomic int32_t *p, int32_t expect, int32_t desired)
{
#if LL_LOCAL_ASM
    int32_t prev;
    __asm__ __volatile__("cmpxchgl %2, %1" : "=a"(prev), "+m"(*(volatile int32_t *)p) : "r"(desired), "0"(expect)
                         : "memory", "cc");
    return prev == expect;
#else
    return atomic_compare_exchange_strong_explicit(p, &expect, desired, memory_order_acq_rel, memory_order_acquire);
#endif
}

#endif
