// args.c — flags and what every command needs: dying with a message, numbers, files, the
// prompt, JSON output (Jansson), UTF-8 checks and escaped text, token texts, a clock.
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

// --- growing strings ---

// Room for `need` bytes in all.
static void cli_sb_reserve(struct cli_strbuf *b, size_t need) {
    if (need > b->cap) {
        size_t cap = CLI_MAX(b->cap * 2, need + 63);
        char *p = realloc(b->p, cap);
        if (!p) { fprintf(stderr, "llm: out of memory\n"); exit(1); }
        b->p = p;
        b->cap = cap;
    }
}

void cli_sb_put(struct cli_strbuf *b, const char *s, size_t n) {
    cli_sb_reserve(b, b->n + n + 1);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void cli_sb_printf(struct cli_strbuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n > 0) {
        cli_sb_reserve(b, b->n + (size_t)n + 1);
        vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap);
        b->n += (size_t)n;
    } else {
        cli_sb_put(b, "", 0);
    }
    va_end(ap);
}

// --- UTF-8 and escaped text ---

int cli_utf8_char(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    if (n == 0) return 0;
    if (u[0] < 0x80) return 1;
    int len = u[0] >= 0xC2 && u[0] <= 0xDF ? 2 : u[0] >= 0xE0 && u[0] <= 0xEF ? 3
            : u[0] >= 0xF0 && u[0] <= 0xF4 ? 4 : 0;
    if (len == 0 || n < (size_t)len) return 0;
    for (int i = 1; i < len; i++)
        if ((u[i] & 0xC0) != 0x80) return 0;
    // the second byte's range rules out overlong forms, surrogates and code points past U+10FFFF
    if ((u[0] == 0xE0 && u[1] < 0xA0) || (u[0] == 0xED && u[1] > 0x9F) || (u[0] == 0xF0 && u[1] < 0x90) ||
        (u[0] == 0xF4 && u[1] > 0x8F))
        return 0;
    return len;
}

size_t cli_utf8_check(const char *s, size_t n) {
    size_t i = 0;
    for (int l; i < n && (l = cli_utf8_char(s + i, n - i)) > 0;) i += (size_t)l;
    return i;
}

size_t cli_utf8_prefix(const char *s, size_t n, size_t max_chars) {
    size_t i = 0;
    for (size_t k = 0; i < n && k < max_chars; k++) {
        int l = cli_utf8_char(s + i, n - i);
        i += l > 0 ? (size_t)l : 1;
    }
    return i;
}

int cli_print_escaped(FILE *f, const char *s, size_t n, size_t max_chars) {
    size_t k = 0;
    for (size_t i = 0; i < n; k++) {
        if (max_chars && k == max_chars) return 1;
        uint8_t c = (uint8_t)s[i];
        int l = cli_utf8_char(s + i, n - i);
        if (l == 0) { fprintf(f, "\\x%02X", c); i++; continue; }
        if (l == 2 && c == 0xC2 && (uint8_t)s[i + 1] < 0xA0) {   // U+0080..U+009F: C1 controls
            fprintf(f, "\\u%04X", (unsigned)(uint8_t)s[i + 1]);
            i += 2;
            continue;
        }
        if (l > 1) { fwrite(s + i, 1, (size_t)l, f); i += (size_t)l; continue; }
        switch (c) {
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (c < 0x20 || c == 0x7F) fprintf(f, "\\x%02X", c);
            else fputc(c, f);
        }
        i++;
    }
    return 0;
}

// --- JSON (Jansson) ---

json_t *cli_jcheck(json_t *v) {
    if (!v) cli_die("out of memory");
    return v;
}

json_t *cli_json_bytes(const char *s, size_t n) {
    if (cli_utf8_check(s, n) == n) return cli_jcheck(json_stringn(s, n));
    struct cli_strbuf b = {0};
    cli_sb_put(&b, "", 0);
    for (size_t i = 0; i < n;) {
        int l = cli_utf8_char(s + i, n - i);
        if (l > 0) cli_sb_put(&b, s + i, (size_t)l);
        else cli_sb_put(&b, "\xEF\xBF\xBD", 3);   // U+FFFD
        i += l > 0 ? (size_t)l : 1;
    }
    json_t *v = cli_jcheck(json_stringn(b.p, b.n));
    free(b.p);
    return v;
}

json_t *cli_json_cstr(const char *s) {
    return s ? cli_json_bytes(s, strlen(s)) : cli_jcheck(json_null());
}

json_t *cli_json_num(double x, int decimals) {
    if (!isfinite(x)) return cli_jcheck(json_null());
    double scale = pow(10.0, decimals), r = round(x * scale) / scale;
    return cli_jcheck(json_real(isfinite(r) ? r : x));
}

json_t *cli_json_int(long long v) { return cli_jcheck(json_integer((json_int_t)v)); }

void cli_jset(json_t *obj, const char *key, json_t *v) {
    if (json_object_set_new(obj, key, v) != 0) cli_die("out of memory");
}

void cli_jpush(json_t *arr, json_t *v) {
    if (json_array_append_new(arr, v) != 0) cli_die("out of memory");
}

void cli_json_finish(json_t *obj, enum llm_finish_reason reason) {
    bool context = reason == LLM_FINISH_CONTEXT;
    cli_jset(obj, "finish_reason", cli_json_cstr(context ? "length" : llm_finish_reason_str(reason)));
    if (context || reason == LLM_FINISH_LENGTH)
        cli_jset(obj, "length_limit", cli_json_cstr(context ? "context" : "max_tokens"));
}

void cli_json_print(FILE *f, json_t *v) {
    // 15 significant digits: every number made by cli_json_num reads back as itself (17 would
    // print 0.1 rounded to 3 places as 0.10000000000000001)
    if (json_dumpf(v, f, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) != 0) cli_die("cannot write JSON");
    fputc('\n', f);
    json_decref(v);
}

void cli_json_str(FILE *f, const char *s, size_t n) {
    json_t *v = cli_json_bytes(s, n);
    if (json_dumpf(v, f, JSON_COMPACT | JSON_ENCODE_ANY) != 0) cli_die("cannot write JSON");
    json_decref(v);
}

int cli_token_text(llm_engine *E, int32_t token, struct cli_strbuf *b) {
    b->n = 0;
    cli_sb_put(b, "", 0);
    bool control = llm_token_is_control(E, token);
    for (;;) {
        int n = control ? llm_detokenize(E, &token, 1, LLM_DETOKENIZE_SPECIAL, b->p, b->cap)
                        : llm_token_to_piece(E, token, b->p, b->cap);
        if (n < 0) { b->n = 0; b->p[0] = 0; return -1; }
        if ((size_t)n < b->cap) { b->n = (size_t)n; b->p[n] = 0; return n; }
        cli_sb_reserve(b, (size_t)n + 1);   // room for the whole text, then ask again
    }
}

json_t *cli_json_logprobs(llm_engine *E, const struct llm_logprob *lp, int n_tok, int k) {
    struct cli_strbuf piece = {0};
    json_t *all = cli_jcheck(json_array());
    for (int t = 0; t < n_tok; t++) {
        json_t *pos = cli_jcheck(json_array());
        for (int j = 0; j < k; j++) {
            const struct llm_logprob *x = &lp[(size_t)t * (size_t)k + (size_t)j];
            json_t *e = cli_jcheck(json_object());
            size_t n = (size_t)CLI_MAX(cli_token_text(E, x->id, &piece), 0);
            cli_jset(e, "id", cli_json_int(x->id));
            cli_jset(e, "token", cli_json_bytes(piece.p, n));
            if (cli_utf8_check(piece.p, n) < n) {
                json_t *bytes = cli_jcheck(json_array());
                for (size_t i = 0; i < n; i++) cli_jpush(bytes, cli_json_int((unsigned char)piece.p[i]));
                cli_jset(e, "bytes", bytes);
            }
            cli_jset(e, "logprob", cli_json_num(x->logprob, 6));
            cli_jpush(pos, e);
        }
        cli_jpush(all, pos);
    }
    free(piece.p);
    return all;
}

// --- flags ---

// The value given after '=' (once: *v becomes NULL, so a flag without a value that got one is
// told apart).
static const char *cli_take(const char **v) {
    const char *s = *v;
    *v = NULL;
    return s;
}

void cli_die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("llm: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

long long cli_parse_int(const char *flag, const char *s, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi)
        cli_die("%s expects an integer in [%lld, %lld], got '%s'", flag, lo, hi, s ? s : "");
    return v;
}

double cli_parse_float(const char *flag, const char *s, double lo, double hi) {
    char *end;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !(v >= lo && v <= hi))
        cli_die("%s expects a number in [%g, %g], got '%s'", flag, lo, hi, s ? s : "");
    return v;
}

// "1 GiB", "16 MiB", else bytes: a limit in a message.
static const char *cli_size_text(size_t n, char buf[32]) {
    if (n >= (1u << 30) && n % (1u << 30) == 0) snprintf(buf, 32, "%zu GiB", n >> 30);
    else if (n >= (1u << 20) && n % (1u << 20) == 0) snprintf(buf, 32, "%zu MiB", n >> 20);
    else snprintf(buf, 32, "%zu bytes", n);
    return buf;
}

// At most max bytes of the rest of f (NUL-terminated, *len of them); *more: the stream goes on.
static char *cli_read_upto(FILE *f, const char *name, size_t max, size_t *len, bool *more) {
    struct cli_strbuf b = {0};
    char tmp[65536];
    size_t n;
    while (b.n < max && (n = fread(tmp, 1, CLI_MIN(sizeof(tmp), max - b.n), f)) > 0) cli_sb_put(&b, tmp, n);
    if (ferror(f)) cli_die("cannot read '%s': %s", name, strerror(errno));
    *more = b.n == max && getc(f) != EOF;
    if (!b.p) cli_sb_put(&b, "", 0);
    *len = b.n;
    return b.p;
}

// The end of a read that found more than max bytes: p (up to max bytes, 1 GiB for some) is freed
// rather than left for the exit to find.
__attribute__((noreturn))
static void cli_read_too_long(char *p, const char *name, size_t max) {
    char lim[32];
    free(p);
    cli_die("'%s' holds more than %s, the most llm reads from it", name, cli_size_text(max, lim));
}

char *cli_read_stream(FILE *f, const char *name, size_t max, size_t *len) {
    bool more;
    char *p = cli_read_upto(f, name, max, len, &more);
    if (more) cli_read_too_long(p, name, max);
    return p;
}

char *cli_read_file(const char *path, size_t max, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) cli_die("cannot open '%s': %s", path, strerror(errno));
    bool more;
    char *p = cli_read_upto(f, path, max, len, &more);
    fclose(f);
    if (more) cli_read_too_long(p, path, max);
    return p;
}

bool cli_gguf_split(const char *path, size_t *prefix_len, int *index, int *count) {
    // PREFIX "-" 5 digits "-of-" 5 digits ".gguf": 20 bytes after PREFIX
    size_t n = strlen(path);
    if (n <= 20 || strcasecmp(path + n - 5, ".gguf") != 0) return false;
    const char *s = path + n - 20;
    if (s[0] != '-' || strncmp(s + 6, "-of-", 4) != 0) return false;
    int v[2] = {0, 0};
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 5; i++) {
            char ch = s[k ? 10 + i : 1 + i];
            if (ch < '0' || ch > '9') return false;
            v[k] = v[k] * 10 + (ch - '0');
        }
    if (v[0] < 1 || v[0] > v[1]) return false;
    *prefix_len = n - 20;
    *index = v[0];
    *count = v[1];
    return true;
}

long long cli_getline(FILE *f, struct cli_strbuf *b, size_t max) {
    b->n = 0;
    cli_sb_put(b, "", 0);
    char tmp[4096];
    size_t k = 0;
    int ch;
    bool any = false, over = false;
    flockfile(f);
    while ((ch = getc_unlocked(f)) != EOF && ch != '\n') {
        any = true;
        if (b->n + k == max) { over = true; break; }
        tmp[k++] = (char)ch;
        if (k == sizeof(tmp)) { cli_sb_put(b, tmp, k); k = 0; }
    }
    funlockfile(f);
    cli_sb_put(b, tmp, k);
    if (over) return -2;
    return ch == EOF && !any ? -1 : (long long)b->n;
}

int cli_parse_id_list(const char *flag, const char *s, int32_t *ids, int cap) {
    int n = 0;
    for (const char *p = s;;) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX || n == cap) cli_die("%s: bad token id list '%s'", flag, s);
        ids[n++] = (int32_t)v;
        if (*end == 0) break;
        if (*end != ',') cli_die("%s: bad token id list '%s'", flag, s);
        p = end + 1;
    }
    return n;
}

// Flags of llama.cpp and vLLM that mean something else here, or are spelt otherwise: what to use.
static const struct { const char *flag, *hint; } cli_foreign_flags[] = {
    {"-b", "llama.cpp's batch size is --max-num-batched-tokens here"},
    {"--batch-size", "llama.cpp's batch size is --max-num-batched-tokens here"},
    {"-ub", "llama.cpp's micro-batch size is --max-num-batched-tokens here"},
    {"--ubatch-size", "llama.cpp's micro-batch size is --max-num-batched-tokens here"},
    {"-np", "llama.cpp's parallel sequences are --max-num-seqs here"},
    {"--parallel", "llama.cpp's parallel sequences are --max-num-seqs here"},
    {"-ctk", "the KV cache type is --kv-cache-dtype f16|f32|q8_0 here (K and V together)"},
    {"--cache-type-k", "the KV cache type is --kv-cache-dtype f16|f32|q8_0 here (K and V together)"},
    {"-ctv", "the KV cache type is --kv-cache-dtype f16|f32|q8_0 here (K and V together)"},
    {"--cache-type-v", "the KV cache type is --kv-cache-dtype f16|f32|q8_0 here (K and V together)"},
    {"-i", "a conversation is the llm chat command here"},
    {"--interactive", "a conversation is the llm chat command here"},
    {"-cnv", "a conversation is the llm chat command here"},
    {"--conversation", "a conversation is the llm chat command here"},
    {"--reverse-prompt", "text that stops generation is --stop TEXT here"},
    {"-mg", "the GPU is chosen with --backend cuda|vulkan --device N here"},
    {"--main-gpu", "the GPU is chosen with --backend cuda|vulkan --device N here"},
    {"--max-tokens", "the number of tokens to generate is -n N here"},
    {"--max-new-tokens", "the number of tokens to generate is -n N here"},
    {"--temperature", "the temperature is --temp T here"},
    {"-tp", "one device runs the model here (--device N chooses it)"},
    {"--tensor-parallel-size", "one device runs the model here (--device N chooses it)"},
    {"--dtype", "the weights compute in the GGUF file's types; --kv-cache-dtype sets the KV cache's"},
    {"--quantization", "the weights compute in the GGUF file's types (use a quantized GGUF file)"},
    {"--tokenizer", "the vocabulary comes from the GGUF file"},
    {"--enable-chunked-prefill", "chunked prefill is always on here (--max-num-batched-tokens sets the chunk)"},
    {"-hf", "a Hugging Face model is -m hf://REPO:QUANT here (or llm pull REPO:QUANT, then -m NAME)"},
    {"--hf-repo", "a Hugging Face model is -m hf://REPO:QUANT here (or llm pull REPO:QUANT, then -m NAME)"},
};

// The defaults every command starts from, and llm serve's own (vLLM's: prefix caching on).
static void cli_args_defaults(struct cli *c, const char *cmd) {
    c->ep = llm_engine_params_default();
    c->sp = llm_sampling_params_default();
    c->n_predict = 64;
    c->n_gpu_layers = -1;
    if (!strcmp(cmd, "serve")) {
        c->ep.enable_prefix_caching = 1;
        c->host = "127.0.0.1";
        c->port = 8080;
        c->max_queued = 1024;
        c->max_body = 16ll << 20;
        c->timeout_s = 60;
        c->shutdown_timeout_s = 10;
        c->max_connections = 512;
        c->header_timeout_s = 10;
        c->body_min_rate = 4096;
        c->max_body_memory = -1;
        c->ready_max_waiting = -1;
        c->max_connections_per_ip = -1;
    }
}

// The flags whose value is not a plain number or text: what they do with it.

static void cli_flag_kv_dtype(struct cli *c, const char *flag, const char *v) {
    if (!strcmp(v, "f16")) c->ep.kv_cache_dtype = LLM_KV_F16;
    else if (!strcmp(v, "f32")) c->ep.kv_cache_dtype = LLM_KV_F32;
    else if (!strcmp(v, "q8_0")) c->ep.kv_cache_dtype = LLM_KV_Q8_0;
    else cli_die("%s: f16, f32 or q8_0, not '%s'", flag, v);
}

static void cli_flag_backend(struct cli *c, const char *flag, const char *v) {
    if (!strcmp(v, "cpu")) c->ep.backend = LLM_BACKEND_CPU;
    else if (!strcmp(v, "vulkan")) c->ep.backend = LLM_BACKEND_VULKAN;
    else if (!strcmp(v, "cuda")) c->ep.backend = LLM_BACKEND_CUDA;
    else if (!strcmp(v, "auto")) c->ep.backend = LLM_BACKEND_AUTO;
    else cli_die("%s: cpu, cuda, vulkan or auto, not '%s'", flag, v);
}

static void cli_flag_sched(struct cli *c, const char *flag, const char *v) {
    if (!strcmp(v, "fcfs")) c->ep.scheduling_policy = LLM_SCHED_FCFS;
    else if (!strcmp(v, "priority")) c->ep.scheduling_policy = LLM_SCHED_PRIORITY;
    else cli_die("%s: fcfs or priority, not '%s'", flag, v);
}

static void cli_flag_log_format(struct cli *c, const char *flag, const char *v) {
    if (!strcmp(v, "text")) c->log_format = CLI_LOG_TEXT;
    else if (!strcmp(v, "json")) c->log_format = CLI_LOG_JSON;
    else cli_die("%s: text or json, not '%s'", flag, v);
}

// -1: a random seed, as llama.cpp's; the serving benchmark's prompts take it too.
static void cli_flag_seed(struct cli *c, const char *flag, const char *v) {
    long long s = cli_parse_int(flag, v, -1, LLONG_MAX);
    c->seed_set = s >= 0;
    c->seed = c->sp.seed = s >= 0 ? (uint64_t)s : 0;
}

static void cli_flag_stop(struct cli *c, const char *flag, const char *v) {
    if (!*v) cli_die("%s: empty text", flag);
    if (c->n_stops == (int)CLI_ARRAY_LEN(c->stops)) cli_die("%s: at most %d", flag, (int)CLI_ARRAY_LEN(c->stops));
    c->stops[c->n_stops++] = v;
}

static void cli_flag_stop_ids(struct cli *c, const char *flag, const char *v) {
    c->n_stop_ids = cli_parse_id_list(flag, v, c->stop_ids, (int)CLI_ARRAY_LEN(c->stop_ids));
}

// What a flag takes and what it sets (a row of cli_flags).
enum cli_flag_kind {
    CLI_FLAG_TRUE,     // no value: the bool becomes true
    CLI_FLAG_SET,      // no value: the int becomes lo
    CLI_FLAG_STR,      // the value, as it is
    CLI_FLAG_INT,      // an integer in [lo, hi] into an int, a long long or a size_t
    CLI_FLAG_LLONG,
    CLI_FLAG_SIZE,
    CLI_FLAG_FLOAT,    // a number in [flo, fhi] into a float or a double
    CLI_FLAG_DOUBLE,
    CLI_FLAG_FN,       // the value, to fn
    CLI_FLAG_ONOFF,    // llama.cpp's -fa: the bool becomes true; an optional on, off or auto
    CLI_FLAG_HELP,     // the usage text, exit 0
};
struct cli_flag {
    const char *names[3];
    enum cli_flag_kind kind;
    size_t off;              // the field it sets (offsetof struct cli)
    long long lo, hi;
    double flo, fhi;
    void (*fn)(struct cli *c, const char *flag, const char *v);
    size_t also;             // a bool it sets too (0: none; ep, which holds no bool, comes first)
    const char *only;        // the commands that have it, space-separated (NULL: every command)
};

// The offset of a field of struct cli, which must be of type T (else the build fails).
#define CLI_FIELD(field, T) _Generic(((struct cli *)0)->field, T: offsetof(struct cli, field))
#define CLI_TRUE(f) .kind = CLI_FLAG_TRUE, .off = CLI_FIELD(f, bool)
#define CLI_SET(f, v) .kind = CLI_FLAG_SET, .off = CLI_FIELD(f, int), .lo = (v)
#define CLI_STR(f) .kind = CLI_FLAG_STR, .off = CLI_FIELD(f, const char *)
#define CLI_INT(f, l, h) .kind = CLI_FLAG_INT, .off = CLI_FIELD(f, int), .lo = (l), .hi = (h)
#define CLI_LLONG(f, l, h) .kind = CLI_FLAG_LLONG, .off = CLI_FIELD(f, long long), .lo = (l), .hi = (h)
#define CLI_SIZE(f, l, h) .kind = CLI_FLAG_SIZE, .off = CLI_FIELD(f, size_t), .lo = (l), .hi = (h)
#define CLI_FLOAT(f, l, h) .kind = CLI_FLAG_FLOAT, .off = CLI_FIELD(f, float), .flo = (l), .fhi = (h)
#define CLI_DOUBLE(f, l, h) .kind = CLI_FLAG_DOUBLE, .off = CLI_FIELD(f, double), .flo = (l), .fhi = (h)
#define CLI_FN(f) .kind = CLI_FLAG_FN, .fn = (f)
#define CLI_ALSO(f) .also = CLI_FIELD(f, bool)
#define CLI_STRUCTURED_CMDS "run chat generate bench profile"

// Every flag of the commands that take struct cli (pull and quantize parse their own): its
// spellings, its value and the field it sets. Messages name the spelling that was given.
static const struct cli_flag cli_flags[] = {
    {{"-m", "--model"}, CLI_STR(ep.model_path)},
    {{"-t", "--threads"}, CLI_INT(ep.n_threads, 1, 512)},
    {{"-c", "--max-model-len", "--ctx-size"}, CLI_INT(ep.max_model_len, 1, 1 << 24), CLI_ALSO(ctx_set)},
    {{"--block-size"}, CLI_INT(ep.block_size, 8, 32)},
    {{"--kv-cache-dtype"}, CLI_FN(cli_flag_kv_dtype)},
    {{"--kv-cache-memory"}, CLI_SIZE(ep.kv_cache_bytes, 1, LLONG_MAX)},
    {{"-p", "--prompt"}, CLI_STR(prompt)},
    {{"-f", "--file"}, CLI_STR(prompt_file)},
    {{"--tokens"}, CLI_STR(tokens)},
    {{"--no-bos"}, CLI_TRUE(no_bos)},
    {{"--special"}, CLI_TRUE(special)},
    {{"-n", "--n-predict", "--n-gen"}, CLI_INT(n_predict, -1, 1 << 24), CLI_ALSO(n_predict_set)},
    {{"--n-prompt"}, CLI_STR(prompt)},
    {{"-r", "--repetitions"}, CLI_INT(reps, 1, 1000)},
    {{"--peak"}, CLI_TRUE(peak), .only = "bench"},
    {{"-d", "--n-depth"}, CLI_INT(depth, 0, 1 << 24), .only = "bench"},
    {{"--ignore-eos"}, CLI_TRUE(ignore_eos)},
    {{"--temp"}, CLI_FLOAT(sp.temperature, 0.0, 100.0)},
    {{"--top-k"}, CLI_INT(sp.top_k, 0, INT_MAX)},
    {{"--top-p"}, CLI_FLOAT(sp.top_p, 0.0, 1.0)},
    {{"--min-p"}, CLI_FLOAT(sp.min_p, 0.0, 1.0)},
    {{"--repeat-penalty"}, CLI_FLOAT(sp.repeat_penalty, 1e-3, 100.0)},
    {{"--frequency-penalty"}, CLI_FLOAT(sp.frequency_penalty, -100.0, 100.0)},
    {{"--presence-penalty"}, CLI_FLOAT(sp.presence_penalty, -100.0, 100.0)},
    {{"--repeat-last-n"}, CLI_INT(sp.penalty_last_n, 0, 1 << 20)},
    {{"-s", "--seed"}, CLI_FN(cli_flag_seed)},
    {{"--stop"}, CLI_FN(cli_flag_stop)},
    {{"--stop-token-ids"}, CLI_FN(cli_flag_stop_ids)},
    {{"--chat-template"}, CLI_STR(chat_template)},
    {{"-sys", "--system", "--system-prompt"}, CLI_STR(system)},
    {{"--json"}, CLI_TRUE(json)},
    {{"--ids"}, CLI_TRUE(ids)},
    {{"--tensors"}, CLI_TRUE(tensors)},
    {{"--backend"}, CLI_FN(cli_flag_backend)},
    {{"--device"}, CLI_INT(ep.device, 0, 63)},
    {{"--max-num-seqs"}, CLI_INT(ep.max_num_seqs, 1, 65536)},
    {{"--max-num-batched-tokens"}, CLI_INT(ep.max_num_batched_tokens, 1, 65536)},
    {{"--enable-prefix-caching"}, CLI_SET(ep.enable_prefix_caching, 1)},
    {{"--no-enable-prefix-caching"}, CLI_SET(ep.enable_prefix_caching, 0)},
    {{"--speculative-ngram"}, CLI_SET(ep.speculative_ngram, 1)},
    {{"--speculative-model", "-md", "--model-draft"}, CLI_STR(ep.speculative_model)},
    {{"--num-speculative-tokens", "--draft-max", "--draft"}, CLI_INT(ep.num_speculative_tokens, 0, 16)},
    {{"--prompt-lookup-min"}, CLI_INT(ep.prompt_lookup_min, 1, 64)},
    {{"--prompt-lookup-max"}, CLI_INT(ep.prompt_lookup_max, 1, 64)},
    {{"--host"}, CLI_STR(host)},
    {{"--base-url"}, CLI_STR(base_url), CLI_ALSO(serve)},
    {{"--max-concurrency"}, CLI_INT(max_concurrency, 1, 4096), CLI_ALSO(serve)},
    {{"--port"}, CLI_INT(port, 0, 65535)},
    {{"--api-key"}, CLI_STR(api_key)},
    {{"--served-model-name"}, CLI_STR(served_model_name)},
    {{"--max-queued-requests"}, CLI_INT(max_queued, 0, 1 << 20)},
    {{"--max-body-size"}, CLI_LLONG(max_body, 1024, 1ll << 32)},
    {{"--timeout"}, CLI_INT(timeout_s, 1, 86400)},
    {{"--shutdown-timeout"}, CLI_INT(shutdown_timeout_s, 0, 86400)},
    {{"--max-connections"}, CLI_INT(max_connections, 1, 65536)},
    {{"--max-connections-per-ip"}, CLI_INT(max_connections_per_ip, 0, 65536)},
    {{"--replica-id"}, CLI_STR(replica_id), .only = "serve"},
    {{"--ready-max-waiting"}, CLI_INT(ready_max_waiting, 1, 1 << 20), .only = "serve"},
    {{"--header-timeout"}, CLI_INT(header_timeout_s, 1, 86400)},
    {{"--body-min-rate"}, CLI_LLONG(body_min_rate, 0, 1ll << 40)},
    {{"--max-body-memory"}, CLI_LLONG(max_body_memory, 1024, 1ll << 46)},
    {{"--log-format"}, CLI_FN(cli_flag_log_format), .only = "serve"},
    {{"--quiet"}, CLI_TRUE(quiet), .only = "serve"},
    {{"--no-mmap"}, CLI_SET(ep.no_mmap, 1)},
    {{"--quantize"}, CLI_STR(ep.quantize)},
    {{"--scheduling-policy"}, CLI_FN(cli_flag_sched)},
    {{"--gpu-memory-utilization"}, CLI_FLOAT(ep.gpu_memory_utilization, 1e-4, 1.0)},
    {{"--requests"}, CLI_STR(requests)},
    {{"--num-prompts"}, CLI_INT(num_prompts, 1, 1 << 20), CLI_ALSO(serve)},
    {{"--input-len"}, CLI_INT(input_len, 1, 1 << 20), CLI_ALSO(serve)},
    {{"--output-len"}, CLI_INT(output_len, 1, 1 << 20), CLI_ALSO(serve)},
    {{"--request-rate"}, CLI_DOUBLE(request_rate, 0.0, 1e9), CLI_ALSO(serve)},
    {{"--rag"}, CLI_TRUE(rag), CLI_ALSO(serve)},
    {{"--context-len"}, CLI_INT(context_len, 1, 1 << 20), CLI_ALSO(serve)},
    {{"--questions"}, CLI_INT(questions, 1, 1 << 20), CLI_ALSO(serve)},
    {{"--logprobs"}, CLI_INT(logprobs, 0, 20)},
    // bench, profile: the serving benchmark's requests follow the grammar
    {{"--grammar", "--grammar-file"}, CLI_STR(grammar_file), CLI_ALSO(serve), .only = CLI_STRUCTURED_CMDS},
    {{"--json-schema"}, CLI_STR(json_schema_file), CLI_ALSO(serve), .only = CLI_STRUCTURED_CMDS},
    {{"--json-object"}, CLI_TRUE(json_object), CLI_ALSO(serve), .only = CLI_STRUCTURED_CMDS},
    {{"-v", "--verbose"}, CLI_TRUE(verbose)},
    {{"--chunks"}, CLI_INT(chunks, 1, INT_MAX)},
    {{"-b", "--batch-size"}, CLI_INT(batch, 1, 1 << 24), .only = "perplexity"},   // elsewhere: cli_foreign_flags
    {{"--kl-divergence-base", "--save-all-logits"}, CLI_STR(kld_base)},
    {{"--kl-divergence"}, CLI_TRUE(kl_divergence)},
    {{"-ngl", "--n-gpu-layers", "--gpu-layers"}, CLI_INT(n_gpu_layers, 0, INT_MAX)},
    {{"-fa", "--flash-attn"}, .kind = CLI_FLAG_ONOFF, .off = CLI_FIELD(flash_attn, bool)},
    {{"-h", "--help"}, .kind = CLI_FLAG_HELP},
};
#undef CLI_FIELD
#undef CLI_TRUE
#undef CLI_SET
#undef CLI_STR
#undef CLI_INT
#undef CLI_LLONG
#undef CLI_SIZE
#undef CLI_FLOAT
#undef CLI_DOUBLE
#undef CLI_FN
#undef CLI_STRUCTURED_CMDS
#undef CLI_ALSO

// Whether the space-separated words of list hold word.
static bool cli_word_in(const char *list, const char *word) {
    size_t n = strlen(word);
    for (const char *p = list; *p; p += strcspn(p, " "), p += *p == ' ')
        if (strcspn(p, " ") == n && !strncmp(p, word, n)) return true;
    return false;
}

// The row of flag a for command cmd, or cli_die: an unknown flag (with what to use instead when
// it is one of llama.cpp's or vLLM's).
static const struct cli_flag *cli_flag_find(const char *a, const char *cmd) {
    for (size_t k = 0; k < CLI_ARRAY_LEN(cli_flags); k++) {
        const struct cli_flag *f = &cli_flags[k];
        for (size_t j = 0; j < CLI_ARRAY_LEN(f->names) && f->names[j]; j++)
            if (!strcmp(a, f->names[j]) && (!f->only || cli_word_in(f->only, cmd))) return f;
    }
    for (size_t k = 0; k < CLI_ARRAY_LEN(cli_foreign_flags); k++)
        if (!strcmp(a, cli_foreign_flags[k].flag))
            cli_die("unknown option '%s': %s (see llm --help)", a, cli_foreign_flags[k].hint);
    cli_die("unknown option '%s' (see llm --help)", a);
}

// Sets what row f sets from value v (a: the flag as given, for messages).
static void cli_flag_apply(const struct cli_flag *f, struct cli *c, const char *a, const char *v) {
    char *field = (char *)c + f->off;
    switch (f->kind) {
    case CLI_FLAG_TRUE: *(bool *)field = true; break;
    case CLI_FLAG_SET: *(int *)field = (int)f->lo; break;
    case CLI_FLAG_STR: *(const char **)field = v; break;
    case CLI_FLAG_INT: *(int *)field = (int)cli_parse_int(a, v, f->lo, f->hi); break;
    case CLI_FLAG_LLONG: *(long long *)field = cli_parse_int(a, v, f->lo, f->hi); break;
    case CLI_FLAG_SIZE: *(size_t *)field = (size_t)cli_parse_int(a, v, f->lo, f->hi); break;
    case CLI_FLAG_FLOAT: *(float *)field = (float)cli_parse_float(a, v, f->flo, f->fhi); break;
    case CLI_FLAG_DOUBLE: *(double *)field = cli_parse_float(a, v, f->flo, f->fhi); break;
    case CLI_FLAG_FN: f->fn(c, a, v); break;
    case CLI_FLAG_ONOFF: case CLI_FLAG_HELP: break;
    }
    if (f->also) *(bool *)((char *)c + f->also) = true;
}

// The value of flag a (argv[*i]): the one after '=' (taken: *inline_val becomes NULL), else the
// next argument, else cli_die.
static const char *cli_flag_value(const char *a, const char **inline_val, int argc, char **argv, int *i) {
    if (*inline_val) return cli_take(inline_val);
    if (*i + 1 < argc) return argv[++*i];
    cli_die("%s needs a value", a);
}

// -fa / --flash-attn: llama.cpp's takes an optional on, off or auto (after '=', or the next
// argument when it is one of them); none of them changes anything here.
static void cli_flag_onoff(const struct cli_flag *f, struct cli *c, const char *a, const char **inline_val,
                           int argc, char **argv, int *i) {
    *(bool *)((char *)c + f->off) = true;
    const char *v = *inline_val ? cli_take(inline_val) : NULL;
    if (!v && *i + 1 < argc && (!strcmp(argv[*i + 1], "on") || !strcmp(argv[*i + 1], "off") ||
                                !strcmp(argv[*i + 1], "auto")))
        v = argv[++*i];
    if (v && strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto")) cli_die("%s: on, off or auto, not '%s'", a, v);
}

// A file of text for flag (a grammar, a schema): its bytes, NUL-terminated, with no NUL inside.
static char *cli_read_text(const char *flag, const char *path) {
    size_t len;
    char *text = cli_read_file(path, CLI_MAX_LINE, &len);
    if (!text) cli_die("out of memory");
    if (strlen(text) != len) cli_die("%s: '%s' holds a NUL byte: not a text", flag, path);
    return text;
}

// --grammar FILE, --json-schema FILE, --json-object: the grammar of the requests (c->grammar), a
// schema made one; cli_die when the file cannot be read, the grammar does not compile or the
// converter refuses the schema, before a model is loaded.
static void cli_structured(struct cli *c) {
    if (!!c->grammar_file + !!c->json_schema_file + c->json_object > 1)
        cli_die("give one of --grammar, --json-schema and --json-object");
    char err[1024];
    if (c->grammar_file) {
        c->grammar = cli_read_text("--grammar", c->grammar_file);
        if (llm_grammar_check(c->grammar, err, sizeof(err)) != LLM_OK)
            cli_die("--grammar %s: %s", c->grammar_file, err);
    } else if (c->json_schema_file || c->json_object) {
        char *schema = c->json_object ? NULL : cli_read_text("--json-schema", c->json_schema_file);
        c->grammar = cli_schema_grammar(schema ? schema : "{\"type\":\"object\"}", err, sizeof(err));
        if (!c->grammar) cli_die("%s%s: %s", schema ? "--json-schema " : "--json-object",
                                 schema ? c->json_schema_file : "", err);
        c->json_schema = schema;   // bench --base-url sends it
    }
}

// After the flags: a model was given, and the chat template (if any) is one llm knows.
static void cli_args_check(const struct cli *c) {
    if (!c->ep.model_path) cli_die("no model given: use -m FILE (see llm --help)");
    if (c->chat_template) {
        struct llm_chat_message m = {"user", "x"};
        if (llm_chat_apply(c->chat_template, &m, 1, 1, NULL, 0) < 0)
            cli_die("--chat-template: unknown template '%s' (chatml, llama3, llama2, mistral, zephyr, gemma, phi3, "
                    "qwen3, harmony)", c->chat_template);
    }
}

void cli_parse_args(int argc, char **argv, struct cli *c) {
    cli_args_defaults(c, argv[1]);
    char name[64];
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *inline_val = NULL;
        // --flag=value: the value after '=' (long flags only, as getopt_long)
        const char *eq = !strncmp(a, "--", 2) ? strchr(a, '=') : NULL;
        if (eq) {
            if ((size_t)(eq - a) >= sizeof(name)) cli_die("unknown option '%s' (see llm --help)", a);
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            a = name;
            inline_val = eq + 1;
        }
        const struct cli_flag *f = cli_flag_find(a, argv[1]);
        if (f->kind == CLI_FLAG_HELP) { cli_print_command_help(argv[1]); exit(0); }
        if (f->kind == CLI_FLAG_ONOFF) cli_flag_onoff(f, c, a, &inline_val, argc, argv, &i);
        else if (f->kind == CLI_FLAG_TRUE || f->kind == CLI_FLAG_SET) cli_flag_apply(f, c, a, NULL);
        else cli_flag_apply(f, c, a, cli_flag_value(a, &inline_val, argc, argv, &i));
        if (inline_val) cli_die("%s takes no value (got '%s')", a, inline_val);
    }
    cli_args_check(c);
    cli_structured(c);
}

// --- what the commands share ---

// Whether path is a well-formed GGUF file (its header reads).
static bool cli_gguf_readable(const char *path) {
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.load = LLM_LOAD_METADATA;
    char err[256];
    llm_engine *E = llm_engine_create(&p, err, sizeof(err));
    llm_engine_free(E);
    return E != NULL;
}

// After a model that did not load: when its file (or the draft model's) is a GGUF file named as a
// part of a split model (NAME-00001-of-00003.gguf), a note that the engine reads a model from one
// file ("" otherwise).
static const char *cli_split_note(const struct cli *c, char *buf, size_t cap) {
    const char *files[2] = {c->ep.model_path, c->ep.speculative_model};
    size_t prefix;
    int index, count;
    for (int i = 0; i < 2; i++)
        if (files[i] && cli_gguf_split(files[i], &prefix, &index, &count) && count > 1 && cli_gguf_readable(files[i])) {
            snprintf(buf, cap, " (the %sfile is part %d of a model split into %d files, and llm reads a model from "
                     "one file: merge them with llama-gguf-split --merge FIRST-PART OUT.gguf)",
                     i ? "draft model's " : "", index, count);
            return buf;
        }
    return "";
}

llm_engine *cli_engine(struct cli *c) {
    char err[512], note[1024];
    c->ep.verbose = 1;   // progress while loading, on a terminal only
    llm_engine *E = llm_engine_create(&c->ep, err, sizeof(err));
    if (!E) cli_die("%s: %s%s", c->ep.model_path, err, cli_split_note(c, note, sizeof(note)));
    struct llm_engine_info ei;
    struct llm_model_info mi;
    llm_get_engine_info(E, &ei);
    llm_get_model_info(E, &mi);
    if (c->ctx_set && mi.n_ctx_train > 0 && ei.max_model_len > mi.n_ctx_train)
        fprintf(stderr, "llm: warning: the context of %d tokens (-c) is longer than the %d the model was trained "
                        "with: text past %d tokens may be poor\n", ei.max_model_len, mi.n_ctx_train, mi.n_ctx_train);
    if (c->n_gpu_layers > 0 && ei.backend == LLM_BACKEND_CPU)
        fprintf(stderr, "llm: note: -ngl changes nothing here: the CPU backend runs every layer (--backend cuda "
                        "or vulkan runs the whole model on a GPU)\n");
    else if (c->n_gpu_layers == 0 && ei.backend != LLM_BACKEND_CPU)
        fprintf(stderr, "llm: note: -ngl 0 changes nothing here: the %s backend runs every layer (--backend cpu runs "
                        "the model on the CPU)\n", ei.backend_name);
    if (c->flash_attn)
        fprintf(stderr, "llm: note: -fa changes nothing here: attention is always computed by a flash-style kernel\n");
    return E;
}

int32_t *cli_prompt(llm_engine *E, const struct cli *c, int max_tokens, int *n_prompt) {
    int32_t *ids;
    if (c->tokens) {
        int cap = 1;
        for (const char *p = c->tokens; *p; p++) cap += *p == ',';
        if (!(ids = malloc((size_t)cap * sizeof(int32_t)))) cli_die("out of memory");
        *n_prompt = cli_parse_id_list("--tokens", c->tokens, ids, cap);
        return ids;
    }
    // the most bytes max_tokens tokens can stand for (a text needs at least len / max_token_bytes)
    struct llm_model_info mi;
    llm_get_model_info(E, &mi);
    size_t max = CLI_MAX_INPUT, len;
    if (max_tokens > 0 && mi.max_token_bytes > 0) max = CLI_MIN(max, (size_t)max_tokens * mi.max_token_bytes);
    char *text = NULL;
    bool more = false;
    if (c->prompt_file) {
        FILE *f = fopen(c->prompt_file, "rb");
        if (!f) cli_die("cannot open '%s': %s", c->prompt_file, strerror(errno));
        text = cli_read_upto(f, c->prompt_file, max, &len, &more);
        fclose(f);
    } else {
        text = strdup(c->prompt);
        len = strlen(c->prompt);
        more = len > max;
    }
    if (!text) cli_die("out of memory");
    if (more && max < CLI_MAX_INPUT) {
        free(text);
        cli_die("the prompt %s more than %zu bytes: more than the context of %d tokens (-c) can hold (a token of this "
                "vocabulary stands for at most %zu bytes)", c->prompt_file ? "file holds" : "has", max, max_tokens,
                mi.max_token_bytes);
    }
    if (more) cli_read_too_long(text, c->prompt_file ? c->prompt_file : "-p", max);
    int flags = (c->no_bos ? 0 : LLM_TOKENIZE_ADD_SPECIAL) | (c->special ? LLM_TOKENIZE_PARSE_SPECIAL : 0);
    int n = llm_tokenize(E, text, len, flags, NULL, 0);
    if (n < 0) cli_die("%s", llm_last_error(E));
    if (!(ids = malloc((size_t)CLI_MAX(n, 1) * sizeof(int32_t)))) cli_die("out of memory");
    if (llm_tokenize(E, text, len, flags, ids, n) != n) cli_die("tokenize failed: %s", llm_last_error(E));
    free(text);
    *n_prompt = n;
    return ids;
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// --- speculative decoding's statistics ---

bool cli_spec_used(const struct llm_engine_stats *st) { return st->spec_proposed[0] > 0; }

void cli_spec_print(FILE *f, const char *indent, const struct llm_engine_stats *st) {
    long long prop = 0, kept = 0;
    for (int i = 0; i < 16; i++) { prop += st->spec_proposed[i]; kept += st->spec_accepted[i]; }
    fprintf(f, "%sspeculation: %lld of %lld drafts kept (%.1f%%), %.2f tokens per verification; kept by position:",
            indent, kept, prop, prop ? 100.0 * (double)kept / (double)prop : 0.0,
            st->spec_verifications ? (double)st->spec_emitted / (double)st->spec_verifications : 0.0);
    for (int i = 0; i < 16 && st->spec_proposed[i]; i++)
        fprintf(f, " %.0f%%", 100.0 * (double)st->spec_accepted[i] / (double)st->spec_proposed[i]);
    fprintf(f, "; drafting %.1f ms, verifying %.1f ms\n", st->spec_draft_seconds * 1e3, st->spec_verify_seconds * 1e3);
}

json_t *cli_spec_json(const struct llm_engine_stats *st) {
    json_t *o = cli_jcheck(json_object()), *prop = cli_jcheck(json_array()), *kept = cli_jcheck(json_array());
    long long np = 0, nk = 0;
    for (int i = 0; i < 16 && st->spec_proposed[i]; i++) {
        cli_jpush(prop, cli_json_int(st->spec_proposed[i]));
        cli_jpush(kept, cli_json_int(st->spec_accepted[i]));
        np += st->spec_proposed[i];
        nk += st->spec_accepted[i];
    }
    cli_jset(o, "drafts", cli_json_int(np));
    cli_jset(o, "kept", cli_json_int(nk));
    cli_jset(o, "acceptance", cli_json_num(np ? (double)nk / (double)np : 0.0, 4));
    cli_jset(o, "proposed_by_position", prop);
    cli_jset(o, "kept_by_position", kept);
    cli_jset(o, "verifications", cli_json_int(st->spec_verifications));
    double per_verification = st->spec_verifications ? (double)st->spec_emitted / (double)st->spec_verifications : 0.0;
    cli_jset(o, "tokens_per_verification", cli_json_num(per_verification, 3));
    cli_jset(o, "draft_ms", cli_json_num(st->spec_draft_seconds * 1e3, 3));
    cli_jset(o, "verify_ms", cli_json_num(st->spec_verify_seconds * 1e3, 3));
    return o;
}
