/*
 * sqlite_threads - an ordinary C program on Debian's libsqlite3: THREADS
 * threads share one connection opened with SQLITE_OPEN_FULLMUTEX (SQLite
 * serialises every call on the connection's recursive pthread mutex).
 *
 * Part of the application benchmark (`liblock bench apps`): run
 * unmodified under glibc and under the interposer; it knows nothing of
 * liblock.  Thread k inserts OPS rows (k, i, v = k*OPS + i + 1) with its own
 * prepared statement and, every 4th insert, reads back one of its earlier
 * rows by (th, i) through an index and checks its value.  At the end main checks the table holds THREADS*OPS rows whose v add
 * up to what was inserted and that every read-back was consistent; prints
 * "ok" and exits 0 only then.
 *
 * usage: sqlite_threads THREADS OPS
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>

static sqlite3 *db;
static long ops;

struct targ {
    pthread_t th;
    long k;
    int bad;
};

static void *worker(void *p)
{
    struct targ *a = p;
    sqlite3_stmt *ins = NULL, *sel = NULL;
    if (sqlite3_prepare_v2(db, "INSERT INTO t(th, i, v) VALUES (?1, ?2, ?3)", -1, &ins, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT v FROM t WHERE th = ?1 AND i = ?2", -1, &sel, NULL) != SQLITE_OK) {
        a->bad = 1;
        return NULL;
    }
    long long mysum = 0;
    for (long i = 0; i < ops; i++) {
        long long v = (long long)a->k * ops + i + 1;
        sqlite3_bind_int64(ins, 1, a->k);
        sqlite3_bind_int64(ins, 2, i);
        sqlite3_bind_int64(ins, 3, v);
        if (sqlite3_step(ins) != SQLITE_DONE)
            a->bad = 1;
        sqlite3_reset(ins);
        mysum += v;
        if (i % 4 == 3) {
            long j = i / 2;
            sqlite3_bind_int64(sel, 1, a->k);
            sqlite3_bind_int64(sel, 2, j);
            if (sqlite3_step(sel) != SQLITE_ROW || sqlite3_column_int64(sel, 0) != (long long)a->k * ops + j + 1)
                a->bad = 1;
            sqlite3_reset(sel);
        }
    }
    sqlite3_finalize(ins);
    sqlite3_finalize(sel);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: sqlite_threads THREADS OPS\n");
        return 2;
    }
    long threads = atol(argv[1]);
    ops = atol(argv[2]);
    if (threads < 1 || ops < 1) {
        fprintf(stderr, "sqlite_threads: THREADS >= 1, OPS >= 1\n");
        return 2;
    }
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, NULL) !=
            SQLITE_OK ||
        sqlite3_exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, th INT, i INT, v INT); CREATE INDEX t_th_i ON t(th, i);",
                     NULL, NULL, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite_threads: %s\n", sqlite3_errmsg(db));
        return 1;
    }
    struct targ *t = calloc((size_t)threads, sizeof *t);
    for (long k = 0; k < threads; k++) {
        t[k].k = k;
        if (pthread_create(&t[k].th, NULL, worker, &t[k])) {
            fprintf(stderr, "sqlite_threads: cannot create thread %ld\n", k);
            return 1;
        }
    }
    int bad = 0;
    for (long k = 0; k < threads; k++) {
        pthread_join(t[k].th, NULL);
        bad |= t[k].bad;
    }
    sqlite3_stmt *st;
    long long n = -1, sum = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*), total(v) FROM t", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        n = sqlite3_column_int64(st, 0);
        sum = (long long)sqlite3_column_double(st, 1);
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    long long N = (long long)threads * ops, want = N * (N + 1) / 2;
    if (bad || n != N || sum != want) {
        printf("FAILED rows=%lld sum=%lld want rows=%lld sum=%lld%s\n", n, sum, N, want,
               bad ? " (a thread saw an error or an inconsistent read-back)" : "");
        return 1;
    }
    printf("ok rows=%lld sum=%lld threads=%ld\n", n, sum, threads);
    free(t);
    return 0;
}
