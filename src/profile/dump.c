/*
 * dump.c - the profiler's raw report (format "liblock-profile-raw/1",
 * described in docs/profile-runtime.md),
 * written to LIBLOCK_PROFILE_OUT (through a fresh temporary and rename) when the
 * program ends: exit() from any thread or return from main (on_exit), _exit
 * or _Exit (wrapped), a fatal signal (SIGSEGV, SIGABRT, SIGBUS, SIGFPE,
 * SIGILL, SIGTERM, SIGINT: handler writes, then the signal is raised again
 * with its default action so the exit status is the program's); and as a
 * snapshot PATH.usr1.N on SIGUSR1, after which the program continues.  A
 * child made by fork writes PATH.PID with what it did after the fork.
 *
 * The report is built after the fact from the records (record.c) and
 * symbolised here with libdw (src/shim/site.c): the lock path never waits
 * for it.  Writing from a signal handler is best effort: a handler that
 * interrupted the allocator or libdw may not be able to finish.
 */
#include "shim/shim.h"
#include "profile.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>

static char out_path[4096];
static char base_path[sizeof out_path - 40]; /* LIBLOCK_PROFILE_OUT as given */
static int have_out;
static _Atomic int final_done;
static _Atomic int usr1_n;
static _Atomic int dumping;
static char **saved_argv;
static int saved_argc;

/* ---- a growable text buffer ------------------------------------------------ */
struct buf {
    char *p;
    size_t n, cap;
    int oom;
};

static void put(struct buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 65536;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void puts_(struct buf *b, const char *s) { put(b, s, strlen(s)); }

static void putf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void putf(struct buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

static void putstr(struct buf *b, const char *s)
{
    if (!s) {
        puts_(b, "null");
        return;
    }
    puts_(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            putf(b, "\\%c", *p);
        else if (*p < 0x20)
            putf(b, "\\u%04x", *p);
        else
            put(b, (const char *)p, 1);
    }
    puts_(b, "\"");
}

/* ---- symbols ------------------------------------------------------------------- */
/* "file:LINE" (or module+0xOFF) and the function of a return address. */
static void code_site(const void *ra, char *site, size_t n, const char **fn)
{
    const char *file;
    int line;
    if (shim_symbolise(ra, &file, &line, fn) == 0)
        snprintf(site, n, "%s:%d", file, line);
    else
        shim_module_offset(ra, site, n);
}

static const char *type_name(const struct lp_inst *in)
{
    if (in->c11)
        return "c11";
    if (in->glibc && in->type == PTHREAD_MUTEX_NORMAL)
        return "normal";
    switch (in->type) {
    case PTHREAD_MUTEX_RECURSIVE:
        return "recursive";
    case PTHREAD_MUTEX_ERRORCHECK:
        return "errorcheck";
    default:
        return "normal";
    }
}

/* ---- call sites: the threads' records ------------------------------------------ */
struct cs_agg {
    int site;
    const void *ra;
    const struct lp_crec *r;       /* read with relaxed loads */
};

static int agg_cmp(const void *a, const void *b)
{
    const struct cs_agg *x = a, *y = b;
    if (x->site != y->site)
        return x->site < y->site ? -1 : 1;
    if (x->ra != y->ra)
        return (uintptr_t)x->ra < (uintptr_t)y->ra ? -1 : 1;
    return 0;
}

/* Every record of every thread, sorted by (lock site, return address). */
static struct cs_agg *collect(size_t *np)
{
    size_t cap = 1024, n = 0;
    struct cs_agg *v = malloc(cap * sizeof *v);
    if (!v)
        return NULL;
    for (struct lp_table *t = atomic_load_explicit(&lp.tables, memory_order_acquire); t; t = t->next) {
        size_t tc = atomic_load_explicit((_Atomic size_t *)&t->cap, memory_order_acquire);
        struct lp_crec **sl = atomic_load_explicit((_Atomic(struct lp_crec **) *)&t->slots, memory_order_acquire);
        for (size_t i = 0; i < tc; i++) {
            struct lp_crec *e = atomic_load_explicit((_Atomic(struct lp_crec *) *)&sl[i], memory_order_acquire);
            if (!e)
                continue;
            if (n == cap) {
                struct cs_agg *nv = realloc(v, cap * 2 * sizeof *v);
                if (!nv)
                    break;
                v = nv;
                cap *= 2;
            }
            v[n++] = (struct cs_agg){e->site, e->ra, e};
        }
    }
    qsort(v, n, sizeof *v, agg_cmp);
    *np = n;
    return v;
}

static void hist_add(struct lp_hist *to, const struct lp_hist *h)
{
    for (int i = 0; i < LP_BUCKETS; i++) {
        to->wait[i] += LP_LD(h->wait[i]);
        to->hold[i] += LP_LD(h->hold[i]);
    }
}

/* A site's histograms: every thread's, and the fallback's. */
static void site_hist(const struct lp_site *s, struct lp_hist *out)
{
    memset(out, 0, sizeof *out);
    hist_add(out, &s->fallback_h);
    size_t i = (size_t)s->index;
    for (struct lp_table *t = atomic_load_explicit(&lp.tables, memory_order_acquire); t; t = t->next) {
        size_t n = atomic_load_explicit((_Atomic size_t *)&t->nhists, memory_order_acquire);
        struct lp_hist **hs = atomic_load_explicit((_Atomic(struct lp_hist **) *)&t->hists, memory_order_acquire);
        if (i >= n || !hs)
            continue;
        struct lp_hist *h = atomic_load_explicit((_Atomic(struct lp_hist *) *)&hs[i], memory_order_acquire);
        if (h)
            hist_add(out, h);
    }
}

static void put_hist(struct buf *b, const uint64_t *h)
{
    puts_(b, "[");
    for (int i = 0; i < LP_BUCKETS; i++)
        putf(b, "%s%llu", i ? "," : "", (unsigned long long)h[i]);
    puts_(b, "]");
}

/* The threads' slots summed by instance id (calloc'd, lp.ninst entries). */
static struct lp_islot *inst_sums(uint32_t n)
{
    struct lp_islot *v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return NULL;
    for (struct lp_table *t = atomic_load_explicit(&lp.tables, memory_order_acquire); t; t = t->next) {
        size_t np = atomic_load_explicit((_Atomic size_t *)&t->nipages, memory_order_acquire);
        struct lp_islot **pp = atomic_load_explicit((_Atomic(struct lp_islot **) *)&t->ipages, memory_order_acquire);
        for (size_t p = 0; p < np; p++) {
            struct lp_islot *pg = atomic_load_explicit((_Atomic(struct lp_islot *) *)&pp[p], memory_order_acquire);
            for (size_t k = 0; pg && k < LP_IPAGE && p * LP_IPAGE + k < n; k++) {
                v[p * LP_IPAGE + k].acq += LP_LD(pg[k].acq);
                v[p * LP_IPAGE + k].hold_ns += LP_LD(pg[k].hold_ns);
                v[p * LP_IPAGE + k].try_ok += LP_LD(pg[k].try_ok);
            }
        }
    }
    return v;
}

static void put_inst(struct buf *b, const struct lp_inst *in, const struct lp_islot *sums, uint32_t nsums)
{
    const struct lp_islot z = {0, 0, 0, 0}, *c = sums && in->id < nsums ? &sums[in->id] : &z;
    uint64_t fail = atomic_load_explicit(&((struct lp_inst *)in)->try_fail, memory_order_relaxed);
    putf(b, "{\"addr\":\"%p\",\"type\":\"%s\",", in->addr, type_name(in));
    putf(b, "\"acquisitions\":%llu,\"contended\":%llu,\"recursive_relocks\":%llu,", (unsigned long long)c->acq,
         (unsigned long long)LP_LD(in->contended), (unsigned long long)LP_LD(in->relocks));
    putf(b, "\"trylocks\":%llu,\"trylock_failures\":%llu,", (unsigned long long)(c->try_ok + fail), (unsigned long long)fail);
    putf(b, "\"cond_waits\":%llu,\"cond_wait_ns\":%llu,\"wait_ns\":%llu,\"hold_ns\":%llu,",
         (unsigned long long)LP_LD(in->cond_waits), (unsigned long long)LP_LD(in->cond_wait_ns),
         (unsigned long long)LP_LD(in->wait_ns), (unsigned long long)c->hold_ns);
    if (lp_perf_ok)
        putf(b, "\"misses\":%llu}", (unsigned long long)LP_LD(in->misses));
    else
        puts_(b, "\"misses\":null}");
}

/* The site's call sites: the threads' records of it, merged by file:line
 * (one source line may hold several calls -- an unrolled loop, an inlined
 * function -- and several threads call it). */
static void put_call_sites(struct buf *b, const struct lp_site *s, const struct cs_agg *agg, size_t nagg)
{
    size_t lo = 0, hi = nagg; /* agg is sorted by site: the first record of s */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (agg[mid].site < s->index)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t cnt = 0;
    while (lo + cnt < nagg && agg[lo + cnt].site == s->index)
        cnt++;
    struct line_agg {
        char site[600];
        const char *fn;
        uint64_t acq, wait_ns, hold_ns;
    } *la = cnt ? calloc(cnt, sizeof *la) : NULL;
    size_t nl = 0;
    for (size_t i = 0; la && i < cnt; i++) {
        const struct lp_crec *r = agg[lo + i].r;
        char site[600];
        const char *fn = NULL;
        code_site(r->ra, site, sizeof site, &fn);
        size_t j = 0;
        while (j < nl && strcmp(la[j].site, site) != 0)
            j++;
        if (j == nl) {
            memcpy(la[nl].site, site, sizeof site);
            la[nl].fn = fn;
            nl++;
        }
        la[j].acq += LP_LD(r->acq);
        la[j].wait_ns += LP_LD(r->wait_ns);
        la[j].hold_ns += LP_LD(r->hold_ns);
    }
    puts_(b, ",\"call_sites\":[");
    int k = 0;
    for (size_t j = 0; j < nl; j++) {
        if (!la[j].acq && !la[j].wait_ns && !la[j].hold_ns)
            continue; /* e.g. a forked child's copy of a record only its parent used */
        puts_(b, k++ ? ",{\"site\":" : "{\"site\":");
        putstr(b, la[j].site);
        puts_(b, ",\"function\":");
        putstr(b, la[j].fn);
        putf(b, ",\"acquisitions\":%llu,\"wait_ns\":%llu,\"hold_ns\":%llu}", (unsigned long long)la[j].acq,
             (unsigned long long)la[j].wait_ns, (unsigned long long)la[j].hold_ns);
    }
    free(la);
    puts_(b, "]");
}

static void put_site(struct buf *b, const struct lp_site *s, const struct cs_agg *agg, size_t nagg,
                     const struct lp_islot *sums, uint32_t nsums)
{
    char first[600] = "";
    const char *fn = NULL;
    if (s->nframes > 0)
        code_site(s->frames[0], first, sizeof first, &fn);
    putf(b, "{\"id\":\"%016llx\",\"site\":", (unsigned long long)s->id);
    putstr(b, s->is_static && s->sym ? s->sym : first);
    puts_(b, ",\"function\":");
    putstr(b, fn);
    putf(b, ",\"kind\":\"%s\",\"first_lock_site\":", s->is_static ? "static" : "init");
    if (s->is_static)
        putstr(b, first);
    else
        puts_(b, "null");
    struct lp_hist h;
    site_hist(s, &h);
    /* uncontended acquisitions (wait 0) are not in the threads' wait
     * histograms (hooks.h): bucket 0 gets them, from the site's count */
    uint64_t acq = 0, inhist = 0;
    for (const struct lp_inst *in = atomic_load_explicit((_Atomic(struct lp_inst *) *)&s->insts, memory_order_acquire); in; in = in->next)
        acq += sums && in->id < nsums ? sums[in->id].acq : 0;
    for (int i = 0; i < LP_BUCKETS; i++)
        inhist += h.wait[i];
    if (acq > inhist)
        h.wait[0] += acq - inhist;
    puts_(b, ",\"wait_hist\":");
    put_hist(b, h.wait);
    puts_(b, ",\"hold_hist\":");
    put_hist(b, h.hold);
    put_call_sites(b, s, agg, nagg);
    putf(b, ",\"count\":%ld,\"frames\":[", s->count);
    for (int i = 0; i < s->nframes; i++) {
        char site[600], line[700];
        const char *f = NULL;
        code_site(s->frames[i], site, sizeof site, &f);
        snprintf(line, sizeof line, "%s %s", site, f ? f : "?");
        if (i)
            puts_(b, ",");
        putstr(b, line);
    }
    puts_(b, "],\"instances\":[");
    int k = 0;
    for (const struct lp_inst *in = atomic_load_explicit((_Atomic(struct lp_inst *) *)&s->insts, memory_order_acquire); in; in = in->next) {
        if (k++)
            puts_(b, ",");
        put_inst(b, in, sums, nsums);
    }
    puts_(b, "]}");
}

static int cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void build(struct buf *b, const char *how, int status, int sig)
{
    uint64_t now = ll_now_ns();
    uint64_t thread_ns = now - lp.start_ns; /* the main thread (or, after fork, the forking one) */
    for (struct lp_thread *t = lp.threads; t; t = t->next) {
        uint64_t s = atomic_load_explicit(&t->start_ns, memory_order_relaxed);
        uint64_t e = atomic_load_explicit(&t->end_ns, memory_order_relaxed);
        if (!e)
            e = now;
        if (e > s)
            thread_ns += e - s;
    }
    puts_(b, "{\"format\":\"liblock-profile-raw/1\",\"program\":");
    putstr(b, saved_argc > 0 ? saved_argv[0] : NULL);
    puts_(b, ",\"argv\":[");
    for (int i = 0; i < saved_argc; i++) {
        if (i)
            puts_(b, ",");
        putstr(b, saved_argv[i]);
    }
    const char *lk = getenv("LIBLOCK_CONFIG") && *getenv("LIBLOCK_CONFIG") ? "config"
                     : cfg.def.ops                                        ? cfg.def.ops->name
                                                                          : "glibc";
    putf(b, "],\"pid\":%d,\"lock\":", (int)getpid());
    putstr(b, lk);
    putf(b, ",\"wall_ns\":%llu,\"thread_ns\":%llu,\"threads\":%ld,\"cpus\":%d,", (unsigned long long)(now - lp.start_ns),
         (unsigned long long)thread_ns, lp.nthreads, cpus());
    putf(b, "\"time_every\":%u,", lp_every);
    putf(b, "\"misses_available\":%s,\"misses_reason\":", lp_perf_ok ? "true" : "false");
    putstr(b, lp_perf_ok ? NULL : lp.misses_reason);
    puts_(b, ",\"exit\":{\"how\":");
    putstr(b, how);
    if (status >= 0)
        putf(b, ",\"status\":%d", status);
    else
        puts_(b, ",\"status\":null");
    if (sig > 0)
        putf(b, ",\"signal\":%d}", sig);
    else
        puts_(b, ",\"signal\":null}");
    /* objects left to glibc, unmeasured (src/shim/to_glibc.c): per kind,
     * the non-zero reasons */
    unsigned long tg[SG_NKINDS][SG_NREASONS];
    shim_to_glibc_counts(tg);
    puts_(b, ",\"to_glibc\":{");
    for (int k = 0; k < SG_NKINDS; k++) {
        putf(b, "%s\"%s\":{", k ? "," : "", shim_gkind_key[k]);
        for (int r = 0, n = 0; r < SG_NREASONS; r++)
            if (tg[k][r])
                putf(b, "%s\"%s\":%lu", n++ ? "," : "", shim_greason_key[r], tg[k][r]);
        puts_(b, "}");
    }
    puts_(b, "}");
    puts_(b, ",\"sites\":[");
    size_t nagg = 0;
    struct cs_agg *agg = collect(&nagg);
    uint32_t nsums = atomic_load_explicit((_Atomic uint32_t *)&lp.ninst, memory_order_relaxed);
    struct lp_islot *sums = inst_sums(nsums);
    int k = 0;
    for (const struct lp_site *s = atomic_load_explicit((_Atomic(struct lp_site *) *)&lp.sites, memory_order_acquire); s; s = s->next) {
        if (k++)
            puts_(b, ",\n");
        put_site(b, s, agg ? agg : (struct cs_agg *)"", agg ? nagg : 0, sums, sums ? nsums : 0);
    }
    free(agg);
    free(sums);
    puts_(b, "]}\n");
}

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
    struct buf b = {0};
    build(&b, how, status, sig);
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
