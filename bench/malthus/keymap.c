/*
 * keymap.c - the keymap workload: the critical section updates a central
 * open-addressing hash map int -> int (C.keys, 10M, keys pre-inserted) with
 * a key of the worker's key set (keyset.c); the non-critical section is
 * C.ncs_steps (1000) steps of mt19937.
 */
#include "malthus.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

struct kv {
    int32_t key, val;
};
static struct kv *km_tab;
static uint64_t km_mask;
static int km_bits;
static uint64_t km_inserts; /* guarded by LOCK after setup */

static inline uint64_t km_hash(int32_t k) { return ((uint32_t)k * 2654435761u) >> (32 - km_bits); }

static void km_update(int32_t key)
{
    uint64_t i = km_hash(key);
    for (;;) {
        struct kv *e = &km_tab[i];
        if (e->key == key) {
            e->val++;
            return;
        }
        if (e->key < 0) { /* absent: insert (never happens once all keys are in) */
            e->key = key;
            e->val = 1;
            km_inserts++;
            return;
        }
        i = (i + 1) & km_mask;
    }
}

static int km_setup(void)
{
    km_bits = 1;
    while ((1ull << km_bits) < (uint64_t)C.keys * 4 / 3 + 1)
        km_bits++;
    if (km_bits > 32)
        return EINVAL;
    km_mask = (1ull << km_bits) - 1;
    km_tab = big_alloc(sizeof *km_tab << km_bits);
    if (!km_tab)
        return ENOMEM;
    memset(km_tab, 0xff, sizeof *km_tab << km_bits);
    for (long k = 0; k < C.keys; k++) { /* pre-insert every key, value 0 */
        uint64_t i = km_hash((int32_t)k);
        while (km_tab[i].key >= 0)
            i = (i + 1) & km_mask;
        km_tab[i].key = (int32_t)k;
        km_tab[i].val = 0;
    }
    return 0;
}

static int km_thread_init(struct worker *w) { return keyset_init(w, C.keys); }

static void km_loop(struct worker *w)
{
    struct mt *m = w->mt;
    uint64_t sum = 0;
    while (!stopping()) {
        liblock_lock(&LOCK);
        km_update(keyset_pick(w));
        liblock_unlock(&LOCK);
        count_op(w);
        for (long k = 0; k < C.ncs_steps; k++)
            sum += mt_next(m);
    }
    w->sink = sum;
}
static int km_check(char *msg, size_t len, uint64_t ops)
{
    uint64_t vs = 0, present = 0;
    for (uint64_t i = 0; i <= km_mask; i++)
        if (km_tab[i].key >= 0) {
            vs += (uint64_t)km_tab[i].val;
            present++;
        }
    if (vs != ops || present != (uint64_t)C.keys || km_inserts) {
        snprintf(msg, len, "keymap: map updates %llu != operations %llu, or %llu keys != %ld",
                 (unsigned long long)vs, (unsigned long long)ops, (unsigned long long)present, C.keys);
        return -1;
    }
    return 0;
}

const struct workload wl_keymap = {km_setup, km_thread_init, km_loop, km_check, keyset_report, 0};
