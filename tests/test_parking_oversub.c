/*
 * test_parking_oversub - the classic locks' waiting protocols when threads
 * outnumber CPUs: every classic algorithm with its default policy, 8 and
 * 32 threads, each doing a fixed number of critical sections alternating
 * lock/unlock, liblock_execute and trylock; exact counts, each
 * configuration in a child process with a time bound (a convoy that makes
 * each hand-off wait for the scheduler fails it).
 */
#include "parking.h"

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 600, parking_count_child);
    if (rc >= 0)
        return rc;
    long per = th_scale_small() ? 2000 : 20000;
    for (size_t i = 0; i < PARKING_NCLASSIC; i++) {
        if (!ll_find_ops(parking_classic[i]))
            continue;
        for (int n = 8; n <= 32; n *= 4) {
            char what[128];
            snprintf(what, sizeof what, "%s default policy, %d threads, lock/execute/trylock", parking_classic[i], n);
            th_context = what;
            uint64_t t0 = th_now_ns();
            parking_count_spawn(what, parking_classic[i], 0, n, n == 8 ? per : per / 4, 1, NULL);
            printf("  %-8s %2d threads: %.2f s\n", parking_classic[i], n, (th_now_ns() - t0) / 1e9);
        }
    }
    (void)argc;
    return th_report("test_parking_oversub");
}
