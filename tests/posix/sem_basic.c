/* sem_init/post/trywait/wait/getvalue/destroy: values as POSIX says,
 * trywait at 0 is -1/EAGAIN, init above SEM_VALUE_MAX is -1/EINVAL, post at
 * SEM_VALUE_MAX is -1/EOVERFLOW with the value unchanged. */
#include "common.h"
#include <semaphore.h>
static void val(sem_t *s)
{
    int v = -99;
    int r = sem_getvalue(s, &v);
    printf("getvalue: %s value %d\n", r ? en(errno) : "0", v);
}
int main(void)
{
    sem_t s;
    SHOWE("init 0", sem_init(&s, 0, 0));
    val(&s);
    SHOWE("trywait", sem_trywait(&s));
    SHOWE("post", sem_post(&s));
    SHOWE("post", sem_post(&s));
    val(&s);
    SHOWE("trywait", sem_trywait(&s));
    SHOWE("wait", sem_wait(&s));
    val(&s);
    SHOWE("trywait", sem_trywait(&s));
    SHOWE("destroy", sem_destroy(&s));
    SHOWE("init SEM_VALUE_MAX+1", sem_init(&s, 0, (unsigned)SEM_VALUE_MAX + 1u));
    SHOWE("init SEM_VALUE_MAX", sem_init(&s, 0, SEM_VALUE_MAX));
    SHOWE("post at SEM_VALUE_MAX", sem_post(&s));
    val(&s);
    SHOWE("trywait", sem_trywait(&s));
    SHOWE("post", sem_post(&s));
    val(&s);
    SHOWE("destroy", sem_destroy(&s));
    SHOWE("init 3", sem_init(&s, 0, 3));
    val(&s);
    SHOWE("destroy", sem_destroy(&s));
    return 0;
}
