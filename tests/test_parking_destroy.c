/*
 * test_parking_destroy - liblock_destroy of every classic lock reports
 * EBUSY while a thread holds it and while another waits on it, and leaves
 * the lock usable: the waiter then gets it, and destroy succeeds.
 */
#include "parking.h"

static liblock_t dl;
static _Atomic int dl_state;

static void *dl_waiter(void *arg)
{
    (void)arg;
    atomic_store(&dl_state, 1);
    liblock_lock(&dl);
    atomic_store(&dl_state, 2);
    liblock_unlock(&dl);
    return NULL;
}

int main(int argc, char **argv)
{
    th_watchdog(120);
    setenv("LIBLOCK_WARN", "0", 1);
    for (size_t i = 0; i < PARKING_NCLASSIC; i++) {
        if (!ll_find_ops(parking_classic[i]))
            continue;
        th_context = parking_classic[i];
        CHECK_EQ(liblock_init(&dl, parking_classic[i], NULL), 0);
        CHECK_EQ(liblock_lock(&dl), 0);
        CHECK_EQ(liblock_destroy(&dl), EBUSY);
        atomic_store(&dl_state, 0);
        pthread_t t;
        pthread_create(&t, NULL, dl_waiter, NULL);
        while (atomic_load(&dl_state) == 0)
            usleep(100);
        usleep(5000);
        CHECK_EQ(liblock_destroy(&dl), EBUSY);
        CHECK_EQ(liblock_unlock(&dl), 0);
        pthread_join(t, NULL);
        CHECK_EQ(atomic_load(&dl_state), 2);
        CHECK_EQ(liblock_destroy(&dl), 0);
    }
    (void)argc;
    (void)argv;
    return th_report("test_parking_destroy");
}
