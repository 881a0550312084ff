/*
 * json.h - the profiler's report writer: a growable text buffer and the
 * JSON string escape (json.c).  A buffer that could not grow sets oom and
 * ignores what follows; the caller checks oom once at the end.
 */
#ifndef LL_PROFILE_JSON_H
#define LL_PROFILE_JSON_H

#include <stddef.h>

struct lp_json {
    char *p;
    size_t n, cap;
    int oom;
};

void lp_json_put(struct lp_json *b, const char *s, size_t n);
void lp_json_puts(struct lp_json *b, const char *s);
void lp_json_putf(struct lp_json *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string ("..." with quotes, backslashes and control
 * characters escaped), or null for NULL. */
void lp_json_str(struct lp_json *b, const char *s);

#endif
