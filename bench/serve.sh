#!/bin/sh
# make bench, serving part: continuous batching and prefix caching on the CPU, TinyLlama-1.1B's
# shape at Q8_0 (random weights), 2 threads, against llama.cpp's native llama-batched-bench on the
# same file in the same run.
#
#   batched  64 requests of 128 prompt + 128 generated tokens, all at once (llm bench
#            --num-prompts 64 --input-len 128 --output-len 128): output tokens/s over the whole
#            run (prefill included), against llm.c's own batch-1 decode speed and llama.cpp's
#            llama-batched-bench -npp 128 -ntg 128 -npl 64 (its generation-only speed S_TG, and
#            its overall speed S, which counts prompt tokens too)
#   rag      one 2,000-token context shared by 8 questions (32 tokens each, 32 generated):
#            end-to-end time without and with --enable-prefix-caching, and whether the answers
#            are identical (a hash of all output tokens)
#
# ROUNDS runs of each (default 3), alternating; medians. llama-batched-bench takes about 4 minutes
# here, so it runs in the first LLAMA_ROUNDS rounds only (default 1).
set -eu
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
LLAMA_ROUNDS=${LLAMA_ROUNDS:-1}
PEER=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}
BATCHED=${LLAMA_BATCHED_BENCH:-$PEER/llama.cpp/build/bin/llama-batched-bench}
if [ ! -x "$BATCHED" ]; then
    echo "bench: llama-batched-bench not found at $BATCHED (run ../shared/peer/setup.sh --native)" >&2
    exit 1
fi
m=build/models/bench-tinyllama-1.1b-q8_0.gguf
mkdir -p build/models build/bench
[ -f "$m" ] || build/gen_model --shape tinyllama-1.1b --type q8_0 --vocab synthetic:32000 --seed 1 -o "$m"
out=build/bench
rm -f $out/serve-*.txt
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print 0; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
field() { sed "s/.*\"$1\":\"\{0,1\}\([0-9a-f.]*\).*/\1/"; }

for r in $(seq "$ROUNDS"); do
    j=$(./llm bench -m "$m" -t "$THREADS" -p 0 -n 128 -r 3 --json)
    echo "$j" | field tg_tps >> $out/serve-b1.txt
    j=$(./llm bench -m "$m" -t "$THREADS" --num-prompts 64 --input-len 128 --output-len 128 --json)
    echo "$j" | field output_tps >> $out/serve-llm.txt
    echo "$j" | field kv_utilization >> $out/serve-kvu.txt
    awk -v o="$(tail -n 1 $out/serve-llm.txt)" -v b="$(tail -n 1 $out/serve-b1.txt)" 'BEGIN { print o / b }' >> $out/serve-ratio.txt
    if [ "$r" -le "$LLAMA_ROUNDS" ]; then
        l=$("$BATCHED" -m "$m" -c 16384 -b 2048 -ub 512 -npp 128 -ntg 128 -npl 64 -t "$THREADS" --output-format jsonl 2>/dev/null | grep speed_tg | tail -n 1)
        echo "$l" | sed 's/.*"speed_tg": \([0-9.]*\).*/\1/' >> $out/serve-llama-tg.txt
        echo "$l" | sed 's/.*"speed": \([0-9.]*\).*/\1/' >> $out/serve-llama-all.txt
    fi
    for pc in off on; do
        flag=""; [ $pc = on ] && flag=--enable-prefix-caching
        j=$(./llm bench -m "$m" -t "$THREADS" --rag --context-len 2000 --questions 8 $flag --json)
        echo "$j" | field elapsed_s >> $out/serve-rag-$pc.txt
        echo "$j" | field outputs_hash >> $out/serve-rag-hash-$pc.txt
        echo "$j" | field prefix_hit_rate >> $out/serve-rag-hit-$pc.txt
    done
    echo "round $r: batch-1 $(tail -n 1 $out/serve-b1.txt) t/s; 64 requests $(tail -n 1 $out/serve-llm.txt) t/s;" \
         "llama-batched-bench S_TG $(tail -n 1 $out/serve-llama-tg.txt) t/s; rag $(tail -n 1 $out/serve-rag-off.txt) s" \
         "-> $(tail -n 1 $out/serve-rag-on.txt) s" >&2
done

b1=$(median < $out/serve-b1.txt); ours=$(median < $out/serve-llm.txt); ltg=$(median < $out/serve-llama-tg.txt)
ratio=$(median < $out/serve-ratio.txt)
lall=$(median < $out/serve-llama-all.txt); kvu=$(median < $out/serve-kvu.txt)
off=$(median < $out/serve-rag-off.txt); on=$(median < $out/serve-rag-on.txt); hit=$(median < $out/serve-rag-hit-on.txt)
same=yes
[ "$(sort -u $out/serve-rag-hash-off.txt $out/serve-rag-hash-on.txt | wc -l)" = 1 ] || same=no
echo
echo "CPU, $THREADS threads, TinyLlama-1.1B shape, Q8_0; medians of $ROUNDS rounds (llama-batched-bench: $LLAMA_ROUNDS)"
echo
echo "| 64 requests, 128 + 128 tokens | tokens/s | llm.c's ratio |"
echo "|---|---:|---:|"
awk -v o="$ours" -v b="$b1" -v t="$ltg" -v a="$lall" -v k="$kvu" -v q="$ratio" 'BEGIN {
    printf "| llm.c: output tokens/s over the whole run (KV utilisation %.1f%%) | %.1f | |\n", 100 * k, o
    printf "| llm.c: batch-1 decode (ratio: median of the rounds\x27 ratios) | %.1f | %.2fx |\n", b, q
    printf "| llama.cpp llama-batched-bench -npl 64: generation only (S_TG) | %.1f | %.2fx |\n", t, o / t
    printf "| llama.cpp llama-batched-bench -npl 64: prompt + generation (S) | %.1f | |\n", a }'
echo
echo "| RAG: 2,000-token context, 8 questions | seconds |"
echo "|---|---:|"
awk -v off="$off" -v on="$on" -v h="$hit" -v s="$same" 'BEGIN {
    printf "| prefix caching off | %.2f |\n", off
    printf "| prefix caching on (%.0f%% of prompt tokens from the cache) | %.2f |\n", 100 * h, on
    printf "| speed-up | %.2fx |\n| identical answers | %s |\n", off / on, s }'
