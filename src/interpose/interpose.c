/*
 * interpose.c - build/lib/liblock-interpose.so: run unmodified programs on
 * any liblock algorithm (LD_PRELOAD, or `liblock run`; docs/interpose.md).
 *
 * The interposer is the shared interception layer (src/shim/, design and
 * invariants in src/shim/shim.h) compiled without LL_SHIM_PROFILE: every
 * measurement hook is an empty inline function, so its lock paths are the
 * shim's and nothing else.  What is specific to it lives here.
 *
 * Source: the deployment method of D. Dice, "Malthusian Locks", EuroSys 2017 (extended version, arXiv:1511.06035),
 * section 6: every lock of an unmodified program replaced through
 * LD_PRELOAD interposition of the pthread mutex API; and LiTL (H. Guiroux,
 * R. Lachaize and V. Quema, "Multicore Locks: the Case Is Not Closed Yet",
 * USENIX ATC 2016), which made it a library.
 * Written here from those descriptions; no code taken from either.
 */
#include "shim/shim.h"
#include <unistd.h>

/* For tools: which preload library this process runs under. */
LL_EXPORT const char *liblock_preload_kind(void) { return "interpose"; }

/* At exit: one line on stderr saying how many mutexes, condition variables
 * and semaphores were left to glibc and why (src/shim/to_glibc.c), when
 * any were and warnings are on (LIBLOCK_WARN, as for the spin warning) --
 * and only when stderr is a terminal, or LIBLOCK_REPORT=1 asks for it: a
 * program whose output is captured (a test harness comparing it with
 * glibc's) must see exactly what it would see on glibc.  LIBLOCK_REPORT=0
 * never prints it.  A destructor, so it also runs after the program's
 * atexit handlers; not after _exit or a fatal signal. */
__attribute__((destructor)) static void ip_report_to_glibc(void)
{
    LL_KEEP_ERRNO;
    char line[512];
    if (shim_to_glibc_summary(line, sizeof line) == 0 || !ll_env_long("LIBLOCK_WARN", 1, 0, 1))
        return;
    long want = ll_env_long("LIBLOCK_REPORT", -1, 0, 1);
    if (want == 0 || (want < 0 && !isatty(STDERR_FILENO)))
        return;
    fprintf(stderr, "liblock: %s\n", line);
}
