// Helpers: errors, memory, byte buffers

#include "internal.h"

// === helpers: errors, logging, memory ===

enum llm_status llm__fail(struct llm__err *e, enum llm_status st, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
        va_end(ap);
        e->status = st;
    }
    return st;
}

// memmem is a GNU and BSD extension, not POSIX: the first n-byte needle in h[0..hn), or NULL.
const void *llm__memmem(const void *h, size_t hn, const void *needle, size_t n) {
    const char *p = h;
    if (n == 0) return p;
    while (hn >= n) {
        const char *q = memchr(p, *(const char *)needle, hn - n + 1);
        if (!q) return NULL;
        if (memcmp(q, needle, n) == 0) return q;
        hn -= (size_t)(q + 1 - p);
        p = q + 1;
    }
    return NULL;
}

// A NUL-terminated copy of s[0..n) (strndup is POSIX.1-2008, but not C11); NULL: no memory.
char *llm__strndup(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) { if (n) memcpy(d, s, n); d[n] = 0; }
    return d;
}
void llm__outbuf_put(struct llm__outbuf *o, const void *s, size_t n) {
    if (o->fail || n == 0) return;
    if (o->n + n > o->cap) {
        size_t cap = LLM__MAX(2 * o->cap, o->n + n + 64);
        char *p = realloc(o->p, cap);
        if (!p) { o->fail = true; return; }
        o->p = p;
        o->cap = cap;
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

// 64-byte aligned allocation (cache lines, AVX-512 loads). Large buffers (weights, KV cache) are
// 2 MB aligned and asked to be backed by huge pages where the kernel does that on request
// (Linux THP "madvise" mode): streaming hundreds of MB per token through 4 KB pages costs a TLB
// miss every 4 KB.
void *llm__alloc(size_t size) {
    void *p = NULL;
    if (size == 0) size = 64;
    size_t align = size >= ((size_t)4 << 20) ? ((size_t)2 << 20) : 64;
    if (posix_memalign(&p, align, (size + align - 1) & ~(align - 1)) != 0) return NULL;
#if defined(MADV_HUGEPAGE)
    if (align > 64) madvise(p, (size + align - 1) & ~(align - 1), MADV_HUGEPAGE);
#endif
    return p;
}

// Memory the system has free for the KV cache, in bytes, or 0 when unknown. Linux: MemAvailable
// of /proc/meminfo (free memory and the page cache it can reclaim). Otherwise the free pages
// where sysconf counts them (_SC_AVPHYS_PAGES: Linux without /proc, OpenBSD, Solaris), else the
// physical memory (_SC_PHYS_PAGES: macOS, FreeBSD, NetBSD; what is free there needs system calls
// outside libc), else 0, and the engine sizes the KV cache for one sequence of max_model_len.
size_t llm__mem_available(void) {
    unsigned long long kb = 0;
#if defined(__linux__)
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
#endif
#if defined(_SC_AVPHYS_PAGES)
    const int which = _SC_AVPHYS_PAGES;
#elif defined(_SC_PHYS_PAGES)
    const int which = _SC_PHYS_PAGES;
#else
    const int which = -1;
#endif
    if (!kb && which != -1) {
        long pages = sysconf(which), psz = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psz > 0) kb = (unsigned long long)pages * (unsigned long long)psz / 1024;
    }
    return (size_t)kb * 1024;
}

uint64_t llm__splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// Reads size bytes of fd into buf. A file that ends early changed since it was measured.
enum llm_status llm__read_all(int fd, void *buf, size_t size, const char *path, struct llm__err *e) {
    size_t done = 0;
    while (done < size) {
        ssize_t k = read(fd, (char *)buf + done, LLM__MIN(size - done, (size_t)1 << 30));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return llm__fail(e, LLM_ERR_IO, "gguf: cannot read '%s': %s", path, strerror(errno));
        if (k == 0)
            return llm__fail(e, LLM_ERR_IO, "gguf: '%s' ended after %zu of its %zu bytes: it changed while it was read",
                             path, done, size);
        done += (size_t)k;
    }
    return LLM_OK;
}

// Tells the kernel the mapped file's pages of [p, p + n) are not needed again (the backend made
// its own copy of a tensor there), so the resident memory stays at one copy of the weights.
// Where madvise cannot drop pages, they stay until memory pressure evicts them (clean pages).
// A file read into memory (no_mmap) gets the same: the whole pages inside a tensor's data, which
// nothing reads again, are given back (they would read as zeros).
void llm__map_release(const void *p, size_t n) {
#if defined(MADV_DONTNEED)
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE), lo = ((uintptr_t)p + pg - 1) & ~(pg - 1);
    uintptr_t hi = ((uintptr_t)p + n) & ~(pg - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
#else
    (void)p;
    (void)n;
#endif
}

uint64_t llm__hash(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;   // FNV-1a
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

// A measured duration into its running estimate *m (0: none yet): down quickly, up slowly, as
// a first step is slow (pages touched for the first time) and other programs only ever make
// steps slower, never faster.
void llm__time_update(double *m, double t) {
    *m = *m <= 0 || t < 0.5 * *m ? t : t < *m ? 0.5 * *m + 0.5 * t : 0.9 * *m + 0.1 * LLM__MIN(t, 2 * *m);
}
