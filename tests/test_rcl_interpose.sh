#!/usr/bin/env bash
# test_rcl_interpose.sh BUILD - RCL under the interposer (docs/rcl.md,
# "Under the interposer").  Programs are built here with cc;
# each runs under `timeout`, so a hang fails the test instead of stalling it.
#
#  - exit: a shared library whose destructor locks and unlocks a mutex (run
#    after liblock's own destructor), under `liblock run --lock rcl` and
#    under LD_PRELOAD: the program exits 0 and the destructor's lock/unlock
#    return 0; a program whose thread calls exit() while other threads lock,
#    hold and unlock mutexes and an atexit handler locks one: exits 0.
#  - slots: 6 threads, LIBLOCK_RCL_SLOTS=3 (and =1), LIBLOCK_LAZY=0: lock/trylock/unlock
#    and a condition variable, every return value checked, exact counts.
#  - lazy: a process that never locks a mutex (it inits/destroys one) has
#    one task: no server was started; nor has one that locks it without
#    contention (the mutex stays lazy: src/shim/lazy.c), nor one that makes
#    mutexes at one heap address without destroying them (the idle wrapper
#    is reused without binding it); one whose mutex
#    engages (a condition wait on it), or that locks with LIBLOCK_LAZY=0,
#    has more (the fewest of ten readings 20 ms apart: a joined start-up
#    helper thread can still be listed for a moment, once in about 20
#    runs).
#  - coloc: a program confined to the server's CPU (taskset) with 1 and 3
#    threads: exact counts, and it finishes (a request that waited for
#    the server's 5 ms idle time-out would make this run take minutes and
#    hit the bound).
#  - fork: threads use a mutex while the main thread forks; the child
#    (which unlocks the mutex if one of them held it at the fork: it stays
#    locked there, as on glibc) starts threads that use the same mutex
#    (exact counts) while the parent's threads keep its server busy on the
#    same CPU, and exits 0; then the parent goes on.
. "$(dirname "$0")/lib.sh" "$@"
lib="$build/lib/liblock-interpose.so"
liblock="$root/tools/liblock"
export LIBLOCK_BUILD="$build"
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
CC=${CC:-cc}
ncpu=$(nproc)
srv=$((ncpu - 1)) # the default server CPU (LIBLOCK_SERVERS unset)
unset LIBLOCK_SERVERS LIBLOCK_WAIT

# ---- programs ------------------------------------------------------------------
cat >"$tmp/dtorlib.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long n;
void dtorlib_touch(void) { pthread_mutex_lock(&m); n++; pthread_mutex_unlock(&m); }
__attribute__((destructor)) static void fini(void)
{
    int a = pthread_mutex_lock(&m);
    n++;
    int b = pthread_mutex_unlock(&m);
    char buf[64];
    int k = snprintf(buf, sizeof buf, "dtor %d %d %ld\n", a, b, n);
    if (write(1, buf, (size_t)k) < 0)
        _exit(9);
}
EOF
cat >"$tmp/dtormain.c" <<'EOF'
#include <stdio.h>
void dtorlib_touch(void);
int main(void) { dtorlib_touch(); dtorlib_touch(); printf("main\n"); fflush(stdout); return 0; }
EOF
cat >"$tmp/exitthr.c" <<'EOF'
/* a thread calls exit() while others lock, hold and unlock mutexes */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static pthread_mutex_t m[3] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static long count[3];
static volatile int go_exit;
static void bad(const char *w, int r) { fprintf(stderr, "%s returned %d\n", w, r); _exit(2); }
static void at_exit_handler(void)
{
    for (int i = 0; i < 3; i++) {
        int r = pthread_mutex_lock(&m[i]);
        if (r) bad("atexit lock", r);
        count[i]++;
        if ((r = pthread_mutex_unlock(&m[i]))) bad("atexit unlock", r);
    }
    printf("atexit ok\n");
    fflush(stdout);
}
static void *worker(void *a)
{
    long id = (long)a;
    for (unsigned long i = 0;; i++) {
        int k = (int)((i + (unsigned long)id) % 3), r;
        if ((r = pthread_mutex_lock(&m[k]))) bad("lock", r);
        count[k]++;
        if (i % 64 == 0)
            usleep(50); /* hold it a while */
        if ((r = pthread_mutex_unlock(&m[k]))) bad("unlock", r);
        if (id == 0 && i == 2000)
            exit(0); /* from a thread, others running */
    }
    return NULL;
}
int main(void)
{
    atexit(at_exit_handler);
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (;;)
        pause();
}
EOF
cat >"$tmp/slots.c" <<'EOF'
/* more threads than RCL client slots: every call's result checked, exact counts */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#define T 6
static int N = 3000;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, m2 = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static long counter, counter2, tries_ok, queue, produced, consumed;
static volatile int inside;
/* every worker takes the lock once, then waits here: all T threads have
 * asked for a client id at once, so the slots are really exhausted */
static pthread_barrier_t bar;
static void bad(const char *w, int r) { fprintf(stderr, "%s returned %d\n", w, r); exit(2); }
static void *worker(void *a)
{
    long id = (long)a;
    int r;
    for (int i = 0; i < N; i++) {
        if ((r = pthread_mutex_lock(&m))) bad("lock", r);
        if (inside++) bad("exclusion", -1);
        counter++;
        inside--;
        if ((r = pthread_mutex_unlock(&m))) bad("unlock", r);
        if (i == 0)
            pthread_barrier_wait(&bar);
        if (i % 8 == 0) {
            r = pthread_mutex_trylock(&m2);
            if (r == 0) {
                tries_ok++;
                counter2++;
                if ((r = pthread_mutex_unlock(&m2))) bad("unlock after trylock", r);
            } else if (r != EBUSY) {
                bad("trylock", r);
            }
        }
    }
    /* a bounded buffer on a condition variable: half produce, half consume */
    for (int i = 0; i < N / 10; i++) {
        if ((r = pthread_mutex_lock(&m2))) bad("lock m2", r);
        if (id % 2) {
            while (queue == 4)
                if ((r = pthread_cond_wait(&c, &m2))) bad("cond_wait", r);
            queue++;
            produced++;
        } else {
            while (queue == 0)
                if ((r = pthread_cond_wait(&c, &m2))) bad("cond_wait", r);
            queue--;
            consumed++;
        }
        if ((r = pthread_cond_broadcast(&c))) bad("broadcast", r);
        if ((r = pthread_mutex_unlock(&m2))) bad("unlock m2", r);
    }
    return NULL;
}
int main(int argc, char **argv)
{
    if (argc > 1)
        N = atoi(argv[1]);
    pthread_t t[T];
    pthread_barrier_init(&bar, NULL, T);
    for (long i = 0; i < T; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    int ok = counter == (long)T * N && counter2 == tries_ok && produced == (long)(T / 2) * (N / 10) &&
             consumed == produced && queue == 0;
    printf("%s counter %ld/%ld trylocks %ld produced %ld consumed %ld\n", ok ? "ok" : "WRONG", counter,
           (long)T * N, tries_ok, produced, consumed);
    return ok ? 0 : 1;
}
EOF
cat >"$tmp/tasks.c" <<'EOF'
/* tasks.c [lock|cond|reuse]: initialise/destroy a mutex (and lock it with "lock", and wait 1 ms
 * on a condition variable with it held with "cond"; with "reuse", 100 heap mutexes at one address
 * each initialised, locked, unlocked and freed without destroy, as std::mutex does), then print
 * the task count:
 * the fewest of ten readings 20 ms apart, since a thread that has been joined (the library's
 * spin-budget helpers, joined at start-up) can still be listed for a moment; a server stays */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
static int tasks_once(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += e->d_name[0] != '.';
    if (d)
        closedir(d);
    return n;
}
static int tasks(void)
{
    int best = tasks_once();
    for (int i = 0; i < 9 && best > 1; i++) {
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
        int n = tasks_once();
        if (n < best)
            best = n;
    }
    return best;
}
int main(int argc, char **argv)
{
    pthread_mutex_t m;
    pthread_mutex_init(&m, NULL);
    if (argc > 1 && strcmp(argv[1], "lock") == 0) {
        if (pthread_mutex_lock(&m) || pthread_mutex_unlock(&m))
            return 2;
    }
    if (argc > 1 && strcmp(argv[1], "reuse") == 0) {
        for (int i = 0; i < 100; i++) {
            pthread_mutex_t *h = malloc(sizeof *h);
            if (!h || pthread_mutex_init(h, NULL) || pthread_mutex_lock(h) || pthread_mutex_unlock(h))
                return 2;
            free(h);
        }
    }
    if (argc > 1 && strcmp(argv[1], "cond") == 0) {
        pthread_cond_t c = PTHREAD_COND_INITIALIZER;
        struct timespec dl;
        clock_gettime(CLOCK_REALTIME, &dl);
        dl.tv_nsec += 1000000;
        if (dl.tv_nsec >= 1000000000) {
            dl.tv_sec++;
            dl.tv_nsec -= 1000000000;
        }
        if (pthread_mutex_lock(&m) || pthread_cond_timedwait(&c, &m, &dl) != ETIMEDOUT || pthread_mutex_unlock(&m))
            return 2;
    }
    int n = tasks();
    pthread_mutex_destroy(&m);
    printf("%d\n", n);
    return 0;
}
EOF
cat >"$tmp/forkp.c" <<'EOF'
/* threads use mutexes while the main thread forks; the child uses them too */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static volatile int stop;
static void bad(const char *w, int r) { fprintf(stderr, "[%d] %s returned %d\n", (int)getpid(), w, r); _exit(2); }
static void *bg(void *a)
{
    (void)a;
    while (!stop) {
        int r;
        if ((r = pthread_mutex_lock(&m))) bad("lock", r);
        counter++;
        if ((r = pthread_mutex_unlock(&m))) bad("unlock", r);
    }
    return NULL;
}
static void *child_worker(void *a)
{
    for (int i = 0; i < 3000; i++) {
        int r;
        if ((r = pthread_mutex_lock(&m))) bad("child lock", r);
        counter++;
        if ((r = pthread_mutex_unlock(&m))) bad("child unlock", r);
    }
    return a;
}
int main(void)
{
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, bg, NULL);
    usleep(20000);
    for (int round = 0; round < 3; round++) {
        pid_t p = fork();
        if (p == 0) {
            /* the child: if a thread that does not exist here held the lock at
             * the fork, it is still locked, as on glibc: the child unlocks it
             * (NORMAL: glibc's unlock does not check the owner) */
            long base;
            int r = pthread_mutex_trylock(&m);
            if (r == EBUSY) {
                if ((r = pthread_mutex_unlock(&m))) bad("child unlock of the parent's hold", r);
                r = pthread_mutex_lock(&m);
            }
            if (r) bad("child first lock", r);
            base = counter;
            if ((r = pthread_mutex_unlock(&m))) bad("child first unlock", r);
            pthread_t c[3];
            for (int i = 0; i < 3; i++)
                pthread_create(&c[i], NULL, child_worker, NULL);
            for (int i = 0; i < 3; i++)
                pthread_join(c[i], NULL);
            if (counter != base + 9000) {
                fprintf(stderr, "child: counter %ld, expected %ld\n", counter, base + 9000);
                _exit(1);
            }
            _exit(0);
        }
        int st = 0;
        if (p < 0 || waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "child %d: status %d\n", round, st);
            return 1;
        }
    }
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    int r;
    if ((r = pthread_mutex_lock(&m))) bad("final lock", r);
    if ((r = pthread_mutex_unlock(&m))) bad("final unlock", r);
    printf("ok\n");
    return 0;
}
EOF
cat >"$tmp/coloc.c" <<'EOF'
/* coloc T N: T threads (on whatever CPUs taskset allows), N lock/unlock pairs each */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
static int N;
static void *w(void *a)
{
    for (int i = 0; i < N; i++) {
        if (pthread_mutex_lock(&m)) exit(2);
        counter++;
        if (pthread_mutex_unlock(&m)) exit(2);
    }
    return a;
}
int main(int argc, char **argv)
{
    int T = atoi(argv[1]);
    N = atoi(argv[2]);
    pthread_t t[16];
    for (int i = 0; i < T; i++)
        pthread_create(&t[i], NULL, w, NULL);
    for (int i = 0; i < T; i++)
        pthread_join(t[i], NULL);
    printf("%ld\n", counter);
    return counter == (long)T * N ? 0 : 1;
}
EOF
$CC -shared -fPIC -o "$tmp/libdtor.so" "$tmp/dtorlib.c" -pthread || { echo "FAIL: cc"; exit 1; }
$CC -o "$tmp/dtormain" "$tmp/dtormain.c" -L"$tmp" -ldtor -Wl,-rpath,"$tmp" -pthread || exit 1
for p in exitthr slots tasks forkp coloc; do
  $CC -O2 -o "$tmp/$p" "$tmp/$p.c" -pthread || { echo "FAIL: cc $p"; exit 1; }
done

# ---- exit ------------------------------------------------------------------------
out=$(timeout 30 "$liblock" run --lock rcl -- "$tmp/dtormain" 2>"$tmp/err"); rc=$?
[ $rc -eq 0 ] && [ "$out" = "$(printf 'main\ndtor 0 0 3')" ] || fail "exit: library destructor under liblock run: rc=$rc out='$out' err=$(cat "$tmp/err")"
for w in spin spin-then-park yield park; do
  out=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl LIBLOCK_WAIT=$w timeout 30 "$tmp/dtormain" 2>"$tmp/err"); rc=$?
  [ $rc -eq 0 ] && [ "$out" = "$(printf 'main\ndtor 0 0 3')" ] || fail "exit: library destructor (LD_PRELOAD, $w): rc=$rc out='$out' err=$(cat "$tmp/err")"
done
for i in 1 2 3; do
  out=$(timeout 30 "$liblock" run --lock rcl -- "$tmp/exitthr" 2>"$tmp/err"); rc=$?
  [ $rc -eq 0 ] && [ "$out" = "atexit ok" ] || fail "exit: exit() from a thread (run $i): rc=$rc out='$out' err=$(cat "$tmp/err")"
done

# ---- slots -----------------------------------------------------------------------
# (LIBLOCK_LAZY=0: every thread's first lock is then the algorithm's, so all six ask for a client
# id before the barrier and the slots are really exhausted; lazily, only contended locks would)
for s in 3 1; do
  for w in spin-then-park spin yield; do
    out=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl LIBLOCK_LAZY=0 LIBLOCK_WAIT=$w LIBLOCK_RCL_SLOTS=$s timeout 120 "$tmp/slots" 2>"$tmp/err"); rc=$?
    [ $rc -eq 0 ] && case "$out" in ok*) true;; *) false;; esac ||
      fail "slots=$s $w: rc=$rc out='$out' err=$(cat "$tmp/err")"
    grep -q 'overflow slot' "$tmp/err" || fail "slots=$s $w: no one-line notice of the exhausted slots: $(cat "$tmp/err")"
  done
done

# ---- lazy server start -----------------------------------------------------------------
n=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl "$tmp/tasks"); rc=$?
[ $rc -eq 0 ] && [ "$n" = 1 ] || fail "lazy: a process that never locks has $n tasks (expected 1: no server)"
n=$("$liblock" run --lock rcl -- "$tmp/tasks"); rc=$?
[ $rc -eq 0 ] && [ "$n" = 1 ] || fail "lazy: liblock run, a process that never locks has $n tasks (expected 1)"
n=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl "$tmp/tasks" lock); rc=$?
[ $rc -eq 0 ] && [ "$n" = 1 ] || fail "lazy: a process that locks without contention has $n tasks (expected 1: no server)"
n=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl "$tmp/tasks" reuse); rc=$?
[ $rc -eq 0 ] && [ "$n" = 1 ] || fail "lazy: a process that reuses a mutex's address without destroy has $n tasks (expected 1: no server)"
n=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl "$tmp/tasks" cond); rc=$?
[ $rc -eq 0 ] && [ "$n" -gt 1 ] || fail "lazy: a process whose mutex engaged has $n tasks (expected a server: more than 1)"
n=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl LIBLOCK_LAZY=0 "$tmp/tasks" lock); rc=$?
[ $rc -eq 0 ] && [ "$n" -gt 1 ] || fail "lazy: LIBLOCK_LAZY=0, a process that locks has $n tasks (expected a server: more than 1)"
n=$("$liblock" run --lock rcl --eager -- "$tmp/tasks" lock); rc=$?
[ $rc -eq 0 ] && [ "$n" -gt 1 ] || fail "lazy: liblock run --eager, a process that locks has $n tasks (expected a server: more than 1)"

# ---- a client confined to the server's CPU ---------------------------------------------
for t in 1 3; do
  for w in spin-then-park spin; do
    out=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl LIBLOCK_WAIT=$w timeout 60 taskset -c "$srv" "$tmp/coloc" $t 5000 2>"$tmp/err"); rc=$?
    [ $rc -eq 0 ] && [ "$out" = $((t * 5000)) ] || fail "coloc: $t thread(s) on the server CPU $srv ($w): rc=$rc out='$out' err=$(cat "$tmp/err")"
  done
done

# ---- fork ----------------------------------------------------------------------------
# (not `spin`: 5 spinning threads on the one client CPU is the oversubscription
# convoy of docs/interpose.md "waiting policy", whatever fork does)
for w in spin-then-park yield; do
  out=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl LIBLOCK_WAIT=$w timeout 60 "$tmp/forkp" 2>"$tmp/err"); rc=$?
  [ $rc -eq 0 ] && [ "$out" = ok ] || fail "fork ($w): rc=$rc out='$out' err=$(cat "$tmp/err")"
done

finish
