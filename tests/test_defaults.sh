#!/bin/sh
# What the documentation says of defaults and of the build holds: the KV cache's default size
# (llm --help, README: a quarter of the free memory, at most --max-num-seqs full contexts, at
# least one context) as `llm info` reports it, and `make VULKAN=1` without glslangValidator
# naming the Debian package to install.
# Usage: tests/test_defaults.sh LLM_BINARY MODELS_DIR
llm=$1
m=$2/tiny-q8_0.gguf
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_defaults: $*"; }

# kv_tokens SEQS CTX BLOCK: the tokens `llm info` says the default KV cache holds
kv_tokens() {
    "$llm" info -m "$m" --max-num-seqs "$1" -c "$2" --block-size "$3" 2>/dev/null |
        sed -n 's/.*KV cache holds \([0-9]*\) tokens.*/\1/p'
}
# A tiny model's contexts are far below a quarter of any machine's memory: the cap decides.
for case in "1 250 32 256" "3 256 16 768" "5 100 8 520"; do
    set -- $case
    got=$(kv_tokens "$1" "$2" "$3")
    [ "$got" = "$4" ] && ok || bad "default KV cache with --max-num-seqs $1 -c $2 --block-size $3: '$got' tokens, want $4"
done
help=$("$llm" --help | sed -n '/--kv-cache-memory/,/--kv-cache-dtype/p' | tr -s ' \n' '  ')
case "$help" in
    *"a quarter of the free memory"*"at most what --max-num-seqs full contexts need"*"at least one context"*) ok ;;
    *) bad "llm --help does not state --kv-cache-memory's default: $help" ;;
esac

# make VULKAN=1 without glslangValidator: the package to install, not "not found" from the shell
tmp=$(mktemp -d)
out=$(make --no-print-directory VULKAN=1 GLSL=/nonexistent/glslangValidator BUILD="$tmp" \
      "$tmp/vulkan/shaders/llm_shaders.inc" 2>&1); rc=$?
rm -rf "$tmp"
[ "$rc" != 0 ] && case "$out" in *"glslang-tools"*) true ;; *) false ;; esac && ok ||
    bad "make VULKAN=1 without glslangValidator: exit $rc, '$out'"

echo "test_defaults: $pass passed, $fail failed"
[ "$fail" = 0 ]
