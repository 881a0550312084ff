/*
 * json.c - the profiler's report writer (json.h): a text buffer that
 * doubles as it grows, formatted appends, and the JSON string escape.
 */
#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lp_json_put(struct lp_json *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap * 2 : 65536;
        while (nc < b->n + n + 1)
            nc *= 2;
        char *np = realloc(b->p, nc);
        if (!np) {
            b->oom = 1;
            return;
        }
        b->p = np;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void lp_json_puts(struct lp_json *b, const char *s) { lp_json_put(b, s, strlen(s)); }

void lp_json_putf(struct lp_json *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        lp_json_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

void lp_json_str(struct lp_json *b, const char *s)
{
    if (!s) {
        lp_json_puts(b, "null");
        return;
    }
    lp_json_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            lp_json_putf(b, "\\%c", *p);
        else if (*p < 0x20)
            lp_json_putf(b, "\\u%04x", *p);
        else
            lp_json_put(b, (const char *)p, 1);
    }
    lp_json_puts(b, "\"");
}
