/*
 * many_locks - cost of one lock operation when a thread uses many locks:
 * one thread initialises N locks of an algorithm, touches each once, then
 * for ROUNDS rounds walks all of them, alternating a lock/unlock pair and
 * an execute() per round.  Prints ns per operation.  This is what a thread
 * of a program with thousands of mutexes (under the interposer) pays for
 * per-thread, per-lock state (flat-combining and dsm-synch records).
 * Single-threaded: no cross-core effect, no probe needed.
 *
 * usage: many_locks ALGO N [ROUNDS]     (ROUNDS default 20)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "liblock.h"

static void *cs(void *a) { return a; }

int main(int argc, char **argv)
{
    if (argc < 3 || atol(argv[2]) <= 0) {
        fprintf(stderr, "usage: many_locks ALGO N [ROUNDS]\n");
        return 2;
    }
    long n = atol(argv[2]), rounds = argc > 3 ? atol(argv[3]) : 20;
    if (rounds <= 0)
        rounds = 20;
    liblock_t *v = calloc((size_t)n, sizeof *v);
    if (!v) {
        fprintf(stderr, "many_locks: out of memory\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        int e = liblock_init(&v[i], argv[1], NULL);
        if (e) {
            fprintf(stderr, "many_locks: liblock_init(%s): %s\n", argv[1], strerror(e));
            return 1;
        }
    }
    for (long i = 0; i < n; i++)
        liblock_execute(&v[i], cs, NULL);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long r = 0; r < rounds; r++)
        for (long i = 0; i < n; i++) {
            if (r & 1) {
                liblock_execute(&v[i], cs, NULL);
            } else {
                liblock_lock(&v[i]);
                liblock_unlock(&v[i]);
            }
        }
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("%s locks=%ld: %.1f ns per operation\n", argv[1], n, ns / ((double)rounds * (double)n));
    for (long i = 0; i < n; i++)
        liblock_destroy(&v[i]);
    free(v);
    return 0;
}
