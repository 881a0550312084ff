/*
 * report.c - the profiler's raw report (format "liblock-profile-raw/1",
 * docs/profile-runtime.md) built from the records (record.c): the
 * threads' per-call-site counters aggregated per lock site, the per-
 * instance sums, histograms, and the program's header (argv, times,
 * the locks left to glibc), symbolised with libdw (src/shim/site.c) when
 * it is written, never on the lock path.
 */
#include "shim/shim.h"
#include "profile.h"
#include "json.h"

#include <sched.h>

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

static void put_hist(struct lp_json *b, const uint64_t *h)
{
    lp_json_puts(b, "[");
    for (int i = 0; i < LP_BUCKETS; i++)
        lp_json_putf(b, "%s%llu", i ? "," : "", (unsigned long long)h[i]);
    lp_json_puts(b, "]");
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

static void put_inst(struct lp_json *b, const struct lp_inst *in, const struct lp_islot *sums, uint32_t nsums)
{
    const struct lp_islot z = {0, 0, 0, 0}, *c = sums && in->id < nsums ? &sums[in->id] : &z;
    uint64_t fail = atomic_load_explicit(&((struct lp_inst *)in)->try_fail, memory_order_relaxed);
    lp_json_putf(b, "{\"addr\":\"%p\",\"lock\":\"%p\",\"type\":\"%s\",", in->addr, in->lock, type_name(in));
    lp_json_putf(b, "\"acquisitions\":%llu,\"contended\":%llu,\"recursive_relocks\":%llu,", (unsigned long long)c->acq,
         (unsigned long long)LP_LD(in->contended), (unsigned long long)LP_LD(in->relocks));
    lp_json_putf(b, "\"trylocks\":%llu,\"trylock_failures\":%llu,", (unsigned long long)(c->try_ok + fail), (unsigned long long)fail);
    lp_json_putf(b, "\"cond_waits\":%llu,\"cond_wait_ns\":%llu,\"wait_ns\":%llu,\"hold_ns\":%llu,",
         (unsigned long long)LP_LD(in->cond_waits), (unsigned long long)LP_LD(in->cond_wait_ns),
         (unsigned long long)LP_LD(in->wait_ns), (unsigned long long)c->hold_ns);
    if (lp_perf_ok)
        lp_json_putf(b, "\"misses\":%llu}", (unsigned long long)LP_LD(in->misses));
    else
        lp_json_puts(b, "\"misses\":null}");
}

/* The site's call sites: the threads' records of it, merged by file:line
 * (one source line may hold several calls -- an unrolled loop, an inlined
 * function -- and several threads call it). */
static void put_call_sites(struct lp_json *b, const struct lp_site *s, const struct cs_agg *agg, size_t nagg)
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
    lp_json_puts(b, ",\"call_sites\":[");
    int k = 0;
    for (size_t j = 0; j < nl; j++) {
        if (!la[j].acq && !la[j].wait_ns && !la[j].hold_ns)
            continue; /* e.g. a forked child's copy of a record only its parent used */
        lp_json_puts(b, k++ ? ",{\"site\":" : "{\"site\":");
        lp_json_str(b, la[j].site);
        lp_json_puts(b, ",\"function\":");
        lp_json_str(b, la[j].fn);
        lp_json_putf(b, ",\"acquisitions\":%llu,\"wait_ns\":%llu,\"hold_ns\":%llu}", (unsigned long long)la[j].acq,
             (unsigned long long)la[j].wait_ns, (unsigned long long)la[j].hold_ns);
    }
    free(la);
    lp_json_puts(b, "]");
}

static void put_site(struct lp_json *b, const struct lp_site *s, const struct cs_agg *agg, size_t nagg,
                     const struct lp_islot *sums, uint32_t nsums)
{
    char first[600] = "";
    const char *fn = NULL;
    if (s->nframes > 0)
        code_site(s->frames[0], first, sizeof first, &fn);
    lp_json_putf(b, "{\"id\":\"%016llx\",\"site\":", (unsigned long long)s->id);
    lp_json_str(b, s->is_static && s->sym ? s->sym : first);
    lp_json_puts(b, ",\"function\":");
    lp_json_str(b, fn);
    lp_json_putf(b, ",\"kind\":\"%s\",\"first_lock_site\":", s->is_static ? "static" : "init");
    if (s->is_static)
        lp_json_str(b, first);
    else
        lp_json_puts(b, "null");
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
    lp_json_puts(b, ",\"wait_hist\":");
    put_hist(b, h.wait);
    lp_json_puts(b, ",\"hold_hist\":");
    put_hist(b, h.hold);
    put_call_sites(b, s, agg, nagg);
    lp_json_putf(b, ",\"count\":%ld,\"frames\":[", s->count);
    for (int i = 0; i < s->nframes; i++) {
        char site[600], line[700];
        const char *f = NULL;
        code_site(s->frames[i], site, sizeof site, &f);
        snprintf(line, sizeof line, "%s %s", site, f ? f : "?");
        if (i)
            lp_json_puts(b, ",");
        lp_json_str(b, line);
    }
    lp_json_puts(b, "],\"instances\":[");
    int k = 0;
    for (const struct lp_inst *in = atomic_load_explicit((_Atomic(struct lp_inst *) *)&s->insts, memory_order_acquire); in; in = in->next) {
        if (k++)
            lp_json_puts(b, ",");
        put_inst(b, in, sums, nsums);
    }
    lp_json_puts(b, "]}");
}

static int cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void lp_report_build(struct lp_json *b, const char *how, int status, int sig, int saved_argc, char **saved_argv)
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
    lp_json_puts(b, "{\"format\":\"liblock-profile-raw/1\",\"program\":");
    lp_json_str(b, saved_argc > 0 ? saved_argv[0] : NULL);
    lp_json_puts(b, ",\"argv\":[");
    for (int i = 0; i < saved_argc; i++) {
        if (i)
            lp_json_puts(b, ",");
        lp_json_str(b, saved_argv[i]);
    }
    const char *lk = getenv("LIBLOCK_CONFIG") && *getenv("LIBLOCK_CONFIG") ? "config"
                     : cfg.def.ops                                        ? cfg.def.ops->name
                                                                          : "glibc";
    lp_json_putf(b, "],\"pid\":%d,\"lock\":", (int)getpid());
    lp_json_str(b, lk);
    lp_json_putf(b, ",\"wall_ns\":%llu,\"thread_ns\":%llu,\"threads\":%ld,\"cpus\":%d,", (unsigned long long)(now - lp.start_ns),
         (unsigned long long)thread_ns, lp.nthreads, cpus());
    lp_json_putf(b, "\"time_every\":%u,", lp_every);
    lp_json_putf(b, "\"misses_available\":%s,\"misses_reason\":", lp_perf_ok ? "true" : "false");
    lp_json_str(b, lp_perf_ok ? NULL : lp.misses_reason);
    lp_json_puts(b, ",\"exit\":{\"how\":");
    lp_json_str(b, how);
    if (status >= 0)
        lp_json_putf(b, ",\"status\":%d", status);
    else
        lp_json_puts(b, ",\"status\":null");
    if (sig > 0)
        lp_json_putf(b, ",\"signal\":%d}", sig);
    else
        lp_json_puts(b, ",\"signal\":null}");
    /* objects left to glibc, unmeasured (src/shim/to_glibc.c): per kind,
     * the non-zero reasons */
    unsigned long tg[SG_NKINDS][SG_NREASONS];
    shim_to_glibc_counts(tg);
    lp_json_puts(b, ",\"to_glibc\":{");
    for (int k = 0; k < SG_NKINDS; k++) {
        lp_json_putf(b, "%s\"%s\":{", k ? "," : "", shim_gkind_key[k]);
        for (int r = 0, n = 0; r < SG_NREASONS; r++)
            if (tg[k][r])
                lp_json_putf(b, "%s\"%s\":%lu", n++ ? "," : "", shim_greason_key[r], tg[k][r]);
        lp_json_puts(b, "}");
    }
    lp_json_puts(b, "}");
    lp_json_puts(b, ",\"sites\":[");
    size_t nagg = 0;
    struct cs_agg *agg = collect(&nagg);
    uint32_t nsums = atomic_load_explicit((_Atomic uint32_t *)&lp.ninst, memory_order_relaxed);
    struct lp_islot *sums = inst_sums(nsums);
    int k = 0;
    for (const struct lp_site *s = atomic_load_explicit((_Atomic(struct lp_site *) *)&lp.sites, memory_order_acquire); s; s = s->next) {
        if (k++)
            lp_json_puts(b, ",\n");
        put_site(b, s, agg ? agg : (struct cs_agg *)"", agg ? nagg : 0, sums, sums ? nsums : 0);
    }
    free(agg);
    free(sums);
    lp_json_puts(b, "]}\n");
}
