/* A timed wait whose deadline passes while another thread holds the mutex
 * returns only once it has the mutex again (POSIX: "the mutex shall have
 * been locked again" also on ETIMEDOUT): ETIMEDOUT, after the other
 * thread's critical section, with the mutex held.  The other thread takes
 * the mutex during one of the waiter's waits (it can only then) and keeps
 * it until 10 ms past that wait's deadline. */
#include "common.h"
static pthread_mutex_t m;
static pthread_cond_t c = PTHREAD_COND_INITIALIZER;
static _Atomic long long dl_ns; /* the deadline of the waiter's current wait */
static atomic_int section_done;
static void *holder(void *a)
{
    (void)a;
    pthread_mutex_lock(&m);
    long long d = atomic_load(&dl_ns);
    struct timespec t = {(time_t)(d / 1000000000LL), (long)(d % 1000000000LL)};
    while (!reached(CLOCK_REALTIME, &t))
        ms_sleep(1);
    ms_sleep(10);
    atomic_store(&section_done, 1);
    pthread_mutex_unlock(&m);
    return NULL;
}
int main(void)
{
    static const int types[] = {PTHREAD_MUTEX_NORMAL, PTHREAD_MUTEX_ERRORCHECK, PTHREAD_MUTEX_RECURSIVE};
    for (int i = 0; i < 3; i++) {
        mutex_of(&m, types[i]);
        atomic_store(&section_done, 0);
        pthread_mutex_lock(&m);
        pthread_t t = spawn(holder, NULL);
        int r, waits = 0;
        do {
            struct timespec d = deadline(CLOCK_REALTIME, 5);
            atomic_store(&dl_ns, (long long)d.tv_sec * 1000000000LL + d.tv_nsec);
            r = pthread_cond_timedwait(&c, &m, &d);
            waits++;
        } while (r == ETIMEDOUT && !atomic_load(&section_done) && waits < 1000);
        int tr = in_thread(trylock_fn, &m);
        printf("[type %d] timedwait: %s, returned after the other thread's section: %s, held: %s\n", types[i], en(r),
               atomic_load(&section_done) ? "yes" : "no", tr == EBUSY ? "yes" : en(tr));
        pthread_mutex_unlock(&m);
        pthread_join(t, NULL);
        pthread_mutex_destroy(&m);
    }
    return 0;
}
