#!/bin/sh
# llm generate, llm bench (serving) and llm profile driven from the command line: one JSON line
# per request in input order, a bad line or a too-long prompt fails alone, batched greedy
# outputs equal llm run's, request fields (stop strings, penalties, logprobs, top_k -1) and the
# error of every kind of bad line, valid JSON from every --json, the benchmark's JSON fields,
# prefix caching's identical answers. JSON is read with python3 (CI has it).
# Usage: tests/test_serving_cli.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
m=$models/tiny-q8_0.gguf
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_serving_cli: $*"; }
tmp=${TMPDIR:-/tmp}/llm-serving-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
# jpy EXPR: EXPR of the JSON value d on standard input (strings as they are, else as JSON); the
# input must be strict UTF-8 JSON, or it prints nothing and fails
jpy() {
    python3 -c 'import json, sys
d = json.loads(sys.stdin.buffer.read().decode("utf-8"))
r = eval(sys.argv[1])
print(r if isinstance(r, str) else json.dumps(r, separators=(",", ":")))' "$1" 2>/dev/null
}
# json_lines FILE: every line of FILE is a JSON object, in strict UTF-8
json_lines() {
    python3 -c 'import json, sys
for l in open(sys.argv[1], "rb").read().decode("utf-8").splitlines(): assert isinstance(json.loads(l), dict)' "$1" 2>/dev/null
}

long=$(seq 1 80 | tr '\n' ',' | sed 's/,$//')
cat > "$tmp/req.jsonl" <<JSON
{"tokens":[1,300,301,302],"max_tokens":6,"temperature":0,"ignore_eos":true}
{"prompt":"hello world","max_tokens":5,"temperature":0,"ignore_eos":true}
this is not json

{"tokens":[$long],"max_tokens":4}
{"tokens":[1,400,401],"max_tokens":7,"temperature":0,"priority":-1,"ignore_eos":true}
{"prompt":"a","tokens":[1]}
JSON
"$llm" generate -m "$m" --requests "$tmp/req.jsonl" -c 64 -t 2 > "$tmp/out" 2> "$tmp/err"
rc=$?
[ "$rc" = 0 ] && ok || bad "generate: exit status $rc: $(cat "$tmp/err")"
[ "$(wc -l < "$tmp/out")" = 6 ] && ok || bad "generate: $(wc -l < "$tmp/out") lines for 6 requests"
idx=$(sed 's/^{"index":\([0-9]*\),.*/\1/' "$tmp/out" | tr '\n' ' ')
[ "$idx" = "0 1 2 3 4 5 " ] && ok || bad "generate: indices '$idx'"
json_lines "$tmp/out" && ok || bad "generate: output lines are not all JSON objects"
e=$(sed -n 3p "$tmp/out" | jpy '[d["finish_reason"], d["ttft_ms"], d["error"]]')
case "$e" in '["error",0.0,"not a JSON object'*) ok ;; *) bad "bad line: $e" ;; esac
sed -n 4p "$tmp/out" | grep -q '"finish_reason":"error".*max_model_len' && ok || bad "long prompt: $(sed -n 4p "$tmp/out")"
sed -n 6p "$tmp/out" | grep -q '"finish_reason":"error".*one of' && ok || bad "prompt and tokens: $(sed -n 6p "$tmp/out")"
for i in 1 5; do
    line=$(sed -n ${i}p "$tmp/out")
    case "$line" in *'"finish_reason":"length","length_limit":"max_tokens"'*) ok ;; *) bad "request line $i: $line" ;; esac
done
# cut short by the context (-c 64: a prompt of 60 and max_tokens 10): "length", as OpenAI and
# vLLM say, and "length_limit":"context"
long60=$(seq -s, 1 60)
echo "{\"tokens\":[$long60],\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true}" |
    "$llm" generate -m "$m" --requests - -c 64 -t 2 > "$tmp/ctx" 2>&1
r=$(jpy '[d["finish_reason"], d["length_limit"], len(d["tokens"])]' < "$tmp/ctx")
[ "$r" = '["length","context",4]' ] && ok || bad "a request cut short by the context: $r: $(cat "$tmp/ctx")"
# batched greedy outputs are llm run's
got=$(sed -n 1p "$tmp/out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
want=$("$llm" run -m "$m" --tokens 1,300,301,302 -n 6 --temp 0 --ignore-eos --json -t 2 2>/dev/null | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
[ -n "$got" ] && [ "$got" = "$want" ] && ok || bad "generate tokens '$got', run '$want'"
got=$(sed -n 5p "$tmp/out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
want=$("$llm" run -m "$m" --tokens 1,400,401 -n 7 --temp 0 --ignore-eos --json -t 2 2>/dev/null | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
[ -n "$got" ] && [ "$got" = "$want" ] && ok || bad "generate tokens '$got', run '$want'"
"$llm" generate -m "$m" 2>/dev/null && bad "generate without --requests succeeded" || ok

# request fields. The lines that run: a stop string given as a string, only stop_token_ids,
# top_k -1 (off, as 0), the three penalties under vLLM's names, logprobs, n 1, null (defaults);
# read from standard input (--requests -).
s='"max_tokens":24,"temperature":1.5,"top_p":1,"min_p":0,"seed":7,"ignore_eos":true'
p='"tokens":[1,300,300,300,300,301],"max_tokens":12,"temperature":1.5,"top_k":0,"top_p":1,"min_p":0,"seed":7,"ignore_eos":true'
g='"tokens":[1,300,301],"max_tokens":12,"temperature":0,"ignore_eos":true'
echo "{$g}" > "$tmp/greedy.jsonl"
"$llm" generate -m "$m" --requests "$tmp/greedy.jsonl" -c 64 -t 2 > "$tmp/base" 2>/dev/null
stop=$(jpy 'json.dumps(d["text"][4:8])' < "$tmp/base")      # 4 characters from the middle of the text
stopid=$(jpy 'd["tokens"][5]' < "$tmp/base")                # its sixth token
want_stop=$(jpy '[d["text"][:d["text"].index(d["text"][4:8])], "stop"]' < "$tmp/base")
cat > "$tmp/fields.jsonl" <<JSON
{$g}
{$g,"stop":$stop}
{$g,"stop_token_ids":[$stopid]}
{"tokens":[1,300,301],$s,"top_k":-1}
{"tokens":[1,300,301],$s,"top_k":0}
{$p}
{$p,"presence_penalty":1}
{$p,"frequency_penalty":1}
{$p,"repetition_penalty":3}
{"tokens":[1,300],"max_tokens":5,"temperature":0,"ignore_eos":true,"logprobs":3,"n":1,"stream":false,"seed":null}
{"stop":"zzzz","stop_token_ids":[],"prompt":"hello world","max_tokens":2,"temperature":0,"ignore_eos":true}
JSON
"$llm" generate -m "$m" --requests - -c 64 -t 2 < "$tmp/fields.jsonl" > "$tmp/out" 2> "$tmp/err" && ok || bad "generate --requests -: $(cat "$tmp/err")"
json_lines "$tmp/out" && ok || bad "generate: output lines are not all JSON objects"
[ "$(wc -l < "$tmp/out")" = 11 ] && ok || bad "generate --requests -: $(wc -l < "$tmp/out") lines for 11 requests"
errs=$(grep -c '"error"' "$tmp/out")
[ "$errs" = 0 ] && ok || bad "generate: supported fields gave errors: $(grep '"error"' "$tmp/out")"
r=$(sed -n 2p "$tmp/out" | jpy '[d["text"], d["finish_reason"]]')
[ -n "$stop" ] && [ "$r" = "$want_stop" ] && ok || bad "\"stop\":$stop (a string): $r, want $want_stop"
r=$(sed -n 11p "$tmp/out" | jpy '[len(d["prompt_tokens"]) > 2, len(d["tokens"]), d["finish_reason"]]')
[ "$r" = '[true,2,"length"]' ] && ok || bad "stop fields before the prompt: $r"
r=$(sed -n 3p "$tmp/out" | jpy '[d["tokens"][-1], len(d["tokens"]), d["finish_reason"]]')
[ "$r" = "[$stopid,6,\"stop\"]" ] && ok || bad "\"stop_token_ids\":[$stopid] on $toks: $r"
a=$(sed -n 4p "$tmp/out" | jpy 'd["tokens"]'); b=$(sed -n 5p "$tmp/out" | jpy 'd["tokens"]')
[ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "top_k -1 gave $a, top_k 0 $b"
# each penalty changes the sample and gives what llm run gives with the flag of that name
base=$(sed -n 6p "$tmp/out" | jpy 'd["tokens"]')
i=7
for f in --presence-penalty=1 --frequency-penalty=1 --repeat-penalty=3; do
    got=$(sed -n ${i}p "$tmp/out" | jpy 'd["tokens"]')
    want=$("$llm" run -m "$m" --tokens 1,300,300,300,300,301 -n 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 \
           --ignore-eos --json -t 2 "${f%=*}" "${f#*=}" 2>/dev/null | jpy 'd["tokens"]')
    [ -n "$got" ] && [ "$got" != "$base" ] && [ "$got" = "$want" ] && ok || bad "line $i (${f%=*}): $got, run $want, without $base"
    i=$((i + 1))
done
# logprobs 3: per generated token 3 entries {id, token, logprob}, best first, the greedy token
# first, its text the token's piece; the ids of llm run --logprobs 3
r=$(sed -n 10p "$tmp/out" | jpy '[len(d["logprobs"]) == len(d["tokens"]) == 5, all(len(p) == 3 and all(sorted(e) == ["id", "logprob", "token"] for e in p) and p[0]["logprob"] >= p[1]["logprob"] >= p[2]["logprob"] for p in d["logprobs"]), [p[0]["id"] for p in d["logprobs"]] == d["tokens"], "".join(p[0]["token"] for p in d["logprobs"]).strip() == d["text"].strip()]')
[ "$r" = "[true,true,true,true]" ] && ok || bad "logprobs: $r: $(sed -n 10p "$tmp/out")"
got=$(sed -n 10p "$tmp/out" | jpy '[[e["id"] for e in p] for p in d["logprobs"]]')
want=$("$llm" run -m "$m" --tokens 1,300 -n 5 --temp 0 --ignore-eos --json --logprobs 3 -t 2 2>/dev/null | jpy '[[e["id"] for e in p] for p in d["logprobs"]]')
[ -n "$got" ] && [ "$got" = "$want" ] && ok || bad "logprobs ids $got, run's $want"

# bad lines: each an error line with a clear message; the good line among them runs
printf '%s\n' \
    '{"tokens":[1,2],"max_tokens":0x2}' \
    '{"tokens":[1,2],"ignore_eos":tru}' \
    '{"tokens":[1 2 3]}' \
    '{"tokens":[1,2] "max_tokens":2}' \
    '{"tokens":[1,2]} trailing' \
    '{"tokens":5}' \
    '{"tokens":[1],"max_tokens":1e12}' \
    '{"tokens":[1],"seed":-1}' \
    '{"tokens":[1],"priority":99999999999}' \
    '{"tokens":[1],"n":2}' \
    '{"tokens":[1],"best_of":3}' \
    '{"tokens":[1],"logit_bias":{"5":1}}' \
    '{"tokens":[1],"stream":true}' \
    '{"tokens":[1],"frobnicate":1}' \
    '{"prompt":"a\u0000b"}' \
    '{"tokens":[1],"stop":["x",""]}' \
    '{"tokens":[1],"logprobs":21}' \
    '{"tokens":[1],"max_tokens":3,"temperature":0}' \
    '{"tokens":[1],"max_tokens":éé}' \
    > "$tmp/bad.jsonl"
printf '{"prompt":"caf\351"}\n' >> "$tmp/bad.jsonl"                               # Latin-1, not UTF-8
printf '{"%s":1}\n' "$(printf 'é%.0s' $(seq 1 50))" >> "$tmp/bad.jsonl"           # a long unknown key
"$llm" generate -m "$m" --requests "$tmp/bad.jsonl" -c 64 -t 2 > "$tmp/out" 2> "$tmp/err" && ok || bad "generate bad lines: $(cat "$tmp/err")"
json_lines "$tmp/out" && ok || bad "generate: error lines are not all JSON objects (in UTF-8)"
i=1
for want in "invalid JSON" "invalid JSON" "invalid JSON" "invalid JSON" "invalid JSON" "tokens: expected an array" \
            "max_tokens: expected an integer" "seed: -1 is out of range" "priority: 99999999999 is out of range" \
            "n: only 1 is supported" "best_of:" "logit_bias: not supported" "stream:" "frobnicate: unknown field" \
            "prompt: contains \\u0000" "stop: an empty stop string" "logprobs: 21 is out of range" "" "invalid JSON" \
            "not valid UTF-8" "unknown field"; do
    e=$(sed -n ${i}p "$tmp/out" | jpy 'd.get("error", "") + "|" + d["finish_reason"]')
    case "$want|$e" in
        "|"*) [ "$e" = "|length" ] && ok || bad "bad lines: line $i should run: $e" ;;
        *) case "$e" in *"$want"*"|error") ok ;; *) bad "bad line $i: '$e' lacks '$want'" ;; esac ;;
    esac
    i=$((i + 1))
done
sed -n 19p "$tmp/out" | grep -q 'é' && bad "an error message copies bytes of the line: $(sed -n 19p "$tmp/out")" || ok
k=$(sed -n 21p "$tmp/out" | jpy 'd["error"].split(":")[0]')
[ "$k" = "$(printf 'é%.0s' $(seq 1 40))..." ] && ok || bad "a long key in a message: '$k'"

# integers beyond a double's 53 bits, exactly: seed 2^53 + 1 samples as llm run --seed 2^53+1
# does, not as 2^53; the seed's range is --seed's, [0, 2^63 - 1] (vLLM's); priorities to INT_MIN,
# which goes before INT_MIN + 1 even when it comes later (one request at a time: the first token
# of the one admitted first comes first)
r='"tokens":[1,300,301],"max_tokens":12,"temperature":1.5,"top_k":0,"top_p":1,"min_p":0,"ignore_eos":true'
printf '%s\n' "{$r,\"seed\":9007199254740993}" "{$r,\"seed\":9007199254740992}" "{$r,\"seed\":9223372036854775807}" \
    "{$r,\"seed\":9223372036854775808}" "{$r,\"seed\":18446744073709551615}" \
    '{"tokens":[1,300],"max_tokens":4,"priority":-2147483647}' '{"tokens":[1,301],"max_tokens":4,"priority":-2147483648}' \
    '{"tokens":[1],"priority":-2147483649}' '{"tokens":[1],"priority":2147483648}' > "$tmp/big.jsonl"
"$llm" generate -m "$m" --requests "$tmp/big.jsonl" -c 64 -t 2 --max-num-seqs 1 --scheduling-policy priority > "$tmp/out" 2> "$tmp/err" ||
    bad "generate big integers: $(cat "$tmp/err")"
a=$(sed -n 1p "$tmp/out" | jpy 'd["tokens"]'); b=$(sed -n 2p "$tmp/out" | jpy 'd["tokens"]')
want=$("$llm" run -m "$m" --tokens 1,300,301 -n 12 --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --ignore-eos --seed 9007199254740993 \
       --json -t 2 2>/dev/null | jpy 'd["tokens"]')
[ -n "$a" ] && [ "$a" = "$want" ] && [ "$a" != "$b" ] && ok || bad "seed 2^53+1: $a, run's $want, seed 2^53: $b"
r=$(sed -n 3p "$tmp/out" | jpy '[d["finish_reason"], len(d["tokens"])]')
[ "$r" = '["length",12]' ] && ok || bad "seed 2^63-1: $r"
for i in 4 5; do
    e=$(sed -n ${i}p "$tmp/out" | jpy 'd["finish_reason"] + "|" + d["error"]')
    case "$e" in "error|invalid JSON at byte "*"too big integer"*"2^63"*) ok ;; *) bad "seed beyond 2^63 - 1 (line $i): $e" ;; esac
done
t6=$(sed -n 6p "$tmp/out" | jpy 'd["finish_reason"] == "length" and d["ttft_ms"]')
t7=$(sed -n 7p "$tmp/out" | jpy 'd["finish_reason"] == "length" and d["ttft_ms"]')
python3 -c "import sys; sys.exit(not (0 < $t7 < $t6))" 2>/dev/null && ok || bad "priority INT_MIN not before INT_MIN + 1: ttft '$t7', '$t6' ms"
e=$(sed -n 8p "$tmp/out" | jpy 'd["error"]'); f=$(sed -n 9p "$tmp/out" | jpy 'd["error"]')
case "$e|$f" in "priority: -2147483649 is out of range"*"|priority: 2147483648 is out of range"*) ok ;; *) bad "priority beyond int: $e, $f" ;; esac

# max_tokens 0: an empty completion, as llm run -n 0 gives it (the prompt's tokens, no others,
# "length"); -n -1 for generate: to the end of the context
printf '%s\n' '{"prompt":"hello world","max_tokens":0}' '{"prompt":"hello world","max_tokens":1}' > "$tmp/zero.jsonl"
"$llm" generate -m "$m" --requests "$tmp/zero.jsonl" -c 64 -t 2 > "$tmp/out" 2> "$tmp/err" || bad "generate max_tokens 0: $(cat "$tmp/err")"
r0=$(sed -n 1p "$tmp/out" | jpy '[d["prompt_tokens"], d["tokens"], d["text"], d["finish_reason"]]')
r1=$(sed -n 2p "$tmp/out" | jpy '[d["prompt_tokens"], len(d["tokens"])]')
run0=$("$llm" run -m "$m" -p "hello world" -n 0 --json -t 2 2>/dev/null | jpy '[d["prompt_tokens"], d["tokens"], d["text"], d["finish_reason"]]')
case "$r0|$r1" in '[['*'],[],"","length"]|[['*'],1]') ok ;; *) bad "max_tokens 0: $r0; max_tokens 1: $r1" ;; esac
[ -n "$run0" ] && [ "$run0" = "$r0" ] && ok || bad "run -n 0: $run0, generate max_tokens 0: $r0"
echo '{"tokens":[1,300],"temperature":0,"ignore_eos":true}' | "$llm" generate -m "$m" --requests - -c 32 -n -1 -t 2 > "$tmp/out" 2>&1
r=$(jpy '[d["finish_reason"], len(d["tokens"])]' < "$tmp/out")
[ "$r" = '["length",30]' ] && ok || bad "generate -n -1: $r: $(cat "$tmp/out")"

# the serving benchmark
j=$("$llm" bench -m "$m" -t 2 --num-prompts 12 --input-len 40 --output-len 10 --json 2>/dev/null)
case "$j" in '{"requests":12,"elapsed_s":'*'"output_tps":'*'"total_tps":'*'"ttft_ms":{"p50":'*'"p90":'*'"p99":'*'},"itl_ms":{"p50":'*'"kv_utilization":'*'"prefix_hit_rate":'*) ok ;;
    *) bad "bench --json: $j" ;; esac
n_out=$(echo "$j" | sed 's/.*"output_tokens":\([0-9]*\).*/\1/')
[ "$n_out" = 120 ] && ok || bad "bench: $n_out output tokens for 12 x 10"
j=$("$llm" bench -m "$m" -t 2 --num-prompts 6 --input-len 20 --output-len 4 --request-rate 50 --json 2>/dev/null)
case "$j" in '{"requests":6,'*) ok ;; *) bad "bench --request-rate: $j" ;; esac
# RAG: the same answers with and without prefix caching; hits only with it
a=$("$llm" bench -m "$m" -t 2 --rag --context-len 200 --questions 4 --json 2>/dev/null)
b=$("$llm" bench -m "$m" -t 2 --rag --context-len 200 --questions 4 --enable-prefix-caching --json 2>/dev/null)
ha=$(echo "$a" | sed 's/.*"outputs_hash":"\([0-9a-f]*\)".*/\1/'); hb=$(echo "$b" | sed 's/.*"outputs_hash":"\([0-9a-f]*\)".*/\1/')
[ -n "$ha" ] && [ "$ha" = "$hb" ] && ok || bad "RAG answers differ with prefix caching ($ha, $hb)"
[ "$(echo "$a" | jpy 'd["prefix_hit_rate"]')" = 0.0 ] && ok || bad "hits without prefix caching: $a"
[ "$(echo "$b" | jpy 'd["prefix_hit_rate"] > 0')" = true ] && ok || bad "no hits with prefix caching: $b"
# preemption in the benchmark: a KV cache of 30 blocks of 16 (480 tokens) takes the prompts of
# two of the 4 requests (~232 tokens each) and then has no block for their next tokens, so
# requests are preempted; the outputs stay the same
c=$("$llm" bench -m "$m" -t 2 --rag --context-len 200 --questions 4 --kv-cache-memory 250000 --json 2>/dev/null)
hc=$(echo "$c" | sed 's/.*"outputs_hash":"\([0-9a-f]*\)".*/\1/')
[ -n "$hc" ] && [ "$hc" = "$ha" ] && ok || bad "answers differ with a small KV cache: $c"
np=$(echo "$c" | sed -n 's/.*"preemptions":\([0-9]*\),.*/\1/p')
[ -n "$np" ] && [ "$np" -gt 0 ] && ok || bad "no preemption with a KV cache of 480 tokens: $c"

# llm profile: a table of modules with shares
"$llm" profile -m "$m" -t 2 --num-prompts 4 --input-len 30 --output-len 5 > "$tmp/prof" 2>&1 || bad "profile failed"
for row in "embedding" "attention: paged attention" "MLP: down" "norms" "logits" "sampling" "scheduling" "**total**"; do
    grep -qF "| $row" "$tmp/prof" && ok || bad "profile: no row '$row'"
done

# --json of bench (both modes) and profile: one valid JSON object each
j=$("$llm" bench -m "$m" -t 2 -p 16 -n 4 -r 1 --json 2>/dev/null)
r=$(echo "$j" | jpy '[d["n_prompt"], d["n_gen"], d["reps"], d["threads"], d["pp_tps"] > 0, d["tg_tps"] > 0, d["backend"]]')
[ "$r" = '[16,4,1,2,true,true,"cpu"]' ] && ok || bad "bench -p -n --json: $j"
# prefill's multiply-adds a second: the tokens/s times the model's multiply-adds a token, against
# the int8 peak measured beside it (--peak alone too)
r=$(echo "$j" | jpy '[d["macs_per_token"] > 0, abs(d["pp_gmacs"] - d["pp_tps"] * d["macs_per_token"] / 1e9) < 0.1, d["peak_gmacs"] > 0]')
[ "$r" = '[true,true,true]' ] && ok || bad "bench --json: MAC/s: $r: $j"
j=$("$llm" bench -m "$m" -t 2 --peak --json 2>/dev/null)
r=$(echo "$j" | jpy '[d["threads"], d["peak_gmacs"] > 0]')
[ "$r" = '[2,true]' ] && ok || bad "bench --peak --json: $j"
"$llm" bench -m "$m" -t 1 --peak | grep -q "^int8 peak: [0-9.]* G multiply-adds/s (cpu backend, 1 thread:" && ok ||
    bad "bench --peak: $("$llm" bench -m "$m" -t 1 --peak 2>&1)"
j=$("$llm" bench -m "$m" -t 2 --num-prompts 3 --input-len 10 --output-len 3 --json 2>/dev/null)
r=$(echo "$j" | jpy '[d["requests"], d["output_tokens"], sorted(d["ttft_ms"]), d["threads"]]')
[ "$r" = '[3,9,["p50","p90","p99"],2]' ] && ok || bad "bench --json: $j"
j=$("$llm" profile -m "$m" -t 2 --num-prompts 4 --input-len 30 --output-len 5 --json 2>/dev/null)
r=$(echo "$j" | jpy '[d["requests"], d["threads"], d["steps"] > 0, len(d["modules"]), d["modules"][0]["module"], d["modules"][-1]["module"], abs(sum(x["share"] for x in d["modules"]) - 1) < 0.01, abs(sum(x["ms"] for x in d["modules"]) - d["totals"]["total"]["ms"]) < 1, d["totals"]["total"]["share"], sorted(d["totals"])]')
[ "$r" = '[4,2,true,15,"embedding","other",true,true,1.0,["attention","mlp","sampling","scheduling","total"]]' ] && ok ||
    bad "profile --json: $r: $j"

# A generated NUL byte (the byte token <0x00>, id 3 of micro-q8_0's synthetic vocabulary) stays
# in the text, with what follows it (the text was cut at the first NUL). Near-uniform sampling
# over 300 tokens: 60 requests of 32 tokens draw it several times.
for i in $(seq 1 60); do
    echo "{\"prompt\":\"a\",\"temperature\":100,\"top_k\":-1,\"top_p\":1,\"min_p\":0,\"seed\":$i,\"max_tokens\":32}"
done > "$tmp/nul.jsonl"
"$llm" generate -m "$models/micro-q8_0.gguf" -t 1 --requests "$tmp/nul.jsonl" > "$tmp/nul.out" 2>/dev/null || bad "generate (NUL) failed"
r=$(python3 -c 'import json, sys
rs = [json.loads(l) for l in open(sys.argv[1], "rb").read().decode("utf-8").splitlines()]
print(sum(r["tokens"].count(3) for r in rs), sum(r["text"].count("\0") for r in rs))' "$tmp/nul.out" 2>/dev/null)
set -- $r
[ -n "$r" ] && [ "$1" -gt 0 ] && [ "$1" = "$2" ] && ok || bad "generated NUL bytes: '$r' (<0x00> tokens, NUL in the texts)"

# engine flags
"$llm" bench -m "$m" --num-prompts 2 --scheduling-policy lifo 2>/dev/null && bad "bad policy accepted" || ok
"$llm" bench -m "$m" --num-prompts 2 --max-num-seqs 0 2>/dev/null && bad "max-num-seqs 0 accepted" || ok
"$llm" bench -m "$m" --num-prompts 2 --gpu-memory-utilization 2 2>/dev/null && bad "utilization 2 accepted" || ok
"$llm" info -m "$m" | grep -q "KV cache holds" && ok || bad "info does not say how many tokens fit"

echo "test_serving_cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
