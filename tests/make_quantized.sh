#!/bin/sh
# Makes the test models of tests/models.txt whose SHAPE is "llama-quantize" (tests/models/NAME.gguf,
# committed: CI has no llama.cpp): files quantized by llama.cpp's own llama-quantize from an F16
# model of the generator, so that they are llama.cpp's files, not the generator's. Run from the
# repository root after `make build/gen_model`; then `make models` copies them into build/models
# and `sh tests/make_goldens.sh NAME...` makes their goldens.
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
