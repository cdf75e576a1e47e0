#!/bin/sh
# Writes the test models of tests/models.txt into $2 with the generator $1, skipping those that
# exist (delete build/models to regenerate) and those whose vocabulary file is absent.
gen=$1; out=$2
mkdir -p "$out"
grep -v '^#' tests/models.txt | while read -r name shape type vocab pre; do
    [ -n "$name" ] || continue
    [ -f "$out/$name.gguf" ] && continue
    case "$vocab" in
        synthetic:*) ;;
        *) [ -f "$vocab" ] || { echo "SKIP model $name: $vocab is absent"; continue; } ;;
    esac
    "$gen" --shape "$shape" --type "$type" --vocab "$vocab" --seed 1 ${pre:+--pre "$pre"} -o "$out/$name.gguf.tmp" 2>/dev/null &&
        mv "$out/$name.gguf.tmp" "$out/$name.gguf" || { echo "gen_model failed for $name"; exit 1; }
done
