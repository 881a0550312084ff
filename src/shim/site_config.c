/*
 * site_config.c - parser of the per-site configuration file (see
 * site_config.h; format in docs/interpose.md "Per-site configuration"):
 *
 *   # comment
 *   default ALGORITHM [wait=POLICY]
 *   site KEY ALGORITHM [wait=POLICY] [server=CPU]
 *
 * KEY is a 16-hex-digit site id, FILE:LINE (the pthread_mutex_init call),
 * or the symbol of a statically initialised mutex.  ALGORITHM is a registry
 * name or `glibc`.  Every problem is reported as one line naming the file
 * and line; nothing is half-applied (the caller gets all rules or none).
 */
#include "internal.h"
#include "site_config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void err_at(char *err, size_t n, const char *path, int line, const char *fmt, ...)
{
    int k = line > 0 ? snprintf(err, n, "%s:%d: ", path, line) : snprintf(err, n, "%s: ", path);
    if (k < 0 || (size_t)k >= n)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, n - (size_t)k, fmt, ap);
    va_end(ap);
}

static int is_hex_id(const char *s)
{
    if (strlen(s) != 16)
        return 0;
    for (const char *p = s; *p; p++)
        if (!isxdigit((unsigned char)*p))
            return 0;
    return 1;
}

/* ALGORITHM -> ops (NULL for glibc); 0 or -1. */
static int parse_algo(const char *name, const struct ll_ops **ops)
{
    if (strcmp(name, "glibc") == 0) {
        *ops = NULL;
        return 0;
    }
    *ops = ll_find_ops(name);
    return *ops ? 0 : -1;
}

/* The names of the algorithms that run on a server (LIBLOCK_PROP_SERVER),
 * for a message: "a, b". */
static void server_algos(char *buf, size_t n)
{
    size_t k = 0;
    buf[0] = 0;
    for (const struct ll_ops *const *o = ll_registry; *o; o++)
        if (((*o)->props & LIBLOCK_PROP_SERVER) && k < n) {
            int w = snprintf(buf + k, n - k, "%s%s", k ? ", " : "", (*o)->name);
            k += w > 0 ? (size_t)w : 0;
        }
}

/* [wait=POLICY] [server=CPU] options from tok[i..n). */
static int parse_opts(char **tok, int i, int n, const struct ll_ops *ops, int allow_server, int *wait, int *cpu,
                      char *err, size_t errlen, const char *path, int line)
{
    *wait = LIBLOCK_WAIT_DEFAULT;
    *cpu = -1;
    for (; i < n; i++) {
        if (strncmp(tok[i], "wait=", 5) == 0) {
            int p;
            if (liblock_wait_parse(tok[i] + 5, &p) != 0) {
                err_at(err, errlen, path, line, "unknown waiting policy '%s' (valid: spin spin-then-park yield park)",
                       tok[i] + 5);
                return -1;
            }
            if (!ops) {
                err_at(err, errlen, path, line, "wait= does not apply to glibc");
                return -1;
            }
            if (p != LIBLOCK_WAIT_DEFAULT && !(ops->policies & LL_POLICY_BIT(p))) {
                err_at(err, errlen, path, line, "waiting policy '%s' is not supported by '%s'", tok[i] + 5, ops->name);
                return -1;
            }
            *wait = p;
        } else if (strncmp(tok[i], "server=", 7) == 0) {
            if (!allow_server) {
                err_at(err, errlen, path, line, "server= is only for site lines");
                return -1;
            }
            if (!ops || !(ops->props & LIBLOCK_PROP_SERVER)) {
                char names[256];
                server_algos(names, sizeof names);
                err_at(err, errlen, path, line, "server= applies only to %s", names);
                return -1;
            }
            char *end;
            errno = 0;
            long c = strtol(tok[i] + 7, &end, 10);
            long ncpu = sysconf(_SC_NPROCESSORS_CONF);
            if (!tok[i][7] || *end || errno || c < 0 || (ncpu > 0 && c >= ncpu)) {
                err_at(err, errlen, path, line, "bad server CPU '%s' (0..%ld)", tok[i] + 7, ncpu > 0 ? ncpu - 1 : 0);
                return -1;
            }
            *cpu = (int)c;
        } else {
            err_at(err, errlen, path, line, "unexpected '%s' (expected wait=POLICY or server=CPU)", tok[i]);
            return -1;
        }
    }
    return 0;
}

static int parse_key(struct shim_rule *r, const char *key)
{
    if (is_hex_id(key)) {
        r->kind = SHIM_KEY_ID;
        r->id = strtoull(key, NULL, 16);
        return 0;
    }
    const char *colon = strrchr(key, ':');
    if (colon && colon != key && colon[1]) {
        char *end;
        errno = 0;
        long l = strtol(colon + 1, &end, 10);
        if (*end || l <= 0 || !isdigit((unsigned char)colon[1]))
            return -1;
        if (errno == ERANGE || l > INT_MAX)
            return -3; /* would wrap to a negative or unrelated line */
        r->kind = SHIM_KEY_LINE;
        r->file = strndup(key, (size_t)(colon - key));
        r->line = (int)l;
        return r->file ? 0 : -2;
    }
    if (colon)
        return -1;
    for (const char *p = key; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '.' || *p == '$'))
            return -1;
    r->kind = SHIM_KEY_SYM;
    r->sym = strdup(key);
    return r->sym ? 0 : -2;
}

void shim_config_free(struct shim_config *c)
{
    for (int i = 0; i < c->nrules; i++) {
        free(c->rules[i].file);
        free(c->rules[i].sym);
    }
    free(c->rules);
    memset(c, 0, sizeof *c);
}

int shim_config_parse(const char *path, struct shim_config *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "re");
    if (!f) {
        err_at(err, errlen, path, 0, "cannot open (%s)", strerror(errno));
        return -1;
    }
    struct shim_config c = {.path = path, .def_wait = LIBLOCK_WAIT_DEFAULT};
    int cap = 0, lineno = 0, default_line = 0, rc = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    ssize_t len;
    while ((len = getline(&buf, &bufcap, f)) >= 0) {
        lineno++;
        /* as long as a line may be (4095 bytes with its newline) */
        if (len > 4095 || (len == 4095 && buf[len - 1] != '\n')) {
            err_at(err, errlen, path, lineno, "line too long");
            rc = -1;
            break;
        }
        /* a NUL would end the line early for the string functions below,
         * silently dropping what follows it */
        if (memchr(buf, 0, (size_t)len)) {
            err_at(err, errlen, path, lineno, "NUL byte in the line");
            rc = -1;
            break;
        }
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = 0;
        char *tok[8];
        int n = 0;
        for (char *save = NULL, *t = strtok_r(buf, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save)) {
            if (n == 8) {
                err_at(err, errlen, path, lineno, "too many words");
                rc = -1;
                break;
            }
            tok[n++] = t;
        }
        if (rc)
            break;
        if (n == 0)
            continue;
        if (strcmp(tok[0], "default") == 0) {
            if (n < 2) {
                err_at(err, errlen, path, lineno, "default needs an algorithm");
                rc = -1;
                break;
            }
            if (default_line) {
                err_at(err, errlen, path, lineno, "second default line (first on line %d)", default_line);
                rc = -1;
                break;
            }
            if (parse_algo(tok[1], &c.def_ops)) {
                err_at(err, errlen, path, lineno, "unknown algorithm '%s' (see liblock-info)", tok[1]);
                rc = -1;
                break;
            }
            int cpu;
            if (parse_opts(tok, 2, n, c.def_ops, 0, &c.def_wait, &cpu, err, errlen, path, lineno)) {
                rc = -1;
                break;
            }
            c.has_default = 1;
            default_line = lineno;
        } else if (strcmp(tok[0], "site") == 0) {
            if (n < 3) {
                err_at(err, errlen, path, lineno, "site needs a KEY and an algorithm");
                rc = -1;
                break;
            }
            if (c.nrules == cap) {
                int nc = cap ? cap * 2 : 8;
                struct shim_rule *nr = realloc(c.rules, (size_t)nc * sizeof *nr);
                if (!nr) {
                    err_at(err, errlen, path, lineno, "out of memory");
                    rc = -1;
                    break;
                }
                c.rules = nr;
                cap = nc;
            }
            struct shim_rule *r = &c.rules[c.nrules];
            memset(r, 0, sizeof *r);
            r->lineno = lineno;
            int k = parse_key(r, tok[1]);
            if (k) {
                err_at(err, errlen, path, lineno,
                       k == -2   ? "out of memory"
                       : k == -3 ? "bad site key '%s' (line number past 2147483647)"
                                 : "bad site key '%s' (expected a 16-hex-digit id, FILE:LINE or a symbol)",
                       tok[1]);
                free(r->file);
                free(r->sym);
                rc = -1;
                break;
            }
            c.nrules++; /* owned by c from here (freed on error) */
            if (parse_algo(tok[2], &r->ops)) {
                err_at(err, errlen, path, lineno, "unknown algorithm '%s' (see liblock-info)", tok[2]);
                rc = -1;
                break;
            }
            if (parse_opts(tok, 3, n, r->ops, 1, &r->wait, &r->server_cpu, err, errlen, path, lineno)) {
                rc = -1;
                break;
            }
        } else {
            err_at(err, errlen, path, lineno, "unknown directive '%s' (expected default or site)", tok[0]);
            rc = -1;
            break;
        }
    }
    if (!rc && ferror(f)) {
        err_at(err, errlen, path, 0, "read error (%s)", strerror(errno));
        rc = -1;
    }
    free(buf);
    fclose(f);
    if (rc) {
        shim_config_free(&c);
        return -1;
    }
    *out = c;
    return 0;
}
