/* destroy of a locked mutex: EBUSY (glibc's answer; POSIX leaves it
 * undefined) and the mutex is left intact; destroy of an unlocked one: 0,
 * after which pthread_mutex_init makes it usable again. */
#include "common.h"
int main(void)
{
    for (int i = 0; i < N_MUTEX_TYPES; i++) {
        pthread_mutex_t m;
        struct holder h;
        mutex_of(&m, mutex_types[i].type);
        printf("[%s]\n", mutex_types[i].name);
        SHOW("lock", pthread_mutex_lock(&m));
        SHOW("destroy held by self", pthread_mutex_destroy(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        hold_start(&h, &m);
        SHOW("destroy held by other thread", pthread_mutex_destroy(&m));
        SHOW("trylock", pthread_mutex_trylock(&m));
        hold_end(&h);
        SHOW("holder unlock", h.unlock_r);
        SHOW("destroy unlocked", pthread_mutex_destroy(&m));
        SHOW("init again", mutex_of(&m, mutex_types[i].type));
        SHOW("lock", pthread_mutex_lock(&m));
        SHOW("unlock", pthread_mutex_unlock(&m));
        SHOW("destroy", pthread_mutex_destroy(&m));
    }
    return 0;
}
