// pull.c — llm pull REPO FILE, llm pull REPO[:QUANT] and -m hf://REPO/FILE, hf://REPO[:QUANT]: a
// GGUF model from Hugging Face into the cache, with libcurl (the program's only network code; the
// engine never touches the network).
//
// URL:   $LLM_HF_ENDPOINT/REPO/resolve/main/FILE (default endpoint https://huggingface.co, as
//        HF_ENDPOINT for Hugging Face's own tools)
// QUANT: the repository's files come from its model API, $LLM_HF_ENDPOINT/api/models/REPO, whose
//        JSON object lists them as "siblings": [{"rfilename": "FILE"}, ...]. The model is the GGUF
//        file whose name holds QUANT as a word of its own, in any case (hf_quant_in); files of
//        projectors (mmproj) and importance matrices (imatrix) are no models. A model split into
//        parts (NAME-00001-of-00003.gguf, ...) is one model: every part is pulled, the first is
//        the path. No QUANT: Q4_K_M, else Q8_0, else the repository's only model (llama.cpp's
//        -hf picks Q4_K_M, then Q8_0, then the first file; several models and none of those
//        types is an error here, listing them, rather than a guess).
// Cache: ${XDG_CACHE_HOME:-$HOME/.cache}/llm.c/hf/REPO/FILE; while it downloads, FILE.part, which
//        a later pull resumes with an HTTP Range request. The file gets its final name only after
//        the checks: its size against the server's (Content-Length, Content-Range, X-Linked-Size)
//        and its sha256 against the one the server gives (Hugging Face sends it for LFS files as
//        X-Linked-Etag on its redirect to the CDN; a plain ETag of 64 hex digits counts too).
//        A server that sends more than the size it announced is refused as soon as it does (the
//        size check would fail anyway). A pull that fails takes back what it made: the folders
//        it created, when they are empty, and its .part, when nothing arrived in it; a .part with
//        bytes stays for the next pull to resume.
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>

// --- SHA-256 (FIPS 180-4) ---

struct sha256 { uint32_t h[8]; uint8_t buf[64]; uint64_t len; size_t n; };

static const uint32_t sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define SHA_ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *s, const uint8_t *p) {
    uint32_t w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = SHA_ROR(w[i - 15], 7) ^ SHA_ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = SHA_ROR(w[i - 2], 17) ^ SHA_ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof(v));
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = v[7] + (SHA_ROR(v[4], 6) ^ SHA_ROR(v[4], 11) ^ SHA_ROR(v[4], 25)) +
                      ((v[4] & v[5]) ^ (~v[4] & v[6])) + sha256_k[i] + w[i];
        uint32_t t2 = (SHA_ROR(v[0], 2) ^ SHA_ROR(v[0], 13) ^ SHA_ROR(v[0], 22)) +
                      ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof(uint32_t));
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++) s->h[i] += v[i];
}

static void sha256_init(struct sha256 *s) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof(h0));
    s->len = 0;
    s->n = 0;
}

static void sha256_update(struct sha256 *s, const uint8_t *p, size_t n) {
    s->len += n;
    while (n > 0) {
        size_t k = CLI_MIN(n, 64 - s->n);
        memcpy(s->buf + s->n, p, k);
        s->n += k, p += k, n -= k;
        if (s->n == 64) { sha256_block(s, s->buf); s->n = 0; }
    }
}

// The digest as 64 lowercase hex digits and a NUL.
static void sha256_hex(struct sha256 *s, char out[65]) {
    uint64_t bits = s->len * 8;
    uint8_t pad = 0x80, zero = 0, len[8];
    sha256_update(s, &pad, 1);
    while (s->n != 56) sha256_update(s, &zero, 1);
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++) snprintf(out + 8 * i, 9, "%08x", (unsigned)s->h[i]);
}

// --- names and paths ---

// A repository name: OWNER/NAME, each of letters, digits, '.', '_', '-' (Hugging Face's rule),
// not starting with '.' or '-' (so never "." or ".."), at most 96 characters.
static bool hf_valid_part(const char *s, size_t n) {
    if (n == 0 || n > 96 || s[0] == '.' || s[0] == '-') return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-') return false;
    return true;
}

static bool hf_valid_repo(const char *repo) {
    const char *slash = strchr(repo, '/');
    return slash && hf_valid_part(repo, (size_t)(slash - repo)) && hf_valid_part(slash + 1, strlen(slash + 1));
}

// A file path in the repository: '/'-separated names, none empty, "." or "..", no control
// characters or backslashes (it becomes a path under the cache folder), at most 1024 bytes.
static bool hf_valid_file(const char *file) {
    size_t n = strlen(file);
    if (n == 0 || n > 1024) return false;
    for (const char *p = file; *p;) {
        size_t k = strcspn(p, "/");
        if (k == 0 || (k == 1 && p[0] == '.') || (k == 2 && p[0] == '.' && p[1] == '.')) return false;
        for (size_t i = 0; i < k; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\') return false;
        p += k;
        if (*p == '/') p++;
        if (*p == 0 && p[-1] == '/') return false;
    }
    return true;
}

static char *str_vprintf(const char *fmt, va_list ap) {
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s) cli_die("out of memory");
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

__attribute__((format(printf, 1, 2)))
static char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = str_vprintf(fmt, ap);
    va_end(ap);
    return s;
}

char *cli_cache_root(void) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg == '/') return str_printf("%s/llm.c/hf", xdg);
    if (!home || !*home) return NULL;
    return str_printf("%s/.cache/llm.c/hf", home);
}

// The cache path of REPO/FILE (see the top comment).
static char *hf_cache_path(const char *repo, const char *file) {
    char *root = cli_cache_root();
    if (!root) cli_die("neither XDG_CACHE_HOME nor HOME is set: no cache folder for the download");
    char *path = str_printf("%s/%s/%s", root, repo, file);
    free(root);
    return path;
}

// What a pull made in the cache, taken back when it fails (pull_die): the folders it created
// and whether it created the .part. Only these: a folder or a .part that was there before may
// hold another pull's bytes or the user's files.
struct pull_made {
    char *path;        // the download's path (a copy: cut at dirs[i] it names a folder)
    size_t *dirs;      // the lengths of the folders' names in path that this pull created, outermost first
    int n_dirs;
    const char *part;
    int fd;            // the .part once this pull holds its lock, else -1
    bool made_part;    // the .part was created by this pull (O_EXCL)
};

// Takes back what m records: the .part while it is empty and still the file this pull created
// and locked (with bytes it stays, to be resumed), then the created folders, innermost first,
// each only if empty (rmdir fails on anything else: a file that arrived meanwhile stays).
static void pull_unmake(struct pull_made *m) {
    struct stat a, b;
    if (m->made_part && m->fd >= 0 && fstat(m->fd, &a) == 0 && a.st_size == 0 && lstat(m->part, &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        unlink(m->part);
    for (int i = m->n_dirs - 1; i >= 0; i--) {
        m->path[m->dirs[i]] = 0;
        rmdir(m->path);
        m->path[m->dirs[i]] = '/';
    }
    m->n_dirs = 0;
}

// cli_die after taking back what the pull made.
__attribute__((format(printf, 2, 3), noreturn))
static void pull_die(struct pull_made *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *msg = str_vprintf(fmt, ap);
    va_end(ap);
    pull_unmake(m);
    cli_die("%s", msg);
}

// mkdir -p of the folders above m->path, recording those it creates.
static void make_parents(struct pull_made *m) {
    char *p = m->path;
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        if (mkdir(p, 0755) == 0) {
            m->dirs[m->n_dirs++] = (size_t)(s - p);
        } else if (errno != EEXIST) {
            char *msg = str_printf("cannot create the folder '%s': %s", p, strerror(errno));
            *s = '/';
            pull_die(m, "%s", msg);
        }
        *s = '/';
    }
}

// --- the transfer ---

struct pull {
    const char *url, *part;
    int fd;
    long long offset;      // bytes in the .part file
    long long start;       // the .part's size when this transfer began (the Range asked for)
    // of the response being received (reset at each status line: redirects have several)
    int status;
    long long content_length, range_start, range_total;
    char etag[80];
    // of any response (Hugging Face's redirect carries them)
    char linked_etag[80];
    long long linked_size;
    int write_errno;
    long long overrun;     // the size announced when more bytes came, else -1
    bool tty;
    double t0, last_draw;
};

static void header_value(const char *line, size_t n, size_t name_len, char *out, size_t cap) {
    const char *v = line + name_len, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t')) v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ')) end--;
    size_t k = CLI_MIN((size_t)(end - v), cap - 1);
    memcpy(out, v, k);
    out[k] = 0;
}

static size_t on_header(char *line, size_t size, size_t nmemb, void *user) {
    struct pull *P = user;
    size_t n = size * nmemb;
    char v[128];
    if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
        const char *sp = memchr(line, ' ', n);
        P->status = sp ? atoi(sp + 1) : 0;
        P->content_length = P->range_start = P->range_total = -1;
        P->etag[0] = 0;
    } else if (n > 15 && !strncasecmp(line, "content-length:", 15)) {
        header_value(line, n, 15, v, sizeof(v));
        P->content_length = strtoll(v, NULL, 10);
    } else if (n > 14 && !strncasecmp(line, "content-range:", 14)) {
        header_value(line, n, 14, v, sizeof(v));   // bytes START-END/TOTAL
        long long a, b, t;
        if (sscanf(v, "bytes %lld-%lld/%lld", &a, &b, &t) == 3) P->range_start = a, P->range_total = t;
    } else if (n > 5 && !strncasecmp(line, "etag:", 5)) {
        header_value(line, n, 5, P->etag, sizeof(P->etag));
    } else if (n > 14 && !strncasecmp(line, "x-linked-etag:", 14)) {
        header_value(line, n, 14, P->linked_etag, sizeof(P->linked_etag));
    } else if (n > 14 && !strncasecmp(line, "x-linked-size:", 14)) {
        header_value(line, n, 14, v, sizeof(v));
        P->linked_size = strtoll(v, NULL, 10);
    }
    return n;
}

static long long pull_total(const struct pull *P);

// The body: appended to the .part file. A 200 answer to a Range request (a server that does not
// do ranges) is the whole file: the .part starts over. Bytes beyond an announced size end the
// transfer (overrun): the size check after it would refuse the file, and the progress bar knows
// no share above 100%.
static size_t on_body(char *data, size_t size, size_t nmemb, void *user) {
    struct pull *P = user;
    size_t n = size * nmemb;
    if (P->offset == P->start && P->start > 0 && P->status == 200) {
        if (ftruncate(P->fd, 0) != 0) { P->write_errno = errno; return 0; }
        P->offset = P->start = 0;
    }
    if (P->status == 206 && P->range_start >= 0 && P->offset == P->start && P->range_start != P->start) {
        P->write_errno = EPROTO;   // a range other than the one asked for
        return 0;
    }
    // the smallest size announced (the response's, Hugging Face's X-Linked-Size), -1: none
    long long limit = pull_total(P);
    if (P->linked_size >= 0 && (limit < 0 || P->linked_size < limit)) limit = P->linked_size;
    if (limit >= 0 && (P->offset > limit || (unsigned long long)n > (unsigned long long)(limit - P->offset))) {
        P->overrun = limit;
        return 0;
    }
    for (size_t done = 0; done < n;) {
        ssize_t w = write(P->fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) { P->write_errno = w < 0 ? errno : EIO; return 0; }
        done += (size_t)w;
        P->offset += w;
    }
    return n;
}

const char *cli_human_size(double b, char *out, size_t cap) {
    if (b >= 1e9) snprintf(out, cap, "%.2f GB", b / 1e9);
    else if (b >= 1e6) snprintf(out, cap, "%.1f MB", b / 1e6);
    else snprintf(out, cap, "%.0f kB", b / 1e3);
    return out;
}

// The total size of the file, when the response says it (-1: not known).
static long long pull_total(const struct pull *P) {
    if (P->status == 206 && P->range_total >= 0) return P->range_total;
    if (P->status == 200 && P->content_length >= 0) return P->content_length;
    return P->linked_size;
}

// The progress bar, on a terminal only, at most 10 times a second.
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    struct pull *P = user;
    double now = cli_now();
    if (!P->tty || now - P->last_draw < 0.1) return 0;
    P->last_draw = now;
    long long total = pull_total(P);
    char a[32], b[32], r[32];
    double rate = (double)(P->offset - P->start) / CLI_MAX(now - P->t0, 1e-3);
    if (total > 0 && P->offset <= total) {   // (on_body keeps the offset within it)
        int pct = (int)(100.0 * (double)P->offset / (double)total), fill = pct * 30 / 100;
        fprintf(stderr, "\r%3d%% [%.*s%*s] %s / %s  %s/s   ", pct, fill, "==============================",
                30 - fill, "", cli_human_size((double)P->offset, a, sizeof(a)),
                cli_human_size((double)total, b, sizeof(b)), cli_human_size(rate, r, sizeof(r)));
    } else {
        fprintf(stderr, "\r%s  %s/s   ", cli_human_size((double)P->offset, a, sizeof(a)),
                cli_human_size(rate, r, sizeof(r)));
    }
    return 0;
}

// "sha256 hex" of an ETag value ("..." or W/"..."), or NULL when it is not 64 hex digits.
static const char *etag_sha256(const char *etag, char out[65]) {
    if (!strncmp(etag, "W/", 2)) etag += 2;
    size_t n = strlen(etag);
    if (n >= 2 && etag[0] == '"' && etag[n - 1] == '"') etag++, n -= 2;
    if (n != 64) return NULL;
    for (size_t i = 0; i < 64; i++) {
        if (!isxdigit((unsigned char)etag[i])) return NULL;
        out[i] = (char)tolower((unsigned char)etag[i]);
    }
    out[64] = 0;
    return out;
}

static bool transient(CURLcode rc) {
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_GOT_NOTHING || rc == CURLE_HTTP2 ||
           rc == CURLE_HTTP2_STREAM;
}

// One download of hf_pull: the names in its messages, its URL and files, what it made in the
// cache (taken back when it fails), the transfer's state.
struct hf_download {
    const char *repo, *file, *path, *endpoint;
    char *url, *part;
    struct pull_made made;
    struct pull P;
    CURL *h;
    char errbuf[CURL_ERROR_SIZE];
    char sum[65];           // the sha256 the server gave, when it gave one
};

// cli_die unless REPO is a repository's name.
static void hf_check_repo(const char *repo) {
    if (!hf_valid_repo(repo))
        cli_die("'%s' is not a Hugging Face repository name: OWNER/NAME, each of letters, digits, '.', '_', '-' "
                "(e.g. unsloth/gemma-3-270m-it-GGUF)", repo);
}

// The server: LLM_HF_ENDPOINT, else Hugging Face.
static const char *hf_endpoint(void) {
    const char *e = getenv("LLM_HF_ENDPOINT");
    return e && *e ? e : "https://huggingface.co";
}

// cli_die unless REPO and FILE are names that can be downloaded (and made a cache path).
static void hf_check_names(const char *repo, const char *file) {
    hf_check_repo(repo);
    if (!hf_valid_file(file))
        cli_die("'%s' is not a file path in a repository: names separated by '/', none empty, '.' or '..', "
                "no control characters (e.g. gemma-3-270m-it-Q4_K_M.gguf)", file);
}

// The URL of REPO/FILE at the endpoint (malloc'd): each name of FILE percent-encoded.
static char *hf_url(CURL *h, const char *endpoint, const char *repo, const char *file) {
    struct cli_strbuf url = {0};
    cli_sb_put(&url, endpoint, strlen(endpoint));
    while (url.n > 0 && url.p[url.n - 1] == '/') url.p[--url.n] = 0;
    cli_sb_put(&url, "/", 1);
    cli_sb_put(&url, repo, strlen(repo));
    cli_sb_put(&url, "/resolve/main", 13);
    for (const char *p = file; *p;) {
        size_t k = strcspn(p, "/");
        char *e = curl_easy_escape(h, p, (int)k);
        if (!e) cli_die("out of memory");
        cli_sb_put(&url, "/", 1);
        cli_sb_put(&url, e, strlen(e));
        curl_free(e);
        p += k + (p[k] == '/');
    }
    return url.p;
}

// The .part, opened for appending (its folders made first) and locked; returns its descriptor.
static int hf_open_part(struct hf_download *d) {
    enum { TRIES = 3 };   // a folder can go between mkdir and open: another pull that made it failed
    d->made = (struct pull_made){.path = strdup(d->path), .dirs = calloc(TRIES * (strlen(d->path) + 1), sizeof(size_t)),
                                 .part = d->part, .fd = -1};
    if (!d->made.path || !d->made.dirs) cli_die("out of memory");
    int fd = -1;
    for (int t = 0; t < TRIES && fd < 0; t++) {
        make_parents(&d->made);
        // O_EXCL first, to know whether this pull made the .part (a failure takes back only that)
        fd = open(d->part, O_WRONLY | O_CREAT | O_EXCL | O_APPEND, 0644);
        d->made.made_part = fd >= 0;
        if (fd < 0 && errno == EEXIST) fd = open(d->part, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd < 0 && errno != ENOENT) break;
    }
    if (fd < 0) pull_die(&d->made, "cannot write '%s': %s", d->part, strerror(errno));
    // one pull of a file at a time: two appending to the same .part would interleave
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(fd, F_SETLK, &lk) != 0)
        pull_die(&d->made, "'%s' is being downloaded by another llm pull (it holds a lock on %s)", d->file, d->part);
    d->made.fd = fd;
    return fd;
}

// The transfer's options: redirects followed, HTTP errors failing, headers, body and progress to
// the callbacks, and a stalled transfer ended.
static void hf_setopt(struct hf_download *d) {
    CURL *h = d->h;
    curl_easy_setopt(h, CURLOPT_URL, d->url);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "llm.c/" LLM_VERSION);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &d->P);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &d->P);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &d->P);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, d->errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    // a transfer that stalls (under 1 byte/s for a minute) ends, and hf_transfer resumes it
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 60L);
}

// A try that failed with rc (HTTP status code): pull_die unless it is worth resuming (a transfer
// cut short, at most 100 tries).
static void hf_try_failed(struct hf_download *d, CURLcode rc, long code, int tries) {
    const struct pull *P = &d->P;
    const char *why = d->errbuf[0] ? d->errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_HTTP_RETURNED_ERROR) {
        if (code == 404)
            pull_die(&d->made, "%s/%s was not found (HTTP 404 from %s): check the repository and the file name "
                               "(they are case-sensitive)", d->repo, d->file, d->url);
        if (code == 401 || code == 403)
            pull_die(&d->made, "%s/%s: access refused (HTTP %ld from %s): a private or gated repository (accept "
                               "its terms on huggingface.co and download the file yourself; llm pull sends no token)",
                               d->repo, d->file, code, d->url);
        pull_die(&d->made, "%s: HTTP %ld from the server", d->url, code);
    }
    if (rc == CURLE_WRITE_ERROR && P->overrun >= 0) {
        unlink(d->part);
        pull_die(&d->made, "%s: the server sent more than the %lld bytes it announced: the download was deleted; "
                           "try again", d->url, P->overrun);
    }
    if (rc == CURLE_WRITE_ERROR && P->write_errno)
        pull_die(&d->made, "cannot write '%s': %s (%lld bytes are there; llm pull again resumes)", d->part,
                           P->write_errno == EPROTO ? "the server sent another range than the one asked for"
                                                    : strerror(P->write_errno), P->offset);
    if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_PROXY)
        pull_die(&d->made, "cannot reach %s: %s (no network? LLM_HF_ENDPOINT chooses another server)", d->endpoint,
                           why);
    if (!transient(rc) || tries >= 100)
        pull_die(&d->made, "%s: %s (%lld bytes are in %s; llm pull again resumes)", d->url, why, P->offset, d->part);
}

// The transfer into the .part (fd): a transfer cut short is resumed from where it stopped, as
// long as each try brings bytes.
static void hf_transfer(struct hf_download *d, int fd) {
    struct pull *P = &d->P;
    CURLcode rc = CURLE_OK;
    for (int tries = 0, stalled = 0; stalled < 3; tries++) {
        struct stat ps;
        if (fstat(fd, &ps) != 0) pull_die(&d->made, "cannot read '%s': %s", d->part, strerror(errno));
        P->offset = P->start = (long long)ps.st_size;
        P->status = 0;
        P->write_errno = 0;
        P->t0 = cli_now();
        char range[48];
        snprintf(range, sizeof(range), "%lld-", P->start);
        curl_easy_setopt(d->h, CURLOPT_RANGE, P->start > 0 ? range : NULL);
        if (P->start > 0) fprintf(stderr, "llm: resuming at byte %lld\n", P->start);
        d->errbuf[0] = 0;
        rc = curl_easy_perform(d->h);
        long code = 0;
        curl_easy_getinfo(d->h, CURLINFO_RESPONSE_CODE, &code);
        if (P->tty && P->last_draw > 0) fputc('\n', stderr), P->last_draw = 0;
        if (rc == CURLE_OK) break;
        if (rc == CURLE_HTTP_RETURNED_ERROR && code == 416 && P->start > 0) {
            // the .part is no prefix of the file (longer: the file changed): start over
            if (ftruncate(fd, 0) != 0) pull_die(&d->made, "cannot write '%s': %s", d->part, strerror(errno));
            fprintf(stderr, "llm: the server refused to resume at byte %lld (HTTP 416): starting over\n", P->start);
            stalled++;
            continue;
        }
        hf_try_failed(d, rc, code, tries);
        stalled = P->offset > P->start ? 0 : stalled + 1;
        fprintf(stderr, "llm: the transfer stopped after %lld bytes (%s): resuming\n", P->offset,
                d->errbuf[0] ? d->errbuf : curl_easy_strerror(rc));
    }
    if (rc != CURLE_OK)
        pull_die(&d->made, "%s: the transfer keeps stopping with no progress (%lld bytes are in %s; llm pull again "
                           "resumes)", d->url, P->offset, d->part);
}

// The checks of the whole .part (it may hold bytes of earlier runs): its size, then its sha256
// when the server gave one. *size: the file's size; returns the sha256 checked, or NULL.
static const char *hf_verify(struct hf_download *d, int fd, long long *size) {
    const struct pull *P = &d->P;
    struct stat ps;
    if (fstat(fd, &ps) != 0) pull_die(&d->made, "cannot read '%s': %s", d->part, strerror(errno));
    long long total = pull_total(P);
    *size = (long long)ps.st_size;
    if ((total >= 0 && *size != total) || (P->linked_size >= 0 && *size != P->linked_size)) {
        unlink(d->part);
        pull_die(&d->made, "%s: %lld bytes arrived, the server announced %lld: the download was deleted; try again",
                           d->url, *size, P->linked_size >= 0 ? P->linked_size : total);
    }
    const char *want = etag_sha256(P->linked_etag, d->sum);
    if (!want) want = etag_sha256(P->etag, d->sum);
    if (!want) {
        fprintf(stderr, "llm: note: the server gave no sha256 for %s (only the size was checked)\n", d->file);
        return NULL;
    }
    if (P->tty) fprintf(stderr, "llm: checking the sha256\n");
    FILE *f = fopen(d->part, "rb");
    if (!f) pull_die(&d->made, "cannot read '%s': %s", d->part, strerror(errno));
    struct sha256 s;
    sha256_init(&s);
    uint8_t buf[1 << 16];
    size_t k;
    while ((k = fread(buf, 1, sizeof(buf), f)) > 0) sha256_update(&s, buf, k);
    if (ferror(f)) pull_die(&d->made, "cannot read '%s': %s", d->part, strerror(errno));
    fclose(f);
    char got[65];
    sha256_hex(&s, got);
    if (strcmp(got, want)) {
        unlink(d->part);
        pull_die(&d->made, "%s: the sha256 of the download is %s, the server's is %s: the file is damaged and was "
                           "deleted; try again", d->url, got, want);
    }
    return want;
}

// Downloads REPO/FILE into the cache unless it is there; returns its path (malloc'd).
static char *hf_pull(const char *repo, const char *file, bool quiet_if_cached) {
    hf_check_names(repo, file);
    char *path = hf_cache_path(repo, file);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        if (!quiet_if_cached) fprintf(stderr, "llm: %s/%s is in the cache\n", repo, file);
        return path;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) cli_die("cannot initialise libcurl");
    struct hf_download d = {.repo = repo, .file = file, .path = path, .h = curl_easy_init()};
    if (!d.h) cli_die("cannot initialise libcurl");
    d.endpoint = hf_endpoint();
    d.url = hf_url(d.h, d.endpoint, repo, file);
    d.part = str_printf("%s.part", path);
    int fd = hf_open_part(&d);

    d.P = (struct pull){.url = d.url, .part = d.part, .fd = fd, .linked_size = -1, .overrun = -1, .tty = isatty(2)};
    fprintf(stderr, "llm: downloading %s\n     into %s\n", d.url, path);
    hf_setopt(&d);
    hf_transfer(&d, fd);
    curl_easy_cleanup(d.h);

    long long size;
    const char *want = hf_verify(&d, fd, &size);
    if (rename(d.part, path) != 0) pull_die(&d.made, "cannot rename '%s' to '%s': %s", d.part, path, strerror(errno));
    close(fd);
    free(d.made.path);
    free(d.made.dirs);
    char sz[32];
    fprintf(stderr, "llm: %s/%s: %s%s\n", repo, file, cli_human_size((double)size, sz, sizeof(sz)),
            want ? ", sha256 checked" : "");
    free(d.url);
    free(d.part);
    return path;
}

// --- a repository's models: REPO[:QUANT] ---

enum { HF_API_MAX = 64 << 20 };   // the most bytes of the model API's answer that are read

static size_t on_api_body(char *data, size_t size, size_t nmemb, void *user) {
    struct cli_strbuf *b = user;
    size_t n = size * nmemb;
    if (n > HF_API_MAX - b->n) return 0;   // (the caller sees the answer's size)
    cli_sb_put(b, data, n);
    return n;
}

// GET ENDPOINT/api/models/REPO: the answer (malloc'd, *len bytes), or cli_die with what went wrong.
static char *hf_api_get(const char *repo, size_t *len) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) cli_die("cannot initialise libcurl");
    CURL *h = curl_easy_init();
    if (!h) cli_die("cannot initialise libcurl");
    const char *endpoint = hf_endpoint();
    int k = (int)strlen(endpoint);
    while (k > 0 && endpoint[k - 1] == '/') k--;
    char *url = str_printf("%.*s/api/models/%s", k, endpoint, repo);
    struct cli_strbuf body = {0};
    char errbuf[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(h, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "llm.c/" LLM_VERSION);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_api_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
    CURLcode rc = curl_easy_perform(h);
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    curl_easy_cleanup(h);
    const char *why = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_HTTP_RETURNED_ERROR && (code == 401 || code == 404))   // Hugging Face: 401 for both
        cli_die("%s: no such repository, or a private or gated one (HTTP %ld from %s): check the name, OWNER/NAME "
                "(e.g. unsloth/gemma-3-270m-it-GGUF); llm pull sends no token", repo, code, url);
    if (rc == CURLE_HTTP_RETURNED_ERROR && code == 403)
        cli_die("%s: access refused (HTTP 403 from %s): a gated repository (accept its terms on huggingface.co and "
                "download the file yourself; llm pull sends no token)", repo, url);
    if (rc == CURLE_HTTP_RETURNED_ERROR) cli_die("%s: HTTP %ld from the server", url, code);
    if (rc == CURLE_WRITE_ERROR) cli_die("%s: the answer is longer than %d MiB", url, HF_API_MAX >> 20);
    if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_PROXY)
        cli_die("cannot reach %s: %s (no network? LLM_HF_ENDPOINT chooses another server)", endpoint, why);
    if (rc != CURLE_OK) cli_die("%s: %s", url, why);
    free(url);
    *len = body.n;
    if (!body.p) cli_sb_put(&body, "", 0);
    return body.p;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The files of REPO, by its model API ({"siblings": [{"rfilename": "FILE"}, ...], ...}): *n paths
// (malloc'd, sorted); a name that cannot be a path in the cache is left out.
static char **hf_repo_files(const char *repo, int *n) {
    size_t len;
    char *body = hf_api_get(repo, &len);
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    free(body);
    json_t *sib = json_object_get(root, "siblings");
    if (!json_is_array(sib))
        cli_die("%s: the server's answer about it is not a model's description (a JSON object with a \"siblings\" "
                "list of files)", repo);
    size_t m = json_array_size(sib);
    char **files = calloc(m ? m : 1, sizeof(char *));
    if (!files) cli_die("out of memory");
    int k = 0;
    for (size_t i = 0; i < m; i++) {
        const char *name = json_string_value(json_object_get(json_array_get(sib, i), "rfilename"));
        if (!name || !hf_valid_file(name)) continue;
        if (!(files[k++] = strdup(name))) cli_die("out of memory");
    }
    json_decref(root);
    qsort(files, (size_t)k, sizeof(char *), cmp_str);
    *n = k;
    return files;
}

// A model among a repository's files: a GGUF file, or the first part of one split into count parts.
// stem: the length of its name without .gguf and without the part's -00001-of-0000N.
struct hf_model { const char *file; int count; size_t stem; };

// Whether file is a model (see hf_model); its description in *m.
static bool hf_model_of(const char *file, struct hf_model *m) {
    size_t n = strlen(file), prefix;
    if (n < 5 || strcasecmp(file + n - 5, ".gguf") != 0) return false;
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    for (const char *p = base; *p; p++)   // a projector (vision models) or an importance matrix
        if (!strncasecmp(p, "mmproj", 6) || !strncasecmp(p, "imatrix", 7)) return false;
    int index, count;
    if (!cli_gguf_split(file, &prefix, &index, &count)) index = count = 1, prefix = n - 5;
    if (index != 1) return false;
    *m = (struct hf_model){file, count, prefix};
    return true;
}

static bool hf_word_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

// Whether quant is in s[0..n) as a word of its own, in any case: neither a letter, a digit nor
// '_' on either side. Q4_K_M is in model-Q4_K_M and Q4_K_M/model, not in model-IQ4_K_M or
// model-Q4_K_M_L; Q4_K is not in model-Q4_K_M.
static bool hf_quant_in(const char *s, size_t n, const char *quant) {
    size_t q = strlen(quant);
    for (size_t i = 0; i + q <= n; i++)
        if (!strncasecmp(s + i, quant, q) && (i == 0 || !hf_word_char(s[i - 1])) &&
            (i + q == n || !hf_word_char(s[i + q])))
            return true;
    return false;
}

// The models of files[0..n) into ms (room for n); returns their number.
static int hf_models(char *const *files, int n, struct hf_model *ms) {
    int k = 0;
    for (int i = 0; i < n; i++) k += hf_model_of(files[i], &ms[k]);
    return k;
}

// The names of every part of model m (malloc'd, m->count of them), or NULL when one of them is not
// among files[0..n) (sorted). A file that is no split model: its name.
static char **hf_parts(char *const *files, int n, const struct hf_model *m) {
    char **parts = calloc((size_t)m->count, sizeof(char *));
    if (!parts) cli_die("out of memory");
    for (int i = 0; i < m->count; i++) {
        if (!(parts[i] = strdup(m->file))) cli_die("out of memory");
        if (m->count > 1) {   // PREFIX-0000i-of-0000N.gguf: the 5 digits after PREFIX-
            for (int v = i + 1, k = 5; k > 0; v /= 10) parts[i][m->stem + k--] = (char)('0' + v % 10);
        }
        if (!bsearch(&parts[i], files, (size_t)n, sizeof(char *), cmp_str)) {
            cli_strv_free(parts, m->count);
            return NULL;
        }
    }
    return parts;
}

// The models of ms whose names hold quant (hf_quant_in): their number; the first in *first.
static int hf_matches(const struct hf_model *ms, int n, const char *quant, int *first) {
    int c = 0;
    for (int i = n - 1; i >= 0; i--)
        if (hf_quant_in(ms[i].file, ms[i].stem, quant)) c++, *first = i;
    return c;
}

// The lines listing models (those holding quant, or all when it is NULL): the word at the end of
// each name (its quantization, most often: gemma-3-270m-it-Q4_K_M), the file, its parts.
static void hf_list_models(struct cli_strbuf *b, const struct hf_model *ms, int n, const char *quant) {
    for (int i = 0; i < n; i++) {
        if (quant && !hf_quant_in(ms[i].file, ms[i].stem, quant)) continue;
        size_t w = ms[i].stem;
        while (w > 0 && !strchr("-./", ms[i].file[w - 1])) w--;
        cli_sb_printf(b, "\n  %-10.*s %s", (int)(ms[i].stem - w), ms[i].file + w, ms[i].file);
        if (ms[i].count > 1) cli_sb_printf(b, " (%d parts)", ms[i].count);
    }
}

// The model of REPO that quant names (NULL: Q4_K_M, else Q8_0, else the only one) among ms[0..n):
// its index, or -1 with the reason and the models in *why.
static int hf_pick(const struct hf_model *ms, int n, const char *repo, const char *quant, struct cli_strbuf *why) {
    static const char *const defaults[] = {"Q4_K_M", "Q8_0"};
    if (n == 0) {
        cli_sb_printf(why, "%s has no GGUF model file (llm pull %s FILE downloads any file of it)", repo, repo);
        return -1;
    }
    const char *tag = quant;
    int first = -1, c = 0;
    for (int i = 0; i < (quant ? 1 : 2) && c == 0; i++) {
        tag = quant ? quant : defaults[i];
        c = hf_matches(ms, n, tag, &first);
    }
    if (c == 1) return first;
    if (!quant && c == 0 && n == 1) return 0;
    if (c > 1) {
        cli_sb_printf(why, "%d GGUF models of %s match '%s': give a QUANT that only one of them has, or the file (llm "
                      "pull %s FILE):", c, repo, tag, repo);
        hf_list_models(why, ms, n, tag);
    } else if (quant) {
        cli_sb_printf(why, "no GGUF model of %s has '%s' in its name; it has (llm pull %s:QUANT):", repo, quant, repo);
        hf_list_models(why, ms, n, NULL);
    } else {
        cli_sb_printf(why, "%s has %d GGUF models, none of them Q4_K_M or Q8_0: choose one, llm pull %s:QUANT:", repo,
                      n, repo);
        hf_list_models(why, ms, n, NULL);
    }
    return -1;
}

// REPO[:QUANT] (llm pull, hf://): every part of the model pulled; the path of the first
// (malloc'd). from_cache: a QUANT that names exactly one model of the cached files of REPO, every
// part of it there, is that model, asking no server.
static char *hf_pull_quant(const char *repo, const char *quant, bool from_cache) {
    hf_check_repo(repo);
    char *root = from_cache && quant ? cli_cache_root() : NULL, *path = NULL;
    if (root) {
        char *dir = str_printf("%s/%s", root, repo);
        int n;
        char **files = cli_cache_files(dir, &n, NULL);
        struct hf_model *ms = calloc((size_t)n + 1, sizeof(*ms));
        if (!ms) cli_die("out of memory");
        int nm = hf_models(files, n, ms), first = -1;
        char **parts = hf_matches(ms, nm, quant, &first) == 1 ? hf_parts(files, n, &ms[first]) : NULL;
        if (parts) path = str_printf("%s/%s", dir, parts[0]);
        if (parts) cli_strv_free(parts, ms[first].count);
        free(ms);
        cli_strv_free(files, n);
        free(dir);
        free(root);
        if (path) return path;
    }
    int n;
    char **files = hf_repo_files(repo, &n);
    struct hf_model *ms = calloc((size_t)n + 1, sizeof(*ms));
    if (!ms) cli_die("out of memory");
    int nm = hf_models(files, n, ms);
    struct cli_strbuf why = {0};
    int pick = hf_pick(ms, nm, repo, quant, &why);
    if (pick < 0) cli_die("%s", why.p);
    char **parts = hf_parts(files, n, &ms[pick]);
    if (!parts)
        cli_die("%s lists only some of the %d parts of %s: the model is incomplete there", repo, ms[pick].count,
                ms[pick].file);
    if (ms[pick].count > 1 && !from_cache)
        fprintf(stderr, "llm: %s is split into %d parts: pulling each\n", ms[pick].file, ms[pick].count);
    for (int i = 0; i < ms[pick].count; i++) {
        char *p = hf_pull(repo, parts[i], from_cache);
        if (i == 0) path = p;
        else free(p);
    }
    cli_strv_free(parts, ms[pick].count);
    free(ms);
    cli_strv_free(files, n);
    return path;
}

// OWNER/NAME[:QUANT]: the repository (malloc'd) and QUANT in *quant (NULL: none).
static char *hf_repo_quant(const char *spec, size_t len, const char **quant) {
    const char *colon = memchr(spec, ':', len);
    *quant = colon ? colon + 1 : NULL;
    if (colon) {
        size_t q = len - (size_t)(colon + 1 - spec);
        bool ok = q > 0 && q <= 64;
        for (size_t i = 0; ok && i < q; i++) ok = hf_word_char(colon[1 + i]) || colon[1 + i] == '-' ||
                                                  colon[1 + i] == '.';
        if (!ok)
            cli_die("'%.*s': REPO:QUANT's QUANT is a quantization type or a word of the file's name, of letters, "
                    "digits, '_', '-', '.' (e.g. unsloth/gemma-3-270m-it-GGUF:Q4_K_M)", (int)len, spec);
        len = (size_t)(colon - spec);
    }
    char *repo = malloc(len + 1);
    if (!repo) cli_die("out of memory");
    memcpy(repo, spec, len);
    repo[len] = 0;
    return repo;
}

int cli_cmd_pull(int argc, char **argv) {
    if (argc == 3 && (!strcmp(argv[2], "-h") || !strcmp(argv[2], "--help"))) {
        cli_print_command_help("pull");
        return 0;
    }
    char *path;
    if (argc == 3 && !strncmp(argv[2], "hf://", 5)) {
        path = cli_hf_model(argv[2]);
    } else if (argc == 3) {
        const char *quant;
        char *repo = hf_repo_quant(argv[2], strlen(argv[2]), &quant);
        path = hf_pull_quant(repo, quant, false);
        free(repo);
    } else if (argc == 4 && !strchr(argv[2], ':')) {
        path = hf_pull(argv[2], argv[3], false);
    } else {
        cli_die("usage: llm pull REPO[:QUANT] (e.g. llm pull unsloth/gemma-3-270m-it-GGUF:Q4_K_M), llm pull REPO "
                "FILE (e.g. llm pull unsloth/gemma-3-270m-it-GGUF gemma-3-270m-it-Q4_K_M.gguf), or llm pull "
                "hf://REPO[:QUANT] or hf://REPO/FILE");
    }
    printf("%s\n", path);   // for scripts: llm run -m "$(llm pull REPO:QUANT)"
    free(path);
    return 0;
}

char *cli_hf_model(const char *spec) {
    // hf://OWNER/NAME/FILE...: the repository is the first two names; hf://OWNER/NAME[:QUANT]
    const char *s = spec + 5, *a = strchr(s, '/'), *b = a ? strchr(a + 1, '/') : NULL;
    const char *colon = a ? strchr(a + 1, ':') : NULL;
    if (a && (colon ? !b || colon < b : !b)) {
        const char *quant;
        char *repo = hf_repo_quant(s, strlen(s), &quant);
        char *path = hf_pull_quant(repo, quant, true);
        free(repo);
        return path;
    }
    if (!b || !b[1])
        cli_die("'%s': a model on Hugging Face is hf://OWNER/NAME:QUANT (e.g. "
                "hf://unsloth/gemma-3-270m-it-GGUF:Q4_K_M) or hf://OWNER/NAME/FILE (e.g. "
                "hf://unsloth/gemma-3-270m-it-GGUF/gemma-3-270m-it-Q4_K_M.gguf)", spec);
    char *repo = malloc((size_t)(b - s) + 1);
    if (!repo) cli_die("out of memory");
    memcpy(repo, s, (size_t)(b - s));
    repo[b - s] = 0;
    char *path = hf_pull(repo, b + 1, true);
    free(repo);
    return path;
}
