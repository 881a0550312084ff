/*
 * test_rcl_slots - RCL client ids with a tiny request array
 * (LIBLOCK_RCL_SLOTS=4, set before the first liblock call).
 *
 *   - 4 threads hold the 4 ids; a 5th gets EAGAIN from
 *     liblock_thread_register, and liblock_execute returns NULL with errno
 *     EAGAIN without running its critical section; lock(), trylock() and
 *     unlock() work for it through the server's overflow slot (and exclude
 *     the others); the program continues, and once a holder exits the 5th
 *     thread gets an id and execute succeeds.
 *   (More threads than slots under the interposer, with exact counts:
 *   tests/test_rcl_interpose.sh.)
 *   - 10,000 short-lived threads (waves of 4) each run one CS: ids are
 *     reused, the id watermark never exceeds 4, and the count is exact.
 */
#include "harness.h"

#include <stdatomic.h>

#define CAP 4

static liblock_t lock;
static long counter;
static atomic_int ran_unexpected;
static pthread_barrier_t hold_bar, release_bar;

static void *cs_inc(void *a)
{
    counter++;
    return a;
}
static void *cs_must_not_run(void *a)
{
    atomic_store(&ran_unexpected, 1);
    return a;
}

static void *holder(void *p)
{
    long ok = liblock_thread_register(&lock) == 0 && liblock_execute(&lock, cs_inc, p) == p;
    pthread_barrier_wait(&hold_bar);
    pthread_barrier_wait(&release_bar);
    return (void *)ok;
}

struct extra_res {
    int reg, exec_errno, lock_err, unlock_err, try_err, try_unlock_err, try_busy;
    void *exec_ret;
};
static void *extra(void *p)
{
    struct extra_res *r = p;
    r->reg = liblock_thread_register(&lock);
    errno = 0;
    r->exec_ret = liblock_execute(&lock, cs_must_not_run, p);
    r->exec_errno = errno;
    r->lock_err = liblock_lock(&lock);
    if (r->lock_err == 0) {
        counter++; /* under the lock taken through the overflow slot */
        r->try_busy = liblock_trylock(&lock);
        r->unlock_err = liblock_unlock(&lock);
    }
    r->try_err = liblock_trylock(&lock);
    if (r->try_err == 0)
        r->try_unlock_err = liblock_unlock(&lock);
    return NULL;
}
static void *late(void *p)
{
    return liblock_execute(&lock, cs_inc, p);
}

static unsigned max_watermark;
static void *once(void *p)
{
    void *r = liblock_execute(&lock, cs_inc, p);
    liblock_server_stats_t st;
    if (liblock_server_stats(liblock_server_of(&lock), &st) == 0) {
        unsigned cur = __atomic_load_n(&max_watermark, __ATOMIC_RELAXED);
        while (st.client_watermark > cur &&
               !__atomic_compare_exchange_n(&max_watermark, &cur, st.client_watermark, 0, __ATOMIC_RELAXED,
                                            __ATOMIC_RELAXED))
            ;
    }
    return r == p ? NULL : (void *)1;
}

int main(void)
{
    th_watchdog(60);
    setenv("LIBLOCK_RCL_SLOTS", "4", 1);
    th_context = "capacity";
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_YIELD);
    CHECK_EQ(liblock_init(&lock, "rcl", &a), 0);
    pthread_barrier_init(&hold_bar, NULL, CAP + 1);
    pthread_barrier_init(&release_bar, NULL, CAP + 1);
    pthread_t h[CAP];
    for (long i = 0; i < CAP; i++)
        pthread_create(&h[i], NULL, holder, (void *)(i + 1));
    pthread_barrier_wait(&hold_bar); /* all four ids are taken now */
    liblock_server_stats_t st;
    CHECK_EQ(liblock_server_stats(liblock_server_of(&lock), &st), 0);
    CHECK_EQ(st.slots, CAP);
    CHECK_EQ(st.clients, CAP);
    struct extra_res r;
    memset(&r, 0, sizeof r);
    pthread_t x;
    pthread_create(&x, NULL, extra, &r);
    pthread_join(x, NULL);
    CHECK_EQ(r.reg, EAGAIN);
    CHECK(r.exec_ret == NULL && r.exec_errno == EAGAIN, "execute: %p errno %d", r.exec_ret, r.exec_errno);
    CHECK_EQ(r.lock_err, 0);
    CHECK_EQ(r.unlock_err, 0);
    CHECK_EQ(r.try_busy, EBUSY);
    CHECK_EQ(r.try_err, 0);
    CHECK_EQ(r.try_unlock_err, 0);
    CHECK(atomic_load(&ran_unexpected) == 0, "the refused critical section did not run");
    CHECK_EQ(counter, CAP + 1);
    pthread_barrier_wait(&release_bar);
    for (int i = 0; i < CAP; i++) {
        void *ok;
        pthread_join(h[i], &ok);
        CHECK(ok == (void *)1, "holder %d registered and ran", i);
    }
    /* the ids came back: a new thread gets one */
    void *lr;
    pthread_create(&x, NULL, late, &lock);
    pthread_join(x, &lr);
    CHECK(lr == &lock, "a thread after the holders exited is served");
    CHECK_EQ(counter, CAP + 2);

    th_context = "reuse";
    counter = 0;
    int n = th_scale_small() ? 1000 : 10000;
    long failures = 0;
    for (int i = 0; i < n; i += CAP) {
        pthread_t w[CAP];
        int k = 0;
        for (; k < CAP && i + k < n; k++)
            pthread_create(&w[k], NULL, once, (void *)(long)(i + k + 1));
        for (int j = 0; j < k; j++) {
            void *e;
            pthread_join(w[j], &e);
            failures += e != NULL;
        }
    }
    CHECK_EQ(failures, 0);
    CHECK_EQ(counter, n);
    CHECK(max_watermark <= CAP, "id watermark %u <= %d", max_watermark, CAP);
    CHECK_EQ(liblock_server_stats(liblock_server_of(&lock), &st), 0);
    CHECK_EQ(st.clients, 0);
    CHECK_EQ(st.client_watermark, 0);
    CHECK_EQ(liblock_destroy(&lock), 0);
    CHECK_EQ(liblock_server_stop(liblock_server_default()), 0);
    return th_report("test_rcl_slots");
}
