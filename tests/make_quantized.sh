#!/bin/sh
# Makes the test models that llama.cpp's own llama-quantize writes, from F16 models of the
# generator, so that the tests run files whose quantized bytes llama.cpp wrote, not llm.c. They
# are committed in tests/models/ (CI has no llama.cpp); `make models` copies them into
# build/models and `sh tests/make_goldens.sh NAME...` makes their goldens. Run from the
# repository root after `make build/gen_model`.
#   - the models of tests/models.txt whose SHAPE is "llama-quantize" (NAME TYPE SHAPE:VOCAB):
#     llama-quantize's default mix for TYPE;
#   - tests/models/nano-k-{q3_k,q2_k,iq4_xs}.gguf: the nano-k shape (1 layer, rows of 256) with
#     --pure (every 2-D tensor in TYPE, the output and embedding tables too), so each file
#     exercises one type only; no importance matrix (llama-quantize asks for one only for IQ1/IQ2
#     and Q2_K_S). 180-290 KB each; and the micro shape's --pure files of the plain types.
#   LLM_LLAMA_QUANTIZE   llama-quantize (default: the peer's, ../shared/peer/setup.sh --native)
set -e
quantize=${LLM_LLAMA_QUANTIZE:-${LLM_PEER_DIR:-$HOME/.cache/llm-peer}/llama.cpp/build/bin/llama-quantize}
[ -x "$quantize" ] || { echo "make_quantized: $quantize not found (../shared/peer/setup.sh --native)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p tests/models
grep -v '^#' tests/models.txt | while read -r name shape type source; do
    [ "$shape" = llama-quantize ] || continue
    # SOURCE: SHAPE:VOCAB of the generator's F16 model, seed 1
    build/gen_model --shape "${source%%:*}" --type f16 --vocab "${source#*:}" --seed 1 -o "$tmp/f16.gguf" 2>/dev/null
    "$quantize" "$tmp/f16.gguf" "tests/models/$name.gguf" "$(echo "$type" | tr a-z A-Z)" >/dev/null 2>&1
    echo "tests/models/$name.gguf"
done
# tests/models/micro-pure-{q8_0,q4_0,q4_1,q5_0,q5_1}.gguf: the micro shape with --pure, whose
# bytes the engine's quantization at load (llm_engine_params.quantize) of micro-f16 must equal
build/gen_model --shape micro --type f16 --vocab synthetic:300 --seed 1 -o "$tmp/micro-f16.gguf" 2>/dev/null
for type in q8_0 q4_0 q4_1 q5_0 q5_1; do
    "$quantize" --pure "$tmp/micro-f16.gguf" "tests/models/micro-pure-$type.gguf" "$(echo $type | tr a-z A-Z)" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log" >&2; echo "llama-quantize failed for $type" >&2; exit 1; }
    echo "tests/models/micro-pure-$type.gguf"
done
build/gen_model --shape nano-k --type f16 --vocab synthetic:300 --seed 1 -o "$tmp/nano-k-f16.gguf" 2>/dev/null
for type in q3_k q2_k iq4_xs; do
    "$quantize" --pure "$tmp/nano-k-f16.gguf" "tests/models/nano-k-$type.gguf" "$(echo $type | tr a-z A-Z)" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log" >&2; echo "llama-quantize failed for $type" >&2; exit 1; }
    echo "tests/models/nano-k-$type.gguf"
done
