/*
 * test_bench_chain - the benchmark harness's own building blocks are right:
 * the dependent chain (bench/chain.h) visits K distinct, non-adjacent lines
 * in a non-sequential order, each next address comes from the line just
 * read, every walk increments every line once; the latency histogram
 * (bench/common.h) keeps exact counts/min/max and percentiles within its
 * stated resolution.  No timing is asserted.
 */
#include "harness.h"
#include "../bench/chain.h"
#include "../bench/common.h"

static int cmpu(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void check_chain(int k, uint64_t seed)
{
    char ctx[64];
    snprintf(ctx, sizeof ctx, "chain k=%d seed=%llu", k, (unsigned long long)seed);
    th_context = ctx;
    struct chain c;
    CHECK(chain_init(&c, k, seed) == 0, "chain_init failed");
    if (!c.base)
        return;
    uint64_t *v = calloc((size_t)k, sizeof *v), *s = calloc((size_t)k, sizeof *s);
    uint64_t end = chain_walk(&c, v);
    CHECK(end == c.head, "walk does not come back to the head");
    /* each step's address is the value stored in the previous line */
    for (int i = 0; i + 1 < k; i++)
        CHECK(((struct chain_line *)(c.base + v[i]))->next == v[i + 1], "step %d: next address not from the line read", i);
    /* every line inside the region, slot-aligned: first line of a 2-line slot */
    for (int i = 0; i < k; i++) {
        CHECK(v[i] < c.slots * CHAIN_SLOT, "line %d outside the region", i);
        CHECK(v[i] % CHAIN_SLOT == 0, "line %d not at a slot start", i);
        CHECK(((uintptr_t)(c.base + v[i])) % CHAIN_LINE == 0, "line %d not line-aligned", i);
    }
    /* K distinct lines, no two adjacent (at least one untouched line between) */
    memcpy(s, v, (size_t)k * sizeof *s);
    qsort(s, (size_t)k, sizeof *s, cmpu);
    int distinct = 1, nonadjacent = 1;
    for (int i = 1; i < k; i++) {
        if (s[i] == s[i - 1])
            distinct = 0;
        if (s[i] - s[i - 1] < 2 * CHAIN_LINE)
            nonadjacent = 0;
    }
    CHECK(distinct, "the walk visits a line twice");
    CHECK(nonadjacent, "two chain lines are adjacent");
    /* the walk order is not a constant stride of one slot */
    for (int i = 1; i < k; i++) {
        long d = (long)v[i] - (long)v[i - 1];
        CHECK(d != CHAIN_SLOT && d != -CHAIN_SLOT, "step %d moves by exactly one slot", i);
    }
    if (k >= 4) { /* not monotone: a stream prefetcher has nothing to follow */
        int up = 1;
        for (int i = 1; i < k; i++)
            up &= v[i] > v[i - 1];
        CHECK(!up, "the walk is in address order");
    }
    /* counts: n walks -> every line n */
    for (int i = 0; i < 9; i++)
        chain_walk_fast(c.base, c.head, c.k);
    CHECK(chain_counts_are(&c, 10), "after 10 walks not every line counts 10");
    CHECK(!chain_counts_are(&c, 9), "count check cannot fail");
    /* untouched second line of each slot stays zero */
    int clean = 1;
    for (size_t sl = 0; sl < c.slots; sl++) {
        const unsigned char *p = c.base + sl * CHAIN_SLOT + CHAIN_LINE;
        for (int b = 0; b < CHAIN_LINE; b++)
            clean &= p[b] == 0;
    }
    CHECK(clean, "the second line of a slot was written");
    free(v);
    free(s);
    chain_destroy(&c);
}

static void check_hist(void)
{
    th_context = "histogram";
    struct hist h;
    hist_init(&h);
    enum { N = 20000 };
    static uint64_t vals[N];
    uint64_t x = 12345, sum = 0;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        vals[i] = 20 + x % 100000; /* spread over many octaves */
        if (i % 7 == 0)
            vals[i] = x % 50; /* and some exact small values */
        hist_add(&h, vals[i]);
        sum += vals[i];
    }
    qsort(vals, N, sizeof *vals, cmpu);
    CHECK_EQ(h.n, N);
    CHECK_EQ(h.sum, sum);
    CHECK_EQ(h.min, vals[0]);
    CHECK_EQ(h.max, vals[N - 1]);
    double qs[] = {0.01, 0.1, 0.5, 0.9, 0.99, 0.999};
    for (size_t i = 0; i < sizeof qs / sizeof *qs; i++) {
        double exact = (double)vals[(size_t)ceil(qs[i] * N) - 1];
        double got = hist_quantile(&h, qs[i]);
        CHECK(fabs(got - exact) <= 0.035 * exact + 1, "q%.3f: %.1f vs exact %.1f", qs[i], got, exact);
    }
    struct hist a, b;
    hist_init(&a);
    hist_init(&b);
    for (int i = 0; i < N; i++)
        hist_add(i % 2 ? &a : &b, vals[i]);
    hist_merge(&a, &b);
    CHECK_EQ(a.n, N);
    CHECK(hist_quantile(&a, 0.5) == hist_quantile(&h, 0.5), "merged median differs");
}

int main(void)
{
    th_watchdog(30);
    int ks[] = {1, 2, 3, 5, 8, 17, 64, 100, 1000};
    for (size_t i = 0; i < sizeof ks / sizeof *ks; i++)
        for (uint64_t seed = 1; seed <= 4; seed++)
            check_chain(ks[i], seed * 77);
    th_context = "k=0";
    struct chain c;
    CHECK(chain_init(&c, 0, 1) == -1, "k=0 accepted");
    check_hist();
    printf("test_bench_chain: %d checks, %d failed\n", th_checks, th_failures);
    return th_failures ? 1 : 0;
}
