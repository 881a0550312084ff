/*
 * test_parking_interposed - the classic locks' waiting under the
 * interposer (this program re-executed under LD_PRELOAD with LIBLOCK_LOCK
 * and LIBLOCK_STRICT=1):
 *   stray   a real extra pthread_mutex_unlock (ticket, spin, ttas, posix,
 *           mcs, clh) leaves the mutex usable: 4 threads then count
 *           through it exactly;
 *   bb      a pthread bounded buffer (mutex + two condition variables)
 *           with the default policy of ticket, clh, mcs, spin and ttas, 8
 *           and 32 threads, half producers, half consumers: exact sum
 *           within the time bound.  Every consumer wake-up re-acquires the
 *           mutex behind parked threads, the case where FIFO hand-offs
 *           pile up.
 * The build always makes the interposer: a missing one fails the test.
 * Under a sanitizer (whose runtime the interposer would have to follow in
 * the preload order) nothing can run, and the test reports itself skipped.
 */
#include "parking.h"

/* ---- stray: one pthread_mutex_unlock too many ---- */
static pthread_mutex_t pm = PTHREAD_MUTEX_INITIALIZER;
static long pm_count;

static void *pm_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&pm);
        pm_count++;
        pthread_mutex_unlock(&pm);
    }
    return NULL;
}

static int stray_child(void)
{
    th_watchdog(30);
    pthread_mutex_lock(&pm);
    pthread_mutex_unlock(&pm);
    pthread_mutex_unlock(&pm); /* one too many */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, pm_worker, NULL);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    return pm_count == 20000 ? 0 : 1;
}

/* ---- bb: a bounded buffer on a pthread mutex and two condition variables ---- */
#define BB_CAP 8
static pthread_mutex_t bb_m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t bb_notfull = PTHREAD_COND_INITIALIZER, bb_notempty = PTHREAD_COND_INITIALIZER;
static long bb_buf[BB_CAP], bb_items, bb_sum;
static int bb_head, bb_count;

static void *bb_producer(void *arg)
{
    (void)arg;
    for (long i = 1; i <= bb_items; i++) {
        pthread_mutex_lock(&bb_m);
        while (bb_count == BB_CAP)
            pthread_cond_wait(&bb_notfull, &bb_m);
        bb_buf[(bb_head + bb_count++) % BB_CAP] = i;
        pthread_cond_signal(&bb_notempty);
        pthread_mutex_unlock(&bb_m);
    }
    return NULL;
}

static void *bb_consumer(void *arg)
{
    (void)arg;
    long s = 0;
    for (long i = 0; i < bb_items; i++) {
        pthread_mutex_lock(&bb_m);
        while (bb_count == 0)
            pthread_cond_wait(&bb_notempty, &bb_m);
        s += bb_buf[bb_head];
        bb_head = (bb_head + 1) % BB_CAP;
        bb_count--;
        pthread_cond_signal(&bb_notfull);
        pthread_mutex_unlock(&bb_m);
    }
    pthread_mutex_lock(&bb_m);
    bb_sum += s;
    pthread_mutex_unlock(&bb_m);
    return NULL;
}

static int bb_child(int n)
{
    bb_items = th_scale_small() ? 200 : 2000;
    pthread_t t[64];
    for (int i = 0; i < n / 2; i++) {
        pthread_create(&t[2 * i], NULL, bb_producer, NULL);
        pthread_create(&t[2 * i + 1], NULL, bb_consumer, NULL);
    }
    for (int i = 0; i < n / 2 * 2; i++)
        pthread_join(t[i], NULL);
    long expect = (long)(n / 2) * bb_items * (bb_items + 1) / 2;
    if (bb_sum != expect)
        fprintf(stderr, "bounded buffer: sum %ld, expected %ld\n", bb_sum, expect);
    return bb_sum == expect ? 0 : 1;
}

/* The children: specs "stray" and "bb:THREADS". */
static int child(const char *spec)
{
    if (strcmp(spec, "stray") == 0)
        return stray_child();
    if (strncmp(spec, "bb:", 3) == 0)
        return bb_child(atoi(spec + 3));
    return 127;
}

/* ---- the parent ---- */
/* This program under the interposer at lib with LIBLOCK_LOCK=algo and
 * LIBLOCK_PARKING_CHILD=spec; checks that it exits 0 within 60 s. */
static void run_interposed(const char *lib, const char *algo, const char *spec, const char *what)
{
    char preload[4300], lock[96], child[96];
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s", lib);
    snprintf(lock, sizeof lock, "LIBLOCK_LOCK=%s", algo);
    snprintf(child, sizeof child, "LIBLOCK_PARKING_CHILD=%s", spec);
    const char *envs[] = {preload, lock, "LIBLOCK_STRICT=1", child, NULL};
    th_context = what;
    pid_t pid = th_spawn(parking_self, envs);
    int rc = pid > 0 ? th_wait_child(pid, 60, what) : -1;
    CHECK(rc == 0, "%s: exit %d", what, rc);
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 600, child);
    if (rc >= 0)
        return rc;
    if (parking_sanitized()) {
        th_skip("the interposer cannot be preloaded into a sanitizer build");
        return TH_SKIPPED;
    }
    char *real = th_interposer(argv[0]);
    if (!real)
        return th_report("test_parking_interposed");

    printf("test_parking_interposed: extra pthread_mutex_unlock\n");
    static const char *const stray_algos[] = {"ticket", "spin", "ttas", "posix", "mcs", "clh"};
    for (size_t i = 0; i < sizeof stray_algos / sizeof *stray_algos; i++) {
        char what[128];
        snprintf(what, sizeof what, "extra pthread_mutex_unlock under the interposer with %s", stray_algos[i]);
        run_interposed(real, stray_algos[i], "stray", what);
    }

    printf("test_parking_interposed: bounded buffer, default policies\n");
    static const char *const bb_algos[] = {"ticket", "clh", "mcs", "spin", "ttas"};
    for (size_t i = 0; i < sizeof bb_algos / sizeof *bb_algos; i++)
        for (int n = 8; n <= 32; n *= 4) {
            char what[128], spec[32];
            snprintf(what, sizeof what, "bounded buffer under the interposer, %s default policy, %d threads",
                     bb_algos[i], n);
            snprintf(spec, sizeof spec, "bb:%d", n);
            uint64_t t0 = th_now_ns();
            run_interposed(real, bb_algos[i], spec, what);
            printf("  %-8s %2d threads: %.2f s\n", bb_algos[i], n, (th_now_ns() - t0) / 1e9);
        }
    free(real);
    (void)argc;
    return th_report("test_parking_interposed");
}
