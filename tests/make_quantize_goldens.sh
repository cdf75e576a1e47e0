#!/bin/sh
# Makes tests/golden/quantize_mix.txt: what llama.cpp's llama-quantize writes for the generator's
# F16 models at each file type llm quantize offers (tests/test_quantize.sh compares llm quantize's
# files with it through tests/quantize_mix.py). Run from the repository root after
# `make build/gen_model`, with the peer built (../shared/peer/setup.sh --native) and Python with
# numpy and gguf (LLM_PYTHON; default: the fixtures' venv).
#   nano-k8   8 layers of rows of 256, 4 query heads a KV head, untied: every rule of the mixes
#   tiny-576  SmolLM2-135M's rows of 576 (K-quants fall back), tied embedding
#   LLM_LLAMA_QUANTIZE   llama-quantize (default: the peer's)
set -e
quantize=${LLM_LLAMA_QUANTIZE:-${LLM_PEER_DIR:-$HOME/.cache/llm-peer}/llama.cpp/build/bin/llama-quantize}
py=${LLM_PYTHON:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests/venv/bin/python}
[ -x "$quantize" ] || { echo "make_quantize_goldens: $quantize not found (../shared/peer/setup.sh --native)" >&2; exit 1; }
export LD_LIBRARY_PATH="$(dirname "$quantize")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set --
for key in $(sh tests/test_quantize.sh --keys); do
    shape=${key%%/*} t=${key#*/} pure=
    case "$t" in pure-*) pure=--pure t=${t#pure-} ;; esac
    [ -f "$tmp/$shape.gguf" ] || build/gen_model --shape "$shape" --type f16 --vocab synthetic:300 --seed 1 -o "$tmp/$shape.gguf" 2>/dev/null
    out="$tmp/$shape-$t$pure.gguf"
    "$quantize" $pure "$tmp/$shape.gguf" "$out" "$(echo "$t" | tr a-z A-Z)" >"$tmp/log" 2>&1 ||
        { cat "$tmp/log" >&2; echo "llama-quantize failed for $key" >&2; exit 1; }
    set -- "$@" "$tmp/$shape.gguf" "$out" "$key"
done
{
    echo "# llama-quantize's files for tests/test_quantize.sh: made by tests/make_quantize_goldens.sh"
    echo "# (llama.cpp of PyPI's llama-cpp-python 0.3.36) from build/gen_model --type f16 --vocab synthetic:300"
    echo "# --seed 1 models; see tests/quantize_mix.py for the lines"
    "$py" tests/quantize_mix.py golden "$@"
} > tests/golden/quantize_mix.txt
echo "tests/golden/quantize_mix.txt: $(grep -vc '^#' tests/golden/quantize_mix.txt) lines"
