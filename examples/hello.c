// hello.c — the smallest program that uses llm.c: load a model, generate from a prompt, print.
//
//   cc -O2 hello.c llm.c -o hello -lm -lpthread                 (llm.c, llm.h copied alongside)
//   cc -O2 hello.c $(pkg-config --cflags --libs llm) -o hello   (the installed library)
//   ./hello model.gguf "Once upon a time"
#include <stdio.h>

#include "llm.h"

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]);
        return 1;
    }
    struct llm_engine_params params = llm_engine_params_default();
    params.model_path = argv[1];
    char err[512];
    llm_engine *engine = llm_engine_create(&params, err, sizeof(err));
    if (!engine) {
        fprintf(stderr, "%s: %s\n", argv[1], err);
        return 1;
    }

    struct llm_prompt prompt = {argc > 2 ? argv[2] : "Once upon a time", NULL, 0};
    struct llm_request_params request = llm_request_params_default();
    request.max_tokens = 32;
    request.sampling.temperature = 0;   // greedy: the same text every time
    struct llm_result result;
    llm_generate(engine, &prompt, 1, &request, &result);
    int ok = result.finish_reason != LLM_FINISH_ERROR;
    if (ok) printf("%s%s\n", prompt.text, result.text);
    else fprintf(stderr, "%s\n", result.error ? result.error : llm_last_error(engine));

    llm_results_free(&result, 1);
    llm_engine_free(engine);
    return ok ? 0 : 1;
}
