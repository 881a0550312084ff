/*
 * to_glibc.c - the objects the shim leaves to glibc, counted by kind and
 * reason (shim.h "Mutex types", docs/interpose.md "What goes to glibc").
 * The interposer prints one line at exit when some were (src/interpose/);
 * the profiler puts the counts in its report (src/profile/report.c).
 *
 * An object is counted once, where the shim decides to leave it to glibc
 * (its initialisation, or the first use of a statically initialised
 * mutex), with the first reason that applies in the order of enum
 * shim_greason.  Counters are relaxed atomics: they order nothing and are
 * read at exit, after the threads that wrote them are gone or quiet (a
 * count read while another thread still initialises an object may miss
 * that one object, which is all a report at exit can promise).
 */
#include "shim.h"

static const char *const kind_one[SG_NKINDS] = {"mutex", "condition variable", "semaphore"};
static const char *const kind_many[SG_NKINDS] = {"mutexes", "condition variables", "semaphores"};
static const char *const reason_text[SG_NREASONS] = {
    "process-shared", "robust", "priority-inheritance", "priority-protection", "left to glibc by the configuration",
    "met while another lock was being set up", "out of memory"};
const char *const shim_greason_key[SG_NREASONS] = {"process_shared", "robust", "prio_inherit", "prio_protect",
                                                   "config", "setup", "no_memory"};
const char *const shim_gkind_key[SG_NKINDS] = {"mutexes", "conds", "sems"};

static _Atomic unsigned long counts[SG_NKINDS][SG_NREASONS];

void shim_to_glibc(int kind, int reason)
{
    atomic_fetch_add_explicit(&counts[kind][reason], 1, memory_order_relaxed);
}

void shim_to_glibc_counts(unsigned long out[SG_NKINDS][SG_NREASONS])
{
    for (int k = 0; k < SG_NKINDS; k++)
        for (int r = 0; r < SG_NREASONS; r++)
            out[k][r] = atomic_load_explicit(&counts[k][r], memory_order_relaxed);
}

/* A forked child reports what it did itself (its parent reports the rest). */
void shim_to_glibc_fork_child(void)
{
    for (int k = 0; k < SG_NKINDS; k++)
        for (int r = 0; r < SG_NREASONS; r++)
            atomic_store_explicit(&counts[k][r], 0, memory_order_relaxed);
}

/* Append "<pre><v> <s>" to buf (n bytes, *at used), truncating. */
static void add(char *buf, size_t n, size_t *at, const char *pre, unsigned long v, const char *s)
{
    if (*at >= n)
        return;
    int k = pre ? snprintf(buf + *at, n - *at, "%s%lu %s", pre, v, s) : snprintf(buf + *at, n - *at, "%s", s);
    if (k > 0)
        *at += (size_t)k;
}

/* "3 mutexes and 1 condition variable went to glibc: 2 robust, 1
 * process-shared, 1 ..." (reasons summed over the kinds), or "" when none. */
size_t shim_to_glibc_summary(char *buf, size_t n)
{
    unsigned long c[SG_NKINDS][SG_NREASONS], per_kind[SG_NKINDS] = {0}, per_reason[SG_NREASONS] = {0};
    shim_to_glibc_counts(c);
    int kinds = 0;
    for (int k = 0; k < SG_NKINDS; k++) {
        for (int r = 0; r < SG_NREASONS; r++) {
            per_kind[k] += c[k][r];
            per_reason[r] += c[k][r];
        }
        kinds += per_kind[k] != 0;
    }
    size_t at = 0;
    if (n)
        buf[0] = 0;
    if (!kinds)
        return 0;
    int done = 0;
    for (int k = 0; k < SG_NKINDS; k++) {
        if (!per_kind[k])
            continue;
        done++;
        const char *sep = done == 1 ? "" : done == kinds ? " and " : ", ";
        add(buf, n, &at, sep, per_kind[k], per_kind[k] == 1 ? kind_one[k] : kind_many[k]);
    }
    add(buf, n, &at, NULL, 0, " went to glibc:");
    done = 0;
    for (int r = 0; r < SG_NREASONS; r++)
        if (per_reason[r])
            add(buf, n, &at, done++ ? ", " : " ", per_reason[r], reason_text[r]);
    return at < n ? at : n ? n - 1 : 0;
}
