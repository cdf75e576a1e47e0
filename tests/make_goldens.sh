#!/bin/sh
# Makes tests/golden/*.json with llama.cpp (../shared/peer, set up with its setup.sh): for every
# model of tests/models.txt and two prompts, llama.cpp's prompt tokens, 32 greedy tokens and the
# top-5 log-probabilities of each step. llama.cpp runs with its KV cache in f32 and flash
# attention off (tests/golden/peer_kv_f32.mjs): that is the configuration in which it computes
# attention without rounding to half precision, so differences left are those of the weights
# and matrix products the test is about. Run from the repository root after `make models`.
set -e
mkdir -p tests/golden
grep -v '^#' tests/models.txt | while read -r name shape type vocab; do
    [ -n "$name" ] || continue
    i=0
    for prompt in "Once upon a time, there was a little robot who" "def fib(n): return n if n < 2 else fib(n - 1)"; do
        i=$((i + 1))
        node tests/golden/peer_kv_f32.mjs --model "build/models/$name.gguf" --prompt "$prompt" --n 32 \
            --threads 1 --top 5 --flash-attn off --json-out "tests/golden/$name.p$i.json" >/dev/null
        sed -i "s|\"path\": \".*/build/models/|\"path\": \"build/models/|" "tests/golden/$name.p$i.json"
        echo "tests/golden/$name.p$i.json"
    done
done
