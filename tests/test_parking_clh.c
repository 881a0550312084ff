/*
 * test_parking_clh - CLH trylock never waits, under spin and under
 * spin-then-park: while another thread holds the lock, 1000 trylocks all
 * return EBUSY (the holder releases only after the trier has finished, so
 * a trylock that waited would hang); and trylock racing with lock and
 * execute in 8 threads gives exact counts (the counting workload of
 * parking.h, in a child process).
 */
#include "parking.h"

static liblock_t clh;
static _Atomic int clh_phase;

static void *clh_trier(void *arg)
{
    (void)arg;
    while (atomic_load(&clh_phase) != 1)
        ;
    int busy = 0;
    for (int i = 0; i < 1000; i++)
        busy += liblock_trylock(&clh) == EBUSY;
    atomic_store(&clh_phase, busy == 1000 ? 2 : 3);
    return NULL;
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 300, parking_count_child);
    if (rc >= 0)
        return rc;
    static const int pols[] = {LIBLOCK_WAIT_SPIN, LIBLOCK_WAIT_SPIN_THEN_PARK};
    for (int p = 0; p < 2; p++) {
        th_context = p ? "clh trylock (spin-then-park)" : "clh trylock (spin)";
        liblock_attr_t a;
        liblock_attr_init(&a);
        liblock_attr_setwait(&a, pols[p]);
        CHECK_EQ(liblock_init(&clh, "clh", &a), 0);
        /* trylock while held must return EBUSY without waiting: the holder
         * only releases after the trier has finished. */
        atomic_store(&clh_phase, 0);
        CHECK_EQ(liblock_lock(&clh), 0);
        pthread_t t;
        pthread_create(&t, NULL, clh_trier, NULL);
        atomic_store(&clh_phase, 1);
        uint64_t deadline = th_now_ns() + 30000000000ull;
        while (atomic_load(&clh_phase) == 1 && th_now_ns() < deadline)
            usleep(1000);
        CHECK_EQ(atomic_load(&clh_phase), 2);
        CHECK_EQ(liblock_unlock(&clh), 0);
        pthread_join(t, NULL);
        CHECK_EQ(liblock_destroy(&clh), 0);
        /* trylock racing with lock: exact counts (the mixed workers) */
        parking_count_spawn(th_context, "clh", pols[p], 8, th_scale_small() ? 300 : 3000, 1, NULL);
    }
    (void)argc;
    return th_report("test_parking_clh");
}
