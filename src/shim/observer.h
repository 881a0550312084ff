/*
 * observer.h - the hooks through which an observer of the shim's lock
 * paths (the profiler, src/profile/) sees them.  The shim owns this
 * contract; an observer implements it and never the other way round: the
 * shim includes nothing of the observer's.
 *
 * The hooks, called by the shim's entry points (mutex.c, cond.c, c11.c,
 * wrapper.c, fork.c):
 *   lp_lock_begin(t, w, m)       before a lock/timedlock of wrapper w of m;
 *                                t is the call's token (struct lp_tok)
 *   lp_lock_end(t, w, m, r, ra)  after it, r its result, ra the caller
 *   lp_trylock_end(w, m, r, ra)  after a trylock
 *   lp_unlock_begin(w, m)        before an unlock (the caller still holds)
 *   lp_glibc_mine(m)             nonzero when m is a glibc-mode mutex the
 *                                calling thread holds (cond.c)
 *   lp_cond_begin(t, w) / lp_cond_end(t, w, m)  around a condition wait
 *   lp_set_fast(m, w)            w (NULL: none) is now m's wrapper
 *   lp_mutex_new(w, site)        a wrapper was made for a lock of site
 *   lp_start()                   the configuration is loaded
 *   lp_fork_child()              in a forked child, after the shim's rebuild
 *   lp_fast_*                    the observer's fast path for glibc-mode
 *                                mutexes (below)
 * With an observer, a mutex whose site runs on glibc still gets a wrapper
 * ("glibc mode", algo NULL: SHIM_GLIBC), so that it can be observed.
 *
 * A build with an observer compiles every shim file with the observer's
 * header force-included (the Makefile's -include for the profiler): that
 * header defines SHIM_OBSERVER, includes shim.h and then defines the hooks
 * (inline, so that they cost what they do and no call).  Without
 * SHIM_OBSERVER they are the empty inline functions below, and the
 * interposer pays nothing for them.
 */
#ifndef LL_SHIM_OBSERVER_H
#define LL_SHIM_OBSERVER_H

#ifdef SHIM_OBSERVER
#define SHIM_OBSERVED 1
#else
/* No observer: the shim's functions test SHIM_OBSERVED (a constant) where
 * the observer adds a path of its own, and the compiler drops that path. */
#define SHIM_OBSERVED 0
struct lp_tok {
    char unused;
};
static inline void lp_lock_begin(struct lp_tok *t, struct ip_mutex *w, pthread_mutex_t *m) { (void)t; (void)w; (void)m; }
static inline void lp_lock_end(struct lp_tok *t, struct ip_mutex *w, pthread_mutex_t *m, int r, void *ra)
{
    (void)t; (void)w; (void)m; (void)r; (void)ra;
}
static inline void lp_trylock_end(struct ip_mutex *w, pthread_mutex_t *m, int r, void *ra) { (void)w; (void)m; (void)r; (void)ra; }
static inline void lp_unlock_begin(struct ip_mutex *w, pthread_mutex_t *m) { (void)w; (void)m; }
static inline int lp_glibc_mine(const pthread_mutex_t *m) { (void)m; return 0; }
static inline void lp_cond_begin(struct lp_tok *t, struct ip_mutex *w) { (void)t; (void)w; }
static inline void lp_cond_end(struct lp_tok *t, struct ip_mutex *w, pthread_mutex_t *m) { (void)t; (void)w; (void)m; }
static inline void lp_set_fast(pthread_mutex_t *m, const struct ip_mutex *w) { (void)m; (void)w; }
static inline void lp_mutex_new(struct ip_mutex *w, const struct shim_site *s) { (void)w; (void)s; }
static inline void lp_start(void) {}
static inline void lp_fork_child(void) {}
/* The observer's own fast path for a NORMAL mutex glibc keeps (glibc
 * mode): lp_fast_desc(m) is m's descriptor, LP_FAST_TAG set when the
 * observer records m without its wrapper; then the shim calls glibc
 * between lp_fast_begin and lp_fast_end (lock), after lp_fast_unlock
 * (unlock), before lp_fast_trylock_end (trylock). */
#define LP_FAST_TAG ((uintptr_t)1)
static inline uintptr_t lp_fast_desc(const pthread_mutex_t *m) { (void)m; return 0; }
static inline void lp_fast_begin(struct lp_tok *t, const pthread_mutex_t *m) { (void)t; (void)m; }
static inline void lp_fast_end(struct lp_tok *t, uintptr_t d, pthread_mutex_t *m, int r, void *ra)
{
    (void)t; (void)d; (void)m; (void)r; (void)ra;
}
static inline void lp_fast_trylock_end(uintptr_t d, pthread_mutex_t *m, int r, void *ra) { (void)d; (void)m; (void)r; (void)ra; }
static inline void lp_fast_unlock(uintptr_t d, pthread_mutex_t *m) { (void)d; (void)m; }
#endif

#endif
