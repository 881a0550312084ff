/* liblock-info: print the algorithm registry as JSON lines (used by
 * `liblock list`, the benchmarks and the docs).  With --spin-budget it
 * prints instead the spin phase of spin-then-park on this machine (measured
 * now, or LIBLOCK_SPIN_NS, or measured before: "source" says which) as one
 * JSON object; with --calibration, the machine's figures as
 * LIBLOCK_CALIBRATION takes them (CYCLES_PER_NS,SPIN_NS); with --machine, what the
 * library found out about the machine (CPUs, cache line, topology source,
 * the x86 user-mode waiting instructions, how ll_oncpu tells whether a
 * thread is on a CPU in this process and why) as one JSON object. */
#include <stdio.h>
#include <string.h>
#include "internal.h"

static void json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        if (*s == '"' || *s == '\\')
            putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--spin-budget") == 0) {
        const char *src = NULL;
        unsigned long long ns = (unsigned long long)ll_spin_budget_ns(&src);
        printf("{\"spin_budget_ns\": %llu, \"source\": ", ns);
        json_str(src);
        printf("}\n");
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--calibration") == 0) {
        /* the figures as LIBLOCK_CALIBRATION takes them (`liblock run` hands
         * them to its program): from the environment, else the machine's
         * cache, else measured now and cached (src/platform/calibration.c) */
        double cpn = ll_cycles_per_ns();
        unsigned long long ns = (unsigned long long)ll_spin_budget_ns(NULL);
        printf("%.6f,%llu\n", cpn, ns);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--machine") == 0) {
        printf("{\"cpus\": %d, \"cacheline\": %d, \"topology\": ", ll_ncpus(), ll_cacheline());
        json_str(ll_topology_source());
        printf(", \"waitpkg\": %s, \"monitorx\": %s, \"uwait\": ", ll_cpu_has_waitpkg() ? "true" : "false",
               ll_cpu_has_monitorx() ? "true" : "false");
        json_str(ll_uwait_name());
        printf(", \"oncpu\": ");
        json_str(ll_oncpu_mechanism());
        printf(", \"oncpu_reason\": ");
        json_str(ll_oncpu_reason());
        printf("}\n");
        return 0;
    }
    static const struct { unsigned bit; const char *name; } props[] = {
        {LIBLOCK_PROP_FIFO, "fifo"}, {LIBLOCK_PROP_DELEGATES, "delegates"}, {LIBLOCK_PROP_COND, "cond"},
        {LIBLOCK_PROP_STARVATION_FREE, "starvation-free"}, {LIBLOCK_PROP_DETECTS_UNLOCK, "detects-unlock"},
        {LIBLOCK_PROP_COND_IN_EXECUTE, "cond-in-execute"}, {LIBLOCK_PROP_SERVER, "server"}};
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        liblock_algorithm_info_t in;
        if (liblock_algorithm_info(*a, &in))
            continue;
        printf("{\"name\": ");
        json_str(in.name);
        printf(", \"description\": ");
        json_str(in.description);
        printf(", \"source\": ");
        json_str(in.source);
        printf(", \"properties\": [");
        int first = 1;
        for (size_t i = 0; i < sizeof props / sizeof *props; i++)
            if (in.properties & props[i].bit) {
                printf("%s\"%s\"", first ? "" : ", ", props[i].name);
                first = 0;
            }
        printf("], \"policies\": [");
        first = 1;
        for (int p = 1; p < LIBLOCK_WAIT__COUNT; p++)
            if (in.policies & (1u << p)) {
                printf("%s\"%s\"", first ? "" : ", ", liblock_wait_name(p));
                first = 0;
            }
        printf("], \"default_policy\": \"%s\", \"lock_bytes\": %zu, \"waiter_bytes\": %zu, \"oversubscribed\": ",
               liblock_wait_name(in.default_policy), in.lock_bytes, in.waiter_bytes);
        const struct ll_ops *o = ll_find_ops(in.name);
        if (o && o->oversubscribed)
            json_str(o->oversubscribed);
        else
            printf("null");
        printf("}\n");
    }
    return 0;
}
