/* expect: transformed=5 refused=0 -- locals declared inside a section and used after the unlock
 * (hoisted before the section): a node popped under the lock and freed after it; a struct with a
 * braced initialiser and two variables declared together, one used by an early exit */
#include "common.h"
struct node { struct node *next; long v; };
struct pair { long a, b; };
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static struct node *head;
static long pushed, popped, sum, misses, pairs, odd;
static void push(long v)
{
    struct node *n = malloc(sizeof *n);
    if (!n)
        abort();
    n->v = v;
    pthread_mutex_lock(&m);
    n->next = head;
    head = n;
    pushed++;
    pthread_mutex_unlock(&m);
}
static long pop(void)
{
    pthread_mutex_lock(&m);
    struct node *n = head;
    if (n) {
        head = n->next;
        popped++;
    }
    pthread_mutex_unlock(&m);
    if (!n)
        return -1;
    long v = n->v;
    free(n);
    return v;
}
static long pair(long x)
{
    pthread_mutex_lock(&m);
    struct pair p = {x, 2 * x};
    long q = p.a + p.b, r;
    pairs++;
    if (q % 2) {
        odd++;
        pthread_mutex_unlock(&m);
        return q;
    }
    r = q / 2;
    pthread_mutex_unlock(&m);
    return p.a + r;
}
static void work(int id)
{
    for (int i = 0; i < ITERS; i++) {
        push(id * ITERS + i);
        long v = pop();
        if (v < 0) {
            pthread_mutex_lock(&m);
            misses++;
            pthread_mutex_unlock(&m);
        } else {
            long w = pair(v);
            pthread_mutex_lock(&m);
            sum += v + w;
            pthread_mutex_unlock(&m);
        }
    }
}
static void report(void) { printf("pushed %ld popped %ld sum %ld misses %ld pairs %ld odd %ld\n",
                                  pushed, popped, sum, misses, pairs, odd); }
