/*
 * interpose.c - build/lib/liblock-interpose.so: run unmodified programs on
 * any liblock algorithm (LD_PRELOAD, or `liblock run`; docs/interpose.md).
 *
 * The interposer is the shared interception layer (src/shim/, design and
 * invariants in src/shim/shim.h) compiled without LL_SHIM_PROFILE: every
 * measurement hook is an empty inline function, so its lock paths are the
 * shim's and nothing else.  What is specific to it lives here.
 *
 * Source: the deployment method of seed 001 (Malthusian locks: every lock of
 * an unmodified program replaced through interposition of the pthread mutex
 * API) and LiTL (Guiroux et al., USENIX ATC'16), which made it a library.
 * Written here from those descriptions; no code taken from either.
 */
#include "../shim/shim.h"

/* For tools: which preload library this process runs under. */
LL_EXPORT const char *liblock_preload_kind(void) { return "interpose"; }
