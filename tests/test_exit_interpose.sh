#!/usr/bin/env bash
# test_exit_interpose.sh BUILD - mutexes used while a program exits, under
# `liblock run --lock ALGO` for EVERY algorithm of build/bin/liblock-info
# with its default waiting policy.
#
# The program (compiled here with cc into a temporary directory) links a
# shared library whose destructor locks and unlocks a mutex the program's
# threads used; a second thread is still locking mutexes when main returns,
# and an atexit handler locks one too.  The library is a dependency of the
# program, so its destructor runs after the interposer's (the interposer is
# initialised last, being preloaded, and finalised first): requests made
# after the interposer's clean-up must still be served.  Expected: exit
# status 0 and the lines "main done", "atexit ok", "dtor ok" within 10 s.
. "$(dirname "$0")/lib.sh" "$@"
liblock="$root/tools/liblock"
export LIBLOCK_BUILD="$build"
info="$build/bin/liblock-info"
bound=${LIBLOCK_TEST_TIMEOUT:-10}

cat > "$tmp/libdtor.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long uses;
pthread_mutex_t *dtor_mutex(void) { return &m; }
void dtor_use(void) { pthread_mutex_lock(&m); uses++; pthread_mutex_unlock(&m); }
__attribute__((destructor)) static void dtor_fini(void)
{
    int a = pthread_mutex_lock(&m);
    uses++;
    int b = pthread_mutex_unlock(&m);
    char line[64];
    int n = snprintf(line, sizeof line, a == 0 && b == 0 ? "dtor ok\n" : "dtor FAILED %d %d\n", a, b);
    if (write(1, line, (size_t)n) < 0)
        _exit(9);
}
EOF
cat > "$tmp/main.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
pthread_mutex_t *dtor_mutex(void);
void dtor_use(void);
static pthread_mutex_t other = PTHREAD_MUTEX_INITIALIZER;
static volatile int started;
static void at_exit(void)
{
    int a = pthread_mutex_lock(&other), b = pthread_mutex_unlock(&other);
    dtor_use();
    char line[64];
    int n = snprintf(line, sizeof line, a == 0 && b == 0 ? "atexit ok\n" : "atexit FAILED %d %d\n", a, b);
    if (write(1, line, (size_t)n) < 0)
        _exit(9);
}
static void *busy(void *arg)
{
    (void)arg;
    for (long i = 0;; i++) {            /* still using both mutexes when main returns */
        dtor_use();
        pthread_mutex_lock(&other);
        pthread_mutex_unlock(&other);
        if (i == 1000)
            started = 1;
    }
    return NULL;
}
int main(void)
{
    atexit(at_exit);
    for (int i = 0; i < 1000; i++)
        dtor_use();
    pthread_t t;
    pthread_create(&t, NULL, busy, NULL);
    while (!started)
        usleep(1000);
    if (write(1, "main done\n", 10) < 0)
        return 9;
    return 0;
}
EOF
cc -O1 -shared -fPIC -pthread -o "$tmp/libdtor.so" "$tmp/libdtor.c" &&
  cc -O1 -pthread -o "$tmp/dtormain" "$tmp/main.c" -L"$tmp" -ldtor -Wl,-rpath,"$tmp" ||
  { echo "FAIL: could not build the test program"; exit 1; }
want=$'main done\natexit ok\ndtor ok'
out=$("$tmp/dtormain") && [ "$out" = "$want" ] || { echo "FAIL: the program itself (glibc): '$out'"; exit 1; }

# Second program: the main thread leaves with pthread_exit, the last thread
# ends by returning; glibc then ends the process with exit(0).  The
# library's own threads (RCL, mp-server servers) must not keep it alive
# (they did: the main thread a zombie, the servers asleep with every signal
# blocked, the process unkillable by SIGTERM).
cat > "$tmp/lastthread.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long n;
static void *worker(void *a)
{
    (void)a;
    usleep(50000); /* main has left by now */
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&m);
        n++;
        pthread_mutex_unlock(&m);
    }
    printf("worker done %ld\n", n);
    fflush(stdout);
    return NULL;
}
int main(void)
{
    pthread_mutex_lock(&m);
    n++;
    pthread_mutex_unlock(&m);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    pthread_exit(NULL);
}
EOF
cc -O1 -pthread -o "$tmp/lastthread" "$tmp/lastthread.c" || { echo "FAIL: could not build lastthread"; exit 1; }
want2="worker done 1001"
out=$("$tmp/lastthread") && [ "$out" = "$want2" ] || { echo "FAIL: lastthread itself (glibc): '$out'"; exit 1; }

algos=$("$info" | sed -n 's/^{"name": "\([^"]*\)".*/\1/p')
[ -n "$algos" ] || { echo "FAIL: no algorithm from $info"; exit 1; }
for a in $algos; do
  if [ -n "${LIBLOCK_TEST_ALGOS:-}" ] && ! [[ " ${LIBLOCK_TEST_ALGOS//,/ } " == *" $a "* ]]; then continue; fi
  start=$(date +%s%N)
  out=$(env -u LIBLOCK_WAIT timeout -k 2 "$bound" "$liblock" run --lock "$a" -- "$tmp/dtormain" 2>"$tmp/err"); rc=$?
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  if [ $rc -eq 0 ] && [ "$out" = "$want" ]; then
    echo "ok   $a ($ms ms)"
  else
    why="exit $rc"; [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="hang (killed after $bound s)"
    echo "FAIL $a: $why; output: $(printf '%s' "$out" | tr '\n' '|') stderr: $(head -c 300 "$tmp/err" | tr '\n' '|')"
    fails=$((fails+1))
  fi
  out=$(env -u LIBLOCK_WAIT timeout -k 2 "$bound" "$liblock" run --lock "$a" -- "$tmp/lastthread" 2>"$tmp/err"); rc=$?
  if [ $rc -eq 0 ] && [ "$out" = "$want2" ]; then
    echo "ok   $a: main thread pthread_exit, last thread returns"
  else
    why="exit $rc"; [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="hang (killed after $bound s)"
    echo "FAIL $a (main thread pthread_exit, last thread returns): $why; output: $out stderr: $(head -c 300 "$tmp/err" | tr '\n' '|')"
    fails=$((fails+1))
  fi
done
finish
