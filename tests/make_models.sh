#!/bin/sh
# Writes the test models of tests/models.txt into $2 with the generator $1 (those llama-quantize
# made: copied from tests/models), skipping those that exist (delete build/models to regenerate). A vocabulary that is not synthetic is a file of
# $LLM_VOCAB_DIR (fetched by tests/fixtures.sh; make models sets it); a missing one is an error.
gen=$1; out=$2
vocab_dir=${LLM_VOCAB_DIR:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/vocab}
mkdir -p "$out"
grep -v '^#' tests/models.txt | while read -r name shape type vocab pre; do
    [ -n "$name" ] || continue
    [ -f "$out/$name.gguf" ] && continue
    if [ "$shape" = llama-quantize ]; then   # llama.cpp's file, committed (tests/make_quantized.sh)
        cp "tests/models/$name.gguf" "$out/$name.gguf" || { echo "model $name: tests/models/$name.gguf is missing" >&2; exit 1; }
        continue
    fi
    case "$vocab" in
        synthetic:*|substrings:*) ;;
        *) vocab=$vocab_dir/$vocab
           [ -f "$vocab" ] || { echo "model $name: $vocab is missing (sh tests/fixtures.sh fetches it)" >&2; exit 1; } ;;
    esac
    "$gen" --shape "$shape" --type "$type" --vocab "$vocab" --seed 1 ${pre:+--pre "$pre"} -o "$out/$name.gguf.tmp" 2>/dev/null &&
        mv "$out/$name.gguf.tmp" "$out/$name.gguf" || { echo "gen_model failed for $name" >&2; exit 1; }
done || exit 1
# Files made by llama.cpp's llama-quantize (tests/make_quantized.sh), committed because the tests
# cannot run llama.cpp: copied as they are.
# Hugging Face directories of the tiny models of each architecture (hf/NAME, next to hf/NAME.gguf:
# the same weights as a GGUF file) for test_hf, made by tests/hf/gguf_to_hf.py with the fixtures'
# Python ($LLM_PYTHON); and AWQ / GPTQ checkpoints of four of them with their reference
# dequantizations (NAME-ref) by tests/hf/awq_gptq.py: the layouts' variants between them (AWQ;
# GPTQ v1 and v2, 4 and 8 bits, symmetric or not, act-order, groups of 32, 64, 128 and whole
# rows; Phi-3's fused projections, Gemma's norms). Remade when the scripts change.
py=${LLM_PYTHON:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/venv/bin/python}
stamp="$(cksum < tests/hf/gguf_to_hf.py) $(cksum < tests/hf/awq_gptq.py)"
if [ ! -f "$out/hf/stamp" ] || [ "$(cat "$out/hf/stamp")" != "$stamp" ]; then
    rm -rf "$out/hf" && mkdir -p "$out/hf" || exit 1
    for name in tiny-qwen2-chat tiny-qwen3-f32 tiny-phi3-f32 tiny-gemma2-f32 tiny-gemma3-f32; do
        "$py" tests/hf/gguf_to_hf.py model "$out/$name.gguf" "$out/hf/$name" --dtype f32 --gguf "$out/hf/$name.gguf" ||
            { echo "tests/hf/gguf_to_hf.py failed for $name (with $py)" >&2; exit 1; }
    done
    while read -r name src args; do
        "$py" tests/hf/awq_gptq.py pack "$out/hf/$src" "$out/hf/$name" $args &&
            "$py" tests/hf/awq_gptq.py dequant "$out/hf/$name" "$out/hf/$name-ref" ||
            { echo "tests/hf/awq_gptq.py failed for $name (with $py)" >&2; exit 1; }
    done <<EOF
tiny-qwen3-awq tiny-qwen3-f32 --method awq --group 128
tiny-phi3-gptq tiny-phi3-f32 --method gptq --group 32 --act-order
tiny-gemma2-gptq8 tiny-gemma2-f32 --method gptq --bits 8 --group 64 --sym --v2
tiny-gemma3-gptq tiny-gemma3-f32 --method gptq --group -1 --v2
EOF
    echo "$stamp" > "$out/hf/stamp"
fi
for f in tests/models/*.gguf; do
    [ -f "$f" ] && ! cmp -s "$f" "$out/${f##*/}" && { cp "$f" "$out/${f##*/}" || exit 1; }
done
exit 0
