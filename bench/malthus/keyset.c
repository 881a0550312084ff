/*
 * keyset.c - the key set of the keymap and lrucache workloads: each worker
 * draws C.keyset (1000) keys from [0, range) with its own mt19937, and an
 * operation uses one of them, replaced with probability C.replace
 * (keyset_pick, malthus.h).
 */
#include "malthus.h"

#include <errno.h>

int keyset_init(struct worker *w, long range)
{
    w->mt = malloc(sizeof *w->mt);
    int32_t *ks = malloc((size_t)C.keyset * sizeof *ks);
    if (!w->mt || !ks)
        return ENOMEM;
    mt_seed(w->mt, (uint32_t)(C.seed * 1000003u + (uint64_t)w->idx * 7919u + 1));
    for (long i = 0; i < C.keyset; i++)
        ks[i] = (int32_t)mt_below(w->mt, (uint32_t)range);
    w->priv = ks;
    return 0;
}

void keyset_report(void)
{
    f_num("keys", "%.0f", C.keys);
    f_num("keyset", "%.0f", C.keyset);
    f_num("replace", "%g", C.replace);
    f_num("ncs_steps", "%.0f", C.ncs_steps);
}
