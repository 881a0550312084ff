/* expect: transformed=1 refused=0 -- inputs (a parameter and locals read inside);
 * prints on stderr how many sections ran on another thread than the caller */
#include "common.h"
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static long total, remote;
static void work(int id)
{
    pid_t me = (pid_t)syscall(SYS_gettid);
    long k = id + 1;
    for (int i = 0; i < ITERS; i++) {
        int add = i % 3;
        pthread_mutex_lock(&m);
        total += add * k;
        if ((pid_t)syscall(SYS_gettid) != me)
            remote++;
        pthread_mutex_unlock(&m);
    }
}
static void report(void)
{
    printf("total %ld\n", total);
    fprintf(stderr, "remote %ld\n", remote);
}
