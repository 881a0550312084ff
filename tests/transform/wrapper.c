/* expect: transformed=1 refused=0 -- function wrappers (--wrapper q_lock:q_unlock);
 * the wrappers' own bodies are not sections */
#include "common.h"
struct queue { pthread_mutex_t mu; long items; };
static struct queue q = {PTHREAD_MUTEX_INITIALIZER, 0};
static void q_lock(pthread_mutex_t *l) { pthread_mutex_lock(l); }
static void q_unlock(pthread_mutex_t *l) { pthread_mutex_unlock(l); }
static void work(int id)
{
    struct queue *p = &q;
    for (int i = 0; i < ITERS; i++) {
        q_lock(&p->mu);
        p->items++;
        q_unlock(&p->mu);
    }
}
static void report(void) { printf("items %ld\n", q.items); }
