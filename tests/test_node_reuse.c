/*
 * test_node_reuse - a thread's per-hold node goes from one algorithm to
 * another.  The library recycles a thread's hold records (their node area)
 * across every lock the thread takes, whatever the lock's algorithm, and
 * the interposer does the same with its per-thread cached node; auto moves
 * one lock's holds between candidates.  So an algorithm must not write into
 * a node after that node's owner may have released it (a waiter announcing
 * into its predecessor's node, say): the next owner of the memory may be
 * another algorithm whose node keeps state at that place.
 *
 * For every ordered pair (A, B) of algorithms with per-hold nodes, 4
 * threads (more than this machine's 2 CPUs, so waiters spin out their
 * budget and park) each run the loop: lock a, critical section, unlock a,
 * lock b, critical section, unlock b -- so each thread's node is A's and
 * B's in turn, while other threads are queued in both.  Every second round
 * a thread takes b with trylock (retrying) instead.  Exact counts and no
 * overlap on both locks' data; ThreadSanitizer (make test's TSan run, with
 * loiter, whose node keeps a plain field at the place where mcs and mcscr
 * waiters used to announce late, as the partner) reports any write that
 * lands in a node its owner has moved on with.
 *
 * Usage: test_node_reuse [ALGORITHM...] [--scenario=PARTNER,...]
 *   rows are algorithms A, columns ("scenarios") partners B; under
 *   LIBLOCK_TEST_SCALE=tsan the partner is loiter only unless --scenario
 *   says otherwise.  Bound per pair 20 s (LIBLOCK_TEST_TIMEOUT); rounds per
 *   thread LIBLOCK_TEST_ITERS (default 3000).
 */
#include "scenario.h"

#define NTHREADS 4

static long iters;

static struct {
    liblock_t a, b;
    struct sc_guard ga, gb;
    atomic_long errors;
    atomic_int last;
    struct sc_gate gate;
} R;

static void note_err(int e)
{
    if (e) {
        atomic_fetch_add(&R.errors, 1);
        atomic_store(&R.last, e);
    }
}

static void *worker(void *arg)
{
    long id = (long)arg;
    sc_gate_wait(&R.gate);
    for (long i = 0; i < iters; i++) {
        note_err(liblock_lock(&R.a));
        sc_enter(&R.ga);
        sc_leave(&R.ga);
        note_err(liblock_unlock(&R.a));
        if ((i + id) & 1) {
            int e;
            while ((e = liblock_trylock(&R.b)) == EBUSY)
                sched_yield();
            note_err(e);
        } else {
            note_err(liblock_lock(&R.b));
        }
        sc_enter(&R.gb);
        sc_leave(&R.gb);
        note_err(liblock_unlock(&R.b));
        if ((i & 63) == 0)
            sc_pause(200);
    }
    return NULL;
}

static void pair_body(const char *algo, void *arg)
{
    const char *partner = arg;
    memset(&R, 0, sizeof R);
    R.gate.n = NTHREADS;
    int e = sc_init_default(&R.a, algo);
    CHECK(e == 0, "init %s: %s", algo, strerror(e));
    int f = sc_init_default(&R.b, partner);
    CHECK(f == 0, "init %s: %s", partner, strerror(f));
    if (e || f)
        return;
    pthread_t t[NTHREADS];
    for (long i = 0; i < NTHREADS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, worker, (void *)i), 0);
    for (int i = 0; i < NTHREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(atomic_load(&R.errors) == 0, "%ld calls failed, last %d (%s)", (long)atomic_load(&R.errors),
          atomic_load(&R.last), strerror(atomic_load(&R.last)));
    CHECK_EQ(R.ga.count, NTHREADS * iters);
    CHECK_EQ(R.gb.count, NTHREADS * iters);
    CHECK_EQ(R.ga.violations, 0);
    CHECK_EQ(R.gb.violations, 0);
    CHECK_EQ(liblock_destroy(&R.a), 0);
    CHECK_EQ(liblock_destroy(&R.b), 0);
}

static int has_nodes(const char *algo)
{
    liblock_algorithm_info_t in;
    return liblock_algorithm_info(algo, &in) == 0 && in.waiter_bytes > 0;
}

static int partner_selected(const char *p)
{
    for (int i = 1; i < sc.argc; i++)
        if (strncmp(sc.argv[i], "--scenario=", 11) == 0)
            return sc_scenario_selected(p);
    if (getenv("LIBLOCK_TEST_SCENARIOS"))
        return sc_scenario_selected(p);
    const char *scale = getenv("LIBLOCK_TEST_SCALE");
    if (scale && strcmp(scale, "tsan") == 0)
        return strcmp(p, "loiter") == 0;
    return 1;
}

int main(int argc, char **argv)
{
    sc_setup(argc, argv);
    iters = sc_iters(3000);
    if (th_scale_small() && !getenv("LIBLOCK_TEST_ITERS"))
        iters = 1000;
    unsigned bound = sc_bound(20);
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!sc_algo_selected(*a) || !has_nodes(*a))
            continue;
        for (const char *const *b = liblock_algorithms(); *b; b++) {
            if (strcmp(*a, *b) == 0 || !has_nodes(*b) || !partner_selected(*b))
                continue;
            sc_run(*a, *b, bound, pair_body, (void *)*b);
        }
    }
    CHECK(sc.runs > 0, "no pair selected");
    return sc_report("test_node_reuse");
}
