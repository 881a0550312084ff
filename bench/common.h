/*
 * common.h - what the benchmark programs in bench/ share: the machine
 * description every result line carries, a log-bucket latency histogram,
 * JSON-lines / CSV output helpers, a busy delay in cycles, pinning.
 *
 * Benchmarks link the static library and may use internal.h (cycle clock,
 * cache-line size, topology).
 */
#ifndef LIBLOCK_BENCH_COMMON_H
#define LIBLOCK_BENCH_COMMON_H

#include <errno.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>
#include "internal.h"
#include "liblock.h"

/* ---- machine description ------------------------------------------------ */
struct machine {
    char cpu_model[128];
    int ncpus;
    int cacheline;
    char kernel[400];
    char compiler[96];
    char libc[32];
    double tsc_ghz; /* cycles per ns of the cycle clock used for all timings */
    const char *topology;
};

static inline void machine_describe(struct machine *m)
{
    memset(m, 0, sizeof *m);
    snprintf(m->cpu_model, sizeof m->cpu_model, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "model name", 10) == 0) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ' || *c == '\t')
                        c++;
                    c[strcspn(c, "\n")] = 0;
                    snprintf(m->cpu_model, sizeof m->cpu_model, "%s", c);
                }
                break;
            }
        }
        fclose(f);
    }
    m->ncpus = ll_ncpus();
    m->cacheline = ll_cacheline();
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(m->kernel, sizeof m->kernel, "%s %s %s", u.sysname, u.release, u.machine);
#ifdef __VERSION__
    snprintf(m->compiler, sizeof m->compiler, "%s%s", 
#ifdef __clang__
             "clang ",
#else
             "gcc ",
#endif
             __VERSION__);
#endif
    snprintf(m->libc, sizeof m->libc, "glibc %s", gnu_get_libc_version());
    m->tsc_ghz = ll_cycles_per_ns();
    m->topology = ll_topology_source();
}

/* ---- output: JSON lines or CSV ------------------------------------------- */
/* A record is built as a list of (key, formatted value, is_string) fields and
 * printed either as one JSON object or as one CSV row (with an optional
 * header row of the keys).  Keeping one list means both formats always
 * carry exactly the same fields. */
#define REC_MAX 96
struct record {
    int n;
    const char *key[REC_MAX];
    char *val[REC_MAX];
    int str[REC_MAX];
};

static inline void rec_add(struct record *r, const char *key, int is_str, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void rec_add(struct record *r, const char *key, int is_str, const char *fmt, ...)
{
    if (r->n >= REC_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&r->val[r->n], fmt, ap) < 0)
        r->val[r->n] = NULL;
    va_end(ap);
    if (!r->val[r->n])
        return;
    r->key[r->n] = key;
    r->str[r->n] = is_str;
    r->n++;
}
#define REC_S(r, k, ...) rec_add((r), (k), 1, __VA_ARGS__)
#define REC_N(r, k, ...) rec_add((r), (k), 0, __VA_ARGS__)

static inline void rec_machine(struct record *r, const struct machine *m)
{
    REC_S(r, "cpu_model", "%s", m->cpu_model);
    REC_N(r, "ncpus", "%d", m->ncpus);
    REC_N(r, "cacheline", "%d", m->cacheline);
    REC_S(r, "kernel", "%s", m->kernel);
    REC_S(r, "compiler", "%s", m->compiler);
    REC_S(r, "libc", "%s", m->libc);
    REC_N(r, "tsc_ghz", "%.4f", m->tsc_ghz);
    REC_S(r, "topology", "%s", m->topology ? m->topology : "none");
}

static inline void rec_free(struct record *r)
{
    for (int i = 0; i < r->n; i++)
        free(r->val[i]);
    r->n = 0;
}

static inline void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static inline void csv_field(FILE *f, const char *s)
{
    if (strpbrk(s, ",\"\n")) {
        fputc('"', f);
        for (; *s; s++) {
            if (*s == '"')
                fputc('"', f);
            fputc(*s, f);
        }
        fputc('"', f);
    } else {
        fputs(s, f);
    }
}

enum { FMT_JSON, FMT_CSV };

static inline void rec_print(const struct record *r, int fmt, int header, FILE *f)
{
    if (fmt == FMT_JSON) {
        fputc('{', f);
        for (int i = 0; i < r->n; i++) {
            if (i)
                fputs(", ", f);
            json_string(f, r->key[i]);
            fputs(": ", f);
            if (r->str[i])
                json_string(f, r->val[i]);
            else
                fputs(r->val[i][0] ? r->val[i] : "null", f);
        }
        fputs("}\n", f);
    } else {
        if (header) {
            for (int i = 0; i < r->n; i++) {
                if (i)
                    fputc(',', f);
                csv_field(f, r->key[i]);
            }
            fputc('\n', f);
        }
        for (int i = 0; i < r->n; i++) {
            if (i)
                fputc(',', f);
            csv_field(f, r->val[i]);
        }
        fputc('\n', f);
    }
    fflush(f);
}

/* ---- latency histogram ----------------------------------------------------
 * Values (cycles) below 64 have their own bucket; above, each power of two
 * is split in 32 buckets, so a reported percentile is within ~3% of the
 * true value.  min, max and the sum are exact. */
#define HIST_SUB 32
#define HIST_BUCKETS (64 + 58 * HIST_SUB)

struct hist {
    uint64_t n, sum, min, max;
    uint32_t b[HIST_BUCKETS];
};

static inline void hist_init(struct hist *h)
{
    memset(h, 0, sizeof *h);
    h->min = UINT64_MAX;
}

static inline int hist_index(uint64_t v)
{
    if (v < 64)
        return (int)v;
    int e = 63 - __builtin_clzll(v); /* >= 6 */
    int sub = (int)((v >> (e - 5)) & (HIST_SUB - 1));
    return 64 + (e - 6) * HIST_SUB + sub;
}

static inline double hist_value(int i) /* middle of bucket i */
{
    if (i < 64)
        return i;
    int e = (i - 64) / HIST_SUB + 6, sub = (i - 64) % HIST_SUB;
    double lo = ldexp(1.0, e) + sub * ldexp(1.0, e - 5);
    return lo + ldexp(1.0, e - 5) / 2;
}

static inline void hist_add(struct hist *h, uint64_t v)
{
    h->n++;
    h->sum += v;
    if (v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->b[hist_index(v)]++;
}

static inline void hist_merge(struct hist *into, const struct hist *h)
{
    into->n += h->n;
    into->sum += h->sum;
    if (h->min < into->min)
        into->min = h->min;
    if (h->max > into->max)
        into->max = h->max;
    for (int i = 0; i < HIST_BUCKETS; i++)
        into->b[i] += h->b[i];
}

/* Value at quantile q in [0,1] (nearest rank), clamped to [min, max]. */
static inline double hist_quantile(const struct hist *h, double q)
{
    if (!h->n)
        return NAN;
    uint64_t rank = (uint64_t)ceil(q * (double)h->n);
    if (rank < 1)
        rank = 1;
    uint64_t acc = 0;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        acc += h->b[i];
        if (acc >= rank) {
            double v = hist_value(i);
            if (v < (double)h->min)
                v = (double)h->min;
            if (v > (double)h->max)
                v = (double)h->max;
            return v;
        }
    }
    return (double)h->max;
}

/* ---- small helpers ------------------------------------------------------- */
/* The cycle clock as a compiler barrier: ll_cycles() is an asm without a
 * memory clobber, so the compiler could move the loads being timed across
 * it (a pointer chase would then be timed as nothing). */
static inline uint64_t bench_cycles(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    uint64_t c = ll_cycles();
    atomic_signal_fence(memory_order_seq_cst);
    return c;
}

static inline void busy_cycles(uint64_t n)
{
    if (!n)
        return;
    uint64_t t0 = bench_cycles();
    while (bench_cycles() - t0 < n)
        ll_pause();
}

/* Bad command-line input: one line naming the problem, the usage text, exit 2. */
static inline __attribute__((noreturn)) void bench_usage_fail(const char *prog, const char *usage, const char *what,
                                                              const char *arg)
{
    fprintf(stderr, "%s: %s '%s'\n%s", prog, what, arg, usage);
    exit(2);
}

/* Strict number parsing for command-line options: the whole string must be a
 * number within [lo, hi]. */
static inline int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end); /* accepts 1e5, 2e6 */
    if (errno || end == s || *end || d != floor(d) || d < (double)lo || d > (double)hi)
        return -1;
    *out = (long)d;
    return 0;
}

static inline int parse_double(const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || end == s || *end || !(d >= lo && d <= hi))
        return -1;
    *out = d;
    return 0;
}

#endif
