#!/usr/bin/env bash
# test_rcl_destroy_interpose.sh BUILD - pthread_mutex_destroy of an RCL
# mutex under the interposer answers 0 once every section on it has
# returned (server.c, I4: a delegated section's lock is released before
# its reply), as glibc's does.  A program (built here) runs, with
# LIBLOCK_LOCK=rcl, in normal and degraded (LIBLOCK_RCL_DEGRADED=1) mode:
# two threads loop on fresh mutexes (init, liblock_execute_mutex, destroy;
# init, lock, unlock, destroy), and every 100 rounds both use one mutex
# (lock/unlock and liblock_execute_mutex) which the main thread then
# destroys.  Every destroy must answer 0 (an EBUSY is counted and retried,
# so the run goes on); the counts must be exact.  Without the preload the
# program runs on glibc (lock, call, unlock) as a control.  No timing is
# asserted; `timeout` bounds a hang.
. "$(dirname "$0")/lib.sh" "$@"
lib="$build/lib/liblock-interpose.so"
[ -f "$lib" ] || { echo "FAIL: $lib missing"; exit 1; }
CC=${CC:-cc}
unset LIBLOCK_SERVERS LIBLOCK_WAIT
cat >"$tmp/prog.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void *(*exec_fn)(pthread_mutex_t *, void *(*)(void *), void *);
static exec_fn exec_mutex; /* liblock_execute_mutex from the preloaded library, if any */
static pthread_barrier_t bar;
static pthread_mutex_t shared;
static long shared_count, rounds, ebusy_shared, bad;
static long ebusy_exec[2], ebusy_lock[2];

static void *cs_inc(void *p) { ++*(long *)p; return p; }

static void *run_cs(pthread_mutex_t *m, long *c)
{
    if (exec_mutex)
        return exec_mutex(m, cs_inc, c);
    pthread_mutex_lock(m);
    cs_inc(c);
    pthread_mutex_unlock(m);
    return c;
}

/* destroy m: 0 expected; EBUSY is counted and retried until 0 */
static void destroy(pthread_mutex_t *m, long *ebusy)
{
    int r = pthread_mutex_destroy(m);
    if (r == EBUSY)
        ++*ebusy;
    while (r == EBUSY) {
        sched_yield();
        r = pthread_mutex_destroy(m);
    }
    if (r != 0)
        bad++;
}

static void *worker(void *arg)
{
    int id = (int)(long)arg;
    long mine = 0;
    for (long i = 0; i < rounds; i++) {
        /* a fresh mutex of this thread: execute then destroy; lock, unlock, destroy */
        pthread_mutex_t m;
        pthread_mutex_init(&m, NULL);
        if (run_cs(&m, &mine) != &mine)
            __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
        destroy(&m, &ebusy_exec[id]);
        pthread_mutex_init(&m, NULL);
        pthread_mutex_lock(&m);
        mine++;
        pthread_mutex_unlock(&m);
        destroy(&m, &ebusy_lock[id]);
        /* every 100 rounds: both threads use one mutex, then main destroys it */
        if (i % 100 == 99) {
            pthread_barrier_wait(&bar);
            for (int k = 0; k < 50; k++) {
                if ((k + id) % 2)
                    run_cs(&shared, &shared_count);
                else {
                    pthread_mutex_lock(&shared);
                    shared_count++;
                    pthread_mutex_unlock(&shared);
                }
            }
            pthread_barrier_wait(&bar);
            pthread_barrier_wait(&bar);
        }
    }
    if (mine != 2 * rounds)
        __atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    rounds = argc > 1 ? atol(argv[1]) : 20000;
    exec_mutex = (exec_fn)dlsym(RTLD_DEFAULT, "liblock_execute_mutex");
    pthread_barrier_init(&bar, NULL, 3);
    pthread_t th[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, (void *)i);
    long nshared = rounds / 100;
    for (long i = 0; i < nshared; i++) {
        pthread_mutex_init(&shared, NULL);
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar); /* both threads are done with it */
        destroy(&shared, &ebusy_shared);
        pthread_barrier_wait(&bar);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    long ee = ebusy_exec[0] + ebusy_exec[1], el = ebusy_lock[0] + ebusy_lock[1];
    int ok = !bad && !ee && !el && !ebusy_shared && shared_count == nshared * 100;
    printf("%s execute_mutex=%s EBUSY: after execute %ld/%ld, after lock/unlock %ld/%ld, shared %ld/%ld; count %ld/%ld\n",
           ok ? "ok" : "WRONG", exec_mutex ? "liblock" : "fallback", ee, 2 * rounds, el, 2 * rounds, ebusy_shared,
           nshared, shared_count, nshared * 100);
    return ok ? 0 : 1;
}
EOF
$CC -O2 -pthread "$tmp/prog.c" -o "$tmp/prog" -ldl || { fail "cannot build the program"; finish; }
out=$(timeout 60 "$tmp/prog" 2000 2>&1); rc=$?
[ $rc -eq 0 ] && ok || fail "glibc control: rc=$rc $out"
for d in 0 1; do
  out=$(LD_PRELOAD="$lib" LIBLOCK_LOCK=rcl LIBLOCK_RCL_DEGRADED=$d timeout 120 "$tmp/prog" 100000 2>"$tmp/err"); rc=$?
  echo "degraded=$d: $out"
  case "$out" in *execute_mutex=liblock*) ok ;; *) fail "degraded=$d: liblock_execute_mutex not found under the preload: $out" ;; esac
  [ $rc -eq 0 ] && ok || fail "degraded=$d: rc=$rc $out $(cat "$tmp/err")"
done
finish
