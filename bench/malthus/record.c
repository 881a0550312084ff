/*
 * record.c - the output record of a malthus run: fields added in order
 * (number, string or null), written at the end as one JSON object on a line
 * or as a CSV line (with a header line unless -H).
 */
#include "malthus.h"

#include <math.h>
#include <stdio.h>

struct field {
    const char *name;
    char val[80];
    int kind; /* 0 number, 1 string, 2 null */
};
static struct field F[128];
static int NF;
void f_str(const char *n, const char *v)
{
    F[NF].name = n;
    F[NF].kind = 1;
    snprintf(F[NF++].val, sizeof F[0].val, "%s", v ? v : "");
}
void f_num(const char *n, const char *fmt, double v)
{
    F[NF].name = n;
    F[NF].kind = isfinite(v) ? 0 : 2;
    snprintf(F[NF++].val, sizeof F[0].val, fmt, v);
}
void f_u64(const char *n, uint64_t v)
{
    F[NF].name = n;
    F[NF].kind = 0;
    snprintf(F[NF++].val, sizeof F[0].val, "%llu", (unsigned long long)v);
}
void f_null(const char *n)
{
    F[NF].name = n;
    F[NF].kind = 2;
    F[NF++].val[0] = 0;
}
void emit(void)
{
    if (C.csv) {
        if (C.header)
            for (int i = 0; i < NF; i++)
                printf("%s%s", F[i].name, i + 1 < NF ? "," : "\n");
        for (int i = 0; i < NF; i++)
            printf("%s%s", F[i].kind == 2 ? "" : F[i].val, i + 1 < NF ? "," : "\n");
    } else {
        putchar('{');
        for (int i = 0; i < NF; i++) {
            printf("\"%s\": ", F[i].name);
            if (F[i].kind == 2)
                printf("null");
            else if (F[i].kind == 1) {
                putchar('"');
                for (const char *s = F[i].val; *s; s++) {
                    if (*s == '"' || *s == '\\')
                        putchar('\\');
                    putchar(*s);
                }
                putchar('"');
            } else
                printf("%s", F[i].val);
            printf(i + 1 < NF ? ", " : "}\n");
        }
    }
    fflush(stdout);
}
