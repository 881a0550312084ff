/*
 * test_same_cpu - waiters of concurrency-restricting locks do not spin
 * behind a thread of their own CPU (docs/malthusian.md, "Waiters behind a
 * thread of their own CPU park at once"; src/locks/restricting/cr.h, "Same-CPU
 * waiters").  The spin budget is set to 30 s (LIBLOCK_SPIN_NS), so a waiter
 * that spins stays runnable ('R') for 30 s, and one that parks is seen
 * sleeping ('S' in /proc/self/task/TID/stat) as soon as it has run.  Every
 * thread is pinned to CPU 0, so this runs on any machine.  Only the
 * watchdog (20 s, shorter than the spin budget) bounds time.
 *
 *  1. mcscr, mcscrn: the main thread holds the lock; a second thread of the
 *     same CPU calls lock() behind it and must park, not spin.
 *  2. lifocr: the main thread holds the lock and a second thread B of the
 *     same CPU waits (it spins: nothing tells it otherwise); the main thread
 *     unlocks, which grants B, and calls lock() again at once: it is the one
 *     that must park (B needs the CPU).  B holds the lock until an observer
 *     has seen the main thread asleep.
 *  3. hybcomb: the main thread combines (its own critical section first);
 *     a second thread of the same CPU registers its request with it and
 *     must park for the reply, not spin: the main thread's section waits
 *     until it is seen asleep, then the pass serves it.
 * Each case also checks that the lock still works: every thread gets it.
 */
#include "harness.h"
#include "internal.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>

static void pin0(void)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(0, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

/* The scheduler state letter of thread tid, or '?' */
static char state_of(pid_t tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

static void nap_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

/* wait (napping) until thread tid sleeps; the watchdog ends a spinner */
static void wait_asleep(_Atomic pid_t *tid)
{
    while (!atomic_load(tid))
        nap_ms(1);
    while (state_of(atomic_load(tid)) != 'S')
        nap_ms(1);
}

static liblock_t L;
static _Atomic pid_t b_tid, main_tid;
static _Atomic int b_got, observed;
static _Atomic long served;

/* every case: L is a fresh lock of algo, nothing seen yet */
static void start_case(const char *algo)
{
    th_context = algo;
    CHECK_EQ(liblock_init(&L, algo, NULL), 0);
    atomic_store(&b_tid, 0);
    atomic_store(&b_got, 0);
    atomic_store(&observed, 0);
    atomic_store(&served, 0);
}

/* the second thread of every case: on CPU 0, its tid published */
static void become_b(void)
{
    pin0();
    atomic_store(&b_tid, (pid_t)syscall(SYS_gettid));
}

static void *waiter(void *arg)
{
    (void)arg;
    become_b();
    CHECK_EQ(liblock_lock(&L), 0);
    atomic_store(&b_got, 1);
    CHECK_EQ(liblock_unlock(&L), 0);
    return NULL;
}

static void behind_same_cpu(const char *algo)
{
    start_case(algo);
    CHECK_EQ(liblock_lock(&L), 0);
    pthread_t b;
    pthread_create(&b, NULL, waiter, NULL);
    wait_asleep(&b_tid); /* parked behind us (a spinner would stay 'R' for 30 s) */
    CHECK_EQ(atomic_load(&b_got), 0);
    CHECK_EQ(liblock_unlock(&L), 0);
    pthread_join(b, NULL);
    CHECK_EQ(atomic_load(&b_got), 1);
    CHECK_EQ(liblock_destroy(&L), 0);
    printf("%s: a waiter behind a thread of its own CPU parked\n", algo);
}

static void *holder(void *arg)
{
    (void)arg;
    become_b();
    CHECK_EQ(liblock_lock(&L), 0);
    atomic_store(&b_got, 1);
    while (!atomic_load(&observed)) /* hold it until the main thread is seen asleep */
        nap_ms(1);
    CHECK_EQ(liblock_unlock(&L), 0);
    return NULL;
}

static void *observer(void *arg)
{
    (void)arg;
    pin0();
    while (!atomic_load(&b_got))
        nap_ms(1);
    wait_asleep(&main_tid);
    atomic_store(&observed, 1);
    return NULL;
}

static int lifocr_top_is_node(liblock_t *l);

static void unlocker_parks(void)
{
    start_case("lifocr");
    CHECK_EQ(liblock_lock(&L), 0);
    pthread_t b, c;
    pthread_create(&b, NULL, holder, NULL);
    while (!lifocr_top_is_node(&L)) /* B has pushed itself (it spins: same CPU, nothing told it) */
        nap_ms(1);
    pthread_create(&c, NULL, observer, NULL);
    CHECK_EQ(liblock_unlock(&L), 0); /* grants B, of our CPU */
    CHECK_EQ(liblock_lock(&L), 0);   /* must park at once: B needs the CPU */
    CHECK_EQ(atomic_load(&observed), 1);
    CHECK_EQ(liblock_unlock(&L), 0);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    CHECK_EQ(atomic_load(&b_got), 1);
    CHECK_EQ(liblock_destroy(&L), 0);
    printf("lifocr: an unlocker that granted a waiter of its own CPU parked in its next lock()\n");
}

static int lifocr_top_is_node(liblock_t *l)
{
    struct ll_stats st;
    return ll_lock_stats(l, &st) == 0 && (uintptr_t)ll_stat(&st, "tail", 0) > 1; /* not FREE (0) or HELD (1) */
}

/* ---- 3. hybcomb: a client of a combiner of its own CPU ---- */

static void *client_cs(void *arg)
{
    (void)arg;
    atomic_fetch_add(&served, 1);
    return (void *)7;
}

static void *client(void *arg)
{
    (void)arg;
    become_b();
    void *r = liblock_execute(&L, client_cs, NULL);
    CHECK(r == (void *)7, "client's section returned %p", r);
    atomic_store(&b_got, 1);
    return NULL;
}

static void *combiner_cs(void *arg)
{
    (void)arg;
    atomic_fetch_add(&served, 1);
    pthread_t *b = arg;
    pthread_create(b, NULL, client, NULL);
    wait_asleep(&b_tid); /* registered with us and parked (a spinner stays 'R' for 30 s) */
    return NULL;
}

static void client_parks(void)
{
    start_case("hybcomb");
    pthread_t b;
    liblock_execute(&L, combiner_cs, &b);
    pthread_join(b, NULL);
    CHECK_EQ(atomic_load(&b_got), 1);
    CHECK_EQ(atomic_load(&served), 2);
    CHECK_EQ(liblock_destroy(&L), 0);
    printf("hybcomb: a client of a combiner of its own CPU parked\n");
}

int main(void)
{
    setenv("LIBLOCK_SPIN_NS", "30000000000", 1); /* 30 s: a spinner is seen spinning */
    th_watchdog(20);
    pin0();
    atomic_store(&main_tid, (pid_t)syscall(SYS_gettid));
    behind_same_cpu("mcscr");
    behind_same_cpu("mcscrn");
    unlocker_parks();
    client_parks();
    printf("test_same_cpu: %d checks, %d failed\n", th_checks, th_failures);
    return th_failures ? 1 : 0;
}
