#!/usr/bin/env bash
# test_transform_safety.sh BUILD - `liblock transform` edits files as carefully
# as a compiler (docs/transform.md, "Guarantees"):
#  1. preprocessor conditionals around the lock and the unlock (`#ifdef
#     USE_LOCK`): the section is refused by name and the file is not touched;
#     an output that does not compile (an enum constant of the function the
#     section moves out of) is never written: the section is refused with the
#     compiler's error, the other sections of the run are written;
#  2. bytes: a Latin-1 file with CRLF line endings and no final newline keeps
#     every byte outside the rewritten section (cmp), the Latin-1 literal
#     inside it, and CRLF in the inserted text; a file with nothing to
#     transform is copied byte for byte by --out;
#  3. locals declared inside a section and used after it are hoisted (the
#     program runs in tests/transform/hoist.c; here: the output compiles and the
#     refusals that protect scope, const and arrays are named);
#  4. a binary file, and a file with so many errors that clang stops, are
#     named and refused, with nothing written;
#  and the exit status: 0 all transformed, 1 some refused, 2 error (nothing
#  written, even for the files that were fine); --in-place keeps the mode.
# Each of these failed on the tool before these guarantees (exit 0 with a
# file that does not compile, bytes replaced by U+FFFD, `None:0:0`).
. "$(dirname "$0")/lib.sh" "$@"
liblock="$root/tools/liblock"
export LIBLOCK_BUILD="$build"
CC=${CC:-cc}
# tx ARGS: run the transform with a watchdog; stderr in $tmp/err, status in $rc
tx() { timeout 120 "$liblock" transform "$@" 2>"$tmp/err"; rc=$?; }
compiles() { "$CC" -fsyntax-only -Iinclude "$@" 2>"$tmp/cc.err"; }

# ---- 1. conditionals; the output compiled before it is written -----------------
cat >"$tmp/ifdef.c" <<'EOF'
#include <pthread.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter, total;
void bump(void)
{
#ifdef USE_LOCK
    pthread_mutex_lock(&m);
#endif
    counter++;
#ifdef USE_LOCK
    pthread_mutex_unlock(&m);
#endif
}
void add(long v)
{
    pthread_mutex_lock(&m);
#ifdef USE_LOCK
    total += v;
#else
    total += 2 * v;
#endif
    pthread_mutex_unlock(&m);
}
EOF
cp "$tmp/ifdef.c" "$tmp/ifdef.orig"
tx --only bump --in-place "$tmp/ifdef.c" -- -DUSE_LOCK
[ $rc -eq 1 ] || fail "#ifdef around lock and unlock: exit $rc, expected 1 (refused)"
grep -q "ifdef.c:7: refused: the lock and the unlock are not inside the same preprocessor conditionals" "$tmp/err" ||
    fail "#ifdef around lock and unlock: not refused by name: $(cat "$tmp/err")"
cmp -s "$tmp/ifdef.c" "$tmp/ifdef.orig" || fail "#ifdef around lock and unlock: the file was changed"
compiles -DUSE_LOCK "$tmp/ifdef.c" || fail "#ifdef: the file does not compile any more: $(head -2 "$tmp/cc.err")"
# a conditional wholly inside the section moves with it (and compiles either way)
tx --out "$tmp/o1" "$tmp/ifdef.c" -- -DUSE_LOCK
[ $rc -eq 1 ] || fail "#ifdef file: exit $rc, expected 1 (one transformed, one refused)"
grep -q "1 transformed, 1 refused" "$tmp/err" || fail "#ifdef file: $(tail -1 "$tmp/err")"
compiles -DUSE_LOCK "$tmp/o1/ifdef.c" && compiles "$tmp/o1/ifdef.c" ||
    fail "#if inside a section: output does not compile: $(head -2 "$tmp/cc.err")"

cat >"$tmp/enum.c" <<'EOF'
#include <pthread.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
void step(void)
{
    enum { STEP = 3 };
    pthread_mutex_lock(&m);
    counter += STEP;
    pthread_mutex_unlock(&m);
}
EOF
cat >"$tmp/good.c" <<'EOF'
#include <pthread.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long counter;
void inc(void)
{
    pthread_mutex_lock(&m);
    counter++;
    pthread_mutex_unlock(&m);
}
EOF
cp "$tmp/enum.c" "$tmp/enum.orig"
cp "$tmp/good.c" "$tmp/good.orig"
tx --in-place "$tmp/enum.c" "$tmp/good.c"
[ $rc -eq 1 ] || fail "an output that does not compile: exit $rc, expected 1"
grep -q "enum.c:7: refused: the transformed file does not compile: use of undeclared identifier 'STEP'" "$tmp/err" ||
    fail "an output that does not compile: not refused with the compiler's error: $(cat "$tmp/err")"
cmp -s "$tmp/enum.c" "$tmp/enum.orig" || fail "an output that does not compile was written"
grep -q liblock_execute_mutex "$tmp/good.c" || fail "the file that compiled was not written"
compiles "$tmp/good.c" || fail "good.c transformed does not compile: $(head -2 "$tmp/cc.err")"

# ---- 2. bytes ----------------------------------------------------------------------
# Latin-1 (0xe9 = é), CRLF, no newline at the end
printf '#include <pthread.h>\r\n#include <stdio.h>\r\nconst char *greet = "\351t\351";\r\nstatic pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\r\nstatic long n;\r\nvoid f(void)\r\n{\r\n    pthread_mutex_lock(&m);\r\n    n++;\r\n    puts("caf\351");\r\n    pthread_mutex_unlock(&m);\r\n    puts("apr\350s");\r\n}\r\n/* \377 */ int g(void) { return 1; }' >"$tmp/latin.c"
# same_outside FILE OUT: the bytes of FILE before its function f, between f's
# start and the lock, and after the unlock are those of OUT
same_outside() {
    local o=$1 x=$2 F S E F2
    F=$(grep -abo 'void f(void)' "$o" | cut -d: -f1)
    S=$(grep -abo 'pthread_mutex_lock(&m);' "$o" | cut -d: -f1)
    E=$(( $(grep -abo 'pthread_mutex_unlock(&m);' "$o" | cut -d: -f1) + 25 ))
    F2=$(grep -abo 'void f(void)' "$x" | cut -d: -f1)
    cmp -s <(head -c "$F" "$o") <(head -c "$F" "$x") || fail "$o: bytes before the first change differ"
    cmp -s <(tail -c +$((F+1)) "$o" | head -c $((S-F))) <(tail -c +$((F2+1)) "$x" | head -c $((S-F))) ||
        fail "$o: bytes between the function's start and the lock differ"
    cmp -s <(tail -c +$((E+1)) "$o") <(tail -c $(( $(wc -c <"$o") - E )) "$x") ||
        fail "$o: bytes after the section differ"
}
tx --out "$tmp/o2" "$tmp/latin.c"
[ $rc -eq 0 ] || fail "Latin-1/CRLF file: exit $rc: $(cat "$tmp/err")"
x=$tmp/o2/latin.c
if [ -f "$x" ]; then
    same_outside "$tmp/latin.c" "$x"
    grep -qa $'puts("caf\xe9");' "$x" || fail "the Latin-1 literal inside the section was changed"
    [ "$(grep -c $'\r$' "$x")" = "$(tr -cd '\n' <"$x" | wc -c)" ] || fail "an inserted line does not end with CRLF"
    compiles "$x" || fail "Latin-1/CRLF output does not compile: $(head -2 "$tmp/cc.err")"
else
    fail "Latin-1/CRLF file: no output"
fi
# Latin-1 outside the section only (LF)
printf '#include <pthread.h>\nconst char *greet = "\351t\351";\nstatic pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;\nstatic long n;\nvoid f(void)\n{\n    pthread_mutex_lock(&m);\n    n++;\n    pthread_mutex_unlock(&m);\n}\nconst char *bye = "apr\350s";\n' >"$tmp/latin2.c"
tx --out "$tmp/o2" "$tmp/latin2.c"
[ $rc -eq 0 ] || fail "Latin-1 file: exit $rc: $(cat "$tmp/err")"
[ -f "$tmp/o2/latin2.c" ] && same_outside "$tmp/latin2.c" "$tmp/o2/latin2.c"
# nothing selected: --out copies the file byte for byte
tx --only nothing_named_so --out "$tmp/o3" "$tmp/latin.c"
[ $rc -eq 0 ] || fail "Latin-1 file, nothing selected: exit $rc"
cmp -s "$tmp/latin.c" "$tmp/o3/latin.c" || fail "--out changed the bytes of a file it did not transform"

# ---- 3. hoisting -------------------------------------------------------------------------
cat >"$tmp/hoist.c" <<'EOF'
#include <pthread.h>
#include <stdlib.h>
struct node { struct node *next; int v; };
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static struct node *head;
static int n = 7;
int pop(void)
{
    pthread_mutex_lock(&m);
    struct node *p = head, *q = p ? p->next : NULL;
    head = q;
    pthread_mutex_unlock(&m);
    if (!p)
        return -1;
    int v = p->v;
    free(p);
    return v;
}
int shadow(void)
{
    pthread_mutex_lock(&m);
    int k = n;
    int n = k + 1;
    pthread_mutex_unlock(&m);
    return n;
}
int constant(void)
{
    pthread_mutex_lock(&m);
    const int c = n;
    pthread_mutex_unlock(&m);
    return c;
}
int array(void)
{
    pthread_mutex_lock(&m);
    int a[2] = {n, n};
    pthread_mutex_unlock(&m);
    return a[0];
}
int inner(void)
{
    pthread_mutex_lock(&m);
    if (n) {
        int r = n;
        if (r > 3) {
            pthread_mutex_unlock(&m);
            return r;
        }
    }
    pthread_mutex_unlock(&m);
    return 0;
}
EOF
tx --out "$tmp/o4" --report "$tmp/hoist.json" "$tmp/hoist.c"
[ $rc -eq 1 ] || fail "hoisting: exit $rc, expected 1"
grep -q "1 transformed, 4 refused" "$tmp/err" || fail "hoisting: $(cat "$tmp/err")"
python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["sections"][0]; sys.exit(e["hoisted"] != ["p", "q"])' \
    "$tmp/hoist.json" || fail "hoisting: the report does not list p and q as hoisted"
compiles -Wall -Werror "$tmp/o4/hoist.c" || fail "hoisting: output does not compile: $(head -2 "$tmp/cc.err")"
grep -q '^    struct node \*p;$' "$tmp/o4/hoist.c" || fail "hoisting: no declaration of p before the section"
for want in "hoist.c:21: refused: n, declared inside the section and used after the section (line 25), cannot be hoisted: the name is used inside before its declaration (line 22)" \
            "hoist.c:29: refused: c, declared inside the section and used after the section (line 32), cannot be hoisted: it is const" \
            "hoist.c:36: refused: a, declared inside the section and used after the section (line 39), cannot be hoisted: it is an array with an initialiser" \
            "hoist.c:43: refused: r, declared in a block inside the section, is used in the code after the unlock at line 47 (line 48)"; do
    grep -qF "$want" "$tmp/err" || fail "hoisting: missing '$want' in: $(cat "$tmp/err")"
done

# ---- 4. binary input; errors without a location --------------------------------------
cp "$(type -P true)" "$tmp/bin.c"
cp "$tmp/bin.c" "$tmp/bin.orig"
cp "$tmp/good.orig" "$tmp/good.c"
tx --in-place "$tmp/bin.c" "$tmp/good.c"
[ $rc -eq 2 ] || fail "binary file: exit $rc, expected 2"
grep -q "bin.c: a binary file" "$tmp/err" || fail "binary file not named: $(cat "$tmp/err")"
grep -q "None" "$tmp/err" && fail "binary file: a diagnostic without its file: $(grep None "$tmp/err")"
cmp -s "$tmp/bin.c" "$tmp/bin.orig" || fail "binary file was changed"
cmp -s "$tmp/good.c" "$tmp/good.orig" || fail "an error in one file, yet another was written"
for i in $(seq 40); do echo 'int x = ;'; done >"$tmp/errors.c"
tx "$tmp/errors.c"
[ $rc -eq 2 ] || fail "a file with many errors: exit $rc, expected 2"
grep -q "None" "$tmp/err" && fail "a diagnostic without its file: $(grep None "$tmp/err")"
grep -q "errors.c: error: too many errors emitted" "$tmp/err" || fail "clang's last error not named: $(tail -3 "$tmp/err")"

# ---- exit status 0, mode kept, --help ---------------------------------------------------------
cp "$tmp/good.orig" "$tmp/good.c"
chmod 640 "$tmp/good.c"
tx --in-place "$tmp/good.c"
[ $rc -eq 0 ] || fail "all transformed: exit $rc, expected 0"
[ "$(stat -c %a "$tmp/good.c")" = 640 ] || fail "--in-place changed the mode to $(stat -c %a "$tmp/good.c")"
ls -A "$tmp" | grep -q liblock-tmp && fail "a temporary file was left behind"
"$liblock" transform --help | grep -q "^  2  error" || fail "--help does not document the exit status"

finish
