#!/bin/sh
# make bench: CPU prefill and decode speed of llm.c against llama.cpp's native llama-bench on the
# same files, in the same run:
#   - TinyLlama-1.1B's shape at each type of TYPES (random weights, written by build/gen_model;
#     speed does not depend on their values);
#   - the real models of REAL (default: the test fixtures SmolLM2-135M-Instruct Q4_1 and
#     Gemma-3-270M Q4_K_M, fetched by tests/fixtures.sh into $LLM_FIXTURES/models; make bench
#     fetches them). Small models stress per-step overheads (30 layers of 576-wide matrices)
#     rather than memory bandwidth.
#
#   decode  tg128: 128 tokens decoded one at a time after a BOS (batch 1)
#   prefill pp512: a 512-token prompt in one step
#
# Both engines run ROUNDS times, alternating, REPS repetitions each (medians of medians), so a
# noisy neighbour hurts both alike. The roofline share is (weight bytes a decode step reads x
# tokens/s) / memory read bandwidth, measured by bench/membw.c with the same thread count once
# per round: the best of all (interference only ever lowers a bandwidth measurement, so the
# best is the closest to what the machine can do).
#
# llama-bench comes from ../shared/peer/setup.sh --native ($LLAMA_BENCH overrides).
set -eu
THREADS=${THREADS:-2}
REPS=${REPS:-5}
ROUNDS=${ROUNDS:-3}
TYPES=${TYPES-"q8_0 q4_0 q4_k q4_1 q5_0 q3_k iq4_xs"}
FIXTURES=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
REAL=${REAL-"$FIXTURES/models/SmolLM2-135M-Instruct.Q4_1.gguf $FIXTURES/models/gemma-3-270m-q4_k_m.gguf"}
PEER=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}
LLAMA_BENCH=${LLAMA_BENCH:-$PEER/llama.cpp/build/bin/llama-bench}
if [ ! -x "$LLAMA_BENCH" ]; then
    echo "bench: llama-bench not found at $LLAMA_BENCH (run ../shared/peer/setup.sh --native)" >&2
    exit 1
fi
mkdir -p build/models build/bench
cc -O3 -march=native -pthread bench/membw.c -o build/membw
# The models: NAME=FILE pairs (NAME: the type for the TinyLlama shape, the file's name otherwise).
models=""
for t in $TYPES; do
    m=build/models/bench-tinyllama-1.1b-$t.gguf
    [ -f "$m" ] || build/gen_model --shape tinyllama-1.1b --type "$t" --vocab synthetic:32000 --seed 1 -o "$m"
    models="$models tinyllama-1.1b-$t=$m"
done
for m in $REAL; do
    [ -f "$m" ] || { echo "bench: $m not found (make fixtures fetches the real models)" >&2; exit 1; }
    models="$models $(basename "$m" .gguf)=$m"
done

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

out=build/bench
rm -f $out/*.txt
for r in $(seq "$ROUNDS"); do
    build/membw "$THREADS" 1024 10 2>/dev/null >> $out/membw.txt
    for nm in $models; do
        t=${nm%%=*} m=${nm#*=}
        "$LLAMA_BENCH" -m "$m" -t "$THREADS" -p 512 -n 128 -r "$REPS" -o csv 2>/dev/null |
            awk -F'","' 'NR > 1 { gsub(/"/, "", $NF); np = $(NF-7); ts = $(NF-1);
                                  if (np > 0) print ts > "'$out/llama-pp-$t.txt.new'"; else print ts > "'$out/llama-tg-$t.txt.new'" }'
        cat $out/llama-pp-$t.txt.new >> $out/llama-pp-$t.txt; cat $out/llama-tg-$t.txt.new >> $out/llama-tg-$t.txt
        j=$(./llm bench -m "$m" -t "$THREADS" -p 512 -n 128 -r "$REPS" --json)
        echo "$j" | sed 's/.*"pp_tps":\([0-9.]*\).*/\1/' >> $out/llm-pp-$t.txt
        echo "$j" | sed 's/.*"tg_tps":\([0-9.]*\).*/\1/' >> $out/llm-tg-$t.txt
        echo "$j" | sed 's/.*"bytes_per_token":\([0-9]*\).*/\1/' > $out/bytes-$t.txt
        echo "round $r $t: llm.c $(tail -n 1 $out/llm-tg-$t.txt) tg, $(tail -n 1 $out/llm-pp-$t.txt) pp; llama.cpp $(cat $out/llama-tg-$t.txt.new) tg, $(cat $out/llama-pp-$t.txt.new) pp" >&2
    done
done
bw=$(sort -g $out/membw.txt | tail -n 1)

echo
echo "CPU, $THREADS threads; medians of $ROUNDS rounds x $REPS repetitions; peak read bandwidth $bw GB/s"
echo
echo "| model | decode llm.c | decode llama.cpp | ratio | roofline llm.c | roofline llama.cpp | prefill llm.c | prefill llama.cpp | ratio |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for nm in $models; do
    t=${nm%%=*}
    ltg=$(median < $out/llm-tg-$t.txt); ctg=$(median < $out/llama-tg-$t.txt)
    lpp=$(median < $out/llm-pp-$t.txt); cpp=$(median < $out/llama-pp-$t.txt)
    bytes=$(cat $out/bytes-$t.txt)
    awk -v t="$t" -v ltg="$ltg" -v ctg="$ctg" -v lpp="$lpp" -v cpp="$cpp" -v b="$bytes" -v bw="$bw" 'BEGIN {
        printf "| %s | %.1f t/s | %.1f t/s | %.2fx | %.0f%% | %.0f%% | %.1f t/s | %.1f t/s | %.2fx |\n",
               t, ltg, ctg, ltg / ctg, 100 * b * ltg / (bw * 1e9), 100 * b * ctg / (bw * 1e9), lpp, cpp, lpp / cpp }'
done
