/*
 * test_parking_warning - pure spin: waits of over 20 ms (mcs under the
 * spin policy, in a child process; the library warns at the third) print
 * exactly one warning naming the remedy (LIBLOCK_WARN=0); with
 * LIBLOCK_WARN=0 nothing is printed.
 */
#include "parking.h"

/* Rounds of a 60 ms hold with the waiter spinning: the warning needs three
 * waits of over 20 ms; a waiter that a loaded machine keeps off its CPU
 * for the whole hold waits less, so there are more rounds than three (the
 * warning is printed once however many there are). */
#define WL_ROUNDS 6

static liblock_t wl;
static _Atomic int wl_go, wl_arrived;

static void *wl_waiter(void *arg)
{
    (void)arg;
    for (int i = 0; i < WL_ROUNDS; i++) {
        while (atomic_load(&wl_go) != 2 * i + 1)
            usleep(100);
        atomic_store(&wl_arrived, i + 1);
        liblock_lock(&wl); /* waits ~60 ms, spinning */
        liblock_unlock(&wl);
        atomic_store(&wl_go, 2 * i + 2);
    }
    return NULL;
}

/* Child (spec "warn"): long pure-spin waits; stderr is checked by the
 * parent. */
static int warn_child(const char *spec)
{
    if (strcmp(spec, "warn") != 0)
        return 127;
    liblock_attr_t a;
    liblock_attr_init(&a);
    liblock_attr_setwait(&a, LIBLOCK_WAIT_SPIN);
    if (liblock_init(&wl, "mcs", &a))
        return 2;
    pthread_t t;
    pthread_create(&t, NULL, wl_waiter, NULL);
    for (int i = 0; i < WL_ROUNDS; i++) {
        liblock_lock(&wl);
        atomic_store(&wl_go, 2 * i + 1);
        /* the 60 ms hold starts once the waiter is at its lock(): on a
         * loaded machine its wake-up from usleep may come late, and a
         * hold counted from before it would leave a wait under 20 ms */
        while (atomic_load(&wl_arrived) != i + 1)
            usleep(100);
        usleep(60000);
        liblock_unlock(&wl);
        while (atomic_load(&wl_go) != 2 * i + 2)
            usleep(100);
    }
    pthread_join(t, NULL);
    return liblock_destroy(&wl);
}

int main(int argc, char **argv)
{
    int rc = parking_start(argv, 120, warn_child);
    if (rc >= 0)
        return rc;
    for (int off = 0; off <= 1; off++) {
        th_context = off ? "pure-spin warning, LIBLOCK_WARN=0" : "pure-spin warning";
        int fd[2];
        int piped = pipe(fd) == 0;
        CHECK(piped, "pipe: %s", strerror(errno));
        if (!piped)
            break;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            dup2(fd[1], 2);
            close(fd[0]);
            setenv("LIBLOCK_PARKING_CHILD", "warn", 1);
            setenv("LIBLOCK_WARN", off ? "0" : "1", 1);
            execl(argv[0], argv[0], (char *)NULL);
            _exit(126);
        }
        close(fd[1]);
        char buf[4096];
        size_t len = 0;
        ssize_t r;
        while (len < sizeof buf - 1 && (r = read(fd[0], buf + len, sizeof buf - 1 - len)) > 0)
            len += (size_t)r;
        buf[len] = 0;
        close(fd[0]);
        CHECK_EQ(th_wait_child(pid, 60, th_context), 0);
        int n = 0;
        for (char *p = buf; (p = strstr(p, "liblock: threads waiting")) != NULL; p++)
            n++;
        if (off)
            CHECK(len == 0, "warning printed although LIBLOCK_WARN=0: %s", buf);
        else
            CHECK(n == 1 && strstr(buf, "LIBLOCK_WARN=0") != NULL, "expected one warning naming the remedy, got: %s",
                  buf);
    }
    (void)argc;
    return th_report("test_parking_warning");
}
