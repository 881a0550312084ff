/*
 * test_fairness - the admission-history instrumentation (docs/fairness.md).
 *
 * Known admission sequences are driven through the real API path: real
 * threads take turns in a scripted order (thread seq[p] takes and releases
 * the lock at step p, the others wait for their turn), and the library's
 * metrics are compared with closed forms (round robin, one thread) and with
 * a naive reference computed from the whole script (O(n^2) Gini, sorted
 * TTR list, per-window sets).  Also: off by default, bad input, thread-id
 * reuse, trylock/execute/condition-wait admissions, reset, a concurrent
 * reader, and every registered algorithm.
 */
#include "harness.h"
#include "../src/core/fairness.h"

#include <math.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>

#define MAXT 16

/* ---- naive reference --------------------------------------------------- */
struct ref {
    double avg_lwss, mttr, gini, rstddev;
    uint64_t windows, threads, minc, maxc;
};

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void reference(const int *seq, size_t n, size_t W, struct ref *r)
{
    uint64_t count[MAXT] = {0};
    long last[MAXT];
    for (int i = 0; i < MAXT; i++)
        last[i] = -1;
    uint64_t *ttr = malloc((n + 1) * sizeof *ttr);
    size_t nt = 0;
    double lw = 0;
    r->windows = 0;
    for (size_t w = 0; (w + 1) * W <= n; w++) {
        int seen[MAXT] = {0}, d = 0;
        for (size_t p = w * W; p < (w + 1) * W; p++)
            if (!seen[seq[p]]++)
                d++;
        lw += d;
        r->windows++;
    }
    if (r->windows)
        r->avg_lwss = lw / (double)r->windows;
    else {
        int seen[MAXT] = {0}, d = 0;
        for (size_t p = 0; p < n; p++)
            if (!seen[seq[p]]++)
                d++;
        r->avg_lwss = d;
    }
    for (size_t p = 0; p < n; p++) {
        int t = seq[p];
        if (last[t] >= 0)
            ttr[nt++] = p - (size_t)last[t] - 1;
        last[t] = (long)p;
        count[t]++;
    }
    qsort(ttr, nt, sizeof *ttr, cmp_u64);
    r->mttr = nt ? (ttr[(nt - 1) / 2] + ttr[nt / 2]) / 2.0 : -1;
    free(ttr);
    uint64_t x[MAXT];
    size_t k = 0;
    for (int i = 0; i < MAXT; i++)
        if (count[i])
            x[k++] = count[i];
    r->threads = k;
    double mean = 0, diff = 0, ss = 0;
    for (size_t i = 0; i < k; i++)
        mean += (double)x[i];
    mean /= (double)k;
    for (size_t i = 0; i < k; i++) {
        for (size_t j = 0; j < k; j++)
            diff += fabs((double)x[i] - (double)x[j]);
        ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    }
    r->gini = diff / (2.0 * (double)k * (double)k * mean);
    r->rstddev = sqrt(ss / (double)k) / mean;
    qsort(x, k, sizeof *x, cmp_u64);
    r->minc = x[0];
    r->maxc = x[k - 1];
}

/* ---- scripted driver ------------------------------------------------------ */
/* Turns are handed over through one semaphore per actor, so a step costs
 * one wake-up even when the machine is busy. */
struct script {
    liblock_t *l;
    const int *seq;
    size_t n;
    size_t pos; /* advanced by the actor whose turn it is */
    int how;    /* 0 lock, 1 trylock (retry), 2 execute */
    int nthreads;
    sem_t turn[MAXT];
};
struct actor {
    struct script *s;
    int me;
};

static void *noop_cs(void *a) { return a; }

static void *actor_main(void *p)
{
    struct actor *a = p;
    struct script *s = a->s;
    for (;;) {
        while (sem_wait(&s->turn[a->me]) != 0)
            ;
        size_t pos = s->pos;
        if (pos >= s->n)
            break;
        if (s->how == 0) {
            liblock_lock(s->l);
            liblock_unlock(s->l);
        } else if (s->how == 1) {
            while (liblock_trylock(s->l) != 0)
                ;
            liblock_unlock(s->l);
        } else {
            liblock_execute(s->l, noop_cs, NULL);
        }
        s->pos = pos + 1;
        if (pos + 1 < s->n)
            sem_post(&s->turn[s->seq[pos + 1]]);
        else
            for (int i = 0; i < s->nthreads; i++) /* done: release everybody */
                sem_post(&s->turn[i]);
    }
    return NULL;
}

static void drive(liblock_t *l, const int *seq, size_t n, int nthreads, int how)
{
    static struct script s;
    s.l = l, s.seq = seq, s.n = n, s.how = how, s.pos = 0, s.nthreads = nthreads;
    for (int i = 0; i < nthreads; i++)
        sem_init(&s.turn[i], 0, 0);
    pthread_t th[MAXT];
    struct actor a[MAXT];
    for (int i = 0; i < nthreads; i++) {
        a[i] = (struct actor){&s, i};
        pthread_create(&th[i], NULL, actor_main, &a[i]);
    }
    sem_post(&s.turn[seq[0]]);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < nthreads; i++)
        sem_destroy(&s.turn[i]);
}

static int close_to(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

static void check_against_reference(const char *what, const char *algo, const int *seq, size_t n, int nthreads,
                                    int how)
{
    th_context = what;
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setfairness(&attr, 1);
    liblock_t l;
    CHECK_EQ(liblock_init(&l, algo, &attr), 0);
    drive(&l, seq, n, nthreads, how);
    liblock_fairness_t f;
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    struct ref r;
    reference(seq, n, (size_t)f.window, &r);
    CHECK_EQ(f.acquisitions, n);
    CHECK_EQ(f.untracked, 0);
    CHECK_EQ(f.threads, r.threads);
    CHECK_EQ(f.windows, r.windows);
    CHECK(close_to(f.avg_lwss, r.avg_lwss), "avg_lwss %g, reference %g", f.avg_lwss, r.avg_lwss);
    CHECK(close_to(f.mttr, r.mttr), "mttr %g, reference %g", f.mttr, r.mttr);
    CHECK(fabs(f.gini - r.gini) < 1e-9, "gini %g, reference %g", f.gini, r.gini);
    CHECK(fabs(f.rstddev - r.rstddev) < 1e-9, "rstddev %g, reference %g", f.rstddev, r.rstddev);
    CHECK_EQ(f.min_count, r.minc);
    CHECK_EQ(f.max_count, r.maxc);
    CHECK_EQ(liblock_destroy(&l), 0);
}

/* ---- individual checks ------------------------------------------------------ */
static void test_off_by_default_and_bad_input(void)
{
    th_context = "off/bad input";
    liblock_t l;
    liblock_fairness_t f;
    CHECK_EQ(liblock_init(&l, "mcs", NULL), 0);
    CHECK(l._stats == NULL, "instrumentation is on without being asked for");
    CHECK_EQ(liblock_fairness(&l, &f), ENOTSUP);
    CHECK_EQ(liblock_fairness_reset(&l), ENOTSUP);
    CHECK_EQ(liblock_fairness(&l, NULL), EINVAL);
    CHECK_EQ(liblock_fairness(NULL, &f), EINVAL);
    CHECK_EQ(liblock_fairness_reset(NULL), EINVAL);
    CHECK_EQ(liblock_destroy(&l), 0);
    CHECK_EQ(liblock_fairness(&l, &f), EINVAL); /* destroyed */

    liblock_attr_t attr;
    int on = 7;
    CHECK_EQ(liblock_attr_setfairness(NULL, 1), EINVAL);
    memset(&attr, 0, sizeof attr);
    CHECK_EQ(liblock_attr_setfairness(&attr, 1), EINVAL); /* not initialised */
    liblock_attr_init(&attr);
    CHECK_EQ(liblock_attr_getfairness(&attr, &on), 0);
    CHECK_EQ(on, 0);
    CHECK_EQ(liblock_attr_setfairness(&attr, 2), EINVAL);
    CHECK_EQ(liblock_attr_setfairness(&attr, -1), EINVAL);
    CHECK_EQ(liblock_attr_getfairness(&attr, &on), 0);
    CHECK_EQ(on, 0); /* failed calls changed nothing */
    CHECK_EQ(liblock_attr_getfairness(&attr, NULL), EINVAL);
    CHECK_EQ(liblock_attr_setfairness(&attr, 1), 0);
    CHECK_EQ(liblock_attr_getfairness(&attr, &on), 0);
    CHECK_EQ(on, 1);
    CHECK_EQ(liblock_init(&l, "mcs", &attr), 0);
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.acquisitions, 0);
    CHECK_EQ(f.threads, 0);
    CHECK(f.mttr == -1, "mttr %g with no sample", f.mttr);
    CHECK_EQ(f.window, 1000);
    CHECK_EQ(liblock_destroy(&l), 0);
}

static void test_one_thread(void)
{
    th_context = "one thread";
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setfairness(&attr, 1);
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "ticket", &attr), 0);
    for (int i = 0; i < 3500; i++) {
        if (i % 3 == 0) {
            CHECK_EQ(liblock_lock(&l), 0);
        } else if (i % 3 == 1) {
            CHECK_EQ(liblock_trylock(&l), 0);
        } else {
            errno = 0;
            CHECK(liblock_execute(&l, noop_cs, &l) == &l, "execute");
            continue;
        }
        CHECK_EQ(liblock_unlock(&l), 0);
    }
    /* failed acquisitions are not admissions */
    CHECK_EQ(liblock_lock(&l), 0);
    CHECK_EQ(liblock_trylock(&l), EBUSY);
    CHECK_EQ(liblock_lock(&l), EDEADLK);
    CHECK_EQ(liblock_unlock(&l), 0);
    liblock_fairness_t f;
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.acquisitions, 3501);
    CHECK_EQ(f.threads, 1);
    CHECK_EQ(f.windows, 3);
    CHECK(f.avg_lwss == 1.0, "avg_lwss %g", f.avg_lwss);
    CHECK(f.mttr == 0.0, "mttr %g", f.mttr);
    CHECK(f.gini == 0.0 && f.rstddev == 0.0, "gini %g rstddev %g", f.gini, f.rstddev);
    CHECK_EQ(f.reacquisitions, 3500);
    /* reset while holding: exact, and the holder's next admission is its first */
    CHECK_EQ(liblock_lock(&l), 0);
    CHECK_EQ(liblock_fairness_reset(&l), 0);
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.acquisitions, 0);
    CHECK_EQ(f.threads, 0);
    CHECK_EQ(liblock_lock(&l), 0);
    CHECK_EQ(liblock_unlock(&l), 0);
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.acquisitions, 1);
    CHECK_EQ(f.reacquisitions, 0);
    /* reset while not holding takes the lock: still exact */
    CHECK_EQ(liblock_fairness_reset(&l), 0);
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.acquisitions, 0);
    CHECK_EQ(liblock_destroy(&l), 0);
}

static void test_round_robin(void)
{
    enum { N = 6, ROUNDS = 100 };
    static int seq[N * ROUNDS];
    for (int i = 0; i < N * ROUNDS; i++)
        seq[i] = i % N;
    for (int how = 0; how < 3; how++) {
        static const char *hows[] = {"round robin lock", "round robin trylock", "round robin execute"};
        check_against_reference(hows[how], how == 1 ? "ttas" : "mcs", seq, N * ROUNDS, N, how);
    }
    /* closed forms */
    th_context = "round robin closed form";
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setfairness(&attr, 1);
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "clh", &attr), 0);
    drive(&l, seq, N * ROUNDS, N, 0);
    liblock_fairness_t f;
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK(f.avg_lwss == N, "LWSS %g, expected %d", f.avg_lwss, N);
    CHECK(f.mttr == N - 1, "MTTR %g, expected %d", f.mttr, N - 1);
    CHECK(f.gini == 0 && f.rstddev == 0, "gini %g rstddev %g", f.gini, f.rstddev);
    CHECK_EQ(f.threads, N);
    CHECK_EQ(f.min_count, ROUNDS);
    CHECK_EQ(f.max_count, ROUNDS);
    CHECK_EQ(liblock_destroy(&l), 0);
}

static void test_skewed_and_random(void)
{
    /* A A B repeated: counts 2:1 -> Gini 1/6, RSTDDEV 1/3, LWSS 2, MTTR 1 */
    enum { R = 250 };
    static int seq[3 * R];
    for (int i = 0; i < 3 * R; i++)
        seq[i] = (i % 3 == 2);
    check_against_reference("AAB", "posix", seq, 3 * R, 2, 0);
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setfairness(&attr, 1);
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "posix", &attr), 0);
    drive(&l, seq, 3 * R, 2, 0);
    liblock_fairness_t f;
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK(fabs(f.gini - 1.0 / 6) < 1e-12, "gini %g", f.gini);
    CHECK(fabs(f.rstddev - 1.0 / 3) < 1e-12, "rstddev %g", f.rstddev);
    CHECK(f.avg_lwss == 2 && f.mttr == 1, "lwss %g mttr %g", f.avg_lwss, f.mttr);
    CHECK_EQ(liblock_destroy(&l), 0);

    /* Bursty random script: runs of one thread, some threads rare. */
    enum { NR = 1200, T = 8 };
    static int rs[NR];
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < NR;) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int t = (int)(x % T);
        if (t >= 6 && (x >> 20) % 4)
            t = (int)((x >> 8) % 3); /* threads 6 and 7 are rare */
        int run = 1 + (int)((x >> 32) % 40);
        for (int k = 0; k < run && i < NR; k++)
            rs[i++] = t;
    }
    check_against_reference("random bursts", "mcs", rs, NR, T, 0);
}

/* A small window (LIBLOCK_FAIRNESS_WINDOW) and partial-window fallback. */
static void test_window(void)
{
    setenv("LIBLOCK_FAIRNESS_WINDOW", "10", 1);
    static int seq[95];
    for (int i = 0; i < 95; i++)
        seq[i] = (i / 10) % 2 ? i % 4 : 0; /* windows alternate 1 and 4 threads */
    check_against_reference("window 10", "mcs", seq, 95, 4, 0);
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setfairness(&attr, 1);
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "mcs", &attr), 0);
    drive(&l, seq, 95, 4, 0);
    liblock_fairness_t f;
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.window, 10);
    CHECK_EQ(f.windows, 9);
    CHECK(close_to(f.avg_lwss, (5 * 1 + 4 * 4) / 9.0), "lwss %g", f.avg_lwss);
    CHECK_EQ(liblock_destroy(&l), 0);
    /* fewer admissions than one window: the partial window's size */
    CHECK_EQ(liblock_init(&l, "mcs", &attr), 0);
    drive(&l, seq + 10, 7, 4, 0); /* threads 2,3,0,1,2,3,0 */
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.windows, 0);
    CHECK(f.avg_lwss == 4, "partial lwss %g", f.avg_lwss);
    CHECK_EQ(liblock_destroy(&l), 0);
    unsetenv("LIBLOCK_FAIRNESS_WINDOW");
}

/* A thread id reused after exit must not merge two threads' counts. */
struct reuse_arg {
    liblock_t *l;
    int n;
    unsigned id;
};
static void *reuse_thread(void *p)
{
    struct reuse_arg *a = p;
    for (int i = 0; i < a->n; i++) {
        liblock_lock(a->l);
        liblock_unlock(a->l);
    }
    a->id = ll_self()->id;
    return NULL;
}

static void test_id_reuse(void)
{
    th_context = "id reuse";
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setfairness(&attr, 1);
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "mcs", &attr), 0);
    int ns[4] = {5, 3, 9, 9};
    unsigned ids[4];
    for (int k = 0; k < 4; k++) {
        struct reuse_arg a = {&l, ns[k], 0};
        pthread_t t;
        pthread_create(&t, NULL, reuse_thread, &a);
        pthread_join(t, NULL);
        ids[k] = a.id;
    }
    CHECK(ids[0] == ids[1] && ids[1] == ids[2], "ids %u %u %u: the test expects reuse", ids[0], ids[1], ids[2]);
    liblock_fairness_t f;
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    CHECK_EQ(f.threads, 4);
    CHECK_EQ(f.acquisitions, 26);
    CHECK_EQ(f.min_count, 3);
    CHECK_EQ(f.max_count, 9);
    uint64_t c[4] = {5, 3, 9, 9};
    CHECK(close_to(f.gini, ll_fairness_gini(c, 4)), "gini %g vs %g", f.gini, ll_fairness_gini(c, 4));
    CHECK_EQ(f.reacquisitions, 26 - 4); /* each thread's first admission has no TTR */
    CHECK(f.mttr == 0, "mttr %g", f.mttr);
    CHECK_EQ(liblock_destroy(&l), 0);
}

/* Condition-wait reacquisitions are admissions. */
struct cv_arg {
    liblock_t *l;
    liblock_cond_t *c;
    int *flag;
};
static void *cv_waiter(void *p)
{
    struct cv_arg *a = p;
    liblock_lock(a->l);
    while (!*a->flag)
        liblock_cond_wait(a->c, a->l);
    liblock_unlock(a->l);
    return NULL;
}

static void test_cond(void)
{
    th_context = "cond";
    liblock_attr_t attr;
    liblock_attr_init(&attr);
    liblock_attr_setfairness(&attr, 1);
    liblock_t l;
    liblock_cond_t c;
    int flag = 0;
    CHECK_EQ(liblock_init(&l, "mcs", &attr), 0);
    CHECK_EQ(liblock_cond_init(&c, NULL), 0);
    struct cv_arg a = {&l, &c, &flag};
    pthread_t t;
    pthread_create(&t, NULL, cv_waiter, &a);
    liblock_fairness_t f;
    for (;;) { /* wait until the waiter has been admitted once */
        liblock_fairness(&l, &f);
        if (f.acquisitions >= 1)
            break;
        sched_yield();
    }
    usleep(20000);
    liblock_lock(&l);
    flag = 1;
    liblock_cond_signal(&c);
    liblock_unlock(&l);
    pthread_join(t, NULL);
    CHECK_EQ(liblock_fairness(&l, &f), 0);
    /* waiter: first lock + >= 1 reacquisition; main: 1 */
    CHECK(f.acquisitions >= 3, "acquisitions %llu", (unsigned long long)f.acquisitions);
    CHECK_EQ(f.threads, 2);
    liblock_cond_destroy(&c);
    CHECK_EQ(liblock_destroy(&l), 0);
}

/* Every registered algorithm: the counts add up under contention, and a
 * reader running concurrently sees sane values. */
struct hammer {
    liblock_t *l;
    int n;
};
static void *hammer_thread(void *p)
{
    struct hammer *h = p;
    for (int i = 0; i < h->n; i++) {
        if (i % 2) {
            liblock_lock(h->l);
            liblock_unlock(h->l);
        } else {
            liblock_execute(h->l, noop_cs, NULL);
        }
    }
    return NULL;
}

static void test_every_algorithm(int argc, char **argv)
{
    int n = th_scale_small() ? 300 : 1000;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        th_context = *a;
        liblock_attr_t attr;
        liblock_attr_init(&attr);
        liblock_attr_setfairness(&attr, 1);
        liblock_t l;
        int r = liblock_init(&l, *a, &attr);
        CHECK(r == 0, "init: %s", strerror(r));
        if (r)
            continue;
        enum { T = 4 };
        pthread_t th[T];
        struct hammer h = {&l, n};
        for (int i = 0; i < T; i++)
            pthread_create(&th[i], NULL, hammer_thread, &h);
        liblock_fairness_t f;
        for (int k = 0; k < 50; k++) {
            CHECK_EQ(liblock_fairness(&l, &f), 0);
            CHECK(f.acquisitions <= (uint64_t)T * n && f.threads <= T, "snapshot out of range");
            CHECK(f.gini >= 0 && f.gini < 1 && f.rstddev >= 0, "gini %g rstddev %g", f.gini, f.rstddev);
            sched_yield();
        }
        for (int i = 0; i < T; i++)
            pthread_join(th[i], NULL);
        CHECK_EQ(liblock_fairness(&l, &f), 0);
        CHECK_EQ(f.acquisitions, (uint64_t)T * n);
        CHECK_EQ(f.threads, T);
        CHECK_EQ(f.min_count, n);
        CHECK_EQ(f.max_count, n);
        CHECK(f.gini == 0 && f.rstddev == 0, "gini %g rstddev %g", f.gini, f.rstddev);
        CHECK(f.avg_lwss >= 1 && f.avg_lwss <= T, "lwss %g", f.avg_lwss);
        CHECK_EQ(liblock_destroy(&l), 0);
    }
}

static void test_pure_metrics(void)
{
    th_context = "pure metrics";
    uint64_t one[1] = {42}, eq[3] = {7, 7, 7}, mono[4] = {0, 0, 0, 100}, two[2] = {1, 3};
    CHECK(ll_fairness_gini(NULL, 0) == 0, "empty");
    CHECK(ll_fairness_gini(one, 1) == 0, "one");
    CHECK(ll_fairness_gini(eq, 3) == 0, "equal");
    CHECK(close_to(ll_fairness_gini(mono, 4), 0.75), "monopoly %g", ll_fairness_gini(mono, 4)); /* (n-1)/n */
    CHECK(close_to(ll_fairness_gini(two, 2), 0.25), "two %g", ll_fairness_gini(two, 2));
    CHECK(close_to(ll_fairness_rstddev(two, 2), 0.5), "rstddev two %g", ll_fairness_rstddev(two, 2));
    CHECK(close_to(ll_fairness_rstddev(mono, 4), sqrt(3.0)), "rstddev monopoly %g", ll_fairness_rstddev(mono, 4));
}

/* LIBLOCK_FAIRNESS=1 turns it on for locks initialised without attr: run
 * ourselves again with the variable set (the value is read once). */
static void test_env(char *self)
{
    th_context = "env";
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "LIBLOCK_FAIRNESS=1 %s --env-child", self);
    int rc = system(cmd);
    CHECK(rc == 0, "child with LIBLOCK_FAIRNESS=1 exited %d", rc);
}

static int env_child(void)
{
    liblock_t l;
    liblock_fairness_t f;
    if (liblock_init(&l, "spin", NULL))
        return 10;
    liblock_lock(&l);
    liblock_unlock(&l);
    int r = liblock_fairness(&l, &f);
    liblock_destroy(&l);
    return r == 0 && f.acquisitions == 1 ? 0 : 11;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--env-child") == 0)
        return env_child();
    unsetenv("LIBLOCK_FAIRNESS");
    unsetenv("LIBLOCK_FAIRNESS_WINDOW");
    th_watchdog(60);
    test_pure_metrics();
    test_off_by_default_and_bad_input();
    test_one_thread();
    setenv("LIBLOCK_FAIRNESS_WINDOW", "100", 1); /* shorter scripts, same code */
    test_round_robin();
    test_skewed_and_random();
    unsetenv("LIBLOCK_FAIRNESS_WINDOW");
    test_window();
    test_id_reuse();
    test_cond();
    test_every_algorithm(argc, argv);
    test_env(argv[0]);
    return th_report("test_fairness");
}
