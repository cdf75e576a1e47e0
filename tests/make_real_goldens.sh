#!/bin/sh
# Makes tests/golden/real/*.json with llama.cpp (the peer's llamacpp.py, llama-cpp-python; set up
# with ../shared/peer/setup.sh --python) for the real models tests/fixtures.sh fetches
# ($LLM_REAL_MODELS: SmolLM2-135M-Instruct Q4_1, Gemma-3-270M Q4_K_M): for each model and each
# prompt below, llama.cpp's prompt tokens, 32 greedy tokens and the top-5 log-probabilities of
# each step, with an f32 KV cache, flash attention off and one thread, as tests/make_goldens.sh
# does for the generated models. The chat prompt is written in each model's own chat template
# (ChatML for SmolLM2, Gemma's turns for Gemma 3) and tokenized with its control tokens parsed;
# the golden gets "prompt": {"special": true} so that test_golden tokenizes it the same way.
# Run from the repository root.
#   LLM_REAL_MODELS   the models (default ${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests/models)
#   LLM_PEER_SCRIPT   the runner (default ../shared/peer/llamacpp.py)
set -e
peer=${LLM_PEER_SCRIPT:-../shared/peer/llamacpp.py}
models=${LLM_REAL_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests/models}
[ -f "$peer" ] || { echo "make_real_goldens: $peer not found (../shared/peer/setup.sh --python)" >&2; exit 1; }
out=tests/golden/real
mkdir -p "$out"
# NAME|TEXT: the prompts every model gets (\n: a new line)
prompts='prose|The history of the Roman Empire spans more than a thousand years, beginning with
chinese|北京是中国的首都，也是一座历史悠久的城市。每年都有很多游客
code_c|#include <stdio.h>\n\nint main(void) {\n    for (int i = 0; i < 10; i++)
code_py|def quicksort(arr):\n    if len(arr) <= 1:\n        return arr\n    pivot =
math|Question: A train travels 60 miles in 1.5 hours. What is its average speed?\nAnswer:
french|La Révolution française a commencé en 1789, lorsque
list|The planets of the solar system, in order from the Sun:\n1. Mercury\n2.
recipe|To make a simple tomato sauce, first heat some olive oil in a pan, then'
run() {   # MODEL_FILE SHORT NAME TEXT [--special]
    text=$(printf '%b' "$4")
    python3 "$peer" --model "$models/$1" --prompt "$text" --n 32 --threads 1 --top 5 \
        --flash-attn off --kv-f32 $5 --json-out "$out/$2.$3.json" >/dev/null
    if [ -n "$5" ]; then
        python3 -c 'import json, sys
p = sys.argv[1]; j = json.load(open(p, encoding="utf-8")); j["prompt"]["special"] = True
open(p, "w", encoding="utf-8").write(json.dumps(j, ensure_ascii=False))' "$out/$2.$3.json"
    fi
    echo "$out/$2.$3.json"
}
for spec in "SmolLM2-135M-Instruct.Q4_1.gguf smollm2" "gemma-3-270m-q4_k_m.gguf gemma3"; do
    set -- $spec
    file=$1; short=$2
    [ -f "$models/$file" ] || { echo "make_real_goldens: $models/$file is missing (sh tests/fixtures.sh)" >&2; exit 1; }
    printf '%s\n' "$prompts" | while IFS='|' read -r name text; do run "$file" "$short" "$name" "$text"; done
    case $short in
        smollm2) chat='<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nGive me three tips for staying healthy.<|im_end|>\n<|im_start|>assistant\n' ;;
        gemma3) chat='<start_of_turn>user\nGive me three tips for staying healthy.<end_of_turn>\n<start_of_turn>model\n' ;;
    esac
    run "$file" "$short" chat "$chat" --special
done
