/*
 * calibration.c - the two machine figures the library needs (the cycle
 * counter's rate, platform.c; the spin budget, one cross-CPU futex wake-up,
 * src/core/wait.c), found without measuring when someone measured before.
 *
 * Measuring costs about 3 ms and two helper threads pinned to two CPUs;
 * under `liblock run` every process of a shell script or a `make` would pay
 * it.  So a figure is looked for, in this order, only when it is first
 * needed (a contended wait, a lock that converts a time to cycles):
 *   1. LIBLOCK_CALIBRATION="CYCLES_PER_NS,SPIN_NS" in the environment, which
 *      `liblock run` sets once for the program and all its children
 *      (`liblock-info --calibration` prints it);
 *   2. the cache file of this machine and boot, written by the first
 *      process that measured;
 *   3. a measurement, whose result is then written to the cache.
 * Either number may be 0 (not known yet; the cache holds a cycle rate as
 * soon as one was calibrated, the spin budget once one was measured).
 *
 * The cache: $LIBLOCK_CACHE_DIR, else $XDG_CACHE_HOME/liblock, else
 * $HOME/.cache/liblock; one file per host name ("calibration-HOST", so a
 * home directory shared by several machines holds one file each).  The
 * file names the machine it was measured on (boot id, kernel release and
 * version, architecture, online CPUs); a file naming another is ignored and
 * replaced, so a reboot (a new boot id: the kernel may calibrate its own
 * clock differently, the machine may be other hardware under the same
 * installation) measures once more.  Reading: O_NOFOLLOW, a regular file
 * owned by the caller's effective user, at most 1 KiB, every field checked
 * for range; anything else is "no cache".  Writing: a private temporary file
 * (mkstemp, mode 0600) in the same directory renamed over the old one, so a
 * reader sees the old file or the new one, never half of one, and a symlink
 * planted under the final name is replaced, not followed.  Failure to write
 * is silent: the next process measures again.
 *
 * Concurrency: lookups are idempotent and race-free by construction (each
 * caller reads the environment and the file into its own buffer); callers
 * (ll_cycles_per_ns, ll_spin_budget_cycles) keep their own once-only state.
 */
#include "internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#define CACHE_MAX 1024

static int valid_cpn(double v) { return v > 0.01 && v < 100.0; }
static int valid_spin(double v) { return v >= 1.0 && v <= 60e9; }

/* "CYCLES_PER_NS,SPIN_NS" (either may be 0: unknown); 0 if well formed. */
static int parse_pair(const char *s, struct ll_calibration *out)
{
    char *end;
    double c = strtod(s, &end);
    if (end == s || *end != ',')
        return -1;
    const char *p = end + 1;
    double n = strtod(p, &end);
    if (end == p || *end)
        return -1;
    if ((c != 0 && !valid_cpn(c)) || (n != 0 && !valid_spin(n)) || c < 0 || n < 0)
        return -1;
    out->cycles_per_ns = c;
    out->spin_ns = (uint64_t)n;
    return 0;
}

/* What identifies this machine and boot, one line without spaces. */
static int machine_key(char *buf, size_t n)
{
    struct utsname u;
    if (uname(&u) != 0)
        return -1;
    char boot[64];
    ll_read_file("/proc/sys/kernel/random/boot_id", boot, sizeof boot);
    boot[strcspn(boot, "\n")] = '\0';
    int w = snprintf(buf, n, "%s|%s|%s|%s|%d", boot[0] ? boot : "noboot", u.release, u.version, u.machine,
                     ll_ncpus());
    if (w < 0 || (size_t)w >= n)
        return -1;
    for (char *p = buf; *p; p++)
        if (*p == ' ' || *p == '\n' || *p == '\t')
            *p = '_';
    return 0;
}

static int cache_dir(char *buf, size_t n)
{
    const char *d = getenv("LIBLOCK_CACHE_DIR");
    int w;
    if (d && *d)
        w = snprintf(buf, n, "%s", d);
    else if ((d = getenv("XDG_CACHE_HOME")) && d[0] == '/')
        w = snprintf(buf, n, "%s/liblock", d);
    else if ((d = getenv("HOME")) && d[0] == '/')
        w = snprintf(buf, n, "%s/.cache/liblock", d);
    else
        return -1;
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

static int cache_path(char *buf, size_t n)
{
    char dir[512];
    struct utsname u;
    if (cache_dir(dir, sizeof dir) != 0 || uname(&u) != 0)
        return -1;
    for (char *p = u.nodename; *p; p++)
        if (*p == '/' || (*p == '.' && p == u.nodename))
            *p = '_';
    int w = snprintf(buf, n, "%s/calibration-%s", dir, u.nodename[0] ? u.nodename : "host");
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* The cache of this machine; 0 if found and valid. */
static int cache_read(struct ll_calibration *out)
{
    char path[600], key[512], buf[CACHE_MAX + 1];
    if (cache_path(path, sizeof path) != 0 || machine_key(key, sizeof key) != 0)
        return -1;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t k = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && st.st_size <= CACHE_MAX)
        k = read(fd, buf, CACHE_MAX);
    close(fd);
    if (k <= 0)
        return -1;
    buf[k] = '\0';
    /* "liblock-calibration 1\nkey KEY\nfigures C,N\n" */
    char fkey[512], figs[128];
    if (sscanf(buf, "liblock-calibration 1\nkey %511s\nfigures %127s\n", fkey, figs) != 2)
        return -1;
    if (strcmp(fkey, key) != 0)
        return -1;
    return parse_pair(figs, out);
}

static void mkdir_parent_and(const char *dir)
{
    if (mkdir(dir, 0700) == 0 || errno != ENOENT)
        return;
    char parent[512];
    snprintf(parent, sizeof parent, "%s", dir);
    char *slash = strrchr(parent, '/');
    if (!slash || slash == parent)
        return;
    *slash = '\0';
    (void)mkdir(parent, 0700); /* $HOME/.cache may not exist yet; one level only */
    (void)mkdir(dir, 0700);
}

int ll_calibration_store(const struct ll_calibration *c)
{
    LL_KEEP_ERRNO;
    LL_NO_CANCEL;
    char dir[512], path[600], tmp[600], key[512], text[CACHE_MAX];
    struct ll_calibration old, merged = *c;
    if (cache_read(&old) == 0) { /* keep what another process knew and we do not */
        if (merged.cycles_per_ns <= 0)
            merged.cycles_per_ns = old.cycles_per_ns;
        if (!merged.spin_ns)
            merged.spin_ns = old.spin_ns;
    }
    c = &merged;
    if (cache_dir(dir, sizeof dir) != 0 || cache_path(path, sizeof path) != 0 || machine_key(key, sizeof key) != 0)
        return -1;
    int len = snprintf(text, sizeof text, "liblock-calibration 1\nkey %s\nfigures %.6f,%llu\n", key, c->cycles_per_ns,
                       (unsigned long long)c->spin_ns);
    if (len < 0 || len >= (int)sizeof text)
        return -1;
    mkdir_parent_and(dir);
    if (snprintf(tmp, sizeof tmp, "%s/.calibration-XXXXXX", dir) >= (int)sizeof tmp)
        return -1;
    int fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600, O_EXCL: ours alone */
    if (fd < 0)
        return -1;
    int ok = write(fd, text, (size_t)len) == len;
    ok &= close(fd) == 0;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The lookup, done once per process: the environment and the file do not
 * change under us in a way we need to follow (a figure measured by this
 * process goes to its callers' own state).  Racing first callers compute
 * the same result; the fields are atomics written before `looked` (release)
 * and read after it (acquire). */
static _Atomic int looked;           /* 0 not yet, 1 found, -1 nothing */
static _Atomic double found_cpn;
static _Atomic uint64_t found_spin;
static const char *_Atomic found_source;

static int lookup_now(struct ll_calibration *out, const char **source)
{
    out->cycles_per_ns = 0;
    out->spin_ns = 0;
    const char *e = getenv("LIBLOCK_CALIBRATION");
    if (e && *e) {
        if (parse_pair(e, out) == 0 && out->cycles_per_ns > 0 && out->spin_ns) {
            *source = "LIBLOCK_CALIBRATION";
            return 0;
        }
        ll_warn_once("LIBLOCK_CALIBRATION",
                     "liblock: LIBLOCK_CALIBRATION=\"%s\" is not CYCLES_PER_NS,SPIN_NS; ignored (figures from the "
                     "cache, else measured)",
                     e);
        out->cycles_per_ns = 0;
        out->spin_ns = 0;
    }
    if (cache_read(out) == 0) {
        *source = "cache";
        return 0;
    }
    return -1;
}

int ll_calibration_lookup(struct ll_calibration *out, const char **source)
{
    int st = atomic_load_explicit(&looked, memory_order_acquire);
    if (!st) {
        LL_KEEP_ERRNO;
        LL_NO_CANCEL;
        const char *src = NULL;
        struct ll_calibration c;
        st = lookup_now(&c, &src) == 0 ? 1 : -1;
        atomic_store_explicit(&found_cpn, c.cycles_per_ns, memory_order_relaxed);
        atomic_store_explicit(&found_spin, c.spin_ns, memory_order_relaxed);
        atomic_store_explicit(&found_source, src, memory_order_relaxed);
        atomic_store_explicit(&looked, st, memory_order_release);
    }
    out->cycles_per_ns = atomic_load_explicit(&found_cpn, memory_order_relaxed);
    out->spin_ns = atomic_load_explicit(&found_spin, memory_order_relaxed);
    *source = atomic_load_explicit(&found_source, memory_order_relaxed);
    return st > 0 ? 0 : -1;
}

/* fork: the child inherits the parent's lookup, which is right (same
 * machine, same environment until it execs, and exec starts afresh). */
