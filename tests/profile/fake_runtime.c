/* A stand-in for build/lib/liblock-profile.so used by tests/test_profile_cli.sh
 * to test how `liblock profile` runs a program (terminal, exit status, signal
 * deaths, SIGUSR1 snapshots, a program that writes no dump) independently of
 * the real runtime.  It records nothing: at exit, on a fatal signal it can
 * catch, and on SIGUSR1 (snapshot PATH.usr1.N) it writes one fixed raw dump
 * (profile-contract.md section 1) with one lock site and the exit it saw. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char out[4096];
static int snapshots;

static void dump(const char *path, const char *how, int status, int sig)
{
    char tmp[4200], st[16] = "null", sg[16] = "null";
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (status >= 0) snprintf(st, sizeof st, "%d", status);
    if (sig > 0) snprintf(sg, sizeof sg, "%d", sig);
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "{\"format\": \"liblock-profile-raw/1\", \"program\": \"fake\", \"argv\": [\"fake\"], \"pid\": %d,"
               " \"lock\": \"glibc\", \"wall_ns\": 1000, \"thread_ns\": 1000, \"threads\": 0, \"cpus\": 2,"
               " \"misses_available\": false, \"misses_reason\": \"fake runtime\","
               " \"exit\": {\"how\": \"%s\", \"status\": %s, \"signal\": %s},"
               " \"sites\": [{\"id\": \"fa4efa4efa4efa4e\", \"site\": \"fake.c:1\", \"function\": \"fake\","
               " \"kind\": \"init\", \"first_lock_site\": null, \"frames\": [], \"instances\": [{\"addr\": \"0x1\","
               " \"type\": \"normal\", \"acquisitions\": 10, \"contended\": 0, \"trylocks\": 0, \"trylock_failures\": 0,"
               " \"cond_waits\": 0, \"cond_wait_ns\": 0, \"wait_ns\": 100, \"hold_ns\": 100, \"wait_hist\": [10],"
               " \"hold_hist\": [0, 0, 0, 10], \"misses\": null, \"call_sites\": []}]}]}\n",
            (int)getpid(), how, st, sg);
    fclose(f);
    rename(tmp, path);
}

static void on_exit_dump(void) { if (*out) dump(out, "exit", -1, 0); }

static void on_fatal(int sig)
{
    if (*out) dump(out, "signal", -1, sig);
    *out = 0;
    signal(sig, SIG_DFL);
    raise(sig);
}

static void on_usr1(int sig)
{
    (void)sig;
    char p[4200];
    snprintf(p, sizeof p, "%s.usr1.%d", out, ++snapshots);
    dump(p, "usr1", -1, 0);
}

__attribute__((constructor)) static void init(void)
{
    const char *o = getenv("LIBLOCK_PROFILE_OUT");
    if (!o || strlen(o) >= sizeof out) return;
    strcpy(out, o);
    unsetenv("LIBLOCK_PROFILE_OUT"); /* children (the shell's programs) write nothing */
    atexit(on_exit_dump);
    signal(SIGSEGV, on_fatal);
    signal(SIGABRT, on_fatal);
    signal(SIGTERM, on_fatal);
    signal(SIGUSR1, on_usr1);
}
