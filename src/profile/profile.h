/*
 * profile.h - the profiler runtime's state shared by record.c, report.c
 * and dump.c.
 */
#ifndef LL_PROFILE_H
#define LL_PROFILE_H

#include <stdint.h>

struct lp_site {
    uint64_t id;
    int is_static;
    int nframes;
    void *frames[SHIM_SITE_FRAMES];
    const char *sym;
    long count;                    /* instances */
    int index;                     /* in the threads' histogram arrays (lp_table.hists) */
    struct lp_hist fallback_h;     /* histograms of acquisitions without an entry (atomic adds) */
    struct lp_inst *insts;
    struct lp_site *next;
};

struct lp_thread {
    _Atomic uint64_t start_ns, end_ns; /* end 0: running */
    struct lp_thread *next;
};

struct lp_state {
    int started;
    uint64_t start_ns;
    int only_set;
    uint64_t only;
    char misses_reason[160];
    struct lp_site *sites;
    int nsites;
    uint32_t ninst;                /* instance ids given */
    _Atomic(struct lp_table *) tables;
    struct lp_thread *threads;
    long nthreads;
};
extern struct lp_state lp;

struct lp_json;
/* report.c: the whole report into b; how/status/sig: how the program
 * ended (status -1, sig 0: not known or not applicable). */
void lp_report_build(struct lp_json *b, const char *how, int status, int sig, int argc, char **argv);

void lp_dump_setup(void);
void lp_dump_fork_child(void);

#endif
