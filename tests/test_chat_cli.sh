#!/bin/sh
# llm chat driven from a script: a conversation piped in gives one answer per message, commands
# work, later turns do not prefill the history again (the sequence keeps it), the chat template
# comes from the model file, Ctrl-C (SIGINT) stops an answer without leaving the chat, and
# llm tokenize / llm run --stop behave.
# Usage: tests/test_chat_cli.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
m=$models/tiny-q4_0.gguf
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_chat_cli: $*"; }
tmp=${TMPDIR:-/tmp}/llm-chat-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT

# three messages and commands in, three answers and the commands' output out
printf 'hello there\n/stats\nand then?\n/stats\n/bogus\n/system be brief\nagain\n/quit\nnot read\n' |
    "$llm" chat -m "$m" -n 6 --temp 0 -t 2 --chat-template zephyr > "$tmp/out" 2> "$tmp/err"
rc=$?
[ "$rc" = 0 ] && ok || bad "chat exit status $rc: $(cat "$tmp/err")"
[ "$(grep -c '^last answer:' "$tmp/out")" = 2 ] && ok || bad "/stats printed $(grep -c '^last answer:' "$tmp/out") times"
grep -q '^unknown command /bogus' "$tmp/out" && ok || bad "unknown command not reported"
grep -q 'system prompt set' "$tmp/out" && ok || bad "/system not acknowledged"
# answers: every line that is not command output
answers=$(grep -v -e '^last answer:' -e '^context:' -e '^unknown command' -e '^(' "$tmp/out" | wc -l)
[ "$answers" = 3 ] && ok || bad "$answers answer lines for 3 messages: $(cat "$tmp/out")"
# the second turn evaluates only its own text: fewer prompt tokens than the context held before it
c1=$(grep '^context:' "$tmp/out" | sed -n 1p | sed 's/context: \([0-9]*\) of.*/\1/')
p2=$(grep '^last answer:' "$tmp/out" | sed -n 2p | sed 's/last answer: prompt \([0-9]*\) tokens.*/\1/')
c2=$(grep '^context:' "$tmp/out" | sed -n 2p | sed 's/context: \([0-9]*\) of.*/\1/')
[ -n "$c1" ] && [ -n "$p2" ] && [ "$p2" -lt "$c1" ] && ok || bad "turn 2 prefilled $p2 tokens with $c1 already in context"
[ -n "$c2" ] && [ "$c2" -gt "$c1" ] && [ "$c2" -le $((c1 + p2 + 6 + 1)) ] && ok || bad "context after turn 2: $c2 (turn 1 $c1, prompt $p2)"
grep -q 'using chatml' "$tmp/err" && bad "fallback template reported with --chat-template" || ok

# greedy chat answers are the same text as llm run on the rendered conversation
a1=$(printf 'hi\n' | "$llm" chat -m "$m" -n 8 --temp 0 -t 2 --chat-template zephyr 2>/dev/null)
r1=$("$llm" run -m "$m" -p "<|user|>
hi</s>
<|assistant|>
" --special -n 8 --temp 0 -t 2 2>/dev/null)
[ -n "$a1" ] && [ "$a1" = "$r1" ] && ok || bad "chat answer '$a1' differs from run '$r1'"

# a model with a real vocabulary and a chat template in the file (Qwen2: ChatML; made by make
# models from the vocabulary tests/fixtures.sh fetches)
q=$models/tiny-qwen2-chat.gguf
if [ -f "$q" ]; then
    printf 'hi\n' | "$llm" chat -m "$q" -n 4 --temp 0 -t 2 > "$tmp/out" 2> "$tmp/err" && ok || bad "qwen2 chat failed: $(cat "$tmp/err")"
    grep -q 'using chatml' "$tmp/err" && bad "qwen2's template not recognised" || ok
    # tokenize: special text is plain by default, one token with --special
    a=$("$llm" tokenize -m "$q" -p '<|im_start|>user' --json --ids)
    b=$("$llm" tokenize -m "$q" -p '<|im_start|>user' --json --ids --special)
    [ "$b" = "[151644,872]" ] && ok || bad "tokenize --special: $b"
    case "$a" in '[27,91,'*) ok ;; *) bad "tokenize without --special: $a" ;; esac
else
    bad "$q is missing (make models)"
fi

# On the Vulkan backend (a build with it and a device): the same conversation gives the same
# answers as on the CPU (an f32 model, whose results the two backends share to ~1e-4).
f=$models/tiny-f32.gguf
if "$llm" info --devices 2>/dev/null | grep -q '^  0:'; then
    printf 'hello there\nand then?\n' | "$llm" chat -m "$f" -n 8 --temp 0 -t 2 --chat-template zephyr > "$tmp/cpu" 2>/dev/null
    printf 'hello there\nand then?\n' | "$llm" chat -m "$f" -n 8 --temp 0 -t 2 --chat-template zephyr --backend vulkan \
        > "$tmp/vk" 2> "$tmp/err"
    [ "$(wc -l < "$tmp/vk")" = 2 ] && cmp -s "$tmp/cpu" "$tmp/vk" && ok ||
        bad "chat on vulkan: '$(cat "$tmp/vk")' vs the CPU's '$(cat "$tmp/cpu")' $(cat "$tmp/err")"
else
    echo "SKIP test_chat_cli: no Vulkan device or a build without it (the chat on --backend vulkan)"
fi

# SIGINT stops an answer, the chat goes on. The signal is sent once the answer is streaming
# (before that it would reach the prompt, where Ctrl-C quits); the answer is bounded anyway (no
# timeout(1) wrapper: it would take the signal itself).
mkfifo "$tmp/in"
"$llm" chat -m "$m" -n 20000 --ignore-eos -c 30000 --temp 0 -t 2 --chat-template zephyr < "$tmp/in" > "$tmp/out" 2> "$tmp/err" &
pid=$!
exec 3> "$tmp/in"
printf 'talk forever\n' >&3
i=0
while [ ! -s "$tmp/out" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
# a signal that lands while the chat reads its input is lost when the shell started it with
# SIGINT ignored (a background job of a script), so it is repeated until the answer stops
n=0
while ! grep -q '\[stopped\]' "$tmp/out" && [ $n -lt 40 ]; do
    sleep 0.5
    kill -INT "$pid" 2>/dev/null
    n=$((n + 1))
done
printf '/stats\n/quit\n' >&3
exec 3>&-
wait "$pid"; rc=$?
[ "$rc" = 0 ] && ok || bad "chat after SIGINT: exit status $rc ($(cat "$tmp/err"))"
grep -q '\[stopped\]' "$tmp/out" && ok || bad "the interrupted answer is not marked"
grep -q '^last answer:' "$tmp/out" && ok || bad "the chat did not go on after SIGINT"

# stop strings end the text before them (and are not printed)
full=$("$llm" run -m "$m" -p "hello" -n 24 --temp 0 -t 2 2>/dev/null)
word=$(echo "$full" | tr ' ' '\n' | grep -v '^$' | sed -n 3p)
if [ -n "$word" ]; then
    cut=$("$llm" run -m "$m" -p "hello" -n 24 --temp 0 -t 2 --stop "$word" 2>/dev/null)
    want=${full%%"$word"*}
    [ "$cut" = "$want" ] && ok || bad "--stop '$word': got '$cut', want '$want'"
    j=$("$llm" run -m "$m" -p "hello" -n 24 --temp 0 -t 2 --stop "$word" --json 2>/dev/null)
    case "$j" in *'"finish_reason":"stop"'*) ok ;; *) bad "--stop: finish_reason in $j" ;; esac
else
    bad "no third word in '$full'"
fi

echo "test_chat_cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
