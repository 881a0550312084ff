/*
 * options.c - the configuration of one malthus run and its command line
 * (malthus -h lists the options; the workload parameters default to the
 * paper's, docs/malthusian-bench.md lists the choices it leaves open).
 */
#include "malthus.h"
#include "common.h" /* parse_double */

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

const char *const wnames[W__N] = {"randarray", "ringwalker", "producer-consumer", "keymap", "lrucache", "bufferpool"};

struct cfg C = {
    .workload = -1, .lock = "mcs", .threads = 4, .duration = 1.0, .grace = 5.0, .header = 1, .probe = 1,
    .fairness = 1, .seed = 1, .cs_loads = 100, .ncs_loads = 400, .array_kb = 1024, .ring = 50, .ring_cs = 10,
    .elem_bytes = 8192, .consumers = 3, .queue = 10000, .keys = -1, .keyset = 1000, .ncs_steps = 1000,
    .lru_capacity = 10000, .replace = -1, .buffers = 5, .buffer_kb = 1024, .swaps = 500, .updates = 5000,
    .cond_fifo = -1,
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: malthus -w WORKLOAD [-l LOCK] [-p POLICY] [-t THREADS] [-d SECONDS] [-o json|csv] [options]\n"
            "  -w WORKLOAD   randarray | ringwalker | producer-consumer | keymap | lrucache | bufferpool\n"
            "  -l LOCK       algorithm name (liblock list), default mcs\n"
            "  -p POLICY     spin | spin-then-park | yield | park (default: the algorithm's)\n"
            "  -t THREADS    worker threads 1..4096, default 4 (producer-consumer: producers)\n"
            "  -d SECONDS    measurement window, default 1\n"
            "  -g SECONDS    grace for workers to finish after the window, default 5\n"
            "  -o FORMAT     json (one JSON object per line, default) or csv\n"
            "  -H            csv without the header line\n"
            "  -n            no ping-pong probe\n"
            "  -F 0|1        fairness instrumentation of the lock (default 1)\n"
            "  -s SEED       random seed (default 1)\n"
            " workload parameters (defaults are the paper's):\n"
            "  --cs-loads N --ncs-loads N --array-kb N            randarray (100, 400, 1024)\n"
            "  --ring N --ring-cs N --elem-bytes N                ringwalker (50, 10, 8192)\n"
            "  --consumers N --queue N                            producer-consumer (3, 10000)\n"
            "  --keys N --keyset N --replace P --ncs-steps N      keymap (10000000, 1000, 0.1, 1000)\n"
            "  --keys N --lru-capacity N --replace P              lrucache (1000000, 10000, 0.01)\n"
            "  --buffers N --buffer-kb N --swaps N --updates N    bufferpool (5, 1024, 500, 5000)\n"
            "  --cond-fifo P   condition variables: append probability (1 FIFO, 0 LIFO)\n");
}

static int bad(const char *fmt, const char *arg)
{
    fprintf(stderr, "malthus: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (malthus -h for usage)\n");
    return 2;
}

/* A whole number in [lo, hi], in decimal digits only (unlike common.h's
 * parse_long, which takes 1e5: malthus has always refused that). */
static int parse_whole(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}



enum {
    O_CS_LOADS = 256, O_NCS_LOADS, O_ARRAY_KB, O_RING, O_RING_CS, O_ELEM_BYTES, O_CONSUMERS, O_QUEUE, O_KEYS,
    O_KEYSET, O_REPLACE, O_NCS_STEPS, O_LRU_CAP, O_BUFFERS, O_BUFFER_KB, O_SWAPS, O_UPDATES, O_COND_FIFO
};

int malthus_options(int argc, char **argv)
{
    static const struct option lopts[] = {
        {"cs-loads", 1, 0, O_CS_LOADS}, {"ncs-loads", 1, 0, O_NCS_LOADS}, {"array-kb", 1, 0, O_ARRAY_KB},
        {"ring", 1, 0, O_RING}, {"ring-cs", 1, 0, O_RING_CS}, {"elem-bytes", 1, 0, O_ELEM_BYTES},
        {"consumers", 1, 0, O_CONSUMERS}, {"queue", 1, 0, O_QUEUE}, {"keys", 1, 0, O_KEYS},
        {"keyset", 1, 0, O_KEYSET}, {"replace", 1, 0, O_REPLACE}, {"ncs-steps", 1, 0, O_NCS_STEPS},
        {"lru-capacity", 1, 0, O_LRU_CAP}, {"buffers", 1, 0, O_BUFFERS}, {"buffer-kb", 1, 0, O_BUFFER_KB},
        {"swaps", 1, 0, O_SWAPS}, {"updates", 1, 0, O_UPDATES}, {"cond-fifo", 1, 0, O_COND_FIFO},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int opt;
    long v;
    double d;
    while ((opt = getopt_long(argc, argv, "w:l:p:t:d:g:o:HnF:s:h", lopts, NULL)) != -1) {
        switch (opt) {
        case 'w':
            C.workload = -1;
            for (int i = 0; i < W__N; i++)
                if (strcmp(optarg, wnames[i]) == 0)
                    C.workload = i;
            if (strcmp(optarg, "pc") == 0)
                C.workload = W_PC;
            if (C.workload < 0)
                return bad("unknown workload '%s'", optarg);
            break;
        case 'l': {
            liblock_algorithm_info_t in;
            if (liblock_algorithm_info(optarg, &in) != 0)
                return bad("unknown lock '%s' (liblock list shows them)", optarg);
            C.lock = optarg;
            break;
        }
        case 'p':
            if (liblock_wait_parse(optarg, &C.policy) != 0)
                return bad("unknown waiting policy '%s'", optarg);
            C.policy_name = optarg;
            break;
        case 't':
            if (parse_whole(optarg, 1, 4096, &v))
                return bad("-t wants a thread count in 1..4096, not '%s'", optarg);
            C.threads = (int)v;
            break;
        case 'd':
            if (parse_double(optarg, 0.01, 3600, &C.duration))
                return bad("-d wants seconds in 0.01..3600, not '%s'", optarg);
            break;
        case 'g':
            if (parse_double(optarg, 0, 3600, &C.grace))
                return bad("-g wants seconds in 0..3600, not '%s'", optarg);
            break;
        case 'o':
            if (strcmp(optarg, "csv") == 0)
                C.csv = 1;
            else if (strcmp(optarg, "json") == 0)
                C.csv = 0;
            else
                return bad("-o wants json or csv, not '%s'", optarg);
            break;
        case 'H':
            C.header = 0;
            break;
        case 'n':
            C.probe = 0;
            break;
        case 'F':
            if (parse_whole(optarg, 0, 1, &v))
                return bad("-F wants 0 or 1, not '%s'", optarg);
            C.fairness = (int)v;
            break;
        case 's':
            if (parse_whole(optarg, 0, 1L << 40, &v))
                return bad("-s wants a seed in 0..2^40, not '%s'", optarg);
            C.seed = (uint64_t)v;
            break;
#define LONGOPT(code, field, lo, hi, what)                                     \
    case code:                                                                 \
        if (parse_whole(optarg, lo, hi, &v))                                   \
            return bad("--" what " wants an integer in " #lo ".." #hi ", not '%s'", optarg); \
        C.field = v;                                                           \
        break;
            LONGOPT(O_CS_LOADS, cs_loads, 0, 100000000, "cs-loads")
            LONGOPT(O_NCS_LOADS, ncs_loads, 0, 100000000, "ncs-loads")
            LONGOPT(O_ARRAY_KB, array_kb, 1, 4194304, "array-kb")
            LONGOPT(O_RING, ring, 1, 1000000, "ring")
            LONGOPT(O_RING_CS, ring_cs, 0, 1000000, "ring-cs")
            LONGOPT(O_ELEM_BYTES, elem_bytes, 64, 1048576, "elem-bytes")
            LONGOPT(O_QUEUE, queue, 1, 100000000, "queue")
            LONGOPT(O_KEYS, keys, 1, 1000000000, "keys")
            LONGOPT(O_KEYSET, keyset, 1, 100000000, "keyset")
            LONGOPT(O_NCS_STEPS, ncs_steps, 0, 100000000, "ncs-steps")
            LONGOPT(O_LRU_CAP, lru_capacity, 1, 100000000, "lru-capacity")
            LONGOPT(O_BUFFERS, buffers, 1, 4096, "buffers")
            LONGOPT(O_BUFFER_KB, buffer_kb, 1, 1048576, "buffer-kb")
            LONGOPT(O_SWAPS, swaps, 0, 100000000, "swaps")
            LONGOPT(O_UPDATES, updates, 0, 100000000, "updates")
        case O_CONSUMERS:
            if (parse_whole(optarg, 1, 4096, &v))
                return bad("--consumers wants an integer in 1..4096, not '%s'", optarg);
            C.consumers = (int)v;
            break;
        case O_REPLACE:
            if (parse_double(optarg, 0, 1, &d))
                return bad("--replace wants a probability in 0..1, not '%s'", optarg);
            C.replace = d;
            break;
        case O_COND_FIFO:
            if (parse_double(optarg, 0, 1, &d))
                return bad("--cond-fifo wants a probability in 0..1, not '%s'", optarg);
            C.cond_fifo = d;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc)
        return bad("unexpected argument '%s'", argv[optind]);
    if (C.workload < 0) {
        fprintf(stderr, "malthus: -w WORKLOAD is required\n");
        usage(stderr);
        return 2;
    }
    if (C.elem_bytes % 64)
        return bad("--elem-bytes must be a multiple of 64%s", "");
    if (C.keys < 0)
        C.keys = C.workload == W_LRU ? 1000000 : 10000000;
    if (C.replace < 0)
        C.replace = C.workload == W_LRU ? 0.01 : 0.1;
    if (C.workload == W_KEYMAP && C.keys > 1000000000L / 2)
        return bad("--keys too large for keymap%s", "");
    return -1;
}
