// Thread pool, and the number of threads chosen by measuring steps

#include "internal.h"

// === thread pool ===
//
// A persistent pool of worker threads. llm__pool_run(pool, fn, arg) runs fn(arg, i, n) once for
// every part i of [0, n) and returns when all n have finished; n is the number of threads that
// take part (llm__pool_nth: at most the pool's size, see "active" below). Part i is thread i's (the
// caller's is 0), but a thread must claim it: when a worker is not running (more threads than
// free cores: another program, a build, a browser), the caller takes its part over instead of
// waiting for it to be scheduled. Each part runs exactly once per job, on one thread, so fn may
// index per-part scratch by i. The ops split their work so that results do not depend on n (each
// output row, or attention item, is computed whole by one part).
//
// Waiting is spin-then-sleep on both sides. Between the jobs of one step (hundreds per token,
// microseconds apart) an idle worker spins on the job counter for LLM__POOL_SPIN, then sleeps (a
// futex on Linux, a condition variable elsewhere), so that it neither burns a core another
// program needs nor holds up the caller on a shared core. The caller, once its part is done and
// the others claimed, spins as long for the parts still running, then sleeps until the last one
// finishes: a worker descheduled in the middle of its part gets a core back sooner when the
// caller stops spinning.
//
// How many threads take part (active: the caller and workers 1..active-1; the others sleep,
// parked) is chosen by measuring steps (llm__pool_step_begin/end, below), never more than the
// cores the process may use: on a machine whose cores are busy with other programs, a worker
// preempted in the middle of its part stalls the whole job until it is scheduled again
// (milliseconds), and fewer threads are faster. With one, llm__pool_run is a plain call.
#define LLM__TUNE_PROBE 5    // steps a probe counts at least
#define LLM__TUNE_SPAN 0.5e-3   // seconds of steps a probe and its comparison cover (up to RING)
#define LLM__TUNE_WARM 1e-3  // seconds of steps not counted after the threads change
#define LLM__TUNE_GAP 0.25e-3   // seconds of steps at least between probes, per step of the interval

// Spin budget of an idle worker and of the caller waiting for the last parts, in seconds: the jobs
// of a decode step follow each other within 1-5 us, and steps within tens of us (sampling);
// waking a sleeping thread costs 5-50 us. Yielding starts after LLM__POOL_YIELD (llm__pool_spin).
// A worker that is running claims its part within a microsecond of the job's publication; the
// caller takes over a part not claimed after LLM__POOL_GRACE. That is longer than
// LLM__POOL_YIELD: a worker on the caller's core gets it first (with 2 us instead of 10, the
// caller, never yielding, kept such a worker off its core, and the load balancer had no reason to
// move it: one core's speed, measured).
#define LLM__POOL_SPIN 50e-6
#define LLM__POOL_YIELD 5e-6
#define LLM__POOL_GRACE 10e-6

static inline void llm__cpu_relax(void) {
#if defined(LLM__X86)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Sleeps while *w == val. It may also return early (a signal, a wake-up meant for an earlier
// value): callers re-check their condition.
static void llm__futex_wait(struct llm__pool *pool, atomic_uint *w, unsigned val) {
#if defined(__linux__)
    (void)pool;
    syscall(SYS_futex, (void *)w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
#else
    pthread_mutex_lock(&pool->mu);
    while (atomic_load(w) == val) pthread_cond_wait(&pool->cv, &pool->mu);
    pthread_mutex_unlock(&pool->mu);
#endif
}

// Wakes every thread asleep on w. The caller has changed *w before: with the fallback, a waiter
// that checked *w before the change is inside pthread_cond_wait by the time the mutex is ours.
static void llm__futex_wake(struct llm__pool *pool, atomic_uint *w) {
#if defined(__linux__)
    (void)pool;
    syscall(SYS_futex, (void *)w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)w;
    pthread_mutex_lock(&pool->mu);
    pthread_cond_broadcast(&pool->cv);
    pthread_mutex_unlock(&pool->mu);
#endif
}

// Spins while *w == val (until_zero false) or until *w is 0 (until_zero true), for at most
// `budget` seconds; true when it stopped for *w. The clock is read every 16 pauses (a pause takes
// 10 to 150 cycles depending on the CPU, hence a budget in time rather than in iterations).
// After LLM__POOL_YIELD the spinning thread also yields: when the thread it waits for was placed
// on its core (a worker woken up lands on its waker's core until the load balancer moves one of
// them), spinning would keep that thread from running; a yield costs a system call when
// nothing else is runnable.
static bool llm__pool_spin(const atomic_uint *w, unsigned val, bool until_zero, double budget) {
    double t0 = 0.0;
    for (unsigned i = 1;; i++) {
        unsigned v = atomic_load_explicit(w, memory_order_acquire);
        if (until_zero ? v == 0 : v != val) return true;
        if ((i & 15) == 0) {
            double now = llm__now();
            if (t0 == 0.0) t0 = now;
            else if (now - t0 > budget) return false;
            else if (now - t0 > LLM__POOL_YIELD) sched_yield();
        }
        llm__cpu_relax();
    }
}

static bool llm__pool_claim(struct llm__pool *pool, int i, uint64_t job) {
    uint64_t v = atomic_load_explicit(&pool->parts[i].claimed, memory_order_relaxed);
    return v < job && atomic_compare_exchange_strong_explicit(&pool->parts[i].claimed, &v, job, memory_order_relaxed,
                                                              memory_order_relaxed);
}

// Runs part i and counts it done (the last part wakes a caller that sleeps).
static void llm__pool_part_run(struct llm__pool *pool, int i, int nth) {
    pool->fn(pool->arg, i, nth);
    // seq_cst, as the caller's caller_sleeps store then left load: one sees the other.
    if (atomic_fetch_sub(&pool->left, 1) == 1 && atomic_load(&pool->caller_sleeps))
        llm__futex_wake(pool, &pool->left);
}

static void *llm__pool_main(void *p) {
    struct llm__pool_worker *wk = p;
    struct llm__pool *pool = wk->pool;
    unsigned seen = 0;
    while (!atomic_load_explicit(&pool->stop, memory_order_acquire)) {
        if (wk->index >= atomic_load(&pool->active)) {
            // Parked. park is read before active: a rise of active after that read bumps park,
            // and the wait returns at once.
            unsigned pk = atomic_load(&pool->park);
            if (wk->index >= atomic_load(&pool->active) && !atomic_load(&pool->stop))
                llm__futex_wait(pool, &pool->park, pk);
            continue;
        }
        if (!llm__pool_spin(&pool->job, seen, false, LLM__POOL_SPIN)) {
            // Sleep. sleepers is raised before job is read again, and llm__pool_run reads
            // sleepers after it bumps job (all seq_cst): a wake-up cannot be lost.
            atomic_fetch_add(&pool->sleepers, 1);
            while (atomic_load(&pool->job) == seen && wk->index < atomic_load(&pool->active))
                llm__futex_wait(pool, &pool->job, seen);
            atomic_fetch_sub(&pool->sleepers, 1);
        }
        // (Woken also when parked: then the job may be the one already seen.)
        unsigned job = atomic_load_explicit(&pool->job, memory_order_acquire);
        if (job == seen || atomic_load_explicit(&pool->stop, memory_order_acquire)) continue;
        seen = job;
        const uint64_t cur = atomic_load_explicit(&pool->cur, memory_order_acquire);
        const int nth = (int)(cur & 1023);
        if (wk->index < nth && llm__pool_claim(pool, wk->index, cur >> 10)) llm__pool_part_run(pool, wk->index, nth);
    }
    return NULL;
}

void llm__pool_run(struct llm__pool *pool, llm__job_fn fn, void *arg) {
    const int n = llm__pool_nth(pool);
    if (n == 1) {
        fn(arg, 0, 1);
        return;
    }
    const uint64_t job = ++pool->n_jobs;
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->left, (unsigned)n, memory_order_relaxed);
    atomic_store_explicit(&pool->cur, job << 10 | (uint64_t)n, memory_order_release);
    atomic_store(&pool->job, (unsigned)job);   // seq_cst: pairs with a worker's sleepers increment
    if (atomic_load(&pool->sleepers) > 0) llm__futex_wake(pool, &pool->job);
    llm__pool_part_run(pool, 0, n);
    // Wait for the other parts. LLM__POOL_GRACE after its own part, take over those whose
    // workers have not claimed them (asleep, or descheduled: more threads than free cores), so
    // that the job does not wait for them to be scheduled. Then spin for the parts still running,
    // and sleep (a descheduled worker gets this core sooner). The grace counts from the end of
    // the caller's part, not from the job's publication: then no clock is read at all where the
    // workers are done by then, as in nearly every job of a decode step (short jobs, each of
    // which used to pay two clock reads).
    unsigned left = atomic_load_explicit(&pool->left, memory_order_acquire);
    if (left != 0 && !llm__pool_spin(&pool->left, 0, true, LLM__POOL_GRACE))
        for (int i = 1; i < n; i++)
            if (llm__pool_claim(pool, i, job)) llm__pool_part_run(pool, i, n);
    while ((left = atomic_load_explicit(&pool->left, memory_order_acquire)) != 0) {
        if (llm__pool_spin(&pool->left, left, false, LLM__POOL_SPIN)) continue;
        atomic_store(&pool->caller_sleeps, 1);
        while ((left = atomic_load(&pool->left)) != 0) llm__futex_wait(pool, &pool->left, left);
        atomic_store(&pool->caller_sleeps, 0);
    }
}

// Threads that take part in the next jobs (1..n): the caller and workers 1..active-1.
static void llm__pool_set_active(struct llm__pool *pool, int active) {
    active = LLM__MAX(1, LLM__MIN(active, pool->n_threads));
    int old = atomic_load_explicit(&pool->active, memory_order_relaxed);
    if (active == old) return;
    atomic_store(&pool->active, active);
    if (active > old) {
        atomic_fetch_add(&pool->park, 1);
        llm__futex_wake(pool, &pool->park);
    }
}

// --- choosing the number of active threads by measuring steps ---
//
// The steps of a generation repeat (one decode step after another, chunks of a long prompt), so
// the time of steps at one thread count can be compared with the next ones at another. Per step
// size (n_tokens; the last LLM__TUNE_SIZES sizes seen) the tuner runs at one rung of the ladder
// 1, 2, 4, ..., min(n, cores) and now and then runs a few steps at a neighbouring rung (a
// probe, alternately below and above). It compares the mean time of the probe's steps with that
// of as many steps just before it, each without its slowest step (one preemption of the caller): at least
// LLM__TUNE_PROBE steps and LLM__TUNE_SPAN of time, at most LLM__TUNE_RING steps. A probe step 4 times as slow as those
// and 0.5 ms slower ends the probe at once, and so does one at fewer threads 25% and 0.5 ms slower. Adjacent windows of
// equal length, because another program's load comes and goes; means, because on a shared machine step times are
// bimodal (fast while the other program waits for a core, slow while a worker waits for one) and the mean is the
// throughput. Steps in which threads change are not counted: the first after a change, and those begun within
// LLM__TUNE_WARM of it (parked workers take that long to run again where they should; a tiny model's steps take 20 us),
// unless the change parks threads; nor are the first steps of a new step size (caches, page faults).
//
// A probe faster by 3% moves the tuner there (and the next probe, 4 steps later, looks further
// that way); a probe 15% slower after two steps ends there; one that loses makes the steps until
// the next probe 4 times as many, up to 256, so that on a steady machine probes cost about 1% at
// most and the tuner still follows a machine whose load changes within a second or two. Tiny
// models' steps are so short that the warm-up dominates a probe: probes are also LLM__TUNE_GAP
// of step time per step of the interval apart (64 ms at 256). A new step size starts where the
// last one probed is, and follows it until its own first probe (llm__tune_start says when not).

// The mean of n step times without the slowest (one preemption of the caller alone).
static double llm__tune_mean(double sum, double max, int n) {
    return n >= 2 ? (sum - max) / (n - 1) : sum;
}

// Whether the steps at cur kept cover enough time to compare a probe with: LLM__TUNE_SPAN, or a
// full ring (a tiny model's decode steps take 20 us: 5 of them are too few against the noise of
// a shared machine, and a wrong move to one thread costs 20% there).
static bool llm__tune_ready(const struct llm__tune *t) {
    if (t->cur_n < LLM__TUNE_PROBE) return false;
    double sum = 0.0;
    for (int i = 0; i < t->cur_n; i++) sum += t->last[i];
    return t->cur_n == LLM__TUNE_RING || sum >= LLM__TUNE_SPAN;
}

// The rung a size that has not been probed yet starts at (or stays at until its first probe): the
// last probed size's, unless that size has fewer tokens and its last probe found more threads
// less than 2 times as slow: then the top. A step of more tokens has more work per job, so
// threads pay off more: a tiny model's decode (jobs of a microsecond) can run 25% faster on one
// thread than on two while its prompt steps run 25% slower there (measured). On a busy machine
// more threads are several times as slow (workers preempted in their parts), for prompt steps
// too: they follow.
static int llm__tune_start(const struct llm__pool *pool, const struct llm__tune *last, int n_tokens) {
    if (!last) return pool->first_rung;
    return last->n_tokens >= n_tokens || last->more_cost > 2.0 ? last->cur : pool->first_rung;
}

static struct llm__tune *llm__tune_find(struct llm__pool *pool, int n_tokens) {
    struct llm__tune *t = NULL, *lru = &pool->tune[0], *last = NULL;
    for (int i = 0; i < LLM__TUNE_SIZES; i++) {
        struct llm__tune *u = &pool->tune[i];
        if (u->n_tokens == n_tokens) t = u;
        if (u->last_use < lru->last_use) lru = u;
        if (u->decided && (!last || u->last_use > last->last_use)) last = u;
    }
    if (t && !t->decided && t->probe < 0 && t->cur != llm__tune_start(pool, last, n_tokens)) {
        // A size too rare to have been probed yet (a prompt's step among decode steps) follows
        // the last size that was.
        t->cur = llm__tune_start(pool, last, n_tokens);
        t->cur_n = t->cur_pos = 0;
    }
    if (!t) {
        t = lru;
        int cur = llm__tune_start(pool, last, n_tokens);
        memset(t, 0, sizeof(*t));
        t->n_tokens = n_tokens;
        t->cur = cur;
        t->probe = -1;
        t->dir = -1;
        t->skip = true;       // the first steps fault weights and caches in
        t->warm_until = pool->step_clock + LLM__TUNE_WARM;
        t->until_probe = LLM__TUNE_PROBE;
        t->interval = 4;
    }
    t->last_use = ++pool->n_steps;
    return t;
}

void llm__pool_step_begin(struct llm__pool *pool, int n_tokens) {
    pool->step_tune = NULL;
    if (pool->n_rungs < 2) return;
    struct llm__tune *t = llm__tune_find(pool, n_tokens);
    if (t->probe < 0 && t->until_probe == 0 && pool->step_clock >= t->probe_after && llm__tune_ready(t)) {
        if (t->cur + t->dir < 0 || t->cur + t->dir >= pool->n_rungs) t->dir = -t->dir;
        t->probe = t->cur + t->dir;
        t->probe_sum = t->probe_max = 0.0;
        t->probe_n = 0;
        // no more threads than the last step ran: none to wake, so the probe's first step counts
        const bool wakes = pool->rungs[t->probe] > atomic_load(&pool->active);
        t->skip = wakes;
        t->warm_until = pool->step_clock + (wakes ? LLM__TUNE_WARM : 0.0);
    }
    pool->step_tune = t;
    pool->step_rung = t->probe >= 0 ? t->probe : t->cur;
    llm__pool_set_active(pool, pool->rungs[pool->step_rung]);
    pool->step_t0 = llm__now();
}

// Records the time of the step begun last (seconds); at the end of a probe, decides.
static void llm__pool_step_record(struct llm__pool *pool, double dt) {
    struct llm__tune *t = pool->step_tune;
    if (!t) return;
    pool->step_tune = NULL;
    bool counts = !t->skip && pool->step_clock >= t->warm_until;
    pool->step_clock += dt;
    t->skip = false;
    if (pool->step_rung == t->cur) {
        if (!counts) return;
        t->last[t->cur_pos] = dt;
        t->cur_pos = (t->cur_pos + 1) % LLM__TUNE_RING;
        t->cur_n = LLM__MIN(t->cur_n + 1, LLM__TUNE_RING);
        if (t->until_probe > 0) t->until_probe--;
        return;
    }
    // The steps at cur just before the probe, as many as the probe has (at least PROBE).
    const int k = LLM__MIN(t->cur_n, LLM__MAX(t->probe_n + 1, LLM__TUNE_PROBE));
    double sum = 0.0, max = 0.0;
    for (int i = 1; i <= k; i++) {
        const double x = t->last[(t->cur_pos - i + LLM__TUNE_RING) % LLM__TUNE_RING];
        sum += x, max = LLM__MAX(max, x);
    }
    const double cur = llm__tune_mean(sum, max, k);
    // A probe step 4 times as slow and 0.5 ms slower (workers preempted in their parts) ends the
    // probe, warm-up or not: no wake-up costs that much. So does a step at fewer threads 25% and
    // 0.5 ms slower: the threads parked were doing their share on cores of their own (2 -> 1 on
    // an idle machine: decode steps 1.4-2 times as long; such a probe cost 3 steps, now 1).
    const bool hopeless = dt - cur > 0.5e-3 && (dt > 4.0 * cur || (t->probe < t->cur && counts && dt > 1.25 * cur));
    if (!counts && !hopeless) return;
    t->probe_n++;
    t->probe_sum += dt;
    t->probe_max = LLM__MAX(t->probe_max, dt);
    const double probe = hopeless ? dt : llm__tune_mean(t->probe_sum, t->probe_max, t->probe_n);
    // Clearly slower after two steps: over already.
    const bool enough = t->probe_n >= LLM__TUNE_PROBE &&
                        (t->probe_sum >= LLM__TUNE_SPAN || t->probe_n >= LLM__MIN(t->cur_n, LLM__TUNE_RING));
    if (!hopeless && !enough && !(t->probe_n >= 2 && probe > 1.15 * cur)) return;
    t->more_cost = t->probe > t->cur ? probe / cur : cur / probe;
    if (probe < 0.97 * cur) {
        t->cur = t->probe;
        t->interval = 4;
    } else {
        t->dir = -t->dir;
        t->interval = LLM__MIN(4 * t->interval, 256);
    }
    if (t->cur != t->probe) {   // back from a probe: threads parked or woken again
        t->skip = true;
        t->warm_until = pool->step_clock + LLM__TUNE_WARM;
    }
    t->cur_n = t->cur_pos = 0;
    t->probe = -1;
    t->until_probe = t->interval;
    t->probe_after = pool->step_clock + t->interval * LLM__TUNE_GAP;
    t->decided = true;
}

void llm__pool_step_end(struct llm__pool *pool) {
    if (pool->step_tune) llm__pool_step_record(pool, llm__now() - pool->step_t0);
}

// Cores this process may run on (1..256): on Linux, those of its affinity mask (taskset, a
// container's cpuset), else the cores online; 1 where the system cannot tell
// (_SC_NPROCESSORS_ONLN is not POSIX, but Linux, macOS and the BSDs have it).
int llm__online_cpus(void) {
    long n = 1;
#if defined(_SC_NPROCESSORS_ONLN)
    n = sysconf(_SC_NPROCESSORS_ONLN);
#endif
#if defined(__linux__) && defined(CPU_COUNT)
    cpu_set_t set;   // 1024 cores; with more, sched_getaffinity fails and the count above stays
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 1) n = CPU_COUNT(&set);
#endif
    return n < 1 ? 1 : n > 256 ? 256 : (int)n;
}

void llm__pool_free(struct llm__pool *pool) {
    if (!pool) return;
    if (pool->threads) {
        atomic_store(&pool->stop, true);
        atomic_fetch_add(&pool->job, 1);
        atomic_fetch_add(&pool->park, 1);
        llm__futex_wake(pool, &pool->job);
        llm__futex_wake(pool, &pool->park);
        for (int i = 1; i < pool->n_threads; i++) pthread_join(pool->threads[i], NULL);
    }
#if !defined(__linux__)
    pthread_mutex_destroy(&pool->mu);
    pthread_cond_destroy(&pool->cv);
#endif
    free(pool->threads);
    free(pool->workers);
    free(pool->parts);
    free(pool);
}

struct llm__pool *llm__pool_new(int n_threads, struct llm__err *e) {
    struct llm__pool *pool = llm__alloc(sizeof(*pool));
    if (!pool) { llm__fail(e, LLM_ERR_NOMEM, "out of memory"); return NULL; }
    memset(pool, 0, sizeof(*pool));
    pool->n_threads = n_threads;
    atomic_init(&pool->cur, 0);   // job 0, no parts
    pool->parts = llm__alloc(sizeof(struct llm__pool_part) * (size_t)n_threads);
    if (!pool->parts) {
        free(pool);
        llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 0; i < n_threads; i++) atomic_init(&pool->parts[i].claimed, 0);
    atomic_init(&pool->job, 0);
    atomic_init(&pool->sleepers, 0);
    atomic_init(&pool->park, 0);
    atomic_init(&pool->stop, false);
    atomic_init(&pool->left, 0);
    atomic_init(&pool->caller_sleeps, 0);
    // The ladder: 1, 2, 4, ... up to n_threads or the cores this process may use, whichever is
    // fewer (more threads than cores are never faster, and a probe there costs a lot: workers
    // preempted in their parts).
    const int cores = llm__online_cpus(), top = LLM__MIN(n_threads, cores);
    for (int k = 1; k < top && pool->n_rungs < LLM__TUNE_RUNGS - 1; k *= 2) pool->rungs[pool->n_rungs++] = k;
    pool->rungs[pool->n_rungs++] = top;
    // The start (jobs before the first step: weights repacked at load; the first step size): the top.
    pool->first_rung = pool->n_rungs - 1;
    atomic_init(&pool->active, pool->rungs[pool->first_rung]);
#if !defined(__linux__)
    pthread_mutex_init(&pool->mu, NULL);
    pthread_cond_init(&pool->cv, NULL);
#endif
    if (n_threads == 1) return pool;
    pool->threads = calloc((size_t)n_threads, sizeof(pthread_t));
    pool->workers = calloc((size_t)n_threads, sizeof(struct llm__pool_worker));
    if (!pool->threads || !pool->workers) {
        llm__pool_free(pool);
        llm__fail(e, LLM_ERR_NOMEM, "out of memory");
        return NULL;
    }
    for (int i = 1; i < n_threads; i++) {
        pool->workers[i] = (struct llm__pool_worker){pool, i};
        if (pthread_create(&pool->threads[i], NULL, llm__pool_main, &pool->workers[i]) != 0) {
            pool->n_threads = i;   // join only the ones that started
            llm__pool_free(pool);
            llm__fail(e, LLM_ERR_BACKEND, "cannot start worker thread %d", i);
            return NULL;
        }
    }
    return pool;
}
