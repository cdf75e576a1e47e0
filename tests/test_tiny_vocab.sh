#!/bin/sh
# A model whose vocabulary has 3 tokens (<unk>, <s>, </s>; tests/models.txt: tiny-vocab3) through
# every command that makes up token ids or divides by the vocabulary's size: each ends normally
# with its usual output (the serving benchmark's random prompts were `% (n_vocab - 3)`: SIGFPE).
# Usage: tests/test_tiny_vocab.sh LLM_BINARY MODELS_DIR
llm=$1
m=$2/tiny-vocab3.gguf
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_tiny_vocab: $*"; }
# expect_ok NAME WORD CMD...: exit status 0 and WORD in the standard output
expect_ok() {
    name=$1; word=$2; shift 2
    out=$("$@" 2>&1); rc=$?
    if [ "$rc" -ne 0 ]; then bad "$name: exit status $rc (want 0): $(printf '%s' "$out" | tail -n 3)"; return; fi
    case "$out" in *"$word"*) ok ;; *) bad "$name: output lacks '$word': $out" ;; esac
}

[ -f "$m" ] || { echo "FAIL test_tiny_vocab: $m is missing (make models)"; echo "test_tiny_vocab: 0 passed, 1 failed"; exit 1; }
expect_ok "info" "vocabulary 3" "$llm" info -m "$m"
expect_ok "serving bench" "requests/s" "$llm" bench -m "$m" --num-prompts 3 --input-len 8 --output-len 4 -t 2
expect_ok "serving bench, rag" "prefix hit rate" "$llm" bench -m "$m" --rag --questions 2 --context-len 16 \
    --output-len 2 --enable-prefix-caching -t 2
expect_ok "profile" "attention" "$llm" profile -m "$m" --num-prompts 2 --input-len 8 --output-len 4 -t 2
expect_ok "bench" "tg4" "$llm" bench -m "$m" -p 8 -n 4 -r 1 -t 2
# text: no byte tokens and no pieces, every character is the unknown token 0
expect_ok "tokenize" "0 -> " "$llm" tokenize -m "$m" -p "hi"
expect_ok "run" '"finish_reason"' "$llm" run -m "$m" -p "hello" -n 4 --temp 0 --ignore-eos --json -t 2
expect_ok "generate" '"finish_reason":"length"' sh -c "printf '%s\n' '{\"tokens\":[1,0,2],\"max_tokens\":3,\"ignore_eos\":true}' |
    \"$llm\" generate -m \"$m\" --requests - -t 2"

echo "test_tiny_vocab: $pass passed, $fail failed"
[ "$fail" = 0 ]
