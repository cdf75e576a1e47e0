#!/bin/sh
# The command-line program, driven as a user would: output formats, flags, and bad input that
# must end in a clear message and a non-zero exit, never a crash.
# Usage: tests/test_cli.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
m=$models/tiny-q4_0.gguf
pass=0; fail=0
tmp=${TMPDIR:-/tmp}/llm-cli-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
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
case "$out" in '{"prompt_tokens":[1,300,301,302],"tokens":['*'],"text":"'*'","finish_reason":"length","length_limit":"max_tokens","prompt_tps":'*',"decode_tps":'*'}') ok ;;
    *) bad "run --json: unexpected output: $out" ;; esac
n=$(echo "$out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/' | tr ',' '\n' | grep -c .)
[ "$n" = 8 ] && ok || bad "run --json -n 8 gave $n tokens"

# --logprobs 3: one list of 3 per generated token, best first, the sampled (greedy) token first
out=$("$llm" run -m "$m" --tokens 1,300 -n 5 --temp 0 --json --logprobs 3 -t 2 2>/dev/null) || bad "run --logprobs failed"
lists=$(echo "$out" | sed 's/.*"logprobs":\[\(.*\)\]}/\1/' | grep -o '\[{[^]]*\]' | wc -l)
[ "$lists" = 5 ] && ok || bad "--logprobs: $lists lists for 5 tokens"
first=$(echo "$out" | sed 's/.*"tokens":\[\([0-9]*\).*/\1/')
top=$(echo "$out" | sed 's/.*"logprobs":\[\[{"id":\([0-9]*\).*/\1/')
[ "$first" = "$top" ] && ok || bad "--logprobs: greedy token $first is not the top entry $top"
# each entry has the token's text: the greedy entries' texts put together are the generated text
# (less the space a SentencePiece vocabulary puts in front of the first word); a piece that is
# not UTF-8 on its own has U+FFFD in "token" and its bytes in "bytes"
out=$("$llm" run -m "$m" --tokens 1,300 -n 16 --temp 0 --ignore-eos --json --logprobs 20 -t 2 2>/dev/null)
text=$(echo "$out" | sed 's/.*"text":"\([^"]*\)".*/\1/')
joined=$(echo "$out" | sed 's/.*"logprobs":\[//' | grep -o '\[{"id":[0-9]*,"token":"[^"]*"' | sed 's/.*"token":"\(.*\)"/\1/' | tr -d '\n')
[ -n "$text" ] && [ "${joined# }" = "$text" ] && ok || bad "--logprobs: tokens' texts '$joined' vs the text '$text'"
n_all=$(echo "$out" | grep -o '{"id":[0-9]*,"token":"[^"]*",\("bytes":\[[0-9,]*\],\)\{0,1\}"logprob":-\{0,1\}[0-9.]*}' | wc -l)
[ "$n_all" = 320 ] && ok || bad "--logprobs 20 over 16 tokens: $n_all well-formed entries"
fffd=$(printf '\357\277\275')
n_bytes=$(echo "$out" | grep -o "\"token\":\"$fffd\",\"bytes\":\\[[0-9]*\\]" | wc -l)
[ "$n_bytes" -gt 0 ] && ok || bad "--logprobs: no byte token among 320 entries: $out"
expect_fail "logprobs beyond 20" "--logprobs" "$llm" run -m "$m" -p hi --json --logprobs 21

# the seed: random by default (two runs differ: 32 draws from a random model's flat distribution
# coincide only by chance), printed by --json and -v; giving it back repeats the run
a=$("$llm" run -m "$m" -p "hello" -n 32 --ignore-eos --temp 0.8 --json 2>/dev/null)
b=$("$llm" run -m "$m" -p "hello" -n 32 --ignore-eos --temp 0.8 --json 2>/dev/null)
[ -n "$a" ] && [ "$(echo "$a" | sed 's/,"prompt_tps.*//')" != "$(echo "$b" | sed 's/,"prompt_tps.*//')" ] && ok ||
    bad "two runs without --seed gave the same tokens: $a"
seed=$(echo "$a" | sed -n 's/.*"seed":\([0-9]*\).*/\1/p')
[ -n "$seed" ] && ok || bad "--json shows no seed: $a"
c=$("$llm" run -m "$m" -p "hello" -n 32 --ignore-eos --temp 0.8 --json --seed "$seed" 2>/dev/null)
[ "$(echo "$a" | sed 's/,"prompt_tps.*//')" = "$(echo "$c" | sed 's/,"prompt_tps.*//')" ] && ok ||
    bad "--seed $seed (the seed --json showed) does not repeat the run: '$a' vs '$c'"
"$llm" run -m "$m" -p "hello" -n 2 --seed 12345 -v 2>&1 >/dev/null | grep -q 'seed 12345' && ok || bad "-v does not show the seed"

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
printf 'hello world' > "$tmp/prompt"
out=$("$llm" run -m "$m" -f "$tmp/prompt" -n 4 --temp 0 2>"$tmp/err") || bad "run -f failed"
grep -q "tokens/s" "$tmp/err" && ok || bad "no speed line on stderr"
# stdout and stderr into one file: the text's last line ends before the statistics line starts
"$llm" run -m "$m" -p hello -n 8 --temp 0 --ignore-eos > "$tmp/both" 2>&1
tail -n 1 "$tmp/both" | grep -q '^prompt: [0-9]* tokens' && ok ||
    bad "2>&1: the statistics line does not start a line: $(cat "$tmp/both")"

# a flag where the command goes runs 'run' (llama-cli's habit)
a=$("$llm" -m "$m" -p hello -n 6 --temp 0 2>/dev/null)
b=$("$llm" run -m "$m" -p hello -n 6 --temp 0 2>/dev/null)
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "llm -m M -p hello: '$a', llm run: '$b'"
"$llm" --help | grep -q 'llm -m FILE' && ok || bad "--help does not say that a flag first means run"

# finish reasons are the engine's: a stop token ends it (included), -n and the context by length
all=$("$llm" run -m "$m" --tokens 1,300 -n 6 --temp 0 --ignore-eos --json 2>/dev/null | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
third=$(echo "$all" | cut -d, -f3)
out=$("$llm" run -m "$m" --tokens 1,300 -n 6 --temp 0 --ignore-eos --json --stop-token-ids "$third" 2>/dev/null)
case "$out" in *"\"tokens\":[$(echo "$all" | cut -d, -f1-3)],"*'"finish_reason":"stop"'*) ok ;;
    *) bad "--stop-token-ids $third (of $all): $out" ;; esac

# Ctrl-C (SIGINT) stops the run: the text so far, its newline and the statistics (valid JSON
# with --json, finish_reason "abort"), exit status 130. The signal is repeated until the run
# ends (one that lands before SIGINT is blocked would be lost: a script's background job starts
# with SIGINT ignored).
for mode in text json; do
    flag=; [ $mode = json ] && flag=--json
    "$llm" run -m "$m" -p hi -n 90000 -c 100000 --ignore-eos --temp 0 -t 1 $flag > "$tmp/int.out" 2> "$tmp/int.err" &
    pid=$!
    i=0
    while [ $mode = text ] && [ ! -s "$tmp/int.out" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    [ $mode = json ] && sleep 1
    n=0
    while kill -INT "$pid" 2>/dev/null && [ $n -lt 40 ]; do sleep 0.5; n=$((n + 1)); done
    wait "$pid"; rc=$?
    [ "$rc" = 130 ] && ok || bad "run ($mode) after SIGINT: exit status $rc ($(cat "$tmp/int.err"))"
    [ "$(tail -c 1 "$tmp/int.out" | od -An -c | tr -d ' ')" = '\n' ] && ok || bad "run ($mode) after SIGINT: no final newline"
    grep -q '^prompt: .* | decode: [0-9]* tokens' "$tmp/int.err" && ok || bad "run ($mode) after SIGINT: no statistics line"
    if [ $mode = json ]; then
        case "$(cat "$tmp/int.out")" in '{"prompt_tokens":['*'"finish_reason":"abort","prompt_tps":'*'}') ok ;;
            *) bad "run --json after SIGINT: $(head -c 300 "$tmp/int.out")" ;; esac
    fi
done

# -c beyond the trained context: a warning with both numbers
"$llm" run -m "$m" -p hi -n 1 -c 1000 2>&1 >/dev/null | grep -q 'warning.*1000.*512' && ok || bad "no warning for -c 1000 > 512"
"$llm" run -m "$m" -p hi -n 1 -c 400 2>&1 >/dev/null | grep -q 'warning' && bad "a warning for -c 400 <= 512" || ok

# flags: --flag=value for every flag with a value, llama.cpp's names, and notes for its flags that
# change nothing here
a=$("$llm" run -m "$m" -p hello -n 6 --temp 1 --seed 7 --json 2>/dev/null | sed 's/,"prompt_tps.*//')
b=$("$llm" run -m "$m" -p hello --n-predict=6 --temp=1 --seed=7 --json 2>/dev/null | sed 's/,"prompt_tps.*//')
c=$("$llm" run -m "$m" -p hello -n 6 --temp 1 -s 7 --json 2>/dev/null | sed 's/,"prompt_tps.*//')
[ -n "$a" ] && [ "$a" = "$b" ] && [ "$a" = "$c" ] && ok || bad "--seed 7 / --seed=7 / -s 7 differ: '$a' '$b' '$c'"
out=$("$llm" run --model="$m" --prompt=hello --max-model-len=64 --top-k=5 --top-p=0.9 --min-p=0.1 --repeat-penalty=1.1 \
    --repeat-last-n=8 --frequency-penalty=0.1 --presence-penalty=0.1 --stop=zzz --stop-token-ids=5 --threads=1 \
    --block-size=16 --kv-cache-dtype=f32 --kv-cache-memory=1000000 --backend=cpu --logprobs=2 -n 2 --json 2>&1) && ok ||
    bad "--flag=value: $out"
expect_fail "--ctx-size=8" "context" "$llm" run -m "$m" --ctx-size=8 --tokens 1,2,3,4,5,6,7,8,9,10
# the q8_0 KV cache: about half of f16's memory for as many tokens; a head size 32 does not divide
# (micro's 16) and other values refused by name (test_backend checks its attention, test_numerics
# its distance from exact arithmetic)
kv8=$("$llm" run -m "$m" -p hello -n 4 --kv-cache-memory 1000000 --kv-cache-dtype q8_0 --json 2>/dev/null)
case "$kv8" in *'"text"'*) ok ;; *) bad "--kv-cache-dtype q8_0: '$kv8'" ;; esac
t16=$("$llm" info -m "$m" --kv-cache-memory 1000000 2>/dev/null | sed -n 's/.*KV cache.* \([0-9][0-9]*\) tokens.*/\1/p' | head -n 1)
t8=$("$llm" info -m "$m" --kv-cache-memory 1000000 --kv-cache-dtype q8_0 2>/dev/null | sed -n 's/.*KV cache.* \([0-9][0-9]*\) tokens.*/\1/p' | head -n 1)
awk -v a="$t16" -v b="$t8" 'BEGIN { exit !(a > 0 && b >= 1.8 * a) }' && ok || bad "KV tokens in 1 MB: f16 $t16, q8_0 $t8 (want >= 1.8x)"
expect_fail "q8_0 cache, head size 16" "multiple of 32" "$llm" run -m "$models/micro-q8_0.gguf" -p hi -n 1 --kv-cache-dtype q8_0
expect_fail "--kv-cache-dtype q4" "q8_0" "$llm" run -m "$m" -p hi -n 1 --kv-cache-dtype q4
expect_fail "--json=1" "takes no value" "$llm" run -m "$m" -p hi --json=1
"$llm" run -m "$m" -p hi -n 1 -ngl 99 2>&1 >/dev/null | grep -q 'note: -ngl.*--backend cuda or vulkan' && ok || bad "-ngl 99: no note"
"$llm" run -m "$m" -p hi -n 1 --n-gpu-layers=99 2>&1 >/dev/null | grep -q 'note: -ngl' && ok || bad "--n-gpu-layers=99: no note"
"$llm" run -m "$m" -p hi -n 1 -fa 2>&1 >/dev/null | grep -q 'note: -fa.*flash' && ok || bad "-fa: no note"
"$llm" run -m "$m" -p hi -n 1 --flash-attn on 2>&1 >/dev/null | grep -q 'note: -fa' && ok || bad "--flash-attn on: no note"
expect_fail "llama.cpp's -b" "--max-num-batched-tokens" "$llm" run -m "$m" -p hi -b 512
expect_fail "llama.cpp's -b" "unknown option" "$llm" run -m "$m" -p hi -b 512
expect_fail "vLLM's --tensor-parallel-size" "one device" "$llm" run -m "$m" -p hi --tensor-parallel-size 2
expect_fail "llama.cpp's -cnv" "llm chat" "$llm" run -m "$m" -p hi -cnv

# info and help
"$llm" info -m "$m" | grep -q "architecture:  llama" && ok || bad "info: no architecture line"
"$llm" --help | grep -q -- "--logprobs" && ok || bad "--help does not list --logprobs"
"$llm" run --help | grep -q -- "--top-p" && ok || bad "run --help does not list --top-p"
# each command's own help: its usage line, its options, not the others'; bare llm: a short overview
all=$("$llm" --help | wc -l)
for cmd in run chat tokenize detokenize info generate serve bench profile perplexity pull list rm; do
    out=$("$llm" $cmd --help); rc=$?
    case $cmd in
        pull) args='REPO[:QUANT] | REPO FILE | hf://REPO[:QUANT] | hf://REPO/FILE' ;;
        list) args='[--json]' ;;
        rm) args='NAME...' ;;
        *) args='[options]' ;;
    esac
    [ "$rc" = 0 ] && [ "$(printf '%s\n' "$out" | head -n 1)" = "usage: llm $cmd $args" ] &&
        [ "$(printf '%s\n' "$out" | wc -l)" -lt "$all" ] && ok || bad "$cmd --help: exit $rc, $(printf '%s\n' "$out" | head -n 2)"
done
# the models of the cache: -m NAME and hf://REPO:QUANT in every -m command's help; pull, list, rm's
for cmd in run chat info serve bench perplexity; do
    out=$("$llm" $cmd --help)
    printf '%s\n' "$out" | grep -q -- '-m, --model FILE|DIR|NAME' && printf '%s\n' "$out" | grep -q 'hf://REPO:QUANT' &&
        ok || bad "$cmd --help does not show -m NAME and hf://REPO:QUANT"
done
"$llm" pull --help | grep -q '^  llm pull REPO:QUANT ' && "$llm" list --help | grep -q '^  llm list \[--json\] ' &&
    "$llm" rm --help | grep -q '^  llm rm NAME\.\.\. ' && "$llm" --help | grep -q '^  list ' && "$llm" --help | grep -q '^  rm ' &&
    ok || bad "pull, list, rm: their help lacks the models block or the command list lacks them"
"$llm" chat --help | grep -q -- "--chat-template" && ! "$llm" chat --help | grep -q -- "--num-prompts" && ok ||
    bad "chat --help: not chat's options"
"$llm" serve --help | grep -q -- "--port" && ! "$llm" serve --help | grep -q -- "--kl-divergence" && ok ||
    bad "serve --help: not serve's options"
"$llm" serve --help | grep -q -- "--log-format F" && "$llm" serve --help | grep -q -- "--quiet" && ok ||
    bad "serve --help does not list --log-format and --quiet"
"$llm" help perplexity | grep -q -- "--kl-divergence" && ok || bad "llm help perplexity"
# structured output: its flags in run, chat and generate's help and not in serve's, whose help
# names the request fields; what cannot be read, compiled or converted stops before the model loads
for cmd in run chat generate; do
    out=$("$llm" $cmd --help)
    for f in "--grammar FILE" "--json-schema FILE" "--json-object"; do
        printf '%s\n' "$out" | grep -q -- "$f" && ok || bad "$cmd --help does not list $f"
    done
done
out=$("$llm" serve --help)
! printf '%s\n' "$out" | grep -q -- "--json-object" && printf '%s\n' "$out" | grep -q 'response_format' &&
    printf '%s\n' "$out" | grep -q '"json_schema"' && ok || bad "serve --help: structured output"
"$llm" generate --help | grep -q '"grammar" (GBNF text), "json_schema"' && ok || bad "generate --help: the fields"
printf 'root ::= "yes" | "no"\n' > "$tmp/yn.gbnf"
printf 'root ::= "yes" (\n' > "$tmp/bad.gbnf"
printf 'root ::= "a\000"\n' > "$tmp/nul.gbnf"
printf '{"type": "object", "properties": {"a": {"type": "string", "format": "email"}}}\n' > "$tmp/email.json"
printf '{"type": "object", "not": {}}\n' > "$tmp/not.json"
printf '{"type": ' > "$tmp/cut.json"
printf '{"type": "integer"}\n' > "$tmp/int.json"
# -m names a file that is no model: only the flags are read before the error
for cmd in run chat generate; do
    expect_fail "$cmd --grammar: a missing file" "cannot open '$tmp/none.gbnf'" "$llm" $cmd -m "$tmp/no-model" -p hi \
        --requests x --grammar "$tmp/none.gbnf"
    expect_fail "$cmd --grammar: a bad grammar" "--grammar $tmp/bad.gbnf: grammar: line 2 column 1: ')' expected" \
        "$llm" $cmd -m "$tmp/no-model" -p hi --grammar "$tmp/bad.gbnf"
    expect_fail "$cmd --json-schema: format email" 'json schema: format "email" is not supported' \
        "$llm" $cmd -m "$tmp/no-model" -p hi --json-schema "$tmp/email.json"
done
expect_fail "--grammar: a NUL byte" "holds a NUL byte" "$llm" run -m "$tmp/no-model" -p hi --grammar "$tmp/nul.gbnf"
expect_fail "--grammar: a folder" "cannot read '$tmp'" "$llm" run -m "$tmp/no-model" -p hi --grammar "$tmp"
expect_fail "--json-schema: not" 'the keyword "not" is not supported' "$llm" run -m "$m" -p hi --json-schema "$tmp/not.json"
expect_fail "--json-schema: cut JSON" "--json-schema $tmp/cut.json: json schema" "$llm" run -m "$m" -p hi \
    --json-schema "$tmp/cut.json"
expect_fail "--json-schema: missing" "cannot open" "$llm" run -m "$m" -p hi --json-schema "$tmp/none.json"
expect_fail "two of them" "give one of --grammar, --json-schema and --json-object" "$llm" run -m "$m" -p hi \
    --grammar "$tmp/yn.gbnf" --json-object
expect_fail "serve --grammar" "unknown option '--grammar'" "$llm" serve -m "$m" --grammar "$tmp/yn.gbnf"
# on the tiny model the grammar holds too (its vocabulary has the letters and digits): the text is
# yes or no, or an integer, ended by the grammar (stop)
for i in 1 2 3; do
    out=$("$llm" run -m "$m" --tokens 1,300 -n 20 --temp 1 --seed $i --grammar "$tmp/yn.gbnf" --json -t 2 2>/dev/null)
    case "$out" in *'"text":"yes","finish_reason":"stop"'* | *'"text":"no","finish_reason":"stop"'*) ok ;;
        *) bad "run --grammar on the tiny model: $out" ;; esac
done
for i in 1 2 3; do   # at most 17 characters: the grammar ends it
    out=$("$llm" run -m "$m" --tokens 1,300 -n 30 --temp 1 --seed $i --json-schema "$tmp/int.json" --json -t 2 2>/dev/null)
    t=$(printf '%s\n' "$out" | sed -n 's/.*"text":"\(-\{0,1\}[0-9]*\)","finish_reason":"stop".*/\1/p')
    case "$t" in 0 | -0 | [1-9]* | -[1-9]*) ok ;; *) bad "run --json-schema integer on the tiny model: $out" ;; esac
done
out=$("$llm" 2>&1 >/dev/null); rc=$?
[ "$rc" = 1 ] && [ "$(printf '%s\n' "$out" | wc -l)" -lt 40 ] && printf '%s\n' "$out" | grep -q 'llm COMMAND --help' &&
    printf '%s\n' "$out" | grep -q '^  serve ' && ok || bad "bare llm: exit $rc, not a short overview: $out"
for f in --min-p --repeat-penalty --frequency-penalty --presence-penalty --repeat-last-n --stop --stop-token-ids \
         --chat-template --system --special --host --port --api-key --served-model-name --max-queued-requests \
         --max-body-size --max-body-memory --header-timeout --body-min-rate --max-connections-per-ip \
         --timeout --max-connections --shutdown-timeout --log-format --quiet --no-enable-prefix-caching \
         --speculative-model --speculative-ngram --num-speculative-tokens --prompt-lookup-min --prompt-lookup-max; do
    "$llm" --help | grep -q -- "$f" && ok || bad "--help does not list $f"
done
# tokenize: ids of a file's exact bytes; the same as run's prompt tokens
printf 'hello world\n' > "$tmp/tok"
a=$("$llm" tokenize -m "$m" -f "$tmp/tok" --json --ids)
b=$("$llm" run -m "$m" -f "$tmp/tok" -n 0 --json 2>/dev/null | sed 's/.*"prompt_tokens":\(\[[^]]*\]\).*/\1/')
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "tokenize $a differs from run's prompt $b"
c=$("$llm" tokenize -m "$m" -f "$tmp/tok" --no-bos --ids)
[ "$c" = "$(echo "$a" | tr -d '[]' | tr ',' ' ' | cut -d' ' -f2-)" ] && ok || bad "tokenize --no-bos: '$c' vs '$a'"

# bad input
expect_fail "no model" "-m" "$llm" run -p hi
# speculation: greedy text with drafts is the text without; a draft of another vocabulary is refused
want=$("$llm" run -m "$m" --tokens 1,300,301,302,303 -n 24 --temp 0 -t 2 2>/dev/null)
got=$("$llm" run -m "$m" --tokens 1,300,301,302,303 -n 24 --temp 0 -t 2 --speculative-ngram 2>/dev/null)
[ -n "$want" ] && [ "$want" = "$got" ] && ok || bad "run --speculative-ngram: '$got', without: '$want'"
got=$("$llm" run -m "$m" --tokens 1,300,301,302,303 -n 24 --temp 0 -t 2 -md "$models/tiny-q4_0.gguf" 2>"$tmp/spec.err")
[ "$want" = "$got" ] && grep -q '^speculation: ' "$tmp/spec.err" && ok || bad "run -md: '$got', without: '$want': $(cat "$tmp/spec.err")"
expect_fail "a draft model of another vocabulary" "vocabular" "$llm" run -m "$m" -p hi -md "$models/micro-q8_0.gguf"
expect_fail "two ways to draft" "choose one" "$llm" run -m "$m" -p hi -md "$models/tiny-q4_0.gguf" --speculative-ngram
# llm serve: bad flags, an address that cannot be had (the model is loaded after the socket is bound)
expect_fail "serve: port out of range" "--port" "$llm" serve -m "$m" --port 70000
expect_fail "serve: a host that does not resolve" "--host" "$llm" serve -m "$m" --host no-such-host.invalid --port 0
expect_fail "serve: a bad model" "missing.gguf" "$llm" serve -m "$tmp/missing.gguf" --port 0
expect_fail "serve: --log-format without its value" "--log-format needs a value" "$llm" serve -m "$m" --log-format
expect_fail "--quiet is serve's" "unknown option '--quiet'" "$llm" run -m "$m" -p hi --quiet
python3 -c 'import socket,time,sys
s=socket.socket(); s.bind(("127.0.0.1",0)); s.listen(1); print(s.getsockname()[1], flush=True); time.sleep(20)' > "$tmp/busyport" &
busy=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$tmp/busyport" ] && break; sleep 0.2; done
expect_fail "serve: a port in use" "Address already in use" "$llm" serve -m "$m" --port "$(cat "$tmp/busyport")"
kill $busy 2>/dev/null
expect_fail "missing model file" "nonexistent.gguf" "$llm" run -m /nonexistent.gguf -p hi
expect_fail "not a GGUF file" "GGUF" "$llm" run -m tests/test.h -p hi
expect_fail "unknown flag" "--frobnicate" "$llm" run -m "$m" -p hi --frobnicate
expect_fail "unknown command" "unknown command 'frob' (see llm --help)" "$llm" frob
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
expect_fail "chat with --tokens" "not --tokens" "$llm" chat -m "$m" --tokens 1,2
expect_fail "chat with -p and -f" "one of -p or -f" "$llm" chat -m "$m" -p hi -f /dev/null
expect_fail "chat with an empty question" "question is empty" "$llm" chat -m "$m" -p ""
expect_fail "tokenize without text" "-p" "$llm" tokenize -m "$m"
expect_fail "tokenize a missing file" "nonexistent" "$llm" tokenize -m "$m" -f /nonexistent.txt
# endless input and a model file that never ends opening: a message, not filled memory or a
# wait. timeout(1), where there is one, ends a regression (exit status 124, not 1).
limit() { if command -v timeout >/dev/null 2>&1; then timeout 60 "$@"; else "$@"; fi; }
# (a bad --log-format that a regression let through would serve until the timeout)
expect_fail "serve: a bad --log-format" "--log-format: text or json, not 'xml'" \
    limit "$llm" serve -m "$m" --port 0 --log-format xml
mkfifo "$tmp/fifo"
expect_fail "model file is a FIFO" "not a regular file" limit "$llm" run -m "$tmp/fifo" -p hi
expect_fail "info on a FIFO" "not a regular file" limit "$llm" info -m "$tmp/fifo"
expect_fail "run -f /dev/zero" "more than the context of 64 tokens" limit "$llm" run -m "$m" -c 64 -f /dev/zero
expect_fail "generate --requests /dev/zero" "line 1 is longer than 16 MiB" limit "$llm" generate -m "$m" --requests /dev/zero
expect_fail "chat < /dev/zero" "longer than 16 MiB" limit sh -c '"$0" chat -m "$1" < /dev/zero' "$llm" "$m"
# a vocabulary-only file (fetched by tests/fixtures.sh; make test sets LLM_VOCAB_DIR)
v=${LLM_VOCAB_DIR:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/vocab}/ggml-vocab-qwen2.gguf
if [ -f "$v" ]; then
    expect_fail "vocab-only file run" "vocabulary-only" "$llm" run -m "$v" -p hi
else
    bad "$v is missing (sh tests/fixtures.sh fetches it)"
fi
# the context fills up during generation: the run ends cleanly with what it has, by length (the
# context's limit, not -n's), and says why on stderr
out=$("$llm" run -m "$m" -c 12 --tokens 1,2,3,4 -n 50 --temp 0 --ignore-eos --json 2>"$tmp/err"); rc=$?
[ "$rc" = 0 ] && ok || bad "generation that fills the context: exit status $rc"
n=$(echo "$out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/' | tr ',' '\n' | grep -c .)
case "$out" in *'"finish_reason":"length","length_limit":"context"'*) [ "$n" = 8 ] && ok || bad "context of 12, prompt of 4: $n tokens" ;;
    *) bad "generation that fills the context: $out" ;; esac
grep -q 'end of the context (12 tokens' "$tmp/err" && ok || bad "the full context is not reported: $(cat "$tmp/err")"
# the same when the KV cache (3 blocks of 16 tokens: 48 x 512 bytes) is what fills up
out=$("$llm" run -m "$m" --kv-cache-memory 24576 --tokens "$(seq -s, 5 34)" -n 40 --temp 0 --ignore-eos --json 2>"$tmp/err")
n=$(echo "$out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/' | tr ',' '\n' | grep -c .)
case "$out" in *'"finish_reason":"length","length_limit":"context"'*) [ "$n" = 19 ] && ok || bad "a KV cache of 48, prompt of 30: $n tokens" ;;
    *) bad "generation that fills the KV cache: $out" ;; esac
grep -q 'filled the KV cache (48 tokens' "$tmp/err" && ok || bad "the full KV cache is not reported: $(cat "$tmp/err")"
# and -n reached exactly at the end of the context is -n's limit
out=$("$llm" run -m "$m" -c 12 --tokens 1,2,3,4 -n 8 --temp 0 --ignore-eos --json 2>"$tmp/err")
case "$out" in *'"finish_reason":"length","length_limit":"max_tokens"'*) ok ;; *) bad "-n 8 filling a context of 12: $out" ;; esac

# --- llm info, llm tokenize, llm detokenize ---
# jpy EXPR: EXPR of the JSON value d on standard input, which must be strict UTF-8 JSON (python3,
# as in CI); strings print as they are, other values as JSON
jpy() {
    python3 -c 'import json, sys
d = json.loads(sys.stdin.buffer.read().decode("utf-8"))
r = eval(sys.argv[1])
print(r if isinstance(r, str) else json.dumps(r, separators=(",", ":")))' "$1" 2>/dev/null
}
# a mixture of experts: its experts and active parameters (2 of 8 experts a token)
moe=$models/tiny-qwen3moe-q8_0.gguf
"$llm" info -m "$moe" | grep -q "^experts:       8 a layer, 2 a token, FFN 256 each" && ok || bad "info: no experts line"
r=$("$llm" info -m "$moe" --json | jpy '[d["shape"]["n_expert"], d["shape"]["n_expert_used"], d["parameters"] - d["active_parameters"]]')
[ "$r" = "[8,2,$((2 * 3 * 256 * 256 * 6))]" ] && ok || bad "info --json of a mixture of experts: $r"
# --quantize at load quantizes the stacked experts (3-D) and leaves the router in F32, as the
# generator's Q8_0 file has them: the same tokens
a=$("$llm" run -m "$models/tiny-qwen3moe-f32.gguf" --quantize q8_0 -p "Once upon a time" -n 16 --temp 0 --json | jpy 'd["tokens"]')
b=$("$llm" run -m "$moe" -p "Once upon a time" -n 16 --temp 0 --json | jpy 'd["tokens"]')
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "--quantize q8_0 of a mixture of experts: $a, the Q8_0 file: $b"
r=$("$llm" info -m "$m" --json | jpy '[d["parameters"] == d["active_parameters"], "n_expert" in d["shape"]]')
[ "$r" = "[true,false]" ] && ok || bad "info --json of a dense model: $r"
# copies of the q4_0 model with bytes edited: an architecture this build does not know (mamba),
# a tensor of a type it cannot compute (q4_0_4x4, ggml's former repacked Q4_0: the same block size
# and bytes as q4_0), a name
# full of terminal escape sequences
python3 - "$m" "$tmp" <<'PY' && ok || bad "could not make the edited model files"
import struct, sys
src, out = open(sys.argv[1], "rb").read(), sys.argv[2]
def kv(key, val):
    return struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, len(val)) + val
a = kv(b"general.architecture", b"llama")
assert src.count(a) == 1
open(out + "/arch.gguf", "wb").write(src.replace(a, kv(b"general.architecture", b"mamba")))
d = bytearray(src)
name = b"blk.0.attn_q.weight"
i = d.find(struct.pack("<Q", len(name)) + name) + 8 + len(name)
t = i + 4 + 8 * struct.unpack_from("<I", d, i)[0]
assert struct.unpack_from("<I", d, t)[0] == 2
struct.pack_into("<I", d, t, 31)
open(out + "/type.gguf", "wb").write(d)
name = b"random tiny q4_0"
a = kv(b"general.name", name)
assert src.count(a) == 1
evil = b"\x1b]0;x\x07\x1b[2J\n\xc2\x9b\xff\x7f"
open(out + "/esc.gguf", "wb").write(src.replace(a, kv(b"general.name", evil + b"z" * (len(name) - len(evil)))))
PY
# info on files it cannot run: it succeeds and names the problem; run still fails with it
out=$("$llm" info -m "$tmp/arch.gguf" 2>&1) && ok || bad "info on an unknown architecture failed: $out"
printf '%s\n' "$out" | grep -q "^cannot run: .*architecture 'mamba' is not supported" && ok || bad "info, unknown architecture: $out"
r=$("$llm" info -m "$tmp/arch.gguf" --json | jpy '[d["architecture"], "mamba" in d["unsupported"], d["shape"], sum(t["count"] for t in d["tensors"].values())]')
[ "$r" = '["mamba",true,null,21]' ] && ok || bad "info --json, unknown architecture: $r"
expect_fail "run, unknown architecture" "architecture 'mamba' is not supported" "$llm" run -m "$tmp/arch.gguf" -p hi
out=$("$llm" info -m "$tmp/type.gguf" --tensors 2>&1) && ok || bad "info on an unsupported type failed: $out"
printf '%s\n' "$out" | grep -q "^cannot run: .*'blk.0.attn_q.weight' has type q4_0_4x4" && ok || bad "info, unsupported type: $out"
printf '%s\n' "$out" | grep -q "^  q4_0_4x4  *1 tensors .*(type not supported)" && ok || bad "info: no q4_0_4x4 line in the summary: $out"
printf '%s\n' "$out" | grep -q "^  blk.0.attn_q.weight  *q4_0_4x4  *\[256, 256\]" && ok || bad "info --tensors: no q4_0_4x4 tensor: $out"
r=$("$llm" info -m "$tmp/type.gguf" --json --tensors | jpy '[d["tensors"]["q4_0_4x4"], [t for t in d["tensor_list"] if t["type"] == "q4_0_4x4"], "q4_0_4x4" in d["unsupported"]]')
[ "$r" = '[{"count":1,"bytes":36864,"supported":false},[{"name":"blk.0.attn_q.weight","type":"q4_0_4x4","shape":[256,256],"bytes":36864,"supported":false}],true]' ] && ok ||
    bad "info --json, unsupported type: $r"
expect_fail "run, unsupported type" "q4_0_4x4" "$llm" run -m "$tmp/type.gguf" -p hi
# a model it runs: --json's fields, every tensor with --tensors
j=$("$llm" info -m "$m" --json --tensors -c 256)
r=$(printf '%s\n' "$j" | jpy '[d["unsupported"], d["architecture"], d["gguf_version"], d["shape"]["n_layer"], d["context"]["in_use"], d["metadata"]["general.architecture"], d["metadata"]["tokenizer.ggml.tokens"], d["metadata"]["llama.attention.layer_norm_rms_epsilon"], len(d["tensor_list"]), sum(t["count"] for t in d["tensors"].values()), sorted(d["tensors"])]')
[ "$r" = '[null,"llama",3,2,256,"llama",{"type":"string","length":4096},1e-05,21,21,["f32","q4_0"]]' ] && ok || bad "info --json: $r"
n=$("$llm" info -m "$m" --tensors | grep -c '^  [a-z_.0-9]*  *\(f32\|q4_0\)  *\[[0-9, ]*\]$')
[ "$n" = 21 ] && ok || bad "info --tensors: $n tensor lines for 21 tensors"
# strings from the file are escaped, on a terminal or not; --json keeps them exactly
out=$("$llm" info -m "$tmp/esc.gguf") && ok || bad "info on a name with escapes failed"
printf '%s' "$out" | LC_ALL=C grep -q "$(printf '[\033\007\233]')" && bad "info prints raw control bytes" || ok
printf '%s\n' "$out" | grep -qF 'architecture:  llama, \x1B]0;x\x07\x1B[2J\n\u009B\xFF\x7Fz' && ok || bad "info: the name escaped: $out"
r=$("$llm" info -m "$tmp/esc.gguf" --json | jpy 'd["name"] == "\x1b]0;x\x07\x1b[2J\n\x9b\ufffd\x7fz"')
[ "$r" = true ] && ok || bad "info --json: the name: $r"
vd=${LLM_VOCAB_DIR:-${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}/vocab}
if [ -f "$vd/ggml-vocab-qwen2.gguf" ] && [ -f "$vd/ggml-vocab-llama-spm.gguf" ]; then
    # a chat template (many lines) on one line, escaped; in full in --json
    out=$("$llm" info -m "$vd/ggml-vocab-qwen2.gguf") && ok || bad "info on a vocabulary-only file failed"
    printf '%s\n' "$out" | grep -q '^cannot run: .*vocabulary-only' && ok || bad "info, vocabulary-only: $out"
    t=$(printf '%s\n' "$out" | grep '^  tokenizer.chat_template ')
    case "$t" in *'<|im_start|>system\nYou are'*) ok ;; *) bad "info: chat template line '$t'" ;; esac
    printf '%s\n' "$out" | grep -q '^You are' && bad "info prints the chat template's lines raw" || ok
    len=$(printf '%s\n' "$t" | sed -n 's/.*(\([0-9]*\) bytes.*/\1/p')
    r=$("$llm" info -m "$vd/ggml-vocab-qwen2.gguf" --json | jpy 'len(d["metadata"]["tokenizer.chat_template"].encode())')
    [ -n "$len" ] && [ "$r" = "$len" ] && ok || bad "info --json: chat template of $r bytes, $len in the text"
    # tokenize: "id -> 'piece'" lines, the ids of --ids; --json with "bytes" for a piece that is
    # part of a character (the llama vocabulary's byte tokens for the llama emoji)
    printf 'Hello w\303\266rld\n\346\227\245\346\234\254 \360\237\246\231\ttab' > "$tmp/text"
    for v in "$vd/ggml-vocab-llama-spm.gguf" "$vd/ggml-vocab-qwen2.gguf"; do
        ids=$("$llm" tokenize -m "$v" -f "$tmp/text" --ids)
        "$llm" tokenize -m "$v" -f "$tmp/text" > "$tmp/lines"
        [ "$(sed "s/^ *\([0-9]*\) -> '.*'$/\1/" "$tmp/lines" | tr '\n' ' ')" = "$ids " ] && ok || bad "tokenize lines $(cat "$tmp/lines") vs ids $ids"
        r=$("$llm" tokenize -m "$v" -f "$tmp/text" --json | jpy '[" ".join(str(e["id"]) for e in d), b"".join(bytes(e["bytes"]) if "bytes" in e else e["piece"].encode() for e in d if e["piece"] != "<s>").lstrip(b" ").decode()]')
        [ "$r" = "$(python3 -c 'import json, sys; print(json.dumps([sys.argv[1], open(sys.argv[2], "rb").read().decode()], separators=(",", ":")))' "$ids" "$tmp/text")" ] &&
            ok || bad "tokenize --json: $r"
        # detokenize: ids -> text gives the text back, byte for byte, from --tokens or stdin
        "$llm" detokenize -m "$v" --tokens "$(echo "$ids" | tr ' ' ,)" > "$tmp/back" && cmp -s "$tmp/back" "$tmp/text" && ok ||
            bad "detokenize --tokens: '$(cat "$tmp/back")'"
        echo "$ids" | "$llm" detokenize -m "$v" > "$tmp/back" && cmp -s "$tmp/back" "$tmp/text" && ok || bad "detokenize (stdin): '$(cat "$tmp/back")'"
        "$llm" tokenize -m "$v" -f "$tmp/text" --json --ids | "$llm" detokenize -m "$v" > "$tmp/back" && cmp -s "$tmp/back" "$tmp/text" &&
            ok || bad "tokenize --json --ids | detokenize: '$(cat "$tmp/back")'"
    done
    "$llm" tokenize -m "$vd/ggml-vocab-llama-spm.gguf" -f "$tmp/text" | grep -q "^   243 -> '\\\\xF0'$" && ok || bad "tokenize: the byte token <0xF0> not as \\xF0"
    "$llm" tokenize -m "$vd/ggml-vocab-llama-spm.gguf" -f "$tmp/text" | grep -q "^    13 -> '\\\\n'$" && ok || bad "tokenize: the newline not escaped"
    a=$("$llm" detokenize -m "$vd/ggml-vocab-llama-spm.gguf" --tokens 1,15043 --special)
    b=$("$llm" detokenize -m "$vd/ggml-vocab-llama-spm.gguf" --tokens 1,15043)
    [ "$a" = "<s> Hello" ] && [ "$b" = "Hello" ] && ok || bad "detokenize --special: '$a', without: '$b'"
    expect_fail "detokenize: id out of range" "out of range" "$llm" detokenize -m "$vd/ggml-vocab-llama-spm.gguf" --tokens 1,32000
    err=$(echo "1 x2" | "$llm" detokenize -m "$vd/ggml-vocab-llama-spm.gguf" 2>&1 >/dev/null); rc=$?
    [ "$rc" = 1 ] && case "$err" in *"'x2' is not a token id"*) true ;; *) false ;; esac && ok || bad "detokenize of 'x2': $rc $err"
else
    bad "$vd/ggml-vocab-{qwen2,llama-spm}.gguf are missing (sh tests/fixtures.sh fetches them)"
fi

echo "test_cli: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
