/*
 * nt_store.h - streaming (non-temporal) 64-bit stores and the store fence,
 * for the mp-server's streaming-store replies (D. Petrovic, "Efficient
 * Communication and Synchronization on Manycore Processors", PhD thesis
 * no. 6552, EPFL, 2015, section 7.1.3, "Streaming stores").
 *
 * ll_store_nt64(p, v): one MOVNTI of an 8-byte aligned word.  x86 semantics
 * (Intel SDM vol. 3 section 8.2.2 and 11.3.1):
 *  - the store is single-copy atomic (an aligned quadword write is atomic), so
 *    a reader sees either the old or the new 64-bit value, never a mix: that
 *    is what lets a value and a "done" flag travel in one word;
 *  - it is WEAKLY ordered: it may become visible before ordinary stores that
 *    precede it in program order, and other MOVNTIs may overtake it; it goes
 *    through a write-combining buffer instead of the cache, so the writer
 *    never takes the line in M state (no read-for-ownership), and it may sit
 *    in that buffer until the buffer is evicted or a fence drains it;
 *  - SFENCE (ll_sfence) makes every store before it, ordinary or
 *    non-temporal, globally visible before any store after it; MFENCE and
 *    LOCK-prefixed instructions do too and also order later loads.
 * In C11 terms MOVNTI is outside the model: we treat it as a relaxed atomic
 * store (the asm has a memory clobber, so the compiler keeps program order)
 * whose hardware ordering is weaker than TSO's; every place that relies on
 * ordering after one says which fence provides it.
 *
 * Elsewhere (not x86-64) and under ThreadSanitizer (which cannot see inline
 * asm) the store is a release store and the fence a seq_cst fence: correct
 * everywhere, just not streaming.
 */
#ifndef LIBLOCK_NT_STORE_H
#define LIBLOCK_NT_STORE_H

#include <stdatomic.h>
#include <stdint.h>

#if defined(__SANITIZE_THREAD__)
#define LL_NT_ASM 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LL_NT_ASM 0
#endif
#endif
#ifndef LL_NT_ASM
#if defined(__x86_64__)
#define LL_NT_ASM 1
#else
#define LL_NT_ASM 0
#endif
#endif

static inline void ll_store_nt64(_Atomic uint64_t *p, uint64_t v)
{
#if LL_NT_ASM
    __asm__ __volatile__("movnti %1, %0" : "=m"(*(uint64_t *)p) : "r"(v) : "memory");
#else
    atomic_store_explicit(p, v, memory_order_release);
#endif
}

static inline void ll_sfence(void)
{
#if LL_NT_ASM
    __asm__ __volatile__("sfence" ::: "memory");
#else
    atomic_thread_fence(memory_order_seq_cst);
#endif
}

/* Does this build really emit MOVNTI (for `liblock list` and the bench)? */
static inline int ll_nt_available(void) { return LL_NT_ASM; }

#endif /* LIBLOCK_NT_STORE_H */
