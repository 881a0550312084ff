/*
 * site.c - where a lock comes from, identified so that the identity
 * survives runs (address-space layout randomisation included):
 *
 *  - a mutex given to pthread_mutex_init (or mtx_init): the backtrace of
 *    that call, innermost first, frames inside the shim skipped, at most
 *    SHIM_SITE_FRAMES (frames of the shim itself, such as the profiler's thread
 *    start, are skipped wherever they are); its id is a 64-bit FNV-1a hash of the frames taken as
 *    (module basename, offset of the return address in the module);
 *  - a mutex first used without pthread_mutex_init (PTHREAD_MUTEX_INITIALIZER,
 *    std::mutex): its symbol if its address lies inside one (the dynamic
 *    symbol table through dladdr1, else the full symbol table through
 *    libdw), the id being the hash of (module basename, symbol name); a
 *    mutex inside heap or stack memory has no symbol and is identified by
 *    the backtrace of its first use, like an initialised one.
 *
 * Cost: one backtrace() and a dladdr per frame at set-up (init or first
 * use) only; file:line (libdw: dwfl_module_getsrc) only when a LIBLOCK_CONFIG
 * rule names a FILE:LINE, or when the profiler writes its report, cached per
 * address (libdw itself is opened then, "libdw" below).  Every libdw call is made under one glibc mutex (a Dwfl session is
 * not thread-safe) and inside set-up (ip_in_setup), so the mutexes libdw
 * itself takes stay glibc's.
 */
#include "shim.h"

#include <execinfo.h>
#include <link.h>
#include <dlfcn.h>
#ifdef HAVE_LIBDW
#include <elfutils/libdwfl.h>
#endif

static pthread_mutex_t sym_mutex = PTHREAD_MUTEX_INITIALIZER; /* real glibc mutex (through R) */

static const void *own_base(void)
{
    static const void *base;
    if (!base) {
        Dl_info di;
        if (dladdr((void *)own_base, &di))
            base = di.dli_fbase;
    }
    return base;
}

static const char *base_name(const char *p)
{
    if (!p || !*p)
        return "?";
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}
#define FNV0 0xcbf29ce484222325ull

static void fill_frames(struct shim_site *s, void **raw, int n)
{
    const void *own = own_base();
    uint64_t h = FNV0;
    s->nframes = 0;
    for (int i = 0; i < n && s->nframes < SHIM_SITE_FRAMES; i++) {
        Dl_info di;
        int ok = dladdr(raw[i], &di);
        if (ok && di.dli_fbase == own)
            continue; /* the shim's own frames (entry points, the profiler's thread start) */
        s->frames[s->nframes++] = raw[i];
        const char *mod = ok ? base_name(di.dli_fname) : "?";
        uint64_t off = ok ? (uint64_t)((uintptr_t)raw[i] - (uintptr_t)di.dli_fbase) : (uint64_t)(uintptr_t)raw[i];
        h = fnv(h, mod, strlen(mod) + 1);
        h = fnv(h, &off, sizeof off);
    }
    s->id = h;
}

void shim_site_init(struct shim_site *s)
{
    void *raw[SHIM_SITE_FRAMES + 16];
    int n = backtrace(raw, (int)(sizeof raw / sizeof raw[0]));
    s->is_static = 0;
    s->sym = NULL;
    fill_frames(s, raw, n);
}

void shim_site_static(struct shim_site *s, const void *mutex)
{
    shim_site_init(s); /* the first use: first_lock_site, and the id when there is no symbol */
    s->is_static = 1;
    const char *sym = shim_data_symbol(mutex);
    if (sym) {
        Dl_info di;
        const char *mod = dladdr(mutex, &di) ? base_name(di.dli_fname) : "?";
        uint64_t h = fnv(FNV0, mod, strlen(mod) + 1);
        s->id = fnv(h, sym, strlen(sym) + 1);
        s->sym = sym;
    }
}

void shim_module_offset(const void *addr, char *buf, size_t n)
{
    Dl_info di;
    if (dladdr(addr, &di))
        snprintf(buf, n, "%s+0x%lx", base_name(di.dli_fname), (unsigned long)((uintptr_t)addr - (uintptr_t)di.dli_fbase));
    else
        snprintf(buf, n, "0x%lx", (unsigned long)(uintptr_t)addr);
}

/* ---- libdw ----------------------------------------------------------------
 * Opened with dlopen on first need (a FILE:LINE rule, a static mutex with
 * no dynamic symbol, the profiler's report), never at start-up: libdw and
 * the compression libraries it needs would otherwise be loaded by every
 * program under a preload library.  The entry points are taken once, under
 * sym_mutex, by dw_open(). */
#ifdef HAVE_LIBDW
#define DW_FNS(X)                                                                                                     \
    X(Dwfl *, dwfl_begin, (const Dwfl_Callbacks *))                                                                   \
    X(void, dwfl_end, (Dwfl *))                                                                                       \
    X(void, dwfl_report_begin, (Dwfl *))                                                                              \
    X(int, dwfl_report_end, (Dwfl *, int (*)(Dwfl_Module *, void *, const char *, Dwarf_Addr, void *), void *))       \
    X(int, dwfl_linux_proc_report, (Dwfl *, pid_t))                                                                  \
    X(Dwfl_Module *, dwfl_addrmodule, (Dwfl *, Dwarf_Addr))                                                           \
    X(const char *, dwfl_module_addrname, (Dwfl_Module *, GElf_Addr))                                                 \
    X(Dwfl_Line *, dwfl_module_getsrc, (Dwfl_Module *, Dwarf_Addr))                                                   \
    X(const char *, dwfl_lineinfo, (Dwfl_Line *, Dwarf_Addr *, int *, int *, Dwarf_Word *, Dwarf_Word *))             \
    X(const char *, dwfl_module_addrinfo,                                                                             \
      (Dwfl_Module *, GElf_Addr, GElf_Off *, GElf_Sym *, GElf_Word *, Elf **, Dwarf_Addr *))
#define DW_PTR(ret, name, args) static ret(*dw_##name) args;
DW_FNS(DW_PTR)
static int dw_state; /* 0 not tried, 1 open, -1 unavailable; sym_mutex held */
static Dwfl *dwfl;
static pid_t dwfl_owner_pid;
static char *debuginfo_path;
static Dwfl_Callbacks dwfl_cb = {.debuginfo_path = &debuginfo_path};

static int dw_open(void) /* sym_mutex held */
{
    if (dw_state)
        return dw_state > 0;
    dw_state = -1;
    void *h = dlopen(LL_LIBDW_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return 0;
#define DW_SYM(ret, name, args)                                                                                       \
    if (!(dw_##name = (ret(*) args)dlsym(h, #name)))                                                                  \
        return 0;
    DW_FNS(DW_SYM)
    dwfl_cb.find_elf = (__typeof__(dwfl_cb.find_elf))dlsym(h, "dwfl_linux_proc_find_elf");
    dwfl_cb.find_debuginfo = (__typeof__(dwfl_cb.find_debuginfo))dlsym(h, "dwfl_standard_find_debuginfo");
    if (!dwfl_cb.find_elf || !dwfl_cb.find_debuginfo)
        return 0;
    dw_state = 1;
    return 1;
}

/* (Re)build the session: the modules mapped now (sym_mutex held). */
static int dwfl_refresh(void)
{
    if (!dw_open())
        return -1;
    if (dwfl && dwfl_owner_pid == getpid()) {
        dw_dwfl_report_begin(dwfl);
    } else {
        if (dwfl)
            dw_dwfl_end(dwfl); /* a forked child: the parent's session */
        dwfl = dw_dwfl_begin(&dwfl_cb);
        if (!dwfl)
            return -1;
        dwfl_owner_pid = getpid();
        dw_dwfl_report_begin(dwfl);
    }
    int r = dw_dwfl_linux_proc_report(dwfl, dwfl_owner_pid);
    dw_dwfl_report_end(dwfl, NULL, NULL);
    return r == 0 ? 0 : -1;
}

static Dwfl_Module *module_of(Dwarf_Addr a)
{
    if (!dwfl || dwfl_owner_pid != getpid())
        if (dwfl_refresh())
            return NULL;
    Dwfl_Module *mod = dw_dwfl_addrmodule(dwfl, a);
    if (!mod && dwfl_refresh() == 0) /* loaded since (dlopen) */
        mod = dw_dwfl_addrmodule(dwfl, a);
    return mod;
}
#endif

/* ---- the cache of code addresses ------------------------------------------- */
struct sym_ent {
    const void *addr;
    const char *file, *fn;
    int line, ok;
};
static struct sym_ent *cache;
static size_t cache_cap, cache_n;

static size_t addr_hash(const void *a)
{
    uint64_t x = (uint64_t)(uintptr_t)a;
    x ^= x >> 31;
    x *= 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 20);
}

static struct sym_ent *cache_slot(const void *a) /* sym_mutex held; NULL: out of memory */
{
    if ((cache_n + 1) * 2 > cache_cap) {
        size_t nc = cache_cap ? cache_cap * 2 : 256;
        struct sym_ent *nt = calloc(nc, sizeof *nt);
        if (!nt)
            return NULL;
        for (size_t i = 0; i < cache_cap; i++)
            if (cache[i].addr) {
                size_t j = addr_hash(cache[i].addr) & (nc - 1);
                while (nt[j].addr)
                    j = (j + 1) & (nc - 1);
                nt[j] = cache[i];
            }
        free(cache);
        cache = nt;
        cache_cap = nc;
    }
    size_t i = addr_hash(a) & (cache_cap - 1);
    while (cache[i].addr && cache[i].addr != a)
        i = (i + 1) & (cache_cap - 1);
    return &cache[i];
}

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

int shim_symbolise(const void *ret_addr, const char **file, int *line, const char **fn)
{
    *file = NULL;
    *fn = NULL;
    *line = 0;
    ip_resolve();
    ip_in_setup++;
    R.mutex_lock(&sym_mutex);
    struct sym_ent *e = cache_slot(ret_addr);
    if (e && !e->addr) {
        e->addr = ret_addr;
        cache_n++;
#ifdef HAVE_LIBDW
        Dwarf_Addr a = (Dwarf_Addr)(uintptr_t)ret_addr - 1; /* inside the call instruction */
        Dwfl_Module *mod = module_of(a);
        if (mod) {
            e->fn = dup_or_null(dw_dwfl_module_addrname(mod, a));
            Dwfl_Line *l = dw_dwfl_module_getsrc(mod, a);
            int ln = 0;
            const char *src = l ? dw_dwfl_lineinfo(l, NULL, &ln, NULL, NULL, NULL) : NULL;
            if (src && ln > 0) {
                e->file = dup_or_null(base_name(src));
                e->line = ln;
                e->ok = e->file != NULL;
            }
        }
#endif
        if (!e->fn) {
            Dl_info di;
            if (dladdr(ret_addr, &di) && di.dli_sname)
                e->fn = dup_or_null(di.dli_sname);
        }
    }
    int ok = e && e->ok;
    if (e) {
        *file = e->file;
        *line = e->line;
        *fn = e->fn;
    }
    R.mutex_unlock(&sym_mutex);
    ip_in_setup--;
    return ok ? 0 : -1;
}

const char *shim_data_symbol(const void *addr)
{
    Dl_info di;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1(addr, &di, (void **)&sym, RTLD_DL_SYMENT) && di.dli_sname && sym && di.dli_saddr &&
        (uintptr_t)addr - (uintptr_t)di.dli_saddr < (sym->st_size ? sym->st_size : 1))
        return strdup(di.dli_sname);
    const char *out = NULL;
#ifdef HAVE_LIBDW
    ip_resolve();
    ip_in_setup++;
    R.mutex_lock(&sym_mutex);
    Dwfl_Module *mod = module_of((Dwarf_Addr)(uintptr_t)addr);
    if (mod) {
        GElf_Off off = 0;
        GElf_Sym s;
        const char *name = dw_dwfl_module_addrinfo(mod, (Dwarf_Addr)(uintptr_t)addr, &off, &s, NULL, NULL, NULL);
        if (name && GELF_ST_TYPE(s.st_info) == STT_OBJECT && off < (s.st_size ? s.st_size : 1))
            out = strdup(name);
    }
    R.mutex_unlock(&sym_mutex);
    ip_in_setup--;
#endif
    return out;
}
