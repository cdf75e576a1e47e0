#!/bin/sh
# Writes the test models of tests/models.txt into $2 with the generator $1 (those llama-quantize
# made: copied from tests/models), skipping those that exist (delete build/models to regenerate). A vocabulary that is not synthetic is a file of
# $LLM_VOCAB_DIR (fetched by tests/fixtures.sh; make models sets it); a missing one is an error.
gen=$1; out=$2
vocab_dir=${LLM_VOCAB_DIR:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c}/vocab}
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
for f in tests/models/*.gguf; do
    [ -f "$f" ] && ! cmp -s "$f" "$out/${f##*/}" && { cp "$f" "$out/${f##*/}" || exit 1; }
done
exit 0
