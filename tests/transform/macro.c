/* expect: transformed=3 refused=0 -- locks through macros (the mutex inside the macro; do-while macros) */
#include "common.h"
struct global { pthread_mutex_t lock[2]; long work[2]; };
static struct global g = {{PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER}, {0, 0}};
static struct global *gm = &g;
#define LOCK(l) pthread_mutex_lock(l)
#define UNLOCK(l) pthread_mutex_unlock(l)
#define ALOCK(i) pthread_mutex_lock(&gm->lock[i])
#define AULOCK(i) pthread_mutex_unlock(&gm->lock[i])
#define DLOCK(l) do { pthread_mutex_lock(l); } while (0)
#define DUNLOCK(l) do { pthread_mutex_unlock(l); } while (0)
static void work(int id)
{
    for (int i = 0; i < ITERS; i++) {
        LOCK(&gm->lock[0]);
        gm->work[0]++;
        UNLOCK(&gm->lock[0]);
        ALOCK(1);
        gm->work[1] += 2;
        AULOCK(1);
        DLOCK(&g.lock[0]);
        gm->work[0] += 3;
        DUNLOCK(&g.lock[0]);
    }
}
static void report(void) { printf("work %ld %ld\n", g.work[0], g.work[1]); }
