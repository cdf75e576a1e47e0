#!/bin/sh
# Mixtures of experts against llama.cpp, in the same run: a qwen3moe file of Qwen3-30B-A3B's layer
# shape with 32 experts, 8 a token, 24 layers (random weights, written by build/gen_model; 4.2 B
# parameters, 1.5 B a token's), at TYPES (default q4_0). ROUNDS rounds, alternating: the machine's
# read bandwidth (bench/membw.c, 2 threads), llm bench -p PP -n TG and llama-bench -p PP -n TG;
# then llm bench's serving run (random prompts of 32 tokens, 32 generated) at 8 and 64 requests.
# The table: medians of the rounds, decode's share of the read roofline (weights a token reads,
# its experts only, times tokens/s, over the bandwidth measured beside it) and the ratios.
# SHAPE=gpt-oss-20b LAYERS=12 TYPES=mxfp4: gpt-oss-20b's layer (2880 wide, 64 heads of 64, 32
# experts of 2880, 4 a token, biases, sinks, a window on even layers) in 12 of its 24 layers, experts
# MXFP4 and the rest Q8_0 as llama-quantize's MXFP4_MOE (9.9 B parameters, 5.6 GB).
# Usage: sh bench/moe.sh   (after make; ROUNDS, TYPES, PP, TG, THREADS, SHAPE, LAYERS; llama-bench
# from ../shared/peer/setup.sh --native, or $LLAMA_BENCH)
set -eu
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
TYPES=${TYPES:-q4_0}
PP=${PP:-128}
TG=${TG:-64}
SHAPE=${SHAPE:-qwen3moe-4b-a1b}
LAYERS=${LAYERS:-}
PEER=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}
LLAMA_BENCH=${LLAMA_BENCH:-$PEER/llama.cpp/build/bin/llama-bench}
[ -x "$LLAMA_BENCH" ] || { echo "moe: llama-bench not found at $LLAMA_BENCH (run ../shared/peer/setup.sh --native)" >&2; exit 1; }
[ -x build/llm ] && [ -x build/gen_model ] || { echo "moe: build/llm or build/gen_model missing (make, make build/gen_model)" >&2; exit 1; }
[ -x build/membw ] || cc -O3 -march=native -pthread bench/membw.c -o build/membw
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in $TYPES; do
    m=build/models/bench-$SHAPE${LAYERS:+-$LAYERS}-$t.gguf
    [ -f "$m" ] || build/gen_model --shape "$SHAPE" ${LAYERS:+--layers "$LAYERS"} --type "$t" --vocab synthetic:32000 \
        --seed 1 -o "$m"
    bpt=$(build/llm bench -m "$m" -t "$THREADS" -p 0 -n 1 -r 1 --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["bytes_per_token"])')
    for r in $(seq 1 "$ROUNDS"); do
        bw=$(build/membw "$THREADS" 1024 3 2>/dev/null)   # GB/s
        j=$(build/llm bench -m "$m" -t "$THREADS" -p "$PP" -n "$TG" -r 1 --json)
        l=$("$LLAMA_BENCH" -m "$m" -t "$THREADS" -p "$PP" -n "$TG" -r 1 -o json 2>/dev/null)
        python3 - "$t" "$r" "$bw" "$bpt" "$j" "$l" >> "$tmp/results" <<'PY'
import json, sys
t, r, bw, bpt, j, l = sys.argv[1:]
j, l = json.loads(j), json.loads(l)
lp = next(x["avg_ts"] for x in l if x["n_prompt"] > 0)
lt = next(x["avg_ts"] for x in l if x["n_gen"] > 0)
print(t, r, bw, bpt, j["pp_tps"], j["tg_tps"], lp, lt)
PY
        tail -n 1 "$tmp/results" | awk '{ printf "round %s %s: %.1f GB/s; llm pp %.1f tg %.2f (%.0f%% of the roofline); llama.cpp pp %.1f tg %.2f\n", $2, $1, $3, $5, $6, 100 * $6 * $4 / 1e9 / $3, $7, $8 }'
    done
    for n in 8 64; do
        build/llm bench -m "$m" -t "$THREADS" --num-prompts "$n" --input-len 32 --output-len 32 --json > "$tmp/s.json"
        python3 - "$t" "$n" "$tmp/s.json" >> "$tmp/serving" <<'PY'
import json, sys
d = json.load(open(sys.argv[3]))
print(sys.argv[1], sys.argv[2], d["output_tps"], d["total_tps"])
PY
        tail -n 1 "$tmp/serving" | awk '{ printf "serving %s, %s requests: %.1f output tokens/s, %.1f total\n", $1, $2, $3, $4 }'
    done
done
echo
echo "$SHAPE${LAYERS:+ ($LAYERS layers)}, $THREADS threads; pp$PP and tg$TG, medians of $ROUNDS rounds"
echo
echo "| type | weights a token reads | bandwidth | llm tg | roofline share | llama.cpp tg | ratio | llm pp | llama.cpp pp | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
python3 - "$tmp/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
for t in dict.fromkeys(r[0] for r in rows):
    rs = [r for r in rows if r[0] == t]
    med = lambda k: statistics.median(float(r[k]) for r in rs)
    share = statistics.median(float(r[5]) * float(r[3]) / 1e9 / float(r[2]) for r in rs)
    print("| %s | %.0f MB | %.1f GB/s | %.2f | %.0f%% | %.2f | %.2fx | %.1f | %.1f | %.2fx |" % (
        t, float(rs[0][3]) / 1e6, med(2), med(5), 100 * share, med(7), med(5) / med(7), med(4), med(6), med(4) / med(6)))
PY
echo
echo "| type | requests | output tok/s | total tok/s |"
echo "|---|---:|---:|---:|"
awk '{ printf "| %s | %s | %.1f | %.1f |\n", $1, $2, $3, $4 }' "$tmp/serving"
