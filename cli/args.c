// args.c — flags and what every command needs: dying with a message, numbers, files, the
// prompt, JSON strings, a clock.
#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// --- growing strings and JSON ---

void cli_sb_put(struct cli_strbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = CLI_MAX(b->cap * 2, b->n + n + 64);
        char *p = realloc(b->p, cap);
        if (!p) { fprintf(stderr, "llm: out of memory\n"); exit(1); }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void cli_json_str(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        uint8_t c = (uint8_t)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20 || c == 0x7F) fprintf(f, "\\u%04x", c);
            else fputc(c, f);
        }
    }
    fputc('"', f);
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

char *cli_read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) cli_die("cannot open '%s': %s", path, strerror(errno));
    struct cli_strbuf b = {0};
    char tmp[65536];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0) cli_sb_put(&b, tmp, n);
    if (ferror(f)) cli_die("cannot read '%s'", path);
    fclose(f);
    if (!b.p) cli_sb_put(&b, "", 0);
    *len = b.n;
    return b.p;
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
    {"-mg", "the GPU is chosen with --backend vulkan --device N here"},
    {"--main-gpu", "the GPU is chosen with --backend vulkan --device N here"},
    {"--max-tokens", "the number of tokens to generate is -n N here"},
    {"--max-new-tokens", "the number of tokens to generate is -n N here"},
    {"--temperature", "the temperature is --temp T here"},
    {"-tp", "one device runs the model here (--device N chooses it)"},
    {"--tensor-parallel-size", "one device runs the model here (--device N chooses it)"},
    {"--dtype", "the weights compute in the GGUF file's types; --kv-cache-dtype sets the KV cache's"},
    {"--quantization", "the weights compute in the GGUF file's types (use a quantized GGUF file)"},
    {"--tokenizer", "the vocabulary comes from the GGUF file"},
    {"--enable-chunked-prefill", "chunked prefill is always on here (--max-num-batched-tokens sets the chunk)"},
    {"-hf", "models are not downloaded here: download the GGUF file and give it with -m"},
    {"--hf-repo", "models are not downloaded here: download the GGUF file and give it with -m"},
};

void cli_parse_args(int argc, char **argv, struct cli *c) {
    c->ep = llm_engine_params_default();
    c->sp = llm_sampling_params_default();
    c->n_predict = 64;
    c->n_gpu_layers = -1;
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
        else if (!strcmp(a, "--backend")) {
            const char *v = CLI_ARG();
            if (!strcmp(v, "cpu")) c->ep.backend = LLM_BACKEND_CPU;
            else if (!strcmp(v, "vulkan")) c->ep.backend = LLM_BACKEND_VULKAN;
            else if (!strcmp(v, "auto")) c->ep.backend = LLM_BACKEND_AUTO;
            else cli_die("--backend: cpu, vulkan or auto, not '%s'", v);
        }
        else if (!strcmp(a, "--device")) c->ep.device = (int)cli_parse_int(a, CLI_ARG(), 0, 63);
        else if (!strcmp(a, "--max-num-seqs")) c->ep.max_num_seqs = (int)cli_parse_int(a, CLI_ARG(), 1, 65536);
        else if (!strcmp(a, "--max-num-batched-tokens")) c->ep.max_num_batched_tokens = (int)cli_parse_int(a, CLI_ARG(), 1, 65536);
        else if (!strcmp(a, "--enable-prefix-caching")) c->ep.enable_prefix_caching = 1;
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
            cli_die("--chat-template: unknown template '%s' (chatml, llama3, llama2, mistral, zephyr)", c->chat_template);
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
        fprintf(stderr, "llm: note: -ngl changes nothing here: the CPU backend runs every layer (--backend vulkan "
                        "runs the whole model on a GPU)\n");
    else if (c->n_gpu_layers == 0 && ei.backend != LLM_BACKEND_CPU)
        fprintf(stderr, "llm: note: -ngl 0 changes nothing here: the %s backend runs every layer (--backend cpu runs "
                        "the model on the CPU)\n", ei.backend_name);
    if (c->flash_attn)
        fprintf(stderr, "llm: note: -fa changes nothing here: attention is always computed by a flash-style kernel\n");
    return E;
}

int32_t *cli_prompt(llm_engine *E, const struct cli *c, int *n_prompt) {
    int32_t *ids;
    if (c->tokens) {
        int cap = 1;
        for (const char *p = c->tokens; *p; p++) cap += *p == ',';
        if (!(ids = malloc((size_t)cap * sizeof(int32_t)))) cli_die("out of memory");
        *n_prompt = cli_parse_id_list("--tokens", c->tokens, ids, cap);
        return ids;
    }
    size_t len;
    char *text = c->prompt_file ? cli_read_file(c->prompt_file, &len) : NULL;
    if (!text) { text = strdup(c->prompt); len = strlen(c->prompt); }
    if (!text) cli_die("out of memory");
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
