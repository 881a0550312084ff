/* expect: transformed=1 refused=0 -- an output written inside, read after */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static int next;
static unsigned char seen[THREADS * ITERS];
static void work(int id)
{
    for (int i = 0; i < ITERS; i++) {
        int ticket;
        pthread_mutex_lock(&m);
        ticket = next;
        next = next + 1;
        pthread_mutex_unlock(&m);
        seen[ticket]++; /* each ticket once: no lock needed */
    }
}
static void report(void)
{
    long ok = 0;
    for (int i = 0; i < THREADS * ITERS; i++)
        ok += seen[i] == 1;
    printf("next %d distinct %ld\n", next, ok);
}
