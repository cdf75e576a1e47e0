#!/bin/sh
# Makes tests/golden/*.json with llama.cpp (../shared/peer, set up with its setup.sh): for every
# model of tests/models.txt and two prompts, llama.cpp's prompt tokens, 32 greedy tokens and the
# top-5 log-probabilities of each step, from llama-cpp-python (the peer's llamacpp.py; set up
# with ../shared/peer/setup.sh --python). llama.cpp runs with its KV cache in f32 and flash
# attention off: that is the configuration in which it computes attention without rounding to
# half precision, so differences left are those of the weights and matrix products the test is
# about. Run from the repository root after `make models`.
#   sh tests/make_goldens.sh NAME...     the models named (of tests/models.txt)
#   sh tests/make_goldens.sh             again those that have goldens (tests/golden/NAME.p1.json;
#                                        some test models are not for llama.cpp: tiny-vocab3)
#   LLM_PEER_SCRIPT                      the runner (default ../shared/peer/llamacpp.py)
set -e
peer=${LLM_PEER_SCRIPT:-../shared/peer/llamacpp.py}
[ -f "$peer" ] || { echo "make_goldens: $peer not found (../shared/peer/setup.sh --python)" >&2; exit 1; }
mkdir -p tests/golden
grep -v '^#' tests/models.txt | while read -r name shape type vocab; do
    [ -n "$name" ] || continue
    if [ $# -gt 0 ]; then
        case " $* " in *" $name "*) ;; *) continue ;; esac
    elif [ ! -f "tests/golden/$name.p1.json" ]; then
        continue
    fi
    i=0
    for prompt in "Once upon a time, there was a little robot who" "def fib(n): return n if n < 2 else fib(n - 1)"; do
        i=$((i + 1))
        python3 "$peer" --model "build/models/$name.gguf" --prompt "$prompt" --n 32 \
            --threads 1 --top 5 --flash-attn off --kv-f32 --json-out "tests/golden/$name.p$i.json" >/dev/null
        echo "tests/golden/$name.p$i.json"
    done
done
