// Tool calling in llm serve's chat (cli/tools.c) without a server or a model: requests with tools
// rendered in each family's format (Hermes for chatml and qwen3, Llama 3.1 JSON, Mistral v3, the
// generic Hermes fallback on gemma), written out by hand from the official templates; the calls
// of fixed answers parsed per family, whole and streamed byte by byte (the stream's deltas put
// together give the whole answer), malformed calls left as content; the grammars of
// tool_choice "required" and of a named function compiled and checked on calls they must take
// and refuse; the requests' errors.
#include "../llm.c"

#include "../cli/args.c"
#include "../cli/request.c"
#include "../cli/tools.c"
#include "test.h"

// The program's usage text and help (cli/main.c, not linked here: it has main).
const char cli_usage[] = "";
void cli_print_command_help(const char *cmd) { (void)cmd; }

#define WEATHER "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather now\", " \
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"type\": " \
    "\"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}"
#define TIME "{\"type\": \"function\", \"function\": {\"name\": \"get_time\"}}"
#define TOOLS "[" WEATHER ", " TIME "]"
// a round: the user asks, the assistant calls, the tool answers
#define ROUND_TURNS "[{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", \"content\": " \
    "\"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"id\": \"abcDEF123\", " \
    "\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": " \
    "\"{\\\"city\\\":\\\"Paris\\\"}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": " \
    "\"{\\\"temp\\\": 22}\"}"
#define ROUND ROUND_TURNS "]"
// ... answered, and asked again
#define ROUND_ANSWERED ROUND_TURNS ", {\"role\": \"assistant\", \"content\": \"22 degrees.\"}, {\"role\": \"user\", " \
    "\"content\": \"And Rome?\"}]"

static bool parse_req(struct cli_jreq *q, const char *tmpl, const char *body) {
    cli_jreq_init(q, CLI_JREQ_CHAT);
    return cli_jreq_parse(body, strlen(body), q, tmpl);
}

static void expect_prompt(const char *tmpl, const char *body, const char *want) {
    struct cli_jreq q;
    bool ok = parse_req(&q, tmpl, body);
    EXPECT(ok && !strcmp(q.chat_text, want), "%s:\n got  [%s]\n want [%s]", tmpl, ok ? q.chat_text : q.err, want);
    cli_jreq_free(&q);
}

#define HERMES_SYS "You are terse.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" \
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" WEATHER "\n" TIME \
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " \
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}" \
    "\n</tool_call>"
#define HERMES_CALL "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"
#define HERMES_RESULT "<tool_response>\n{\"temp\": 22}\n</tool_response>"

static void test_render(void) {
    const char *chatml = "<|im_start|>system\n" HERMES_SYS "<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                         "<|im_start|>assistant\n" HERMES_CALL "<|im_end|>\n<|im_start|>user\n" HERMES_RESULT
                         "<|im_end|>\n<|im_start|>assistant\n";
    expect_prompt("chatml", "{\"messages\": " ROUND ", \"tools\": " TOOLS "}", chatml);
    expect_prompt("qwen3", "{\"tools\": " TOOLS ", \"messages\": " ROUND "}", chatml);   // tools after messages too
    expect_prompt("gemma", "{\"messages\": " ROUND ", \"tools\": " TOOLS "}",
                  "<start_of_turn>user\n" HERMES_SYS "\n\nWeather in Paris?<end_of_turn>\n<start_of_turn>model\n"
                  HERMES_CALL "<end_of_turn>\n<start_of_turn>user\n" HERMES_RESULT "<end_of_turn>\n"
                  "<start_of_turn>model\n");
    expect_prompt("llama3", "{\"messages\": " ROUND ", \"tools\": " TOOLS "}",
                  "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December "
                  "2023\nToday Date: 26 Jul 2024\n\nYou are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                  "Given the following functions, please respond with a JSON for a function call with its proper "
                  "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
                  "\"parameters\": dictionary of argument name and its value}. Do not use variables.\n\n{\n    \"type\": "
                  "\"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n        \"description\": "
                  "\"Weather now\",\n        \"parameters\": {\n            \"type\": \"object\",\n            "
                  "\"properties\": {\n                \"city\": {\n                    \"type\": \"string\"\n          "
                  "      },\n                \"unit\": {\n                    \"type\": \"string\",\n                 "
                  "   \"enum\": [\n                        \"celsius\",\n                        \"fahrenheit\"\n      "
                  "              ]\n                }\n            },\n            \"required\": [\n                "
                  "\"city\"\n            ]\n        }\n    }\n}\n\n{\n    \"type\": \"function\",\n    \"function\": {\n"
                  "        \"name\": \"get_time\"\n    }\n}\n\nWeather in Paris?<|eot_id|><|start_header_id|>assistant"
                  "<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>"
                  "<|start_header_id|>ipython<|end_header_id|>\n\n{\"temp\": 22}<|eot_id|><|start_header_id|>assistant"
                  "<|end_header_id|>\n\n");
    expect_prompt("mistral", "{\"messages\": " ROUND ", \"tools\": " TOOLS "}",
                  "[AVAILABLE_TOOLS] [" WEATHER ", " TIME "][/AVAILABLE_TOOLS][INST] You are terse.\n\nWeather in Paris? "
                  "[/INST][TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
                  "\"abcDEF123\"}]</s>[TOOL_RESULTS] {\"content\": {\"temp\": 22}, \"call_id\": \"abcDEF123\"}"
                  "[/TOOL_RESULTS]");
    // tool_choice "none": the tools are not shown; the round still is, in the family's format
    expect_prompt("chatml", "{\"messages\": " ROUND ", \"tools\": " TOOLS ", \"tool_choice\": \"none\"}",
                  "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                  "<|im_start|>assistant\n" HERMES_CALL "<|im_end|>\n<|im_start|>user\n" HERMES_RESULT
                  "<|im_end|>\n<|im_start|>assistant\n");
    // two results of one round: one user turn; an answer with text before its calls; no system message
    expect_prompt("chatml", "{\"tools\": [" TIME "], \"messages\": [{\"role\": \"user\", \"content\": \"t?\"}, {\"role\": "
                  "\"assistant\", \"content\": \"Two.\", \"tool_calls\": [{\"id\": \"a\", \"type\": \"function\", "
                  "\"function\": {\"name\": \"get_time\", \"arguments\": \"{}\"}}, {\"id\": \"b\", \"type\": \"function\", "
                  "\"function\": {\"name\": \"get_time\", \"arguments\": \"{}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": "
                  "\"a\", \"content\": \"1\"}, {\"role\": \"tool\", \"tool_call_id\": \"b\", \"content\": \"2\"}]}",
                  "<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n" TIME "\n"
                  "</tools>\n\nFor each function call, return a json object with function name and arguments within "
                  "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                  "<args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nt?<|im_end|>\n<|im_start|>assistant\n"
                  "Two.\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": "
                  "\"get_time\", \"arguments\": {}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n1\n"
                  "</tool_response>\n<tool_response>\n2\n</tool_response><|im_end|>\n<|im_start|>assistant\n");
    // Mistral: a result that is not JSON is quoted; the tools go before the last user turn
    expect_prompt("mistral", "{\"tools\": [" TIME "], \"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": "
                  "\"assistant\", \"content\": \"b\"}, {\"role\": \"user\", \"content\": \"t?\"}, {\"role\": \"assistant\", "
                  "\"tool_calls\": [{\"id\": \"a1b2c3d4e\", \"type\": \"function\", \"function\": {\"name\": \"get_time\", "
                  "\"arguments\": \"{}\"}}]}, {\"role\": \"tool\", \"tool_call_id\": \"a1b2c3d4e\", \"content\": \"noon\"}]}",
                  "[INST] a [/INST]b</s>[AVAILABLE_TOOLS] [" TIME "][/AVAILABLE_TOOLS][INST] t? [/INST][TOOL_CALLS] "
                  "[{\"name\": \"get_time\", \"arguments\": {}, \"id\": \"a1b2c3d4e\"}]</s>[TOOL_RESULTS] {\"content\": "
                  "\"noon\", \"call_id\": \"a1b2c3d4e\"}[/TOOL_RESULTS]");
    // no tools, no tool messages: the template's own rendering, as before
    expect_prompt("chatml", "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": []}",
                  "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

// gpt-oss's harmony format with tools: the official template (openai-gpt-oss-120b.jinja) rendered
// by jinja2 as Hugging Face renders it (trim_blocks, lstrip_blocks, its tojson Python's
// json.dumps), printed by `python3 tests/chat_goldens.py --tools`; DATE stands for today's date.
#define HM_SEARCH \
    "{\"type\": \"function\", \"function\": {\"name\": \"search\", \"description\": \"Search the web\", \"" \
    "parameters\": {\"type\": \"object\", \"properties\": {\"query\": {\"type\": \"string\", \"descriptio" \
    "n\": \"What to look for\"}, \"max_results\": {\"type\": \"integer\", \"default\": 5}, \"tags\": {\"t" \
    "ype\": \"array\", \"items\": {\"type\": \"string\"}}, \"filters\": {\"type\": \"object\", \"properti" \
    "es\": {\"lang\": {\"type\": \"string\"}, \"year\": {\"type\": \"integer\"}}, \"required\": [\"lang\"" \
    "]}, \"pages\": {\"type\": \"array\", \"items\": {\"type\": \"object\", \"properties\": {\"n\": {\"ty" \
    "pe\": \"number\"}}}}, \"safe\": {\"type\": \"boolean\", \"default\": true}, \"mode\": {\"type\": \"s" \
    "tring\", \"enum\": [\"fast\", \"deep\"], \"default\": \"fast\"}, \"when\": {\"type\": [\"string\", \"" \
    "null\"]}, \"note\": {\"type\": \"string\", \"nullable\": true}, \"id\": {\"oneOf\": [{\"type\": \"st" \
    "ring\", \"description\": \"a name\"}, {\"type\": \"integer\"}]}, \"extra\": {}}, \"required\": [\"qu" \
    "ery\"]}}}"
#define HM_ROUND_WANT \
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cuto" \
    "ff: 2024-06\nCurrent date: DATE\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, fina" \
    "l. Channel must be included for every message.\nCalls to these tools must go to the commentary chann" \
    "el: 'functions'.<|end|><|start|>developer<|message|># Instructions\n\nYou are terse.\n\n# Tools\n\n#" \
    "# functions\n\nnamespace functions {\n\n// Weather now\ntype get_weather = (_: {\ncity: string,\nuni" \
    "t?: \"celsius\" | \"fahrenheit\",\n}) => any;\n\n// The time\ntype get_time = () => any;\n\n} // nam" \
    "espace functions<|end|><|start|>user<|message|>Weather in Paris?<|end|><|start|>assistant to=functio" \
    "ns.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"}<|call|><|start|>functions.g" \
    "et_weather to=assistant<|channel|>commentary<|message|>\"{\\\"temp\\\": 22}\"<|end|><|start|>assista" \
    "nt"
#define HM_SEARCH_WANT \
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cuto" \
    "ff: 2024-06\nCurrent date: DATE\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, fina" \
    "l. Channel must be included for every message.\nCalls to these tools must go to the commentary chann" \
    "el: 'functions'.<|end|><|start|>developer<|message|># Tools\n\n## functions\n\nnamespace functions {" \
    "\n\n// Search the web\ntype search = (_: {\n// What to look for\nquery: string,\nmax_results?: numbe" \
    "r, // default: 5,\ntags?: string[],\nfilters?: {\nlang: \n                string, year?: \n         " \
    "       number},\npages?: {\nn?: \n                number}[],\nsafe?: boolean, // default: true,\nmod" \
    "e?: \"fast\" | \"deep\", // default: fast,\nwhen?: string | null,\nnote?: string | null,\nid?: strin" \
    "g// a name | \nnumber,\nextra?: any,\n}) => any;\n\n} // namespace functions<|end|><|start|>user<|me" \
    "ssage|>Find it<|end|><|start|>assistant"
#define HM_ANSWERED_WANT \
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cuto" \
    "ff: 2024-06\nCurrent date: DATE\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, fina" \
    "l. Channel must be included for every message.\nCalls to these tools must go to the commentary chann" \
    "el: 'functions'.<|end|><|start|>developer<|message|># Instructions\n\nYou are terse.\n\n# Tools\n\n#" \
    "# functions\n\nnamespace functions {\n\n// Weather now\ntype get_weather = (_: {\ncity: string,\nuni" \
    "t?: \"celsius\" | \"fahrenheit\",\n}) => any;\n\n} // namespace functions<|end|><|start|>user<|messa" \
    "ge|>Weather in Paris?<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|m" \
    "essage|>{\"city\": \"Paris\"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentar" \
    "y<|message|>\"{\\\"temp\\\": 22}\"<|end|><|start|>assistant<|channel|>final<|message|>22 degrees.<|e" \
    "nd|><|start|>user<|message|>And Rome?<|end|><|start|>assistant"
#define HM_THINK_WANT \
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cuto" \
    "ff: 2024-06\nCurrent date: DATE\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, fina" \
    "l. Channel must be included for every message.\nCalls to these tools must go to the commentary chann" \
    "el: 'functions'.<|end|><|start|>developer<|message|># Instructions\n\nYou are terse.\n\n# Tools\n\n#" \
    "# functions\n\nnamespace functions {\n\n// Weather now\ntype get_weather = (_: {\ncity: string,\nuni" \
    "t?: \"celsius\" | \"fahrenheit\",\n}) => any;\n\n} // namespace functions<|end|><|start|>user<|messa" \
    "ge|>Weather in Paris?<|end|><|start|>assistant<|channel|>analysis<|message|>Need the weather.<|end|>" \
    "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"city\": \"Paris\"" \
    "}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>\"{\\\"temp\\\":" \
    " 22}\"<|end|><|start|>assistant"

static void expect_harmony_prompt(const char *body, const char *want) {
    char date[32] = "", full[8192];
    const time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(date, sizeof(date), "%Y-%m-%d", &tm);
    const char *d = strstr(want, "DATE");
    snprintf(full, sizeof(full), "%.*s%s%s", (int)(d - want), want, date, d + 4);
    expect_prompt("harmony", body, full);
}

static void test_render_harmony(void) {
    const char *time_d = "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"description\": \"The time\"}}";
    char body[4096];
    snprintf(body, sizeof(body), "{\"messages\": " ROUND ", \"tools\": [" WEATHER ", %s]}", time_d);
    expect_harmony_prompt(body, HM_ROUND_WANT);
    expect_harmony_prompt("{\"messages\": [{\"role\": \"user\", \"content\": \"Find it\"}], \"tools\": [" HM_SEARCH "]}",
                          HM_SEARCH_WANT);
    expect_harmony_prompt("{\"messages\": " ROUND_ANSWERED ", \"tools\": [" WEATHER "]}", HM_ANSWERED_WANT);
    // the reasoning before a call, sent back as reasoning_content: its analysis message
    expect_harmony_prompt("{\"messages\": [{\"role\": \"system\", \"content\": \"You are terse.\"}, {\"role\": \"user\", "
                          "\"content\": \"Weather in Paris?\"}, {\"role\": \"assistant\", \"content\": null, "
                          "\"reasoning_content\": \"Need the weather.\", \"tool_calls\": [{\"id\": \"abcDEF123\", \"type\": "
                          "\"function\", \"function\": {\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\":\\\"Paris\\\"}\"}}]}, "
                          "{\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"content\": \"{\\\"temp\\\": 22}\"}], "
                          "\"tools\": [" WEATHER "]}", HM_THINK_WANT);
    // numbers written back as the template's tojson (Python) writes them, not with 17 digits (an
    // exponent is written without its leading zero, 1e-7 where Python writes 1e-07)
    struct cli_jreq q;
    bool ok = parse_req(&q, "harmony", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": "
                        "\"assistant\", \"tool_calls\": [{\"id\": \"a\", \"type\": \"function\", \"function\": {\"name\": "
                        "\"get_weather\", \"arguments\": \"{\\\"lat\\\": 48.85, \\\"n\\\": 3}\"}}]}]}");
    EXPECT(ok && strstr(q.chat_text, "<|message|>{\"lat\": 48.85, \"n\": 3}<|call|>"),
           "harmony: numbers in a call's arguments: %s", ok ? q.chat_text : q.err);
    cli_jreq_free(&q);
    // a result with no call before it, and tool_choice "required": refused
    ok = parse_req(&q, "harmony", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"tool\", "
                        "\"tool_call_id\": \"a\", \"content\": \"1\"}], \"tools\": " TOOLS "}");
    EXPECT(!ok && strstr(q.err, "no call"), "harmony: a tool result with no call: %s", ok ? "accepted" : q.err);
    cli_jreq_free(&q);
    ok = parse_req(&q, "harmony", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": " TOOLS
                   ", \"tool_choice\": \"required\"}");
    EXPECT(!ok && strstr(q.err, "harmony"), "harmony: tool_choice required: %s", ok ? "accepted" : q.err);
    cli_jreq_free(&q);
}

// --- parsing ---

struct got { char *content; bool has_content; int n; char name[4][32], args[4][256], id[4][40]; };

static void got_free(struct got *g) { free(g->content); }

// The whole answer's message, read back.
static void got_whole(const struct cli_tools *t, const char *text, struct got *g) {
    memset(g, 0, sizeof(*g));
    json_t *m = cli_jcheck(json_object());
    cli_tools_message(t, "chatcmpl-0123456789abcdef", 0, text, strlen(text), m);
    json_t *c = json_object_get(m, "content"), *calls = json_object_get(m, "tool_calls");
    g->has_content = json_is_string(c);
    if (g->has_content) g->content = strdup(json_string_value(c));
    for (size_t k = 0; k < json_array_size(calls) && k < 4; k++, g->n++) {
        json_t *x = json_array_get(calls, k), *f = json_object_get(x, "function");
        snprintf(g->name[k], 32, "%s", json_string_value(json_object_get(f, "name")));
        snprintf(g->args[k], 256, "%s", json_string_value(json_object_get(f, "arguments")));
        snprintf(g->id[k], 40, "%s", json_string_value(json_object_get(x, "id")));
        EXPECT(!strcmp(json_string_value(json_object_get(x, "type")), "function"), "type");
    }
    EXPECT(!calls || json_array_size(calls) > 0, "an empty tool_calls");
    json_decref(m);
}

// The streamed answer (the text a byte at a time), its deltas put together; *leak: markup of a
// call in a content delta.
// A stream's deltas ds into g (content into *content); *leak: markup of a call in a content delta.
static void got_deltas(json_t *ds, struct got *g, struct cli_strbuf *content, bool *leak) {
    for (size_t j = 0; j < json_array_size(ds); j++) {
        json_t *d = json_array_get(ds, j), *c = json_object_get(d, "content"), *tc = json_object_get(d, "tool_calls");
        if (c) {
            cli_sb_put(content, json_string_value(c), json_string_length(c));
            g->has_content = true;
            *leak |= strstr(json_string_value(c), "<tool_call") || strstr(json_string_value(c), "[TOOL_CALLS");
            *leak |= g->n > 0;   // content after a call
        }
        json_t *x = json_array_get(tc, 0), *f = json_object_get(x, "function");
        int k = (int)json_integer_value(json_object_get(x, "index"));
        if (!x || k < 0 || k > 3) continue;
        if (json_object_get(x, "id")) {
            EXPECT(k == g->n && !strcmp(json_string_value(json_object_get(f, "arguments")), ""),
                   "a call's first delta: index %d of %d", k, g->n);
            g->n = k + 1;
            snprintf(g->name[k], 32, "%s", json_string_value(json_object_get(f, "name")));
            snprintf(g->id[k], 40, "%s", json_string_value(json_object_get(x, "id")));
        } else {
            size_t l = strlen(g->args[k]);
            snprintf(g->args[k] + l, 256 - l, "%s", json_string_value(json_object_get(f, "arguments")));
        }
    }
}

// The streamed answer (the text a byte at a time), its deltas put together; *leak: markup of a
// call in a content delta. hm: the text goes through gpt-oss's harmony reader first (as the
// server streams it), its content to the deltas.
static void got_stream(const struct cli_tools *t, const char *text, struct got *g, bool *leak, bool hm) {
    memset(g, 0, sizeof(*g));
    struct cli_tool_stream st = {0};
    struct cli_strbuf b = {0}, content = {0};
    struct cli_harmony h = {.calls = t->active};
    size_t n = strlen(text);
    *leak = false;
    for (size_t i = 0; i <= n; i++) {
        cli_sb_put(&b, text, i);
        if (hm) cli_harmony_feed(&h, text, i, i == n);
        json_t *ds = cli_chat_deltas(t, &st, "chatcmpl-0123456789abcdef", 0, hm ? &h.content : &b, false, i == n);
        b.n = 0;
        got_deltas(ds, g, &content, leak);
        json_decref(ds);
    }
    g->content = content.p;
    if (g->has_content && !content.n) g->has_content = false;   // "" and none alike
    free(b.p);
    cli_harmony_free(&h);
}

static bool got_eq(const struct got *a, const struct got *b) {
    if (a->has_content != b->has_content || (a->has_content && strcmp(a->content, b->content)) || a->n != b->n)
        return false;
    for (int k = 0; k < a->n; k++)
        if (strcmp(a->name[k], b->name[k]) || strcmp(a->args[k], b->args[k]) || strcmp(a->id[k], b->id[k])) return false;
    return true;
}

// One answer of a family: the whole one has content (NULL: none) and the calls "name args|name
// args"; the stream gives the same (same_stream), with no call markup in its content.
static void expect_parse(const char *tmpl, const char *extra, const char *text, const char *content, const char *calls,
                         bool same_stream) {
    const bool hm = !strcmp(tmpl, "harmony");   // (the text is harmony's: read by cli_harmony_feed first)
    struct cli_jreq q;
    char body[2048];
    snprintf(body, sizeof(body), "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": " TOOLS "%s}",
             extra);
    if (!parse_req(&q, tmpl, body)) {
        EXPECT(0, "%s: %s", body, q.err);
        cli_jreq_free(&q);
        return;
    }
    struct got w, s;
    bool leak;
    struct cli_harmony h = {.calls = q.tools.active};
    if (hm) cli_harmony_feed(&h, text, strlen(text), true);
    got_whole(&q.tools, hm ? (h.content.p ? h.content.p : "") : text, &w);
    cli_harmony_free(&h);
    got_stream(&q.tools, text, &s, &leak, hm);
    char list[1024] = "";
    for (int k = 0; k < w.n; k++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s %s", k ? "|" : "", w.name[k], w.args[k]);
    EXPECT((content ? w.has_content && !strcmp(w.content, content) : !w.has_content) && !strcmp(list, calls),
           "%s [%s]: content [%s], calls [%s]; want [%s], [%s]", tmpl, text, w.has_content ? w.content : "(null)", list,
           content ? content : "(null)", calls);
    // (the markup of calls found never reaches the content; text that is not a call does)
    if (same_stream) EXPECT(got_eq(&w, &s) && !(leak && w.n), "%s [%s]: the stream differs (content [%s], %d calls, "
                            "leak %d)", tmpl, text, s.has_content ? s.content : "(null)", s.n, leak);
    for (int k = 0; k < w.n; k++) {   // ids: unique, the family's form
        bool form = !strcmp(tmpl, "mistral") ? strlen(w.id[k]) == 9 : !strncmp(w.id[k], "call_", 5) && strlen(w.id[k]) == 29;
        EXPECT(form && (k == 0 || strcmp(w.id[k], w.id[k - 1])), "%s: call id '%s'", tmpl, w.id[k]);
    }
    got_free(&w);
    got_free(&s);
    cli_jreq_free(&q);
}

#define CALL_W "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"
#define CALL_T "{\"name\": \"get_time\", \"arguments\": {}}"

static void test_parse(void) {
    // Hermes
    expect_parse("chatml", "", "<tool_call>\n" CALL_W "\n</tool_call>", NULL, "get_weather {\"city\": \"Paris\"}", true);
    expect_parse("chatml", "", "Let me look.\n\n<tool_call>\n" CALL_W "\n</tool_call>\n<tool_call>" CALL_T "</tool_call>",
                 "Let me look.", "get_weather {\"city\": \"Paris\"}|get_time {}", true);
    expect_parse("qwen3", "", "<tool_call>\n{\"name\":\"get_weather\",\"arguments\":{\"city\":\"Nice\",\"unit\":\"celsius\"}}"
                 "\n</tool_call>", NULL, "get_weather {\"city\":\"Nice\",\"unit\":\"celsius\"}", true);
    expect_parse("chatml", ", \"parallel_tool_calls\": false", "<tool_call>" CALL_T "</tool_call><tool_call>" CALL_W
                 "</tool_call>", NULL, "get_time {}", true);
    expect_parse("chatml", "", "Say <tool_call> to call.", "Say <tool_call> to call.", "", true);
    expect_parse("chatml", "", "Plain text, ends in white space \n ", "Plain text, ends in white space \n ", "", true);
    expect_parse("chatml", "", "<tool_call>\n{\"name\": \"get_news\", \"arguments\": {}}\n</tool_call>",   // unknown
                 "<tool_call>\n{\"name\": \"get_news\", \"arguments\": {}}\n</tool_call>", "", true);
    expect_parse("chatml", "", "<tool_call> get_weather(Paris) </tool_call>", "<tool_call> get_weather(Paris) </tool_call>",
                 "", true);
    // malformed arguments, a call cut short: whole answers keep the text as content (a stream has
    // announced the call by then)
    expect_parse("chatml", "", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris}}</tool_call>",
                 "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": Paris}}</tool_call>", "", false);
    expect_parse("chatml", "", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa",
                 "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa", "", false);
    expect_parse("chatml", "", "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"]}</tool_call>",
                 "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"]}</tool_call>", "", false);
    // two calls, the second cut short (max_tokens): the first
    expect_parse("chatml", "", "<tool_call>" CALL_T "</tool_call>\n<tool_call>{\"name\": \"get_weather\", \"arguments\": "
                 "{\"ci", NULL, "get_time {}", false);
    // gpt-oss (harmony): a commentary message to=functions.NAME is a call (the recipient in the
    // channel's header or in the role's, also where the answer begins); the analysis before it is
    // reasoning, a commentary message without a recipient content; a call at the answer's end
    // whose <|call|> is not in the text is whole
#define HM_W "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"
    expect_parse("harmony", "", "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant" HM_W "<|call|>",
                 NULL, "get_weather {\"city\":\"Paris\"}", true);
    expect_parse("harmony", "", "<|channel|>commentary<|message|>Checking.<|end|><|start|>assistant" HM_W "<|call|>",
                 "Checking.", "get_weather {\"city\":\"Paris\"}", true);
    expect_parse("harmony", "", HM_W, NULL, "get_weather {\"city\":\"Paris\"}", true);
    expect_parse("harmony", "", "<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>{\"city\": "
                 "\"Nice\", \"lat\": 43.7}<|call|>", NULL, "get_weather {\"city\": \"Nice\", \"lat\": 43.7}", true);
    expect_parse("harmony", "", " to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>", NULL,
                 "get_time {}", true);
    expect_parse("harmony", "", "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>",
                 NULL, "get_time {}", true);
    expect_parse("harmony", "", "<|channel|>final<|message|>It is sunny.<|return|>", "It is sunny.", "", true);
    expect_parse("harmony", ", \"tool_choice\": \"none\"", HM_W "<|call|>", "{\"city\":\"Paris\"}", "", true);
#undef HM_W
    // tool_choice "none": nothing parsed
    expect_parse("chatml", ", \"tool_choice\": \"none\"", "<tool_call>" CALL_T "</tool_call>",
                 "<tool_call>" CALL_T "</tool_call>", "", true);
    // Llama 3: the answer is the call (the <|python_tag|> control token, if any, is not in the text)
    expect_parse("llama3", "", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}", NULL,
                 "get_weather {\"city\": \"Paris\"}", true);
    expect_parse("llama3", "", " " CALL_W "; {\"name\": \"get_time\", \"parameters\": {}}", NULL,
                 "get_weather {\"city\": \"Paris\"}|get_time {}", true);
    expect_parse("llama3", "", "{\"answer\": 42}", "{\"answer\": 42}", "", true);
    expect_parse("llama3", "", "Here: " CALL_W, "Here: " CALL_W, "", true);
    expect_parse("llama3", "", "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}",   // unclosed
                 "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}", "", false);
    // Mistral: [TOOL_CALLS] as text, or its list alone (the control token not in the text)
    expect_parse("mistral", "", "[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
                 "\"a1b2c3d4e\"}]", NULL, "get_weather {\"city\": \"Paris\"}", true);
    expect_parse("mistral", "", "[" CALL_W ", " CALL_T "]", NULL, "get_weather {\"city\": \"Paris\"}|get_time {}", true);
    expect_parse("mistral", "", "Sure. [TOOL_CALLS][" CALL_T "]", "Sure.", "get_time {}", true);
    expect_parse("mistral", "", "[1, 2, 3]", "[1, 2, 3]", "", true);
    expect_parse("mistral", "", "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {\"x\": tru}}]",
                 "[TOOL_CALLS] [{\"name\": \"get_time\", \"arguments\": {\"x\": tru}}]", "", false);
    // Mistral's compact form (Mistral Small 3.1 on): [TOOL_CALLS]NAME[ARGS]{...}, a marker per call
    expect_parse("mistral", "", "[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}", NULL,
                 "get_weather {\"city\": \"Paris\"}", true);
    expect_parse("mistral", "", "Sure. [TOOL_CALLS]get_time[ARGS]{}[TOOL_CALLS]get_weather[ARGS] {\"city\": \"Oslo\"}",
                 "Sure.", "get_time {}|get_weather {\"city\": \"Oslo\"}", true);
    expect_parse("mistral", "", "get_time[ARGS]{}", NULL, "get_time {}", true);
    expect_parse("mistral", "", "[TOOL_CALLS]get_news[ARGS]{}", "[TOOL_CALLS]get_news[ARGS]{}", "", true);
    expect_parse("mistral", "", "get_time is [ARGS]{}", "get_time is [ARGS]{}", "", true);
    expect_parse("mistral", "", "[TOOL_CALLS]get_weather[ARGS]{\"city\": Paris}",
                 "[TOOL_CALLS]get_weather[ARGS]{\"city\": Paris}", "", false);
    expect_parse("mistral", ", \"parallel_tool_calls\": false", "[TOOL_CALLS]get_time[ARGS]{}[TOOL_CALLS]get_weather[ARGS]"
                 "{\"city\": \"Oslo\"}", NULL, "get_time {}", true);
}

// --- grammars ---

// The grammar of a request accepts (or refuses) text whole.
static void expect_grammar(const char *tmpl, const char *extra, const char *text, bool accept) {
    struct cli_jreq q;
    char body[2048];
    snprintf(body, sizeof(body), "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": " TOOLS "%s}",
             extra);
    if (!parse_req(&q, tmpl, body) || !q.p.grammar) {
        EXPECT(0, "%s %s: %s", tmpl, extra, q.err ? q.err : "no grammar");
        cli_jreq_free(&q);
        return;
    }
    struct llm__err e = {{0}, LLM_OK};
    struct llm__grammar *g = llm__grammar_parse(q.p.grammar, NULL, &e);
    struct llm__gmatch m;
    bool ok = g && llm__gmatch_init(&m, g);
    EXPECT(ok, "%s: the grammar does not compile: %s\n%s", tmpl, e.msg, q.p.grammar);
    if (ok) {
        bool took = llm__gmatch_accept(&m, text, strlen(text)) && llm__gmatch_can_end(&m);
        EXPECT(took == accept, "%s %s: [%s] %s", tmpl, extra, text, accept ? "refused" : "accepted");
        if (took) {   // and what it takes parses as calls
            struct got w;
            got_whole(&q.tools, text, &w);
            EXPECT(w.n > 0 && !w.has_content, "%s: [%s] taken by the grammar, not parsed as calls", tmpl, text);
            got_free(&w);
        }
        llm__gmatch_free(&m);
    }
    llm__grammar_free(g);
    cli_jreq_free(&q);
}

static void test_grammar(void) {
    const char *req = ", \"tool_choice\": \"required\"", *one = ", \"tool_choice\": \"required\", \"parallel_tool_calls\": false",
               *named = ", \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}";
    const char *hw = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}"
                     "\n</tool_call>", *ht = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
    char two[512];
    snprintf(two, sizeof(two), "%s\n%s", hw, ht);
    expect_grammar("chatml", req, hw, true);
    expect_grammar("chatml", req, ht, true);
    expect_grammar("chatml", req, two, true);
    expect_grammar("chatml", one, two, false);
    expect_grammar("chatml", named, hw, true);
    expect_grammar("chatml", named, ht, false);
    expect_grammar("chatml", req, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\"}}\n"
                   "</tool_call>", false);   // city is required
    expect_grammar("chatml", req, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                   "\"unit\": \"kelvin\"}}\n</tool_call>", false);
    expect_grammar("chatml", req, "Sure. <tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>", false);
    expect_grammar("llama3", req, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}; {\"name\": "
                   "\"get_time\", \"parameters\": {}}", true);
    expect_grammar("llama3", one, "{\"name\": \"get_time\", \"parameters\": {}}", true);
    expect_grammar("llama3", named, "{\"name\": \"get_time\", \"parameters\": {}}", false);
    expect_grammar("mistral", req, "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_weather\", "
                   "\"arguments\": {\"city\": \"Rome\"}}]", true);
    expect_grammar("mistral", one, "[{\"name\": \"get_time\", \"arguments\": {}}, {\"name\": \"get_time\", "
                   "\"arguments\": {}}]", false);
    expect_grammar("gemma", named, hw, true);
}

// --- errors ---

static void expect_error(const char *body, const char *param, const char *words) {
    struct cli_jreq q;
    bool ok = parse_req(&q, "chatml", body);
    EXPECT(!ok && q.err_param && !strcmp(q.err_param, param) && strstr(q.err, words), "%s: %s (param %s), want %s: %s",
           body, ok ? "accepted" : q.err, q.err_param ? q.err_param : "none", param, words);
    cli_jreq_free(&q);
}

static void test_errors(void) {
    const char *msg = "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]";
    char b[1024];
#define ERR(param, words, ...) (snprintf(b, sizeof(b), __VA_ARGS__), expect_error(b, param, words))
    ERR("tools", "tools[0].function.name: missing", "{%s, \"tools\": [{\"type\": \"function\", \"function\": {}}]}", msg);
    ERR("tools", "tools[1]: expected", "{%s, \"tools\": [" TIME ", {\"type\": \"code\"}]}", msg);
    ERR("tools", "tools: expected an array", "{%s, \"tools\": {}}", msg);
    ERR("tools", "not 1 to 64", "{%s, \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"a b\"}}]}", msg);
    ERR("tools", "also tools[0]", "{%s, \"tools\": [" TIME ", " TIME "]}", msg);
    ERR("tools", "tools[0].function.parameters: expected a JSON Schema object", "{%s, \"tools\": [{\"type\": "
        "\"function\", \"function\": {\"name\": \"f\", \"parameters\": [1]}}]}", msg);
    ERR("tools", "tools[0].function.parameters: the arguments are an object", "{%s, \"tools\": [{\"type\": \"function\", "
        "\"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"string\"}}}]}", msg);
    ERR("tools", "tools[0].function.parameters: json schema", "{%s, \"tools\": [{\"type\": \"function\", \"function\": "
        "{\"name\": \"f\", \"parameters\": {\"type\": \"object\", \"properties\": {\"a\": {\"type\": \"string\", "
        "\"pattern\": \"(?=x)\"}}}}}]}", msg);
    ERR("tool_choice", "'get_news' is not among the tools", "{%s, \"tools\": " TOOLS ", \"tool_choice\": {\"type\": "
        "\"function\", \"function\": {\"name\": \"get_news\"}}}", msg);
    ERR("tool_choice", "not 'sometimes'", "{%s, \"tools\": " TOOLS ", \"tool_choice\": \"sometimes\"}", msg);
    ERR("tool_choice", "needs tools", "{%s, \"tool_choice\": \"required\"}", msg);
    ERR("tool_choice", "not among the tools", "{%s, \"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": "
        "\"f\"}}}", msg);
    ERR("parallel_tool_calls", "true or false", "{%s, \"tools\": " TOOLS ", \"parallel_tool_calls\": 1}", msg);
    ERR("messages", "arguments: not JSON", "{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"id\": \"a\", "
        "\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{x\"}}]}]}");
    ERR("messages", "only an assistant", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": "
        "[{\"id\": \"a\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}");
    ERR("messages", "'function' is not supported", "{\"messages\": [{\"role\": \"function\", \"content\": \"x\"}]}");
#undef ERR
    // "auto" and "none" without tools ask for nothing
    struct cli_jreq q;
    bool ok = parse_req(&q, "chatml", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tool_choice\": \"auto\"}");
    EXPECT(ok && !q.tools.active && !q.p.grammar, "tool_choice auto without tools: %s", ok ? "active" : q.err);
    cli_jreq_free(&q);
}

// gpt-oss's harmony output: the analysis channel is the reasoning, the final (and commentary)
// channel the content, whole and fed a byte more at a time (each feed's text a prefix of the
// next, as a stream; markers may be cut anywhere, and a header waits for its <|message|>).
static void expect_harmony_c(const char *text, const char *content, const char *reasoning, bool calls) {
    struct cli_harmony whole = {.calls = calls}, inc = {.calls = calls};
    const size_t n = strlen(text);
    cli_harmony_feed(&whole, text, n, true);
    size_t grew_back = 0, last_c = 0, last_r = 0;
    for (size_t k = 0; k <= n; k++) {
        cli_harmony_feed(&inc, text, k, k == n);
        grew_back += inc.content.n < last_c || inc.reasoning.n < last_r;
        last_c = inc.content.n, last_r = inc.reasoning.n;
    }
    const char *wc = whole.content.p ? whole.content.p : "", *wr = whole.reasoning.p ? whole.reasoning.p : "";
    EXPECT(whole.content.n == strlen(content) && !memcmp(wc, content, whole.content.n) &&
               whole.reasoning.n == strlen(reasoning) && !memcmp(wr, reasoning, whole.reasoning.n),
           "harmony [%s]: content [%.*s] reasoning [%.*s]", text, (int)whole.content.n, wc, (int)whole.reasoning.n, wr);
    EXPECT(grew_back == 0 && inc.content.n == whole.content.n && inc.reasoning.n == whole.reasoning.n &&
               (!inc.content.n || !memcmp(inc.content.p, wc, inc.content.n)) &&
               (!inc.reasoning.n || !memcmp(inc.reasoning.p, wr, inc.reasoning.n)),
           "harmony [%s]: fed a byte at a time, content [%.*s] reasoning [%.*s]", text, (int)inc.content.n,
           inc.content.p ? inc.content.p : "", (int)inc.reasoning.n, inc.reasoning.p ? inc.reasoning.p : "");
    cli_harmony_free(&whole);
    cli_harmony_free(&inc);
}

static void expect_harmony(const char *text, const char *content, const char *reasoning) {
    expect_harmony_c(text, content, reasoning, false);
}

static void test_harmony(void) {
    expect_harmony("<|channel|>analysis<|message|>User asks 2+2. Answer 4.<|end|><|start|>assistant<|channel|>final"
                   "<|message|>4<|return|>", "4", "User asks 2+2. Answer 4.");
    expect_harmony("<|channel|>final<|message|>a < b and <|x|> stay<|return|>", "a < b and <|x|> stay", "");
    expect_harmony("plain text, no channels", "plain text, no channels", "");
    expect_harmony("a<|message|>b<|end|>c", "abc", "");   // (markers out of place go, their text stays)
    expect_harmony("<|channel|>analysis<|message|>thinking, cut short", "", "thinking, cut short");
    expect_harmony("<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"city\":\"Paris\"}"
                   "<|call|>", "{\"city\":\"Paris\"}", "");
    expect_harmony("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
                   "<|start|>assistant<|channel|>final<|message|>c<", "c<", "ab");
    // with the tools active: a call as a Hermes block (in the commentary or the analysis channel);
    // the reasoning before it stays reasoning; a call whose end marker never comes is closed by the
    // next header or the answer's end; a header cut short opens no call
#define HM_CALL "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"
    expect_harmony_c("<|channel|>analysis<|message|>Need it.<|end|><|start|>assistant<|channel|>commentary "
                     "to=functions.get_time <|constrain|>json<|message|>{}<|call|>", HM_CALL, "Need it.", true);
    expect_harmony_c("<|channel|>analysis to=functions.get_time <|constrain|>json<|message|>{}<|call|>", HM_CALL, "", true);
    expect_harmony_c("<|channel|>commentary to=functions.get_time<|message|>{}<|start|>assistant<|channel|>final"
                     "<|message|>x", HM_CALL "x", "", true);
    expect_harmony_c("<|channel|>commentary to=functions.get_time<|message|>{}", HM_CALL, "", true);
    expect_harmony_c("<|channel|>commentary to=functions.get_wea", "", "", true);
    expect_harmony_c("<|channel|>commentary to=functions.get\"time<|message|>{}<|call|>",
                     "<tool_call>\n{\"name\": \"get\", \"arguments\": {}}\n</tool_call>", "", true);
#undef HM_CALL
}

int main(void) {
    test_render();
    test_render_harmony();
    test_parse();
    test_grammar();
    test_errors();
    test_harmony();
    return test_summary("test_tools");
}
