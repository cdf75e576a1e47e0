// args.c — flags and what every command needs: dying with a message, numbers, files, the
// prompt, JSON output (Jansson), UTF-8 checks and escaped text, token texts, a clock.
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
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

// --- UTF-8 and escaped text ---

int cli_utf8_char(const char *s, size_t n) {
    const uint8_t *u = (const uint8_t *)s;
    if (n == 0) return 0;
    if (u[0] < 0x80) return 1;
    int len = u[0] >= 0xC2 && u[0] <= 0xDF ? 2 : u[0] >= 0xE0 && u[0] <= 0xEF ? 3 : u[0] >= 0xF0 && u[0] <= 0xF4 ? 4 : 0;
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
    if (context || reason == LLM_FINISH_LENGTH) cli_jset(obj, "length_limit", cli_json_cstr(context ? "context" : "max_tokens"));
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
    {"-ctk", "the KV cache type is --kv-cache-dtype f16|f32 here (K and V together)"},
    {"--cache-type-k", "the KV cache type is --kv-cache-dtype f16|f32 here (K and V together)"},
    {"-ctv", "the KV cache type is --kv-cache-dtype f16|f32 here (K and V together)"},
    {"--cache-type-v", "the KV cache type is --kv-cache-dtype f16|f32 here (K and V together)"},
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
    {"-hf", "a Hugging Face model is -m hf://REPO/FILE here (or llm pull REPO FILE)"},
    {"--hf-repo", "a Hugging Face model is -m hf://REPO/FILE here (or llm pull REPO FILE)"},
};

void cli_parse_args(int argc, char **argv, struct cli *c) {
    c->ep = llm_engine_params_default();
    c->sp = llm_sampling_params_default();
    c->n_predict = 64;
    c->n_gpu_layers = -1;
    if (!strcmp(argv[1], "serve")) {   // the server's defaults (vLLM's: prefix caching on)
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
        c->max_connections_per_ip = -1;
    }
    char name[64];
    const bool perplexity = !strcmp(argv[1], "perplexity");
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
#define CLI_ARG() (inline_val ? cli_take(&inline_val) : i + 1 < argc ? argv[++i] : (cli_die("%s needs a value", a), (char *)NULL))
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) c->ep.model_path = CLI_ARG();
        else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) c->ep.n_threads = (int)cli_parse_int(a, CLI_ARG(), 1, 512);
        else if (!strcmp(a, "-c") || !strcmp(a, "--max-model-len") || !strcmp(a, "--ctx-size")) {
            c->ep.max_model_len = (int)cli_parse_int(a, CLI_ARG(), 1, 1 << 24);
            c->ctx_set = true;
        }
        else if (!strcmp(a, "--block-size")) c->ep.block_size = (int)cli_parse_int(a, CLI_ARG(), 8, 32);
        else if (!strcmp(a, "--kv-cache-dtype")) {
            const char *v = CLI_ARG();
            if (!strcmp(v, "f16")) c->ep.kv_cache_dtype = LLM_KV_F16;
            else if (!strcmp(v, "f32")) c->ep.kv_cache_dtype = LLM_KV_F32;
            else cli_die("--kv-cache-dtype: f16 or f32, not '%s'", v);
        }
        else if (!strcmp(a, "--kv-cache-memory")) c->ep.kv_cache_bytes = (size_t)cli_parse_int(a, CLI_ARG(), 1, LLONG_MAX);
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) c->prompt = CLI_ARG();
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) c->prompt_file = CLI_ARG();
        else if (!strcmp(a, "--tokens")) c->tokens = CLI_ARG();
        else if (!strcmp(a, "--no-bos")) c->no_bos = true;
        else if (!strcmp(a, "--special")) c->special = true;
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict") || !strcmp(a, "--n-gen")) {
            c->n_predict = (int)cli_parse_int(a, CLI_ARG(), -1, 1 << 24);
            c->n_predict_set = true;
        }
        else if (!strcmp(a, "--n-prompt")) c->prompt = CLI_ARG();
        else if (!strcmp(a, "-r") || !strcmp(a, "--repetitions")) c->reps = (int)cli_parse_int(a, CLI_ARG(), 1, 1000);
        else if (!strcmp(a, "--ignore-eos")) c->ignore_eos = true;
        else if (!strcmp(a, "--temp")) c->sp.temperature = (float)cli_parse_float(a, CLI_ARG(), 0.0, 100.0);
        else if (!strcmp(a, "--top-k")) c->sp.top_k = (int)cli_parse_int(a, CLI_ARG(), 0, INT_MAX);
        else if (!strcmp(a, "--top-p")) c->sp.top_p = (float)cli_parse_float(a, CLI_ARG(), 0.0, 1.0);
        else if (!strcmp(a, "--min-p")) c->sp.min_p = (float)cli_parse_float(a, CLI_ARG(), 0.0, 1.0);
        else if (!strcmp(a, "--repeat-penalty")) c->sp.repeat_penalty = (float)cli_parse_float(a, CLI_ARG(), 1e-3, 100.0);
        else if (!strcmp(a, "--frequency-penalty")) c->sp.frequency_penalty = (float)cli_parse_float(a, CLI_ARG(), -100.0, 100.0);
        else if (!strcmp(a, "--presence-penalty")) c->sp.presence_penalty = (float)cli_parse_float(a, CLI_ARG(), -100.0, 100.0);
        else if (!strcmp(a, "--repeat-last-n")) c->sp.penalty_last_n = (int)cli_parse_int(a, CLI_ARG(), 0, 1 << 20);
        else if (!strcmp(a, "-s") || !strcmp(a, "--seed")) {
            long long v = cli_parse_int(a, CLI_ARG(), -1, LLONG_MAX);   // -1: random, as llama.cpp's
            c->seed_set = v >= 0;
            c->seed = c->sp.seed = v >= 0 ? (uint64_t)v : 0;
        }
        else if (!strcmp(a, "--stop")) {
            const char *s = CLI_ARG();
            if (!*s) cli_die("--stop: empty text");
            if (c->n_stops == (int)CLI_ARRAY_LEN(c->stops)) cli_die("--stop: at most %d", (int)CLI_ARRAY_LEN(c->stops));
            c->stops[c->n_stops++] = s;
        }
        else if (!strcmp(a, "--stop-token-ids"))
            c->n_stop_ids = cli_parse_id_list(a, CLI_ARG(), c->stop_ids, (int)CLI_ARRAY_LEN(c->stop_ids));
        else if (!strcmp(a, "--chat-template")) c->chat_template = CLI_ARG();
        else if (!strcmp(a, "-sys") || !strcmp(a, "--system") || !strcmp(a, "--system-prompt")) c->system = CLI_ARG();
        else if (!strcmp(a, "--json")) c->json = true;
        else if (!strcmp(a, "--ids")) c->ids = true;
        else if (!strcmp(a, "--tensors")) c->tensors = true;
        else if (!strcmp(a, "--backend")) {
            const char *v = CLI_ARG();
            if (!strcmp(v, "cpu")) c->ep.backend = LLM_BACKEND_CPU;
            else if (!strcmp(v, "vulkan")) c->ep.backend = LLM_BACKEND_VULKAN;
            else if (!strcmp(v, "cuda")) c->ep.backend = LLM_BACKEND_CUDA;
            else if (!strcmp(v, "auto")) c->ep.backend = LLM_BACKEND_AUTO;
            else cli_die("--backend: cpu, cuda, vulkan or auto, not '%s'", v);
        }
        else if (!strcmp(a, "--device")) c->ep.device = (int)cli_parse_int(a, CLI_ARG(), 0, 63);
        else if (!strcmp(a, "--max-num-seqs")) c->ep.max_num_seqs = (int)cli_parse_int(a, CLI_ARG(), 1, 65536);
        else if (!strcmp(a, "--max-num-batched-tokens")) c->ep.max_num_batched_tokens = (int)cli_parse_int(a, CLI_ARG(), 1, 65536);
        else if (!strcmp(a, "--enable-prefix-caching")) c->ep.enable_prefix_caching = 1;
        else if (!strcmp(a, "--no-enable-prefix-caching")) c->ep.enable_prefix_caching = 0;
        else if (!strcmp(a, "--speculative-ngram")) c->ep.speculative_ngram = 1;
        else if (!strcmp(a, "--speculative-model") || !strcmp(a, "-md") || !strcmp(a, "--model-draft"))
            c->ep.speculative_model = CLI_ARG();
        else if (!strcmp(a, "--num-speculative-tokens") || !strcmp(a, "--draft-max") || !strcmp(a, "--draft"))
            c->ep.num_speculative_tokens = (int)cli_parse_int(a, CLI_ARG(), 0, 16);
        else if (!strcmp(a, "--prompt-lookup-min")) c->ep.prompt_lookup_min = (int)cli_parse_int(a, CLI_ARG(), 1, 64);
        else if (!strcmp(a, "--prompt-lookup-max")) c->ep.prompt_lookup_max = (int)cli_parse_int(a, CLI_ARG(), 1, 64);
        else if (!strcmp(a, "--host")) c->host = CLI_ARG();
        else if (!strcmp(a, "--base-url")) { c->base_url = CLI_ARG(); c->serve = true; }
        else if (!strcmp(a, "--max-concurrency")) { c->max_concurrency = (int)cli_parse_int(a, CLI_ARG(), 1, 4096); c->serve = true; }
        else if (!strcmp(a, "--port")) c->port = (int)cli_parse_int(a, CLI_ARG(), 0, 65535);
        else if (!strcmp(a, "--api-key")) c->api_key = CLI_ARG();
        else if (!strcmp(a, "--served-model-name")) c->served_model_name = CLI_ARG();
        else if (!strcmp(a, "--max-queued-requests")) c->max_queued = (int)cli_parse_int(a, CLI_ARG(), 0, 1 << 20);
        else if (!strcmp(a, "--max-body-size")) c->max_body = cli_parse_int(a, CLI_ARG(), 1024, 1ll << 32);
        else if (!strcmp(a, "--timeout")) c->timeout_s = (int)cli_parse_int(a, CLI_ARG(), 1, 86400);
        else if (!strcmp(a, "--shutdown-timeout")) c->shutdown_timeout_s = (int)cli_parse_int(a, CLI_ARG(), 0, 86400);
        else if (!strcmp(a, "--max-connections")) c->max_connections = (int)cli_parse_int(a, CLI_ARG(), 1, 65536);
        else if (!strcmp(a, "--max-connections-per-ip")) c->max_connections_per_ip = (int)cli_parse_int(a, CLI_ARG(), 0, 65536);
        else if (!strcmp(a, "--header-timeout")) c->header_timeout_s = (int)cli_parse_int(a, CLI_ARG(), 1, 86400);
        else if (!strcmp(a, "--body-min-rate")) c->body_min_rate = cli_parse_int(a, CLI_ARG(), 0, 1ll << 40);
        else if (!strcmp(a, "--max-body-memory")) c->max_body_memory = cli_parse_int(a, CLI_ARG(), 1024, 1ll << 46);
        else if (!strcmp(a, "--no-mmap")) c->ep.no_mmap = 1;
        else if (!strcmp(a, "--quantize")) c->ep.quantize = CLI_ARG();
        else if (!strcmp(a, "--scheduling-policy")) {
            const char *v = CLI_ARG();
            if (!strcmp(v, "fcfs")) c->ep.scheduling_policy = LLM_SCHED_FCFS;
            else if (!strcmp(v, "priority")) c->ep.scheduling_policy = LLM_SCHED_PRIORITY;
            else cli_die("--scheduling-policy: fcfs or priority, not '%s'", v);
        }
        else if (!strcmp(a, "--gpu-memory-utilization")) c->ep.gpu_memory_utilization = (float)cli_parse_float(a, CLI_ARG(), 1e-4, 1.0);
        else if (!strcmp(a, "--requests")) c->requests = CLI_ARG();
        else if (!strcmp(a, "--num-prompts")) { c->num_prompts = (int)cli_parse_int(a, CLI_ARG(), 1, 1 << 20); c->serve = true; }
        else if (!strcmp(a, "--input-len")) { c->input_len = (int)cli_parse_int(a, CLI_ARG(), 1, 1 << 20); c->serve = true; }
        else if (!strcmp(a, "--output-len")) { c->output_len = (int)cli_parse_int(a, CLI_ARG(), 1, 1 << 20); c->serve = true; }
        else if (!strcmp(a, "--request-rate")) { c->request_rate = cli_parse_float(a, CLI_ARG(), 0.0, 1e9); c->serve = true; }
        else if (!strcmp(a, "--rag")) { c->rag = true; c->serve = true; }
        else if (!strcmp(a, "--context-len")) { c->context_len = (int)cli_parse_int(a, CLI_ARG(), 1, 1 << 20); c->serve = true; }
        else if (!strcmp(a, "--questions")) { c->questions = (int)cli_parse_int(a, CLI_ARG(), 1, 1 << 20); c->serve = true; }
        else if (!strcmp(a, "--logprobs")) c->logprobs = (int)cli_parse_int(a, CLI_ARG(), 0, 20);
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose")) c->verbose = true;
        else if (!strcmp(a, "--chunks")) c->chunks = (int)cli_parse_int(a, CLI_ARG(), 1, INT_MAX);
        else if (perplexity && (!strcmp(a, "-b") || !strcmp(a, "--batch-size"))) c->batch = (int)cli_parse_int(a, CLI_ARG(), 1, 1 << 24);
        else if (!strcmp(a, "--kl-divergence-base") || !strcmp(a, "--save-all-logits")) c->kld_base = CLI_ARG();
        else if (!strcmp(a, "--kl-divergence")) c->kl_divergence = true;
        else if (!strcmp(a, "-ngl") || !strcmp(a, "--n-gpu-layers") || !strcmp(a, "--gpu-layers"))
            c->n_gpu_layers = (int)cli_parse_int(a, CLI_ARG(), 0, INT_MAX);
        else if (!strcmp(a, "-fa") || !strcmp(a, "--flash-attn")) {
            c->flash_attn = true;   // llama.cpp's -fa takes an optional on, off or auto
            const char *v = inline_val ? cli_take(&inline_val) : NULL;
            if (!v && i + 1 < argc && (!strcmp(argv[i + 1], "on") || !strcmp(argv[i + 1], "off") || !strcmp(argv[i + 1], "auto")))
                v = argv[++i];
            if (v && strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "auto")) cli_die("%s: on, off or auto, not '%s'", a, v);
        }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(cli_usage, stdout); exit(0); }
        else {
            for (size_t k = 0; k < CLI_ARRAY_LEN(cli_foreign_flags); k++)
                if (!strcmp(a, cli_foreign_flags[k].flag))
                    cli_die("unknown option '%s': %s (see llm --help)", a, cli_foreign_flags[k].hint);
            cli_die("unknown option '%s' (see llm --help)", a);
        }
        if (inline_val) cli_die("%s takes no value (got '%s')", a, inline_val);
#undef CLI_ARG
    }
    if (!c->ep.model_path) cli_die("no model given: use -m FILE (see llm --help)");
    if (c->chat_template) {
        struct llm_chat_message m = {"user", "x"};
        if (llm_chat_apply(c->chat_template, &m, 1, 1, NULL, 0) < 0)
            cli_die("--chat-template: unknown template '%s' (chatml, llama3, llama2, mistral, zephyr, gemma, phi3, qwen3)", c->chat_template);
    }
}

// --- what the commands share ---

llm_engine *cli_engine(struct cli *c) {
    char err[512];
    c->ep.verbose = 1;   // progress while loading, on a terminal only
    llm_engine *E = llm_engine_create(&c->ep, err, sizeof(err));
    if (!E) cli_die("%s: %s", c->ep.model_path, err);
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
    fprintf(f, "%sspeculation: %lld of %lld drafts kept (%.1f%%), %.2f tokens per verification; kept by position:", indent,
            kept, prop, prop ? 100.0 * (double)kept / (double)prop : 0.0,
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
    cli_jset(o, "tokens_per_verification", cli_json_num(st->spec_verifications ? (double)st->spec_emitted / (double)st->spec_verifications : 0.0, 3));
    cli_jset(o, "draft_ms", cli_json_num(st->spec_draft_seconds * 1e3, 3));
    cli_jset(o, "verify_ms", cli_json_num(st->spec_verify_seconds * 1e3, 3));
    return o;
}
