/*
 * test_mailbox - the message transport of hyblock and hybcomb (src/runtime/transport/mailbox.h),
 * with more threads than CPUs:
 *
 *  fifo      one receiver, 12 senders on their own lanes, each sending
 *            numbered words (some as 3-word messages received with
 *            receive(3)); every word arrives exactly once, in each sender's
 *            order; under yield and spin-then-park (and spin with 2 senders).
 *  full      a sender sending LL_MBOX_CAP + 3 words to a lane nobody reads
 *            publishes exactly LL_MBOX_CAP of them and does not return; once
 *            the receiver takes them it finishes, and the words are right.
 *  pingpong  8 pairs of threads bounce a counter through their mailboxes
 *            (each waits in receive, parking under spin-then-park): no
 *            lost wake-up, exact final values.
 *  pool      500 short-lived threads, one at a time, each take a mailbox:
 *            exited threads' mailboxes are reused, not leaked.
 *
 * Usage: test_mailbox
 */
#include "harness.h"
#include "runtime/transport/mailbox.h"

#define NSEND 12

static ll_mbox_t *_Atomic rx_box;
static _Atomic int go;

struct sender {
    pthread_t th;
    int idx, policy, words_per_msg;
    long n;
};

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    while (!atomic_load(&go))
        sched_yield();
    ll_mbox_t *to = atomic_load(&rx_box);
    unsigned lane = LL_LANE_USER + (unsigned)s->idx;
    for (long i = 0; i < s->n; i += s->words_per_msg) {
        uint64_t w[3];
        for (int k = 0; k < s->words_per_msg; k++)
            w[k] = ((uint64_t)s->idx << 32) | (uint64_t)(i + k);
        ll_mbox_send(to, lane, w, (unsigned)s->words_per_msg, s->policy);
    }
    return NULL;
}

static void test_fifo(int policy, int nsend, long per)
{
    th_context = liblock_wait_name(policy);
    ll_mbox_t *me = ll_mbox_self();
    CHECK(me != NULL, "ll_mbox_self");
    CHECK_EQ(ll_mbox_reserve(me, LL_LANE_USER + NSEND), 0);
    atomic_store(&rx_box, me);
    atomic_store(&go, 0);
    struct sender s[NSEND];
    for (int i = 0; i < nsend; i++) {
        s[i] = (struct sender){.idx = i, .policy = policy, .words_per_msg = (i % 3 == 0) ? 3 : 1, .n = per};
        pthread_create(&s[i].th, NULL, sender_main, &s[i]);
    }
    atomic_store(&go, 1);
    long next[NSEND] = {0}, got = 0, total = (long)nsend * per, bad = 0;
    unsigned rr = 0;
    while (got < total) {
        int idle = 1;
        for (int j = 0; j < nsend; j++, rr++) {
            int i = (int)(rr % (unsigned)nsend);
            unsigned lane = LL_LANE_USER + (unsigned)i;
            if (next[i] >= per || ll_mbox_is_empty(me, lane))
                continue;
            idle = 0;
            uint64_t w[3];
            ll_mbox_receive(me, lane, w, (unsigned)s[i].words_per_msg, policy);
            for (int k = 0; k < s[i].words_per_msg; k++) {
                uint64_t want = ((uint64_t)i << 32) | (uint64_t)next[i];
                if (w[k] != want && bad++ < 5)
                    fprintf(stderr, "lane %d: got %#llx, expected %#llx\n", i, (unsigned long long)w[k],
                            (unsigned long long)want);
                next[i]++;
                got++;
            }
        }
        if (idle)
            sched_yield();
    }
    for (int i = 0; i < nsend; i++) {
        pthread_join(s[i].th, NULL);
        CHECK(ll_mbox_is_empty(me, LL_LANE_USER + (unsigned)i), "lane %d not empty after the last word", i);
        CHECK_EQ(next[i], per);
    }
    CHECK(bad == 0, "%ld words out of order, lost or duplicated", bad);
}

/* ---- full lane ---- */
static _Atomic int full_done;
static void *full_sender(void *arg)
{
    (void)arg;
    uint64_t w[LL_MBOX_CAP + 3];
    for (unsigned i = 0; i < LL_MBOX_CAP + 3; i++)
        w[i] = 1000 + i;
    ll_mbox_send(atomic_load(&rx_box), LL_LANE_USER, w, LL_MBOX_CAP + 3, LIBLOCK_WAIT_SPIN_THEN_PARK);
    atomic_store(&full_done, 1);
    return NULL;
}

static void test_full(void)
{
    th_context = "full";
    ll_mbox_t *me = ll_mbox_self();
    atomic_store(&rx_box, me);
    atomic_store(&full_done, 0);
    struct ll_lane *ln = ll_mbox_lane(me, LL_LANE_USER);
    uint32_t h0 = atomic_load(&ln->head);
    pthread_t th;
    pthread_create(&th, NULL, full_sender, NULL);
    while ((((atomic_load(&ln->tail) & LL_MBOX_MASK) - h0) & LL_MBOX_MASK) < LL_MBOX_CAP)
        usleep(1000);
    usleep(20000);
    CHECK_EQ(((atomic_load(&ln->tail) & LL_MBOX_MASK) - h0) & LL_MBOX_MASK, LL_MBOX_CAP);
    CHECK(!atomic_load(&full_done), "send returned although the lane was full");
    uint64_t w[LL_MBOX_CAP + 3];
    ll_mbox_receive(me, LL_LANE_USER, w, LL_MBOX_CAP + 3, LIBLOCK_WAIT_SPIN_THEN_PARK);
    pthread_join(th, NULL);
    CHECK(atomic_load(&full_done), "sender did not finish");
    for (unsigned i = 0; i < LL_MBOX_CAP + 3; i++)
        CHECK_EQ(w[i], 1000 + i);
    CHECK(ll_mbox_is_empty(me, LL_LANE_USER), "lane not empty");
}

/* ---- ping-pong pairs ---- */
#define NPAIRS 8
struct pp {
    pthread_t th[2];
    ll_mbox_t *_Atomic box[2];
    _Atomic int ready;
    long rounds;
    uint64_t final[2];
};

struct pp_arg {
    struct pp *p;
    int side;
};

static void *pp_main(void *arg)
{
    struct pp_arg *a = arg;
    struct pp *p = a->p;
    ll_mbox_t *me = ll_mbox_self();
    atomic_store(&p->box[a->side], me);
    atomic_fetch_add(&p->ready, 1);
    while (atomic_load(&p->ready) < 2)
        sched_yield();
    ll_mbox_t *peer = atomic_load(&p->box[!a->side]);
    uint64_t v = 0;
    if (a->side == 0)
        ll_mbox_send1(peer, LL_LANE_USER, 1, LIBLOCK_WAIT_SPIN_THEN_PARK);
    for (long r = 0; r < p->rounds; r++) {
        v = ll_mbox_receive1(me, LL_LANE_USER, LIBLOCK_WAIT_SPIN_THEN_PARK);
        if (a->side == 1 || r + 1 < p->rounds)
            ll_mbox_send1(peer, LL_LANE_USER, v + 1, LIBLOCK_WAIT_SPIN_THEN_PARK);
    }
    p->final[a->side] = v;
    return NULL;
}

static void test_pingpong(long rounds)
{
    th_context = "pingpong";
    static struct pp P[NPAIRS];
    static struct pp_arg A[NPAIRS][2];
    for (int i = 0; i < NPAIRS; i++) {
        memset(&P[i], 0, sizeof P[i]);
        P[i].rounds = rounds;
        for (int s = 0; s < 2; s++) {
            A[i][s] = (struct pp_arg){&P[i], s};
            pthread_create(&P[i].th[s], NULL, pp_main, &A[i][s]);
        }
    }
    for (int i = 0; i < NPAIRS; i++) {
        pthread_join(P[i].th[0], NULL);
        pthread_join(P[i].th[1], NULL);
        /* side 1 receives 1, 3, 5, ...; side 0 receives 2, 4, ..., 2*rounds */
        CHECK_EQ(P[i].final[0], 2 * rounds);
        CHECK_EQ(P[i].final[1], 2 * rounds - 1);
    }
}

/* ---- pool ---- */
static void *pool_main(void *arg)
{
    (void)arg;
    return ll_mbox_self();
}

static void test_pool(void)
{
    th_context = "pool";
    unsigned long before = ll_mbox_debug_created();
    for (int i = 0; i < 500; i++) {
        pthread_t th;
        void *r = NULL;
        pthread_create(&th, NULL, pool_main, NULL);
        pthread_join(th, &r);
        CHECK(r != NULL, "ll_mbox_self in thread %d", i);
    }
    unsigned long made = ll_mbox_debug_created() - before;
    CHECK(made <= 2, "500 sequential threads made %lu mailboxes (exited threads' are not reused)", made);
}

int main(void)
{
    th_watchdog(120);
    setenv("LIBLOCK_WARN", "0", 1); /* the spin case waits on full lanes on purpose */
    long per = th_scale_small() ? 600 : 1500; /* a multiple of 3 (3-word messages) */
    test_fifo(LIBLOCK_WAIT_SPIN, 2, per);
    test_fifo(LIBLOCK_WAIT_YIELD, NSEND, per);
    test_fifo(LIBLOCK_WAIT_SPIN_THEN_PARK, NSEND, per);
    test_full();
    test_pingpong(th_scale_small() ? 300 : 3000);
    test_pool();
    return th_report("test_mailbox");
}
