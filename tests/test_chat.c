// Chat templates: known conversations render to the strings each model family's own template
// produces (written out by hand from the official Jinja templates), templates are recognised
// from excerpts of real tokenizer.chat_template values, and bad names are refused.
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
    expect_name("{{'<|user|>' + '\\n' + message['content'] + '<|end|>' + '\\n' + '<|assistant|>' + '\\n'}}", NULL);
    expect_name("{{ message['content'] }}", NULL);
    return test_summary("test_chat");
}
