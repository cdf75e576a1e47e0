// Chat templates

#include "internal.h"

// --- chat templates ---
//
// The prompt formats of common model families, chosen by recognising the file's Jinja
// tokenizer.chat_template (not run: the formats are written out here).
//   chatml   <|im_start|>ROLE\nCONTENT<|im_end|>\n ...            then <|im_start|>assistant\n
//   llama3   <|start_header_id|>ROLE<|end_header_id|>\n\nCONTENT<|eot_id|> ...
//   llama2   [INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nUSER [/INST] ANSWER </s><s>[INST] USER [/INST]
//   mistral  [INST] SYSTEM\n\nUSER [/INST]ANSWER</s>[INST] USER [/INST]
//   zephyr   <|ROLE|>\nCONTENT</s>\n ...                            then <|assistant|>\n
//   gemma    <start_of_turn>user\nSYSTEM\n\nUSER<end_of_turn>\n<start_of_turn>model\nANSWER<end_of_turn>\n ...
//            then <start_of_turn>model\n (Gemma 2 and 3: no system turn, the system prompt opens
//            the first user turn; "assistant" is "model"; contents trimmed)
//   phi3     <|ROLE|>\nCONTENT<|end|>\n ...                          then <|assistant|>\n
//   qwen3    ChatML, and an answer before the last user message loses its reasoning
//            (<think>...</think>); one after it keeps it as <think>\nREASONING\n</think>\n\n
//            (Qwen3's template); "tool" messages become <tool_response> blocks of a user turn
//   harmony  gpt-oss: <|start|>system<|message|>(identity, knowledge cutoff, today's date, reasoning
//            effort medium, the valid channels)<|end|>, a first system message as the developer's
//            "# Instructions", <|start|>ROLE<|message|>CONTENT<|end|>, an answer in the final channel
//            (<|start|>assistant<|channel|>final<|message|>ANSWER<|end|>; <|return|> when it ends the
//            conversation); then <|start|>assistant. Tool messages are not rendered (the template
//            needs the assistant's tool call, which llm_chat_message does not carry).
// BOS is left to the tokenizer (LLM_TOKENIZE_ADD_SPECIAL).

static const char *const llm__chat_names[] = { "chatml", "llama3", "llama2", "mistral",
                                               "zephyr", "gemma",  "phi3",   "qwen3", "harmony" };
enum { LLM__CHAT_CHATML, LLM__CHAT_LLAMA3, LLM__CHAT_LLAMA2, LLM__CHAT_MISTRAL, LLM__CHAT_ZEPHYR, LLM__CHAT_GEMMA,
       LLM__CHAT_PHI3, LLM__CHAT_QWEN3, LLM__CHAT_HARMONY };

// The format a Jinja chat template stands for, by the markers it writes; NULL when unknown.
static const char *llm__chat_template_name(const struct llm__gguf_str *t) {
    // Qwen3's template splits answers at </think> (Qwen2's has no reasoning)
    if (llm__str_has(t, "<|start|>") && llm__str_has(t, "<|channel|>")) return "harmony";
    if (llm__str_has(t, "<|im_start|>")) return llm__str_has(t, "</think>") ? "qwen3" : "chatml";
    if (llm__str_has(t, "<start_of_turn>")) return "gemma";
    if (llm__str_has(t, "<|assistant|>") && llm__str_has(t, "<|end|>")) return "phi3";
    if (llm__str_has(t, "<|start_header_id|>") && llm__str_has(t, "<|end_header_id|>")) return "llama3";
    if (llm__str_has(t, "[INST]")) return llm__str_has(t, "<<SYS>>") ? "llama2" : "mistral";
    if (llm__str_has(t, "<|user|>") && llm__str_has(t, "<|assistant|>") && !llm__str_has(t, "<|end|>")) return "zephyr";
    return NULL;
}

void llm__chat_template_recognise(struct llm__vocab *v, const struct llm__gguf *g) {
    struct llm__gguf_str t;
    struct llm__err e = {{0}, LLM_OK};
    v->chat_template[0] = 0;
    if (llm__gguf_find_key(g, "tokenizer.chat_template") < 0 ||
        !llm__gguf_get_str(g, "tokenizer.chat_template", &t, &e))
        return;
    const char *name = llm__chat_template_name(&t);
    if (name) snprintf(v->chat_template, sizeof(v->chat_template), "%s", name);
}

static void llm__outbuf_str(struct llm__outbuf *o, const char *s) { llm__outbuf_put(o, s, strlen(s)); }

// Content without leading and trailing white space (Llama 2 and 3 strip messages).
static void llm__outbuf_trimmed(struct llm__outbuf *o, const char *s) {
    size_t n = strlen(s);
    while (n && isspace((unsigned char)*s)) { s++; n--; }
    while (n && isspace((unsigned char)s[n - 1])) n--;
    llm__outbuf_put(o, s, n);
}

// s[0..n) without the newlines at its start (lstrip) and/or end (rstrip), as Jinja's
// lstrip('\n') / rstrip('\n') / strip('\n').
static void llm__strip_nl(const char **s, size_t *n, bool left, bool right) {
    while (left && *n && **s == '\n') (*s)++, (*n)--;
    while (right && *n && (*s)[*n - 1] == '\n') (*n)--;
}

static const char *llm__strstr_last(const char *s, const char *needle) {
    const char *last = NULL;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) last = p;
    return last;
}

// One message of Qwen3's template; last_query: the index of the last user message that is not a
// tool's response (before it, answers drop their reasoning).
static void llm__chat_qwen3(struct llm__outbuf *o, const struct llm_chat_message *msg, int n, int i, int last_query) {
    const char *role = msg[i].role ? msg[i].role : "user", *c = msg[i].content ? msg[i].content : "";
    if (!strcmp(role, "user") || !strcmp(role, "system")) {
        llm__outbuf_str(o, "<|im_start|>");
        llm__outbuf_str(o, role);
        llm__outbuf_str(o, "\n");
        llm__outbuf_str(o, c);
        llm__outbuf_str(o, "<|im_end|>\n");
    } else if (!strcmp(role, "assistant")) {
        // content: after the last </think>, its leading newlines dropped; reasoning: before the
        // first </think>, after the last <think> there, newlines stripped around it
        const char *content = c, *reason = "", *end = strstr(c, "</think>");
        size_t n_content = strlen(c), n_reason = 0;
        if (end) {
            content = llm__strstr_last(c, "</think>") + 8;
            n_content = strlen(content);
            llm__strip_nl(&content, &n_content, true, false);
            reason = c;
            n_reason = (size_t)(end - c);
            for (const char *p = c; (p = llm__memmem(p, (size_t)(end - p), "<think>", 7)) != NULL; p += 7)
                reason = p + 7, n_reason = (size_t)(end - reason);
            llm__strip_nl(&reason, &n_reason, true, true);
        }
        llm__outbuf_str(o, "<|im_start|>assistant\n");
        if (i > last_query && (i == n - 1 || n_reason > 0)) {
            llm__outbuf_str(o, "<think>\n");
            llm__outbuf_put(o, reason, n_reason);
            llm__outbuf_str(o, "\n</think>\n\n");
            llm__strip_nl(&content, &n_content, true, false);
        }
        llm__outbuf_put(o, content, n_content);
        llm__outbuf_str(o, "<|im_end|>\n");
    } else if (!strcmp(role, "tool")) {
        bool first = i == 0 || !msg[i - 1].role || strcmp(msg[i - 1].role, "tool") != 0;
        bool last = i == n - 1 || !msg[i + 1].role || strcmp(msg[i + 1].role, "tool") != 0;
        if (first) llm__outbuf_str(o, "<|im_start|>user");
        llm__outbuf_str(o, "\n<tool_response>\n");
        llm__outbuf_str(o, c);
        llm__outbuf_str(o, "\n</tool_response>");
        if (last) llm__outbuf_str(o, "<|im_end|>\n");
    }
}

// gpt-oss's harmony format, as its official template renders a conversation of text messages.
static void llm__chat_harmony(struct llm__outbuf *o, const struct llm_chat_message *msg, int n, bool add_assistant) {
    char date[32] = "";
    const time_t now = time(NULL);
    struct tm tm;
    if (localtime_r(&now, &tm)) strftime(date, sizeof(date), "%Y-%m-%d", &tm);   // (strftime_now, local time)
    llm__outbuf_str(o, "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
                       "Knowledge cutoff: 2024-06\nCurrent date: ");
    llm__outbuf_str(o, date);
    llm__outbuf_str(o, "\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel must be "
                       "included for every message.<|end|>");
    int i = 0;
    const char *role0 = n > 0 && msg[0].role ? msg[0].role : "user";
    if (n > 0 && (!strcmp(role0, "system") || !strcmp(role0, "developer"))) {
        const char *c = msg[0].content ? msg[0].content : "";
        if (*c) {
            llm__outbuf_str(o, "<|start|>developer<|message|># Instructions\n\n");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "\n\n<|end|>");
        }
        i = 1;
    }
    for (; i < n; i++) {
        const char *role = msg[i].role ? msg[i].role : "user", *c = msg[i].content ? msg[i].content : "";
        if (!strcmp(role, "assistant")) {
            llm__outbuf_str(o, "<|start|>assistant<|channel|>final<|message|>");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, i == n - 1 && !add_assistant ? "<|return|>" : "<|end|>");
        } else if (!strcmp(role, "user")) {
            llm__outbuf_str(o, "<|start|>user<|message|>");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "<|end|>");
        }
    }
    if (add_assistant) llm__outbuf_str(o, "<|start|>assistant");
}

static bool llm__has_prefix(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }
static bool llm__has_suffix(const char *s, const char *x) {
    size_t n = strlen(s), k = strlen(x);
    return n >= k && memcmp(s + n - k, x, k) == 0;
}

// Qwen3: the last message that is the user's own (not a tool's response it carries).
static int llm__chat_last_query(const struct llm_chat_message *msg, int n) {
    for (int i = n - 1; i >= 0; i--) {
        const char *role = msg[i].role ? msg[i].role : "user", *c = msg[i].content ? msg[i].content : "";
        if (!strcmp(role, "user") && !(llm__has_prefix(c, "<tool_response>") && llm__has_suffix(c, "</tool_response>")))
            return i;
    }
    return n - 1;
}

// Llama 2 and Mistral: message i inside [INST] ... [/INST] turns (*in_turn: one is open).
static void llm__chat_inst(struct llm__outbuf *o, bool llama2, int i, bool sys, bool user, const char *c,
                           bool *in_turn) {
    if (!*in_turn && (sys || user)) {
        llm__outbuf_str(o, i == 0 ? "[INST] " : llama2 ? "<s>[INST] " : "[INST] ");
        *in_turn = true;
    }
    if (sys) {
        if (llama2) {
            llm__outbuf_str(o, "<<SYS>>\n");
            llm__outbuf_trimmed(o, c);
            llm__outbuf_str(o, "\n<</SYS>>\n\n");
        } else {
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "\n\n");
        }
    } else if (user) {
        if (llama2) llm__outbuf_trimmed(o, c);
        else llm__outbuf_str(o, c);
        llm__outbuf_str(o, " [/INST]");
        *in_turn = false;
    } else {
        if (llama2) { llm__outbuf_str(o, " "); llm__outbuf_trimmed(o, c); llm__outbuf_str(o, " </s>"); }
        else { llm__outbuf_str(o, c); llm__outbuf_str(o, "</s>"); }
    }
}

int llm__chat_apply(const char *name, const struct llm_chat_message *msg, int n, bool add_assistant,
                    struct llm__outbuf *o) {
    int t = -1;
    for (int i = 0; i < (int)LLM__ARRAY_LEN(llm__chat_names); i++)
        if (name && strcmp(name, llm__chat_names[i]) == 0) t = i;
    if (t < 0) return -1;
    if (t == LLM__CHAT_HARMONY) {
        llm__chat_harmony(o, msg, n, add_assistant);
        return o->fail ? -2 : 0;
    }
    bool in_turn = false;   // llama2/mistral: inside an open [INST] ... [/INST]
    const int last_query = t == LLM__CHAT_QWEN3 ? llm__chat_last_query(msg, n) : n - 1;
    struct llm__outbuf sys_prefix = {0};   // gemma: system prompts waiting for the next user turn
    for (int i = 0; i < n; i++) {
        const char *role = msg[i].role ? msg[i].role : "user", *c = msg[i].content ? msg[i].content : "";
        bool sys = strcmp(role, "system") == 0, user = strcmp(role, "user") == 0;
        switch (t) {
        case LLM__CHAT_GEMMA:
            if (sys) {
                llm__outbuf_str(&sys_prefix, c);
                break;
            }
            if (strcmp(role, "assistant") == 0) role = "model";
            llm__outbuf_str(o, "<start_of_turn>");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "\n");
            if (sys_prefix.n && strcmp(role, "model") != 0) {
                llm__outbuf_put(o, sys_prefix.p, sys_prefix.n);
                llm__outbuf_str(o, "\n\n");
                sys_prefix.n = 0;
            }
            llm__outbuf_trimmed(o, c);
            llm__outbuf_str(o, "<end_of_turn>\n");
            break;
        case LLM__CHAT_PHI3:
            if (sys && !*c) break;   // Phi-3's template leaves an empty system message out
            llm__outbuf_str(o, "<|");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "|>\n");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "<|end|>\n");
            break;
        case LLM__CHAT_QWEN3:
            llm__chat_qwen3(o, msg, n, i, last_query);
            break;
        case LLM__CHAT_CHATML:
            llm__outbuf_str(o, "<|im_start|>");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "\n");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "<|im_end|>\n");
            break;
        case LLM__CHAT_LLAMA3:
            llm__outbuf_str(o, "<|start_header_id|>");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "<|end_header_id|>\n\n");
            llm__outbuf_trimmed(o, c);
            llm__outbuf_str(o, "<|eot_id|>");
            break;
        case LLM__CHAT_LLAMA2:
        case LLM__CHAT_MISTRAL:
            llm__chat_inst(o, t == LLM__CHAT_LLAMA2, i, sys, user, c, &in_turn);
            break;
        default:   // zephyr
            llm__outbuf_str(o, "<|");
            llm__outbuf_str(o, role);
            llm__outbuf_str(o, "|>\n");
            llm__outbuf_str(o, c);
            llm__outbuf_str(o, "</s>\n");
            break;
        }
    }
    if (add_assistant) {
        if (t == 0) llm__outbuf_str(o, "<|im_start|>assistant\n");
        else if (t == 1) llm__outbuf_str(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
        else if (t == LLM__CHAT_ZEPHYR || t == LLM__CHAT_PHI3) llm__outbuf_str(o, "<|assistant|>\n");
        else if (t == LLM__CHAT_GEMMA) llm__outbuf_str(o, "<start_of_turn>model\n");
        else if (t == LLM__CHAT_QWEN3) llm__outbuf_str(o, "<|im_start|>assistant\n");
    }
    bool fail = sys_prefix.fail;
    free(sys_prefix.p);
    return o->fail || fail ? -2 : 0;
}
