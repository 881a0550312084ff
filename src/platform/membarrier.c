/*
 * membarrier.c - the asymmetric memory barrier: a heavy side that makes
 * every thread of the process pass through a full barrier
 * (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), Linux 4.14), so that the
 * light side of a store/load pattern needs only a compiler barrier.
 *
 * The pattern (store buffering, "Dekker"):
 *   light side (hot path):  store X; compiler barrier; load Y
 *   heavy side (rare path): store Y; ll_heavy_barrier(); load X
 * Either the light side's load sees the heavy side's store, or the heavy
 * side's load sees the light side's store.  The kernel interrupts every CPU
 * that runs a thread of this process and has it execute a full barrier
 * before the call returns, and the call itself is a full barrier for the
 * caller.  A light side whose store was still in its store buffer at that
 * moment has it drained (so the heavy side's later load sees it); one that
 * had not stored yet loads Y after the interrupt, when the heavy side's
 * store is visible; one not running at that moment went through the
 * scheduler, which is a full barrier too.  This is not expressible in the
 * C11 model: it is the kernel's documented guarantee (membarrier(2)), the
 * same one liburcu and folly rely on.
 *
 * Registration (MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) is made once per
 * process, at the first ll_heavy_barrier_ok(), and again in a forked child
 * if the command answers EPERM there.  Callers that find it unavailable
 * (old kernel, seccomp filter) keep a symmetric protocol instead.
 */
#include "internal.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

static pthread_once_t reg_once = PTHREAD_ONCE_INIT;
static int reg_ok;

/* membarrier(cmd): its result (>= 0), or -errno; errno untouched (a
 * waiting client calls it while its section may run elsewhere with its
 * identity: platform/identity.h) */
static long membarrier_cmd(int cmd) { return ll_syscall_raw(SYS_membarrier, cmd, 0, 0, 0, 0, 0); }

static int membarrier_call(int cmd)
{
    long r = membarrier_cmd(cmd);
    return r < 0 ? (int)-r : 0;
}

static void reg(void)
{
    long q = membarrier_cmd(MEMBARRIER_CMD_QUERY);
    reg_ok = q > 0 && (q & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
             membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

int ll_heavy_barrier_ok(void)
{
    pthread_once(&reg_once, reg);
    return reg_ok;
}

int ll_heavy_barrier(void)
{
    int e = membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    if (LL_UNLIKELY(e == EPERM) && membarrier_call(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
        e = membarrier_call(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
    return e;
}
