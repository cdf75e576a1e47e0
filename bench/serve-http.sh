#!/bin/sh
# llm serve against llama.cpp's llama-server on the same model file, over HTTP, measured by the
# same client (llm bench --base-url: OpenAI's /v1/completions, token-id prompts, greedy, end of
# text ignored, streamed): CLIENTS requests at once, each INPUT prompt + OUTPUT generated tokens.
# Models (MODELS): the TinyLlama-1.1B shape at Q8_0 (random weights, written by build/gen_model)
# and the real SmolLM2-135M-Instruct (Q4_1, the test fixture).
#
# Both servers get the same threads (-t), a context of CLIENTS x (INPUT + OUTPUT + 32) tokens and
# CLIENTS parallel sequences (llama-server: -np CLIENTS slots over that context); llm serve's
# prefix caching is off (the prompts are random: nothing to share). They run one after the
# other, ROUNDS times alternating; the table gives medians of the rounds and the ratios.
#
# REQUESTS: requests in all (default CLIENTS). SCHEMA=FILE: every request carries that JSON Schema
# (llama-server's json_schema field, which llm serve takes too) and is not told to ignore the end of
# text: its text ends with the schema's (bench/structured.sh runs it so).
#
# llama-server comes from ../shared/peer/setup.sh --native ($LLAMA_SERVER overrides).
# Usage: sh bench/serve-http.sh   (after make; ROUNDS, CLIENTS, REQUESTS, INPUT, OUTPUT, THREADS,
# MODELS, SCHEMA)
set -eu
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-32}
INPUT=${INPUT:-128}
OUTPUT=${OUTPUT:-128}
REQUESTS=${REQUESTS:-$CLIENTS}
SCHEMA=${SCHEMA:-}
FIXTURES=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
PEER=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}
LLAMA_SERVER=${LLAMA_SERVER:-$PEER/llama.cpp/build/bin/llama-server}
MODELS=${MODELS-"build/models/bench-tinyllama-1.1b-q8_0.gguf $FIXTURES/models/SmolLM2-135M-Instruct.Q4_1.gguf"}
[ -x "$LLAMA_SERVER" ] || { echo "serve-http: llama-server not found at $LLAMA_SERVER (run ../shared/peer/setup.sh --native)" >&2; exit 1; }
[ -x build/llm ] || { echo "serve-http: build/llm not found (run make)" >&2; exit 1; }
for m in $MODELS; do
    case $m in
        *bench-tinyllama-1.1b-q8_0.gguf)
            [ -f "$m" ] || build/gen_model --shape tinyllama-1.1b --type q8_0 --vocab synthetic:32000 --seed 1 -o "$m" ;;
    esac
    [ -f "$m" ] || { echo "serve-http: $m not found (make fixtures fetches the real models)" >&2; exit 1; }
done
tmp=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT
ctx=$((CLIENTS * (INPUT + OUTPUT + 32)))
port=$((20000 + $$ % 20000))

# wait_up URL: until GET URL/health answers 200 (60 s at most)
wait_up() {
    for _ in $(seq 1 600); do
        curl -sf "$1/health" >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || { echo "serve-http: the server exited: $(tail -n 5 "$tmp/server.log")" >&2; exit 1; }
        sleep 0.1
    done
    echo "serve-http: the server did not come up: $(tail -n 5 "$tmp/server.log")" >&2
    exit 1
}

# run ENGINE MODEL ROUND: starts the server, measures, stops it; appends a line to $tmp/results
run() {
    port=$((port + 1))
    if [ "$1" = llm ]; then
        build/llm serve -m "$2" --port "$port" -t "$THREADS" -c "$ctx" --max-num-seqs "$CLIENTS" \
            --no-enable-prefix-caching > "$tmp/server.log" 2>&1 &
    else
        "$LLAMA_SERVER" -m "$2" --port "$port" -t "$THREADS" -c "$ctx" -np "$CLIENTS" --no-webui > "$tmp/server.log" 2>&1 &
    fi
    pid=$!
    wait_up "http://127.0.0.1:$port"
    build/llm bench -m "$2" --base-url "http://127.0.0.1:$port" --num-prompts "$REQUESTS" --max-concurrency "$CLIENTS" \
        --input-len "$INPUT" --output-len "$OUTPUT" ${SCHEMA:+--json-schema "$SCHEMA"} --json > "$tmp/out.json" ||
        { echo "serve-http: $1 failed" >&2; exit 1; }
    kill -INT $pid 2>/dev/null
    wait $pid 2>/dev/null || true
    pid=""
    python3 - "$1" "$(basename "$2" .gguf)" "$3" "$tmp/out.json" >> "$tmp/results" <<'EOF'
import json, sys
r = json.load(open(sys.argv[4]))
print(sys.argv[1], sys.argv[2], sys.argv[3], r["output_tps"], r["ttft_ms"]["p50"], r["itl_ms"]["p50"], r["failed"])
EOF
    tail -n 1 "$tmp/results" | awk '{ printf "round %s %s %s: %.1f output tokens/s, TTFT p50 %.0f ms, ITL p50 %.1f ms\n", $3, $2, $1, $4, $5, $6 }'
}

for m in $MODELS; do
    for r in $(seq 1 "$ROUNDS"); do
        run llm "$m" "$r"
        run llama "$m" "$r"
    done
done

echo
echo "$REQUESTS requests, $CLIENTS at once, $INPUT prompt + $OUTPUT generated tokens each${SCHEMA:+ at most, under $SCHEMA}," \
    "$THREADS threads; medians of $ROUNDS rounds"
echo
echo "| model | output tok/s llm serve | llama-server | ratio | TTFT p50 llm serve | llama-server | ITL p50 llm serve | llama-server |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
python3 - "$tmp/results" <<'EOF'
import sys, statistics
rows = [l.split() for l in open(sys.argv[1])]
models = []
for r in rows:
    if r[1] not in models:
        models.append(r[1])
for m in models:
    med = {e: [statistics.median(float(r[k]) for r in rows if r[0] == e and r[1] == m) for k in (3, 4, 5)] for e in ("llm", "llama")}
    print("| %s | %.1f | %.1f | %.2fx | %.0f ms | %.0f ms | %.1f ms | %.1f ms |" % (
        m, med["llm"][0], med["llama"][0], med["llm"][0] / med["llama"][0], med["llm"][1], med["llama"][1], med["llm"][2], med["llama"][2]))
EOF
