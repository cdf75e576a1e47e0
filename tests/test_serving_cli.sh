#!/bin/sh
# llm generate, llm bench (serving) and llm profile driven from the command line: one JSON line
# per request in input order, a bad line or a too-long prompt fails alone, batched greedy
# outputs equal llm run's, the benchmark's JSON fields, prefix caching's identical answers.
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
sed -n 3p "$tmp/out" | grep -q '"finish_reason":"error","ttft_ms":0.000,"error":"not a JSON object"' && ok || bad "bad line: $(sed -n 3p "$tmp/out")"
sed -n 4p "$tmp/out" | grep -q '"finish_reason":"error".*max_model_len' && ok || bad "long prompt: $(sed -n 4p "$tmp/out")"
sed -n 6p "$tmp/out" | grep -q '"finish_reason":"error".*one of' && ok || bad "prompt and tokens: $(sed -n 6p "$tmp/out")"
for i in 1 5; do
    line=$(sed -n ${i}p "$tmp/out")
    case "$line" in *'"finish_reason":"length"'*) ok ;; *) bad "request line $i: $line" ;; esac
done
# batched greedy outputs are llm run's
got=$(sed -n 1p "$tmp/out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
want=$("$llm" run -m "$m" --tokens 1,300,301,302 -n 6 --temp 0 --ignore-eos --json -t 2 2>/dev/null | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
[ -n "$got" ] && [ "$got" = "$want" ] && ok || bad "generate tokens '$got', run '$want'"
got=$(sed -n 5p "$tmp/out" | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
want=$("$llm" run -m "$m" --tokens 1,400,401 -n 7 --temp 0 --ignore-eos --json -t 2 2>/dev/null | sed 's/.*"tokens":\[\([^]]*\)\].*/\1/')
[ -n "$got" ] && [ "$got" = "$want" ] && ok || bad "generate tokens '$got', run '$want'"
"$llm" generate -m "$m" 2>/dev/null && bad "generate without --requests succeeded" || ok

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
case "$a" in *'"prefix_hit_rate":0.0000'*) ok ;; *) bad "hits without prefix caching: $a" ;; esac
case "$b" in *'"prefix_hit_rate":0.0000'*) bad "no hits with prefix caching: $b" ;; *) ok ;; esac
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

# engine flags
"$llm" bench -m "$m" --num-prompts 2 --scheduling-policy lifo 2>/dev/null && bad "bad policy accepted" || ok
"$llm" bench -m "$m" --num-prompts 2 --max-num-seqs 0 2>/dev/null && bad "max-num-seqs 0 accepted" || ok
"$llm" bench -m "$m" --num-prompts 2 --gpu-memory-utilization 2 2>/dev/null && bad "utilization 2 accepted" || ok
"$llm" info -m "$m" | grep -q "KV cache holds" && ok || bad "info does not say how many tokens fit"

echo "test_serving_cli: $pass passed, $fail failed"
[ "$fail" = 0 ]
