#!/bin/sh
# What structured output costs, on the real SmolLM2-135M-Instruct (Q4_1, 49,152 tokens):
#   1. in the process: llm bench's serving run at 1 and 32 streams (random prompts of INPUT tokens,
#      greedy, at most OUTPUT tokens each), under SCHEMA and without it, alternating, ROUNDS times:
#      output tokens/s both ways, and under the schema the grammar's time per token (masks, checks,
#      following the text) and its share of the run;
#   2. over HTTP, the same schema in every request: llm serve against llama.cpp's llama-server
#      (bench/serve-http.sh with SCHEMA) at 1 client (4 requests one after another) and 32 at once.
# Usage: sh bench/structured.sh   (after make; ROUNDS, INPUT, OUTPUT, THREADS, SCHEMA, MODEL;
# llama-server from ../shared/peer/setup.sh --native, or $LLAMA_SERVER; HTTP=0: part 1 only)
set -eu
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
INPUT=${INPUT:-64}
OUTPUT=${OUTPUT:-256}
SCHEMA=${SCHEMA:-bench/orders.schema.json}
FIXTURES=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
MODEL=${MODEL:-$FIXTURES/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -x build/llm ] || { echo "structured: build/llm not found (run make)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "structured: $MODEL not found (make fixtures fetches it)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for r in $(seq 1 "$ROUNDS"); do
    for n in 1 32; do
        for how in schema none; do
            build/llm bench -m "$MODEL" -t "$THREADS" --num-prompts "$n" --input-len "$INPUT" --output-len "$OUTPUT" \
                $([ $how = schema ] && echo "--json-schema $SCHEMA") --json > "$tmp/out.json"
            python3 - "$n" "$how" "$tmp/out.json" >> "$tmp/results" <<'PY'
import json, sys
r = json.load(open(sys.argv[3]))
g = r.get("grammar", {})
print(sys.argv[1], sys.argv[2], r["output_tps"], r["output_tokens"], g.get("ms_per_token", 0), g.get("share", 0))
PY
            tail -n 1 "$tmp/results" | awk -v r="$r" '{ printf "round %s, %s streams, %s: %.1f output tokens/s (%d tokens)", r, $1, $2, $3, $4;
                if ($2 == "schema") printf ", grammar %.3f ms/token, %.1f%% of the run", $5, 100 * $6; print "" }'
        done
    done
done
echo
echo "llm bench in the process, $INPUT prompt + at most $OUTPUT generated tokens per request, $THREADS threads;" \
    "medians of $ROUNDS rounds; schema $SCHEMA"
echo
echo "| streams | output tok/s, no schema | with the schema | grammar ms/token | grammar share of the run |"
echo "|---:|---:|---:|---:|---:|"
python3 - "$tmp/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for n in ("1", "32"):
    med = lambda how, k: statistics.median(float(r[k]) for r in rows if r[0] == n and r[1] == how)
    print("| %s | %.1f | %.1f | %.3f | %.1f%% |" % (n, med("none", 2), med("schema", 2), med("schema", 4),
                                                  100 * med("schema", 5)))
PY
[ "${HTTP:-1}" = 0 ] && exit 0
echo
for c in 1 32; do
    echo "## over HTTP, $c client(s) at once"
    CLIENTS=$c REQUESTS=$([ $c = 1 ] && echo 4 || echo 32) INPUT=$INPUT OUTPUT=$OUTPUT THREADS=$THREADS ROUNDS=$ROUNDS \
        SCHEMA=$SCHEMA MODELS=$MODEL sh bench/serve-http.sh
    echo
done
