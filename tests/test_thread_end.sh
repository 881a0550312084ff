#!/usr/bin/env bash
# test_thread_end.sh BUILD - a process under the interposer ends exactly as
# under glibc: with its main thread's status, or with status 0 when its last
# thread ends (src/core/thread.c, "the end of the process").  Each program is
# first run on glibc alone to fix the expected output and status, then under
# LD_PRELOAD=BUILD/lib/liblock-interpose.so, each run under a watchdog.
#  1. window: main asks the library for new threads (liblock_server_start: an
#     RCL server) while another application thread, which used a lock, ends;
#     the library's thread creation is delayed on purpose (delay.so, preloaded
#     after the interposer, holds the library's pthread_create calls made by
#     main for 300 ms) so the other thread ends inside it.  glibc: "main done",
#     status 3; the library must not exit(0) meanwhile.
#  2. raw clone: a process with library threads makes a child with a raw
#     SYS_clone system call (no atfork handler runs); in the child a thread
#     takes a lock and ends, then the child exits 7.  The child must not take
#     the parent's library threads for its own (status 7, not 0).
#  3. last thread never used the library: under rcl, main locks a mutex (an
#     RCL server starts), creates a thread that takes no lock, and leaves by
#     pthread_exit; glibc ends the process with status 0 when that thread
#     ends; the servers must not keep it alive.  The same with a C11 thread
#     (thrd_create, which glibc implements without calling pthread_create).
# BUILD may be absolute (to run these against another build).
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac
lib="$build/lib/liblock-interpose.so"
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
bound=${LIBLOCK_TEST_TIMEOUT:-20}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

cat > "$tmp/delay.c" <<'EOF'
/* Preloaded after the interposer: the interposer's own pthread_create calls
 * (its library threads) reach this one.  While the program's delay_on is set,
 * a creation made by the main thread waits 300 ms first. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>
int pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg)
{
    static int (*next)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!next)
        next = (int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *))dlsym(RTLD_NEXT, "pthread_create");
    volatile int *on = (volatile int *)dlsym(RTLD_DEFAULT, "delay_on");
    if (on && *on && syscall(SYS_gettid) == getpid())
        usleep(300000);
    return next(t, a, fn, arg);
}
EOF
cat > "$tmp/window.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
volatile int delay_on;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static volatile int ready;
static void *worker(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    ready = 1;
    usleep(100000); /* main is inside the library's thread creation by now */
    return NULL;
}
int main(void)
{
    void *(*start)(int) = (void *(*)(int))dlsym(RTLD_DEFAULT, "liblock_server_start");
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    while (!ready)
        usleep(1000);
    delay_on = 1;
    if (start && !start(0))
        printf("server not started\n");
    delay_on = 0;
    usleep(200000);
    printf("main done\n");
    fflush(stdout);
    return 3;
}
EOF
cat > "$tmp/rawclone.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void *worker(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    return NULL;
}
int main(void)
{
    void *(*start)(int) = (void *(*)(int))dlsym(RTLD_DEFAULT, "liblock_server_start");
    if (start)
        start(0); /* library threads in the parent */
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    fflush(stdout);
    long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) {
        pthread_t t;
        pthread_create(&t, NULL, worker, NULL);
        pthread_join(t, NULL);
        usleep(100000);
        _exit(7);
    }
    int st = 0;
    waitpid((pid_t)pid, &st, 0);
    printf("child %s %d\n", WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    fflush(stdout);
    _exit(0); /* the parent's servers need no clean-up */
}
EOF
cat > "$tmp/lastnolock.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static void *worker(void *a)
{
    (void)a;
    usleep(100000); /* main has left by now */
    printf("worker done\n");
    fflush(stdout);
    return NULL;
}
int main(void)
{
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_exit(NULL);
}
EOF
cat > "$tmp/lastthrd.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <threads.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int worker(void *a)
{
    (void)a;
    usleep(100000); /* main has left by now */
    printf("c11 worker done\n");
    fflush(stdout);
    return 5;
}
int main(void)
{
    pthread_mutex_lock(&m);
    pthread_mutex_unlock(&m);
    thrd_t t;
    if (thrd_create(&t, worker, NULL) != thrd_success)
        return 4;
    thrd_exit(0);
}
EOF
cc -O1 -shared -fPIC -o "$tmp/delay.so" "$tmp/delay.c" -ldl &&
  for p in window rawclone lastnolock lastthrd; do cc -O1 -pthread -rdynamic -o "$tmp/$p" "$tmp/$p.c" -ldl || exit 1; done ||
  { echo "FAIL: could not build the test programs"; exit 1; }

# check NAME PRELOAD ALGO PROGRAM: glibc's output and status, then the interposer's
check() {
  local name=$1 pre=$2 algo=$3 prog=$4
  local want wantrc out rc
  want=$(timeout -k 2 "$bound" "$tmp/$prog" 2>/dev/null); wantrc=$?
  out=$(LD_PRELOAD="$pre" LIBLOCK_LOCK=$algo timeout -k 2 "$bound" "$tmp/$prog" 2>"$tmp/err"); rc=$?
  if [ "$rc" = "$wantrc" ] && [ "$out" = "$want" ]; then
    echo "ok   $name ($algo): status $rc, output '$(printf '%s' "$out" | tr '\n' '|')'"
  else
    local why="status $rc"; [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="hang (killed after $bound s)"
    echo "FAIL $name ($algo): $why, output '$(printf '%s' "$out" | tr '\n' '|')'; glibc: status $wantrc," \
         "output '$(printf '%s' "$want" | tr '\n' '|')'; stderr: $(head -c 300 "$tmp/err" | tr '\n' '|')"
    fails=$((fails+1))
  fi
}
check "app thread ends while the library creates a thread" "$lib $tmp/delay.so" mcs window
check "raw SYS_clone child" "$lib" mcs rawclone
check "raw SYS_clone child" "$lib" rcl rawclone
check "last thread never used the library" "$lib" rcl lastnolock
check "last thread never used the library" "$lib" mp-server lastnolock
check "last thread a C11 thread that never used the library" "$lib" rcl lastthrd
[ $fails -eq 0 ] && echo "test_thread_end: all passed" || echo "test_thread_end: $fails failed"
[ $fails -eq 0 ]
