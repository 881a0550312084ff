/*
 * test_auto - the auto lock (src/locks/adaptive/auto.c): its switch
 * protocol never loses exclusion, and its decision follows its rule.
 *
 *  switching  LIBLOCK_AUTO_SWITCH_EVERY=64: the lock moves to another
 *             candidate every 64 estimated acquisitions, along a tour of
 *             every ordered pair of ttas, mcs, mcscr and loiter (the
 *             log, LIBLOCK_AUTO_LOG, shows all 12), with 8 threads (more than the
 *             CPUs) doing lock/unlock, trylock, nested locks (the auto lock
 *             inside another auto lock, and hand-over-hand between two),
 *             and condition waits (timed and untimed, with signal and
 *             broadcast) in flight: every counter protected by a lock is
 *             exact, no two critical sections of one lock overlap (a flag
 *             each sets and clears), the lock switched (the stats say how
 *             often), destroy answers 0 at the end.  Each waiting policy
 *             auto offers.
 *  rule       one thread, no contention: the lock stays on ttas over 5000
 *             acquisitions (contended share 0 < LIBLOCK_AUTO_LOW);
 *             LIBLOCK_AUTO_HIGH=0 and LIBLOCK_AUTO_UNDER=mcs (so any share
 *             is "high" and the choice with no more threads than CPUs is
 *             mcs) with LIBLOCK_AUTO_LOW=0: it moves to mcs after two
 *             windows, and LIBLOCK_AUTO_LOG has the line with its reason; a
 *             lock started on mcs (LIBLOCK_AUTO_START) with the default
 *             thresholds moves back to ttas (share 0 < 0.05), logged too.
 *  cond rule  with more threads than CPUs (helpers that used liblock once)
 *             and every window "contended" (LOW = HIGH = 0): a lock whose
 *             acquisitions include retakes after a condition wait (timed
 *             waits due at once) moves to LIBLOCK_AUTO_OVER_COND (mcscr
 *             here), the same lock without waits to LIBLOCK_AUTO_OVER
 *             (mcs), and with LIBLOCK_AUTO_COND=1 the waits are ignored.
 * Under ThreadSanitizer (TSAN_TESTS) at a smaller scale.  No timing is
 * asserted; the watchdog bounds a deadlock.
 */
#include "harness.h"
#include "internal.h"

static liblock_t A, B;
static liblock_cond_t cv;
static long ca, cb, both, items;
static long produced, consumed;
static int per_thread;
static _Atomic int tried_ok;

static pthread_barrier_t start_bar;
static _Atomic int in_a, in_b;
static _Atomic long overlaps;

/* a critical section of A or B: nobody else may be inside (a few pauses
 * long, so that an overlap has room to show) */
static void inside(_Atomic int *in)
{
    if (atomic_exchange(in, 1) != 0)
        atomic_fetch_add(&overlaps, 1);
    for (int k = 0; k < 20; k++)
        ll_pause();
    atomic_store(in, 0);
}

/* The workers' checks: the harness's counters are the main thread's, so
 * a worker counts its failures in `bad` (checked by the main thread after
 * the join) and says what failed. */
static _Atomic long bad;
#define OKIF(c)                                                                             \
    do {                                                                                    \
        if (!(c)) {                                                                         \
            atomic_fetch_add(&bad, 1);                                                      \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c);                   \
        }                                                                                   \
    } while (0)
#define OK0(e) OKIF((e) == 0)

static void *worker(void *arg)
{
    long id = (long)arg;
    pthread_barrier_wait(&start_bar);
    for (int i = 0; i < per_thread; i++) {
        switch ((i + id) % 6) {
        case 0:
        case 1:
            OK0(liblock_lock(&A));
            ca++;
            inside(&in_a);
            OK0(liblock_unlock(&A));
            break;
        case 2:
            if (liblock_trylock(&A) == 0) {
                ca++;
                inside(&in_a);
            inside(&in_a);
                atomic_fetch_add(&tried_ok, 1);
                OK0(liblock_unlock(&A));
            } else {
                OK0(liblock_lock(&A));
                ca++;
                inside(&in_a);
            inside(&in_a);
                OK0(liblock_unlock(&A));
            }
            break;
        case 3: /* nested */
            OK0(liblock_lock(&A));
            OK0(liblock_lock(&B));
            both++;
            inside(&in_b);
            OK0(liblock_unlock(&B));
            OK0(liblock_unlock(&A));
            break;
        case 4: /* hand-over-hand */
            OK0(liblock_lock(&A));
            ca++;
            inside(&in_a);
            OK0(liblock_lock(&B));
            OK0(liblock_unlock(&A));
            cb++;
            inside(&in_b);
            OK0(liblock_unlock(&B));
            break;
        default: /* producer/consumer on A with a condition */
            OK0(liblock_lock(&A));
            if (id & 1) {
                items++;
                produced++;
                OK0(liblock_cond_signal(&cv));
            } else {
                while (items == 0) {
                    if (i & 1) {
                        struct timespec ts;
                        clock_gettime(CLOCK_REALTIME, &ts);
                        ts.tv_nsec += 2000000;
                        if (ts.tv_nsec >= 1000000000) {
                            ts.tv_sec++;
                            ts.tv_nsec -= 1000000000;
                        }
                        int r = liblock_cond_timedwait(&cv, &A, &ts);
                        OKIF(r == 0 || r == ETIMEDOUT);
                        if (r == ETIMEDOUT && items == 0)
                            break; /* give up this one: nothing consumed */
                    } else {
                        /* untimed only while a producer is sure to come:
                         * producers outnumber nothing here, so bounded by
                         * a broadcast from the end of the run */
                        int r = liblock_cond_timedwait(&cv, &A, &(struct timespec){time(NULL) + 5, 0});
                        OKIF(r == 0 || r == ETIMEDOUT);
                        if (r == ETIMEDOUT && items == 0)
                            break;
                    }
                }
                if (items > 0) {
                    items--;
                    consumed++;
                }
            }
            ca++;
            inside(&in_a);
            OK0(liblock_unlock(&A));
            break;
        }
    }
    return NULL;
}

static long expect_ca, expect_cb, expect_both, expect_try;

static void expected(int threads)
{
    expect_ca = expect_cb = expect_both = expect_try = 0;
    for (long id = 0; id < threads; id++)
        for (int i = 0; i < per_thread; i++) {
            int k = (int)((i + id) % 6);
            expect_ca += k == 0 || k == 1 || k == 2 || k == 4 || k == 5;
            expect_cb += k == 4;
            expect_both += k == 3;
            expect_try += k == 2;
        }
}

static int64_t stat_of(const liblock_t *l, const char *name)
{
    struct ll_stats st;
    int64_t v = -1;
    if (ll_lock_stats(l, &st) == 0)
        ll_stats_get(&st, name, &v);
    return v;
}

static void switching(int policy)
{
    setenv("LIBLOCK_AUTO_SWITCH_EVERY", "64", 1);
    char log[] = "/tmp/test_auto_switches_XXXXXX";
    int fd = mkstemp(log);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    setenv("LIBLOCK_AUTO_LOG", log, 1);
    liblock_attr_t at;
    liblock_attr_init(&at);
    liblock_attr_setwait(&at, policy);
    CHECK_EQ(liblock_init(&A, "auto", &at), 0);
    CHECK_EQ(liblock_init(&B, "auto", &at), 0);
    liblock_attr_destroy(&at);
    CHECK_EQ(liblock_cond_init(&cv, NULL), 0);
    unsetenv("LIBLOCK_AUTO_SWITCH_EVERY");
    ca = cb = both = items = produced = consumed = 0;
    atomic_store(&tried_ok, 0);
    int threads = 8;
    per_thread = th_under_tsan() ? 4000 : th_scale_small() ? 10000 : 40000;
    pthread_barrier_init(&start_bar, NULL, (unsigned)threads);
    pthread_t t[8];
    for (long i = 0; i < threads; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < threads; i++)
        CHECK_EQ(pthread_join(t[i], NULL), 0);
    pthread_barrier_destroy(&start_bar);
    expected(threads);
    CHECK_EQ(ca, expect_ca);
    CHECK_EQ(cb, expect_cb);
    CHECK_EQ(both, expect_both);
    CHECK_EQ(produced - consumed, items);
    CHECK_EQ(atomic_load(&overlaps), 0l);
    CHECK_EQ(atomic_load(&bad), 0l);
    int64_t sw = stat_of(&A, "switches"), swb = stat_of(&B, "switches");
    printf("  %s: A switched %lld times, B %lld; %d of %ld trylocks succeeded; %ld produced, %ld consumed\n",
           liblock_wait_name(policy), (long long)sw, (long long)swb, atomic_load(&tried_ok), expect_try,
           produced, consumed);
    CHECK(sw >= 3, "A switched only %lld times", (long long)sw);
    CHECK(swb >= 1, "B never switched");
    unsetenv("LIBLOCK_AUTO_LOG");
    /* the forced switches went through every ordered pair of candidates */
    static const char *const names[] = {"ttas", "mcs", "mcscr", "loiter"};
    int seen[4][4] = {{0}}, pairs = 0;
    FILE *f = fopen(log, "r");
    char line[400];
    while (f && fgets(line, sizeof line, f)) {
        char from[16], to[16];
        const char *p = strstr(line, "lock 0x");
        if (p && (p = strchr(p + 5, ' ')) && sscanf(p, " %15s -> %15[^:]", from, to) == 2)
            for (int x = 0; x < 4; x++)
                for (int y = 0; y < 4; y++)
                    if (strcmp(from, names[x]) == 0 && strcmp(to, names[y]) == 0 && !seen[x][y]++)
                        pairs++;
    }
    if (f)
        fclose(f);
    unlink(log);
    CHECK(pairs == 12, "the switches covered %d of the 12 ordered pairs of candidates", pairs);
    CHECK_EQ(liblock_cond_destroy(&cv), 0);
    CHECK_EQ(liblock_destroy(&A), 0);
    CHECK_EQ(liblock_destroy(&B), 0);
}

static void rule(void)
{
    th_context = "rule";
    liblock_t l;
    CHECK_EQ(liblock_init(&l, "auto", NULL), 0);
    int p = -1;
    CHECK_EQ(liblock_getwait(&l, &p), 0);
    CHECK_EQ(p, LIBLOCK_WAIT_SPIN_THEN_PARK);
    for (int i = 0; i < 5000; i++) {
        CHECK_EQ(liblock_lock(&l), 0);
        CHECK_EQ(liblock_unlock(&l), 0);
    }
    CHECK_EQ(stat_of(&l, "mode"), 0);
    CHECK_EQ(stat_of(&l, "switches"), 0);
    CHECK(stat_of(&l, "windows") >= 4, "windows %lld", (long long)stat_of(&l, "windows"));
    CHECK_EQ(liblock_destroy(&l), 0);

    char log[] = "/tmp/test_auto_log_XXXXXX";
    int fd = mkstemp(log);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    setenv("LIBLOCK_AUTO_LOG", log, 1);
    setenv("LIBLOCK_AUTO_LOW", "0", 1);
    setenv("LIBLOCK_AUTO_HIGH", "0", 1);
    setenv("LIBLOCK_AUTO_UNDER", "mcs", 1);
    setenv("LIBLOCK_AUTO_OVER", "mcs", 1);
    CHECK_EQ(liblock_init(&l, "auto", NULL), 0);
    for (int i = 0; i < 3000; i++) {
        CHECK_EQ(liblock_lock(&l), 0);
        CHECK_EQ(liblock_unlock(&l), 0);
    }
    CHECK_EQ(stat_of(&l, "mode"), 1); /* mcs */
    CHECK_EQ(stat_of(&l, "switches"), 1);
    CHECK_EQ(liblock_destroy(&l), 0);
    /* back: a lock started on mcs, uncontended (share 0 < LOW 0.05) */
    unsetenv("LIBLOCK_AUTO_LOW");
    unsetenv("LIBLOCK_AUTO_HIGH");
    setenv("LIBLOCK_AUTO_START", "mcs", 1);
    CHECK_EQ(liblock_init(&l, "auto", NULL), 0);
    CHECK_EQ(stat_of(&l, "mode"), 1);
    for (int i = 0; i < 3000; i++) {
        CHECK_EQ(liblock_lock(&l), 0);
        CHECK_EQ(liblock_unlock(&l), 0);
    }
    CHECK_EQ(stat_of(&l, "mode"), 0); /* ttas */
    CHECK_EQ(stat_of(&l, "switches"), 1);
    CHECK_EQ(liblock_destroy(&l), 0);
    unsetenv("LIBLOCK_AUTO_START");
    unsetenv("LIBLOCK_AUTO_UNDER");
    unsetenv("LIBLOCK_AUTO_OVER");
    unsetenv("LIBLOCK_AUTO_LOG");
    FILE *f = fopen(log, "r");
    char line[400] = "";
    int lines = 0, found = 0;
    while (f && fgets(line, sizeof line, f)) {
        lines++;
        found |= strstr(line, "ttas -> mcs: contended share 0.00, after a condition wait 0.000, in 2 windows") != NULL;
    }
    if (f)
        fclose(f);
    unlink(log);
    CHECK_EQ(lines, 2);
    CHECK(found, "the log line: %s", line);
}

/* More threads than CPUs (each has used liblock once: the count auto reads)
 * and a lock whose acquisitions include retakes after a condition wait go
 * to LIBLOCK_AUTO_OVER_COND; the same lock without condition waits to
 * LIBLOCK_AUTO_OVER.  LOW = HIGH = 0 make every window "contended". */
static pthread_barrier_t cr_bar;
static void *cr_helper(void *a)
{
    liblock_t *d = a;
    liblock_lock(d);
    liblock_unlock(d);
    pthread_barrier_wait(&cr_bar);
    return NULL;
}

static int64_t cond_rule_mode(int waits)
{
    liblock_t l;
    liblock_cond_t c;
    CHECK_EQ(liblock_init(&l, "auto", NULL), 0);
    CHECK_EQ(liblock_cond_init(&c, NULL), 0);
    for (int i = 0; i < 3000; i++) {
        CHECK_EQ(liblock_lock(&l), 0);
        if (waits) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            int r = liblock_cond_timedwait(&c, &l, &ts); /* due at once: releases and retakes the lock */
            CHECK(r == ETIMEDOUT || r == 0, "timedwait: %d", r);
        }
        CHECK_EQ(liblock_unlock(&l), 0);
    }
    int64_t mode = stat_of(&l, "mode");
    CHECK_EQ(liblock_cond_destroy(&c), 0);
    CHECK_EQ(liblock_destroy(&l), 0);
    return mode;
}

static void cond_rule(void)
{
    th_context = "cond rule";
    long n = sysconf(_SC_NPROCESSORS_ONLN) + 1;
    pthread_t *t = calloc((size_t)n, sizeof *t);
    liblock_t d;
    CHECK_EQ(liblock_init(&d, "posix", NULL), 0);
    pthread_barrier_init(&cr_bar, NULL, (unsigned)n + 1);
    for (long i = 0; i < n; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, cr_helper, &d), 0);
    while ((long)ll_thread_max_id() <= n) /* the helpers have used liblock (thread ids are given at first use) */
        usleep(1000);
    setenv("LIBLOCK_AUTO_LOW", "0", 1);
    setenv("LIBLOCK_AUTO_HIGH", "0", 1);
    setenv("LIBLOCK_AUTO_UNDER", "ttas", 1);
    setenv("LIBLOCK_AUTO_OVER", "mcs", 1);
    setenv("LIBLOCK_AUTO_OVER_COND", "mcscr", 1);
    CHECK_EQ(cond_rule_mode(1), 2); /* mcscr */
    CHECK_EQ(cond_rule_mode(0), 1); /* mcs */
    setenv("LIBLOCK_AUTO_COND", "1", 1); /* a share no lock reaches: condition waits ignored */
    CHECK_EQ(cond_rule_mode(1), 1);
    unsetenv("LIBLOCK_AUTO_COND");
    unsetenv("LIBLOCK_AUTO_LOW");
    unsetenv("LIBLOCK_AUTO_HIGH");
    unsetenv("LIBLOCK_AUTO_UNDER");
    unsetenv("LIBLOCK_AUTO_OVER");
    unsetenv("LIBLOCK_AUTO_OVER_COND");
    pthread_barrier_wait(&cr_bar);
    for (long i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&cr_bar);
    CHECK_EQ(liblock_destroy(&d), 0);
    free(t);
}

int main(void)
{
    th_watchdog(th_under_tsan() ? 600 : 240);
    rule();
    cond_rule();
    liblock_algorithm_info_t in;
    CHECK_EQ(liblock_algorithm_info("auto", &in), 0);
    for (int p = 1; p < LIBLOCK_WAIT__COUNT; p++)
        if (in.policies & (1u << p)) {
            th_context = liblock_wait_name(p);
            switching(p);
        }
    return th_report("test_auto");
}
