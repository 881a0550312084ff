/*
 * test_parking_races - park/unpark races: spin, ttas, ticket, clh, cna, hemlock,
 * mcs, reciprocating, hapax, shfllock under spin-then-park with LIBLOCK_SPIN_NS=0 (every
 * waiter parks at once) and tiny critical sections, so that parking and
 * waking race on nearly every hand-off; a lost wake-up hangs and the bound fails it.  The same
 * for the barging lock() of oyama and hybcomb, alone and mixed with
 * execute and trylock.  Each configuration runs in a child process
 * (parking.h) with exact counts.
 */
#include "parking.h"

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 600, parking_count_child);
    if (rc >= 0)
        return rc;
    static const char *const parkers[] = {"spin", "ttas", "ticket", "clh", "cna", "hemlock", "mcs", "reciprocating", "hapax",
                                          "shfllock", "auto"};
    long per = th_scale_small() ? 1000 : 10000;
    for (size_t i = 0; i < sizeof parkers / sizeof *parkers; i++) {
        for (int n = 2; n <= 8; n *= 2) {
            char what[128];
            snprintf(what, sizeof what, "%s spin-then-park, SPIN_NS=0, %d threads", parkers[i], n);
            th_context = what;
            parking_count_spawn(what, parkers[i], LIBLOCK_WAIT_SPIN_THEN_PARK, n, per * 4 / n, 0, "0");
        }
    }
    /* the combining locks whose lock() barges and sleeps on an eventcount
     * that every release or departure signals (oyama.c change 7, hybcomb.c
     * change 8): lock/unlock alone, then mixed with execute and trylock,
     * where the sleepers also wait out combiners' passes */
    static const char *const bargers[] = {"oyama", "hybcomb"};
    for (size_t i = 0; i < sizeof bargers / sizeof *bargers; i++) {
        for (int mix = 0; mix <= 1; mix++) {
            for (int n = 2; n <= 8; n *= 2) {
                char what[128];
                snprintf(what, sizeof what, "%s spin-then-park, SPIN_NS=0, %d threads, %s", bargers[i], n,
                         mix ? "lock/execute/trylock" : "lock/unlock");
                th_context = what;
                parking_count_spawn(what, bargers[i], LIBLOCK_WAIT_SPIN_THEN_PARK, n, per * 4 / n, mix, "0");
            }
        }
    }
    (void)argc;
    return th_report("test_parking_races");
}
