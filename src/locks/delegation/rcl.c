/*
 * rcl - Remote Core Locking: critical sections run on a dedicated server
 * CPU, requested through one cache line per client.
 *
 * Source: J.-P. Lozi, "Towards More Scalable Mutual Exclusion for
 * Multicore Architectures", PhD thesis, UPMC (Paris 6), 2014, section 4.1,
 * Algorithms 9-11; J.-P. Lozi, F. David, G. Thomas, J. Lawall and
 * G. Muller, "Remote Core Locking: Migrating Critical-Section Execution to
 * Improve the Performance of Multithreaded Applications", USENIX ATC 2012;
 * J.-P. Lozi, "Le Remote Core Lock (RCL) : une nouvelle technique de
 * verrouillage pour les architectures multi-coeur", CFSE 2011.
 *
 * This file is the registry adapter only.  The runtime (servers, request
 * arrays, servicing-thread pools, management and backup threads, client
 * ids) is src/runtime/rcl/, whose header comments (server.c, client.c, direct.c) give the
 * invariants and the memory-ordering argument.
 *
 * Mapping: a lock is bound at init to the server given by
 * liblock_attr_setserver(), else, on its first use, to a default server
 * (LIBLOCK_SERVERS, else the last CPU), started then if needed.
 * execute(): a delegated CS (one round trip); lock/trylock/unlock: requests
 * that the server executes (one round trip each), mutually exclusive with
 * delegated CSs; condition variables work both inside delegated CSs and
 * around liblock_lock sections.
 * Policies (client waiting): spin-then-park (default: spin about
 * ll_spin_budget_cycles(), then sleep until the server wakes the client),
 * spin, park, yield (src/runtime/rcl/client.c, "Parking").
 */
#include "runtime/rcl/rcl.h"

static int rcl_destroy_op(liblock_t *l) { return rcl_lock_destroy(l); }

/* struct ll_ops .bind: bind the lock to its server, starting it if needed. */
static void rcl_bind_op(liblock_t *l) { rcl_server_of_lock(l); }

/* struct ll_ops .direct_default: under the interposer, locks made from now
 * on lock/unlock directly (LIBLOCK_RCL_DIRECT overrides; direct.c). */
static void rcl_direct_default_op(void) { rcl_direct_default = 1; }

const struct ll_ops ll_ops_rcl = {
    .name = "rcl",
    .description = "Remote Core Locking: critical sections delegated to a server CPU",
    .source = "Lozi, Towards More Scalable Mutual Exclusion for Multicore Architectures (PhD thesis, UPMC 2014), section 4.1, Algorithms 9-11; Lozi, David, Thomas, Lawall and Muller, USENIX ATC 2012; Lozi, CFSE 2011",
    .props = LIBLOCK_PROP_DELEGATES | LIBLOCK_PROP_COND | LIBLOCK_PROP_DETECTS_UNLOCK | LIBLOCK_PROP_COND_IN_EXECUTE |
             LIBLOCK_PROP_SERVER,
    .policies = LL_POLICY_BIT(LIBLOCK_WAIT_SPIN) | LL_POLICY_BIT(LIBLOCK_WAIT_SPIN_THEN_PARK) |
                LL_POLICY_BIT(LIBLOCK_WAIT_YIELD) | LL_POLICY_BIT(LIBLOCK_WAIT_PARK),
    .default_policy = LIBLOCK_WAIT_SPIN_THEN_PARK,
    .oversubscribed = "clients spin about one futex round trip for the reply, then sleep until the server wakes them; the server runs on its own CPU, so the critical sections do not compete with the clients for CPUs; a client on the server's CPU sleeps at once",
    .state_size = sizeof(struct rcl_lock),
    .node_size = 0,
    .init = rcl_lock_init,
    .destroy = rcl_destroy_op,
    .lock = rcl_lock_lock,
    .trylock = rcl_lock_trylock,
    .unlock = rcl_lock_unlock,
    .execute = rcl_execute,
    .cond_release = rcl_cond_release,
    .cond_reacquire = rcl_cond_reacquire,
    .thread_register = rcl_thread_register,
    .bind = rcl_bind_op,
    .direct_default = rcl_direct_default_op,
};
