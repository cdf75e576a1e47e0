// request.c — completion requests as JSON objects (RFC 8259, parsed by Jansson: strict numbers,
// integers apart from reals, UTF-8 checked, duplicate keys refused), for llm generate's request
// lines and llm serve's /v1/completions and /v1/chat/completions bodies: the fields of OpenAI's
// and vLLM's requests that the engine has, into llm_request_params and prompts.
//
// llm generate is strict: a field it does not know or cannot do makes the line an error line.
// llm serve, as vLLM and llama-server, ignores fields it does not know (clients send fields of
// newer API versions) and refuses those it knows and cannot do (logit_bias, ...) when they ask
// for something. Tools are tools.c's.
//
// Structured output, in both: OpenAI's response_format (text, json_object, json_schema) and
// llama-server's grammar (GBNF) and json_schema fields; a schema becomes a grammar
// (llm_json_schema_to_grammar), and the request's text follows it (llm_request_params.grammar).
#include "cli.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void cli_jreq_init(struct cli_jreq *q, enum cli_jreq_kind kind) {
    memset(q, 0, sizeof(*q));
    q->kind = kind;
    q->p = llm_request_params_default();
    q->n = 1;
}

void cli_jreq_free(struct cli_jreq *q) {
    json_decref(q->root);
    free(q->tokens);
    free(q->stop);
    free(q->stop_ids);
    free(q->err);
    for (int i = 0; i < q->n_prompts; i++) free(q->prompt_ids[i]);
    free(q->prompt_ids);
    free(q->prompts);
    free(q->chat_text);
    cli_tools_free(&q->tools);
    free(q->grammar_alloc);
}

// Records why the request cannot run (param: the field, or NULL); returns false. The message is
// never cut.
bool cli_jreq_fail_at(struct cli_jreq *q, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    free(q->err);
    if (n < 0 || !(q->err = malloc((size_t)n + 1))) cli_die("out of memory");
    va_start(ap, fmt);
    vsnprintf(q->err, (size_t)n + 1, fmt, ap);
    va_end(ap);
    q->err_param = param;
    return false;
}
#define cli_jreq_fail(q, key, ...) cli_jreq_fail_at(q, key, __VA_ARGS__)

// An integer field in [lo, hi] (reals, even 5.0, are not integers here).
static bool cli_jreq_int(struct cli_jreq *q, const char *key, json_t *v, long long lo, long long hi, long long *out) {
    if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi) {
        *out = json_integer_value(v);
        return true;
    }
    if (json_is_integer(v))
        return cli_jreq_fail(q, key, "%s: %lld is out of range [%lld, %lld]", key, (long long)json_integer_value(v),
                             lo, hi);
    if (json_is_real(v))
        return cli_jreq_fail(q, key, "%s: expected an integer in [%lld, %lld], got %g", key, lo, hi,
                             json_real_value(v));
    return cli_jreq_fail(q, key, "%s: expected an integer in [%lld, %lld]", key, lo, hi);
}

// A number field in [lo, hi]; open_lo: lo itself excluded.
static bool cli_jreq_num(struct cli_jreq *q, const char *key, json_t *v, double lo, double hi, bool open_lo,
                         float *out) {
    if (!json_is_number(v)) return cli_jreq_fail(q, key, "%s: expected a number", key);
    double x = json_number_value(v);
    if (!(open_lo ? x > lo : x >= lo) || !(x <= hi))
        return cli_jreq_fail(q, key, "%s: %g is out of range %c%g, %g]", key, x, open_lo ? '(' : '[', lo, hi);
    *out = (float)x;
    return true;
}

static bool cli_jreq_bool(struct cli_jreq *q, const char *key, json_t *v, bool *out) {
    if (!json_is_boolean(v)) return cli_jreq_fail(q, key, "%s: expected true or false", key);
    *out = json_is_true(v);
    return true;
}

// An array of token ids (integers in [0, INT32_MAX]) into a fresh array.
static bool cli_jreq_ids(struct cli_jreq *q, const char *key, json_t *v, int32_t **ids, int *n) {
    if (!json_is_array(v)) return cli_jreq_fail(q, key, "%s: expected an array of token ids", key);
    size_t len = json_array_size(v);
    if (len > INT_MAX / 2) return cli_jreq_fail(q, key, "%s: too many token ids", key);
    free(*ids);
    if (!(*ids = malloc(CLI_MAX(len, 1) * sizeof(int32_t)))) cli_die("out of memory");
    *n = (int)len;
    for (size_t i = 0; i < len; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > INT32_MAX)
            return cli_jreq_fail(q, key, "%s[%zu]: expected a token id (an integer in [0, %d])", key, i, INT32_MAX);
        (*ids)[i] = (int32_t)json_integer_value(x);
    }
    return true;
}

// A string that can be a C string: no NUL inside.
static bool cli_jreq_cstr(struct cli_jreq *q, const char *key, json_t *v, const char **out) {
    if (!json_is_string(v)) return cli_jreq_fail(q, key, "%s: expected a string", key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return cli_jreq_fail(q, key, "%s: contains \\u0000 (NUL), which it cannot hold", key);
    *out = json_string_value(v);
    return true;
}

// Fields of OpenAI's or vLLM's requests that llm generate cannot do; naming them in the error
// tells the user that the field was understood, and not applied.
static const char *const cli_jreq_unsupported[] = {
    "model", "suffix", "echo", "logit_bias", "user", "stream_options", "top_logprobs", "messages",
    "tools", "tool_choice", "min_tokens", "use_beam_search", "length_penalty",
    "include_stop_str_in_output", "skip_special_tokens", "spaces_between_special_tokens",
    "truncate_prompt_tokens", "allowed_token_ids", "bad_words", "prompt_logprobs", "guided_json",
    "guided_regex", "guided_choice", "guided_grammar", "max_completion_tokens",
};

// The most choices (n) a server request may ask for.
#define CLI_MAX_CHOICES 64

// /v1/completions' prompt: a string, an array of strings, an array of ids, or an array of arrays
// of ids; each one a prompt of its own.
static bool cli_jreq_prompts(struct cli_jreq *q, json_t *v) {
    size_t n = 1;
    bool many = json_is_array(v) && json_array_size(v) > 0 && !json_is_integer(json_array_get(v, 0));
    if (json_is_array(v) && json_array_size(v) == 0) return cli_jreq_fail(q, "prompt", "prompt: the array is empty");
    if (!json_is_string(v) && !json_is_array(v))
        return cli_jreq_fail(q, "prompt", "prompt: expected a string, an array of strings, an array of token ids or "
                             "an array of arrays of them");
    if (many) n = json_array_size(v);
    if (n > 1024) return cli_jreq_fail(q, "prompt", "prompt: %zu prompts, at most 1024 in one request", n);
    if (!(q->prompts = calloc(n, sizeof(*q->prompts))) || !(q->prompt_ids = calloc(n, sizeof(int32_t *))))
        cli_die("out of memory");
    q->n_prompts = (int)n;
    for (size_t i = 0; i < n; i++) {
        json_t *x = many ? json_array_get(v, i) : v;
        if (json_is_string(x)) {
            if (!cli_jreq_cstr(q, "prompt", x, &q->prompts[i].text)) return false;
        } else if (json_is_array(x) && (!many || json_array_size(x) > 0)) {
            if (!cli_jreq_ids(q, "prompt", x, &q->prompt_ids[i], &q->prompts[i].n_tokens)) return false;
            q->prompts[i].tokens = q->prompt_ids[i];
        } else {
            return cli_jreq_fail(q, "prompt", "prompt[%zu]: expected a string or a non-empty array of token ids", i);
        }
    }
    return true;
}

// /v1/chat/completions' messages, rendered with the chat template into q->chat_text.
static bool cli_jreq_messages(struct cli_jreq *q, json_t *v, const char *tmpl) {
    if (!json_is_array(v) || json_array_size(v) == 0)
        return cli_jreq_fail(q, "messages", "messages: expected a non-empty array of {\"role\", \"content\"} objects");
    size_t n = json_array_size(v);
    if (n > 100000) return cli_jreq_fail(q, "messages", "messages: %zu messages, at most 100000", n);
    struct llm_chat_message *m = calloc(n, sizeof(*m));
    char **parts = calloc(n, sizeof(char *));   // contents joined from text parts
    if (!m || !parts) cli_die("out of memory");
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++) {
        json_t *x = json_array_get(v, i), *role = json_object_get(x, "role"), *content = json_object_get(x, "content");
        if (!json_is_object(x)) { ok = cli_jreq_fail(q, "messages", "messages[%zu]: expected an object", i); break; }
        if (!json_is_string(role)) {
            ok = cli_jreq_fail(q, "messages", "messages[%zu].role: expected a string", i);
            break;
        }
        const char *r = json_string_value(role);
        if (!strcmp(r, "developer")) r = "system";   // OpenAI's newer name for the system message
        if (strcmp(r, "system") && strcmp(r, "user") && strcmp(r, "assistant") && strcmp(r, "tool")) {
            ok = cli_jreq_fail(q, "messages", "messages[%zu].role: '%.40s' is not supported (system, developer, user, "
                               "assistant, tool)", i, r);
            break;
        }
        m[i].role = r;
        if ((!content || json_is_null(content)) && strcmp(r, "assistant")) {
            ok = cli_jreq_fail(q, "messages", "messages[%zu].content: missing (only an assistant message may have "
                               "none)", i);
            break;
        }
        if (!content || json_is_null(content)) {
            m[i].content = "";
        } else if (json_is_string(content)) {
            ok = cli_jreq_cstr(q, "messages", content, &m[i].content);
        } else if (json_is_array(content)) {   // text parts, joined
            struct cli_strbuf b = {0};
            cli_sb_put(&b, "", 0);
            for (size_t k = 0; k < json_array_size(content) && ok; k++) {
                json_t *part = json_array_get(content, k), *type = json_object_get(part, "type");
                const char *text = NULL;
                if (!json_is_string(type) || strcmp(json_string_value(type), "text"))
                    ok = cli_jreq_fail(q, "messages", "messages[%zu].content[%zu]: only {\"type\": \"text\", "
                                       "\"text\": ...} parts are supported", i, k);
                else ok = cli_jreq_cstr(q, "messages", json_object_get(part, "text"), &text);
                if (ok) cli_sb_put(&b, text, strlen(text));
            }
            parts[i] = b.p;
            m[i].content = b.p;
        } else {
            ok = cli_jreq_fail(q, "messages", "messages[%zu].content: expected a string or an array of text parts", i);
        }
    }
    if (ok && cli_tools_involved(q, v)) {   // tools offered, tool results or calls: the family's format
        ok = cli_tools_render(q, v, m, (int)n, tmpl);
    } else if (ok) {
        int len = llm_chat_apply(tmpl, m, (int)n, 1, NULL, 0);
        if (len < 0) ok = cli_jreq_fail(q, "messages", "the chat template '%s' cannot render these messages", tmpl);
        else if (!(q->chat_text = malloc((size_t)len + 1))) cli_die("out of memory");
        else llm_chat_apply(tmpl, m, (int)n, 1, q->chat_text, (size_t)len + 1);
    }
    for (size_t i = 0; i < n; i++) free(parts[i]);
    free(parts);
    free(m);
    return ok;
}

// A field that asks for something the server cannot do, unless its value asks for nothing.
static bool cli_jreq_server_unsupported(struct cli_jreq *q, const char *key, json_t *v) {
    if (!strcmp(key, "tools") || !strcmp(key, "functions") || !strcmp(key, "logit_bias")) {
        if ((json_is_array(v) && json_array_size(v) == 0) || (json_is_object(v) && json_object_size(v) == 0))
            return true;
        return cli_jreq_fail(q, key, "%s: not supported by llm serve", key);
    }
    if (!strcmp(key, "tool_choice") || !strcmp(key, "function_call")) {
        if (json_is_string(v) && !strcmp(json_string_value(v), "none")) return true;
        return cli_jreq_fail(q, key, "%s: not supported by llm serve (no tools)", key);
    }
    if (!strcmp(key, "suffix") || !strcmp(key, "best_of") || !strcmp(key, "use_beam_search") ||
        !strcmp(key, "prompt_logprobs") || !strcmp(key, "guided_json") || !strcmp(key, "guided_regex") ||
        !strcmp(key, "guided_choice") || !strcmp(key, "guided_grammar")) {
        if (!strcmp(key, "best_of") && json_is_integer(v)) {   // best_of == n: what is done anyway (n read here:
            json_t *n = json_object_get(q->root, "n");              // it may come after best_of)
            if (json_integer_value(v) == (json_is_integer(n) ? json_integer_value(n) : 1)) return true;
        }
        if (!strcmp(key, "use_beam_search") && json_is_false(v)) return true;
        return cli_jreq_fail(q, key, "%s: not supported by llm serve", key);
    }
    return true;   // a field it does not know: ignored, as vLLM and llama-server do
}

// --- structured output: a grammar, or a JSON Schema made one ---

char *cli_schema_grammar(const char *schema, char *err, size_t size) {
    size_t cap = 4096;
    char *buf = malloc(cap);
    if (!buf) cli_die("out of memory");
    int n = llm_json_schema_to_grammar(schema, buf, cap, err, size);
    if (n >= 0 && (size_t)n >= cap) {   // it did not fit: again, with room for it
        char *big = realloc(buf, (size_t)n + 1);
        if (!big) cli_die("out of memory");
        buf = big;
        n = llm_json_schema_to_grammar(schema, buf, (size_t)n + 1, err, size);
    }
    if (n < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

// A field that asks for a grammar (grammar, json_schema, response_format other than text): one
// per request.
static bool cli_jreq_constraint(struct cli_jreq *q, const char *key) {
    if (q->grammar_param)
        return cli_jreq_fail(q, key, "%s: give one of grammar, json_schema and response_format (%s is given too)", key,
                             q->grammar_param);
    q->grammar_param = key;
    return true;
}

// llama-server's grammar: GBNF text.
static bool cli_jreq_read_grammar(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_cstr(q, key, v, &q->grammar_text) && cli_jreq_constraint(q, key);
}

// A JSON Schema at path (an object, or true / false).
static bool cli_jreq_schema(struct cli_jreq *q, const char *key, const char *path, json_t *v) {
    if (!json_is_object(v) && !json_is_boolean(v))
        return cli_jreq_fail(q, key, "%s: expected an object (a JSON Schema)", path);
    q->schema = v;
    q->schema_path = path;
    return cli_jreq_constraint(q, key);
}

// llama-server's json_schema: the schema itself.
static bool cli_jreq_read_json_schema(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_schema(q, key, key, v);
}

// OpenAI's response_format: {"type": "text"}; {"type": "json_object"} (any object; llama-server's
// "schema" beside it: that schema); {"type": "json_schema", "json_schema": {"name", "schema",
// "strict", "description"}}. The schema is enforced whatever "strict" says.
static bool cli_jreq_read_response_format(struct cli_jreq *q, const char *key, json_t *v) {
    json_t *t = json_object_get(v, "type");
    if (!json_is_object(v) || !json_is_string(t))
        return cli_jreq_fail(q, key, "response_format: expected {\"type\": \"text\"}, {\"type\": \"json_object\"} or "
                             "{\"type\": \"json_schema\", \"json_schema\": {\"name\": ..., \"schema\": {...}}}");
    const char *type = json_string_value(t);
    if (!strcmp(type, "text")) {
        q->format_text = true;
        return true;
    }
    if (!strcmp(type, "json_object")) {
        json_t *schema = json_object_get(v, "schema");
        if (schema && !json_is_null(schema)) return cli_jreq_schema(q, key, "response_format.schema", schema);
        return cli_jreq_constraint(q, key);   // q->schema NULL: any object
    }
    if (!strcmp(type, "json_schema")) {
        json_t *js = json_object_get(v, "json_schema"), *name = json_object_get(js, "name"),
               *strict = json_object_get(js, "strict"), *schema = json_object_get(js, "schema");
        if (!json_is_object(js))
            return cli_jreq_fail(q, key, "response_format.json_schema: expected an object {\"name\": ..., \"schema\": "
                                 "{...}, \"strict\": ...}");
        if (name && !json_is_null(name) && !json_is_string(name))
            return cli_jreq_fail(q, key, "response_format.json_schema.name: expected a string");
        if (strict && !json_is_null(strict) && !json_is_boolean(strict))
            return cli_jreq_fail(q, key, "response_format.json_schema.strict: expected true or false");
        if (!schema || json_is_null(schema))
            return cli_jreq_fail(q, key, "response_format.json_schema.schema: missing (the JSON Schema the output "
                                 "follows)");
        return cli_jreq_schema(q, key, "response_format.json_schema.schema", schema);
    }
    int len = (int)cli_utf8_prefix(type, strlen(type), 40);
    return cli_jreq_fail(q, key, "response_format.type: '%.*s%s' is not supported (text, json_object, json_schema)",
                         len, type, type[len] ? "..." : "");
}

// After the fields: the request's grammar from the one that asks for it, over the caller's
// default (which response_format text takes away). A grammar that does not compile, or a schema
// the converter refuses, refuses the request, naming the field.
static bool cli_jreq_structured(struct cli_jreq *q) {
    if (!q->grammar_param) {
        if (q->format_text) q->p.grammar = NULL;
        return true;
    }
    char err[1024];
    if (q->grammar_text) {
        if (llm_grammar_check(q->grammar_text, err, sizeof(err)) != LLM_OK)
            return cli_jreq_fail(q, q->grammar_param, "%.*s", (int)cli_utf8_check(err, strlen(err)), err);
        q->p.grammar = q->grammar_text;
        return true;
    }
    char *text = q->schema ? json_dumps(q->schema, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (q->schema && !text) cli_die("out of memory");
    q->grammar_alloc = cli_schema_grammar(text ? text : "{\"type\":\"object\"}", err, sizeof(err));
    free(text);
    if (!q->grammar_alloc) {
        const char *m = !strncmp(err, "json schema: ", 13) ? err + 13 : err;
        return cli_jreq_fail(q, q->grammar_param, "%s: %.*s", q->schema_path, (int)cli_utf8_check(m, strlen(m)), m);
    }
    q->p.grammar = q->grammar_alloc;
    return true;
}

// --- the fields: a table of those a request reads, with their readers ---

// An integer field in [lo, hi] into an int.
static bool cli_jreq_int_into(struct cli_jreq *q, const char *key, json_t *v, int lo, int hi, int *out) {
    long long i;
    if (!cli_jreq_int(q, key, v, lo, hi, &i)) return false;
    *out = (int)i;
    return true;
}

// llm generate's prompt: one text.
static bool cli_jreq_read_prompt(struct cli_jreq *q, const char *key, json_t *v) {
    if (!cli_jreq_cstr(q, key, v, &q->prompt)) return false;
    q->has_prompt = true;
    return true;
}

// /v1/completions' prompt: one or many.
static bool cli_jreq_read_prompts(struct cli_jreq *q, const char *key, json_t *v) {
    (void)key;
    return cli_jreq_prompts(q, v);
}

// llm generate's prompt as token ids.
static bool cli_jreq_read_tokens(struct cli_jreq *q, const char *key, json_t *v) {
    if (!cli_jreq_ids(q, key, v, &q->tokens, &q->n_tokens)) return false;
    if (q->n_tokens == 0) return cli_jreq_fail(q, key, "tokens: the array is empty");
    q->has_tokens = true;
    return true;
}

// max_tokens, or the chat's max_completion_tokens: OpenAI's newer name wins over max_tokens.
static bool cli_jreq_read_max_tokens(struct cli_jreq *q, const char *key, json_t *v) {
    long long i;
    if (!cli_jreq_int(q, key, v, 0, 1 << 24, &i)) return false;
    bool newer = !strcmp(key, "max_completion_tokens");
    if (newer || !q->max_completion_set) q->p.max_tokens = (int)i;
    q->max_completion_set |= newer;
    q->max_tokens_set = true;
    return true;
}

static bool cli_jreq_read_temperature(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_num(q, key, v, 0.0, 100.0, false, &q->p.sampling.temperature);
}

static bool cli_jreq_read_top_p(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_num(q, key, v, 0.0, 1.0, false, &q->p.sampling.top_p);
}

static bool cli_jreq_read_min_p(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_num(q, key, v, 0.0, 1.0, false, &q->p.sampling.min_p);
}

// top_k: -1 is off, as in vLLM (the engine's off is 0).
static bool cli_jreq_read_top_k(struct cli_jreq *q, const char *key, json_t *v) {
    long long i;
    if (!cli_jreq_int(q, key, v, -1, INT_MAX, &i)) return false;
    q->p.sampling.top_k = i < 0 ? 0 : (int)i;
    return true;
}

// seed: OpenAI's seeds may be negative (their bits are the seed); llm generate's may not.
static bool cli_jreq_read_seed(struct cli_jreq *q, const char *key, json_t *v) {
    long long i;
    if (!cli_jreq_int(q, key, v, q->kind == CLI_JREQ_GENERATE ? 0 : LLONG_MIN, LLONG_MAX, &i)) return false;
    q->p.sampling.seed = (uint64_t)i;
    q->seed_set = true;
    return true;
}

// num_speculative_tokens: -1 is none for this request.
static bool cli_jreq_read_speculative(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_int_into(q, key, v, -1, 16, &q->p.num_speculative_tokens);
}

static bool cli_jreq_read_priority(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_int_into(q, key, v, INT_MIN, INT_MAX, &q->p.priority);
}

static bool cli_jreq_read_repetition(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_num(q, key, v, 0.0, 100.0, true, &q->p.sampling.repeat_penalty);
}

static bool cli_jreq_read_presence(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_num(q, key, v, -2.0, 2.0, false, &q->p.sampling.presence_penalty);
}

static bool cli_jreq_read_frequency(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_num(q, key, v, -2.0, 2.0, false, &q->p.sampling.frequency_penalty);
}

// The chat's logprobs: true or false, with top_logprobs.
static bool cli_jreq_read_chat_logprobs(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_bool(q, key, v, &q->chat_logprobs);
}

static bool cli_jreq_read_top_logprobs(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_int_into(q, key, v, 0, 20, &q->top_logprobs);
}

// The completions' (and llm generate's) logprobs: how many of the most likely tokens.
static bool cli_jreq_read_logprobs(struct cli_jreq *q, const char *key, json_t *v) {
    if (!cli_jreq_int_into(q, key, v, 0, 20, &q->p.logprobs)) return false;
    q->logprobs_set = true;
    return true;
}

static bool cli_jreq_read_ignore_eos(struct cli_jreq *q, const char *key, json_t *v) {
    bool b = false;
    if (!cli_jreq_bool(q, key, v, &b)) return false;
    q->p.ignore_eos = b;
    return true;
}

// stop: a string or an array of strings, as in OpenAI's API.
static bool cli_jreq_read_stop(struct cli_jreq *q, const char *key, json_t *v) {
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    if (!json_is_array(v) && !json_is_string(v))
        return cli_jreq_fail(q, key, "stop: expected a string or an array of strings");
    free(q->stop);
    if (n > 1024) return cli_jreq_fail(q, key, "stop: %zu stop strings, at most 1024", n);
    if (!(q->stop = malloc(CLI_MAX(n, 1) * sizeof(char *)))) cli_die("out of memory");
    q->n_stop = (int)n;
    for (size_t k = 0; k < n; k++) {
        json_t *s = json_is_array(v) ? json_array_get(v, k) : v;
        if (!cli_jreq_cstr(q, "stop", s, &q->stop[k])) return false;
        if (!q->stop[k][0]) return cli_jreq_fail(q, key, "stop: an empty stop string");
    }
    return true;
}

static bool cli_jreq_read_stop_ids(struct cli_jreq *q, const char *key, json_t *v) {
    int n = 0;
    if (!cli_jreq_ids(q, key, v, &q->stop_ids, &n)) return false;
    q->p.n_stop_token_ids = n;
    return true;
}

// llm generate's n and best_of: one sequence per request.
static bool cli_jreq_read_only_one(struct cli_jreq *q, const char *key, json_t *v) {
    if (!json_is_integer(v) || json_integer_value(v) != 1) return cli_jreq_fail(q, key, "%s: only 1 is supported", key);
    return true;
}

// llm generate's stream: it prints whole results.
static bool cli_jreq_read_no_stream(struct cli_jreq *q, const char *key, json_t *v) {
    if (!json_is_false(v))
        return cli_jreq_fail(q, key, "stream: only false is supported (llm generate prints whole results)");
    return true;
}

// The server's n: choices per prompt.
static bool cli_jreq_read_n(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_int_into(q, key, v, 1, CLI_MAX_CHOICES, &q->n);
}

static bool cli_jreq_read_stream(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_bool(q, key, v, &q->stream);
}

static bool cli_jreq_read_stream_options(struct cli_jreq *q, const char *key, json_t *v) {
    json_t *u = json_object_get(v, "include_usage");
    if (!json_is_object(v)) return cli_jreq_fail(q, key, "stream_options: expected an object");
    if (u && !json_is_null(u) && !cli_jreq_bool(q, "stream_options", u, &q->include_usage)) return false;
    return true;
}

static bool cli_jreq_read_echo(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_bool(q, key, v, &q->echo);
}

static bool cli_jreq_read_model(struct cli_jreq *q, const char *key, json_t *v) {
    return cli_jreq_cstr(q, key, v, &q->model);
}

// The chat's messages: rendered once every field is read (tools may come after them).
static bool cli_jreq_read_messages(struct cli_jreq *q, const char *key, json_t *v) {
    (void)key;
    q->messages = v;
    return true;
}

// The kinds of request a field is read in: bits of enum cli_jreq_kind.
#define CLI_JREQ_K_GEN (1u << CLI_JREQ_GENERATE)
#define CLI_JREQ_K_CMPL (1u << CLI_JREQ_COMPLETION)
#define CLI_JREQ_K_CHAT (1u << CLI_JREQ_CHAT)
#define CLI_JREQ_K_SERVER (CLI_JREQ_K_CMPL | CLI_JREQ_K_CHAT)
#define CLI_JREQ_K_ALL (CLI_JREQ_K_GEN | CLI_JREQ_K_SERVER)

// The fields each kind of request reads. A key appears once per kind.
static const struct cli_jreq_field_def {
    const char *key;
    unsigned kinds;
    bool (*read)(struct cli_jreq *q, const char *key, json_t *v);
} cli_jreq_fields[] = {
    {"prompt", CLI_JREQ_K_GEN, cli_jreq_read_prompt},
    {"prompt", CLI_JREQ_K_CMPL, cli_jreq_read_prompts},
    {"tokens", CLI_JREQ_K_GEN, cli_jreq_read_tokens},
    {"max_tokens", CLI_JREQ_K_ALL, cli_jreq_read_max_tokens},
    {"max_completion_tokens", CLI_JREQ_K_CHAT, cli_jreq_read_max_tokens},
    {"temperature", CLI_JREQ_K_ALL, cli_jreq_read_temperature},
    {"top_p", CLI_JREQ_K_ALL, cli_jreq_read_top_p},
    {"min_p", CLI_JREQ_K_ALL, cli_jreq_read_min_p},
    {"top_k", CLI_JREQ_K_ALL, cli_jreq_read_top_k},
    {"seed", CLI_JREQ_K_ALL, cli_jreq_read_seed},
    {"num_speculative_tokens", CLI_JREQ_K_ALL, cli_jreq_read_speculative},
    {"priority", CLI_JREQ_K_ALL, cli_jreq_read_priority},
    {"repetition_penalty", CLI_JREQ_K_ALL, cli_jreq_read_repetition},
    {"presence_penalty", CLI_JREQ_K_ALL, cli_jreq_read_presence},
    {"frequency_penalty", CLI_JREQ_K_ALL, cli_jreq_read_frequency},
    {"logprobs", CLI_JREQ_K_CHAT, cli_jreq_read_chat_logprobs},
    {"top_logprobs", CLI_JREQ_K_CHAT, cli_jreq_read_top_logprobs},
    {"logprobs", CLI_JREQ_K_GEN | CLI_JREQ_K_CMPL, cli_jreq_read_logprobs},
    {"ignore_eos", CLI_JREQ_K_ALL, cli_jreq_read_ignore_eos},
    {"stop", CLI_JREQ_K_ALL, cli_jreq_read_stop},
    {"stop_token_ids", CLI_JREQ_K_ALL, cli_jreq_read_stop_ids},
    {"n", CLI_JREQ_K_GEN, cli_jreq_read_only_one},
    {"best_of", CLI_JREQ_K_GEN, cli_jreq_read_only_one},
    {"stream", CLI_JREQ_K_GEN, cli_jreq_read_no_stream},
    {"n", CLI_JREQ_K_SERVER, cli_jreq_read_n},
    {"stream", CLI_JREQ_K_SERVER, cli_jreq_read_stream},
    {"stream_options", CLI_JREQ_K_SERVER, cli_jreq_read_stream_options},
    {"echo", CLI_JREQ_K_CMPL, cli_jreq_read_echo},
    {"model", CLI_JREQ_K_SERVER, cli_jreq_read_model},
    {"messages", CLI_JREQ_K_CHAT, cli_jreq_read_messages},
    {"tools", CLI_JREQ_K_CHAT, cli_tools_field},
    {"tool_choice", CLI_JREQ_K_CHAT, cli_tools_field},
    {"parallel_tool_calls", CLI_JREQ_K_CHAT, cli_tools_field},
    {"grammar", CLI_JREQ_K_ALL, cli_jreq_read_grammar},
    {"json_schema", CLI_JREQ_K_ALL, cli_jreq_read_json_schema},
    {"response_format", CLI_JREQ_K_ALL, cli_jreq_read_response_format},
};

// The entry of the field key in a request of this kind, or NULL.
static const struct cli_jreq_field_def *cli_jreq_field_find(enum cli_jreq_kind kind, const char *key) {
    for (size_t i = 0; i < CLI_ARRAY_LEN(cli_jreq_fields); i++)
        if ((cli_jreq_fields[i].kinds & (1u << kind)) && !strcmp(key, cli_jreq_fields[i].key))
            return &cli_jreq_fields[i];
    return NULL;
}

// A field llm generate does not read: one of OpenAI's or vLLM's that it cannot do, or unknown.
static bool cli_jreq_generate_unknown(struct cli_jreq *q, const char *key) {
    // the key in the message: at most 40 characters (it is valid UTF-8: Jansson checked it)
    int len = (int)cli_utf8_prefix(key, strlen(key), 40);
    const char *more = key[len] ? "..." : "";
    for (size_t k = 0; k < CLI_ARRAY_LEN(cli_jreq_unsupported); k++)
        if (!strcmp(key, cli_jreq_unsupported[k]))
            return cli_jreq_fail(q, key, "%s: not supported by llm generate", key);
    return cli_jreq_fail(q, NULL, "%.*s%s: unknown field (see llm --help: generate options)", len, key, more);
}

// One field of a request; null means the default, as in OpenAI's API (llm generate: for the
// fields it reads).
static bool cli_jreq_field(struct cli_jreq *q, const char *key, json_t *v) {
    const struct cli_jreq_field_def *f = cli_jreq_field_find(q->kind, key);
    if (json_is_null(v) && (q->kind != CLI_JREQ_GENERATE || f)) return true;   // the default
    if (f) return f->read(q, key, v);
    if (q->kind == CLI_JREQ_GENERATE) return cli_jreq_generate_unknown(q, key);
    return cli_jreq_server_unsupported(q, key, v);
}

bool cli_jreq_parse(const char *body, size_t len, struct cli_jreq *q, const char *chat_template) {
    const char *what = q->kind == CLI_JREQ_GENERATE ? "the line" : "the body";
    size_t bad = cli_utf8_check(body, len);
    if (bad < len) return cli_jreq_fail(q, NULL, "%s is not valid UTF-8 (byte %zu)", what, bad + 1);
    size_t t = 0;
    while (t < len && strchr(" \t\r\n", body[t])) t++;
    if (t == len || body[t] != '{') {
        if (q->kind == CLI_JREQ_GENERATE)
            return cli_jreq_fail(q, NULL, "not a JSON object: a request is {\"prompt\":\"...\"} or {\"tokens\":[...]}");
        return cli_jreq_fail(q, NULL, "the body is not a JSON object");
    }
    json_error_t je;
    q->root = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!q->root) {
        // Jansson's message, without the " near '...'" that quotes bytes of the text (they may be
        // a cut character): the message itself is ASCII
        size_t n = strcspn(je.text, "\n");
        const char *near = strstr(je.text, " near ");
        if (near && (size_t)(near - je.text) < n) n = (size_t)(near - je.text);
        bool big = !strncmp(je.text, "too big", 7);   // Jansson's integers are 64-bit
        return cli_jreq_fail(q, NULL, "invalid JSON at byte %d: %.*s%s", je.position, (int)n, je.text,
                             big ? " (an integer here is in [-2^63, 2^63 - 1]; seed: [0, 2^63 - 1])" : "");
    }
    const char *key;
    json_t *v;
    json_object_foreach(q->root, key, v) if (!cli_jreq_field(q, key, v)) return false;
    if (!cli_jreq_structured(q)) return false;
    q->p.stop = q->stop;
    q->p.n_stop = q->n_stop;
    q->p.stop_token_ids = q->stop_ids;
    switch (q->kind) {
    case CLI_JREQ_GENERATE:
        if (q->has_prompt == q->has_tokens) return cli_jreq_fail(q, NULL, "give one of \"prompt\" or \"tokens\"");
        break;
    case CLI_JREQ_COMPLETION:
        if (!q->n_prompts) return cli_jreq_fail(q, "prompt", "prompt: missing");
        break;
    case CLI_JREQ_CHAT:
        if (!q->messages) return cli_jreq_fail(q, "messages", "messages: missing");
        if (!cli_tools_prepare(q, chat_template) || !cli_jreq_messages(q, q->messages, chat_template)) return false;
        if (q->top_logprobs && !q->chat_logprobs)
            return cli_jreq_fail(q, "top_logprobs", "top_logprobs: needs \"logprobs\": true");
        // the engine's k: top_logprobs, and at least 1 for the tokens' own log-probabilities
        q->p.logprobs = q->chat_logprobs ? CLI_MAX(q->top_logprobs, 1) : 0;
        if (!(q->prompts = calloc(1, sizeof(*q->prompts))) || !(q->prompt_ids = calloc(1, sizeof(int32_t *))))
            cli_die("out of memory");
        q->prompts[0].text = q->chat_text;
        q->n_prompts = 1;
        break;
    }
    if (q->kind != CLI_JREQ_GENERATE && q->include_usage && !q->stream)
        return cli_jreq_fail(q, "stream_options", "stream_options: only with \"stream\": true");
    return true;
}
