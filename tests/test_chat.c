// Chat templates: known conversations render to the strings each model family's own template
// produces (written out by hand from the official Jinja templates; gemma, phi3 and qwen3: made by
// tests/chat_goldens.py with llama.cpp's llama_chat_apply_template and, for Qwen3's reasoning,
// Phi-3.5 and gpt-oss (harmony), with the official Jinja templates run by jinja2), templates are recognised from
// excerpts of real tokenizer.chat_template values, and bad names are refused.
#include "../llm.c"
#include "test.h"

static const struct llm_chat_message conv[] = {
    {"system", "You are terse."},
    {"user", "Hi there"},
    {"assistant", "Hello!"},
    {"user", "2+2?"},
};

static void expect_render(const char *name, const struct llm_chat_message *m, int n, int add, const char *want) {
    char buf[1024];
    int len = llm_chat_apply(name, m, n, add, buf, sizeof(buf));
    EXPECT(len == (int)strlen(want) && strcmp(buf, want) == 0, "%s (%d messages, add %d):\n got  [%s]\n want [%s]", name, n,
           add, len >= 0 ? buf : "(error)", want);
    // a short buffer gets a cut, terminated text and the full length
    char small[8];
    EXPECT(llm_chat_apply(name, m, n, add, small, sizeof(small)) == len && strlen(small) == 7 &&
               memcmp(small, want, 7) == 0, "%s: cut output", name);
}

static void expect_name(const char *tmpl, const char *want) {
    struct llm__gguf_str s = {tmpl, strlen(tmpl)};
    const char *got = llm__chat_template_name(&s);
    EXPECT((got == NULL && want == NULL) || (got && want && strcmp(got, want) == 0), "template recognised as %s, want %s",
           got ? got : "(none)", want ? want : "(none)");
}

int main(void) {
    expect_render("chatml", conv, 4, 1,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                  "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
    expect_render("chatml", conv + 1, 1, 0, "<|im_start|>user\nHi there<|im_end|>\n");
    expect_render("llama3", conv, 4, 1,
                  "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
                  "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
                  "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect_render("llama2", conv, 4, 1,
                  "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! </s><s>[INST] 2+2? [/INST]");
    expect_render("llama2", conv + 1, 1, 1, "[INST] Hi there [/INST]");
    expect_render("mistral", conv, 4, 1, "[INST] You are terse.\n\nHi there [/INST]Hello!</s>[INST] 2+2? [/INST]");
    expect_render("mistral", conv + 1, 3, 0, "[INST] Hi there [/INST]Hello!</s>[INST] 2+2? [/INST]");
    expect_render("zephyr", conv, 4, 1,
                  "<|system|>\nYou are terse.</s>\n<|user|>\nHi there</s>\n<|assistant|>\nHello!</s>\n<|user|>\n2+2?</s>\n"
                  "<|assistant|>\n");
    // Llama 2 and 3 strip white space around messages; ChatML keeps it
    const struct llm_chat_message padded[] = {{"user", "  hi \n"}};
    expect_render("llama3", padded, 1, 0, "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
    expect_render("llama2", padded, 1, 0, "[INST] hi [/INST]");
    expect_render("chatml", padded, 1, 0, "<|im_start|>user\n  hi \n<|im_end|>\n");

    // llama.cpp's llama_chat_apply_template (tests/chat_goldens.py): "gemma" folds the system
    // prompt into the first user turn and trims contents; "phi3"; Qwen3 is ChatML to llama.cpp
    expect_render("gemma", conv, 4, 1,
                  "<start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
                  "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n");
    expect_render("gemma", padded, 1, 0, "<start_of_turn>user\nhi<end_of_turn>\n");
    expect_render("phi3", conv, 4, 1,
                  "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi there<|end|>\n<|assistant|>\nHello!<|end|>\n"
                  "<|user|>\n2+2?<|end|>\n<|assistant|>\n");
    expect_render("phi3", padded, 1, 0, "<|user|>\n  hi \n<|end|>\n");
    expect_render("qwen3", conv, 4, 1,
                  "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                  "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n");
    // Qwen3's official template (tests/chat_goldens.py, jinja2): an answer before the last question
    // loses its reasoning; the last answer keeps it, or gets an empty one
    const struct llm_chat_message think[] = {
        {"system", "You are terse."}, {"user", "Hi there"}, {"assistant", "<think>\nA greeting.\n</think>\n\nHello!"},
        {"user", "2+2?"}, {"assistant", "<think>\nAdd them.\n</think>\n\n4"},
    };
    const char *qwen3_head = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
                             "<|im_start|>assistant\nHello!<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n";
    char want[1024];
    expect_render("qwen3", think, 4, 1, qwen3_head);
    snprintf(want, sizeof want, "%s<think>\nAdd them.\n</think>\n\n4<|im_end|>\n", qwen3_head);
    expect_render("qwen3", think, 5, 0, want);
    const struct llm_chat_message no_think[] = {think[0], think[1], think[2], think[3], {"assistant", "4"}};
    snprintf(want, sizeof want, "%s<think>\n\n</think>\n\n4<|im_end|>\n", qwen3_head);
    expect_render("qwen3", no_think, 5, 0, want);
    // tool responses: one user turn for consecutive ones, and not the question
    const struct llm_chat_message tools[] = {
        {"user", "Weather?"}, {"assistant", "<think>\nCall it.\n</think>\n\nCalling."}, {"tool", "sunny"}, {"tool", "20C"},
    };
    expect_render("qwen3", tools, 4, 1,
                  "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\nCall it.\n</think>\n\nCalling.<|im_end|>\n"
                  "<|im_start|>user\n<tool_response>\nsunny\n</tool_response>\n<tool_response>\n20C\n</tool_response><|im_end|>\n"
                  "<|im_start|>assistant\n");

    // gpt-oss's official template (harmony; tests/chat_goldens.py, jinja2, its date written DATE):
    // the system prompt becomes the developer's instructions, answers the final channel's
    {
        char date[32] = "", head[512], want_h[1024];
        const time_t now = time(NULL);
        struct tm tm;
        if (localtime_r(&now, &tm)) strftime(date, sizeof(date), "%Y-%m-%d", &tm);
        snprintf(head, sizeof head, "<|start|>system<|message|>You are ChatGPT, a large language model trained by "
                 "OpenAI.\nKnowledge cutoff: 2024-06\nCurrent date: %s\n\nReasoning: medium\n\n# Valid channels: "
                 "analysis, commentary, final. Channel must be included for every message.<|end|>", date);
        const char *turns = "<|start|>user<|message|>Hi there<|end|><|start|>assistant<|channel|>final<|message|>"
                            "Hello!<|end|><|start|>user<|message|>2+2?<|end|>";
        const char *dev = "<|start|>developer<|message|># Instructions\n\nYou are terse.\n\n<|end|>";
        snprintf(want_h, sizeof want_h, "%s%s%s<|start|>assistant", head, dev, turns);
        expect_render("harmony", conv, 4, 1, want_h);
        const struct llm_chat_message answered[] = {conv[0], conv[1], conv[2], conv[3], {"assistant", "4"}};
        snprintf(want_h, sizeof want_h, "%s%s%s<|start|>assistant<|channel|>final<|message|>4<|return|>", head, dev,
                 turns);
        expect_render("harmony", answered, 5, 0, want_h);
        snprintf(want_h, sizeof want_h, "%s%s<|start|>assistant", head, turns);
        expect_render("harmony", conv + 1, 3, 1, want_h);
    }

    EXPECT(llm_chat_apply("vicuna", conv, 1, 1, NULL, 0) == -1, "unknown template accepted");
    EXPECT(llm_chat_apply(NULL, conv, 1, 1, NULL, 0) == -1, "NULL template accepted");
    EXPECT(llm_chat_apply("chatml", conv, 0, 1, NULL, 0) == (int)strlen("<|im_start|>assistant\n"), "empty conversation");

    // excerpts of real templates
    expect_name("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                "'<|im_end|>' + '\\n'}}{% endfor %}", "chatml");
    expect_name("{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + "
                "'<|eot_id|>' }}", "llama3");
    expect_name("{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + "
                "'\\n<</SYS>>\\n\\n' + message['content'] %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}",
                "llama2");
    expect_name("{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + "
                "message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + "
                "eos_token}}{% endif %}{% endfor %}", "mistral");
    expect_name("{% if message['role'] == 'user' %}{{ '<|user|>\\n' + message['content'] + eos_token }}{% elif "
                "message['role'] == 'assistant' %}{{ '<|assistant|>\\n'  + message['content'] + eos_token }}", "zephyr");
    expect_name("{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}", "phi3");
    expect_name("{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}", "gemma");
    expect_name("{{- '<|im_start|>' + message.role + '\\n' + content }}{%- set content = "
                "message.content.split('</think>')[-1].lstrip('\\n') %}", "qwen3");
    expect_name("{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}", "harmony");
    expect_name("{{ message['content'] }}", NULL);
    return test_summary("test_chat");
}
