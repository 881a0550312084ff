/*
 * liblock-config-check FILE - validate a per-site configuration file
 * (LIBLOCK_CONFIG, `liblock run --config`) with the parser the preload
 * libraries use (src/shim/site_config.c).  Exit 0 when it is valid; else
 * one line `liblock: FILE:LINE: problem` on stderr and exit 2.
 */
#include "../src/internal.h"
#include "../src/shim/site_config.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: liblock-config-check FILE\n");
        return 2;
    }
    struct shim_config c;
    char err[512];
    if (shim_config_parse(argv[1], &c, err, sizeof err)) {
        fprintf(stderr, "liblock: %s\n", err);
        return 2;
    }
    shim_config_free(&c);
    return 0;
}
