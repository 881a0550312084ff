/*
 * config.c - the configuration, read once (shim.h "Configuration";
 * docs/interpose.md): LIBLOCK_LOCK, LIBLOCK_WAIT, LIBLOCK_CONFIG (per-site
 * algorithms, parsed by site_config.c), LIBLOCK_COND*, LIBLOCK_SEM*,
 * LIBLOCK_STRICT; and the choice of algorithm for one lock site.
 */
#include "shim.h"

struct shim_cfg shim_cfg;
_Atomic int shim_cfg_ready;
/* One thread loads the configuration; a racing one yields (once per
 * process, in practice in the constructor).  The exchange (acquire) and the
 * release store that frees it pair, so a thread that takes it after the
 * load sees shim_cfg_ready == 1; readers elsewhere use shim_cfg_ready's own
 * release/acquire pair.  A glibc mutex would serve as well but would need
 * glibc's functions looked up first (real.c), which start-up avoids. */
static _Atomic int cfg_busy;
static pthread_mutex_t srv_mutex = PTHREAD_MUTEX_INITIALIZER; /* real glibc mutex: server start */

static int strict(void)
{
    const char *s = getenv("LIBLOCK_STRICT");
    return s && *s && strcmp(s, "0") != 0;
}

/* One line: the problem, then what happens: the fallback, or exit status
 * 127 under LIBLOCK_STRICT=1. */
static void config_error(const char *fallback, const char *fmt, const char *a, const char *b)
{
    int st = strict();
    fprintf(stderr, SHIM_NAME ": ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "; %s\n", st ? "exiting (LIBLOCK_STRICT=1)" : fallback);
    if (st)
        _exit(127);
}

static void valid_names(char *buf, size_t n)
{
    buf[0] = 0;
    size_t len = 0;
    for (const struct ll_ops *const *o = ll_registry; *o && len + 1 < n; o++) {
        int w = snprintf(buf + len, n - len, "%s%s", len ? " " : "", (*o)->name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
}

/* LIBLOCK_SEM: independent of LIBLOCK_LOCK (a program may want liblock's
 * semaphores with glibc's mutexes, or the reverse). */
static void sem_config_load(void)
{
    const char *s = getenv("LIBLOCK_SEM");
    if (!s || !*s)
        return; /* glibc's semaphores */
    if (strcmp(s, "fifo") == 0) {
        cfg.sem_kind = "fifo";
        cfg.sem_prob = 1.0;
    } else if (strcmp(s, "mostly-lifo") == 0) {
        cfg.sem_kind = "mostly-lifo";
        /* LIBLOCK_SEM_FIFO_PROB, else the condition variables' probability */
        double p = ll_env_double("LIBLOCK_COND_FIFO_PROB", 0.001, 0.0, 1.0);
        cfg.sem_prob = ll_env_double("LIBLOCK_SEM_FIFO_PROB", p, 0.0, 1.0);
    } else {
        config_error("using glibc's semaphores", "unknown LIBLOCK_SEM '%s' (valid: fifo mostly-lifo)%s", s, "");
        return;
    }
    cfg.sem = 1;
}

/* LIBLOCK_WAIT for the default algorithm o (environment); 0 or config_error. */
static void env_wait(const struct ll_ops *o, liblock_attr_t *attr)
{
    const char *w = getenv("LIBLOCK_WAIT");
    if (w && *w) {
        int p;
        if (liblock_wait_parse(w, &p) != 0) {
            config_error("using the algorithm's default", "unknown LIBLOCK_WAIT '%s' (valid: spin spin-then-park yield park)%s",
                         w, "");
        } else if (p != LIBLOCK_WAIT_DEFAULT && !(o->policies & LL_POLICY_BIT(p))) {
            config_error("using the algorithm's default", "LIBLOCK_WAIT '%s' is not supported by '%s'", w, o->name);
        } else {
            liblock_attr_setwait(attr, p);
        }
    }
}

/* LIBLOCK_COND: fifo (the default) and mostly-lifo are the explicit-queue
 * kind of src/core/cond_lifo.c, with FIFO probability 1 and
 * LIBLOCK_COND_FIFO_PROB (default 0.001); glibc is the POSIX-backed kind of
 * src/core/cond.c (an inner mutex and a glibc condition, with requeue onto
 * mcs).  Why the queue by default: its waiters spin for the spin budget
 * before they sleep, as the locks' do, and it has no inner mutex for woken
 * waiters and signallers to meet on (docs/interpose.md, "Condition
 * variables"). */
static void cond_config_load(void)
{
    liblock_condattr_init(&cfg.cattr);
    cfg.generic_cond = ll_env_long("LIBLOCK_COND_GENERIC", 0, 0, 1) == 1;
    cfg.force_api = ll_env_long("LIBLOCK_INTERPOSE_API", 0, 0, 1) == 1;
    cfg.lazy = ll_env_long("LIBLOCK_LAZY", 1, 0, 1) == 1; /* lazy engagement (lazy.c) */
    const char *c = getenv("LIBLOCK_COND");
    int asked = c && *c;
    if (asked && strcmp(c, "glibc") == 0)
        return;
    double prob = 1.0;
    if (asked && strcmp(c, "mostly-lifo") == 0)
        prob = ll_env_double("LIBLOCK_COND_FIFO_PROB", 0.001, 0.0, 1.0);
    else if (asked && strcmp(c, "fifo") != 0)
        config_error("using fifo", "unknown LIBLOCK_COND '%s' (valid: fifo mostly-lifo glibc)%s", c, "");
    liblock_condattr_t ca;
    liblock_cond_t probe;
    liblock_condattr_init(&ca);
    int ok = liblock_condattr_setfifo(&ca, prob) == 0 && liblock_cond_init(&probe, &ca) == 0;
    int granted = ok && probe._kind != 0; /* kind 0 = the POSIX-backed condvar: a build without the queue kind */
    if (ok)
        liblock_cond_destroy(&probe);
    if (granted) {
        cfg.cattr = ca;
    } else if (asked && strcmp(c, "fifo") != 0) {
        config_error("using glibc", "LIBLOCK_COND=%s: queue condition variables are not available in this liblock build%s",
                     c, "");
    }
}

/* A lock of algorithm o can be made at all (e.g. an RCL algorithm that needs
 * servers): checked once, here, so failure is reported once. */
static int probe_algo(const struct ll_ops *o, const liblock_attr_t *attr)
{
    liblock_t probe;
    int r = liblock_init(&probe, o->name, attr);
    if (r == 0)
        liblock_destroy(&probe);
    return r;
}

/* A bad LIBLOCK_CONFIG stops the program before main: one line, exit 2
 * (the file was asked for explicitly; running on something else would
 * measure the wrong thing). */
static void config_fatal(const char *line)
{
    fprintf(stderr, "liblock: %s\n", line);
    fflush(stderr);
    _exit(2);
}

static void algo_set(struct shim_algo *a, const struct ll_ops *o, int wait, int cpu)
{
    a->ops = o;
    liblock_attr_init(&a->attr);
    if (o && wait != LIBLOCK_WAIT_DEFAULT)
        liblock_attr_setwait(&a->attr, wait);
    a->server_cpu = cpu;
}

static void file_config_load(const char *path)
{
    char err[512];
    if (shim_config_parse(path, &cfg.file, err, sizeof err))
        config_fatal(err);
    if (cfg.file.has_default && !cfg.def.ops)
        algo_set(&cfg.def, cfg.file.def_ops, cfg.file.def_wait, -1);
    cfg.site_algo = calloc((size_t)cfg.file.nrules + 1, sizeof *cfg.site_algo);
    if (!cfg.site_algo)
        config_fatal("out of memory reading LIBLOCK_CONFIG");
    for (int i = 0; i < cfg.file.nrules; i++) {
        struct shim_rule *r = &cfg.file.rules[i];
        algo_set(&cfg.site_algo[i], r->ops, r->wait, r->server_cpu);
        int e = r->ops ? probe_algo(r->ops, &cfg.site_algo[i].attr) : 0;
        if (e) {
            snprintf(err, sizeof err, "%s:%d: '%s' cannot be initialised (%s)", path, r->lineno, r->ops->name, strerror(e));
            config_fatal(err);
        }
    }
}

static int delegates(const struct ll_ops *o) { return o && (o->props & LIBLOCK_PROP_DELEGATES); }

static void config_load(void)
{
    /* interposed mutexes: an algorithm's direct mode where it has one
     * (lock/unlock without requests to a server: docs/rcl.md) */
    for (const struct ll_ops *const *o = ll_registry; *o; o++)
        if ((*o)->direct_default)
            (*o)->direct_default();
    sem_config_load();
    const char *name = getenv("LIBLOCK_LOCK");
    if (name && *name) {
        const struct ll_ops *o = ll_find_ops(name);
        if (!o) {
            char names[1024];
            valid_names(names, sizeof names);
            config_error("using glibc's mutexes", "unknown LIBLOCK_LOCK '%s' (valid: %s)", name, names);
        } else {
            algo_set(&cfg.def, o, LIBLOCK_WAIT_DEFAULT, -1);
            env_wait(o, &cfg.def.attr);
            int r = probe_algo(o, &cfg.def.attr);
            if (r) {
                config_error("using glibc's mutexes", "LIBLOCK_LOCK '%s' cannot be initialised (%s)", o->name, strerror(r));
                cfg.def.ops = NULL;
            }
        }
    }
    const char *file = getenv("LIBLOCK_CONFIG");
    if (file && *file)
        file_config_load(file);
    int deleg = delegates(cfg.def.ops), classic = cfg.def.ops && !delegates(cfg.def.ops);
    cfg.active = cfg.def.ops != NULL;
    for (int i = 0; i < cfg.file.nrules; i++) {
        const struct ll_ops *o = cfg.site_algo[i].ops;
        cfg.active |= o != NULL;
        deleg |= delegates(o);
        classic |= o && !delegates(o);
    }
    cfg.mixed = deleg && classic;
    cfg.debug_sites = ll_env_long("LIBLOCK_DEBUG_SITES", 0, 0, 1) == 1;
    cfg.need_site = cfg.file.nrules > 0 || cfg.debug_sites;
    /* an observer sees every lock, glibc's included, by its site */
    cfg.need_site = cfg.need_site || SHIM_OBSERVED;
    cfg.wrap = cfg.active || SHIM_OBSERVED;
    if (!cfg.active)
        return;
    cond_config_load();
    /* Nothing about the machine is measured or loaded here: the cycle rate,
     * the spin budget and the topology come on first need (a contended
     * wait, an RCL server), from the figures `liblock run` hands down or the
     * machine's cache when there are some (src/platform/calibration.c), so
     * a process that never contends starts as fast as under glibc.  The
     * topology's load is safe to reach from inside an interposed lock
     * (src/platform/platform.c, "topology"). */
}

static int base_eq(const char *a, const char *b)
{
    const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');
    return strcmp(sa ? sa + 1 : a, sb ? sb + 1 : b) == 0;
}

struct shim_algo *shim_algo_for(const struct shim_site *s)
{
    for (int i = 0; s && i < cfg.file.nrules; i++) {
        const struct shim_rule *r = &cfg.file.rules[i];
        int hit = 0;
        if (r->kind == SHIM_KEY_ID) {
            hit = r->id == s->id;
        } else if (r->kind == SHIM_KEY_SYM) {
            hit = s->sym && strcmp(s->sym, r->sym) == 0;
        } else if (s->nframes > 0) {
            const char *f, *fn;
            int line;
            hit = shim_symbolise(s->frames[0], &f, &line, &fn) == 0 && line == r->line && base_eq(f, r->file);
        }
        if (hit)
            return cfg.site_algo[i].ops ? &cfg.site_algo[i] : NULL;
    }
    return cfg.def.ops ? &cfg.def : NULL;
}

/* LIBLOCK_DEBUG_SITES=1: one line per lock set up, on stderr:
 * "liblock: site ID KEY -> ALGORITHM" (KEY: file:line of the init call or
 * first use, or the symbol of a static mutex). */
void shim_debug_site(const struct shim_site *s, const struct shim_algo *a)
{
    char key[600];
    const char *f, *fn;
    int line;
    if (s->sym)
        snprintf(key, sizeof key, "%s", s->sym);
    else if (s->nframes > 0 && shim_symbolise(s->frames[0], &f, &line, &fn) == 0)
        snprintf(key, sizeof key, "%s:%d", f, line);
    else if (s->nframes > 0)
        shim_module_offset(s->frames[0], key, sizeof key);
    else
        snprintf(key, sizeof key, "?");
    fprintf(stderr, "liblock: site %016llx %s -> %s\n", (unsigned long long)s->id, key, a ? a->ops->name : "glibc");
}

/* server=CPU: that lock's RCL server, started at the first lock made with it. */
int shim_algo_ready(struct shim_algo *a)
{
    if (a->server_cpu < 0 || atomic_load_explicit(&a->server_ready, memory_order_acquire))
        return 0;
    int r = 0;
    R.mutex_lock(&srv_mutex);
    if (!atomic_load_explicit(&a->server_ready, memory_order_relaxed)) {
        liblock_server_t *srv = liblock_server_start(a->server_cpu);
        if (!srv) {
            r = errno ? errno : EAGAIN;
        } else {
            liblock_attr_setserver(&a->attr, srv);
            atomic_store_explicit(&a->server_ready, 1, memory_order_release);
        }
    }
    R.mutex_unlock(&srv_mutex);
    return r;
}

void config_ensure(void)
{
    if (LL_LIKELY(atomic_load_explicit(&shim_cfg_ready, memory_order_acquire)))
        return;
    LL_KEEP_ERRNO; /* the first call reads files and the machine's topology */
    if (ip_in_setup)
        return; /* re-entered from config_load's own allocations: treat as inactive */
    while (atomic_exchange_explicit(&cfg_busy, 1, memory_order_acquire))
        sched_yield();
    if (!atomic_load_explicit(&shim_cfg_ready, memory_order_relaxed)) {
        ip_in_setup++;
        config_load();
        ip_in_setup--;
        atomic_store_explicit(&shim_cfg_ready, 1, memory_order_release);
    }
    atomic_store_explicit(&cfg_busy, 0, memory_order_release);
}

/* Exported for tests and tools: the default algorithm in use; "config" when
 * only some sites of a LIBLOCK_CONFIG file run on liblock; NULL when inactive. */
LL_EXPORT const char *liblock_interpose_lock(void)
{
    config_ensure();
    return cfg.def.ops ? cfg.def.ops->name : cfg.active ? "config" : NULL;
}

/* Exported for tests and tools: the kind of semaphore sem_init makes
 * ("fifo", "mostly-lifo"), NULL when semaphores are glibc's. */
LL_EXPORT const char *liblock_interpose_sem(void)
{
    config_ensure();
    return cfg.sem ? cfg.sem_kind : NULL;
}
