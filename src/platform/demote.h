/*
 * demote.h - push a line just written towards the cache level other CPUs
 * read from.
 *
 * A store to a line that another CPU polls becomes visible to it only once
 * the writer's copy is taken from its private caches: the poller's next
 * read misses, snoops the writer and waits for the line to come over.
 * CLDEMOTE (Intel, from Tremont and Sapphire Rapids) asks the CPU to move
 * the line to the shared cache at once, so that the poller's miss is
 * answered there.  The RCL request is that pattern: a client stores fn in
 * its slot and the server's scan reads it (src/runtime/rcl/client.c).
 *
 * It is only a hint: it changes no value and no ordering, and the line
 * stays valid in the writer's caches or comes back on its next access.
 * Its encoding (0F 1C /0) lies in the opcode range that Intel and AMD
 * reserve as hint NOPs, so on a CPU without it the instruction does
 * nothing and needs no CPUID test; it never faults.  Nothing is done off
 * x86 and under ThreadSanitizer (which cannot see inline asm).
 */
#ifndef LIBLOCK_DEMOTE_H
#define LIBLOCK_DEMOTE_H

static inline void ll_demote(const void *p)
{
#if (defined(__x86_64__) || defined(__i386__)) && !defined(__SANITIZE_THREAD__)
    __asm__ __volatile__("cldemote %0" ::"m"(*(const char *)p));
#else
    (void)p;
#endif
}

#endif
