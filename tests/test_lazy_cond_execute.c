/*
 * test_lazy_cond_execute - the two other ways a lazy mutex engages its
 * algorithm (docs/interpose.md, "Lazy engagement"): its first condition
 * wait, and its first liblock_execute_mutex where the section goes to the
 * algorithm.
 *
 * Run without arguments it is a driver (lazy_driver.h): it runs its child
 * on glibc alone, then under the interposer for every algorithm with
 * LIBLOCK_LAZY unset and with LIBLOCK_LAZY=0, under the mixed
 * configuration and under the profiler; names on the command line restrict
 * the algorithms.  "engaged" below is the value expected of
 * liblock_interpose_debug_engaged: 0 lazy, 1 engaged (1 for "lazy" under
 * LIBLOCK_LAZY=0, -1 for both under the profiler).
 *
 * The child's sections:
 *  cond       a pthread_cond_timedwait and a clockwait (timing out alone)
 *             on a lazy mutex engage it and return with it held; a
 *             consumer waiting on a lazy mutex engages it (the main thread
 *             checks after it took m from the waiter), then 1,000 items go
 *             through a one-slot buffer, each received once, in order.
 *  execute    liblock_execute_mutex (the interposer's, through dlsym) on a
 *             lazy mutex of a delegating algorithm engages it (the section
 *             goes to the algorithm); of any other algorithm it is a lock,
 *             the section and an unlock, and the mutex stays lazy; on one
 *             held lazily by another thread it engages it (a delegated
 *             section, or a contended lock) and runs only after the
 *             unlock; a thread using execute and one using
 *             pthread_mutex_lock exclude each other (exact count).
 */
#include "lazy_driver.h"

/* ---------------------------------------------------------------- cond */
#define PC_ITEMS 1000
static pthread_mutex_t pc_m;
static pthread_cond_t pc_notempty = PTHREAD_COND_INITIALIZER, pc_notfull = PTHREAD_COND_INITIALIZER;
static int pc_full;
static long pc_slot;
static atomic_int pc_waiting;
static long pc_bad, pc_sum;

static void *pc_consumer(void *arg)
{
    (void)arg;
    for (long i = 1; i <= PC_ITEMS; i++) {
        if (pthread_mutex_lock(&pc_m) != 0)
            pc_bad++;
        if (i == 1)
            atomic_store(&pc_waiting, 1); /* under m: the main thread takes m only once we wait */
        while (!pc_full)
            if (pthread_cond_wait(&pc_notempty, &pc_m) != 0)
                pc_bad++;
        pc_bad += pc_slot != i;
        pc_sum += pc_slot;
        pc_full = 0;
        pthread_cond_signal(&pc_notfull);
        if (pthread_mutex_unlock(&pc_m) != 0)
            pc_bad++;
    }
    return NULL;
}

static void sec_cond(void)
{
    pthread_mutex_t m;
    pthread_cond_t cv;
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    struct timespec t;

    th_context = "timedwait engages";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ts_after(CLOCK_REALTIME, &t, 2);
    int r = pthread_cond_timedwait(&cv, &m, &t);
    CHECK(r == ETIMEDOUT || r == 0, "timedwait: %d", r);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY); /* held again */
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), 0);
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "clockwait engages";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ts_after(CLOCK_MONOTONIC, &t, 2);
    r = pthread_cond_clockwait(&cv, &m, CLOCK_MONOTONIC, &t);
    CHECK(r == ETIMEDOUT || r == 0, "clockwait: %d", r);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);

    th_context = "wait engages; one-slot buffer";
    mk(&pc_m, -1);
    CHECK_EQ(pthread_mutex_lock(&pc_m), 0);
    CHECK_EQ(pthread_mutex_unlock(&pc_m), 0);
    CHECK_ENG(&pc_m, w_lazy);
    pthread_t c;
    CHECK_EQ(pthread_create(&c, NULL, pc_consumer, NULL), 0);
    wait_flag(&pc_waiting, 1);
    CHECK_EQ(pthread_mutex_lock(&pc_m), 0); /* the consumer released it: it is in its wait */
    CHECK_ENG(&pc_m, w_eng);
    long bad = 0;
    for (long i = 1; i <= PC_ITEMS; i++) {
        if (i > 1)
            bad += pthread_mutex_lock(&pc_m) != 0;
        while (pc_full)
            bad += pthread_cond_wait(&pc_notfull, &pc_m) != 0;
        pc_slot = i;
        pc_full = 1;
        pthread_cond_signal(&pc_notempty);
        bad += pthread_mutex_unlock(&pc_m) != 0;
    }
    CHECK_EQ(pthread_join(c, NULL), 0);
    CHECK_EQ(bad, 0);
    CHECK_EQ(pc_bad, 0);
    CHECK_EQ(pc_sum, (long)PC_ITEMS * (PC_ITEMS + 1) / 2);
    CHECK_ENG(&pc_m, w_eng);
    CHECK_EQ(pthread_mutex_destroy(&pc_m), 0);
}

/* ---------------------------------------------------------------- execute */
static volatile long ex_counter;
static atomic_int ex_inside;
static atomic_long ex_overlaps;

static void *ex_cs(void *arg)
{
    if (atomic_fetch_add(&ex_inside, 1) != 0)
        atomic_fetch_add(&ex_overlaps, 1);
    long v = ex_counter;
    __asm__ volatile("" ::: "memory");
    ex_counter = v + 1;
    atomic_fetch_sub(&ex_inside, 1);
    return arg;
}

struct exec_arg {
    pthread_mutex_t *m;
    int n, by_lock;
    atomic_int tid, announced;
    long bad;
};

static void *ex_thread(void *arg)
{
    struct exec_arg *a = arg;
    atomic_store(&a->tid, (int)gettid());
    atomic_store(&a->announced, 1);
    for (int i = 0; i < a->n; i++) {
        if (a->by_lock) {
            if (pthread_mutex_lock(a->m) != 0) {
                a->bad++;
                continue;
            }
            ex_cs(NULL);
            a->bad += pthread_mutex_unlock(a->m) != 0;
        } else {
            a->bad += exec_fn(a->m, ex_cs, a) != a;
        }
    }
    return NULL;
}

static void sec_execute(void)
{
    th_context = "execute engages";
    pthread_mutex_t m;
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ex_counter = 0;
    CHECK(exec_fn(&m, ex_cs, &m) == &m, "execute did not return the section's result");
    CHECK_EQ(ex_counter, 1);
    CHECK_ENG(&m, delegating ? w_eng : w_lazy); /* a delegated section engages; lock, cs, unlock does not */
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "execute on a mutex held lazily";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    ex_counter = 0;
    struct exec_arg a = {.m = &m, .n = 1};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, ex_thread, &a), 0);
    wait_flag(&a.announced, 1);
    wait_blocked(&m, atomic_load(&a.tid));
    CHECK_EQ(ex_counter, 0); /* m is held: the section has not run */
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK_EQ(a.bad, 0);
    CHECK_EQ(ex_counter, 1);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "execute and lock exclude each other";
    mk(&m, -1);
    ex_counter = 0;
    int n = scale(2000);
    struct exec_arg ea = {.m = &m, .n = n}, la = {.m = &m, .n = n, .by_lock = 1};
    pthread_t t1, t2;
    CHECK_EQ(pthread_create(&t1, NULL, ex_thread, &ea), 0);
    CHECK_EQ(pthread_create(&t2, NULL, ex_thread, &la), 0);
    CHECK_EQ(pthread_join(t1, NULL), 0);
    CHECK_EQ(pthread_join(t2, NULL), 0);
    CHECK_EQ(ea.bad, 0);
    CHECK_EQ(la.bad, 0);
    CHECK_EQ(atomic_load(&ex_overlaps), 0);
    CHECK_EQ(ex_counter, 2L * n);
    if (delegating || !eng_fn)
        CHECK_ENG(&m, w_eng);
    else /* lock, cs, unlock: engaged only if the two threads happened to contend */
        CHECK(eng_fn(&m) == w_lazy || eng_fn(&m) == w_eng, "engaged() = %ld", eng_fn(&m));
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
}

/* ------------------------------------------------------------------ main */
static const struct lz_section sections[] = {
    {"cond", sec_cond},
    {"execute", sec_execute},
    {NULL, NULL},
};

int main(int argc, char **argv) { return lz_main(argc, argv, "test_lazy_cond_execute", sections); }
