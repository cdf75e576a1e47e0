// llm.h from C++ (C++11, -pedantic), linked with the library: the header compiles as C++, its
// enums and structs are usable there, and an engine made from C++ tokenizes, generates
// (batched and streamed) and reports errors as it does from C.
#include "llm.h"
#include "test.h"

#include <string>
#include <vector>

static std::vector<int32_t> tokenize(llm_engine *E, const std::string &text) {
    int n = llm_tokenize(E, text.data(), text.size(), LLM_TOKENIZE_ADD_SPECIAL, NULL, 0);
    std::vector<int32_t> ids(n > 0 ? (size_t)n : 0);
    if (n > 0) llm_tokenize(E, text.data(), text.size(), LLM_TOKENIZE_ADD_SPECIAL, ids.data(), n);
    return ids;
}

int main() {
    EXPECT(llm_version() == LLM_VERSION_NUMBER, "llm_version() %d, llm.h says %d", llm_version(), LLM_VERSION_NUMBER);
    EXPECT(std::string(llm_version_string()) == LLM_VERSION, "version string '%s'", llm_version_string());
    EXPECT(llm_has_backend(LLM_BACKEND_CPU) == 1 && llm_has_backend(LLM_BACKEND_AUTO) == 1 &&
               llm_has_backend((llm_backend_kind)99) == 0, "llm_has_backend");

    const char *dir = getenv("LLM_TEST_MODELS") ? getenv("LLM_TEST_MODELS") : "build/models";
    std::string path = std::string(dir) + "/tiny-f32.gguf";
    char err[512] = "";

    // a missing file: NULL and a message naming it
    llm_engine_params ep = llm_engine_params_default();
    std::string missing = std::string(dir) + "/no-such-model.gguf";
    ep.model_path = missing.c_str();
    EXPECT(llm_engine_create(&ep, err, sizeof(err)) == NULL && std::string(err).find("no-such-model") != std::string::npos,
           "missing model: '%s'", err);

    ep.model_path = path.c_str();
    ep.n_threads = 2;
    ep.max_model_len = 64;
    llm_engine *E = llm_engine_create(&ep, err, sizeof(err));
    EXPECT(E != NULL, "%s: %s", path.c_str(), err);
    if (!E) return test_summary("test_cpp");

    llm_model_info mi;
    llm_engine_info ei;
    llm_get_model_info(E, &mi);
    llm_get_engine_info(E, &ei);
    EXPECT(mi.n_vocab == 4096 && std::string(mi.arch) == "llama", "model: %d tokens, arch %s", mi.n_vocab, mi.arch);
    EXPECT(ei.backend == LLM_BACKEND_CPU && std::string(ei.backend_name) == "cpu" && ei.max_model_len == 64 &&
               ei.n_threads == 2, "engine: %s, context %d, %d threads", ei.backend_name, ei.max_model_len, ei.n_threads);

    // tokenize: the count first, then the ids; a short buffer gets what fits and the whole count
    std::vector<int32_t> a = tokenize(E, "hello world");
    EXPECT(a.size() >= 2 && (mi.bos_id < 0 || a[0] == mi.bos_id), "%zu tokens for 'hello world'", a.size());
    int32_t one = -1;
    int n = llm_tokenize(E, "hello world", 11, LLM_TOKENIZE_ADD_SPECIAL, &one, 1);
    EXPECT(n == (int)a.size() && !a.empty() && one == a[0], "truncated tokenize: %d (want %zu), first %d", n, a.size(), one);

    // two prompts, greedy, 8 tokens each; twice: the same results
    const int32_t ids[] = {1, 300, 301, 302};
    llm_prompt prompts[2] = {{"hello world", NULL, 0}, {NULL, ids, 4}};
    llm_request_params rp = llm_request_params_default();
    rp.sampling.temperature = 0;
    rp.max_tokens = 8;
    rp.ignore_eos = 1;
    llm_request_params params[2] = {rp, rp};
    llm_result r1[2], r2[2];
    EXPECT(llm_generate(E, prompts, 2, params, r1) == LLM_OK, "generate: %s", llm_last_error(E));
    EXPECT(llm_generate(E, prompts, 2, params, r2) == LLM_OK, "generate again: %s", llm_last_error(E));
    for (int i = 0; i < 2; i++) {
        EXPECT(r1[i].finish_reason == LLM_FINISH_LENGTH && r1[i].n_tokens == 8 && r1[i].error == NULL,
               "prompt %d: %s after %d tokens", i, llm_finish_reason_str(r1[i].finish_reason), r1[i].n_tokens);
        EXPECT(r1[i].n_tokens == r2[i].n_tokens &&
                   std::vector<int32_t>(r1[i].tokens, r1[i].tokens + r1[i].n_tokens) ==
                       std::vector<int32_t>(r2[i].tokens, r2[i].tokens + r2[i].n_tokens),
               "prompt %d: greedy tokens differ between two runs", i);
        char text[512];
        int len = llm_detokenize(E, r1[i].tokens, r1[i].n_tokens, 0, text, sizeof(text));
        EXPECT(len >= 0 && r1[i].text && std::string(r1[i].text) == std::string(text, (size_t)len),
               "prompt %d: text '%s', detokenized '%s'", i, r1[i].text ? r1[i].text : "(null)", text);
    }
    EXPECT(r1[0].n_prompt_tokens == (int)a.size() && r1[1].n_prompt_tokens == 4, "prompt tokens %d, %d",
           r1[0].n_prompt_tokens, r1[1].n_prompt_tokens);

    // the same request streamed through llm_add_request / llm_step gives the same tokens
    int id = llm_add_request(E, &prompts[1], &rp);
    EXPECT(id >= 0, "add_request: %s", llm_last_error(E));
    std::vector<int32_t> streamed;
    llm_finish_reason why = LLM_FINISH_NONE;
    while (id >= 0 && llm_has_unfinished_requests(E)) {
        const llm_output *out;
        int k = llm_step(E, &out);
        EXPECT(k >= 0, "step: %s", llm_last_error(E));
        if (k < 0) break;
        for (int j = 0; j < k; j++) {
            if (out[j].request_id != id) continue;
            streamed.insert(streamed.end(), out[j].new_tokens, out[j].new_tokens + out[j].n_new_tokens);
            if (out[j].finished) why = out[j].finish_reason;
        }
    }
    EXPECT(why == LLM_FINISH_LENGTH && streamed == std::vector<int32_t>(r1[1].tokens, r1[1].tokens + r1[1].n_tokens),
           "streamed %zu tokens (%s), generate %d", streamed.size(), llm_finish_reason_str(why), r1[1].n_tokens);

    // a prompt longer than the context fails alone, with a message
    std::vector<int32_t> longp(100, 300);
    llm_prompt three[3] = {prompts[0], {NULL, longp.data(), (int)longp.size()}, prompts[1]};
    llm_result r3[3];
    EXPECT(llm_generate(E, three, 3, NULL, r3) == LLM_OK, "generate: %s", llm_last_error(E));
    EXPECT(r3[1].finish_reason == LLM_FINISH_ERROR && r3[1].error && r3[1].error[0], "long prompt: %s",
           llm_finish_reason_str(r3[1].finish_reason));
    EXPECT(r3[0].finish_reason != LLM_FINISH_ERROR && r3[2].finish_reason != LLM_FINISH_ERROR,
           "the others: %s, %s", llm_finish_reason_str(r3[0].finish_reason), llm_finish_reason_str(r3[2].finish_reason));

    // the error rule: a failing call says so and leaves its kind and message in the engine
    EXPECT(llm_seq_len(E, 12345) == -1, "length of a sequence that does not exist");
    llm_status st = llm_abort_request(E, 12345);
    EXPECT(st != LLM_OK && llm_last_status(E) == st && llm_last_error(E)[0], "abort of an unknown request: %s (%s)",
           llm_status_str(st), llm_last_error(E));

    llm_results_free(r1, 2);
    llm_results_free(r2, 2);
    llm_results_free(r3, 3);
    llm_engine_free(E);
    return test_summary("test_cpp");
}
