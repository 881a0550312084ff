/* liblock-info: print the algorithm registry as JSON lines (used by
 * `liblock list`, the benchmarks and the docs). */
#include <stdio.h>
#include "liblock.h"

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

int main(void)
{
    static const struct { unsigned bit; const char *name; } props[] = {
        {LIBLOCK_PROP_FIFO, "fifo"}, {LIBLOCK_PROP_DELEGATES, "delegates"}, {LIBLOCK_PROP_COND, "cond"},
        {LIBLOCK_PROP_STARVATION_FREE, "starvation-free"}, {LIBLOCK_PROP_DETECTS_UNLOCK, "detects-unlock"},
        {LIBLOCK_PROP_COND_IN_EXECUTE, "cond-in-execute"}};
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
        printf("], \"default_policy\": \"%s\", \"lock_bytes\": %zu, \"waiter_bytes\": %zu}\n",
               liblock_wait_name(in.default_policy), in.lock_bytes, in.waiter_bytes);
    }
    return 0;
}
