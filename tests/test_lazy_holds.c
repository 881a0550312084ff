/*
 * test_lazy_holds - a lazy hold beyond its holder's own lock and unlock
 * (docs/interpose.md, "Lazy engagement"): a lazily held mutex unlocked by
 * another thread, left held by a thread that exited, engaged by a
 * contender while held lazily, destroyed and initialised again, and
 * inherited by a forked child.
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
 *  foreign    unlock by another thread of a lazily held mutex (0, then
 *             free, still lazy); a lazy holder that exited (trylock EBUSY,
 *             unlock 0); a mutex held lazily that a contender engages,
 *             released by the lazy holder's own unlock, by a third thread,
 *             and after the lazy holder exited: the contender gets it.
 *  destroy    destroy of a lazily held mutex is EBUSY and leaves it held;
 *             after unlock 0; re-init after destroy is lazy again, also
 *             after an engaged life.
 *  fork       from a thread holding m1 (lazy) and m3 (engaged) while
 *             another thread holds m2 lazily: in the child trylock m1 and
 *             m3 EBUSY, unlock 0, trylock 0; trylock m2 EBUSY (m2 lazy:
 *             it stays locked, as on glibc).
 */
#include "lazy_driver.h"

/* ---------------------------------------------------------------- foreign */
static void sec_foreign(void)
{
    pthread_mutex_t m;
    mk(&m, -1);
    th_context = "lazy, unlocked by another thread";
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    long hm = held();
    CHECK_EQ(in_thread(&m, OP_UNLOCK), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), 0); /* free */
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    (void)hm;

    th_context = "lazy, holder exited";
    CHECK_EQ(in_thread(&m, OP_LOCK_EXIT), 0);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_trylock(&m), 0);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    /* engaged while held lazily; released three ways */
    for (int how = 0; how < 3; how++) {
        static const char *const what[] = {"engaged while held, the lazy holder unlocks",
                                           "engaged while held, a third thread unlocks",
                                           "engaged while held, the lazy holder exited"};
        th_context = what[how];
        pthread_mutex_t mm;
        mk(&mm, -1);
        struct holder h;
        pthread_t ht, ct;
        holder_start(&h, &ht, &mm, how == 1, how == 2);
        CHECK_EQ(h.eng_locked, eng_fn ? w_lazy : -2);
        if (how == 2)
            CHECK_EQ(pthread_join(ht, NULL), 0);
        struct contender c;
        contender_start(&c, &ct, &mm);
        CHECK_ENG(&mm, w_eng);
        CHECK_EQ(pthread_mutex_trylock(&mm), EBUSY);
        if (how == 0) {
            atomic_store(&h.go, 1);
            CHECK_EQ(pthread_join(ht, NULL), 0);
            CHECK_EQ(h.unlock_r, 0);
            if (tracked) {
                CHECK(h.held_locked >= 1, "lazy holder's held count: %ld", h.held_locked);
                CHECK_EQ(h.held_after, h.held_locked - 1);
            }
        } else {
            CHECK_EQ(pthread_mutex_unlock(&mm), 0);
        }
        contender_join(&c, ct);
        if (how == 1) {
            atomic_store(&h.go, 1);
            CHECK_EQ(pthread_join(ht, NULL), 0);
        }
        CHECK_ENG(&mm, w_eng);
        CHECK_EQ(pthread_mutex_trylock(&mm), 0);
        CHECK_EQ(in_thread(&mm, OP_TRYLOCK), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(&mm), 0);
        CHECK_EQ(in_thread(&mm, OP_TRYLOCK), 0);
        CHECK_EQ(pthread_mutex_destroy(&mm), 0);
    }
}

/* ---------------------------------------------------------------- destroy */
static pthread_mutex_t ds_static = PTHREAD_MUTEX_INITIALIZER; /* a static mutex given an engaged life */

static void engage_by_wait(pthread_mutex_t *m)
{
    pthread_cond_t cv;
    CHECK_EQ(pthread_cond_init(&cv, NULL), 0);
    CHECK_EQ(pthread_mutex_lock(m), 0);
    struct timespec t;
    ts_after(CLOCK_REALTIME, &t, 1);
    int r = pthread_cond_timedwait(&cv, m, &t);
    CHECK(r == ETIMEDOUT || r == 0, "timedwait: %d", r);
    CHECK_EQ(pthread_mutex_unlock(m), 0);
    CHECK_EQ(pthread_cond_destroy(&cv), 0);
    CHECK_ENG(m, w_eng);
}

static void sec_destroy(void)
{
    th_context = "destroy of a lazily held mutex";
    pthread_mutex_t m;
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), EBUSY);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_trylock(&m), EBUSY); /* still held */
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), EBUSY);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(in_thread(&m, OP_TRYLOCK), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "re-init after destroy";
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    engage_by_wait(&m);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), EBUSY); /* engaged and held */
    CHECK_ENG(&m, w_eng);
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);
    mk(&m, -1);
    CHECK_EQ(pthread_mutex_lock(&m), 0);
    CHECK_ENG(&m, w_lazy); /* lazy again */
    CHECK_EQ(pthread_mutex_unlock(&m), 0);
    CHECK_EQ(pthread_mutex_destroy(&m), 0);

    th_context = "re-init of a static mutex after an engaged life";
    pthread_mutex_t *s = &ds_static;
    engage_by_wait(s);
    CHECK_EQ(pthread_mutex_destroy(s), 0);
    mk(s, -1);
    CHECK_EQ(pthread_mutex_lock(s), 0);
    CHECK_ENG(s, w_lazy);
    CHECK_EQ(pthread_mutex_unlock(s), 0);

    th_context = "destroy of a never-used zeroed mutex";
    pthread_mutex_t z = PTHREAD_MUTEX_INITIALIZER;
    CHECK_EQ(pthread_mutex_destroy(&z), 0);
}

/* ---------------------------------------------------------------- fork */
static pthread_mutex_t fk_self, fk_other, fk_eng;
static int fk_rc = -1;

static void *forker(void *arg)
{
    (void)arg;
    CHECK_EQ(pthread_mutex_lock(&fk_self), 0);
    CHECK_EQ(pthread_mutex_lock(&fk_eng), 0);
    long e_self = eng(&fk_self), e_other = eng(&fk_other), e_eng = eng(&fk_eng);
    if (eng_fn) {
        CHECK_EQ(e_self, w_lazy);
        CHECK_EQ(e_other, w_lazy);
        CHECK_EQ(e_eng, w_eng);
    }
    /* lazily held by another thread: stays locked in the child (glibc's
     * behaviour too); an engaged one may be made free there (docs) */
    int other_locked = !interposed || e_other == 0;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(20);
        int f0 = th_failures;
        th_context = "fork child";
        CHECK_EQ(pthread_mutex_trylock(&fk_self), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_trylock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_lock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
        CHECK_EQ(pthread_mutex_trylock(&fk_eng), EBUSY);
        CHECK_EQ(pthread_mutex_unlock(&fk_eng), 0);
        CHECK_EQ(pthread_mutex_trylock(&fk_eng), 0);
        CHECK_EQ(pthread_mutex_unlock(&fk_eng), 0);
        if (other_locked)
            CHECK_EQ(pthread_mutex_trylock(&fk_other), EBUSY);
        _exit(th_failures != f0 ? 1 : 0);
    }
    CHECK(pid > 0, "fork: %s", strerror(errno));
    if (pid > 0)
        fk_rc = th_wait_child(pid, 30, "fork child");
    CHECK_EQ(pthread_mutex_unlock(&fk_eng), 0);
    CHECK_EQ(pthread_mutex_unlock(&fk_self), 0);
    return NULL;
}

static void sec_fork(void)
{
    th_context = "fork";
    mk(&fk_self, -1);
    mk(&fk_other, -1);
    mk(&fk_eng, -1);
    engage_by_wait(&fk_eng);
    struct holder h;
    pthread_t ht, ft;
    holder_start(&h, &ht, &fk_other, 0, 0);
    CHECK_EQ(pthread_create(&ft, NULL, forker, NULL), 0);
    CHECK_EQ(pthread_join(ft, NULL), 0);
    th_context = "fork";
    CHECK_EQ(fk_rc, 0);
    atomic_store(&h.go, 1);
    CHECK_EQ(pthread_join(ht, NULL), 0);
    CHECK_EQ(h.unlock_r, 0);
    CHECK_EQ(pthread_mutex_trylock(&fk_other), 0);
    CHECK_EQ(pthread_mutex_unlock(&fk_other), 0);
    CHECK_EQ(pthread_mutex_destroy(&fk_self), 0);
    CHECK_EQ(pthread_mutex_destroy(&fk_other), 0);
    CHECK_EQ(pthread_mutex_destroy(&fk_eng), 0);
}

/* ------------------------------------------------------------------ main */
static const struct lz_section sections[] = {
    {"foreign", sec_foreign},
    {"destroy", sec_destroy},
    {"fork", sec_fork},
    {NULL, NULL},
};

int main(int argc, char **argv) { return lz_main(argc, argv, "test_lazy_holds", sections); }
