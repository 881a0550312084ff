/*
 * test_interpose_malloc - bootstrap without recursion: an allocator that
 * locks a pthread mutex, under the interposer.
 *
 * This program defines malloc/calloc/realloc/free/posix_memalign/
 * aligned_alloc/memalign itself (an executable's definitions take precedence
 * for the whole process, including the interposer), each taking a static
 * PTHREAD_MUTEX_INITIALIZER mutex around glibc's allocator, as jemalloc-like
 * allocators do.  The interposer allocates when it sets a lock up, so the
 * first lock of the allocator's mutex re-enters pthread_mutex_lock on that
 * same mutex from inside the set-up.  It must neither recurse forever nor
 * deadlock: the mutex met during set-up stays glibc's (docs/interpose.md).
 *
 * Driver mode (no arguments, as tests/run.sh runs it): re-run under
 * LD_PRELOAD=<build>/lib/liblock-interpose.so for every algorithm.  Child
 * mode: threads allocate and free under interposed mutexes and condition
 * variables; exact counts, bounded by a watchdog.
 */
#include "harness.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sys/wait.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);

static pthread_mutex_t alloc_mutex = PTHREAD_MUTEX_INITIALIZER;
static long alloc_calls; /* guarded by alloc_mutex */

#define LOCKED(expr)                          \
    ({                                        \
        pthread_mutex_lock(&alloc_mutex);     \
        alloc_calls++;                        \
        __typeof__(expr) _v = (expr);         \
        pthread_mutex_unlock(&alloc_mutex);   \
        _v;                                   \
    })

void *malloc(size_t n) { return LOCKED(__libc_malloc(n)); }
void *calloc(size_t a, size_t b) { return LOCKED(__libc_calloc(a, b)); }
void *realloc(void *p, size_t n) { return LOCKED(__libc_realloc(p, n)); }
void free(void *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&alloc_mutex);
    alloc_calls++;
    __libc_free(p);
    pthread_mutex_unlock(&alloc_mutex);
}
void *memalign(size_t al, size_t n) { return LOCKED(__libc_memalign(al, n)); }
void *aligned_alloc(size_t al, size_t n) { return LOCKED(__libc_memalign(al, n)); }
int posix_memalign(void **out, size_t al, size_t n)
{
    if (al < sizeof(void *) || (al & (al - 1)))
        return EINVAL;
    void *p = LOCKED(__libc_memalign(al, n));
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

/* ---- child ---------------------------------------------------------------- */
static pthread_mutex_t list_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t list_cond = PTHREAD_COND_INITIALIZER;
struct item {
    struct item *next;
    long v;
};
static struct item *head;
static long produced, consumed, sum;
#define PER_THREAD 2000

static void *producer(void *arg)
{
    long base = (long)(intptr_t)arg;
    for (int i = 1; i <= PER_THREAD; i++) {
        struct item *it = malloc(sizeof *it);
        it->v = base + i;
        pthread_mutex_lock(&list_mutex);
        it->next = head;
        head = it;
        produced++;
        pthread_cond_signal(&list_cond);
        pthread_mutex_unlock(&list_mutex);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    (void)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        pthread_mutex_lock(&list_mutex);
        while (!head)
            pthread_cond_wait(&list_cond, &list_mutex);
        struct item *it = head;
        head = it->next;
        consumed++;
        sum += it->v;
        pthread_mutex_unlock(&list_mutex);
        free(it);
        char *scratch = calloc(1, 64 + (size_t)(i % 512));
        scratch = realloc(scratch, 1024);
        free(scratch);
    }
    return NULL;
}

static int child(void)
{
    th_watchdog(40);
    const char *(*active)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_lock");
    CHECK(active && active() && strcmp(active(), getenv("LIBLOCK_LOCK")) == 0, "interposer not active");
    pthread_t p[2], c[2];
    for (int i = 0; i < 2; i++) {
        pthread_create(&p[i], NULL, producer, (void *)(intptr_t)(i * 100000L));
        pthread_create(&c[i], NULL, consumer, NULL);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(p[i], NULL);
        pthread_join(c[i], NULL);
    }
    CHECK_EQ(produced, 2 * PER_THREAD);
    CHECK_EQ(consumed, 2 * PER_THREAD);
    CHECK_EQ(sum, (long)PER_THREAD * (PER_THREAD + 1) + 100000L * PER_THREAD);
    pthread_mutex_lock(&alloc_mutex);
    long calls = alloc_calls;
    pthread_mutex_unlock(&alloc_mutex);
    CHECK(calls >= 4 * PER_THREAD, "the program's allocator was not used (%ld calls)", calls);
    /* the allocator's mutex still excludes: trylock from another thread */
    pthread_mutex_lock(&alloc_mutex);
    int r = -1;
    pthread_t t;
    pthread_create(&t, NULL, (void *(*)(void *))(void *)pthread_mutex_trylock, &alloc_mutex);
    void *ret;
    pthread_join(t, &ret);
    r = (int)(intptr_t)ret;
    pthread_mutex_unlock(&alloc_mutex);
    CHECK_EQ(r, EBUSY);
    char name[128];
    snprintf(name, sizeof name, "test_interpose_malloc[%s]", getenv("LIBLOCK_LOCK"));
    return th_report(name);
}

int main(int argc, char **argv)
{
    if (getenv("LIBLOCK_INTERPOSE_TEST_CHILD"))
        return child();
    th_watchdog(300);
    char *lib = th_interposer(argv[0]);
    if (!lib)
        return th_report("test_interpose_malloc");
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        if (!th_selected(argc, argv, *a))
            continue;
        liblock_algorithm_info_t in;
        liblock_algorithm_info(*a, &in);
        const char *policy = (in.policies & (1u << LIBLOCK_WAIT_SPIN_THEN_PARK)) ? "spin-then-park"
                             : (in.policies & (1u << LIBLOCK_WAIT_PARK))         ? "park"
                             : (in.policies & (1u << LIBLOCK_WAIT_YIELD))        ? "yield"
                                                                                 : NULL;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            setenv("LD_PRELOAD", lib, 1);
            setenv("LIBLOCK_LOCK", *a, 1);
            if (policy)
                setenv("LIBLOCK_WAIT", policy, 1);
            setenv("LIBLOCK_STRICT", "1", 1);
            setenv("LIBLOCK_INTERPOSE_TEST_CHILD", "1", 1);
            execl(argv[0], argv[0], (char *)NULL);
            _exit(126);
        }
        int rc = th_wait_child(pid, 60, *a); /* a hang before main has no watchdog */
        CHECK(rc == 0, "under %s: exit %d", *a, rc);
    }
    free(lib);
    return th_report("test_interpose_malloc");
}
