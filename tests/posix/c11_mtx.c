/* C11 mutexes: mtx_plain, mtx_timed, mtx_plain|mtx_recursive,
 * mtx_timed|mtx_recursive: lock, trylock by the holder (thrd_busy unless
 * recursive), trylock by another thread (thrd_busy), unlock, destroy; an
 * invalid type is thrd_error. */
#include "c11_common.h"
int main(void)
{
    static const struct { int type; const char *name; } types[] = {
        {mtx_plain, "mtx_plain"}, {mtx_timed, "mtx_timed"},
        {mtx_plain | mtx_recursive, "mtx_plain|mtx_recursive"}, {mtx_timed | mtx_recursive, "mtx_timed|mtx_recursive"}};
    for (int i = 0; i < 4; i++) {
        mtx_t m;
        printf("[%s]\n", types[i].name);
        TSHOW("init", mtx_init(&m, types[i].type));
        TSHOW("lock", mtx_lock(&m));
        int r = mtx_trylock(&m);
        printf("trylock by holder: %s\n", tn(r));
        TSHOW("trylock by other thread", in_thread(mtx_trylock_fn, &m));
        if (r == thrd_success)
            TSHOW("unlock (recursion)", mtx_unlock(&m));
        TSHOW("unlock", mtx_unlock(&m));
        TSHOW("trylock free", mtx_trylock(&m));
        TSHOW("unlock", mtx_unlock(&m));
        mtx_destroy(&m);
    }
    mtx_t m;
    TSHOW("init type 99", mtx_init(&m, 99));
    TSHOW("init mtx_recursive alone", mtx_init(&m, mtx_recursive));
    return 0;
}
