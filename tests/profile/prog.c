/* Program run under `liblock profile` by tests/test_profile_cli.sh:
 *   prog echo STATUS   copy stdin to stdout, say "err" on stderr, exit STATUS
 *   prog segv          die of SIGSEGV
 *   prog kill9         die of SIGKILL (nothing can write a report)
 *   prog usr1          send SIGUSR1 to the parent (`liblock profile`, which
 *                      passes it on), wait for it, exit 0 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got;
static void on_usr1(int s) { (void)s; got = 1; }

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "echo")) {
        int c;
        while ((c = getchar()) != EOF) putchar(c);
        fprintf(stderr, "err\n");
        return atoi(argv[2]);
    }
    if (argc >= 2 && !strcmp(argv[1], "segv")) {
        fflush(stdout);
        raise(SIGSEGV);
    }
    if (argc >= 2 && !strcmp(argv[1], "kill9"))
        raise(SIGKILL);
    if (argc >= 2 && !strcmp(argv[1], "usr1")) {
        struct sigaction sa, old;
        sigaction(SIGUSR1, NULL, &old);
        if (old.sa_handler == SIG_DFL) { /* no runtime handler: count it ourselves */
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_usr1;
            sigaction(SIGUSR1, &sa, NULL);
        }
        sigset_t all, none;
        sigemptyset(&all);
        sigaddset(&all, SIGUSR1);
        sigprocmask(SIG_BLOCK, &all, &none);
        kill(getppid(), SIGUSR1);
        alarm(30); /* watchdog: the signal never came back */
        sigdelset(&none, SIGUSR1);
        sigsuspend(&none); /* returns once a SIGUSR1 handler ran */
        return 0;
    }
    fprintf(stderr, "usage: prog echo N | segv | kill9 | usr1\n");
    return 2;
}
