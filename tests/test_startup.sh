#!/usr/bin/env bash
# test_startup.sh BUILD - what a process under the interposer does at start,
# and where the machine's figures come from (src/platform/calibration.c).
#  1. A single-threaded program that locks mutexes and signals a condition
#     variable but never contends, under LD_PRELOAD=liblock-interpose.so with
#     each non-delegating algorithm (delegating ones start their servers at
#     first use: that is what they are), with no figure in the environment
#     and an empty cache (the first process on a fresh machine): it must
#     find __libc_single_threaded still 1 (no thread was ever created), one
#     entry in /proc/self/task, no call to sched_setaffinity or
#     pthread_setaffinity_np (counted by the program's own definitions, which
#     come before libc's for every caller), hwloc, libnuma and libdw not
#     mapped, and the cache still empty (nothing was measured).
#  2. liblock-info --spin-budget with an empty cache measures and writes the
#     cache; the next process takes the figures from it ("source": "cache");
#     LIBLOCK_CALIBRATION wins over the cache; a cache file of another
#     machine, a symlink and a malformed file are not used.
#  3. An out-of-range LIBLOCK_SPIN_NS warns that the budget is measured (it
#     said "using -1").
#  4. `liblock run` hands the figures to the program (LIBLOCK_CALIBRATION).
# BUILD may be absolute (to run these against another build).
set -u
build=${1:-build}
cd "$(dirname "$0")/.." || exit 2
root=$PWD
case "$build" in /*) ;; *) build="$root/$build" ;; esac
lib="$build/lib/liblock-interpose.so"
info="$build/bin/liblock-info"
[ -f "$lib" ] && [ -x "$info" ] || { echo "FAIL: $lib or $info missing"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails+1)); }
# no figure from outside: neither the environment nor the user's own cache
unset LIBLOCK_CALIBRATION LIBLOCK_SPIN_NS
export HOME="$tmp/home" XDG_CACHE_HOME="$tmp/xdg"
mkdir -p "$HOME" "$XDG_CACHE_HOME"

cat > "$tmp/quiet.c" <<'EOF'
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/sys/../syscall.h>
#include <unistd.h>
extern char __libc_single_threaded;
static int pins;
int sched_setaffinity(pid_t pid, size_t n, const cpu_set_t *set)
{
    pins++;
    int (*next)(pid_t, size_t, const cpu_set_t *) = (int (*)(pid_t, size_t, const cpu_set_t *))dlsym(RTLD_NEXT, "sched_setaffinity");
    return next(pid, n, set);
}
int pthread_setaffinity_np(pthread_t t, size_t n, const cpu_set_t *set)
{
    pins++;
    int (*next)(pthread_t, size_t, const cpu_set_t *) = (int (*)(pthread_t, size_t, const cpu_set_t *))dlsym(RTLD_NEXT, "pthread_setaffinity_np");
    return next(t, n, set);
}
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
int main(void)
{
    const char *(*which)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_lock");
    const char *algo = which ? which() : NULL;
    pthread_mutex_t dyn;
    pthread_mutex_init(&dyn, NULL);
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&m);
        pthread_cond_signal(&c);
        pthread_mutex_unlock(&m);
        pthread_mutex_lock(&dyn);
        pthread_mutex_unlock(&dyn);
    }
    pthread_mutex_destroy(&dyn);
    int tasks = 0;
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));)
        tasks += e->d_name[0] != '.';
    if (d)
        closedir(d);
    char line[512], libs[256] = "";
    FILE *f = fopen("/proc/self/maps", "r");
    while (f && fgets(line, sizeof line, f))
        for (const char *const *l = (const char *const[]){"libhwloc", "libnuma", "libdw", NULL}; *l; l++)
            if (strstr(line, *l) && !strstr(libs, *l))
                snprintf(libs + strlen(libs), sizeof libs - strlen(libs), "%s ", *l);
    if (f)
        fclose(f);
    printf("algo=%s single=%d tasks=%d pins=%d mapped=[%s]\n", algo ? algo : "none", (int)__libc_single_threaded,
           tasks, pins, libs);
    return 0;
}
EOF
sed -i 's|#include <sys/sys/../syscall.h>|#include <sys/syscall.h>|' "$tmp/quiet.c"
cc -O1 -pthread -rdynamic -o "$tmp/quiet" "$tmp/quiet.c" -ldl || { echo "FAIL: could not build the test program"; exit 1; }
out=$("$tmp/quiet")
[ "$out" = "algo=none single=1 tasks=1 pins=0 mapped=[]" ] || fail "the program itself (glibc): $out"

# ---- 1. a process that never contends ---------------------------------------------
algos=$("$info" | grep -v '"delegates"' | sed -n 's/^{"name": "\([^"]*\)".*/\1/p')
[ -n "$algos" ] || { echo "FAIL: no algorithm from $info"; exit 1; }
for a in $algos; do
  cache="$tmp/cache-$a"
  mkdir -p "$cache"
  out=$(LIBLOCK_CACHE_DIR="$cache" LD_PRELOAD="$lib" LIBLOCK_LOCK=$a timeout -k 2 20 "$tmp/quiet" 2>"$tmp/err"); rc=$?
  # a lock that converts a time to cycles at init may calibrate the cycle
  # counter (no thread, no pinning) and cache that; the spin budget must not
  # have been measured ("figures RATE,0")
  left=$(cat "$cache"/calibration-* 2>/dev/null | sed -n 's/^figures [0-9.]*,\([0-9]*\)$/spin=\1/p')
  cached=none; ls "$cache"/calibration-* >/dev/null 2>&1 && cached=${left:-unreadable}
  if [ $rc -eq 0 ] && [ "$out" = "algo=$a single=1 tasks=1 pins=0 mapped=[]" ] &&
     { [ "$cached" = none ] || [ "$cached" = spin=0 ]; }; then
    echo "ok   $a: never contends: $out, spin budget not measured"
  else
    fail "$a: never contends: status $rc, '$out', cache: $cached, stderr: $(head -c 200 "$tmp/err" | tr '\n' '|')"
  fi
done

# ---- 2. the figures: measured once, then from the cache --------------------------
src_of() { sed -n 's/.*"source": "\([^"]*\)".*/\1/p'; }
c2="$tmp/c2"
s=$(LIBLOCK_CACHE_DIR="$c2" "$info" --spin-budget | src_of)
[ "$s" = measured ] || fail "empty cache: source '$s', want measured"
f=$(ls "$c2"/calibration-* 2>/dev/null | head -1)
[ -n "$f" ] && [ -f "$f" ] || fail "empty cache: no cache file written in $c2"
if [ -n "$f" ]; then
  perm=$(stat -c %a "$f")
  [ "$perm" = 600 ] || fail "cache file mode $perm, want 600"
  s=$(LIBLOCK_CACHE_DIR="$c2" "$info" --spin-budget | src_of)
  [ "$s" = cache ] || fail "second process: source '$s', want cache"
  s=$(LIBLOCK_CALIBRATION=2.5,12345 LIBLOCK_CACHE_DIR="$c2" "$info" --spin-budget)
  case "$s" in *'"spin_budget_ns": 12345, "source": "LIBLOCK_CALIBRATION"'*) ;; *) fail "LIBLOCK_CALIBRATION not used: $s";; esac
  good=$(cat "$f")
  # another machine's file: not used (and replaced by a new measurement)
  printf '%s\n' "$good" | sed 's/^key .*/key another-machine|1|2|x86_64|2/' > "$f"
  s=$(LIBLOCK_CACHE_DIR="$c2" "$info" --spin-budget | src_of)
  [ "$s" = measured ] || fail "another machine's cache: source '$s', want measured"
  grep -q another-machine "$f" && fail "another machine's cache file was not replaced"
  # malformed figures: not used
  printf '%s\n' "$good" | sed 's/^figures .*/figures 2.5,-3/' > "$f"
  s=$(LIBLOCK_CACHE_DIR="$c2" "$info" --spin-budget | src_of)
  [ "$s" = measured ] || fail "malformed cache: source '$s', want measured"
  # a symlink under the file's name: not followed, replaced
  printf '%s\n' "$good" > "$tmp/elsewhere"
  rm -f "$f"; ln -s "$tmp/elsewhere" "$f"
  s=$(LIBLOCK_CACHE_DIR="$c2" "$info" --spin-budget | src_of)
  [ "$s" = measured ] || fail "symlinked cache: source '$s', want measured"
  [ -L "$f" ] && fail "the symlink is still there: the cache was not rewritten by rename"
  [ "$(cat "$tmp/elsewhere")" = "$good" ] || fail "the symlink's target was written through"
fi
# a contended program (two threads, one mutex) with no cache measures once and writes it
cat > "$tmp/contend.c" <<'EOF'
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long n;
static int arrived;
/* main holds m until every worker is about to lock it (and a little longer),
 * so at least one lock() waits however the threads are scheduled */
static void *work(void *a) { (void)a; __atomic_add_fetch(&arrived, 1, __ATOMIC_SEQ_CST); for (int i = 0; i < 200000; i++) { pthread_mutex_lock(&m); n++; pthread_mutex_unlock(&m); } return NULL; }
int main(void) { pthread_t t[4]; pthread_mutex_lock(&m); for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, work, NULL); while (__atomic_load_n(&arrived, __ATOMIC_SEQ_CST) < 4) usleep(1000); usleep(50000); pthread_mutex_unlock(&m); for (int i = 0; i < 4; i++) pthread_join(t[i], NULL); printf("%ld\n", n); return 0; }
EOF
cc -O1 -pthread -o "$tmp/contend" "$tmp/contend.c" || { echo "FAIL: could not build contend"; exit 1; }
c3="$tmp/c3"
out=$(LIBLOCK_CACHE_DIR="$c3" LD_PRELOAD="$lib" LIBLOCK_LOCK=mcs timeout -k 2 60 "$tmp/contend"); rc=$?
[ $rc -eq 0 ] && [ "$out" = 800000 ] || fail "contended program: status $rc, output '$out'"
ls "$c3"/calibration-* >/dev/null 2>&1 || fail "contended program: no figures cached (expected: measured on first need)"

# ---- 3. LIBLOCK_SPIN_NS out of range ------------------------------------------------
err=$(LIBLOCK_SPIN_NS=-5 LIBLOCK_CACHE_DIR="$c2" "$info" --spin-budget 2>&1 >/dev/null)
case "$err" in
  *LIBLOCK_SPIN_NS*measured*) case "$err" in *"using -1"*) fail "LIBLOCK_SPIN_NS=-5: says 'using -1': $err";; esac ;;
  *) fail "LIBLOCK_SPIN_NS=-5: warning does not say the budget is measured: '$err'";;
esac

# ---- 4. liblock run hands the figures down --------------------------------------------
if [ -x "$root/tools/liblock" ]; then
  c4="$tmp/c4"
  out=$(LIBLOCK_BUILD="$build" LIBLOCK_CACHE_DIR="$c4" "$root/tools/liblock" run --lock mcs -- sh -c 'echo "$LIBLOCK_CALIBRATION"')
  [[ "$out" =~ ^[0-9.]+,[0-9]+$ ]] || fail "liblock run: LIBLOCK_CALIBRATION in the program is '$out'"
  out2=$(LIBLOCK_BUILD="$build" LIBLOCK_CACHE_DIR="$c4" "$root/tools/liblock" run --lock mcs -- sh -c 'echo "$LIBLOCK_CALIBRATION"')
  [ "$out2" = "$out" ] || fail "liblock run: second run got '$out2', first '$out' (the cache was not used)"
fi
[ $fails -eq 0 ] && echo "test_startup: all passed" || echo "test_startup: $fails failed"
[ $fails -eq 0 ]
