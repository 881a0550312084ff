#!/usr/bin/env bash
# Install what liblock needs to build, test and plot, when it is missing.
# Debian packages: build tools, hwloc/libnuma headers, bc, python3-clang
# (libclang's Python bindings, for `liblock transform`); a deb-src entry for
# `apt-get source memcached` when apt has none; Python: matplotlib.
# libdw-dev/libelf-dev (elfutils): file:line of lock sites in the preload libraries.
set -eu
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential pkg-config libhwloc-dev libnuma-dev libdw-dev libelf-dev bc procps python3-clang; do have "$p" || need+=("$p"); done
for extra in ${LIBLOCK_EXTRA_DEPS:-}; do have "$extra" || need+=("$extra"); done
# Test-only packages: real programs run under the interposer (tests/test_interpose.sh).
# libsqlite3-dev: the sqlite3 program of the application benchmark (bench/apps/sqlite_threads.c).
# libevent-dev, dpkg-dev, perl: `liblock bench apps memcached` builds memcached from Debian's source
# package (apt-get source) and runs its Perl test suite; libmemcached-tools has memcslap.
LIBLOCK_TEST_DEPS=${LIBLOCK_TEST_DEPS-memcached libmemcached-tools kyotocabinet-utils libsqlite3-dev libevent-dev dpkg-dev perl}
for extra in $LIBLOCK_TEST_DEPS; do have "$extra" || need+=("$extra"); done
# `apt-get source` needs a deb-src entry; Debian images ship only deb entries.
have_src() { grep -rqsE '^[[:space:]]*(Types:.*deb-src|deb-src[[:space:]])' /etc/apt/sources.list /etc/apt/sources.list.d/; }
add_src() {
  local d=/etc/apt/sources.list.d
  if [ -f "$d/debian.sources" ]; then    # deb822 (Debian 12+): the same entries as deb-src
    sed -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' "$d/debian.sources" >"$d/liblock-src.sources"
  elif grep -qsE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list; then   # one-line format
    sed -nE 's/^[[:space:]]*deb[[:space:]]+(.*)/deb-src \1/p' /etc/apt/sources.list >"$d/liblock-src.list"
  else
    echo "liblock: no Debian 'deb' entry to derive a deb-src entry from; add one for apt-get source" >&2; return 1
  fi
  echo "liblock: added a deb-src entry ($(ls "$d"/liblock-src.* | head -1)) for apt-get source"
}
need_src=0; have_src || need_src=1
if [ ${#need[@]} -gt 0 ] || [ $need_src -eq 1 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    [ ${#need[@]} -gt 0 ] && echo "liblock: missing packages: ${need[*]} (run as root or install them)" >&2
    [ $need_src -eq 1 ] && echo "liblock: no deb-src entry for apt-get source (run as root)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  [ $need_src -eq 1 ] && add_src
  apt-get update -qq >/dev/null
  if [ ${#need[@]} -gt 0 ]; then
    echo "liblock: installing ${need[*]}"
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "liblock: installing matplotlib (pip)"
  python3 -m pip install -q matplotlib 2>/dev/null || python3 -m pip install -q --break-system-packages matplotlib
fi
