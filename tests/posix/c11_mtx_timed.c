/* mtx_timedlock: thrd_timedout for a held mutex (past and near deadlines,
 * never before the deadline); thrd_success for a free one whatever the
 * deadline and when the holder unlocks before a far deadline; a recursive
 * timed mutex relocks. */
#include "c11_common.h"
static mtx_t m;
static atomic_int held, release;
static int hold_fn(void *a)
{
    (void)a;
    mtx_lock(&m);
    atomic_store(&held, 1);
    wait_for(&release, 1);
    ms_sleep(20);
    mtx_unlock(&m);
    return 0;
}
int main(void)
{
    TSHOW("init mtx_timed", mtx_init(&m, mtx_timed));
    thrd_t t;
    thrd_create(&t, hold_fn, NULL);
    wait_for(&held, 1);
    struct timespec d = deadline(CLOCK_REALTIME, -1000);
    TSHOW("timedlock past, held", mtx_timedlock(&m, &d));
    d = deadline(CLOCK_REALTIME, 15);
    TSHOW("timedlock +15ms, held", mtx_timedlock(&m, &d));
    printf("returned before the deadline: %s\n", reached(CLOCK_REALTIME, &d) ? "no" : "yes");
    atomic_store(&release, 1);
    d = (struct timespec){20000000000LL, 0};
    TSHOW("timedlock tv_sec=2e10, released after 20 ms", mtx_timedlock(&m, &d));
    thrd_join(t, NULL);
    TSHOW("unlock", mtx_unlock(&m));
    d = deadline(CLOCK_REALTIME, -1000);
    TSHOW("timedlock past, free", mtx_timedlock(&m, &d));
    TSHOW("unlock", mtx_unlock(&m));
    mtx_destroy(&m);
    TSHOW("init mtx_timed|mtx_recursive", mtx_init(&m, mtx_timed | mtx_recursive));
    d = deadline(CLOCK_REALTIME, 1000);
    TSHOW("timedlock", mtx_timedlock(&m, &d));
    TSHOW("timedlock again", mtx_timedlock(&m, &d));
    TSHOW("trylock by other thread", in_thread(mtx_trylock_fn, &m));
    TSHOW("unlock", mtx_unlock(&m));
    TSHOW("unlock", mtx_unlock(&m));
    TSHOW("trylock by other thread", in_thread(mtx_trylock_fn, &m));
    mtx_destroy(&m);
    return 0;
}
