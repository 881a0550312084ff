/* expect: transformed=2 refused=0 -- a local array and a local struct changed inside */
#include "common.h"
struct stats { long n, sum; int last[2]; };
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long shared_seq, grand;
static void work(int id)
{
    long hist[4] = {0};
    struct stats st = {0, 0, {0, 0}};
    struct stats *sp = &st;
    for (int i = 0; i < ITERS; i++) {
        pthread_mutex_lock(&m);
        shared_seq++;
        hist[shared_seq % 4]++;
        st.n++;
        sp->sum += i;
        st.last[i % 2] = i;
        pthread_mutex_unlock(&m);
    }
    long h = hist[0] + hist[1] + hist[2] + hist[3];
    pthread_mutex_lock(&m);
    grand += 1000000 * (h == ITERS) + 1000 * (st.n == ITERS) + (st.sum == (long)ITERS * (ITERS - 1) / 2);
    pthread_mutex_unlock(&m);
}
static void report(void) { printf("seq %ld checks %ld\n", shared_seq, grand % 1000000000); }
