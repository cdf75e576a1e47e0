// info.c — llm info (a model file's metadata and tensors, even of a model this build cannot
// run; --devices: the GPUs), llm tokenize and llm detokenize.
#include "cli.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Tensors of one type in the file: how many, how many bytes.
struct cli_type_sum { int type; const char *name; long long count; size_t bytes; bool supported; };

static const char *cli_meta_type_name(enum llm_meta_type t) {
    switch (t) {
    case LLM_META_INT: return "int";
    case LLM_META_UINT: return "uint";
    case LLM_META_FLOAT: return "float";
    case LLM_META_BOOL: return "bool";
    case LLM_META_STRING: return "string";
    case LLM_META_ARRAY: return "array";
    }
    return "?";
}

// A float32 value (most GGUF floats are) as the shortest decimal that reads back as that float,
// so that 1e-5 stored as f32 prints as 1e-05, not 9.99999974737875e-06; a float64 is kept.
static double cli_float_shortest(double x) {
    if ((double)(float)x != x) return x;
    char buf[32];
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, sizeof(buf), "%.*g", prec, x);
        if ((double)strtof(buf, NULL) == x) return strtod(buf, NULL);
    }
    return x;
}

// A metadata value as JSON: numbers, booleans, strings in full; an array as its element type
// and length (a vocabulary is 100,000s of strings).
static json_t *cli_meta_json(const struct llm_meta *kv) {
    json_t *o;
    char num[32];
    switch (kv->type) {
    case LLM_META_INT: return cli_json_int((long long)kv->i);
    case LLM_META_UINT:
        if (kv->u <= (uint64_t)LLONG_MAX) return cli_json_int((long long)kv->u);
        snprintf(num, sizeof(num), "%" PRIu64, kv->u);   // beyond Jansson's integers: the digits
        return cli_json_cstr(num);
    case LLM_META_FLOAT:
        if (isfinite(kv->f)) return cli_jcheck(json_real(cli_float_shortest(kv->f)));
        return cli_json_cstr(isnan(kv->f) ? "nan" : kv->f > 0 ? "inf" : "-inf");   // JSON has no such numbers
    case LLM_META_BOOL: return cli_jcheck(json_boolean(kv->b));
    case LLM_META_STRING: return cli_json_bytes(kv->str, kv->str_len);
    case LLM_META_ARRAY:
        o = cli_jcheck(json_object());
        cli_jset(o, "type", cli_json_cstr(cli_meta_type_name(kv->elem_type)));
        cli_jset(o, "length", cli_json_int((long long)kv->n_elems));
        return o;
    }
    return cli_jcheck(json_null());
}

// A metadata value for people: strings escaped (a chat template is many lines; a model file must
// not be able to send escape sequences to the terminal) and cut after 120 characters.
static void cli_meta_print(const struct llm_meta *kv) {
    switch (kv->type) {
    case LLM_META_STRING:
        putchar('"');
        int cut = cli_print_escaped(stdout, kv->str, kv->str_len, 120);
        putchar('"');
        if (cut) printf("... (%zu bytes; --json prints it all)", kv->str_len);
        break;
    case LLM_META_ARRAY:
        printf("[%s x %llu]", cli_meta_type_name(kv->elem_type), (unsigned long long)kv->n_elems);
        break;
    case LLM_META_FLOAT: printf("%.15g", cli_float_shortest(kv->f)); break;
    case LLM_META_BOOL: printf("%s", kv->b ? "true" : "false"); break;
    case LLM_META_INT: printf("%lld", (long long)kv->i); break;
    case LLM_META_UINT: printf("%llu", (unsigned long long)kv->u); break;
    }
}

static void cli_print_str(const char *s) { cli_print_escaped(stdout, s, strlen(s), 0); }

// What llm info found: the file opened for its metadata (E), the engine that runs it (R, or NULL
// and why not), and its tensors summed per type.
struct cli_info {
    llm_engine *E, *R;
    struct llm_model_info mi;
    struct llm_engine_info ei;
    const char *why;           // why the model cannot run, or NULL
    char err[512];
    bool shape;                // the hyper-parameters could be read
    struct cli_type_sum *sum;  // n_types, in the order of the type numbers
    int n_types;
};

// Opens the file with LLM_LOAD_METADATA (any well-formed GGUF file), and when the model can run,
// the engine the flags make (context in use, tokens the KV cache holds).
static void cli_info_open(struct cli *c, struct cli_info *in) {
    struct llm_engine_params mp = c->ep;
    mp.load = LLM_LOAD_METADATA;
    mp.verbose = 0;
    in->E = llm_engine_create(&mp, in->err, sizeof(in->err));
    if (!in->E) cli_die("%s: %s", c->ep.model_path, in->err);
    memset(&in->ei, 0, sizeof(in->ei));
    llm_get_model_info(in->E, &in->mi);
    in->why = in->mi.unsupported;
    in->R = NULL;
    if (!in->why) {
        c->ep.verbose = 1;
        // a reason the metadata did not show
        if (!(in->R = llm_engine_create(&c->ep, in->err, sizeof(in->err)))) in->why = in->err;
        else llm_get_engine_info(in->R, &in->ei);
    }
    in->shape = in->mi.n_layer > 0;
}

// The tensor summary: count and bytes per type, in the order of the type numbers.
static void cli_info_sum_types(struct cli_info *in) {
    in->sum = calloc((size_t)CLI_MAX(in->mi.n_tensors, 1), sizeof(*in->sum));
    if (!in->sum) cli_die("out of memory");
    struct cli_type_sum *sum = in->sum;
    int n_types = 0;
    for (int64_t i = 0; i < in->mi.n_tensors; i++) {
        struct llm_tensor_info t;
        if (llm_model_tensor(in->E, i, &t) != LLM_OK) cli_die("%s", llm_last_error(in->E));
        int k = 0;
        while (k < n_types && sum[k].type < t.type) k++;
        if (k == n_types || sum[k].type != t.type) {
            memmove(&sum[k + 1], &sum[k], (size_t)(n_types - k) * sizeof(*sum));
            sum[k] = (struct cli_type_sum){t.type, t.type_name, 0, 0, t.supported != 0};
            n_types++;
        }
        sum[k].count++;
        sum[k].bytes += t.bytes;
    }
    in->n_types = n_types;
}

// info --json's "shape" (null when the hyper-parameters could not be read) and "context".
static void cli_info_json_shape(json_t *o, const struct cli_info *in) {
    const struct llm_model_info *mi = &in->mi;
    json_t *x;
    if (in->shape) {
        x = cli_jcheck(json_object());
        cli_jset(x, "n_layer", cli_json_int(mi->n_layer));
        cli_jset(x, "n_embd", cli_json_int(mi->n_embd));
        cli_jset(x, "n_head", cli_json_int(mi->n_head));
        cli_jset(x, "n_head_kv", cli_json_int(mi->n_head_kv));
        cli_jset(x, "head_dim", cli_json_int(mi->head_dim));
        cli_jset(x, "n_ff", cli_json_int(mi->n_ff));
        cli_jset(x, "n_vocab", cli_json_int(mi->n_vocab));
        if (mi->n_expert) {
            cli_jset(x, "n_expert", cli_json_int(mi->n_expert));
            cli_jset(x, "n_expert_used", cli_json_int(mi->n_expert_used));
            cli_jset(x, "n_ff_exp", cli_json_int(mi->n_ff_exp));
        }
    } else {
        x = cli_jcheck(json_null());
    }
    cli_jset(o, "shape", x);
    cli_jset(o, "parameters", cli_json_int(mi->n_params));
    cli_jset(o, "active_parameters", cli_json_int(mi->n_params_active));
    cli_jset(o, "weight_bytes", cli_json_int((long long)mi->weight_bytes));
    x = cli_jcheck(json_object());
    cli_jset(x, "trained", in->shape ? cli_json_int(mi->n_ctx_train) : cli_jcheck(json_null()));
    cli_jset(x, "in_use", in->R ? cli_json_int(in->ei.max_model_len) : cli_jcheck(json_null()));
    cli_jset(x, "kv_cache_tokens", in->R ? cli_json_int(in->ei.kv_tokens) : cli_jcheck(json_null()));
    cli_jset(o, "context", x);
}

// info --json's "metadata": every key with its value (arrays as {type, length}).
static json_t *cli_info_json_metadata(const struct cli_info *in) {
    json_t *x = cli_jcheck(json_object());
    for (int64_t i = 0; i < in->mi.n_metadata; i++) {
        struct llm_meta kv;
        if (llm_model_meta(in->E, i, &kv) != LLM_OK) cli_die("%s", llm_last_error(in->E));
        json_t *key = cli_json_cstr(kv.key);   // the key as UTF-8 (a bad byte becomes U+FFFD)
        cli_jset(x, json_string_value(key), cli_meta_json(&kv));
        json_decref(key);
    }
    return x;
}

// info --json's "tensors" (per type) and, with --tensors, "tensor_list" (every tensor).
static void cli_info_json_tensors(json_t *o, const struct cli *c, const struct cli_info *in) {
    json_t *x = cli_jcheck(json_object());
    for (int k = 0; k < in->n_types; k++) {
        json_t *t = cli_jcheck(json_object());
        cli_jset(t, "count", cli_json_int(in->sum[k].count));
        cli_jset(t, "bytes", cli_json_int((long long)in->sum[k].bytes));
        cli_jset(t, "supported", cli_jcheck(json_boolean(in->sum[k].supported)));
        cli_jset(x, in->sum[k].name, t);
    }
    cli_jset(o, "tensors", x);
    if (!c->tensors) return;
    x = cli_jcheck(json_array());
    for (int64_t i = 0; i < in->mi.n_tensors; i++) {
        struct llm_tensor_info t;
        if (llm_model_tensor(in->E, i, &t) != LLM_OK) cli_die("%s", llm_last_error(in->E));
        json_t *e = cli_jcheck(json_object()), *sh = cli_jcheck(json_array());
        cli_jset(e, "name", cli_json_cstr(t.name));
        cli_jset(e, "type", cli_json_cstr(t.type_name));
        for (int d = 0; d < t.n_dims; d++) cli_jpush(sh, cli_json_int(t.ne[d]));
        cli_jset(e, "shape", sh);
        cli_jset(e, "bytes", cli_json_int((long long)t.bytes));
        cli_jset(e, "supported", cli_jcheck(json_boolean(t.supported)));
        cli_jpush(x, e);
    }
    cli_jset(o, "tensor_list", x);
}

// llm info --json: one JSON object.
static void cli_info_json(const struct cli *c, const struct cli_info *in) {
    json_t *o = cli_jcheck(json_object());
    cli_jset(o, "file", cli_json_cstr(c->ep.model_path));
    cli_jset(o, "format", cli_json_cstr(in->mi.gguf_version ? "gguf" : "huggingface"));
    cli_jset(o, "gguf_version", cli_json_int(in->mi.gguf_version));
    cli_jset(o, "architecture", cli_json_cstr(in->mi.arch));
    cli_jset(o, "name", cli_json_cstr(in->mi.name));
    cli_info_json_shape(o, in);
    cli_jset(o, "unsupported", cli_json_cstr(in->why));
    cli_jset(o, "metadata", cli_info_json_metadata(in));
    cli_info_json_tensors(o, c, in);
    cli_json_print(stdout, o);
}

// llm info's first lines: file, architecture, parameters, shape, context, why it cannot run.
static void cli_info_print_summary(const struct cli *c, const struct cli_info *in) {
    const struct llm_model_info *mi = &in->mi;
    printf("file:          ");
    cli_print_str(c->ep.model_path);
    if (mi->gguf_version)
        printf(" (GGUF v%u, %lld tensors, %lld keys)\n", mi->gguf_version, (long long)mi->n_tensors,
               (long long)mi->n_metadata);
    else   // a Hugging Face directory: its keys are those a converter would write
        printf(" (Hugging Face directory, %lld tensors, %lld keys as GGUF)\n", (long long)mi->n_tensors,
               (long long)mi->n_metadata);
    printf("architecture:  ");
    cli_print_str(mi->arch[0] ? mi->arch : "(none)");
    if (mi->name[0]) { printf(", "); cli_print_str(mi->name); }
    printf("\nparameters:    %.3f B, %.2f GiB of weights", (double)mi->n_params / 1e9,
           (double)mi->weight_bytes / (1 << 30));
    if (mi->n_expert) printf("; %.3f B active (a token's experts)", (double)mi->n_params_active / 1e9);
    printf("\n");
    if (in->shape)
        printf("shape:         %d layers, embedding %d, %d heads (%d KV) of %d, FFN %d, vocabulary %d\n",
               mi->n_layer, mi->n_embd, mi->n_head, mi->n_head_kv, mi->head_dim, mi->n_ff, mi->n_vocab);
    if (in->shape && mi->n_expert)
        printf("experts:       %d a layer, %d a token, FFN %d each\n", mi->n_expert, mi->n_expert_used, mi->n_ff_exp);
    if (in->R)
        printf("context:       %d trained, %d in use; KV cache holds %d tokens\n", mi->n_ctx_train,
               in->ei.max_model_len, in->ei.kv_tokens);
    else if (in->shape)
        printf("context:       %d trained\n", mi->n_ctx_train);
    if (in->why) {
        printf("cannot run:    ");
        cli_print_str(in->why);
        printf("\n");
    }
}

// llm info's metadata (a key a line) and tensors (per type; with --tensors, every one).
static void cli_info_print_contents(const struct cli *c, const struct cli_info *in) {
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < in->mi.n_metadata; i++) {
        struct llm_meta kv;
        if (llm_model_meta(in->E, i, &kv) != LLM_OK) cli_die("%s", llm_last_error(in->E));
        printf("  ");
        size_t klen = strlen(kv.key);
        cli_print_escaped(stdout, kv.key, klen, 0);
        printf("%*s ", klen < 44 ? (int)(44 - klen) : 0, "");
        cli_meta_print(&kv);
        printf("\n");
    }
    printf("\ntensors:\n");
    for (int k = 0; k < in->n_types; k++)
        printf("  %-10s %5lld tensors %10.2f MiB%s\n", in->sum[k].name, in->sum[k].count,
               (double)in->sum[k].bytes / (1 << 20), in->sum[k].supported ? "" : "  (type not supported)");
    if (!c->tensors) return;
    printf("\n");
    for (int64_t i = 0; i < in->mi.n_tensors; i++) {
        struct llm_tensor_info t;
        if (llm_model_tensor(in->E, i, &t) != LLM_OK) cli_die("%s", llm_last_error(in->E));
        printf("  ");
        size_t nlen = strlen(t.name);
        cli_print_escaped(stdout, t.name, nlen, 0);
        printf("%*s %-10s [", nlen < 32 ? (int)(32 - nlen) : 0, "", t.type_name);
        for (int d = 0; d < t.n_dims; d++) printf("%s%lld", d ? ", " : "", (long long)t.ne[d]);
        printf("]%s\n", t.supported ? "" : "  (type not supported)");
    }
}

// llm info: a model's metadata and tensors, even when this build cannot run it (it says why).
int cli_cmd_info(struct cli *c) {
    struct cli_info in;
    cli_info_open(c, &in);
    cli_info_sum_types(&in);
    if (c->json) {
        cli_info_json(c, &in);
    } else {
        cli_info_print_summary(c, &in);
        cli_info_print_contents(c, &in);
    }
    free(in.sum);
    llm_engine_free(in.R);
    llm_engine_free(in.E);
    return 0;
}

// llm info --devices: the GPUs of the backends built into the library.
int cli_cmd_devices(void) {
    struct llm_device devs[16];
    char err[512];
    int n = llm_list_devices(devs, 16, err, sizeof(err));
    if (n < 0) cli_die("%s", err);
    if (!llm_has_backend(LLM_BACKEND_VULKAN) && !llm_has_backend(LLM_BACKEND_CUDA)) {
        printf("this build has no GPU backend (make CUDA=1 adds CUDA, make VULKAN=1 Vulkan); the CPU backend is "
               "always there\n");
        return 0;
    }
    for (int b = 0; b < 2; b++) {
        enum llm_backend_kind kind = b == 0 ? LLM_BACKEND_CUDA : LLM_BACKEND_VULKAN;
        if (!llm_has_backend(kind)) continue;
        printf("%s devices:\n", b == 0 ? "CUDA" : "Vulkan");
        int shown = 0;
        for (int i = 0; i < n && i < 16; i++) {
            const struct llm_device *d = &devs[i];
            if (d->backend != kind) continue;
            if (kind == LLM_BACKEND_CUDA)
                printf("  %d: %s, %.1f GiB, %d SMs, compute capability %s, driver %s\n", d->index, d->name,
                       (double)d->memory_bytes / (1 << 30), d->compute_units, d->compute_capability, d->api_version);
            else
                printf("  %d: %s (%s), %.1f GiB, subgroup size %d%s, 16-bit storage %s, Vulkan %s\n", d->index, d->name,
                       d->type, (double)d->memory_bytes / (1 << 30), d->subgroup_size,
                       d->subgroup_arithmetic ? " (arithmetic)" : "", d->storage_16bit ? "yes" : "no", d->api_version);
            shown++;
        }
        if (shown == 0) printf("  (none)\n");
    }
    return 0;
}

// llm tokenize: as llama.cpp's llama-tokenize prints them, one token a line, "id -> 'piece'"
// (the piece escaped: see cli_print_escaped; a control token's text in place of its empty
// piece); --ids: the ids on one line; --json: [{"id":..,"piece":".."}], where a piece that is
// not UTF-8 on its own (part of a character) has U+FFFD for its bytes and "bytes":[..] added.
int cli_cmd_tokenize(struct cli *c) {
    if (!!c->prompt + !!c->prompt_file != 1) cli_die("tokenize: give exactly one of -p or -f");
    c->ep.load = LLM_LOAD_VOCAB;
    llm_engine *E = cli_engine(c);
    int n = 0;
    int32_t *ids = cli_prompt(E, c, 0, &n);
    struct cli_strbuf piece = {0};
    if (c->ids && !c->json) {
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    } else if (c->json) {
        json_t *a = cli_jcheck(json_array());
        for (int i = 0; i < n; i++) {
            if (c->ids) { cli_jpush(a, cli_json_int(ids[i])); continue; }
            int len = cli_token_text(E, ids[i], &piece);
            if (len < 0) cli_die("%s", llm_last_error(E));
            json_t *o = cli_jcheck(json_object());
            cli_jset(o, "id", cli_json_int(ids[i]));
            cli_jset(o, "piece", cli_json_bytes(piece.p, (size_t)len));
            if (cli_utf8_check(piece.p, (size_t)len) < (size_t)len) {
                json_t *b = cli_jcheck(json_array());
                for (int k = 0; k < len; k++) cli_jpush(b, cli_json_int((uint8_t)piece.p[k]));
                cli_jset(o, "bytes", b);
            }
            cli_jpush(a, o);
        }
        cli_json_print(stdout, a);
    } else {
        for (int i = 0; i < n; i++) {
            int len = cli_token_text(E, ids[i], &piece);
            if (len < 0) cli_die("%s", llm_last_error(E));
            printf("%6d -> '", ids[i]);
            cli_print_escaped(stdout, piece.p, (size_t)len, 0);
            printf("'\n");
        }
    }
    free(piece.p);
    free(ids);
    llm_engine_free(E);
    return 0;
}

// Token ids from text: decimal numbers separated by spaces, newlines or commas, in brackets or
// not (what llm tokenize --ids and --json --ids print).
static int32_t *cli_read_ids(const char *s, const char *from, int *n) {
    int cap = 64;
    int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
    if (!ids) cli_die("out of memory");
    *n = 0;
    for (const char *p = s;;) {
        p += strspn(p, " \t\r\n,[]");
        if (!*p) break;
        size_t len = strcspn(p, " \t\r\n,[]");
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end != p + len || !(*p >= '0' && *p <= '9') || errno || v > INT32_MAX) {
            size_t show = cli_utf8_prefix(p, len, 20);
            fprintf(stderr, "llm: detokenize: %s: '", from);
            cli_print_escaped(stderr, p, show, 0);
            fprintf(stderr, "%s' is not a token id\n", show < len ? "..." : "");
            exit(1);
        }
        if (*n == cap && !(ids = realloc(ids, (size_t)(cap *= 2) * sizeof(int32_t)))) cli_die("out of memory");
        ids[(*n)++] = (int32_t)v;
        p += len;
    }
    return ids;
}

// llm detokenize: the text of token ids (--tokens, else standard input), as llm_detokenize
// writes it; --special: control tokens' text too.
int cli_cmd_detokenize(struct cli *c) {
    if (c->prompt || c->prompt_file) cli_die("detokenize: the ids come from --tokens or standard input, not -p or -f");
    c->ep.load = LLM_LOAD_VOCAB;
    int n = 0;
    int32_t *ids;
    if (c->tokens) {
        ids = cli_read_ids(c->tokens, "--tokens", &n);
    } else {
        size_t len;
        char *in = cli_read_stream(stdin, "standard input", CLI_MAX_INPUT, &len);
        if (strlen(in) != len) cli_die("detokenize: standard input holds a NUL byte, not token ids");
        ids = cli_read_ids(in, "standard input", &n);
        free(in);
    }
    llm_engine *E = cli_engine(c);
    int flags = c->special ? LLM_DETOKENIZE_SPECIAL : 0;
    int len = llm_detokenize(E, ids, n, flags, NULL, 0);
    if (len < 0) cli_die("%s", llm_last_error(E));
    char *text = malloc((size_t)len + 1);
    if (!text) cli_die("out of memory");
    if (llm_detokenize(E, ids, n, flags, text, (size_t)len + 1) != len) cli_die("%s", llm_last_error(E));
    if (c->json) {
        json_t *o = cli_jcheck(json_object());
        cli_jset(o, "text", cli_json_bytes(text, (size_t)len));
        cli_json_print(stdout, o);
    } else {
        fwrite(text, 1, (size_t)len, stdout);   // the bytes exactly; a newline only for a terminal
        if (isatty(1)) putchar('\n');
    }
    free(text);
    free(ids);
    llm_engine_free(E);
    return 0;
}
