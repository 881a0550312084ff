/*
 * test_parking_stray - a stray unlock at the algorithm level (what a
 * pthread_mutex_unlock too many does under the interposer, which calls the
 * algorithm's unlock directly) leaves every node-less classic lock (spin,
 * ttas, ticket, posix; default and spin policies) usable: trylock then
 * succeeds, and two threads lock/unlock it to the end within a bound.
 * The same through the interposer is in test_parking_interposed.
 */
#include "parking.h"

static liblock_t stray;

static void *stray_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        liblock_lock(&stray);
        liblock_unlock(&stray);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    th_watchdog(120);
    setenv("LIBLOCK_WARN", "0", 1);
    static const char *const nodeless[] = {"spin", "ttas", "ticket", "posix"};
    static const int pols[] = {LIBLOCK_WAIT_DEFAULT, LIBLOCK_WAIT_SPIN};
    for (size_t i = 0; i < 4; i++)
        for (size_t p = 0; p < 2; p++) {
            const struct ll_ops *o = ll_find_ops(nodeless[i]);
            if (!o || (pols[p] && !(o->policies & LL_POLICY_BIT(pols[p]))))
                continue;
            th_context = nodeless[i];
            liblock_attr_t a;
            liblock_attr_init(&a);
            liblock_attr_setwait(&a, pols[p]);
            CHECK_EQ(liblock_init(&stray, nodeless[i], &a), 0);
            CHECK_EQ(liblock_lock(&stray), 0);
            CHECK_EQ(liblock_unlock(&stray), 0);
            o->unlock(&stray, NULL); /* the interposer's direct path, one unlock too many */
            CHECK_EQ(liblock_trylock(&stray), 0);
            CHECK_EQ(liblock_unlock(&stray), 0);
            pthread_t t1, t2;
            pthread_create(&t1, NULL, stray_worker, NULL);
            pthread_create(&t2, NULL, stray_worker, NULL);
            CHECK(th_join_by(t1, th_now_ns() + 30000000000ull) == 0, "%s unusable after a stray unlock", nodeless[i]);
            CHECK(th_join_by(t2, th_now_ns() + 30000000000ull) == 0, "%s unusable after a stray unlock", nodeless[i]);
            CHECK_EQ(liblock_destroy(&stray), 0);
        }
    (void)argc;
    (void)argv;
    return th_report("test_parking_stray");
}
