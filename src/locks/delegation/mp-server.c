/*
 * mp-server - a dedicated server thread per lock runs every critical
 * section, requested through one cache line per client, with the two x86
 * optimisations of Petrovic's thesis: client back-off between polls and
 * streaming-store (MOVNTI) replies.  Source: D. Petrovic, "Efficient
 * Communication and Synchronization on Manycore Processors", PhD thesis
 * no. 6552, EPFL, 2015, sections 6.1.2 and 7.1 (Algorithm 5).
 *
 * This file is the registry adapter only.  The runtime (requests, the
 * server thread, waiting, direct mode, start-up and fork) is
 * src/runtime/mpserver/, whose header (mpserver.h) gives the algorithm, the
 * invariants and the memory-ordering argument.
 */
#include "runtime/mpserver/mpserver.h"

const struct ll_ops ll_ops_mp_server = {
    .name = "mp-server",
    .description = "dedicated server thread per lock, one line per client; optional client back-off and streaming-store replies",
    .source = "Petrovic, Efficient Communication and Synchronization on Manycore Processors (PhD thesis, EPFL 2015), sections 6.1.2 and 7.1, Algorithm 5 with back-off and streaming stores",
    .props = LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) |
                LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) | LL_POLICY_BIT(LIBLOCK_WAIT_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "direct mode (every policy but spin, server not pinned): lock/unlock are a futex mutex on the lock word, no request; execute runs the section on the caller's thread under that word when the server sleeps or last ran on the caller's CPU, or when a posted request is not answered within an eighth of the spin budget (withdrawn); otherwise the server runs it, its clients polling, then sleeping",
    .state_size = sizeof(struct mps_lock),
    .node_size = 0,
    .init = ll_mps_lock_init,
    .destroy = ll_mps_lock_destroy,
    .lock = ll_mps_lock_lock,
    .trylock = ll_mps_lock_trylock,
    .unlock = ll_mps_lock_unlock,
    .execute = ll_mps_execute,
    .cond_release = ll_mps_cond_release,
    .cond_reacquire = ll_mps_cond_reacquire,
    .thread_register = ll_mps_thread_register,
    .stats = ll_mps_stats,
};
