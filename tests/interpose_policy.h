/*
 * interpose_policy.h - the waiting policy an interposer test runs an
 * algorithm under (shared by tests/interpose_driver.h and tests/lazy_driver.h).
 */
#ifndef LIBLOCK_TESTS_INTERPOSE_POLICY_H
#define LIBLOCK_TESTS_INTERPOSE_POLICY_H

#include <stddef.h>

#include "liblock.h"

/* The waiting policy an algorithm's child runs under: spin-then-park, else
 * park, else yield; NULL: the algorithm's default (or no such algorithm). */
static inline const char *ip_policy(const char *name)
{
    liblock_algorithm_info_t in;
    if (liblock_algorithm_info(name, &in))
        return NULL;
    static const int pref[] = {LIBLOCK_WAIT_SPIN_THEN_PARK, LIBLOCK_WAIT_PARK, LIBLOCK_WAIT_YIELD};
    for (size_t i = 0; i < sizeof pref / sizeof *pref; i++)
        if (in.policies & (1u << pref[i]))
            return liblock_wait_name(pref[i]);
    return NULL;
}

#endif
