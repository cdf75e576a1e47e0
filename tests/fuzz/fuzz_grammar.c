// fuzz_grammar: hostile grammars and JSON Schemas, and texts run through them.
// Input: byte 0 bit 0: the rest up to the first 0x01 byte (or the end) is a JSON Schema (1) or a
// GBNF grammar (0); what follows the 0x01 byte is a text fed to the grammar's matcher byte by byte.
// Invariants:
//   - a refused grammar or schema has a message ("grammar: ..." / "json schema: ..."); a schema's
//     grammar always compiles;
//   - for every byte of the text: the DFA's answer (llm__gmatch_ok) is the pushdown automaton's
//     (llm__gmatch_run), and llm__gmatch_accept takes the byte exactly when it said so;
//   - the token mask of Llama 3's vocabulary (llama.cpp's file, fetched by tests/fixtures.sh) at
//     the start and after the text: every 97th token's bit is the automaton's answer for it, and
//     the end-of-generation tokens are allowed exactly when the text may end.
// Dictionary: tests/fuzz/grammar.dict.
#define FUZZ_NAME "grammar"
#include "../../llm.c"
#include "fuzz.h"

static llm_engine *fuzz_engine;
static struct llm__gtrie fuzz_trie;
static uint64_t *fuzz_mask;

static void fuzz_init(void) {
    char path[1024], err[512];
    fuzz_vocab_path("ggml-vocab-llama-bpe.gguf", path, sizeof(path));
    struct llm_engine_params p = llm_engine_params_default();
    p.model_path = path;
    p.load = LLM_LOAD_VOCAB;
    p.n_threads = 1;
    if (!(fuzz_engine = llm_engine_create(&p, err, sizeof(err))))
        fuzz_setup_failed("%s (make fixtures fetches the vocabularies)", err);
    if (!llm__gtrie_build(&fuzz_trie, &fuzz_engine->vocab)) fuzz_setup_failed("the token trie: out of memory");
    fuzz_mask = calloc(((size_t)fuzz_trie.n_vocab + 63) / 64, sizeof(*fuzz_mask));
    if (!fuzz_mask) fuzz_setup_failed("out of memory");
}

static void fuzz_check_mask(struct llm__gmatch *m) {
    if (!llm__gmatch_mask(m, &fuzz_trie, fuzz_mask)) {
        FUZZ_CHECK(m->err.msg[0] != 0, "a mask failed without a message");
        return;
    }
    for (int id = 0; id < fuzz_trie.n_vocab; id += 97) {
        uint32_t len = fuzz_trie.tb_off[id + 1] - fuzz_trie.tb_off[id];
        if (!len) continue;
        struct llm__gstate st;
        bool want = llm__gmatch_run(m, fuzz_trie.tb + fuzz_trie.tb_off[id], len, &st);
        if (m->oom || m->full) return;
        FUZZ_CHECK(want == (bool)(fuzz_mask[id >> 6] >> (id & 63) & 1), "token %d: the mask says %d", id, !want);
    }
    int32_t eog = fuzz_trie.eog[0];
    FUZZ_CHECK((bool)(fuzz_mask[eog >> 6] >> (eog & 63) & 1) == llm__gmatch_can_end(m), "the end-of-generation token");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!fuzz_engine) fuzz_init();
    if (size == 0) return 0;
    bool schema = data[0] & 1;
    const uint8_t *sep = memchr(data + 1, 1, size - 1);
    size_t glen = sep ? (size_t)(sep - data - 1) : size - 1;
    const uint8_t *text = sep ? sep + 1 : data + size;
    size_t tlen = (size_t)(data + size - text);
    char *src = malloc(glen + 1);
    FUZZ_CHECK(src != NULL, "out of memory");
    memcpy(src, data + 1, glen);
    src[glen] = 0;
    char *gbnf = NULL;
    if (schema) {
        char err[512] = "";
        int n = llm_json_schema_to_grammar(src, NULL, 0, err, sizeof(err));
        if (n < 0) {
            FUZZ_CHECK(!strncmp(err, "json schema: ", 13), "a refused schema's message: '%s'", err);
            free(src);
            return 0;
        }
        gbnf = malloc((size_t)n + 1);
        FUZZ_CHECK(gbnf && llm_json_schema_to_grammar(src, gbnf, (size_t)n + 1, err, sizeof(err)) == n, "again");
    }
    struct llm__err e = {0};
    struct llm__grammar *g = llm__grammar_parse(gbnf ? gbnf : src, NULL, &e);
    FUZZ_CHECK(g || !strncmp(e.msg, "grammar: ", 9), "a refused grammar's message: '%s'", e.msg);
    FUZZ_CHECK(g || !schema, "a schema's grammar does not compile: %s\n%s", e.msg, gbnf);
    struct llm__gmatch m;
    if (g && llm__gmatch_init(&m, g)) {
        fuzz_check_mask(&m);
        for (size_t i = 0; i < tlen && i < 512; i++) {
            struct llm__gstate st;
            bool dfa = llm__gmatch_ok(&m, text + i, 1), pda = llm__gmatch_run(&m, text + i, 1, &st);
            if (m.oom || m.full) break;
            FUZZ_CHECK(dfa == pda, "byte %zu: the DFA says %d, the automaton %d", i, dfa, pda);
            FUZZ_CHECK(llm__gmatch_accept(&m, text + i, 1) == dfa, "byte %zu: accept differs", i);
            if (!dfa) break;
        }
        fuzz_check_mask(&m);
        llm__gmatch_free(&m);
    }
    llm__grammar_free(g);
    free(gbnf);
    free(src);
    return 0;
}
