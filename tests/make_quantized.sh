#!/bin/sh
# Makes tests/models/nano-k-TYPE.gguf: the generator's F16 model of the nano-k shape (1 layer,
# rows of 256) quantized by llama.cpp's own llama-quantize, so that the tests run files whose
# quantized bytes llama.cpp wrote, not llm.c. --pure: every 2-D tensor in TYPE (the output and
# embedding tables too), so each file exercises one type only; no importance matrix (llama-quantize
# asks for one only for IQ1/IQ2 and Q2_K_S). Small (180-290 KB), committed; make_models.sh copies
# them into build/models, tests/make_goldens.sh makes their goldens. Run from the repository root
# with the peer built (../shared/peer/setup.sh --native) after `make build/gen_model`.
set -e
quantize=${LLAMA_QUANTIZE:-${LLM_PEER_DIR:-$HOME/.cache/llm-peer}/llama.cpp/build/bin/llama-quantize}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/gen_model --shape nano-k --type f16 --vocab synthetic:300 --seed 1 -o "$tmp/nano-k-f16.gguf" 2>/dev/null
mkdir -p tests/models
for type in q3_k q2_k iq4_xs; do
    "$quantize" --pure "$tmp/nano-k-f16.gguf" "tests/models/nano-k-$type.gguf" "$(echo $type | tr a-z A-Z)" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log" >&2; echo "llama-quantize failed for $type" >&2; exit 1; }
    echo "tests/models/nano-k-$type.gguf"
done
