/*
 * test_interpose_types - POSIX semantics of every mutex type under the
 * LD_PRELOAD interposer, for every algorithm: recursive mutexes count
 * their locks and refuse another thread's unlock (EPERM); errorcheck ones
 * give EDEADLK and EPERM; every non-recursive type gives another thread
 * EBUSY on trylock while held and the lock once free; a NORMAL-like mutex
 * may be unlocked by another thread, as glibc allows; glibc's own mutexes
 * (PI, pshared, robust) are passed through untouched, and a robust one
 * whose owner exited gives EOWNERDEAD; destroy of a held mutex gives
 * EBUSY and leaves it intact; mutexes freed or re-initialised without
 * destroy keep the interposer's memory bounded, and a zeroed mutex at the
 * address of a held one is a new, free mutex; a zeroed mutex works.
 *
 * Run without arguments it is a driver (interpose_driver.h,
 * IP_EVERY_ALGORITHM): it re-runs itself under the interposer for every
 * algorithm and the configurations of test_interpose; names on the command
 * line restrict the algorithms.  Its child first checks that the
 * interposer is in use, then makes the lazy mutexes engage their algorithm
 * (engage_mutexes, interpose_mutexes.h).
 */
#include "interpose_driver.h"
#include "interpose_mutexes.h"

/* ---------------------------------------------------------------- types */
static void test_types(void)
{
    th_context = "recursive";
    pthread_mutex_t *r = &d_mutex[K_D_RECURSIVE];
    CHECK_EQ(pthread_mutex_lock(r), 0);
    CHECK_EQ(pthread_mutex_lock(r), 0);
    CHECK_EQ(pthread_mutex_lock(r), 0);
    CHECK_EQ(pthread_mutex_trylock(r), 0);
    CHECK_EQ(in_thread(r, 0), EBUSY);
    CHECK_EQ(in_thread(r, 1), EPERM);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(pthread_mutex_unlock(r), 0);
    CHECK_EQ(in_thread(r, 0), EBUSY); /* still held once */
    CHECK_EQ(pthread_mutex_unlock(r), 0);
    CHECK_EQ(pthread_mutex_unlock(r), EPERM);
    CHECK_EQ(in_thread(r, 0), 0);
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_lock(&s_recursive), 0);
    CHECK_EQ(in_thread(&s_recursive, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_recursive), EPERM);

    th_context = "errorcheck";
    pthread_mutex_t *e = &d_mutex[K_D_ERRORCHECK];
    CHECK_EQ(pthread_mutex_unlock(e), EPERM);
    CHECK_EQ(pthread_mutex_lock(e), 0);
    CHECK_EQ(pthread_mutex_lock(e), EDEADLK);
    CHECK_EQ(pthread_mutex_trylock(e), EBUSY);
    CHECK_EQ(in_thread(e, 1), EPERM);
    CHECK_EQ(in_thread(e, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(e), 0);
    CHECK_EQ(pthread_mutex_unlock(e), EPERM);
    CHECK_EQ(pthread_mutex_lock(&s_errorcheck), 0);
    CHECK_EQ(pthread_mutex_lock(&s_errorcheck), EDEADLK);
    CHECK_EQ(pthread_mutex_unlock(&s_errorcheck), 0);
    CHECK_EQ(pthread_mutex_unlock(&s_errorcheck), EPERM);

    th_context = "normal";
    for (int k = 0; k < K_COUNT; k++) {
        if (is_recursive(k))
            continue;
        CHECK_EQ(pthread_mutex_lock(k_mutex[k]), 0);
        int t = in_thread(k_mutex[k], 0);
        CHECK(t == EBUSY, "%s: trylock from another thread gave %d", k_names[k], t);
        CHECK_EQ(pthread_mutex_unlock(k_mutex[k]), 0);
        t = in_thread(k_mutex[k], 3);
        CHECK(t == 0, "%s: lock from another thread gave %d", k_names[k], t);
    }

    th_context = "unlock by another thread";
    /* NORMAL-like kinds: glibc lets another thread unlock, and so do we,
     * for every algorithm (tests/test_mutex_types.c has the rest). */
    static const int normal_kinds[] = {K_S_NORMAL, K_S_ADAPTIVE, K_D_DEFAULT, K_D_NORMAL};
    for (size_t i = 0; i < sizeof normal_kinds / sizeof *normal_kinds; i++) {
        pthread_mutex_t *m = k_mutex[normal_kinds[i]];
        CHECK_EQ(pthread_mutex_lock(m), 0);
        int r = in_thread(m, 1);
        CHECK(r == 0, "%s: unlock by another thread gave %d", k_names[normal_kinds[i]], r);
        if (r != 0)
            CHECK_EQ(pthread_mutex_unlock(m), 0);
        CHECK_EQ(pthread_mutex_trylock(m), 0);
        CHECK_EQ(pthread_mutex_unlock(m), 0);
    }

    th_context = "pass-through";
    /* glibc's own mutexes: the interposer leaves their words alone ... */
    for (int k = K_D_PI; k <= K_D_PSHARED; k++) {
        CHECK_EQ(pthread_mutex_lock(k_mutex[k]), 0);
        CHECK(k_mutex[k]->__data.__list.__prev == NULL, "%s: the interposer took over a glibc mutex", k_names[k]);
        CHECK(k_mutex[k]->__data.__lock != 0, "%s: glibc's lock word not set while held", k_names[k]);
        CHECK_EQ(pthread_mutex_unlock(k_mutex[k]), 0);
    }
    /* ... and a robust mutex keeps its semantics: the owner dies -> EOWNERDEAD */
    {
        helper_t h = {.m = &d_mutex[K_D_ROBUST], .op = 4};
        pthread_t t;
        pthread_create(&t, NULL, helper_main, &h);
        pthread_join(t, NULL);
        CHECK_EQ(h.result, 0);
        int r = pthread_mutex_lock(&d_mutex[K_D_ROBUST]);
        CHECK(r == EOWNERDEAD, "robust mutex whose owner exited: lock gave %d, expected EOWNERDEAD", r);
        if (r == EOWNERDEAD)
            CHECK_EQ(pthread_mutex_consistent(&d_mutex[K_D_ROBUST]), 0);
        CHECK_EQ(pthread_mutex_unlock(&d_mutex[K_D_ROBUST]), 0);
    }
    /* ours carry the interposer's pointer */
    for (int k = 0; k < K_D_ROBUST; k++)
        CHECK(k_mutex[k]->__data.__list.__prev != NULL, "%s: not interposed", k_names[k]);

    th_context = "life cycle";
    pthread_mutex_t m;
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(pthread_mutex_init(&m, NULL), 0);
        CHECK_EQ(pthread_mutex_lock(&m), 0);
        CHECK_EQ(pthread_mutex_destroy(&m), EBUSY); /* held: refused, left intact */
        CHECK_EQ(pthread_mutex_unlock(&m), 0);
        CHECK_EQ(pthread_mutex_destroy(&m), 0);
    }
    /* mutexes that are never destroyed (freed, or re-initialised): the
     * interposer's memory stays bounded by the addresses used */
    long (*wrappers)(void) = (long (*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_debug_wrappers");
    CHECK(wrappers != NULL, "liblock_interpose_debug_wrappers not exported");
    if (wrappers) {
        long before = wrappers();
        for (int i = 0; i < 20000; i++) {
            pthread_mutex_t *f = calloc(1, sizeof *f);
            CHECK_EQ(pthread_mutex_lock(f), 0);
            CHECK_EQ(pthread_mutex_unlock(f), 0);
            free(f); /* no pthread_mutex_destroy */
        }
        pthread_mutex_t again;
        for (int i = 0; i < 1000; i++) {
            CHECK_EQ(pthread_mutex_init(&again, NULL), 0); /* no destroy in between */
            CHECK_EQ(pthread_mutex_lock(&again), 0);
            CHECK_EQ(pthread_mutex_unlock(&again), 0);
        }
        long grown = wrappers() - before;
        CHECK(grown < 200, "20000 freed + 1000 re-initialised mutexes left %ld wrappers", grown);
        /* a busy one left behind is not reused: the new mutex must be free */
        pthread_mutex_t *b = calloc(1, sizeof *b);
        CHECK_EQ(pthread_mutex_lock(b), 0);
        memset(b, 0, sizeof *b); /* a new zeroed mutex at the address of a held one */
        CHECK_EQ(in_thread(b, 0), 0);
        CHECK_EQ(pthread_mutex_destroy(b), 0);
        free(b);
    }
    /* a zeroed mutex (what PTHREAD_MUTEX_INITIALIZER and std::mutex give) */
    pthread_mutex_t *z = calloc(1, sizeof *z);
    CHECK_EQ(pthread_mutex_lock(z), 0);
    CHECK_EQ(in_thread(z, 0), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(z), 0);
    CHECK_EQ(pthread_mutex_destroy(z), 0);
    free(z);
}

static void child(void)
{
    init_dynamic();
    engage_mutexes();
    test_types();
}

int main(int argc, char **argv) { return ip_main(argc, argv, "test_interpose_types", IP_EVERY_ALGORITHM, child); }
