/*
 * identity.c - the FS-base switch around a delegated critical section run
 * for another thread, and the choice of how to switch (identity.h has the
 * invariants: nothing here reads or writes thread-local data between the two
 * switches, and the request/answer protocol of each runtime orders the two
 * threads' accesses).
 *
 * Off unless LIBLOCK_IDENTITY=1 (or prctl) asks for it: a switched section
 * writes its caller's thread-local data from another CPU, which a delegated
 * round trip pays for (docs/internals.md).  Two ways, chosen once before
 * main:
 *   wrfsbase      where the kernel enabled the FSGSBASE instructions for
 *                 user mode (AT_HWCAP2 bit 1, Linux 5.9 and later): two
 *                 unprivileged instructions per switched section;
 *   arch_prctl    elsewhere: ARCH_SET_FS, one system call each way.  It is
 *                 slower than the section itself, but the guarantee does
 *                 not then depend on the kernel (LIBLOCK_IDENTITY=prctl
 *                 forces it);
 * and off under the sanitizers (identity.h), where pthread_self() is not
 * the FS base, by default, or with LIBLOCK_IDENTITY=0.
 */
#include "platform/identity.h"

#include <stdlib.h>
#include <string.h>
#if LL_IDENT_BUILD
#include <asm/prctl.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#ifndef HWCAP2_FSGSBASE
#define HWCAP2_FSGSBASE (1ul << 1)
#endif

int ll_ident_how;
__thread struct ll_ident_tls ll_ident_tls __attribute__((tls_model("initial-exec")));
static const char *ident_off_cause = "off (not built: sanitizer or not x86-64 glibc)";

#if LL_IDENT_BUILD
/* rdi = tp, rsi = wrap, rdx = w.  rbx keeps the FS base of entry (the
 * runner's own, or, for a runner that is itself running a section as its
 * caller, that caller's), restored after wrap returns; rax (wrap's value) is
 * untouched by the second wrfsbase. */
__asm__(".text\n"
        ".globl ll_ident_call_fsgs\n"
        ".hidden ll_ident_call_fsgs\n"
        ".type ll_ident_call_fsgs,@function\n"
        "ll_ident_call_fsgs:\n"
        ".cfi_startproc\n"
        "    push %rbx\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %rbx, 0\n"
        "    rdfsbase %rbx\n"
        "    wrfsbase %rdi\n"
        "    mov %rdx, %rdi\n"
        "    call *%rsi\n"
        "    wrfsbase %rbx\n"
        "    pop %rbx\n"
        ".cfi_adjust_cfa_offset -8\n"
        ".cfi_restore %rbx\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size ll_ident_call_fsgs, .-ll_ident_call_fsgs\n");

/* rdi = tp, rsi = wrap, rdx = w, rcx = self (the FS base to go back to).
 * The system call clobbers rax, rcx and r11 only; three pushes keep the
 * stack 16-byte aligned at the call. */
__asm__(".text\n"
        ".globl ll_ident_call_prctl\n"
        ".hidden ll_ident_call_prctl\n"
        ".type ll_ident_call_prctl,@function\n"
        "ll_ident_call_prctl:\n"
        ".cfi_startproc\n"
        "    push %rbx\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %rbx, 0\n"
        "    push %r12\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %r12, 0\n"
        "    push %r13\n"
        ".cfi_adjust_cfa_offset 8\n"
        ".cfi_rel_offset %r13, 0\n"
        "    mov %rcx, %rbx\n"
        "    mov %rsi, %r12\n"
        "    mov %rdx, %r13\n"
        "    mov %rdi, %rsi\n"
        "    mov $0x1002, %edi\n" /* ARCH_SET_FS */
        "    mov $158, %eax\n"    /* SYS_arch_prctl */
        "    syscall\n"
        "    mov %r13, %rdi\n"
        "    call *%r12\n"
        "    mov %rax, %r12\n"
        "    mov %rbx, %rsi\n"
        "    mov $0x1002, %edi\n"
        "    mov $158, %eax\n"
        "    syscall\n"
        "    mov %r12, %rax\n"
        "    pop %r13\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %r12\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    pop %rbx\n"
        ".cfi_adjust_cfa_offset -8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size ll_ident_call_prctl, .-ll_ident_call_prctl\n");

_Static_assert(ARCH_SET_FS == 0x1002 && SYS_arch_prctl == 158, "arch_prctl numbers");

/* Before main, on the main thread (no other thread of the program yet, so
 * no ordering): the environment, then whether the thread pointer is what
 * pthread_self() returns, read the way the switch will write it. */
__attribute__((constructor)) static void ident_setup(void)
{
    const char *e = getenv("LIBLOCK_IDENTITY");
    if (!e || strcmp(e, "0") == 0) { /* off unless asked for (docs/internals.md: its cost) */
        ident_off_cause = e ? "off (LIBLOCK_IDENTITY=0)" : "off (the default; LIBLOCK_IDENTITY=1 turns it on)";
        return;
    }
    if (strcmp(e, "1") != 0 && strcmp(e, "prctl") != 0) {
        ident_off_cause = "off (LIBLOCK_IDENTITY is not 0, 1 or prctl)";
        return;
    }
    int how = LL_IDENT_PRCTL;
    if (getauxval(AT_HWCAP2) & HWCAP2_FSGSBASE)
        how = LL_IDENT_FSGSBASE;
    if (strcmp(e, "prctl") == 0)
        how = LL_IDENT_PRCTL; /* to measure the fallback on a machine that has both */
    unsigned long fs = 0;
    if (how == LL_IDENT_FSGSBASE) {
        __asm__ __volatile__("rdfsbase %0" : "=r"(fs));
    } else {
        int saved = errno;
        if (syscall(SYS_arch_prctl, ARCH_GET_FS, &fs) != 0)
            fs = 0;
        errno = saved;
    }
    if (fs == 0 || fs != (unsigned long)pthread_self()) {
        ident_off_cause = "off (the thread pointer is not pthread_self())";
        return;
    }
    ll_ident_how = how;
}
#else
void *ll_ident_call_fsgs(uintptr_t tp, void *(*wrap)(void *), void *w)
{
    (void)tp;
    return wrap(w);
}
void *ll_ident_call_prctl(uintptr_t tp, void *(*wrap)(void *), void *w, uintptr_t self)
{
    (void)tp, (void)self;
    return wrap(w);
}
#endif

int ll_ident_mode(void) { return ll_ident_how; }

const char *ll_ident_name(void)
{
    switch (ll_ident_how) {
    case LL_IDENT_FSGSBASE:
        return "wrfsbase";
    case LL_IDENT_PRCTL:
        return "arch_prctl";
    default:
        return ident_off_cause;
    }
}
