#!/bin/sh
# The command-line program, driven as a user would: output formats, flags, and bad input that
# must end in a clear message and a non-zero exit, never a crash.
# Usage: tests/test_cli.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
m=$models/tiny-q4_0.gguf
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_cli: $*"; }
# expect_fail NAME WORD CMD...: exit status 1 (not a crash) and WORD on stderr
expect_fail() {
    name=$1; word=$2; shift 2
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne 1 ]; then bad "$name: exit status $rc (want 1): $err"; return; fi
    case "$err" in *"$word"*) ok ;; *) bad "$name: message '$err' lacks '$word'" ;; esac
}

# --json output: the fields, 8 generated tokens, prompt tokens as given
out=$("$llm" run -m "$m" --tokens 1,300,301,302 -n 8 --temp 0 --json -t 2 2>/dev/null) || bad "run --json failed"
case "$out" in '{"prompt_tokens":[1,300,301,302],"tokens":['*'],"text":"'*'","finish_reason":"length","prompt_tps":'*',"decode_tps":'*'}') ok ;;
    *) bad "run --json: unexpected output: $out" ;; esac
n=$(echo "$out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/' | tr ',' '\n' | grep -c .)
[ "$n" = 8 ] && ok || bad "run --json -n 8 gave $n tokens"

# --logprobs 3: one list of 3 per generated token, best first, the sampled (greedy) token first
out=$("$llm" run -m "$m" --tokens 1,300 -n 5 --temp 0 --json --logprobs 3 -t 2 2>/dev/null) || bad "run --logprobs failed"
lists=$(echo "$out" | sed 's/.*"logprobs":\[\(.*\)\]}/\1/' | grep -o '\[[^]]*\]' | wc -l)
[ "$lists" = 5 ] && ok || bad "--logprobs: $lists lists for 5 tokens"
first=$(echo "$out" | sed 's/.*"tokens":\[\([0-9]*\).*/\1/')
top=$(echo "$out" | sed 's/.*"logprobs":\[\[{"id":\([0-9]*\).*/\1/')
[ "$first" = "$top" ] && ok || bad "--logprobs: greedy token $first is not the top entry $top"

# greedy is deterministic; the same seed gives the same sample, another seed (usually) another
a=$("$llm" run -m "$m" -p "hello world" -n 16 --temp 0 --json -t 2 2>/dev/null | sed 's/,"prompt_tps.*//')
b=$("$llm" run -m "$m" -p "hello world" -n 16 --temp 0 --json -t 1 2>/dev/null | sed 's/,"prompt_tps.*//')
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "greedy output differs between runs"
a=$("$llm" run -m "$m" -p "hello" -n 16 --temp 1 --seed 7 --json 2>/dev/null | sed 's/,"prompt_tps.*//')
b=$("$llm" run -m "$m" -p "hello" -n 16 --temp 1 --seed 7 --json 2>/dev/null | sed 's/,"prompt_tps.*//')
c=$("$llm" run -m "$m" -p "hello" -n 16 --temp 1 --seed 8 --json 2>/dev/null | sed 's/,"prompt_tps.*//')
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "the same seed gave different samples"
[ "$a" != "$c" ] && ok || bad "seeds 7 and 8 gave the same 16 samples"

# text streaming, speed on stderr, prompt from a file
printf 'hello world' > /tmp/llm-cli-prompt.$$
out=$("$llm" run -m "$m" -f /tmp/llm-cli-prompt.$$ -n 4 --temp 0 2>/tmp/llm-cli-err.$$) || bad "run -f failed"
grep -q "tokens/s" /tmp/llm-cli-err.$$ && ok || bad "no speed line on stderr"
rm -f /tmp/llm-cli-prompt.$$ /tmp/llm-cli-err.$$

# info and help
"$llm" info -m "$m" | grep -q "architecture:  llama" && ok || bad "info: no architecture line"
"$llm" --help | grep -q -- "--logprobs" && ok || bad "--help does not list --logprobs"
"$llm" run --help | grep -q -- "--top-p" && ok || bad "run --help does not list --top-p"
for f in --min-p --repeat-penalty --frequency-penalty --presence-penalty --repeat-last-n --stop --stop-token-ids \
         --chat-template --system --special; do
    "$llm" --help | grep -q -- "$f" && ok || bad "--help does not list $f"
done
# tokenize: ids of a file's exact bytes; the same as run's prompt tokens
printf 'hello world\n' > /tmp/llm-cli-tok.$$
a=$("$llm" tokenize -m "$m" -f /tmp/llm-cli-tok.$$ --json)
b=$("$llm" run -m "$m" -f /tmp/llm-cli-tok.$$ -n 0 --json 2>/dev/null | sed 's/.*"prompt_tokens":\(\[[^]]*\]\).*/\1/')
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "tokenize $a differs from run's prompt $b"
c=$("$llm" tokenize -m "$m" -f /tmp/llm-cli-tok.$$ --no-bos)
[ "$c" = "$(echo "$a" | tr -d '[]' | tr ',' ' ' | cut -d' ' -f2-)" ] && ok || bad "tokenize --no-bos: '$c' vs '$a'"
rm -f /tmp/llm-cli-tok.$$

# bad input
expect_fail "no model" "-m" "$llm" run -p hi
expect_fail "missing model file" "nonexistent.gguf" "$llm" run -m /nonexistent.gguf -p hi
expect_fail "not a GGUF file" "GGUF" "$llm" run -m tests/test.h -p hi
expect_fail "unknown flag" "--frobnicate" "$llm" run -m "$m" -p hi --frobnicate
expect_fail "unknown command" "frob" "$llm" frob
expect_fail "bad number" "-n" "$llm" run -m "$m" -p hi -n many
expect_fail "bad temperature" "--temp" "$llm" run -m "$m" -p hi --temp -1
expect_fail "token id out of range" "out of range" "$llm" run -m "$m" --tokens 1,999999
expect_fail "bad token list" "--tokens" "$llm" run -m "$m" --tokens 1,,2
expect_fail "prompt longer than the context" "context" "$llm" run -m "$m" -c 8 --tokens 1,2,3,4,5,6,7,8,9,10
expect_fail "two prompts" "exactly one" "$llm" run -m "$m" -p hi --tokens 1
expect_fail "logprobs without json" "--json" "$llm" run -m "$m" -p hi --logprobs 2
expect_fail "bad block size" "block size" "$llm" run -m "$m" -p hi --block-size 12
expect_fail "KV cache too small" "KV cache" "$llm" run -m "$m" -p hi --kv-cache-memory 1000
expect_fail "bad min-p" "--min-p" "$llm" run -m "$m" -p hi --min-p 1.5
expect_fail "bad repeat penalty" "--repeat-penalty" "$llm" run -m "$m" -p hi --repeat-penalty 0
expect_fail "empty stop string" "--stop" "$llm" run -m "$m" -p hi --stop ""
expect_fail "bad stop ids" "--stop-token-ids" "$llm" run -m "$m" -p hi --stop-token-ids 1,x
expect_fail "unknown chat template" "vicuna" "$llm" chat -m "$m" --chat-template vicuna
expect_fail "chat with a prompt flag" "chat" "$llm" chat -m "$m" -p hi
expect_fail "tokenize without text" "-p" "$llm" tokenize -m "$m"
expect_fail "tokenize a missing file" "nonexistent" "$llm" tokenize -m "$m" -f /nonexistent.txt
# a vocabulary-only file (fetched by tests/fixtures.sh; make test sets LLM_VOCAB_DIR)
v=${LLM_VOCAB_DIR:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c}/vocab}/ggml-vocab-qwen2.gguf
if [ -f "$v" ]; then
    expect_fail "vocab-only file run" "vocabulary-only" "$llm" run -m "$v" -p hi
else
    bad "$v is missing (sh tests/fixtures.sh fetches it)"
fi
# the context fills up during generation: the run ends cleanly with what it has
out=$("$llm" run -m "$m" -c 12 --tokens 1,2,3,4 -n 50 --temp 0 --json 2>/dev/null); rc=$?
[ "$rc" = 0 ] && ok || bad "generation that fills the context: exit status $rc"
case "$out" in *'"finish_reason":"context"'*) ok ;; *) bad "generation that fills the context: $out" ;; esac

echo "test_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
