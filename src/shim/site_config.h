/*
 * site_config.h - the per-site configuration file (LIBLOCK_CONFIG=FILE,
 * `liblock run --config FILE`; format in docs/interpose.md "Per-site
 * configuration").  The parser is self-contained (it needs only the
 * algorithm registry), so build/bin/liblock-config-check runs exactly the
 * code the preload libraries run.
 */
#ifndef LL_SITE_CONFIG_H
#define LL_SITE_CONFIG_H

#include <stddef.h>
#include <stdint.h>

struct ll_ops;

enum { SHIM_KEY_ID, SHIM_KEY_LINE, SHIM_KEY_SYM };

struct shim_rule {
    int kind;                      /* SHIM_KEY_* */
    uint64_t id;                   /* SHIM_KEY_ID */
    char *file;                    /* SHIM_KEY_LINE: file as written (basename or path suffix) */
    int line;
    char *sym;                     /* SHIM_KEY_SYM */
    const struct ll_ops *ops;      /* NULL: glibc */
    int wait;                      /* LIBLOCK_WAIT_* (LIBLOCK_WAIT_DEFAULT if not given) */
    int server_cpu;                /* -1 if not given */
    int lineno;                    /* line of the file */
};

struct shim_config {
    const char *path;
    int has_default;
    const struct ll_ops *def_ops;  /* NULL: glibc */
    int def_wait;
    struct shim_rule *rules;
    int nrules;
};

/* Parse FILE.  0 on success; -1 with err = "FILE:LINE: problem" (or
 * "FILE: problem") and *out left empty. */
int shim_config_parse(const char *path, struct shim_config *out, char *err, size_t errlen);
void shim_config_free(struct shim_config *c);

#endif
