/*
 * test_identity.c - a delegated critical section sees its caller's thread
 * identity (src/platform/identity.h) on every delegating algorithm: rcl,
 * mp-server and the combining locks (hyblock does not delegate: it has no
 * execute).
 *
 * Several threads run sections of one lock.  Inside each, the section
 * compares what it sees with what its caller recorded: a __thread
 * variable, pthread_self(), pthread_getspecific; it sets errno, which the
 * caller must find after execute.  A section counts as run elsewhere when
 * the kernel thread running it (gettid) is not its caller's, and each
 * algorithm must have run some elsewhere, or the checks would be vacuous.
 * Inside, a section also takes a second lock of the same algorithm
 * (lock/unlock and a nested execute, which checks identity again), and
 * finds the first lock held (EDEADLK, EBUSY); afterwards the caller's own
 * records must be clean (it can lock both locks itself).  One thread is
 * sent signals while it waits: its handler must run as itself (its own
 * pthread_self and __thread counter) without disturbing its sections.
 *
 * Switching is off unless LIBLOCK_IDENTITY=1 (or prctl) asks for it: run
 * without it, the program re-executes itself with LIBLOCK_IDENTITY=1.
 * Under ThreadSanitizer or AddressSanitizer switching is compiled out (and
 * LIBLOCK_IDENTITY=0 turns it off): then the identity checks print SKIP
 * and only the rest runs.  With wrfsbase available, the program also runs
 * itself once with LIBLOCK_IDENTITY=prctl, the system-call fallback.
 */
#include "harness.h"
#include "internal.h"
#include "platform/identity.h"

#include <stdatomic.h>
#include <sys/syscall.h>

#define NT 4

static const char *const algos[] = {"rcl", "mp-server", "flat-combining", "cc-synch", "dsm-synch", "oyama", "hybcomb",
                                    NULL};

static __thread int tag;                 /* thread index + 1 */
static __thread volatile sig_atomic_t hits; /* signals handled by this thread (its handler) */
static pthread_key_t key;
static liblock_t L, M;
static int identity_on;
static long iters;

struct caller {
    int tag;
    pid_t tid;
    pthread_t self;
    void *spec;
    atomic_long handled; /* the same count as `hits`, kept where the caller can read it */
    atomic_int handler_wrong;
};
static struct caller callers[NT];

static atomic_long elsewhere, bad_tag, bad_self, bad_spec, bad_nested, nested_elsewhere;
static atomic_long total, handled_as_caller;

static pid_t my_tid(void) { return (pid_t)syscall(SYS_gettid); }

static void *inner(void *p)
{
    struct caller *c = p;
    if (identity_on && (tag != c->tag || !pthread_equal(pthread_self(), c->self)))
        atomic_fetch_add(&bad_nested, 1);
    if (my_tid() != c->tid)
        atomic_fetch_add(&nested_elsewhere, 1);
    return c;
}

static void *section(void *p)
{
    struct caller *c = p;
    atomic_fetch_add(&total, 1);
    int away = my_tid() != c->tid;
    if (away)
        atomic_fetch_add(&elsewhere, 1);
    if (away || identity_on) {
        if (tag != c->tag)
            atomic_fetch_add(&bad_tag, 1);
        if (!pthread_equal(pthread_self(), c->self))
            atomic_fetch_add(&bad_self, 1);
        if (pthread_getspecific(key) != c->spec)
            atomic_fetch_add(&bad_spec, 1);
    }
    /* nested: the same lock is held, another one can be taken */
    if (liblock_execute(&L, inner, c) != NULL || errno != EDEADLK)
        atomic_fetch_add(&bad_nested, 1);
    if (liblock_trylock(&L) != EBUSY)
        atomic_fetch_add(&bad_nested, 1);
    if (liblock_lock(&M) != 0) {
        atomic_fetch_add(&bad_nested, 1);
    } else {
        if (liblock_lock(&M) != EDEADLK) /* found on the hold stack in use here */
            atomic_fetch_add(&bad_nested, 1);
        if (liblock_unlock(&M) != 0)
            atomic_fetch_add(&bad_nested, 1);
    }
    if (liblock_execute(&M, inner, c) != c)
        atomic_fetch_add(&bad_nested, 1);
    for (volatile int i = 0; i < 200; i++) /* long enough to queue others behind */
        ;
    errno = 1000 + c->tag;
    return c;
}

static void on_usr1(int sig)
{
    (void)sig;
    if (tag == 0)
        return; /* not set yet in this thread (a signal meant for the previous round's thread 0) */
    struct caller *c = &callers[tag - 1];
    hits++;
    atomic_fetch_add(&c->handled, 1);
    if (!pthread_equal(pthread_self(), c->self))
        atomic_store(&c->handler_wrong, 1);
    /* a combiner signalled while it runs another thread's section handles
     * the signal as that thread (identity.h, "Signals") */
    if (my_tid() != c->tid)
        atomic_fetch_add(&handled_as_caller, 1);
}

static atomic_long bad_errno, bad_after, done_threads;

static void *worker(void *p)
{
    struct caller *c = p;
    tag = c->tag;
    __atomic_store_n(&c->tid, my_tid(), __ATOMIC_RELEASE);
    c->self = pthread_self();
    c->spec = c;
    pthread_setspecific(key, c->spec);
    for (long i = 0; i < iters; i++) {
        errno = 0;
        void *r = liblock_execute(&L, section, c);
        int e = errno;
        if (r != c)
            atomic_fetch_add(&bad_after, 1);
        /* the handler writes no errno (identity.h, "Signals"), so the
         * section's is what we see */
        if (identity_on && e != 1000 + c->tag)
            atomic_fetch_add(&bad_errno, 1);
    }
    /* the handler's own __thread counter lost nothing (compared with the
     * signal held off, or one handled between the two reads would differ) */
    sigset_t usr1, old;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old);
    if (hits != atomic_load(&c->handled))
        atomic_store(&c->handler_wrong, 1);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    /* our records are clean: we hold nothing, and can take both locks */
    if (liblock_lock(&L) != 0 || liblock_lock(&M) != 0 || liblock_unlock(&M) != 0 || liblock_unlock(&L) != 0)
        atomic_fetch_add(&bad_after, 1);
    atomic_fetch_add(&done_threads, 1);
    return NULL;
}

static int run_algo(const char *name)
{
    th_context = name;
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_SPIN_THEN_PARK);
    if (liblock_init(&L, name, &a) != 0 || liblock_init(&M, name, &a) != 0) {
        th_skip("%s: not available here", name);
        return 0;
    }
    atomic_store(&elsewhere, 0), atomic_store(&bad_tag, 0), atomic_store(&bad_self, 0);
    atomic_store(&bad_spec, 0), atomic_store(&bad_nested, 0), atomic_store(&nested_elsewhere, 0);
    atomic_store(&total, 0), atomic_store(&handled_as_caller, 0), atomic_store(&bad_errno, 0), atomic_store(&bad_after, 0);
    long rounds = 0;
    /* repeat until some sections ran elsewhere (bounded: a fixed number of
     * rounds, no clock) */
    do {
        atomic_store(&done_threads, 0);
        pthread_t th[NT];
        for (int i = 0; i < NT; i++) {
            callers[i].tag = i + 1;
            __atomic_store_n(&callers[i].tid, 0, __ATOMIC_RELAXED);
            atomic_store(&callers[i].handled, 0);
            atomic_store(&callers[i].handler_wrong, 0);
            CHECK(pthread_create(&th[i], NULL, worker, &callers[i]) == 0, "create");
        }
        /* signal thread 0 while it runs its sections (case d) */
        while (atomic_load(&done_threads) < NT) {
            if (__atomic_load_n(&callers[0].tid, __ATOMIC_ACQUIRE))
                pthread_kill(th[0], SIGUSR1);
            sched_yield();
        }
        for (int i = 0; i < NT; i++)
            pthread_join(th[i], NULL);
        rounds++;
    } while (atomic_load(&elsewhere) == 0 && rounds < 20);
    long away = atomic_load(&elsewhere);
    printf("%-15s sections %ld, run elsewhere %ld (nested %ld), signals handled %ld (on a combiner, as its "
           "caller: %ld)\n",
           name, atomic_load(&total), away, atomic_load(&nested_elsewhere), atomic_load(&callers[0].handled),
           atomic_load(&handled_as_caller));
    CHECK(away > 0, "%s: no section ran on another thread: the identity checks were vacuous", name);
    CHECK_EQ(atomic_load(&bad_nested), 0);
    CHECK_EQ(atomic_load(&bad_after), 0);
    for (int i = 0; i < NT; i++)
        CHECK(!atomic_load(&callers[i].handler_wrong), "a handler ran with another identity");
    if (identity_on) {
        CHECK_EQ(atomic_load(&bad_tag), 0);
        CHECK_EQ(atomic_load(&bad_self), 0);
        CHECK_EQ(atomic_load(&bad_spec), 0);
        CHECK_EQ(atomic_load(&bad_errno), 0);
    } else {
        th_skip("%s: identity checks: switching is %s", name, ll_ident_name());
    }
    CHECK_EQ(liblock_destroy(&M), 0);
    CHECK_EQ(liblock_destroy(&L), 0);
    return 0;
}

int main(int argc, char **argv)
{
    th_watchdog(120);
    /* mp-server's requests, not its direct mode (which runs a section on
     * its caller whenever it can): read at each lock's init, set here
     * before any thread exists */
    setenv("LIBLOCK_MPSERVER_DIRECT", "0", 1);
    iters = th_scale_small() ? 300 : 3000;
    if (!getenv("LIBLOCK_IDENTITY")) { /* switching is off by default: this program checks it on */
        setenv("LIBLOCK_IDENTITY", "1", 1);
        execv("/proc/self/exe", argv);
        fprintf(stderr, "test_identity: cannot re-execute itself with LIBLOCK_IDENTITY=1: %s\n", strerror(errno));
        return 1;
    }
    identity_on = ll_ident_mode() != LL_IDENT_OFF;
    printf("identity switching: %s\n", ll_ident_name());
    pthread_key_create(&key, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    for (int i = 0; algos[i]; i++)
        if (th_selected(argc, argv, algos[i]))
            run_algo(algos[i]);
    /* the fallback, once, in a child that starts with it */
    const char *ie = getenv("LIBLOCK_IDENTITY");
    if (ll_ident_mode() == LL_IDENT_FSGSBASE && ie && strcmp(ie, "1") == 0) {
        const char *const envs[] = {"LIBLOCK_IDENTITY=prctl", NULL};
        pid_t pid = th_spawn(argv[0], envs);
        CHECK(pid > 0, "spawn");
        if (pid > 0)
            CHECK(th_wait_child(pid, 100, "LIBLOCK_IDENTITY=prctl") == 0, "the arch_prctl run failed");
    } else if (ie && strcmp(ie, "1") == 0) {
        th_skip("the arch_prctl fallback run: switching is %s", ll_ident_name());
    }
    return th_report("test_identity");
}
