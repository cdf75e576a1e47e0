// tools.c — tool calling in llm serve's /v1/chat/completions: OpenAI's tools, tool_choice and
// parallel_tool_calls, tool messages and assistant messages with tool_calls, rendered in the
// model family's own tool format; the model's calls parsed back into tool_calls (whole answers
// and streams); for tool_choice "required" or a named function, a grammar that holds the output
// to well-formed calls (llm_request_params.grammar, built with llm_json_schema_to_grammar).
//
// Rendering is the program's, on top of llm_chat_apply: a conversation with tools becomes plain
// {role, content} messages that the family's chat template renders as its tool prompt (and, for
// Mistral, text written as it is between rendered runs). The formats (docs/structured-output.md):
//   hermes   chatml and qwen3 (Qwen2.5, Qwen3, Hermes), and the generic fallback of templates
//            without a tool format (gemma, phi3, zephyr, llama2, ChatML models such as SmolLM2):
//            the tools as JSON lines in <tools></tools> in the system prompt; a call
//            <tool_call>\n{"name": N, "arguments": {...}}\n</tool_call>; results as
//            <tool_response>\n...\n</tool_response> blocks of one user turn
//   llama3   Llama 3.1 / 3.2 JSON tool calling: the tools as indented JSON in the first user
//            message; a call {"name": N, "parameters": {...}} (several joined by "; "); results
//            in turns of the ipython role
//   mistral  Mistral v3: [AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS] before the last user turn;
//            calls [TOOL_CALLS] [{"name": N, "arguments": {...}, "id": ID}] (read too: the
//            later models' compact form [TOOL_CALLS]N[ARGS]{...}, one marker per call); results
//            [TOOL_RESULTS] {"content": ..., "call_id": ID}[/TOOL_RESULTS]
//
// Parsing: a call is the family's marker (Llama 3 and Mistral calls may also open the answer
// without one: their markers are control tokens, which generated text does not show) and a JSON
// object whose first member is "name" (a tool's name), then "arguments" (or "parameters"): an
// object. The content is the text before the first call. A whole answer takes the calls that are
// complete with arguments that are JSON, up to the first that is not (none: the whole text is
// content); a stream announces a call once its name is read and streams its arguments' text as
// it comes, as vLLM does.
#include "cli.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define CLI_TOOLS_MAX 128          // tools in one request (OpenAI's limit)
#define CLI_TOOLS_MAX_DEPTH 128    // nesting the parser follows in arguments

enum { CLI_TP_NO, CLI_TP_MAYBE, CLI_TP_YES };   // a match: none, the text ends inside one, found

static json_t *cli_tools_fn(const struct cli_tools *t, int i) {
    return json_object_get(json_array_get(t->list, (size_t)i), "function");
}

static const char *cli_tools_name(const struct cli_tools *t, int i) {
    return json_string_value(json_object_get(cli_tools_fn(t, i), "name"));
}

// --- the request's fields ---

bool cli_tools_field(struct cli_jreq *q, const char *key, json_t *v) {
    struct cli_tools *t = &q->tools;
    if (!strcmp(key, "tools")) {
        if (!json_is_array(v))
            return cli_jreq_fail_at(q, key, "tools: expected an array of {\"type\": \"function\", \"function\": "
                                    "{\"name\", \"description\", \"parameters\"}} objects");
        t->list = json_array_size(v) ? v : NULL;
    } else if (!strcmp(key, "tool_choice")) {
        t->choice_v = v;   // checked once the tools are read (they may come after it)
    } else {
        if (!json_is_boolean(v)) return cli_jreq_fail_at(q, key, "parallel_tool_calls: expected true or false");
        t->single = json_is_false(v);
    }
    return true;
}

// The JSON Schema of a function's arguments (malloc'd): its parameters, with "type": "object"
// when they do not say (the arguments are an object); none: an object with no members.
static char *cli_tools_schema(json_t *fn) {
    json_t *p = json_object_get(fn, "parameters");
    char *s;
    if (!p || json_is_null(p)) {
        s = strdup("{\"type\":\"object\",\"properties\":{}}");
    } else {
        json_t *c = cli_jcheck(json_copy(p));
        if (!json_object_get(c, "type")) cli_jset(c, "type", cli_json_cstr("object"));
        s = json_dumps(c, JSON_COMPACT);
        json_decref(c);
    }
    if (!s) cli_die("out of memory");
    return s;
}

// The grammar of function i's arguments (malloc'd; NULL: refused, the message in err).
static char *cli_tools_args_grammar(const struct cli_tools *t, int i, char *err, size_t size) {
    char *schema = cli_tools_schema(cli_tools_fn(t, i)), *g = NULL;
    int len = llm_json_schema_to_grammar(schema, NULL, 0, err, size);
    if (len >= 0) {
        if (!(g = malloc((size_t)len + 1))) cli_die("out of memory");
        llm_json_schema_to_grammar(schema, g, (size_t)len + 1, err, size);
    }
    free(schema);
    return g;
}

static bool cli_tools_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-') return false;
    return true;
}

// tools[i]: {"type": "function", "function": {"name", "description"?, "parameters"?, "strict"?}},
// its name unique, its parameters a schema the converter takes.
static bool cli_tools_check(struct cli_jreq *q, int i) {
    struct cli_tools *t = &q->tools;
    json_t *x = json_array_get(t->list, (size_t)i), *type = json_object_get(x, "type");
    json_t *fn = json_object_get(x, "function");
    json_t *name = json_object_get(fn, "name"), *desc = json_object_get(fn, "description"),
           *params = json_object_get(fn, "parameters"), *ptype = json_object_get(params, "type");
    if (!json_is_object(x) || !json_is_string(type) || strcmp(json_string_value(type), "function") ||
        !json_is_object(fn))
        return cli_jreq_fail_at(q, "tools", "tools[%d]: expected {\"type\": \"function\", \"function\": {...}}", i);
    if (!json_is_string(name))
        return cli_jreq_fail_at(q, "tools", "tools[%d].function.name: missing (a string)", i);
    if (!cli_tools_name_ok(json_string_value(name)))
        return cli_jreq_fail_at(q, "tools", "tools[%d].function.name: '%.80s' is not 1 to 64 letters, digits, _ or -",
                                i, json_string_value(name));
    for (int k = 0; k < i; k++)
        if (!strcmp(cli_tools_name(t, k), json_string_value(name)))
            return cli_jreq_fail_at(q, "tools", "tools[%d].function.name: '%s' is also tools[%d]'s", i,
                                    json_string_value(name), k);
    if (desc && !json_is_null(desc) && !json_is_string(desc))
        return cli_jreq_fail_at(q, "tools", "tools[%d].function.description: expected a string", i);
    if (params && !json_is_null(params) && !json_is_object(params))
        return cli_jreq_fail_at(q, "tools", "tools[%d].function.parameters: expected a JSON Schema object", i);
    if (ptype && (!json_is_string(ptype) || strcmp(json_string_value(ptype), "object")))
        return cli_jreq_fail_at(q, "tools", "tools[%d].function.parameters: the arguments are an object (\"type\": "
                                "\"object\")", i);
    char err[512];
    char *g = cli_tools_args_grammar(t, i, err, sizeof(err));
    if (!g) return cli_jreq_fail_at(q, "tools", "tools[%d].function.parameters: %s", i, err);
    free(g);
    return true;
}

// tool_choice: "none", "auto", "required" or {"type": "function", "function": {"name": N}}.
static bool cli_tools_choice(struct cli_jreq *q) {
    struct cli_tools *t = &q->tools;
    json_t *v = t->choice_v;
    t->choice = t->list ? CLI_TOOL_AUTO : CLI_TOOL_NONE;
    if (!v || json_is_null(v)) return true;
    const char *s = json_string_value(v);
    if (s && !strcmp(s, "none")) {
        t->choice = CLI_TOOL_NONE;
    } else if (s && !strcmp(s, "required")) {
        t->choice = CLI_TOOL_REQUIRED;
    } else if (s && strcmp(s, "auto")) {
        return cli_jreq_fail_at(q, "tool_choice", "tool_choice: \"none\", \"auto\", \"required\" or {\"type\": "
                                "\"function\", \"function\": {\"name\": ...}}, not '%.40s'", s);
    } else if (!s) {
        json_t *type = json_object_get(v, "type"), *name = json_object_get(json_object_get(v, "function"), "name");
        if (!json_is_object(v) || (type && (!json_is_string(type) || strcmp(json_string_value(type), "function"))) ||
            !json_is_string(name))
            return cli_jreq_fail_at(q, "tool_choice", "tool_choice: expected a string or {\"type\": \"function\", "
                                    "\"function\": {\"name\": ...}}");
        t->choice = CLI_TOOL_NAMED;
        t->named = -1;
        for (int i = 0; i < t->n; i++)
            if (!strcmp(cli_tools_name(t, i), json_string_value(name))) t->named = i;
        if (t->named < 0)
            return cli_jreq_fail_at(q, "tool_choice", "tool_choice: the function '%.80s' is not among the tools",
                                    json_string_value(name));
    }
    if (t->choice == CLI_TOOL_REQUIRED && !t->list)
        return cli_jreq_fail_at(q, "tool_choice", "tool_choice: \"required\" needs tools");
    return true;
}

// --- the grammar of calls (tool_choice "required" or a named function) ---

static bool cli_tools_gname(char c) { return isalnum((unsigned char)c) || c == '-' || c == '_'; }

// A grammar's rules with every rule name prefixed (its string literals, character classes and
// repetition counts left as they are): several schemas' grammars in one.
static void cli_tools_rename(struct cli_strbuf *g, const char *s, const char *prefix) {
    while (*s) {
        const char *p = s + 1;
        if (*s == '"' || *s == '[') {   // to the unescaped end
            char close = *s == '"' ? '"' : ']';
            for (; *p && *p != close; p++)
                if (*p == '\\' && p[1]) p++;
            if (*p) p++;
        } else if (*s == '{') {
            while (*p && *p != '}') p++;
            if (*p) p++;
        } else if (cli_tools_gname(*s)) {
            cli_sb_put(g, prefix, strlen(prefix));
            while (cli_tools_gname(*p)) p++;
        }
        cli_sb_put(g, s, (size_t)(p - s));
        s = p;
    }
}

// The grammar of the answer: one call (parallel_tool_calls false) or up to CLI_TOOLS_MAX_CALLS,
// in the family's syntax, of the named function or of any; each call's arguments held to its
// parameters' schema.
static bool cli_tools_grammar(struct cli_jreq *q) {
    struct cli_tools *t = &q->tools;
    struct cli_strbuf g = {0}, calls = {0};
    const char *key = t->format == CLI_TOOLS_LLAMA3 ? "parameters" : "arguments";
    char more[64] = "";
    if (!t->single) snprintf(more, sizeof(more), "(%s call){0,%d}", t->format == CLI_TOOLS_HERMES ? "\"\\n\""
                             : t->format == CLI_TOOLS_LLAMA3 ? "\"; \"" : "\", \"", CLI_TOOLS_MAX_CALLS - 1);
    if (t->format == CLI_TOOLS_HERMES) cli_sb_printf(&g, "root ::= call %s\ncall ::= \"<tool_call>\\n\" fn "
                                                     "\"\\n</tool_call>\"\n", more);
    else if (t->format == CLI_TOOLS_LLAMA3) cli_sb_printf(&g, "root ::= call %s\ncall ::= fn\n", more);
    else cli_sb_printf(&g, "root ::= \"[\" call %s \"]\"\ncall ::= fn\n", more);
    cli_sb_put(&calls, "fn ::=", 6);
    for (int i = 0; i < t->n; i++) {
        if (t->choice == CLI_TOOL_NAMED && i != t->named) continue;
        char err[512], prefix[24];
        char *a = cli_tools_args_grammar(t, i, err, sizeof(err));
        if (!a) {   // (checked before: out of memory aside, not reached)
            free(g.p);
            free(calls.p);
            return cli_jreq_fail_at(q, "tools", "tools[%d].function.parameters: %s", i, err);
        }
        snprintf(prefix, sizeof(prefix), "f%d-", i);
        cli_sb_printf(&calls, "%s f%d-call", calls.n > 6 ? " |" : "", i);
        cli_sb_printf(&g, "f%d-call ::= \"{\\\"name\\\": \\\"%s\\\", \\\"%s\\\": \" f%d-root \"}\"\n", i,
                      cli_tools_name(t, i), key, i);
        cli_tools_rename(&g, a, prefix);
        free(a);
    }
    cli_sb_put(&g, calls.p, calls.n);
    cli_sb_put(&g, "\n", 1);
    free(calls.p);
    t->grammar = g.p;
    return true;
}

bool cli_tools_prepare(struct cli_jreq *q, const char *tmpl) {
    struct cli_tools *t = &q->tools;
    t->format = tmpl && !strcmp(tmpl, "llama3") ? CLI_TOOLS_LLAMA3
                : tmpl && !strcmp(tmpl, "mistral") ? CLI_TOOLS_MISTRAL : CLI_TOOLS_HERMES;
    t->harmony = tmpl && !strcmp(tmpl, "harmony");
    if (t->list && json_array_size(t->list) > CLI_TOOLS_MAX)
        return cli_jreq_fail_at(q, "tools", "tools: %zu tools, at most %d", json_array_size(t->list), CLI_TOOLS_MAX);
    t->n = (int)json_array_size(t->list);
    for (int i = 0; i < t->n; i++)
        if (!cli_tools_check(q, i)) return false;
    if (!cli_tools_choice(q)) return false;
    t->active = t->list && t->choice != CLI_TOOL_NONE;
    if (t->choice != CLI_TOOL_REQUIRED && t->choice != CLI_TOOL_NAMED) return true;
    if (t->harmony)   // (a grammar would have to hold the channel markers, control tokens, too)
        return cli_jreq_fail_at(q, "tool_choice", "tool_choice: \"required\" or a named function is not supported "
                                "with the harmony format (gpt-oss) yet; use \"auto\"");
    if (q->p.grammar)
        return cli_jreq_fail_at(q, "tool_choice", "tool_choice: \"required\" or a named function (which hold the "
                                "answer to calls) cannot be combined with response_format's schema");
    if (!cli_tools_grammar(q)) return false;
    q->p.grammar = t->grammar;
    return true;
}

void cli_tools_free(struct cli_tools *t) {
    free(t->grammar);
    t->grammar = NULL;
}

// --- rendering: the conversation as messages of the family's template ---

// A message as the template renders it, or (raw) text written as it is between rendered runs.
struct cli_tmsg { const char *role; char *content; bool raw; };
struct cli_tconv { struct cli_tmsg *m; int n, cap; };

static void cli_tconv_add(struct cli_tconv *c, const char *role, struct cli_strbuf *b, bool raw) {
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        if (!(c->m = realloc(c->m, (size_t)c->cap * sizeof(*c->m)))) cli_die("out of memory");
    }
    if (!b->p) cli_sb_put(b, "", 0);
    c->m[c->n++] = (struct cli_tmsg){role, b->p, raw};
    *b = (struct cli_strbuf){0};
}

static void cli_tconv_text(struct cli_tconv *c, const char *role, const char *s, bool raw) {
    struct cli_strbuf b = {0};
    cli_sb_put(&b, s, strlen(s));
    cli_tconv_add(c, role, &b, raw);
}

// v as JSON text (Jansson's flags: 0 writes Python's json.dumps separators, ", " and ": "; reals
// with 15 significant digits, which give Python's shortest form for the numbers people write,
// where Jansson's default 17 turn 48.85 into 48.850000000000001).
static void cli_tools_dump(struct cli_strbuf *b, const json_t *v, size_t flags) {
    char *s = json_dumps(v, flags | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    if (!s) cli_die("out of memory");
    cli_sb_put(b, s, strlen(s));
    free(s);
}

// The calls of messages[i] (an assistant's tool_calls), checked, as [{"id", "name", "arguments"}]
// with the arguments parsed (they come as JSON text; an object is taken too); NULL: none or
// refused (*ok false, q->err).
static json_t *cli_tools_msg_calls(struct cli_jreq *q, size_t i, json_t *x, bool *ok) {
    json_t *tc = json_object_get(x, "tool_calls");
    *ok = true;
    if (!tc || json_is_null(tc) || (json_is_array(tc) && !json_array_size(tc))) return NULL;
    if (!json_is_array(tc)) {
        *ok = cli_jreq_fail_at(q, "messages", "messages[%zu].tool_calls: expected an array", i);
        return NULL;
    }
    json_t *out = cli_jcheck(json_array());
    for (size_t k = 0; k < json_array_size(tc) && *ok; k++) {
        json_t *c = json_array_get(tc, k), *fn = json_object_get(c, "function"), *id = json_object_get(c, "id");
        json_t *name = json_object_get(fn, "name"), *args = json_object_get(fn, "arguments"), *a = NULL;
        json_error_t je;
        if (json_is_string(args))
            a = json_loadb(json_string_value(args), json_string_length(args), JSON_DECODE_ANY, &je);
        else if (json_is_object(args)) a = json_incref(args);
        if (!json_is_string(name) || (id && !json_is_null(id) && !json_is_string(id)))
            *ok = cli_jreq_fail_at(q, "messages", "messages[%zu].tool_calls[%zu]: expected {\"id\", \"type\": "
                                   "\"function\", \"function\": {\"name\", \"arguments\"}}", i, k);
        else if (!a)
            *ok = cli_jreq_fail_at(q, "messages", "messages[%zu].tool_calls[%zu].function.arguments: not JSON text", i,
                                   k);
        if (!*ok) { json_decref(a); break; }
        json_t *o = cli_jcheck(json_object());
        cli_jset(o, "id", cli_json_cstr(json_is_string(id) ? json_string_value(id) : ""));
        cli_jset(o, "name", json_incref(name));
        cli_jset(o, "arguments", a);
        cli_jpush(out, o);
    }
    if (!*ok) { json_decref(out); return NULL; }
    return out;
}

static bool cli_tools_role(const struct llm_chat_message *m, int i, const char *role) {
    return !strcmp(m[i].role, role);
}

// Hermes: the tools' part of the system prompt (Qwen2.5's and Qwen3's words).
static void cli_tools_hermes_list(const struct cli_tools *t, struct cli_strbuf *b) {
    const char *head = "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
                       "provided with function signatures within <tools></tools> XML tags:\n<tools>";
    cli_sb_put(b, head, strlen(head));
    for (int i = 0; i < t->n; i++) {
        cli_sb_put(b, "\n", 1);
        cli_tools_dump(b, json_array_get(t->list, (size_t)i), 0);
    }
    const char *tail = "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                       "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, "
                       "\"arguments\": <args-json-object>}\n</tool_call>";
    cli_sb_put(b, tail, strlen(tail));
}

// One call as the family writes it: {"name": N, "arguments": {...}} (Llama 3: "parameters";
// Mistral: and "id").
static void cli_tools_call_text(const struct cli_tools *t, struct cli_strbuf *b, json_t *call) {
    cli_sb_put(b, "{\"name\": ", 9);
    cli_tools_dump(b, json_object_get(call, "name"), 0);
    cli_sb_printf(b, ", \"%s\": ", t->format == CLI_TOOLS_LLAMA3 ? "parameters" : "arguments");
    cli_tools_dump(b, json_object_get(call, "arguments"), 0);
    if (t->format == CLI_TOOLS_MISTRAL) {
        cli_sb_put(b, ", \"id\": ", 8);
        cli_tools_dump(b, json_object_get(call, "id"), 0);
    }
    cli_sb_put(b, "}", 1);
}

// An assistant message with calls: its content (Hermes only) and the calls.
static void cli_tools_calls_text(const struct cli_tools *t, struct cli_strbuf *b, const char *content, json_t *calls) {
    if (t->format == CLI_TOOLS_HERMES && *content) cli_sb_printf(b, "%s\n", content);
    if (t->format == CLI_TOOLS_MISTRAL) cli_sb_put(b, "[TOOL_CALLS] [", 14);
    for (size_t k = 0; k < json_array_size(calls); k++) {
        if (t->format == CLI_TOOLS_HERMES) cli_sb_put(b, k ? "\n<tool_call>\n" : "<tool_call>\n", k ? 13 : 12);
        else if (k) cli_sb_put(b, t->format == CLI_TOOLS_LLAMA3 ? "; " : ", ", 2);
        cli_tools_call_text(t, b, json_array_get(calls, k));
        if (t->format == CLI_TOOLS_HERMES) cli_sb_put(b, "\n</tool_call>", 13);
    }
    if (t->format == CLI_TOOLS_MISTRAL) cli_sb_put(b, "]", 1);
}

// Mistral: a tool's result; its content as it is when it is JSON (the template's), else quoted.
static void cli_tools_mistral_result(struct cli_strbuf *b, const char *content, json_t *x) {
    json_error_t je;
    json_t *j = json_loads(content, JSON_DECODE_ANY, &je), *id = json_object_get(x, "tool_call_id");
    cli_sb_put(b, "[TOOL_RESULTS] {\"content\": ", 27);
    json_t *quoted = j ? NULL : cli_json_cstr(content);
    json_t *ids = cli_json_cstr(json_is_string(id) ? json_string_value(id) : "");
    if (j) cli_sb_put(b, content, strlen(content));
    else cli_tools_dump(b, quoted, 0);
    cli_sb_put(b, ", \"call_id\": ", 13);
    cli_tools_dump(b, ids, 0);
    json_decref(j);
    json_decref(quoted);
    json_decref(ids);
    cli_sb_put(b, "}[/TOOL_RESULTS]", 16);
}

// Mistral: the tools, [AVAILABLE_TOOLS] [{"type": "function", "function": {...}}, ...][/AVAILABLE_TOOLS].
static void cli_tools_mistral_list(const struct cli_tools *t, struct cli_tconv *c) {
    struct cli_strbuf b = {0};
    cli_sb_put(&b, "[AVAILABLE_TOOLS] [", 19);
    for (int i = 0; i < t->n; i++) {
        cli_sb_put(&b, i ? ", {\"type\": \"function\", \"function\": " : "{\"type\": \"function\", \"function\": ",
                   i ? 35 : 33);
        cli_tools_dump(&b, cli_tools_fn(t, i), 0);
        cli_sb_put(&b, "}", 1);
    }
    cli_sb_put(&b, "][/AVAILABLE_TOOLS]", 19);
    cli_tconv_add(c, NULL, &b, true);
}

// Llama 3.1's words before the tools in the first user message.
static void cli_tools_llama3_list(const struct cli_tools *t, struct cli_strbuf *b) {
    const char *head = "Given the following functions, please respond with a JSON for a function call with its proper "
                       "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function "
                       "name, \"parameters\": dictionary of argument name and its value}. Do not use variables.\n\n";
    cli_sb_put(b, head, strlen(head));
    for (int i = 0; i < t->n; i++) {
        cli_tools_dump(b, json_array_get(t->list, (size_t)i), JSON_INDENT(4));
        cli_sb_put(b, "\n\n", 2);
    }
}

// What comes before the conversation: the system prompt with the tools (Hermes), Llama 3.1's
// system preamble for tools, Mistral's system prompts (moved into the last user turn: *sys).
// *first: the first message left to render.
static void cli_tools_intro(const struct cli_tools *t, const struct llm_chat_message *m, int n, struct cli_tconv *c,
                            int *first, struct cli_strbuf *sys) {
    struct cli_strbuf b = {0};
    bool has_sys = n > 0 && cli_tools_role(m, 0, "system");
    *first = 0;
    if (t->format == CLI_TOOLS_MISTRAL) {
        bool user = false;
        for (int i = 0; i < n; i++) {
            user |= cli_tools_role(m, i, "user");
            if (cli_tools_role(m, i, "system")) cli_sb_printf(sys, "%s%s", sys->n ? "\n\n" : "", m[i].content);
        }
        if (!user && t->active) cli_tools_mistral_list(t, c);   // no user turn to put them before
        if (!user && sys->n) cli_tconv_add(c, "system", sys, false);
        return;
    }
    if (!t->active) return;
    if (t->format == CLI_TOOLS_HERMES) {
        if (has_sys) cli_sb_printf(&b, "%s\n\n", m[0].content);
        cli_tools_hermes_list(t, &b);
    } else {
        cli_sb_printf(&b, "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n%s",
                      has_sys ? m[0].content : "");
    }
    cli_tconv_add(c, "system", &b, false);
    *first = has_sys;
}

// A message of the conversation (not an assistant's calls) as the family renders it; i: its
// index, lead: the first user message (Llama 3: the tools go there), last: the last (Mistral: the
// tools go before it).
static void cli_tools_msg(const struct cli_tools *t, struct cli_tconv *c, const struct llm_chat_message *m, int i,
                          json_t *x, int lead, int last, struct cli_strbuf *sys) {
    struct cli_strbuf b = {0};
    const char *role = m[i].role;
    if (!strcmp(role, "tool")) {
        if (t->format == CLI_TOOLS_LLAMA3) {
            cli_tconv_text(c, "ipython", m[i].content, false);
        } else if (t->format == CLI_TOOLS_MISTRAL) {
            cli_tools_mistral_result(&b, m[i].content, x);
            cli_tconv_add(c, NULL, &b, true);
        } else {   // Hermes: the results of one round in one user turn
            struct cli_tmsg *prev = c->n ? &c->m[c->n - 1] : NULL;
            bool join = i > 0 && !strcmp(m[i - 1].role, "tool") && prev && !prev->raw;
            if (join) cli_sb_put(&b, prev->content, strlen(prev->content));
            cli_sb_printf(&b, "%s<tool_response>\n%s\n</tool_response>", join ? "\n" : "", m[i].content);
            if (join) { free(prev->content); c->n--; }
            cli_tconv_add(c, "user", &b, false);
        }
        return;
    }
    if (t->format == CLI_TOOLS_MISTRAL && !strcmp(role, "system")) return;   // in the last user turn
    if (t->format == CLI_TOOLS_MISTRAL && i == last) {
        if (t->active) cli_tools_mistral_list(t, c);
        if (sys->n) cli_sb_printf(&b, "%s\n\n", sys->p);
    }
    if (t->format == CLI_TOOLS_LLAMA3 && t->active && i == lead) cli_tools_llama3_list(t, &b);
    cli_sb_put(&b, m[i].content, strlen(m[i].content));
    cli_tconv_add(c, role, &b, false);
}

// The rendered conversation: runs of messages through the template, raw text between them; the
// assistant's turn opened after the last.
static bool cli_tools_emit(struct cli_jreq *q, const char *tmpl, const struct cli_tconv *c) {
    struct cli_strbuf out = {0};
    struct llm_chat_message *run = malloc(((size_t)c->n + 1) * sizeof(*run));
    if (!run) cli_die("out of memory");
    cli_sb_put(&out, "", 0);
    int k = 0;
    bool ok = true;
    for (int i = 0; i <= c->n && ok; i++) {
        if (i < c->n && !c->m[i].raw) {
            run[k++] = (struct llm_chat_message){c->m[i].role, c->m[i].content};
            continue;
        }
        if (k || i == c->n) {
            int len = llm_chat_apply(tmpl, run, k, i == c->n, NULL, 0);
            if (len < 0) {
                ok = cli_jreq_fail_at(q, "messages", "the chat template '%s' cannot render these messages", tmpl);
                break;
            }
            char *text = malloc((size_t)len + 1);
            if (!text) cli_die("out of memory");
            llm_chat_apply(tmpl, run, k, i == c->n, text, (size_t)len + 1);
            cli_sb_put(&out, text, (size_t)len);
            free(text);
            k = 0;
        }
        if (i < c->n) cli_sb_put(&out, c->m[i].content, strlen(c->m[i].content));
    }
    free(run);
    if (ok) q->chat_text = out.p;
    else free(out.p);
    return ok;
}

bool cli_tools_involved(const struct cli_jreq *q, json_t *messages) {
    if (q->tools.active) return true;
    for (size_t i = 0; i < json_array_size(messages); i++) {
        json_t *x = json_array_get(messages, i), *role = json_object_get(x, "role");
        json_t *tc = json_object_get(x, "tool_calls");
        if ((json_is_string(role) && !strcmp(json_string_value(role), "tool")) || json_array_size(tc) > 0) return true;
    }
    return false;
}

static bool cli_tools_harmony_render(struct cli_jreq *q, json_t *v, const struct llm_chat_message *m, int n);

bool cli_tools_render(struct cli_jreq *q, json_t *v, const struct llm_chat_message *m, int n, const char *tmpl) {
    const struct cli_tools *t = &q->tools;
    if (t->harmony) return cli_tools_harmony_render(q, v, m, n);
    struct cli_tconv c = {0};
    struct cli_strbuf sys = {0}, b = {0};
    int first, lead = -1, last = -1;
    for (int i = 0; i < n; i++)
        if (cli_tools_role(m, i, "user")) last = i, lead = lead < 0 ? i : lead;
    cli_tools_intro(t, m, n, &c, &first, &sys);
    if (t->format == CLI_TOOLS_LLAMA3 && t->active && lead < 0) {   // no user message to hold the tools
        cli_tools_llama3_list(t, &b);
        cli_tconv_add(&c, "user", &b, false);
    }
    bool ok = true;
    for (int i = first; i < n && ok; i++) {
        json_t *x = json_array_get(v, (size_t)i), *calls = cli_tools_msg_calls(q, (size_t)i, x, &ok);
        if (calls && strcmp(m[i].role, "assistant"))
            ok = cli_jreq_fail_at(q, "messages", "messages[%d].tool_calls: only an assistant message makes calls", i);
        if (!ok) {
            json_decref(calls);
            break;
        }
        if (calls) {
            cli_tools_calls_text(t, &b, m[i].content, calls);
            cli_tconv_add(&c, "assistant", &b, false);
            json_decref(calls);
        } else {
            cli_tools_msg(t, &c, m, i, x, lead, last, &sys);
        }
    }
    if (ok) ok = cli_tools_emit(q, tmpl, &c);
    for (int i = 0; i < c.n; i++) free(c.m[i].content);
    free(c.m);
    free(sys.p);
    return ok;
}

// A string literal into b.
#define CLI_HM_PUT(b, lit) cli_sb_put(b, lit, sizeof(lit) - 1)

// --- harmony (gpt-oss): the tools as its official template writes them, a TypeScript-like
// namespace in the developer message; a call as a commentary message to=functions.NAME with JSON
// arguments; a result as a message from functions.NAME ---

// Jinja's truth of a value: not null, false, 0, "", [] or {}.
static bool cli_hm_truthy(const json_t *v) {
    if (!v || json_is_null(v) || json_is_false(v)) return false;
    if (json_is_string(v)) return json_string_length(v) > 0;
    if (json_is_array(v)) return json_array_size(v) > 0;
    if (json_is_object(v)) return json_object_size(v) > 0;
    if (json_is_number(v)) return json_number_value(v) != 0;
    return true;
}

// v as Jinja's string of it: a string's text, else its JSON.
static void cli_hm_str(struct cli_strbuf *b, const json_t *v) {
    if (json_is_string(v)) cli_sb_put(b, json_string_value(v), json_string_length(v));
    else cli_tools_dump(b, v, 0);
}

static bool cli_hm_required(const json_t *required, const char *name) {
    for (size_t i = 0; i < json_array_size(required); i++) {
        const char *r = json_string_value(json_array_get(required, i));
        if (r && !strcmp(r, name)) return true;
    }
    return false;
}

// A schema's type as the template's render_typescript_type writes it (its white space too).
static void cli_hm_type(struct cli_strbuf *b, const json_t *spec, int depth) {
    const json_t *type = json_object_get(spec, "type"), *one = json_object_get(spec, "oneOf");
    const char *ts = json_string_value(type);
    const bool nullable = cli_hm_truthy(json_object_get(spec, "nullable"));
    if (depth > 32) {
        CLI_HM_PUT(b, "any");
    } else if (ts && !strcmp(ts, "array")) {
        const json_t *items = json_object_get(spec, "items");
        const char *it = json_string_value(json_object_get(items, "type"));
        if (!cli_hm_truthy(items)) {
            CLI_HM_PUT(b, "any[]");
        } else if (it && (!strcmp(it, "string") || !strcmp(it, "number") || !strcmp(it, "integer") ||
                          !strcmp(it, "boolean"))) {
            cli_sb_printf(b, "%s[]", strcmp(it, "integer") ? it : "number");
        } else {
            struct cli_strbuf in = {0};
            cli_hm_type(&in, items, depth + 1);
            if (in.n > 50 || (in.n == 15 && !memcmp(in.p, "object | object", 15))) CLI_HM_PUT(b, "any[]");
            else cli_sb_printf(b, "%.*s[]", (int)in.n, in.p ? in.p : "");
            free(in.p);
        }
        if (nullable) CLI_HM_PUT(b, " | null");
    } else if (json_is_array(type) && json_array_size(type) > 0) {   // ["string", "null"]
        for (size_t i = 0; i < json_array_size(type); i++) {
            if (i) CLI_HM_PUT(b, " | ");
            cli_hm_str(b, json_array_get(type, i));
        }
    } else if (cli_hm_truthy(one) && json_is_array(one)) {   // (the template's test for object variants never holds)
        for (size_t i = 0; i < json_array_size(one); i++) {
            const json_t *var = json_array_get(one, i), *def = json_object_get(var, "default");
            cli_hm_type(b, var, depth + 1);
            if (cli_hm_truthy(json_object_get(var, "description"))) {
                CLI_HM_PUT(b, "// ");
                cli_hm_str(b, json_object_get(var, "description"));
            }
            if (def) {
                CLI_HM_PUT(b, "                    // default: ");
                cli_tools_dump(b, def, 0);
            }
            if (i + 1 < json_array_size(one)) CLI_HM_PUT(b, " | \n");
        }
    } else if (ts && !strcmp(ts, "string")) {
        const json_t *e = json_object_get(spec, "enum");
        if (cli_hm_truthy(e) && json_is_array(e)) {
            for (size_t i = 0; i < json_array_size(e); i++) {
                if (i) CLI_HM_PUT(b, "\" | \"");
                else CLI_HM_PUT(b, "\"");
                cli_hm_str(b, json_array_get(e, i));
            }
            CLI_HM_PUT(b, "\"");
        } else {
            if (nullable) CLI_HM_PUT(b, "string | null");
            else CLI_HM_PUT(b, "string");
        }
    } else if (ts && (!strcmp(ts, "number") || !strcmp(ts, "integer") || !strcmp(ts, "boolean"))) {
        cli_sb_printf(b, "%s", strcmp(ts, "boolean") ? "number" : "boolean");
    } else if (ts && !strcmp(ts, "object")) {
        const json_t *props = json_object_get(spec, "properties"), *req = json_object_get(spec, "required");
        if (!cli_hm_truthy(props) || !json_is_object(props)) {
            CLI_HM_PUT(b, "object");
            return;
        }
        CLI_HM_PUT(b, "{\n");
        const char *name;
        json_t *ps;
        size_t k = 0;
        json_object_foreach((json_t *)props, name, ps) {
            const char *opt = cli_hm_required(req, name) ? "" : "?";
            cli_sb_printf(b, "%s%s%s: \n                ", k++ ? ", " : "", name, opt);
            cli_hm_type(b, ps, depth + 1);
        }
        CLI_HM_PUT(b, "}");
    } else {
        CLI_HM_PUT(b, "any");
    }
}

// The developer message's "# Tools" part: the functions namespace (render_tool_namespace).
static void cli_hm_tools(const struct cli_tools *t, struct cli_strbuf *b) {
    CLI_HM_PUT(b, "# Tools\n\n## functions\n\nnamespace functions {\n\n");
    for (int i = 0; i < t->n; i++) {
        const json_t *fn = cli_tools_fn(t, i), *desc = json_object_get(fn, "description");
        const json_t *par = json_object_get(fn, "parameters"), *props = json_object_get(par, "properties");
        const json_t *req = json_object_get(par, "required");
        if (json_is_string(desc)) {   // (without one the template fails; the line is left out)
            CLI_HM_PUT(b, "// ");
            cli_hm_str(b, desc);
            CLI_HM_PUT(b, "\n");
        }
        cli_sb_printf(b, "type %s = ", cli_tools_name(t, i));
        if (!cli_hm_truthy(props) || !json_is_object(props)) {
            CLI_HM_PUT(b, "() => any;\n\n");
            continue;
        }
        CLI_HM_PUT(b, "(_: {\n");
        const char *name;
        json_t *ps;
        json_object_foreach((json_t *)props, name, ps) {
            const json_t *pd = json_object_get(ps, "description"), *def = json_object_get(ps, "default");
            if (cli_hm_truthy(pd) && json_is_string(pd)) {
                CLI_HM_PUT(b, "// ");
                cli_hm_str(b, pd);
                CLI_HM_PUT(b, "\n");
            }
            cli_sb_printf(b, "%s%s: ", name, cli_hm_required(req, name) ? "" : "?");
            cli_hm_type(b, ps, 0);
            if (def) {   // (an enum's and a oneOf's default as text, others as JSON)
                const bool en = cli_hm_truthy(json_object_get(ps, "enum"));
                const bool one = cli_hm_truthy(json_object_get(ps, "oneOf"));
                if (one && !en) CLI_HM_PUT(b, "// default: ");
                else CLI_HM_PUT(b, ", // default: ");
                if (en || one) cli_hm_str(b, def);
                else cli_tools_dump(b, def, 0);
            }
            CLI_HM_PUT(b, ",\n");
        }
        CLI_HM_PUT(b, "}) => any;\n\n");
    }
    CLI_HM_PUT(b, "} // namespace functions");
}

// The conversation in the harmony format as gpt-oss's template renders it with tools: the system
// message (llm_chat_apply's, and with tools the line on where calls go), the developer message
// (a first system or developer message as its instructions, then the tools), the turns; calls and
// results as the template writes them (one call a message: its first), the assistant's turn opened.
static bool cli_tools_harmony_render(struct cli_jreq *q, json_t *v, const struct llm_chat_message *m, int n) {
    const struct cli_tools *t = &q->tools;
    struct cli_strbuf out = {0};
    int len = llm_chat_apply("harmony", NULL, 0, false, NULL, 0);
    char *sys = len > 7 ? malloc((size_t)len + 1) : NULL;
    if (!sys) cli_die("out of memory");
    llm_chat_apply("harmony", NULL, 0, false, sys, (size_t)len + 1);
    cli_sb_put(&out, sys, (size_t)len - 7);   // (less its <|end|>)
    free(sys);
    if (t->active) CLI_HM_PUT(&out, "\nCalls to these tools must go to the commentary channel: 'functions'.");
    CLI_HM_PUT(&out, "<|end|>");
    const int first = n > 0 && (cli_tools_role(m, 0, "system") || cli_tools_role(m, 0, "developer"));
    if ((first && *m[0].content) || t->active) {
        CLI_HM_PUT(&out, "<|start|>developer<|message|>");
        if (first && *m[0].content) cli_sb_printf(&out, "# Instructions\n\n%s\n\n", m[0].content);
        if (t->active) cli_hm_tools(t, &out);
        CLI_HM_PUT(&out, "<|end|>");
    }
    bool ok = true;
    json_t *last_call = NULL;   // the name of the last call (a tool message's sender)
    for (int i = first; i < n && ok; i++) {
        json_t *x = json_array_get(v, (size_t)i), *calls = cli_tools_msg_calls(q, (size_t)i, x, &ok);
        if (!ok) break;
        if (calls && cli_tools_role(m, i, "assistant")) {
            bool final_later = false;   // an answer after it: its analysis (the content) is dropped
            for (int j = i + 1; j < n && !final_later; j++)
                final_later = cli_tools_role(m, j, "assistant") &&
                              json_array_size(json_object_get(json_array_get(v, (size_t)j), "tool_calls")) == 0;
            // its reasoning (content, else reasoning_content or thinking as clients send it back) as an
            // analysis message, unless an answer comes later
            const char *why = *m[i].content ? m[i].content : json_string_value(json_object_get(x, "reasoning_content"));
            if (!why || !*why) why = json_string_value(json_object_get(x, "thinking"));
            if (why && *why && !final_later)
                cli_sb_printf(&out, "<|start|>assistant<|channel|>analysis<|message|>%s<|end|>", why);
            json_t *c = json_array_get(calls, 0);
            json_decref(last_call);
            last_call = json_incref(json_object_get(c, "name"));
            cli_sb_printf(&out, "<|start|>assistant to=functions.%s<|channel|>commentary json<|message|>",
                          json_string_value(last_call));
            cli_tools_dump(&out, json_object_get(c, "arguments"), 0);
            CLI_HM_PUT(&out, "<|call|>");
        } else if (calls) {
            ok = cli_jreq_fail_at(q, "messages", "messages[%d].tool_calls: only an assistant message makes calls", i);
        } else if (cli_tools_role(m, i, "tool")) {
            if (!last_call) {
                ok = cli_jreq_fail_at(q, "messages", "messages[%d]: a tool result with no call of the assistant "
                                      "before it", i);
                break;
            }
            cli_sb_printf(&out, "<|start|>functions.%s to=assistant<|channel|>commentary<|message|>",
                          json_string_value(last_call));
            json_t *s = cli_json_cstr(m[i].content);
            cli_tools_dump(&out, s, 0);
            json_decref(s);
            CLI_HM_PUT(&out, "<|end|>");
        } else if (cli_tools_role(m, i, "assistant")) {
            cli_sb_printf(&out, "<|start|>assistant<|channel|>final<|message|>%s<|end|>", m[i].content);
            json_decref(last_call);
            last_call = NULL;
        } else if (cli_tools_role(m, i, "user")) {
            cli_sb_printf(&out, "<|start|>user<|message|>%s<|end|>", m[i].content);
        }
        json_decref(calls);
    }
    json_decref(last_call);
    CLI_HM_PUT(&out, "<|start|>assistant");
    if (ok) q->chat_text = out.p;
    else free(out.p);
    return ok;
}

// --- parsing the model's calls ---

// A call in the text: the name's bytes, the arguments' (args_end: as far as they have come).
// compact: Mistral's later form, NAME[ARGS]{...} (each call after its own [TOOL_CALLS]).
struct cli_tcall { size_t name_at, name_len, args_at, args_end; bool compact; };
struct cli_tparse {
    size_t content_end;        // the content: text[0..content_end)
    size_t safe;               // streamed: the content that later text cannot take back
    int n;                     // calls
    struct cli_tcall c[CLI_TOOLS_MAX_CALLS];
};

static bool cli_tp_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t cli_tp_ws(const char *s, size_t n, size_t i) {
    while (i < n && cli_tp_blank(s[i])) i++;
    return i;
}

// s[0..p) without its trailing white space: its length.
static size_t cli_tp_rtrim(const char *s, size_t p) {
    while (p > 0 && cli_tp_blank(s[p - 1])) p--;
    return p;
}

// The literal lit at s[i..n): YES (*end past it), MAYBE (the text ends inside it), NO.
static int cli_tp_lit(const char *s, size_t n, size_t i, const char *lit, size_t *end) {
    size_t k = strlen(lit), m = i < n ? CLI_MIN(n - i, k) : 0;
    if (m && memcmp(s + i, lit, m)) return CLI_TP_NO;
    if (m < k) return CLI_TP_MAYBE;
    *end = i + k;
    return CLI_TP_YES;
}

// A JSON string at s[i..n) (escapes skipped; whether they are valid is Jansson's to say).
static int cli_tp_string(const char *s, size_t n, size_t i, size_t *end) {
    if (i >= n) return CLI_TP_MAYBE;
    if (s[i] != '"') return CLI_TP_NO;
    for (i++; i < n; i++) {
        if (s[i] == '"') {
            *end = i + 1;
            return CLI_TP_YES;
        }
        if ((unsigned char)s[i] < 0x20) return CLI_TP_NO;
        if (s[i] == '\\' && ++i == n) break;
    }
    return CLI_TP_MAYBE;
}

static bool cli_tp_scalar(char c) { return isalnum((unsigned char)c) || c == '.' || c == '+' || c == '-'; }

// The end of the JSON value at s[i..n) by its structure: brackets matched, strings skipped,
// scalars as runs of their characters. YES: *end past it; MAYBE: the text ends inside it (*end:
// n); NO: *end where it goes wrong.
static int cli_tp_value(const char *s, size_t n, size_t i, size_t *end) {
    char stack[CLI_TOOLS_MAX_DEPTH];
    int depth = 0;
    *end = i;
    while (i < n) {
        char c = s[i];
        size_t e;
        if (c == '"') {
            int r = cli_tp_string(s, n, i, &e);
            if (r != CLI_TP_YES) { *end = r == CLI_TP_MAYBE ? n : i; return r; }
            i = e;
        } else if (c == '{' || c == '[') {
            if (depth == CLI_TOOLS_MAX_DEPTH) return CLI_TP_NO;
            stack[depth++] = c == '{' ? '}' : ']';
            i++;
        } else if (c == '}' || c == ']') {
            if (!depth || stack[depth - 1] != c) return CLI_TP_NO;
            depth--;
            i++;
        } else if (cli_tp_scalar(c)) {
            while (i < n && cli_tp_scalar(s[i])) i++;
            if (!depth && i == n) break;   // a number or literal may go on
        } else if (depth && (c == ',' || c == ':' || cli_tp_blank(c))) {
            i++;
        } else {
            return CLI_TP_NO;
        }
        *end = i;
        if (!depth) return CLI_TP_YES;
    }
    *end = n;
    return CLI_TP_MAYBE;
}

// s[0..len) is a tool's name (whole) or the start of one.
static bool cli_tp_name(const struct cli_tools *t, const char *s, size_t len, bool whole) {
    for (int i = 0; i < t->n; i++) {
        const char *name = cli_tools_name(t, i);
        if ((whole ? strlen(name) == len : strlen(name) >= len) && !memcmp(name, s, len)) return true;
    }
    return false;
}

// A call's head at s[i..n): {"name": "NAME", "arguments": {  ("parameters" too), NAME a tool's.
static int cli_tp_head(const struct cli_tools *t, const char *s, size_t n, size_t i, struct cli_tcall *c) {
    static const char *const open[] = {"{", "\"name\"", ":"};
    size_t e, e2;
    int r;
    for (int k = 0; k < 3; k++) {
        if ((r = cli_tp_lit(s, n, cli_tp_ws(s, n, i), open[k], &e)) != CLI_TP_YES) return r;
        i = e;
    }
    i = cli_tp_ws(s, n, i);
    if ((r = cli_tp_string(s, n, i, &e)) == CLI_TP_NO) return r;
    size_t len = (r == CLI_TP_YES ? e - 1 : n) - CLI_MIN(i + 1, n);
    if (!cli_tp_name(t, s + i + 1, len, r == CLI_TP_YES)) return CLI_TP_NO;
    if (r == CLI_TP_MAYBE) return r;
    c->name_at = i + 1;
    c->name_len = len;
    if ((r = cli_tp_lit(s, n, cli_tp_ws(s, n, e), ",", &e)) != CLI_TP_YES) return r;
    i = cli_tp_ws(s, n, e);
    int r1 = cli_tp_lit(s, n, i, "\"arguments\"", &e), r2 = cli_tp_lit(s, n, i, "\"parameters\"", &e2);
    if (r1 != CLI_TP_YES && r2 != CLI_TP_YES)
        return r1 == CLI_TP_MAYBE || r2 == CLI_TP_MAYBE ? CLI_TP_MAYBE : CLI_TP_NO;
    if ((r = cli_tp_lit(s, n, cli_tp_ws(s, n, r1 == CLI_TP_YES ? e : e2), ":", &e)) != CLI_TP_YES) return r;
    i = cli_tp_ws(s, n, e);
    if (i == n) return CLI_TP_MAYBE;
    if (s[i] != '{') return CLI_TP_NO;
    c->args_at = i;
    c->compact = false;
    return CLI_TP_YES;
}

// Mistral's compact call at s[i..n) (its templates from Mistral Small 3.1 on): NAME[ARGS]{, NAME
// a tool's.
static int cli_tp_compact(const struct cli_tools *t, const char *s, size_t n, size_t i, struct cli_tcall *c) {
    size_t j = i, e;
    int r;
    while (j < n && s[j] != '[' && j - i < 256) j++;
    if (!cli_tp_name(t, s + i, j - i, j < n)) return CLI_TP_NO;
    if (j == n) return CLI_TP_MAYBE;
    if ((r = cli_tp_lit(s, n, j, "[ARGS]", &e)) != CLI_TP_YES) return r;
    e = cli_tp_ws(s, n, e);
    if (e == n) return CLI_TP_MAYBE;
    if (s[e] != '{') return CLI_TP_NO;
    *c = (struct cli_tcall){.name_at = i, .name_len = j - i, .args_at = e, .compact = true};
    return CLI_TP_YES;
}

// After a call's arguments: other members ("id": ...) and the closing brace.
static int cli_tp_close(const char *s, size_t n, size_t i, size_t *end) {
    for (int k = 0; k < 64; k++) {
        size_t e;
        int r;
        i = cli_tp_ws(s, n, i);
        if (i == n) return CLI_TP_MAYBE;
        if (s[i] == '}') {
            *end = i + 1;
            return CLI_TP_YES;
        }
        if (s[i] != ',') return CLI_TP_NO;
        if ((r = cli_tp_string(s, n, cli_tp_ws(s, n, i + 1), &e)) != CLI_TP_YES) return r;
        if ((r = cli_tp_lit(s, n, cli_tp_ws(s, n, e), ":", &e)) != CLI_TP_YES) return r;
        if ((r = cli_tp_value(s, n, cli_tp_ws(s, n, e), &e)) != CLI_TP_YES) return r;
        i = e;
    }
    return CLI_TP_NO;
}

// The first call at s[p..n): the family's marker (Mistral's optional at the text's start p0),
// what opens its list, the head.
static int cli_tp_first(const struct cli_tools *t, const char *s, size_t n, size_t p, size_t p0, struct cli_tcall *c) {
    size_t e;
    int r;
    if (t->format == CLI_TOOLS_HERMES) {
        if ((r = cli_tp_lit(s, n, p, "<tool_call>", &e)) != CLI_TP_YES) return r;
        p = e;
    } else if (t->format == CLI_TOOLS_MISTRAL) {
        if ((r = cli_tp_lit(s, n, p, "[TOOL_CALLS]", &e)) == CLI_TP_YES) p = e;
        else if (p != p0 || (r == CLI_TP_MAYBE && p + 1 < n)) return r;
        p = cli_tp_ws(s, n, p);
        if ((r = cli_tp_lit(s, n, p, "[", &e)) != CLI_TP_YES) {   // the list, or the compact form
            int rc = cli_tp_compact(t, s, n, p, c);
            return rc == CLI_TP_NO ? r : rc;
        }
        p = e;
    }
    return cli_tp_head(t, s, n, p, c);
}

// The next call after one ending at s[i] (its closing brace past): Hermes </tool_call> then
// <tool_call>, Llama 3 "; ", Mistral ", " in the list.
static int cli_tp_next(const struct cli_tools *t, const char *s, size_t n, size_t i, struct cli_tcall *c) {
    size_t e;
    int r;
    i = cli_tp_ws(s, n, i);
    if (t->format == CLI_TOOLS_HERMES) {
        if ((r = cli_tp_lit(s, n, i, "</tool_call>", &e)) != CLI_TP_YES) return r;
        return cli_tp_first(t, s, n, cli_tp_ws(s, n, e), 0, c);
    }
    if (c->compact) {   // Mistral's compact form: [TOOL_CALLS]NAME[ARGS]{...} again
        if ((r = cli_tp_lit(s, n, i, "[TOOL_CALLS]", &e)) != CLI_TP_YES) return r;
        return cli_tp_compact(t, s, n, cli_tp_ws(s, n, e), c);
    }
    if ((r = cli_tp_lit(s, n, i, t->format == CLI_TOOLS_LLAMA3 ? ";" : ",", &e)) != CLI_TP_YES) return r;
    return cli_tp_head(t, s, n, e, c);
}

// Where the family's marker next occurs in s[from..n), or begins at the text's end; n + 1: nowhere.
static size_t cli_tp_marker(const struct cli_tools *t, const char *s, size_t n, size_t from) {
    const char *mk = t->format == CLI_TOOLS_HERMES    ? "<tool_call>"
                     : t->format == CLI_TOOLS_MISTRAL ? "[TOOL_CALLS]" : NULL;
    if (!mk) return n + 1;
    size_t k = strlen(mk);
    for (size_t p = from; p < n; p++)
        if (s[p] == mk[0] && !memcmp(s + p, mk, CLI_MIN(k, n - p))) return p;
    return n + 1;
}

// The calls from the first (c, its head read) on. strict (a whole answer): the calls complete
// with arguments that are JSON, up to the first that is not (the first not: none, r->n 0).
static void cli_tp_calls(const struct cli_tools *t, const char *s, size_t n, bool strict, struct cli_tcall c,
                         struct cli_tparse *r) {
    for (;;) {
        size_t e, end;
        int st = cli_tp_value(s, n, c.args_at, &e);
        c.args_end = e;
        r->c[r->n++] = c;
        end = e;
        if (st == CLI_TP_YES && !c.compact) st = cli_tp_close(s, n, e, &end);
        if (st == CLI_TP_YES && strict) {   // the arguments: JSON, an object
            json_error_t je;
            json_t *a = json_loadb(s + c.args_at, c.args_end - c.args_at, 0, &je);
            st = json_is_object(a) ? CLI_TP_YES : CLI_TP_NO;
            json_decref(a);
        }
        if (st != CLI_TP_YES) {
            if (strict) r->n--;
            return;
        }
        if (t->single || r->n == CLI_TOOLS_MAX_CALLS || cli_tp_next(t, s, n, end, &c) != CLI_TP_YES) return;
    }
}

// What text[0..n) holds. final: the text is whole (nothing held back as a call's possible
// start); strict: a whole answer's calls (see cli_tp_calls).
static void cli_tools_parse(const struct cli_tools *t, const char *s, size_t n, bool final, bool strict,
                            struct cli_tparse *r) {
    memset(r, 0, sizeof(*r));
    r->content_end = r->safe = n;
    size_t p0 = cli_tp_ws(s, n, 0), p = t->format == CLI_TOOLS_HERMES ? cli_tp_marker(t, s, n, 0) : p0;
    while (p <= n) {
        struct cli_tcall c;
        int st = cli_tp_first(t, s, n, p, p0, &c);
        if (st == CLI_TP_MAYBE && !final) {
            r->safe = cli_tp_rtrim(s, p);
            return;
        }
        if (st == CLI_TP_YES) {
            r->content_end = r->safe = cli_tp_rtrim(s, p);
            cli_tp_calls(t, s, n, strict, c, r);
            if (!r->n) r->content_end = r->safe = n;
            return;
        }
        if (t->format == CLI_TOOLS_LLAMA3) break;   // its calls open the answer, or there are none
        p = cli_tp_marker(t, s, n, p + 1);
    }
    // calls may still begin after a marker: the white space at the end waits
    if (!final && t->format != CLI_TOOLS_LLAMA3) r->safe = cli_tp_rtrim(s, n);
}

// --- the answer: content and tool_calls, whole or streamed ---

// Call k of a choice's id: "call_" and 24 hex digits, or for Mistral (whose template wants them)
// 9 letters and digits; derived from the completion's id (random), the choice and k.
static void cli_tools_id(const struct cli_tools *t, const char *id, int choice, int k, char out[32]) {
    uint64_t h = 1469598103934665603ull;
    for (const char *p = id; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    uint64_t x[2];
    for (int j = 0; j < 2; j++) {   // splitmix64 of (h, choice, k, j)
        uint64_t z = h + 0x9E3779B97F4A7C15ull * (((uint64_t)choice << 24) + (uint64_t)k * 4 + (uint64_t)j + 1);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        x[j] = z ^ (z >> 31);
    }
    if (t->format == CLI_TOOLS_MISTRAL) {
        static const char a[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        for (int j = 0; j < 9; j++, x[0] /= 62) out[j] = a[x[0] % 62];
        out[9] = 0;
    } else {
        snprintf(out, 32, "call_%016llx%08llx", (unsigned long long)x[0], (unsigned long long)(x[1] >> 32));
    }
}

// A call's JSON: whole {"id", "type", "function": {"name", "arguments"}}; streamed (index >= 0)
// with "index", its first delta with id, type and name (args NULL: arguments ""), the others the
// arguments' next piece alone.
static json_t *cli_tools_call_json(const struct cli_tools *t, const char *s, const struct cli_tcall *c, const char *id,
                                   int choice, int k, int index, const char *args, size_t n_args, bool head) {
    json_t *o = cli_jcheck(json_object()), *f = cli_jcheck(json_object());
    char cid[32];
    if (index >= 0) cli_jset(o, "index", cli_json_int(index));
    if (head) {
        cli_tools_id(t, id, choice, k, cid);
        cli_jset(o, "id", cli_json_cstr(cid));
        cli_jset(o, "type", cli_json_cstr("function"));
        cli_jset(f, "name", cli_json_bytes(s + c->name_at, c->name_len));
    }
    cli_jset(f, "arguments", cli_json_bytes(args ? args : "", args ? n_args : 0));
    cli_jset(o, "function", f);
    return o;
}

void cli_tools_message(const struct cli_tools *t, const char *id, int choice, const char *text, size_t n, json_t *m) {
    struct cli_tparse r = {.n = 0};
    if (t->active) cli_tools_parse(t, text, n, true, true, &r);
    if (!r.n) {
        cli_jset(m, "content", cli_json_bytes(text, n));
        return;
    }
    cli_jset(m, "content", r.content_end ? cli_json_bytes(text, r.content_end) : cli_jcheck(json_null()));
    json_t *calls = cli_jcheck(json_array());
    for (int k = 0; k < r.n; k++)
        cli_jpush(calls, cli_tools_call_json(t, text, &r.c[k], id, choice, k, -1, text + r.c[k].args_at,
                                             r.c[k].args_end - r.c[k].args_at, true));
    cli_jset(m, "tool_calls", calls);
}

// A delta {"tool_calls": [call]}.
static json_t *cli_tools_delta(json_t *call) {
    json_t *d = cli_jcheck(json_object()), *a = cli_jcheck(json_array());
    cli_jpush(a, call);
    cli_jset(d, "tool_calls", a);
    return d;
}

json_t *cli_chat_deltas(const struct cli_tools *t, struct cli_tool_stream *st, const char *id, int choice,
                        const struct cli_strbuf *text, bool force, bool final) {
    json_t *ds = cli_jcheck(json_array());
    const char *s = text->p ? text->p : "";
    struct cli_tparse r = {.safe = text->n, .n = 0};
    if (t->active) cli_tools_parse(t, s, text->n, final, false, &r);
    if (!st->calls_sent && (r.safe > st->content_sent || (force && !t->active))) {
        json_t *d = cli_jcheck(json_object());
        size_t to = CLI_MAX(r.safe, st->content_sent);
        cli_jset(d, "content", cli_json_bytes(s + st->content_sent, to - st->content_sent));
        cli_jpush(ds, d);
        st->content_sent = to;
    }
    for (int k = st->calls_sent ? st->calls_sent - 1 : 0; k < r.n; k++) {
        size_t len = r.c[k].args_end - r.c[k].args_at;
        if (k >= st->calls_sent) {
            cli_jpush(ds, cli_tools_delta(cli_tools_call_json(t, s, &r.c[k], id, choice, k, k, NULL, 0, true)));
            st->calls_sent = k + 1;
            st->args_sent = 0;
        }
        if (len > st->args_sent) {
            const char *piece = s + r.c[k].args_at + st->args_sent;
            cli_jpush(ds, cli_tools_delta(cli_tools_call_json(t, s, &r.c[k], id, choice, k, k, piece,
                                                              len - st->args_sent, false)));
            st->args_sent = len;
        }
    }
    if (force && !json_array_size(ds)) cli_jpush(ds, cli_jcheck(json_object()));
    return ds;
}

const char *cli_tools_finish(const json_t *choice, int calls_streamed, const char *finish) {
    bool calls = calls_streamed > 0 || json_object_get(json_object_get(choice, "message"), "tool_calls");
    return calls && !strcmp(finish, "stop") ? "tool_calls" : finish;
}

// --- gpt-oss's harmony format: <|channel|>NAME[ to=...][<|constrain|>...]<|message|>BODY<|end|>,
// <|start|>assistant before each message after the first, <|return|> / <|call|> at the end ---

static bool cli_hm_at(const char *s, size_t n, size_t i, const char *m) {
    const size_t k = strlen(m);
    return n - i >= k && memcmp(s + i, m, k) == 0;
}

// The end of marker m found from i (its position in *at), or 0 when it has not come yet.
static size_t cli_hm_find(const char *s, size_t n, size_t i, const char *m, size_t *at) {
    const size_t k = strlen(m);
    for (size_t j = i; j + k <= n; j++)
        if (memcmp(s + j, m, k) == 0) { *at = j; return j + k; }
    return 0;
}

static const char *const cli_hm_marks[] = {"<|channel|>", "<|start|>", "<|message|>", "<|end|>", "<|return|>",
                                            "<|call|>"};

// Whether s[i..n) is the first bytes of a marker (its rest still to come).
static bool cli_hm_partial(const char *s, size_t n, size_t i) {
    for (size_t m = 0; m < sizeof(cli_hm_marks) / sizeof(cli_hm_marks[0]); m++)
        if (n - i < strlen(cli_hm_marks[m]) && strncmp(cli_hm_marks[m], s + i, n - i) == 0) return true;
    return false;
}

void cli_harmony_feed(struct cli_harmony *h, const char *s, size_t n, bool final) {
    while (h->pos < n) {
        const size_t i = h->pos;
        size_t at, end, ch_at;
        // (a recipient where the answer begins: its role's header, after the prompt's <|start|>assistant)
        if (cli_hm_at(s, n, i, "<|channel|>") || cli_hm_at(s, n, i, "<|start|>") ||
            (i == 0 && cli_hm_at(s, n, 0, " to="))) {
            // a header (role, channel, recipient) up to <|message|>, where the channel is known
            bool whole = true;
            if (!(end = cli_hm_find(s, n, CLI_MAX(i, h->scan), "<|message|>", &at))) {
                // (where to look again: a header that never ends is not read twice)
                h->scan = n > i + 10 ? n - 10 : i;
                if (!final) return;
                end = at = n;   // (a whole text that ends in a header: nothing more)
                whole = false;
            }
            h->scan = 0;
            if (h->chan == 2) CLI_HM_PUT(&h->content, "}\n</tool_call>");   // (a call whose end marker did not come)
            h->chan = cli_hm_find(s, at, i, "<|channel|>", &ch_at) && cli_hm_at(s, at, ch_at + 11, "analysis");
            size_t to;
            // a call: to=functions.NAME (NAME as a tool's name may be), in the commentary channel or, as
            // gpt-oss also writes them, the analysis one
            if (h->calls && whole && (to = cli_hm_find(s, at, i, "to=functions.", &ch_at))) {
                size_t e = to;
                while (e < at && (isalnum((unsigned char)s[e]) || s[e] == '_' || s[e] == '-')) e++;
                cli_sb_printf(&h->content, "<tool_call>\n{\"name\": \"%.*s\", \"arguments\": ", (int)(e - to), s + to);
                h->chan = 2;
            }
            h->pos = end;
            continue;
        }
        if (cli_hm_at(s, n, i, "<|message|>")) {   // (one without a header: the body goes on where it was)
            h->pos = i + 11;
            continue;
        }
        bool mark = false;
        for (size_t m = 3; m < sizeof(cli_hm_marks) / sizeof(cli_hm_marks[0]) && !mark; m++)
            if (cli_hm_at(s, n, i, cli_hm_marks[m])) {   // a message ends
                h->pos = i + strlen(cli_hm_marks[m]);
                if (h->chan == 2) CLI_HM_PUT(&h->content, "}\n</tool_call>");
                h->chan = 0;
                mark = true;
            }
        if (mark) continue;
        if (s[i] == '<' && !final && cli_hm_partial(s, n, i)) return;
        if (i == 0 && !final && n < 4 && !strncmp(" to=", s, n)) return;
        size_t j = i + 1;   // body text, up to the next '<'
        while (j < n && s[j] != '<') j++;
        cli_sb_put(h->chan == 1 ? &h->reasoning : &h->content, s + i, j - i);
        h->pos = j;
    }
    if (final && h->chan == 2 && h->pos >= n) {   // (a call at the end of the answer, its <|call|> not shown)
        CLI_HM_PUT(&h->content, "}\n</tool_call>");
        h->chan = 0;
    }
}

void cli_harmony_free(struct cli_harmony *h) {
    free(h->content.p);
    free(h->reasoning.p);
    memset(h, 0, sizeof(*h));
}
