#!/usr/bin/env bash
# Install what liblock needs to build, test and plot, when it is missing.
# Debian packages: build tools, hwloc/libnuma headers, bc, python3-clang
# (libclang's Python bindings, for `liblock transform`); Python: matplotlib.
# libdw-dev/libelf-dev (elfutils): file:line of lock sites in the preload libraries.
set -eu
need=()
have() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for p in build-essential pkg-config libhwloc-dev libnuma-dev libdw-dev libelf-dev bc procps python3-clang; do have "$p" || need+=("$p"); done
for extra in ${LIBLOCK_EXTRA_DEPS:-}; do have "$extra" || need+=("$extra"); done
# Test-only packages: real programs run under the interposer (tests/test_interpose.sh).
# libsqlite3-dev: the sqlite3 program of the application benchmark (bench/apps/sqlite_threads.c).
LIBLOCK_TEST_DEPS=${LIBLOCK_TEST_DEPS-memcached libmemcached-tools kyotocabinet-utils libsqlite3-dev}
for extra in $LIBLOCK_TEST_DEPS; do have "$extra" || need+=("$extra"); done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "liblock: missing packages: ${need[*]} (run as root or install them)" >&2; exit 1
  fi
  echo "liblock: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if ! python3 -c 'import matplotlib' 2>/dev/null; then
  echo "liblock: installing matplotlib (pip)"
  python3 -m pip install -q matplotlib 2>/dev/null || python3 -m pip install -q --break-system-packages matplotlib
fi
