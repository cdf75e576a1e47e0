#!/bin/sh
# A real answer: llm chat with SmolLM2-135M-Instruct (Q4_1, fetched by tests/fixtures.sh into
# $LLM_REAL_MODELS), greedy, asked "What is the capital of France?", says Paris; the chat
# template comes from the model file (ChatML) with no fallback notice; asked once with -p or -f,
# it answers and ends; llm run, which gives the model the prompt as it is, says to use llm chat.
# Usage: tests/test_real_chat.sh LLM_BINARY MODELS_DIR (the real models: $LLM_REAL_MODELS)
llm=$1
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_real_chat: $*"; }
tmp=${TMPDIR:-/tmp}/llm-real-chat.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
m=${LLM_REAL_MODELS:-}/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -z "${LLM_REAL_MODELS:-}" ]; then
    bad "LLM_REAL_MODELS is not set: it names the folder of the real models tests/fixtures.sh fetches (make test sets it)"
elif [ ! -f "$m" ]; then
    bad "$m is missing (make fixtures)"
else
    echo "What is the capital of France?" | "$llm" chat -m "$m" --temp 0 -n 48 -t 2 > "$tmp/out" 2> "$tmp/err"
    rc=$?
    [ "$rc" = 0 ] && ok || bad "chat exit status $rc: $(cat "$tmp/err")"
    grep -q 'Paris' "$tmp/out" && ok || bad "the answer does not say Paris: '$(cat "$tmp/out")' $(cat "$tmp/err")"
    grep -q 'chat template' "$tmp/err" && bad "the model file's template was not used: $(cat "$tmp/err")" || ok
    # one question, answered, then the end: -p, and -f (the file's text as one message)
    q="What is the capital of France?"
    "$llm" chat -m "$m" --temp 0 -n 48 -t 2 -p "$q" < /dev/null > "$tmp/out" 2> "$tmp/err" && grep -q 'Paris' "$tmp/out" &&
        [ "$(wc -l < "$tmp/out")" -eq 1 ] && ok || bad "chat -p: '$(cat "$tmp/out")' $(cat "$tmp/err")"
    printf '%s\n' "$q" > "$tmp/q.txt"
    "$llm" chat -m "$m" --temp 0 -n 48 -t 2 -f "$tmp/q.txt" < /dev/null > "$tmp/out" 2> "$tmp/err" &&
        grep -q 'Paris' "$tmp/out" && ok || bad "chat -f: '$(cat "$tmp/out")' $(cat "$tmp/err")"
    # llm run gives a chat model the prompt as it is: it ends at once, and a line says what to use
    "$llm" run -m "$m" --temp 0 -n 48 -t 2 -p "$q" > "$tmp/out" 2> "$tmp/err"
    grep -q "ended before any text.*llm chat -m $m -p" "$tmp/err" && ok ||
        bad "run on a chat model that ends at once says nothing of llm chat: $(cat "$tmp/err")"
fi
echo "test_real_chat: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
