/*
 * mt.c - mt19937, the 32-bit Mersenne Twister (M. Matsumoto and
 * T. Nishimura, "Mersenne Twister: a 623-dimensionally equidistributed
 * uniform pseudo-random number generator", ACM TOMACS 8(1), 1998), the
 * generator of the keymap and lrucache workloads (their non-critical
 * section is 1000 steps of it, as in the paper).
 */
#include "malthus.h"

void mt_seed(struct mt *m, uint32_t seed)
{
    m->s[0] = seed;
    for (int i = 1; i < 624; i++)
        m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->i = 624;
}
uint32_t mt_next(struct mt *m)
{
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
            m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}
