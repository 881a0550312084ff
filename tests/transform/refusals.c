/* expect: transformed=0 refused=18 -- one section per refusal; all are left
 * unchanged and the program still runs (and counts) exactly */
#include "common.h"
#include <alloca.h>
#include <setjmp.h>
#include <stdarg.h>
#include <string.h>
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER, ms[2] = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER};
static long c[17];
static __thread long tl;
static pthread_key_t key;
__attribute__((constructor)) static void make_key(void) { pthread_key_create(&key, NULL); }
static void unlock_elsewhere(void) { pthread_mutex_unlock(&m); }
#define BUMP() (c[6] += one)
#define LOCKED(stmt) do { pthread_mutex_lock(&m); stmt; pthread_mutex_unlock(&m); } while (0)
static long held(int i)
{
    /* refused: returns with the lock held */
    pthread_mutex_lock(&m);
    if (i < 0)
        return -1;
    c[8]++;
    pthread_mutex_unlock(&m);
    return 0;
}
static void add_args(int n, ...)
{
    /* refused: va_start inside */
    va_list ap;
    pthread_mutex_lock(&m);
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        c[13] += va_arg(ap, int);
    va_end(ap);
    pthread_mutex_unlock(&m);
}
static void work(int id)
{
    int one = 1, n = 2 + id % 2;
    for (int i = 0; i < ITERS; i++) {
        /* refused: the unlock is in another function */
        pthread_mutex_lock(&m);
        c[0]++;
        unlock_elsewhere();
        /* refused: setjmp inside */
        jmp_buf jb;
        pthread_mutex_lock(&m);
        if (setjmp(jb) == 0)
            c[1]++;
        pthread_mutex_unlock(&m);
        /* refused: a variable-length array inside */
        pthread_mutex_lock(&m);
        {
            long vla[n];
            memset(vla, 0, sizeof vla);
            c[2] += vla[0] + 1;
        }
        pthread_mutex_unlock(&m);
        /* refused: alloca inside */
        pthread_mutex_lock(&m);
        long *p = alloca(sizeof *p);
        *p = 1;
        c[3] += *p;
        pthread_mutex_unlock(&m);
        /* refused: a goto into the section */
        if (i < 0)
            goto inside;
        pthread_mutex_lock(&m);
    inside:
        c[4]++;
        pthread_mutex_unlock(&m);
        /* refused: unlocked through a different mutex expression */
        int k = 0;
        pthread_mutex_lock(&ms[k]);
        c[5]++;
        pthread_mutex_unlock(&ms[0]);
        /* refused: a macro inside uses a local */
        pthread_mutex_lock(&m);
        BUMP();
        pthread_mutex_unlock(&m);
        /* refused: a local declared inside is used after, and cannot be
         * hoisted before the section (it is const) */
        pthread_mutex_lock(&m);
        const long v = ++c[7];
        pthread_mutex_unlock(&m);
        (void)v;
        held(i);
        /* refused: an unlock inside that does not end the section */
        pthread_mutex_lock(&m);
        c[9]++;
        if (c[9] < 0)
            pthread_mutex_unlock(&m);
        pthread_mutex_unlock(&m);
        /* refused: a case label of a switch outside is inside */
        switch (i < 0) { /* never 1: the case only shows the shape */
        default:;
            pthread_mutex_lock(&m);
        case 1:
            c[10]++;
            pthread_mutex_unlock(&m);
        }
        /* refused: break out with the lock held (unlocked after the loop) */
        for (;;) {
            pthread_mutex_lock(&m);
            c[11]++;
            if (c[11] > 0)
                break;
            pthread_mutex_unlock(&m);
        }
        pthread_mutex_unlock(&m);
        /* refused: takes ms[0] inside and leaves it locked (released after the
         * section: a delegated section's thread cannot hand a lock to its
         * caller); and the ms[0] section, which unlocks m inside */
        pthread_mutex_lock(&m);
        pthread_mutex_lock(&ms[0]);
        c[14]++;
        pthread_mutex_unlock(&m);
        pthread_mutex_unlock(&ms[0]);
        /* refused: a thread-local variable, and pthread_getspecific, inside
         * (a delegated section would see the server thread's) */
        pthread_mutex_lock(&m);
        tl++;
        c[15] += tl > 0;
        pthread_mutex_unlock(&m);
        pthread_mutex_lock(&m);
        c[16] += pthread_getspecific(key) == NULL; /* never set: NULL in every thread */
        pthread_mutex_unlock(&m);
        /* refused: the whole section inside a macro */
        LOCKED(c[12]++);
        add_args(2, 1, 2);
    }
}
static void report(void)
{
    for (int i = 0; i < 17; i++)
        printf("%ld ", c[i]);
    printf("\n");
}
