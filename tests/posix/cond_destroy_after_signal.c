/* The one-waiter form of the same rule: a thread signals the only waiter,
 * which returns and destroys the condvar (and frees its memory) while the
 * signaller may still be inside pthread_cond_signal's aftermath: destroy 0,
 * repeated 100 times with heap condvars. */
#include "common.h"
struct obj { pthread_mutex_t m; pthread_cond_t c; int flag; };
static void *signaller(void *a)
{
    struct obj *o = a;
    pthread_mutex_lock(&o->m);
    o->flag = 1;
    pthread_cond_signal(&o->c);
    pthread_mutex_unlock(&o->m);
    return NULL;
}
int main(void)
{
    int errors = 0, destroy_fail = 0;
    for (int i = 0; i < 100; i++) {
        struct obj *o = calloc(1, sizeof *o);
        pthread_mutex_init(&o->m, NULL);
        pthread_cond_init(&o->c, NULL);
        pthread_mutex_lock(&o->m);
        pthread_t t = spawn(signaller, o);
        while (!o->flag)
            errors += pthread_cond_wait(&o->c, &o->m) != 0;
        pthread_mutex_unlock(&o->m);
        destroy_fail += pthread_cond_destroy(&o->c) != 0;
        pthread_join(t, NULL);
        pthread_mutex_destroy(&o->m);
        free(o);
    }
    printf("rounds: 100, wait errors: %d, destroy failures: %d\n", errors, destroy_fail);
    return 0;
}
