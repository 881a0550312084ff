# liblock build.  `make` builds into build/; `make test`; `make demo`;
# `make install PREFIX=...`.  Sources are found by wildcard, so adding an
# algorithm (src/locks/FAMILY/NAME.c), a test (tests/test_NAME.c) or a benchmark
# program (bench/NAME.c, or bench/NAME/main.c with the other .c files of
# bench/NAME/) needs no change here.

CC       ?= cc
CXX      ?= c++
PREFIX   ?= /usr/local
BUILD    ?= build
PYTHON   ?= python3

WARN     := -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers
BASEFLAGS := -std=gnu11 -g -fPIC -pthread -fvisibility=hidden -Iinclude -Isrc -D_GNU_SOURCE $(WARN)
OPT      ?= -O2
EXTRA_CFLAGS ?=

HAVE_HWLOC := $(shell pkg-config --exists hwloc 2>/dev/null && echo 1)
HAVE_NUMA  := $(shell test -f /usr/include/numa.h && echo 1)
DEFS :=
LIBS := -pthread -lm -ldl
# hwloc and libnuma are opened with dlopen on first need (src/platform/platform.c),
# not linked: every program under the interposer would load them at start.
soname = $(shell objdump -p $(1) 2>/dev/null | awk '/SONAME/ {print $$2}')
ifeq ($(HAVE_HWLOC),1)
  HWLOC_SONAME := $(call soname,$(shell pkg-config --variable=libdir hwloc)/libhwloc.so)
  DEFS += -DHAVE_HWLOC $(if $(HWLOC_SONAME),-DLL_HWLOC_SONAME='"$(HWLOC_SONAME)"')
endif
ifeq ($(HAVE_NUMA),1)
  NUMA_SONAME := $(call soname,$(firstword $(wildcard /usr/lib/*/libnuma.so /usr/lib64/libnuma.so /usr/lib/libnuma.so)))
  DEFS += -DHAVE_NUMA $(if $(NUMA_SONAME),-DLL_NUMA_SONAME='"$(NUMA_SONAME)"')
endif
# libdw (elfutils): file:line of lock sites in the preload libraries
# (src/shim/site.c); without it sites are module+offset.
# Opened with dlopen on first need, not linked (like hwloc and libnuma).
HAVE_LIBDW := $(shell test -f /usr/include/elfutils/libdwfl.h && echo 1)
SHIM_LIBS :=
ifeq ($(HAVE_LIBDW),1)
  LIBDW_SONAME := $(call soname,$(firstword $(wildcard /usr/lib/*/libdw.so /usr/lib64/libdw.so /usr/lib/libdw.so)))
  DEFS += $(if $(LIBDW_SONAME),-DHAVE_LIBDW -DLL_LIBDW_SONAME='"$(LIBDW_SONAME)"')
endif
CFLAGS_ALL := $(BASEFLAGS) $(OPT) $(DEFS) $(EXTRA_CFLAGS)
# Objects depend on this stamp, rewritten whenever the flags change (e.g.
# libdw installed after a first build), so a stale build cannot survive.
FLAGS_STAMP := $(BUILD)/flags.stamp
$(shell mkdir -p $(BUILD); echo '$(CFLAGS_ALL) $(SHIM_LIBS)' | cmp -s - $(FLAGS_STAMP) || echo '$(CFLAGS_ALL) $(SHIM_LIBS)' > $(FLAGS_STAMP))

LOCK_SRCS := $(sort $(wildcard src/locks/*/*.c))
LOCK_NAMES := $(basename $(sort $(notdir $(LOCK_SRCS))))
LIB_SRCS  := $(sort $(wildcard src/platform/*.c src/core/*.c src/runtime/rcl/*.c src/runtime/mpserver/*.c src/runtime/transport/*.c)) $(LOCK_SRCS)
LIB_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS)) $(BUILD)/obj/gen/registry.o
# The shared interception layer (src/shim/) is compiled twice: as is for the
# interposer, with -DLL_SHIM_PROFILE (into $(BUILD)/obj-profile) for the profiler,
# whose hooks (src/profile/hooks.h, implementing src/shim/observer.h) are then
# force-included: the shim includes nothing of the profiler's.
SHIM_SRCS := $(sort $(wildcard src/shim/*.c))
INTERPOSE_SRCS := $(sort $(wildcard src/interpose/*.c))
PROFILE_SRCS := $(sort $(wildcard src/profile/*.c))
TEST_SRCS := $(sort $(wildcard tests/test_*.c))
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
# The POSIX conformance programs (tests/posix/, run by tests/test_posix.sh):
# plain pthread/C11 programs, built without liblock, run natively and under
# the interposer.
POSIX_SRCS := $(sort $(wildcard tests/posix/*.c))
POSIX_BINS := $(patsubst tests/posix/%.c,$(BUILD)/tests/posix/%,$(POSIX_SRCS))
TEST_CXX_SRCS := $(sort $(wildcard tests/test_*.cc))
TEST_CXX_BINS := $(patsubst tests/%.cc,$(BUILD)/tests/%,$(TEST_CXX_SRCS))
BENCH_SRCS := $(sort $(wildcard bench/*.c))
BENCH_BINS := $(patsubst bench/%.c,$(BUILD)/bin/%,$(BENCH_SRCS))
# A benchmark program of several files: bench/NAME/main.c and the other
# bench/NAME/*.c, linked into $(BUILD)/bin/NAME.
BENCH_DIRS := $(patsubst bench/%/main.c,%,$(sort $(wildcard bench/*/main.c)))
BENCH_BINS += $(addprefix $(BUILD)/bin/,$(BENCH_DIRS))
# The application benchmark's programs (bench/apps/): ordinary programs that
# know nothing of liblock, run under glibc and under the interposer.  The
# sqlite3 one needs Debian's libsqlite3-dev (scripts/deps.sh).
HAVE_SQLITE := $(shell test -f /usr/include/sqlite3.h && echo 1)
APP_BINS := $(patsubst bench/apps/%.cc,$(BUILD)/bin/apps/%,$(sort $(wildcard bench/apps/*.cc)))
APP_BINS += $(if $(HAVE_SQLITE),$(patsubst bench/apps/%.c,$(BUILD)/bin/apps/%,$(sort $(wildcard bench/apps/*.c))))
TOOL_SRCS := $(sort $(wildcard tools/*.c))
TOOL_BINS := $(patsubst tools/%.c,$(BUILD)/bin/%,$(TOOL_SRCS))

LIB_SO := $(BUILD)/lib/liblock.so
LIB_A  := $(BUILD)/lib/liblock.a
INTERPOSE_SO := $(if $(INTERPOSE_SRCS),$(BUILD)/lib/liblock-interpose.so)
PROFILE_SO := $(if $(PROFILE_SRCS),$(BUILD)/lib/liblock-profile.so)
# Acquisition counter preloaded by `liblock bench apps` (bench/lockcount/).
LOCKCOUNT_SO := $(BUILD)/lib/liblock-lockcount.so

.PHONY: all deps test demo benchmarks memcached-rcl install clean sanitizer-test sanitizer-build ubsan-preload FORCE
all: $(LIB_SO) $(LIB_A) $(INTERPOSE_SO) $(PROFILE_SO) $(LOCKCOUNT_SO) $(TEST_BINS) $(TEST_CXX_BINS) $(POSIX_BINS) $(BENCH_BINS) $(APP_BINS) $(TOOL_BINS)

# The registry is generated from the file names in src/locks/: NAME.c must
# define `const struct ll_ops ll_ops_NAME` (dashes become underscores).
$(BUILD)/gen/registry.c: FORCE
	@mkdir -p $(dir $@)
	@{ echo '/* generated by the Makefile from the files in src/locks; do not edit */'; \
	   echo '#include "internal.h"'; \
	   for n in $(subst -,_,$(LOCK_NAMES)); do echo "extern const struct ll_ops ll_ops_$$n;"; done; \
	   echo 'const struct ll_ops *const ll_registry[] = {'; \
	   for n in $(subst -,_,$(LOCK_NAMES)); do echo "    &ll_ops_$$n,"; done; \
	   echo '    NULL};'; } > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@; rm -f $@.tmp

$(BUILD)/obj/gen/registry.o: $(BUILD)/gen/registry.c src/internal.h include/liblock.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/obj/%.o: %.c src/internal.h include/liblock.h $(wildcard src/*/*.h src/*/*/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -c $< -o $@

$(LIB_SO): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,liblock.so -o $@ $(LIB_OBJS) $(LIBS)

$(LIB_A): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $(LIB_OBJS)

ifneq ($(INTERPOSE_SRCS),)
INTERPOSE_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(INTERPOSE_SRCS) $(SHIM_SRCS))
$(INTERPOSE_SO): $(INTERPOSE_OBJS) $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(INTERPOSE_OBJS) $(LIB_OBJS) -Wl,--as-needed $(LIBS) $(SHIM_LIBS) -ldl $(INTERPOSE_WRAP) $(INTERPOSE_LDFLAGS)
endif
# Every process started under `liblock run` loads the interposer, so its
# loading is part of every start-up (`liblock bench startup`):
#  -z noseparate-code  code and read-only data in one segment: two segments
#      to map instead of four (two mmap calls and two VMAs fewer).  Read-only
#      data becomes executable, as it was for every shared object before
#      binutils 2.31; RELRO is kept.
#  -Bsymbolic-functions  the library's calls to its own exported functions
#      bind at link time: no lazy binding of them when the process starts.
#      Another preloaded library can still interpose them for the program,
#      not for the interposer's own calls (docs/interpose.md, "Start-up").
INTERPOSE_LDFLAGS := -Wl,-z,noseparate-code -Wl,-Bsymbolic-functions
# The library objects linked into the preload libraries call pthread_mutex_*
# and pthread_cond_* themselves; --wrap sends those calls to __wrap_* in
# src/shim/real.c (glibc's functions) instead of the shim's.
INTERPOSE_WRAP := $(foreach f,mutex_init mutex_destroy mutex_lock mutex_trylock mutex_unlock mutex_timedlock \
    mutex_clocklock cond_init cond_destroy cond_wait cond_timedwait cond_clockwait cond_signal cond_broadcast create,-Wl,--wrap=pthread_$(f))

ifneq ($(PROFILE_SRCS),)
PROFILE_OBJS := $(patsubst %.c,$(BUILD)/obj-profile/%.o,$(SHIM_SRCS) $(PROFILE_SRCS))
$(BUILD)/obj-profile/%.o: %.c src/internal.h include/liblock.h $(wildcard src/*/*.h src/*/*/*.h) $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DLL_SHIM_PROFILE -include src/profile/hooks.h -c $< -o $@
$(PROFILE_SO): $(PROFILE_OBJS) $(LIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) -shared -o $@ $(PROFILE_OBJS) $(LIB_OBJS) -Wl,--as-needed $(LIBS) $(SHIM_LIBS) -ldl $(INTERPOSE_WRAP)
endif

# Tests and benchmarks link the static library: they may use internal
# symbols (src/internal.h) and need no LD_LIBRARY_PATH.
$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fvisibility=default -Itests $< -o $@ $(LIB_A) $(LIBS)

$(BUILD)/tests/posix/%: tests/posix/%.c tests/posix/common.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -g -O1 -Wall -Wextra -Wno-unused-function -pthread $< -o $@

$(BUILD)/tests/%: tests/%.cc $(LIB_A)
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -g $(OPT) -pthread -Iinclude -Itests $< -o $@ $(LIB_A) $(LIBS)

$(BUILD)/bin/%: bench/%.c $(LIB_A) $(wildcard bench/*.h bench/*/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fvisibility=default -Ibench $< -o $@ $(LIB_A) $(LIBS)

define BENCH_DIR_RULE
$(BUILD)/bin/$(1): $(wildcard bench/$(1)/*.c bench/$(1)/*.h) $(LIB_A) $(wildcard bench/*.h)
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS_ALL) -fvisibility=default -Ibench $(sort $(wildcard bench/$(1)/*.c)) -o $$@ $$(LIB_A) $$(LIBS)
endef
$(foreach d,$(BENCH_DIRS),$(eval $(call BENCH_DIR_RULE,$(d))))

$(LOCKCOUNT_SO): bench/lockcount/lockcount.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -g $(OPT) -Wall -shared -fPIC $< -o $@ -ldl -pthread

$(BUILD)/bin/apps/%: bench/apps/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -g $(OPT) -Wall -pthread $< -o $@

$(BUILD)/bin/apps/%: bench/apps/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -g $(OPT) -Wall -pthread $< -o $@ -lsqlite3

$(BUILD)/bin/%: tools/%.c $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fvisibility=default $< -o $@ $(LIB_A) $(LIBS)

# liblock-config-check runs the preload libraries' own parser.
$(BUILD)/bin/liblock-config-check: tools/liblock-config-check.c src/shim/site_config.c src/shim/site_config.h $(LIB_A)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -fvisibility=default tools/liblock-config-check.c src/shim/site_config.c -o $@ $(LIB_A) $(LIBS)

deps:
	@scripts/deps.sh

# `make test`: install what is missing, build (normal, ThreadSanitizer and
# AddressSanitizer+UBSan trees), then tests/run.sh runs every test program
# and script under a time bound, the sanitizer subsets at a smaller scale,
# and prints "N passed, N failed".
TSAN_TESTS ?= test_stress test_api test_cond test_wait test_lifo_cond test_fairness test_rcl test_rcl_park test_malthus test_fastwake test_mailbox test_hybrid test_mps_oversub test_fc_park test_cond_requeue test_release_race test_rcl_destroy test_hemlock test_reciprocating test_cna test_hapax test_shfllock test_identity test_auto test_node_reuse
ASAN_TESTS ?= test_threads test_rcl_cpushare test_api test_stress test_rcl test_rcl_park test_parking_oversub test_parking_races test_parking_fifo test_parking_fork test_parking_stray test_parking_clh test_parking_destroy test_parking_warning test_mps_oversub test_fastwake test_hemlock test_cna test_hapax test_shfllock test_auto
TSAN_LIBS := -pthread -lm -fsanitize=thread $(filter-out -pthread -lm,$(LIBS))
ASAN_LIBS := -pthread -lm -fsanitize=address,undefined $(filter-out -pthread -lm,$(LIBS))
# The preload libraries cannot take ASan or TSan (their runtimes must be
# loaded first); the profiler's runs under UBSan (tests/test_profile_ubsan.sh).
UBSAN_LIBS := -pthread -lm -fsanitize=undefined $(filter-out -pthread -lm,$(LIBS))
SAN_ENV = LIBLOCK_TSAN_BUILD=build-tsan LIBLOCK_TSAN_TESTS="$(TSAN_TESTS)" \
          LIBLOCK_ASAN_BUILD=build-asan LIBLOCK_ASAN_TESTS="$(ASAN_TESTS)"
test: deps
	$(MAKE) all
	$(MAKE) sanitizer-build
	$(SAN_ENV) tests/run.sh $(BUILD)

sanitizer-build:
	$(MAKE) BUILD=build-tsan OPT=-O1 EXTRA_CFLAGS="-fsanitize=thread" LIBS="$(TSAN_LIBS)" $(addprefix build-tsan/tests/,$(TSAN_TESTS))
	$(MAKE) BUILD=build-asan OPT=-O1 EXTRA_CFLAGS="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" LIBS="$(ASAN_LIBS)" $(addprefix build-asan/tests/,$(ASAN_TESTS))
	$(MAKE) ubsan-preload

# The programs of the interposer's mutex test (ip_topics in tests/interpose_driver.h),
# which tests/test_profile.sh runs under the profiler.
INTERPOSE_TOPICS := test_interpose test_interpose_types test_interpose_timed test_interpose_cond \
    test_interpose_c11 test_interpose_fork
ubsan-preload:
	$(MAKE) BUILD=build-ubsan OPT=-O1 EXTRA_CFLAGS="-fsanitize=undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer" LIBS="$(UBSAN_LIBS)" build-ubsan/lib/liblock-profile.so $(addprefix build-ubsan/tests/,$(INTERPOSE_TOPICS))

sanitizer-test: sanitizer-build
	$(SAN_ENV) tests/run.sh $(BUILD) --only-sanitizers

demo: deps
	$(MAKE) all
	@scripts/demo.sh $(BUILD)

# Regenerate BENCHMARKS.md: every section's benchmark (about 25 minutes on 2 CPUs), raw output
# under $(BUILD)/results/, the reduced CSVs in bench/report/ (docs/bench.md, "liblock bench report").
# BENCHMARKS_ARGS: options, e.g. --only headline,apps, --from-csv or --quick.
benchmarks: all
	LIBLOCK_BUILD=$(abspath $(BUILD)) tools/liblock bench report $(BENCHMARKS_ARGS)

# liblock transform on Debian's memcached: profile it under memcslap Get and Set, transform the
# critical sections of its hot locks, run its own tests natively, under rcl and mcs, then memcslap
# throughput (docs/memcached.md; tens of minutes, not part of `make test`).  MEMCACHED_ARGS: options.
memcached-rcl: deps
	$(MAKE) all
	LIBLOCK_BUILD=$(abspath $(BUILD)) tools/liblock bench apps memcached $(MEMCACHED_ARGS)

install: $(LIB_SO) $(LIB_A) $(INTERPOSE_SO) $(PROFILE_SO) $(TOOL_BINS) $(BENCH_BINS)
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin \
	    $(DESTDIR)$(PREFIX)/libexec/liblock $(DESTDIR)$(PREFIX)/share/liblock
	install -m 644 include/liblock.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(LIB_SO) $(INTERPOSE_SO) $(PROFILE_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(LIB_A) $(DESTDIR)$(PREFIX)/lib/
	$(if $(strip $(TOOL_BINS) $(BENCH_BINS)),install -m 755 $(TOOL_BINS) $(BENCH_BINS) $(DESTDIR)$(PREFIX)/libexec/liblock/)
	rm -rf $(DESTDIR)$(PREFIX)/share/liblock/liblock_cli && cp -r tools/liblock_cli $(DESTDIR)$(PREFIX)/share/liblock/
	sed -e 's|^INSTALL_PREFIX = None.*|INSTALL_PREFIX = "$(PREFIX)"|' tools/liblock > $(DESTDIR)$(PREFIX)/bin/liblock
	chmod 755 $(DESTDIR)$(PREFIX)/bin/liblock
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBS@|$(LIBS)|g' liblock.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/liblock.pc

clean:
	rm -rf build build-tsan build-asan

FORCE:
