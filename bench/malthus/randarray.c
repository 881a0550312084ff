/*
 * randarray.c - the RandArray workload: the critical section makes
 * C.cs_loads (100) random loads from a shared array of C.array_kb (1 MB),
 * the non-critical section C.ncs_loads (400) random loads from a private
 * array of the same size.
 */
#include "malthus.h"

#include <errno.h>

static uint32_t *ra_shared;
static size_t ra_n;

static int ra_setup(void)
{
    ra_n = (size_t)C.array_kb * 1024 / sizeof(uint32_t);
    ra_shared = big_alloc(ra_n * sizeof(uint32_t));
    if (!ra_shared)
        return ENOMEM;
    uint64_t s = C.seed * 7 + 3;
    for (size_t i = 0; i < ra_n; i++)
        ra_shared[i] = (uint32_t)xs(&s);
    return 0;
}
static int ra_thread_init(struct worker *w)
{
    uint32_t *a = big_alloc(ra_n * sizeof(uint32_t));
    if (!a)
        return ENOMEM;
    for (size_t i = 0; i < ra_n; i++)
        a[i] = (uint32_t)xs(&w->rng);
    w->priv = a;
    return 0;
}
static void ra_loop(struct worker *w)
{
    const uint32_t *priv = w->priv;
    uint64_t r = w->rng, sum = 0;
    const size_t n = ra_n;
    const long cs = C.cs_loads, ncs = C.ncs_loads;
    while (!stopping()) {
        liblock_lock(&LOCK);
        for (long i = 0; i < cs; i++)
            sum += ra_shared[below(xs(&r), n)];
        liblock_unlock(&LOCK);
        count_op(w);
        for (long i = 0; i < ncs; i++)
            sum += priv[below(xs(&r), n)];
    }
    w->rng = r;
    w->sink = sum;
}
static void ra_report(void)
{
    f_num("cs_loads", "%.0f", C.cs_loads);
    f_num("ncs_loads", "%.0f", C.ncs_loads);
    f_num("array_kb", "%.0f", C.array_kb);
}

const struct workload wl_randarray = {ra_setup, ra_thread_init, ra_loop, NULL, ra_report, 0};
