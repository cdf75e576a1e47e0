// info.c — llm info (a model file's metadata and tensors; --devices: the GPUs) and
// llm tokenize.
#include "cli.h"

#include <stdlib.h>
#include <string.h>

// Tensors of one type in the file: how many, how many bytes.
struct cli_type_sum { int type; const char *name; long long count; size_t bytes; };

int cli_cmd_info(struct cli *c) {
    llm_engine *E = cli_engine(c);
    struct llm_model_info mi;
    struct llm_engine_info ei;
    llm_get_model_info(E, &mi);
    llm_get_engine_info(E, &ei);
    printf("file:          %s (GGUF v%u, %lld tensors, %lld keys)\n", c->ep.model_path, mi.gguf_version,
           (long long)mi.n_tensors, (long long)mi.n_metadata);
    printf("architecture:  %s%s%s\n", mi.arch, mi.name[0] ? ", " : "", mi.name);
    printf("parameters:    %.3f B, %.2f GiB of weights\n", (double)mi.n_params / 1e9, (double)mi.weight_bytes / (1 << 30));
    printf("shape:         %d layers, embedding %d, %d heads (%d KV) of %d, FFN %d, vocabulary %d\n",
           mi.n_layer, mi.n_embd, mi.n_head, mi.n_head_kv, mi.head_dim, mi.n_ff, mi.n_vocab);
    printf("context:       %d trained, %d in use; KV cache holds %d tokens\n", mi.n_ctx_train, ei.max_model_len,
           ei.kv_tokens);
    printf("\nmetadata:\n");
    for (int64_t i = 0; i < mi.n_metadata; i++) {
        struct llm_meta kv;
        if (llm_model_meta(E, i, &kv) != LLM_OK) cli_die("%s", llm_last_error(E));
        printf("  %-44s ", kv.key);
        switch (kv.type) {
        case LLM_META_STRING:
            printf("\"%.*s\"", (int)CLI_MIN(kv.str_len, 120), kv.str);
            if (kv.str_len > 120) printf("... (%llu bytes)", (unsigned long long)kv.str_len);
            break;
        case LLM_META_ARRAY: printf("[array of %llu]", (unsigned long long)kv.n_elems); break;
        case LLM_META_FLOAT: printf("%g", kv.f); break;
        case LLM_META_BOOL: printf("%s", kv.b ? "true" : "false"); break;
        case LLM_META_INT: printf("%lld", (long long)kv.i); break;
        case LLM_META_UINT: printf("%llu", (unsigned long long)kv.u); break;
        }
        printf("\n");
    }
    // tensor summary: count and bytes per type, in the order of the type numbers
    struct cli_type_sum *sum = calloc((size_t)CLI_MAX(mi.n_tensors, 1), sizeof(*sum));
    if (!sum) cli_die("out of memory");
    int n_types = 0;
    for (int64_t i = 0; i < mi.n_tensors; i++) {
        struct llm_tensor_info t;
        if (llm_model_tensor(E, i, &t) != LLM_OK) cli_die("%s", llm_last_error(E));
        int k = 0;
        while (k < n_types && sum[k].type < t.type) k++;
        if (k == n_types || sum[k].type != t.type) {
            memmove(&sum[k + 1], &sum[k], (size_t)(n_types - k) * sizeof(*sum));
            sum[k] = (struct cli_type_sum){t.type, t.type_name, 0, 0};
            n_types++;
        }
        sum[k].count++;
        sum[k].bytes += t.bytes;
    }
    printf("\ntensors:\n");
    for (int k = 0; k < n_types; k++)
        printf("  %-6s %5lld tensors %10.2f MiB\n", sum[k].name, sum[k].count, (double)sum[k].bytes / (1 << 20));
    free(sum);
    llm_engine_free(E);
    return 0;
}

// llm info --devices: the GPUs of the backends built into the library.
int cli_cmd_devices(void) {
    struct llm_device devs[16];
    char err[512];
    int n = llm_list_devices(devs, 16, err, sizeof(err));
    if (n < 0) cli_die("%s", err);
    if (!llm_has_backend(LLM_BACKEND_VULKAN)) {
        printf("this build has no GPU backend (make VULKAN=1 adds Vulkan); the CPU backend is always there\n");
        return 0;
    }
    printf("Vulkan devices:\n");
    int shown = 0;
    for (int i = 0; i < n && i < 16; i++) {
        if (devs[i].backend != LLM_BACKEND_VULKAN) continue;
        printf("  %d: %s (%s), %.1f GiB, subgroup size %d%s, 16-bit storage %s, Vulkan %s\n", devs[i].index,
               devs[i].name, devs[i].type, (double)devs[i].memory_bytes / (1 << 30), devs[i].subgroup_size,
               devs[i].subgroup_arithmetic ? " (arithmetic)" : "", devs[i].storage_16bit ? "yes" : "no",
               devs[i].api_version);
        shown++;
    }
    if (shown == 0) printf("  (none)\n");
    return 0;
}

int cli_cmd_tokenize(struct cli *c) {
    if (!!c->prompt + !!c->prompt_file != 1) cli_die("tokenize: give exactly one of -p or -f");
    c->ep.load = LLM_LOAD_VOCAB;
    llm_engine *E = cli_engine(c);
    int n = 0;
    int32_t *ids = cli_prompt(E, c, &n);
    fputs(c->json ? "[" : "", stdout);
    for (int i = 0; i < n; i++) printf("%s%d", i ? (c->json ? "," : " ") : "", ids[i]);
    fputs(c->json ? "]\n" : "\n", stdout);
    free(ids);
    llm_engine_free(E);
    return 0;
}
