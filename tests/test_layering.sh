#!/bin/bash
# test_layering.sh - the preload layers reach algorithms only through
# struct ll_ops (docs/internals.md, "Layers").
#
# The code of src/shim/, src/profile/ and src/interpose/ (comments removed
# by the preprocessor, string literals kept) must name no algorithm of the
# registry (`tools/liblock list`): neither as a string ("rcl", "cc-synch")
# nor as an identifier or identifier prefix (ll_ops_posix, rcl_tls,
# mcscr_...), nor the private prefixes of the runtimes and algorithm files
# (mps_, ccs_, fc_, ...); and must include nothing from src/locks/ or
# src/runtime/.  What such code needs of an algorithm is a field or a hook
# of struct ll_ops, or a core function (src/internal.h).  And src/shim/ and
# src/interpose/ include nothing of src/profile/: the profiler attaches
# through the shim's observer contract (src/shim/observer.h), with no
# #if LL_SHIM_PROFILE inside a shim function and one struct ip_mutex.
. "$(dirname "$0")/lib.sh" "$@"

dirs="src/shim src/profile src/interpose"
names=$("$root/tools/liblock" list 2>/dev/null | awk 'NR > 1 && NF == 0 { exit } NR > 1 { print $1 }')
[ -n "$names" ] || { fail "tools/liblock list gave no algorithm names"; finish; }
echo "$names" | grep -qx rcl || fail "the registry lists no rcl (is the list's format still parsed?)"

# Identifier prefixes of the algorithms (those of the functions each ops
# table points to: mps_, ccs_, mcscr_, ...) and of the runtimes (rcl_,
# mps_, mpserver_, and each directory name under src/runtime/).
prefixes=$( (find src/locks -name '*.c' -exec grep -hoE '\.(init|lock) *= *(ll_)?[a-z][a-z0-9]*_' {} + |
        sed -E 's/.*= *//; s/^ll_//; s/_$//'
    printf '%s\n' rcl mps mpserver
    [ -d src/runtime ] && ls src/runtime) | grep -E '^[a-z][a-z0-9]+$' | sort -u)
[ -n "$prefixes" ] || fail "found no identifier prefixes in src/locks or src/runtime"

pattern_names=$(echo "$names" | sed 's/-/[-_]/g' | paste -sd'|')
pattern_prefixes=$(echo "$prefixes" | paste -sd'|')
# Strings: "NAME"; identifiers: ll_ops_NAME, NAME_xxx, xxx_NAME (word
# boundaries keep LIBLOCK_WAIT_SPIN or "spin-then-park" out).
re_name="(\"($pattern_names)\")|\\bll_ops_($(echo "$names" | tr - _ | paste -sd'|'))\\b"
re_prefix="\\b(ll_)?($pattern_prefixes)_[a-z0-9_]+\\b"

for f in $(find $dirs -name '*.[ch]' | sort); do
    code=$(gcc -fpreprocessed -dD -E -P "$f" 2>/dev/null) || { fail "$f: gcc -fpreprocessed failed"; continue; }
    hit=$(echo "$code" | grep -nE '^\s*#\s*include\s*"(\.\./)*(src/)?(locks|runtime|rcl|mpserver|transport)/' | head -3)
    if [ -n "$hit" ]; then fail "$f includes an algorithm or runtime header: $hit"; else ok; fi
    case "$f" in
    src/profile/*) ;;
    *)  # the profiler observes the shim (src/shim/observer.h); the shim never includes it
        hit=$(echo "$code" | grep -nE '^\s*#\s*include\s*"(\.\./)*(src/)?profile/' | head -3)
        if [ -n "$hit" ]; then fail "$f includes the profiler: $hit"; else ok; fi ;;
    esac
    hit=$(echo "$code" | grep -noE "$re_name" | head -3 | paste -sd' ')
    if [ -n "$hit" ]; then fail "$f names an algorithm: $hit"; else ok; fi
    hit=$(echo "$code" | grep -noE "$re_prefix" | head -3 | paste -sd' ')
    if [ -n "$hit" ]; then fail "$f uses an algorithm's or runtime's identifier: $hit"; else ok; fi
    # the observer's paths in the shim test the constant SHIM_OBSERVED
    # (src/shim/observer.h), never #ifdef inside a function: braces are
    # counted on the comment-stripped code
    case "$f" in
    src/shim/*)
        hit=$(echo "$code" | awk '/^[ \t]*#[ \t]*if.*LL_SHIM_PROFILE/ { if (depth > 0) print NR": "$0 }
            { n = gsub(/\{/, "{"); m = gsub(/\}/, "}"); depth += n - m }' | head -3 | paste -sd' ')
        if [ -n "$hit" ]; then fail "$f: #if LL_SHIM_PROFILE inside a function or initializer: $hit"; else ok; fi ;;
    esac
done
# one layout of the wrapper for both preload libraries
n=$(gcc -fpreprocessed -dD -E -P src/shim/shim.h 2>/dev/null | grep -c '^struct ip_mutex {')
if [ "$n" = 1 ]; then ok; else fail "src/shim/shim.h defines struct ip_mutex $n times (one layout wanted)"; fi
finish
