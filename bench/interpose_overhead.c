/*
 * interpose_overhead - what one uncontended pthread_mutex_lock/unlock pair
 * costs through liblock-interpose.so, against glibc's own, per algorithm.
 *
 * usage: interpose_overhead [-r ROUNDS] [-n PAIRS] [-e] [-m] [-L LIB]... [ALGORITHM...]
 *
 * -e: every mutex engaged from its first use (LIBLOCK_LAZY=0 in the
 * children): the algorithm's own pair; without it, the default, where a
 * mutex that never contends stays on the interposer's one-word lazy lock
 * (docs/interpose.md, "Lazy engagement").
 *
 * -m: a second thread exists (asleep) while the pairs run.  glibc's lock
 * and unlock skip their atomic instructions while a process has one
 * thread (__libc_single_threaded), and so does the interposer's lazy
 * path; with a second thread both take their atomic path, as in any
 * multithreaded program.
 *
 * -L LIB (repeatable): measure these interposer libraries instead of
 * <build>/lib/liblock-interpose.so, one child per library for each
 * algorithm, alternating (to compare two builds in one run; each line is
 * prefixed with the library's index).
 *
 * Without LIBLOCK_LOCK in the environment it is a driver: it re-runs itself
 * under LD_PRELOAD=<build>/lib/liblock-interpose.so for each algorithm
 * (default waiting policy).  In each run, one thread pinned to CPU 0
 * alternates batches (glibc, interposed, glibc, interposed, ...): glibc's
 * pthread_mutex_lock/unlock found in libc.so.6 with dlsym on a mutex glibc
 * initialised, and the interposer's (the symbols the program binds to) on a
 * PTHREAD_MUTEX_INITIALIZER mutex.  Both are called through function
 * pointers, so neither is inlined and both pay the same indirect call a PLT
 * call pays.  Reported: median ns per pair of each over the rounds (min-max),
 * and the median of the per-round ratios interposed/glibc.  A ping-pong
 * probe (bench/probe.h) is taken before and after, as every benchmark here
 * does, though this figure is single-threaded.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "liblock.h"
#include "probe.h"

typedef int (*mfn)(pthread_mutex_t *);

static double cmpd_buf;
static int cmpd(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double batch(mfn lock, mfn unlock, pthread_mutex_t *m, long n)
{
    uint64_t t0 = probe_now_ns();
    for (long i = 0; i < n; i++) {
        lock(m);
        unlock(m);
    }
    return (double)(probe_now_ns() - t0) / (double)n;
}

static void *sleeper(void *arg)
{
    char c;
    ssize_t r = read(*(int *)arg, &c, 1); /* never written: asleep until exit */
    (void)r;
    return NULL;
}

static int child(int rounds, long pairs, int mt)
{
    static int fds[2];
    pthread_t st;
    if (mt && (pipe(fds) != 0 || pthread_create(&st, NULL, sleeper, &fds[0]) != 0)) {
        fprintf(stderr, "interpose_overhead: no second thread\n");
        return 1;
    }
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    mfn g_lock = libc ? (mfn)dlsym(libc, "pthread_mutex_lock") : NULL;
    mfn g_unlock = libc ? (mfn)dlsym(libc, "pthread_mutex_unlock") : NULL;
    int (*g_init)(pthread_mutex_t *, const pthread_mutexattr_t *) =
        libc ? (int (*)(pthread_mutex_t *, const pthread_mutexattr_t *))dlsym(libc, "pthread_mutex_init") : NULL;
    mfn i_lock = (mfn)dlsym(RTLD_DEFAULT, "pthread_mutex_lock");
    mfn i_unlock = (mfn)dlsym(RTLD_DEFAULT, "pthread_mutex_unlock");
    const char *(*active)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "liblock_interpose_lock");
    if (!g_lock || !g_unlock || !g_init || !active || !active() || i_lock == g_lock) {
        fprintf(stderr, "interpose_overhead: interposer not active or libc symbols not found\n");
        return 1;
    }
    probe_pin(0);
    pthread_mutex_t gm, im = PTHREAD_MUTEX_INITIALIZER;
    g_init(&gm, NULL);
    double g[64], in[64], ratio[64];
    if (rounds > 64)
        rounds = 64;
    batch(g_lock, g_unlock, &gm, pairs / 10); /* warm up both */
    batch(i_lock, i_unlock, &im, pairs / 10);
    for (int r = 0; r < rounds; r++) {
        g[r] = batch(g_lock, g_unlock, &gm, pairs);
        in[r] = batch(i_lock, i_unlock, &im, pairs);
        ratio[r] = in[r] / g[r];
    }
    double gmin = g[0], gmax = g[0], imin = in[0], imax = in[0];
    for (int r = 0; r < rounds; r++) {
        gmin = g[r] < gmin ? g[r] : gmin;
        gmax = g[r] > gmax ? g[r] : gmax;
        imin = in[r] < imin ? in[r] : imin;
        imax = in[r] > imax ? in[r] : imax;
    }
    printf("%-16s%s glibc %6.2f ns (%.2f-%.2f)  interposed %6.2f ns (%.2f-%.2f)  ratio %.2f\n", active(), mt ? " (2 threads)" : "",
           median(g, rounds), gmin, gmax, median(in, rounds), imin, imax, median(ratio, rounds));
    (void)cmpd_buf;
    return 0;
}

int main(int argc, char **argv)
{
    int rounds = 7;
    long pairs = 2000000;
    int opt;
    const char *libs[8];
    int nlibs = 0, engaged = 0, mt = 0;
    while ((opt = getopt(argc, argv, "r:n:emL:")) != -1) {
        if (opt == 'e')
            engaged = 1;
        else if (opt == 'm')
            mt = 1;
        else if (opt == 'r')
            rounds = atoi(optarg);
        else if (opt == 'n')
            pairs = atol(optarg);
        else if (opt == 'L' && nlibs < 8)
            libs[nlibs++] = optarg;
        else {
            fprintf(stderr, "usage: %s [-r ROUNDS] [-n PAIRS] [-e] [-m] [-L LIB]... [ALGORITHM...]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || pairs < 1) {
        fprintf(stderr, "interpose_overhead: -r and -n must be positive\n");
        return 2;
    }
    if (getenv("LIBLOCK_LOCK"))
        return child(rounds, pairs, mt);

    char self[PATH_MAX], lib[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        perror("readlink");
        return 1;
    }
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(lib, sizeof lib, "%s/../lib/liblock-interpose.so", self);
    *slash = '/';
    if (!nlibs)
        libs[nlibs++] = lib;
    for (int i = 0; i < nlibs; i++)
        if (access(libs[i], R_OK) != 0) {
            fprintf(stderr, "interpose_overhead: %s missing (run make)\n", libs[i]);
            return 1;
        }
    if (nlibs > 1)
        for (int i = 0; i < nlibs; i++)
            printf("[%d] %s\n", i, libs[i]);
    int ncpu = (int)sysconf(_SC_NPROCESSORS_ONLN);
    double probe0 = ncpu > 1 ? probe_default() : -1;
    printf("uncontended lock/unlock pair, %ld pairs x %d rounds, interleaved glibc/interposed, CPU 0, %s\n", pairs, rounds,
           engaged ? "every mutex engaged (LIBLOCK_LAZY=0)" : "default (lazy engagement)");
    int rc = 0;
    for (const char *const *a = liblock_algorithms(); *a; a++) {
        int chosen = optind >= argc;
        for (int i = optind; i < argc; i++)
            chosen |= strcmp(argv[i], *a) == 0;
        if (!chosen)
            continue;
        for (int li = 0; li < nlibs; li++) {
            if (nlibs > 1)
                printf("[%d] ", li);
            fflush(stdout);
            pid_t pid = fork();
            if (pid == 0) {
                setenv("LD_PRELOAD", libs[li], 1);
                setenv("LIBLOCK_LOCK", *a, 1);
                setenv("LIBLOCK_STRICT", "1", 1);
                if (engaged)
                    setenv("LIBLOCK_LAZY", "0", 1);
                else
                    unsetenv("LIBLOCK_LAZY");
                char r[16], p[32];
                snprintf(r, sizeof r, "-r%d", rounds);
                snprintf(p, sizeof p, "-n%ld", pairs);
                execl(self, self, r, p, mt ? "-m" : (char *)NULL, (char *)NULL);
                _exit(127);
            }
            int st;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                rc = 1;
        }
    }
    double probe1 = ncpu > 1 ? probe_default() : -1;
    printf("probe (CPU0<->CPU1 round trip): before %.0f ns, after %.0f ns\n", probe0, probe1);
    return rc;
}
