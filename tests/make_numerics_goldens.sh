#!/bin/sh
# Makes tests/golden/numerics.txt for tests/test_numerics.sh: for every case of
# tests/numerics_cases.sh, how far llm's log-probabilities and llama.cpp's (llama-perplexity, the
# peer's native tools: ../shared/peer/setup.sh --native) are from a float64 reference of the same
# dequantized weights (tests/numerics.py), on the same text, chunks and KV cache type:
#   llm perplexity -m M -f TEXT -c 128 --chunks 4 -t 2 --kv-cache-dtype KV --kl-divergence-base L
#   llama-perplexity -m M -f TEXT -c 128 --chunks 4 -t 2 -ctk KV -ctv KV -fa off --kl-divergence-base P
#   (-fa on for q8_0: llama.cpp quantizes V only with flash attention)
#   python3 tests/numerics.py M L P
# Run from the repository root after make and make models, with the fixtures' environment:
#   LLM_REAL_MODELS=~/.cache/llm.c-tests/models LLM_PYTHON=~/.cache/llm.c-tests/venv/bin/python \
#   sh tests/make_numerics_goldens.sh
set -e
bin=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}/llama.cpp/build/bin
py=${LLM_PYTHON:-python3}
out=tests/golden/numerics.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/numerics_cases.sh
field() { sed -n "s/.*\"$2\": \([-0-9.e]*\).*/\1/p" <<EOT
$1
EOT
}
{
    echo "# The distance of llm's and of llama.cpp's log-probabilities from a float64 reference of the same"
    echo "# weights (tests/numerics.py) on $NUMERICS_CHUNKS chunks of $NUMERICS_CTX tokens of $NUMERICS_TEXT;"
    echo "# made by tests/make_numerics_goldens.sh ($(uname -m), $(grep -o -m1 'avx512_vnni\|avx2\|asimddp' /proc/cpuinfo 2>/dev/null | tail -n 1))."
    echo "# num NAME KL TOP1 DTOP1 PEER_KL PEER_TOP1 PEER_DTOP1 (tests/numerics.py says what they are)"
    numerics_cases | while read -r name src kv; do
        m=$(numerics_model "$src" ./llm build/models "$tmp")
        ./llm perplexity -m "$m" -f "$NUMERICS_TEXT" -c "$NUMERICS_CTX" --chunks "$NUMERICS_CHUNKS" -t 2 \
            --kv-cache-dtype "$kv" --kl-divergence-base "$tmp/l.kld" > /dev/null 2>&1
        fa=off; [ "$kv" = q8_0 ] && fa=on   # (llama.cpp quantizes V only with flash attention)
        "$bin/llama-perplexity" -m "$m" -f "$NUMERICS_TEXT" -c "$NUMERICS_CTX" --chunks "$NUMERICS_CHUNKS" -t 2 \
            -ctk "$kv" -ctv "$kv" -fa $fa --kl-divergence-base "$tmp/p.kld" > /dev/null 2>&1
        r=$("$py" tests/numerics.py "$m" "$tmp/l.kld" "$tmp/p.kld")
        l=$(echo "$r" | head -n 1) p=$(echo "$r" | tail -n 1)
        echo "num $name $(field "$l" kl) $(field "$l" top1) $(field "$l" dtop1) $(field "$p" kl) $(field "$p" top1) $(field "$p" dtop1)"
    done
} > "$out.tmp"
mv "$out.tmp" "$out"
cat "$out"
