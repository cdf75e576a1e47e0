#!/bin/sh
# The perplexity table of docs/cli.md for the real models: llm perplexity against llama.cpp's
# llama-perplexity (the peer's native tools, ../shared/peer/setup.sh --native) on the GPL 3 text,
# -c 512 --chunks CHUNKS (default 14), f32 KV cache and flash attention off on both sides:
#   - the quantized file as it is;
#   - its weights dequantized to F32 by llama-quantize (both programs then compute the same
#     function: what is left of a difference is a bug, not a rounding);
#   - how far each program's quantized run is from the F32 one: llama.cpp writes the F32 model's
#     --kl-divergence-base file, both programs read it with --kl-divergence (mean KL divergence,
#     the same top token).
# Usage (from the repository root, after make): sh bench/perplexity_real.sh [MODEL.gguf ...]
# (default: the fixtures SmolLM2-135M-Instruct Q4_1 and Gemma-3-270M Q4_K_M). Needs 4 GB of
# scratch space in $TMPDIR for the F32 files and the base files.
set -eu
FIXTURES=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
BIN=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}/llama.cpp/build/bin
CHUNKS=${CHUNKS:-14}
text=/usr/share/common-licenses/GPL-3
[ $# -gt 0 ] || set -- "$FIXTURES/models/SmolLM2-135M-Instruct.Q4_1.gguf" "$FIXTURES/models/gemma-3-270m-q4_k_m.gguf"
for t in llama-perplexity llama-quantize; do
    [ -x "$BIN/$t" ] || { echo "perplexity_real: $BIN/$t not found (run ../shared/peer/setup.sh --native)" >&2; exit 1; }
done
[ -x ./llm ] || { echo "perplexity_real: ./llm not found (run make first)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
args="-f $text -c 512 --chunks $CHUNKS -t 2"
peer() { "$BIN/llama-perplexity" $args -ctk f32 -ctv f32 -fa off "$@" 2>&1; }
ours() { ./llm perplexity $args --kv-cache-dtype f32 "$@" 2>&1; }
final() { sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- .*/\1/p' | tail -n 1; }
kld() { awk '/^Mean PPL\(Q\) / { q = $4 } /^Mean    KLD:/ { k = $3 } /^Same top p:/ { s = $4 }
             END { printf "PPL %s, mean KLD %s, same top %s%%", q, k, s }'; }
pct() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.5f%%", (a - b) / b * 100 }'; }
echo "| model | llm.c | llama-perplexity | difference |"
echo "|---|---:|---:|---:|"
for m in "$@"; do
    name=$(basename "$m" .gguf)
    "$BIN/llama-quantize" --allow-requantize "$m" "$tmp/f32.gguf" F32 > /dev/null 2>&1
    a=$(ours -m "$m" | final); b=$(peer -m "$m" | final)
    echo "| $name | $a | $b | $(pct "$a" "$b") |"
    b=$(peer -m "$tmp/f32.gguf" --kl-divergence-base "$tmp/base.bin" | final)
    a=$(ours -m "$tmp/f32.gguf" | final)
    echo "| $name, F32 | $a | $b | $(pct "$a" "$b") |"
    echo "  $name against its F32 weights: llm.c $(ours -m "$m" --kl-divergence --kl-divergence-base "$tmp/base.bin" | kld);" \
         "llama.cpp $(peer -m "$m" --kl-divergence --kl-divergence-base "$tmp/base.bin" | kld)"
    rm -f "$tmp/f32.gguf" "$tmp/base.bin"
done
