/*
 * test_api - API semantics and bad input, for every registered algorithm:
 * trylock (EBUSY while another thread holds the lock, success when free),
 * EDEADLK/EPERM from the hold stack, destroy of a held lock (EBUSY, lock
 * still works), NULL and unknown arguments (EINVAL), unsupported policies
 * (ENOTSUP), several locks held at once released in any order while other
 * threads contend, execute's return value and error reporting.
 */
#include "harness.h"

struct holder {
    liblock_t *lock;
    volatile int state; /* 0 start, 1 holding, 2 release now, 3 released */
    int err;
};

static void *hold_thread(void *p)
{
    struct holder *h = p;
    h->err = liblock_lock(h->lock);
    __atomic_store_n(&h->state, 1, __ATOMIC_RELEASE);
    while (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != 2)
        usleep(100);
    if (!h->err)
        h->err = liblock_unlock(h->lock);
    __atomic_store_n(&h->state, 3, __ATOMIC_RELEASE);
    return NULL;
}

static void *return_arg(void *a) { return a; }

static void test_trylock_and_destroy(const char *algo)
{
    liblock_t l;
    int r = liblock_init(&l, algo, NULL);
    CHECK(r == 0, "init: %s", strerror(r));
    if (r)
        return;
    /* free: trylock succeeds; held by self: trylock EBUSY, lock EDEADLK, destroy EBUSY */
    CHECK_EQ(liblock_trylock(&l), 0);
    CHECK_EQ(liblock_trylock(&l), EBUSY);
    CHECK_EQ(liblock_lock(&l), EDEADLK);
    CHECK_EQ(liblock_destroy(&l), EBUSY);
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK_EQ(liblock_unlock(&l), EPERM);

    /* held by another thread */
    struct holder h = {&l, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, hold_thread, &h);
    while (__atomic_load_n(&h.state, __ATOMIC_ACQUIRE) != 1)
        usleep(100);
    CHECK_EQ(h.err, 0);
    CHECK_EQ(liblock_trylock(&l), EBUSY);
    CHECK_EQ(liblock_unlock(&l), EPERM);
    CHECK_EQ(liblock_destroy(&l), EBUSY);
    __atomic_store_n(&h.state, 2, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK_EQ(h.err, 0);
    /* the failed destroy left the lock working */
    CHECK_EQ(liblock_trylock(&l), 0);
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK_EQ(liblock_lock(&l), 0);
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK(liblock_execute(&l, return_arg, (void *)0x1234) == (void *)0x1234, "execute return value");
    CHECK(strcmp(liblock_algorithm(&l), algo) == 0, "liblock_algorithm");
    CHECK_EQ(liblock_thread_register(&l), 0);
    CHECK_EQ(liblock_destroy(&l), 0);
    /* destroyed: every call refuses */
    CHECK_EQ(liblock_lock(&l), EINVAL);
    CHECK_EQ(liblock_trylock(&l), EINVAL);
    CHECK_EQ(liblock_unlock(&l), EINVAL);
    CHECK_EQ(liblock_destroy(&l), EINVAL);
    errno = 0;
    CHECK(liblock_execute(&l, return_arg, NULL) == NULL && errno == EINVAL, "execute on destroyed lock");
}

static void test_policies(const char *algo, const liblock_algorithm_info_t *info)
{
    for (int p = 1; p < LIBLOCK_WAIT__COUNT; p++) {
        liblock_attr_t a;
        liblock_attr_init(&a);
        CHECK_EQ(liblock_attr_setwait(&a, p), 0);
        liblock_t l;
        int r = liblock_init(&l, algo, &a);
        if (info->policies & (1u << p)) {
            CHECK(r == 0, "policy %s declared but init gives %s", liblock_wait_name(p), strerror(r));
            int got = -1;
            if (!r) {
                CHECK(liblock_getwait(&l, &got) == 0 && got == p, "getwait %d != %d", got, p);
                liblock_destroy(&l);
            }
        } else {
            CHECK(r == ENOTSUP, "policy %s not declared but init gives %d", liblock_wait_name(p), r);
        }
    }
    liblock_t l;
    CHECK_EQ(liblock_init(&l, algo, NULL), 0);
    int got = -1;
    liblock_getwait(&l, &got);
    CHECK(got == info->default_policy, "default policy %d, info says %d", got, info->default_policy);
    liblock_destroy(&l);
}

/* Several locks held at once, released in every rotation of the order,
 * while contender threads hammer the same locks. */
#define NL 4
struct multi {
    liblock_t locks[NL];
    long counters[NL];
    volatile int stop;
    int err;
};

static void *contender(void *p)
{
    struct multi *m = p;
    unsigned seed = (unsigned)(uintptr_t)&seed;
    while (!__atomic_load_n(&m->stop, __ATOMIC_RELAXED)) {
        int i = (int)(rand_r(&seed) % NL);
        int e = liblock_lock(&m->locks[i]);
        if (e) {
            m->err = e;
            break;
        }
        m->counters[i]++;
        liblock_unlock(&m->locks[i]);
    }
    return NULL;
}

static void test_multi_hold(const char *algo)
{
    static struct multi m;
    memset(&m, 0, sizeof m);
    for (int i = 0; i < NL; i++)
        if (liblock_init(&m.locks[i], algo, NULL)) {
            CHECK(0, "init lock %d", i);
            return;
        }
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, contender, &m);
    long mine = 0;
    int orders = th_scale_small() ? 20 : 200;
    for (int round = 0; round < orders; round++) {
        for (int i = 0; i < NL; i++) { /* acquire in index order (no deadlock with contenders: they hold one) */
            int e = liblock_lock(&m.locks[i]);
            CHECK(e == 0, "lock %d: %s", i, strerror(e));
            m.counters[i]++;
        }
        mine += NL;
        for (int k = 0; k < NL; k++) { /* release in a rotating, sometimes reversed order */
            int i = (round % 2) ? (round + k) % NL : (NL - 1 - ((round + k) % NL));
            int e = liblock_unlock(&m.locks[i]);
            CHECK(e == 0, "unlock %d in round %d: %s", i, round, strerror(e));
        }
    }
    __atomic_store_n(&m.stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    CHECK_EQ(m.err, 0);
    for (int i = 0; i < NL; i++)
        CHECK_EQ(liblock_destroy(&m.locks[i]), 0);
    (void)mine;
}

static void test_bad_input_global(void)
{
    th_context = "global";
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "no-such-lock", NULL), EINVAL);
    CHECK_EQ(liblock_init(&l, NULL, NULL), EINVAL);
    CHECK_EQ(liblock_init(NULL, "mcs", NULL), EINVAL);
    liblock_attr_t bad;
    memset(&bad, 0, sizeof bad);
    CHECK_EQ(liblock_init(&l, "mcs", &bad), EINVAL); /* uninitialised attr */
    CHECK_EQ(liblock_lock(NULL), EINVAL);
    CHECK_EQ(liblock_trylock(NULL), EINVAL);
    CHECK_EQ(liblock_unlock(NULL), EINVAL);
    CHECK_EQ(liblock_destroy(NULL), EINVAL);
    liblock_t zero;
    memset(&zero, 0, sizeof zero);
    CHECK_EQ(liblock_lock(&zero), EINVAL);
    CHECK_EQ(liblock_unlock(&zero), EINVAL);
    errno = 0;
    CHECK(liblock_execute(NULL, return_arg, NULL) == NULL && errno == EINVAL, "execute(NULL)");
    CHECK_EQ(liblock_init(&l, "mcs", NULL), 0);
    errno = 0;
    CHECK(liblock_execute(&l, NULL, NULL) == NULL && errno == EINVAL, "execute(cs = NULL)");
    CHECK_EQ(liblock_lock(&l), 0);
    errno = 0;
    CHECK(liblock_execute(&l, return_arg, (void *)1) == NULL && errno == EDEADLK, "nested execute on held lock");
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK_EQ(liblock_destroy(&l), 0);
    CHECK_EQ(liblock_attr_init(NULL), EINVAL);
    liblock_attr_t a;
    CHECK_EQ(liblock_attr_init(&a), 0);
    CHECK_EQ(liblock_attr_setwait(&a, -1), EINVAL);
    CHECK_EQ(liblock_attr_setwait(&a, LIBLOCK_WAIT__COUNT), EINVAL);
    CHECK_EQ(liblock_attr_setwait(NULL, LIBLOCK_WAIT_SPIN), EINVAL);
    CHECK_EQ(liblock_attr_setserver(&a, NULL), EINVAL);
    int p;
    CHECK_EQ(liblock_wait_parse("spin-then-park", &p), 0);
    CHECK_EQ(p, LIBLOCK_WAIT_SPIN_THEN_PARK);
    CHECK_EQ(liblock_wait_parse("bogus", &p), EINVAL);
    CHECK(liblock_wait_name(99) == NULL, "wait_name(99)");
    liblock_algorithm_info_t info;
    CHECK_EQ(liblock_algorithm_info("no-such-lock", &info), EINVAL);
    CHECK_EQ(liblock_algorithm_info("mcs", NULL), EINVAL);
    /* the catalogue names are lower-case with dashes and unique */
    int n = 0;
    for (const char *const *a2 = liblock_algorithms(); *a2; a2++, n++) {
        for (const char *c = *a2; *c; c++)
            CHECK((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-', "bad name %s", *a2);
        for (const char *const *b = a2 + 1; *b; b++)
            CHECK(strcmp(*a2, *b) != 0, "duplicate %s", *a2);
    }
    CHECK(n >= 6, "only %d algorithms", n);
}

int main(int argc, char **argv)
{
    th_watchdog(300);
    test_bad_input_global();
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        th_context = *a;
        liblock_algorithm_info_t info;
        CHECK_EQ(liblock_algorithm_info(*a, &info), 0);
        CHECK(info.policies & (1u << info.default_policy), "default policy not among policies");
        CHECK(info.source && *info.source, "no source");
        test_trylock_and_destroy(*a);
        test_policies(*a, &info);
        test_multi_hold(*a);
        printf("  %-16s done (%d failures so far)\n", *a, th_failures);
    }
    return th_report("test_api");
}
