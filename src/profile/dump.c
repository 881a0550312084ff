/*
 * dump.c - when and where the profiler's raw report (built by report.c,
 * docs/profile-runtime.md) is written: to LIBLOCK_PROFILE_OUT, through a
 * fresh temporary and rename, when the program ends: exit() from any
 * thread or return from main (on_exit), _exit or _Exit (wrapped), a fatal
 * signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT: the
 * handler writes, then the signal is raised again with its default action
 * so the exit status is the program's); and as a snapshot PATH.usr1.N on
 * SIGUSR1, after which the program continues.  A child made by fork
 * writes PATH.PID with what it did after the fork.
 *
 * The report is built after the fact from the records (record.c), so the
 * lock path never waits for it.  Writing from a signal handler is best
 * effort: a handler that interrupted the allocator or libdw may not be
 * able to finish.
 */
#include "shim/shim.h"
#include "profile.h"
#include "json.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>

static char out_path[4096];
static char base_path[sizeof out_path - 40]; /* LIBLOCK_PROFILE_OUT as given */
static int have_out;
static _Atomic int final_done;
static _Atomic int usr1_n;
static _Atomic int dumping;
static char **saved_argv;
static int saved_argc;

/* A new temporary file beside path, for the report to be renamed over path.
 * The output directory may be shared (/tmp): a fixed name such as PATH.tmp
 * opened with O_TRUNC would follow a symbolic link planted there by another
 * user and overwrite its target.  So the name is fresh (pid, clock, counter)
 * and the file is created with O_EXCL (never an existing file, never through
 * a symbolic link) and O_NOFOLLOW; on EEXIST another name is tried.  The
 * final rename replaces whatever is at path - a symbolic link included -
 * without following it.  Only async-signal-safe calls (signal handlers
 * write reports).  Returns the descriptor (name in tmp) or -1 with errno. */
static int open_private_tmp(const char *path, char *tmp, size_t n)
{
    /* distinct names across threads and handlers; relaxed: an atomic
     * increment is unique whatever the order, and nothing else is published */
    static _Atomic unsigned seq;
    for (int attempt = 0; attempt < 100; attempt++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        unsigned r = (unsigned)ts.tv_nsec * 2654435761u ^ (unsigned)ts.tv_sec ^
                     atomic_fetch_add_explicit(&seq, 1, memory_order_relaxed) * 40503u;
        int k = snprintf(tmp, n, "%s.%d.%08x.tmp", path, (int)getpid(), r);
        if (k < 0 || (size_t)k >= n) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

static void write_report(const char *path, const char *how, int status, int sig)
{
    struct lp_json b = {0};
    lp_report_build(&b, how, status, sig, saved_argc, saved_argv);
    if (b.oom) {
        fprintf(stderr, "liblock-profile: out of memory writing the report\n");
        free(b.p);
        return;
    }
    char tmp[sizeof out_path + 48];
    int fd = open_private_tmp(path, tmp, sizeof tmp);
    int ok = fd >= 0;
    for (size_t off = 0; ok && off < b.n;) {
        ssize_t w = write(fd, b.p + off, b.n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            ok = 0;
        else
            off += (size_t)w;
    }
    if (fd >= 0 && close(fd) != 0)
        ok = 0;
    if (ok && rename(tmp, path) != 0)
        ok = 0;
    if (!ok) {
        fprintf(stderr, "liblock-profile: cannot write %s (%s)\n", path, strerror(errno));
        if (fd >= 0)
            unlink(tmp); /* ours: created by open_private_tmp */
    }
    free(b.p);
}

/* The final report, once. */
static void dump_final(const char *how, int status, int sig)
{
    if (!lp.started || !have_out || atomic_exchange(&final_done, 1))
        return;
    int saved = errno;
    ip_in_setup++;
    atomic_fetch_add(&dumping, 1);
    write_report(out_path, how, status, sig);
    atomic_fetch_sub(&dumping, 1);
    ip_in_setup--;
    errno = saved;
}

static void on_exit_fn(int status, void *arg)
{
    (void)arg;
    dump_final("exit", status, -1);
}

static void (*real__exit)(int);
static void (*real__Exit)(int);

LL_EXPORT void _exit(int status)
{
    dump_final("_exit", status, -1);
    if (!real__exit)
        real__exit = (void (*)(int))dlsym(RTLD_NEXT, "_exit");
    real__exit(status);
    __builtin_unreachable();
}

LL_EXPORT void _Exit(int status)
{
    dump_final("_exit", status, -1);
    if (!real__Exit)
        real__Exit = (void (*)(int))dlsym(RTLD_NEXT, "_Exit");
    real__Exit(status);
    __builtin_unreachable();
}

static const int fatal[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT};

static void on_fatal(int sig)
{
    /* SA_RESETHAND has restored the default action: write, then raise the
     * signal again (delivered when the handler returns) */
    dump_final("signal", -1, sig);
    raise(sig);
}

static void on_usr1(int sig)
{
    (void)sig;
    if (!have_out)
        return;
    int saved = errno;
    char p[sizeof out_path + 32];
    snprintf(p, sizeof p, "%s.usr1.%d", out_path, atomic_fetch_add(&usr1_n, 1) + 1);
    ip_in_setup++;
    write_report(p, "usr1", -1, -1);
    ip_in_setup--;
    errno = saved;
}

/* argv from /proc/self/cmdline (a preloaded constructor has no argv) */
static void read_argv(void)
{
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    for (ssize_t r; s && (r = read(fd, s + n, cap - n - 1)) > 0;) {
        n += (size_t)r;
        if (n + 1 == cap) {
            char *ns = realloc(s, cap * 2);
            if (!ns)
                break;
            s = ns;
            cap *= 2;
        }
    }
    close(fd);
    if (!s)
        return;
    s[n] = 0;
    int c = 0;
    for (size_t i = 0; i < n; i++)
        if (!s[i])
            c++;
    saved_argv = calloc((size_t)c + 1, sizeof *saved_argv);
    if (!saved_argv)
        return;
    for (size_t i = 0; i < n && saved_argc < c; i += strlen(s + i) + 1)
        saved_argv[saved_argc++] = s + i;
}

void lp_dump_setup(void)
{
    const char *o = getenv("LIBLOCK_PROFILE_OUT");
    if (!o || !*o) {
        fprintf(stderr, "liblock-profile: LIBLOCK_PROFILE_OUT is not set; no report will be written\n");
        return;
    }
    if (strlen(o) >= sizeof out_path - 40) {
        fprintf(stderr, "liblock-profile: LIBLOCK_PROFILE_OUT is too long; no report will be written\n");
        return;
    }
    strcpy(out_path, o);
    snprintf(base_path, sizeof base_path, "%s", o);
    /* The first profiled process of a run writes PATH; every other process
     * started from it (exec after fork, e.g. a shell's commands) writes
     * PATH.PID, as a forked child does, so none overwrites another. */
    const char *top = getenv("LIBLOCK_PROFILE_PID");
    char me[32];
    snprintf(me, sizeof me, "%d", (int)getpid());
    if (top && *top && strcmp(top, me) != 0) {
        size_t n = strlen(out_path);
        snprintf(out_path + n, sizeof out_path - n, ".%s", me);
    } else {
        setenv("LIBLOCK_PROFILE_PID", me, 1);
    }
    have_out = 1;
    read_argv();
    on_exit(on_exit_fn, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sigemptyset(&sa.sa_mask);
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND;
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++) {
        struct sigaction old;
        /* a disposition the program inherited as ignored stays ignored */
        if (sigaction(fatal[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(fatal[i], &sa, NULL);
    }
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
}

/* In a forked child: a report of its own (PATH.PID), counting from the fork. */
void lp_dump_fork_child(void)
{
    if (have_out)
        snprintf(out_path, sizeof out_path, "%s.%d", base_path, (int)getpid());
    atomic_store(&usr1_n, 0);
    for (struct lp_site *s = lp.sites; s; s = s->next)
        for (struct lp_inst *in = s->insts; in; in = in->next) {
            /* counts from the fork */
            in->contended = in->wait_ns = in->relocks = in->cond_waits = in->cond_wait_ns = in->misses = 0;
            atomic_store(&in->try_fail, 0);
        }
    for (struct lp_site *s = lp.sites; s; s = s->next)
        memset(&s->fallback_h, 0, sizeof s->fallback_h);
    for (struct lp_table *t = atomic_load(&lp.tables); t; t = t->next) {
        t->nheld = 0; /* a mutex held across the fork is not timed in the child */
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i])
                t->slots[i]->acq = t->slots[i]->wait_ns = t->slots[i]->hold_ns = 0;
        for (size_t p = 0; p < t->nipages; p++)
            if (t->ipages[p])
                memset(t->ipages[p], 0, LP_IPAGE * sizeof *t->ipages[p]);
        for (size_t i = 0; i < t->nhists; i++)
            if (t->hists[i])
                memset(t->hists[i], 0, sizeof *t->hists[i]);
    }
}
