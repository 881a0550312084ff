/*
 * latmap - pointer-chasing latency map: what it costs to read a cache line
 * depending on where it sits (own L1/L2/LLC, another core's cache, DRAM).
 *
 * Source: J.-P. Lozi, "Improving the Performance of Java Applications on
 * Multicore Architectures", internship report, LIP6, 2010, section 3.1 (the
 * `memal` experiment, Yotov et al.'s technique), and J.-P. Lozi, "Towards
 * More Scalable Mutual Exclusion for Multicore Architectures", PhD thesis,
 * UPMC (Paris 6), 2014, section 2.5 (Figures 2.5 and 2.7a).
 *
 * For a working set of S bytes, an "owner" thread pinned to CPU o writes
 * every line of the buffer (so each line is in o's caches in the modified
 * state as far as they can hold it); then a "reader" pinned to CPU r follows
 * a pointer chain through every line exactly once.  The chain is a random
 * cyclic permutation of the lines: each line holds the address of the next,
 * so every load depends on the previous one and the order defeats the
 * prefetchers; the final pointer is published through a volatile sink so the
 * compiler keeps every load.  For o == r one thread writes and then reads.
 * o == r gives the local hierarchy (L1 for small
 * S, then L2, LLC, DRAM); o != r gives the cost of taking lines from another
 * core's caches (or DRAM when S exceeds them).  One record per (S, o, r):
 * median over the repetitions of cycles and ns per line.  Pages are 4 KiB
 * unless the kernel grants transparent huge pages; large S also pays TLB
 * misses, as a real program would.
 */
#include <getopt.h>
#include <sys/mman.h>
#include "common.h"
#include "probe.h"

static const char usage_text[] =
    "usage: latmap [options]\n"
    "  -s, --sizes LIST   working-set sizes, e.g. 16K,256K,4M,64M (default 16K,256K,4M,32M,128M)\n"
    "  -c, --cpus LIST    CPUs to map, e.g. 0,1 (default: all online CPUs, at most 8)\n"
    "  -r, --reps N       repetitions, median reported (default 5)\n"
    "      --no-probe       skip the ping-pong probes\n"
    "      --quick        tiny run for tests (16K, 1 repetition)\n"
    "  -h, --help\n";

static int no_probe; /* --no-probe, and --quick (a harness check, not a measurement) */

static void usage_fail(const char *what, const char *arg) { bench_usage_fail("latmap", usage_text, what, arg); }

struct cl {
    struct cl *next;
    uint64_t pad[7];
};

struct job {
    struct cl *lines;
    size_t n;
    struct cl *start;
    uint64_t cycles;
};

static void *volatile sink; /* the chase result goes here so no load can be dropped */

static void *owner_main(void *p)
{
    struct job *j = p;
    for (size_t i = 0; i < j->n; i++)
        j->lines[i].pad[0]++;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    return NULL;
}

static void *reader_main(void *p)
{
    struct job *j = p;
    struct cl *c = j->start;
    uint64_t t0 = bench_cycles();
    for (size_t i = 0; i < j->n; i++)
        c = c->next;
    uint64_t t1 = bench_cycles();
    sink = c;
    j->cycles = t1 - t0;
    return NULL;
}

/* o == r: the same thread writes and then reads, with nothing in between
 * (creating a thread between the two would itself evict part of L1) */
static void *owner_reader_main(void *p)
{
    owner_main(p);
    return reader_main(p);
}

static void run_on(int cpu, void *(*fn)(void *), void *arg)
{
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_attr_setaffinity_np(&a, sizeof s, &s);
    pthread_create(&t, &a, fn, arg);
    pthread_join(t, NULL);
    pthread_attr_destroy(&a);
}

static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    if (*end == 'K' || *end == 'k')
        v *= 1024, end++;
    else if (*end == 'M' || *end == 'm')
        v *= 1024 * 1024, end++;
    else if (*end == 'G' || *end == 'g')
        v *= 1024.0 * 1024 * 1024, end++;
    if (*end || v < 4096 || v > 16.0 * 1024 * 1024 * 1024)
        return -1;
    return (long)v;
}

static void cache_sizes(char *out, size_t n)
{
    size_t off = 0;
    out[0] = 0;
    for (int i = 0; i < 8; i++) {
        char path[128], lvl[16] = "", typ[32] = "", sz[32] = "";
        FILE *f;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        if (!(f = fopen(path, "r")))
            break;
        if (!fgets(lvl, sizeof lvl, f))
            lvl[0] = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        if ((f = fopen(path, "r"))) {
            if (!fgets(typ, sizeof typ, f))
                typ[0] = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if ((f = fopen(path, "r"))) {
            if (!fgets(sz, sizeof sz, f))
                sz[0] = 0;
            fclose(f);
        }
        lvl[strcspn(lvl, "\n")] = typ[strcspn(typ, "\n")] = sz[strcspn(sz, "\n")] = 0;
        if (strcmp(typ, "Instruction") == 0)
            continue;
        off += (size_t)snprintf(out + off, n - off, "%sL%s %s", off ? ", " : "", lvl, sz);
        if (off >= n)
            break;
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"sizes", required_argument, 0, 's'}, {"cpus", required_argument, 0, 'c'},
                                         {"reps", required_argument, 0, 'r'},  {"quick", no_argument, 0, 1}, {"no-probe", no_argument, 0, 4},
                                         {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *sizes = "16K,256K,4M,32M,128M", *cpus_s = NULL;
    long reps = 5;
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":s:c:r:h", opts, NULL)) != -1) {
        switch (o) {
        case 's': sizes = optarg; break;
        case 'c': cpus_s = optarg; break;
        case 'r':
            if (parse_long(optarg, 1, 101, &reps))
                usage_fail("--reps must be 1..101, not", optarg);
            break;
        case 4: no_probe = 1; break;
        case 1: no_probe = 1; sizes = "16K"; reps = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case ':': usage_fail("option needs a value:", argv[optind - 1]); break;
        default: usage_fail("unknown option", argv[optind - 1]); break;
        }
    }
    if (optind < argc)
        usage_fail("unexpected argument", argv[optind]);
    int ncpu = ll_ncpus();
    int cpus[8], nc = 0;
    if (cpus_s) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", cpus_s);
        for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            long c;
            if (parse_long(t, 0, ncpu - 1, &c) || nc >= 8)
                usage_fail("--cpus: not an online CPU (or more than 8):", t);
            cpus[nc++] = (int)c;
        }
    } else {
        for (int c = 0; c < ncpu && nc < 8; c++)
            cpus[nc++] = c;
    }
    long sz[32];
    int ns = 0;
    {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", sizes);
        for (char *sv, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv)) {
            if (ns >= 32 || (sz[ns] = parse_size(t)) < 0)
                usage_fail("--sizes: bad size (4K..16G, suffix K/M/G):", t);
            ns++;
        }
    }
    struct machine m;
    machine_describe(&m);
    char caches[256];
    cache_sizes(caches, sizeof caches);
    double ghz = m.tsc_ghz > 0 ? m.tsc_ghz : 1;
    for (int si = 0; si < ns; si++) {
        size_t n = (size_t)sz[si] / sizeof(struct cl);
        size_t bytes = n * sizeof(struct cl);
        struct cl *lines = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (lines == MAP_FAILED) {
            fprintf(stderr, "latmap: cannot map %zu bytes\n", bytes);
            return 1;
        }
        madvise(lines, bytes, MADV_HUGEPAGE);
        size_t *perm = malloc(n * sizeof *perm);
        if (!perm) {
            fprintf(stderr, "latmap: out of memory\n");
            return 1;
        }
        uint64_t rs = 0x2545F4914F6CDD1Dull ^ (uint64_t)sz[si];
        for (size_t i = 0; i < n; i++)
            perm[i] = i;
        for (size_t i = n - 1; i > 0; i--) {
            rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
            size_t j = (size_t)(rs % (i + 1)), t = perm[i];
            perm[i] = perm[j], perm[j] = t;
        }
        for (size_t i = 0; i < n; i++) /* one cycle through every line, in random order */
            lines[perm[i]].next = &lines[perm[(i + 1) % n]];
        struct job j = {lines, n, &lines[perm[0]], 0};
        free(perm);
        for (int oi = 0; oi < nc; oi++)
            for (int ri = 0; ri < nc; ri++) {
                double v[101];
                double probe0 = !no_probe && m.ncpus > 1 ? probe_quick() : -1;
                for (long r = 0; r < reps; r++) {
                    if (cpus[oi] == cpus[ri]) {
                        run_on(cpus[oi], owner_reader_main, &j);
                    } else {
                        run_on(cpus[oi], owner_main, &j);
                        run_on(cpus[ri], reader_main, &j);
                    }
                    v[r] = (double)j.cycles / (double)n;
                }
                double probe1 = !no_probe && m.ncpus > 1 ? probe_quick() : -1;
                qsort(v, (size_t)reps, sizeof *v, cmpd);
                struct record rec = {0};
                REC_S(&rec, "benchmark", "latmap");
                REC_N(&rec, "size_bytes", "%zu", bytes);
                REC_N(&rec, "owner_cpu", "%d", cpus[oi]);
                REC_N(&rec, "reader_cpu", "%d", cpus[ri]);
                REC_S(&rec, "where", "%s", cpus[oi] == cpus[ri] ? "local" : "other-core");
                REC_N(&rec, "reps", "%ld", reps);
                REC_N(&rec, "cycles_per_line", "%.2f", v[reps / 2]);
                REC_N(&rec, "cycles_per_line_min", "%.2f", v[0]);
                REC_N(&rec, "cycles_per_line_max", "%.2f", v[reps - 1]);
                REC_N(&rec, "ns_per_line", "%.2f", v[reps / 2] / ghz);
                REC_S(&rec, "caches", "%s", caches);
                REC_N(&rec, "probe_before_ns", "%.1f", probe0);
                REC_N(&rec, "probe_after_ns", "%.1f", probe1);
                rec_machine(&rec, &m);
                rec_print(&rec, FMT_JSON, 0, stdout);
                rec_free(&rec);
            }
        munmap(lines, bytes);
    }
    return 0;
}
