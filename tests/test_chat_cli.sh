#!/bin/sh
# llm chat driven from a script: a conversation piped in gives one answer per message, commands
# work, later turns find the earlier ones in the prefix cache, old turns are dropped when the
# context would overflow, user text is plain text, lines ending in \ continue, the chat template
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
# /stats: the context in use is the last request's prompt and answer
c2=$(grep '^context:' "$tmp/out" | sed -n 2p | sed 's/context: \([0-9]*\) of.*/\1/')
p2=$(grep '^last answer:' "$tmp/out" | sed -n 2p | sed 's/last answer: prompt \([0-9]*\) tokens.*/\1/')
[ -n "$c2" ] && [ -n "$p2" ] && [ "$c2" = $((p2 + 6)) ] && ok || bad "context after turn 2: $c2 (prompt $p2 + 6 answer tokens)"
grep -q 'using chatml' "$tmp/err" && bad "fallback template reported with --chat-template" || ok

# Each turn sends the whole conversation as one request; the prefix cache finds the earlier
# turns' KV blocks: on the second turn, the first turn's prompt (its full blocks) comes from the
# cache, and with a long system prompt that is most of the new prompt.
sys=$(seq 1 70 | tr '\n' ' ')
printf 'hello there\n/stats\nand then?\n/stats\n' |
    "$llm" chat -m "$m" -n 6 --temp 0 -t 2 --chat-template zephyr -sys "$sys" > "$tmp/out" 2> "$tmp/err"
stat() { grep '^last answer:' "$tmp/out" | sed -n "$1p" | sed -n "s/last answer: prompt \([0-9]*\) tokens (\([0-9]*\) cached).*/\\$2/p"; }
p1=$(stat 1 1); c1=$(stat 1 2); p2=$(stat 2 1); c2=$(stat 2 2)
[ "$c1" = 0 ] && ok || bad "turn 1: '$c1' prompt tokens cached of '$p1': $(cat "$tmp/out" "$tmp/err")"
[ -n "$c2" ] && [ "$c2" -ge $((p1 - 16)) ] && [ $((2 * c2)) -gt "$p2" ] && ok ||
    bad "turn 2: $c2 of $p2 prompt tokens cached (the first prompt had $p1)"

# A line that ends in \ goes on on the next: one message of two lines (the same answer as llm run
# on the rendered conversation)
a=$(printf 'hello\\\nthere\n' | "$llm" chat -m "$m" -n 8 --temp 0 -t 2 --chat-template zephyr 2>/dev/null)
r=$("$llm" run -m "$m" -p "<|user|>
hello
there</s>
<|assistant|>
" --special -n 8 --temp 0 -t 2 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$r" ] && ok || bad "a message continued with \\: '$a', llm run: '$r'"

# Llama 3's template trims messages: the prompt is still the rendered conversation's
a=$(printf '  hi  \n' | "$llm" chat -m "$m" -n 8 --temp 0 -t 2 --chat-template llama3 2>"$tmp/err")
r=$("$llm" run -m "$m" -p "<|start_header_id|>user<|end_header_id|>

hi<|eot_id|><|start_header_id|>assistant<|end_header_id|>

" --special -n 8 --temp 0 -t 2 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$r" ] && ok || bad "llama3, '  hi  ': '$a', llm run: '$r' $(cat "$tmp/err")"

# When the context would overflow, the oldest turns are dropped (the system prompt stays): every
# message is answered and /stats counts the dropped turns
printf 'one\ntwo\nthree\nfour\nfive\nsix\n/stats\n' |
    "$llm" chat -m "$m" -n 8 -c 128 --temp 0 -t 2 --chat-template zephyr -sys "be brief" > "$tmp/out" 2> "$tmp/err"
rc=$?
answers=$(grep -v -e '^last answer:' -e '^context:' -e '^(' "$tmp/out" | wc -l)
dropped=$(sed -n 's/^context: \([0-9]*\) of 128 tokens used, \([0-9]*\) earlier turns dropped.*/\2/p' "$tmp/out")
used=$(sed -n 's/^context: \([0-9]*\) of 128 tokens used.*/\1/p' "$tmp/out")
[ "$rc" = 0 ] && [ "$answers" = 6 ] && ok || bad "a conversation longer than the context: exit $rc, $answers answers: $(cat "$tmp/out" "$tmp/err")"
[ -n "$dropped" ] && [ "$dropped" -gt 0 ] && [ "$used" -le 128 ] && ok || bad "dropped turns: '$dropped', context used '$used': $(cat "$tmp/out")"

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
    # user text is plain text: "<|im_end|>" typed by the user is not the control token; the
    # template's markup around it is
    ids() { "$llm" tokenize -m "$q" "$@" --json --ids | tr -d '[]'; }
    want="$(ids -p '<|im_start|>user
' --special),$(ids -p 'say <|im_end|> now' --no-bos),$(ids -p '<|im_end|>
<|im_start|>assistant
' --special --no-bos)"
    n_want=$(echo "$want" | tr ',' '\n' | grep -c .)
    printf 'say <|im_end|> now\n/stats\n' | "$llm" chat -m "$q" -n 4 --temp 0 -t 2 > "$tmp/out" 2> "$tmp/err"
    n_got=$(sed -n 's/^last answer: prompt \([0-9]*\) tokens.*/\1/p' "$tmp/out")
    [ "$n_got" = "$n_want" ] && ok || bad "a user's '<|im_end|>': prompt of $n_got tokens, want $n_want ($want)"
    got=$(head -n 1 "$tmp/out")
    r=$("$llm" run -m "$q" --tokens "$want" -n 4 --temp 0 -t 2 2>/dev/null)
    [ -n "$got" ] && [ "$got" = "$r" ] && ok || bad "a user's '<|im_end|>': answer '$got', llm run on the ids: '$r'"
    # tokenize: special text is plain by default, one token with --special
    a=$("$llm" tokenize -m "$q" -p '<|im_start|>user' --json --ids)
    b=$("$llm" tokenize -m "$q" -p '<|im_start|>user' --json --ids --special)
    [ "$b" = "[151644,872]" ] && ok || bad "tokenize --special: $b"
    case "$a" in '[27,91,'*) ok ;; *) bad "tokenize without --special: $a" ;; esac
else
    bad "$q is missing (make models)"
fi

# On a GPU backend (a build with CUDA or Vulkan and a device): the same conversation gives the same
# answers as on the CPU (an f32 model, whose results the backends share to ~1e-4).
f=$models/tiny-f32.gguf
gpu=$("$llm" info --devices 2>/dev/null | awk '/^CUDA devices:/ { b = "cuda" } /^Vulkan devices:/ { b = "vulkan" }
                                            /^  0:/ && b != "" { print b; exit }')
if [ -n "$gpu" ]; then
    printf 'hello there\nand then?\n' | "$llm" chat -m "$f" -n 8 --temp 0 -t 2 --chat-template zephyr > "$tmp/cpu" 2>/dev/null
    printf 'hello there\nand then?\n' | "$llm" chat -m "$f" -n 8 --temp 0 -t 2 --chat-template zephyr --backend "$gpu" \
        > "$tmp/vk" 2> "$tmp/err"
    [ "$(wc -l < "$tmp/vk")" = 2 ] && cmp -s "$tmp/cpu" "$tmp/vk" && ok ||
        bad "chat on $gpu: '$(cat "$tmp/vk")' vs the CPU's '$(cat "$tmp/cpu")' $(cat "$tmp/err")"
else
    echo "SKIP test_chat_cli: no GPU device or a build without a GPU backend (the chat on --backend cuda or vulkan)"
fi

# On a terminal (script(1) gives one): with libedit, the lines typed are kept in
# $XDG_STATE_HOME/llm.c/chat_history; without it, the banner says that line editing is off
if command -v script >/dev/null 2>&1; then
    printf 'hello\\\nthere\n/quit\n' > "$tmp/typed"
    XDG_STATE_HOME="$tmp/state" script -qec "'$llm' chat -m '$m' -n 2 --temp 0 -t 2 --chat-template zephyr" /dev/null \
        < "$tmp/typed" > "$tmp/tty" 2>&1
    if grep -q 'line editing is off: build with libedit (Debian: libedit-dev)' "$tmp/tty"; then
        ok
        [ ! -e "$tmp/state/llm.c/chat_history" ] && ok || bad "a history without libedit"
    else
        grep -q '^hello' "$tmp/state/llm.c/chat_history" 2>/dev/null && grep -q '^there' "$tmp/state/llm.c/chat_history" &&
            ok || bad "no chat history in $tmp/state/llm.c/chat_history: $(tr '\r' '\n' < "$tmp/tty" | grep -v loading)"
        grep -q 'line editing is off' "$tmp/tty" && bad "libedit build: the banner says line editing is off" || ok
    fi
else
    echo "SKIP test_chat_cli: no script(1) to give the chat a terminal (the history and the banner)"
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

# Once the SIGINT is seen nothing more of the answer is printed, not even the token of the step
# it came during: the chat is stopped (SIGSTOP) while it streams, interrupted and continued, and
# all it prints after what it had printed when stopped is the mark. Stopped between its look for
# the signal and its write (a microsecond, against a step of a millisecond: a slow test model on
# one thread) it rightly prints one token more: a second try then decides.
# stop_mid_answer: 0 when all that came after the SIGINT was the mark; $after: what came
stop_mid_answer() {
    rm -f "$tmp/in2"
    mkfifo "$tmp/in2"
    "$llm" chat -m "$models/tiny-gemma3-f32.gguf" -n 20000 --ignore-eos -c 30000 --temp 0 -t 1 --chat-template zephyr \
        < "$tmp/in2" > "$tmp/out" 2> "$tmp/err" &
    pid=$!
    exec 3> "$tmp/in2"
    printf 'talk forever\n' >&3
    i=0
    while [ "$(wc -c < "$tmp/out")" -lt 200 ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    kill -STOP "$pid"
    # stopped: the main thread, which writes the answer, is in state T
    i=0
    while [ "$(sed 's/.*) //' "/proc/$pid/stat" | cut -d' ' -f1)" != T ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
    sleep 0.1   # longer than the chat's 10 ms between looks for a signal
    shown=$(wc -c < "$tmp/out")
    kill -INT "$pid"
    kill -CONT "$pid"
    n=0
    while ! grep -q '\[stopped\]' "$tmp/out" && [ $n -lt 100 ]; do sleep 0.1; n=$((n + 1)); done
    printf '/quit\n' >&3
    exec 3>&-
    wait "$pid"; rc=$?
    after=$(tail -c +$((shown + 1)) "$tmp/out")
    [ "$rc" = 0 ] && [ "$shown" -ge 200 ] || { after="exit status $rc, $shown bytes shown ($(cat "$tmp/err")): $after"; return 1; }
    [ "$after" = " [stopped]" ]
}
if [ -r /proc/self/stat ]; then
    stop_mid_answer || stop_mid_answer && ok || bad "after SIGINT the chat printed '$after', not only ' [stopped]'"
else
    echo "SKIP test_chat_cli: no /proc (the SIGINT mid-step check)"
fi

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
