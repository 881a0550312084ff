/* pthread_mutexattr_*: defaults, every valid value accepted and read back,
 * invalid values EINVAL; a mutex made from each attribute works. */
#include "common.h"
int main(void)
{
    pthread_mutexattr_t a;
    int v;
    SHOW("attr init", pthread_mutexattr_init(&a));
    pthread_mutexattr_gettype(&a, &v);
    printf("default type is PTHREAD_MUTEX_DEFAULT: %s\n", v == PTHREAD_MUTEX_DEFAULT ? "yes" : "no");
    pthread_mutexattr_getpshared(&a, &v);
    printf("default pshared private: %s\n", v == PTHREAD_PROCESS_PRIVATE ? "yes" : "no");
    pthread_mutexattr_getrobust(&a, &v);
    printf("default robust stalled: %s\n", v == PTHREAD_MUTEX_STALLED ? "yes" : "no");
    pthread_mutexattr_getprotocol(&a, &v);
    printf("default protocol none: %s\n", v == PTHREAD_PRIO_NONE ? "yes" : "no");
    SHOW("settype 99", pthread_mutexattr_settype(&a, 99));
    SHOW("settype -1", pthread_mutexattr_settype(&a, -1));
    SHOW("setpshared 7", pthread_mutexattr_setpshared(&a, 7));
    SHOW("setrobust 7", pthread_mutexattr_setrobust(&a, 7));
    SHOW("setprotocol 7", pthread_mutexattr_setprotocol(&a, 7));
    static const int types[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_RECURSIVE,
                                PTHREAD_MUTEX_DEFAULT};
    for (int i = 0; i < 4; i++) {
        SHOW("settype", pthread_mutexattr_settype(&a, types[i]));
        pthread_mutexattr_gettype(&a, &v);
        printf("gettype matches: %s\n", v == types[i] ? "yes" : "no");
        for (int ps = 0; ps < 2; ps++)
            for (int rb = 0; rb < 2; rb++) {
                pthread_mutexattr_setpshared(&a, ps ? PTHREAD_PROCESS_SHARED : PTHREAD_PROCESS_PRIVATE);
                pthread_mutexattr_setrobust(&a, rb ? PTHREAD_MUTEX_ROBUST : PTHREAD_MUTEX_STALLED);
                pthread_mutex_t m;
                int r1 = pthread_mutex_init(&m, &a), r2 = pthread_mutex_lock(&m), r3 = pthread_mutex_trylock(&m);
                if (r3 == 0)
                    pthread_mutex_unlock(&m);
                int r4 = pthread_mutex_unlock(&m), r5 = pthread_mutex_destroy(&m);
                printf("  pshared=%d robust=%d: init %s lock %s trylock %s unlock %s destroy %s\n", ps, rb, en(r1),
                       en(r2), en(r3), en(r4), en(r5));
            }
        pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_PRIVATE);
        pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_STALLED);
    }
    SHOW("attr destroy", pthread_mutexattr_destroy(&a));
    return 0;
}
