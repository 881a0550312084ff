#!/usr/bin/env bash
# make install into a temporary prefix, then build and run a tiny program
# against the installed copy with pkg-config, and run the installed command.
. "$(dirname "$0")/lib.sh" "$@"
set -e
prefix=$tmp
make -s install PREFIX="$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cat > "$prefix/tiny.c" <<'C'
#include <liblock.h>
#include <stdio.h>
static long counter;
static void *cs(void *a) { counter += (long)a; return (void *)counter; }
int main(void)
{
    liblock_t l;
    if (liblock_init(&l, "mcs", NULL)) return 1;
    for (long i = 1; i <= 10; i++) liblock_execute(&l, cs, (void *)i);
    if (liblock_lock(&l) || liblock_unlock(&l) || liblock_destroy(&l)) return 2;
    printf("%ld\n", counter);
    return counter == 55 ? 0 : 3;
}
C
cc "$prefix/tiny.c" -o "$prefix/tiny" $(pkg-config --cflags --libs liblock)
out=$("$prefix/tiny")
[ "$out" = 55 ] || { echo "test_install: tiny program printed '$out'"; exit 1; }
"$prefix/bin/liblock" list | grep -q '^mcs ' || { echo "test_install: installed 'liblock list' does not list mcs"; exit 1; }
# the installed `liblock transform`: a transformed file builds with pkg-config
# and runs its critical section under the installed interposer on rcl
cat > "$prefix/cs.c" <<'C'
#include <pthread.h>
#include <stdio.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
int main(void)
{
    long n = 0;
    for (int i = 0; i < 100; i++) {
        pthread_mutex_lock(&m);
        n += i;
        pthread_mutex_unlock(&m);
    }
    printf("%ld\n", n);
    return 0;
}
C
# the installed `liblock profile`: the installed runtime and shipped thresholds, exact count
cc -g -pthread "$prefix/cs.c" -o "$prefix/cs0"
out=$(XDG_CACHE_HOME="$prefix/cache" "$prefix/bin/liblock" profile --json "$prefix/p.json" -- "$prefix/cs0" 2>"$prefix/p.err")
[ "$out" = 4950 ] && grep -q "shipped defaults" "$prefix/p.err" &&
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["locks"][0]["acquisitions"] == 100' "$prefix/p.json" ||
  { echo "test_install: installed 'liblock profile' failed: $out $(cat "$prefix/p.err")"; exit 1; }
"$prefix/bin/liblock" transform --in-place "$prefix/cs.c" 2>/dev/null
grep -q liblock_execute_mutex "$prefix/cs.c" || { echo "test_install: installed 'liblock transform' did not transform"; exit 1; }
cc "$prefix/cs.c" -o "$prefix/cs" $(pkg-config --cflags --libs liblock)
out=$("$prefix/bin/liblock" run --lock rcl --wait yield -- "$prefix/cs")
[ "$out" = 4950 ] || { echo "test_install: transformed program printed '$out' under rcl"; exit 1; }
rc=0; "$prefix/bin/liblock" oncpu status >"$prefix/oncpu.out" || rc=$?
{ [ $rc -eq 0 ] || [ $rc -eq 3 ]; } && grep -q '^loaded: ' "$prefix/oncpu.out" || { echo "test_install: installed 'liblock oncpu status' failed ($rc)"; exit 1; }
echo "test_install: ok (pkg-config build against $prefix, installed liblock list, profile, transform and oncpu status)"
