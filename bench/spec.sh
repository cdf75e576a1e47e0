#!/bin/sh
# Speculative decoding against llama.cpp, same files, same prompts, same run:
#   n-gram drafts (llm --speculative-ngram, prompt lookup) against llama.cpp's llama-lookup, on
#   tasks whose answers copy their input (a passage copied, a code edit, a quote), with the real
#   SmolLM2-135M-Instruct: batch-1 decode speed with and without drafts on each side (llama-lookup
#   with --spec-draft-n-max 0 is llama.cpp's side without), greedy, 128 tokens (end of text
#   ignored); medians of ROUNDS runs; drafts kept; llm.c's greedy text with drafts compared with
#   its text without;
#   a draft model (llm --speculative-model) against llama.cpp's llama-speculative on the same
#   pairs: SmolLM2-135M-Instruct at F16 and at Q8_0 (made from the Q4_1 file by llama-quantize
#   --allow-requantize) drafted by its Q4_1 file (F16 also with K = 8), and TinyLlama-1.1B's
#   shape at Q8_0 drafted by the same random weights at Q4_0; batch 1, greedy, 128 tokens;
#   serving: llm bench with 1, 8 and 64 requests at once (random prompts, 128 + 128 tokens),
#   output throughput with n-gram drafts on and off, and with the F16 SmolLM2 drafted by its Q4_1.
# llama-lookup, llama-speculative and llama-quantize come from ../shared/peer/setup.sh --native.
# Usage: sh bench/spec.sh   (after make; ROUNDS, THREADS, K: drafts per step, default 4)
set -eu
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
K=${K:-4}
N=128
FIXTURES=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
PEER=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}
LOOKUP=${LLAMA_LOOKUP:-$PEER/llama.cpp/build/bin/llama-lookup}
SPECULATIVE=$PEER/llama.cpp/build/bin/llama-speculative
QUANTIZE=$PEER/llama.cpp/build/bin/llama-quantize
M=${MODEL:-$FIXTURES/models/SmolLM2-135M-Instruct.Q4_1.gguf}
G=$FIXTURES/models/gemma-3-270m-q4_k_m.gguf
[ -x "$LOOKUP" ] || { echo "spec: llama-lookup not found at $LOOKUP (run ../shared/peer/setup.sh --native)" >&2; exit 1; }
[ -x build/llm ] || { echo "spec: build/llm not found (run make)" >&2; exit 1; }
[ -f "$M" ] && [ -f "$G" ] || { echo "spec: $M or $G not found (make fixtures)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# the tasks: prompts whose answers copy from them
head -c 900 /usr/share/common-licenses/GPL-3 | tail -c 700 > "$tmp/passage"
printf 'Copy the following text exactly.\n\nText:\n%s\n\nCopy:\n' "$(cat "$tmp/passage")" > "$tmp/copy.txt"
cat > "$tmp/code.txt" <<'EOF'
Rename the variable total to sum in this function and print the whole function again.

def average(values):
    total = 0
    count = 0
    for value in values:
        total += value
        count += 1
    if count == 0:
        return 0.0
    return total / count

The function with total renamed to sum:

def average(values):
EOF
printf 'Read the text and answer by quoting it.\n\nText:\n%s\n\nQuestion: What does the licence guarantee? Quote the sentences.\nAnswer: "' \
    "$(cat "$tmp/passage")" > "$tmp/quote.txt"

# the same code edit for Gemma 3 270M in its chat format (SmolLM2-135M does not copy the
# function: its greedy answer to the prompt above is unrelated text; Gemma's copies it)
printf '<start_of_turn>user\nRename the variable total to sum in this Python function and print the whole function again.\n\n```python\n%s```<end_of_turn>\n<start_of_turn>model\n' \
    "$(sed -n '/^def average/,/return total/p' "$tmp/code.txt" | head -n 9)
" > "$tmp/gcode.txt"
# task_model TASK: the model file of a task
task_model() { if [ "$1" = gcode ]; then echo "$G"; else echo "$M"; fi; }

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# ours TASK SPEC ROUND: llm run's decode tokens/s (and drafts kept, text) of one run
ours() {
    flags=""
    [ "$2" = 1 ] && flags="--speculative-ngram --num-speculative-tokens $K"
    [ "$1" = gcode ] && flags="$flags --special"
    # shellcheck disable=SC2086
    build/llm run -m "$(task_model "$1")" -f "$tmp/$1.txt" -n $N --temp 0 --ignore-eos -t "$THREADS" $flags > "$tmp/$1.$2.out" 2> "$tmp/err"
    sed -n 's/.*decode: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' "$tmp/err" >> "$tmp/$1.ours.$2"
    sed -n 's/^speculation: \([0-9]*\) of \([0-9]*\) drafts kept.*/\1 \2/p' "$tmp/err" > "$tmp/$1.ours.kept"
}
# peer TASK SPEC: llama-lookup's decode tokens/s (--spec-draft-n-max 0: without drafts)
peer() {
    n=0
    [ "$2" = 1 ] && n=$K
    "$LOOKUP" -m "$(task_model "$1")" -f "$tmp/$1.txt" -n $N --temp 0 --ignore-eos -t "$THREADS" --spec-draft-n-max $n > "$tmp/peer.out" 2>&1 || true
    sed -n 's/.*decoded *[0-9]* tokens in .* speed: *\([0-9.]*\) t\/s.*/\1/p' "$tmp/peer.out" >> "$tmp/$1.peer.$2"
    if [ "$2" = 1 ]; then
        d=$(sed -n 's/.*n_drafted *= *\([0-9]*\).*/\1/p' "$tmp/peer.out"); a=$(sed -n 's/.*n_accept *= *\([0-9]*\).*/\1/p' "$tmp/peer.out")
        echo "$a $d" > "$tmp/$1.peer.kept"
    fi
}

tasks="copy code quote gcode"
for r in $(seq 1 "$ROUNDS"); do
    for t in $tasks; do
        ours "$t" 0; ours "$t" 1; peer "$t" 0; peer "$t" 1
        echo "round $r $t: llm.c $(tail -n 1 "$tmp/$t.ours.0") -> $(tail -n 1 "$tmp/$t.ours.1") t/s, llama.cpp $(tail -n 1 "$tmp/$t.peer.0") -> $(tail -n 1 "$tmp/$t.peer.1") t/s"
    done
done

echo
echo "n-gram drafts (K = $K), batch 1, greedy, $N tokens, $THREADS threads; medians of $ROUNDS runs; $(basename "$M"), gcode: $(basename "$G")"
echo
echo "| task | llm.c t/s | with drafts | speed-up | kept | same text | llama.cpp t/s | llama-lookup | speed-up | kept |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"
for t in $tasks; do
    o0=$(median < "$tmp/$t.ours.0"); o1=$(median < "$tmp/$t.ours.1"); p0=$(median < "$tmp/$t.peer.0"); p1=$(median < "$tmp/$t.peer.1")
    same=no; cmp -s "$tmp/$t.0.out" "$tmp/$t.1.out" && same=yes
    read -r ok od < "$tmp/$t.ours.kept" || true
    read -r pk pd < "$tmp/$t.peer.kept" || true
    awk -v t="$t" -v o0="$o0" -v o1="$o1" -v p0="$p0" -v p1="$p1" -v ok="${ok:-0}" -v od="${od:-0}" -v pk="${pk:-0}" -v pd="${pd:-0}" -v same="$same" \
        'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %d/%d | %s | %.1f | %.1f | %.2fx | %d/%d |\n", t, o0, o1, o1 / o0, ok, od, same, p0, p1, p1 / p0, pk, pd }'
done

# --- draft models ---
mkdir -p build/models
SQ8=build/models/spec-smollm2-q8_0.gguf
[ -f "$SQ8" ] || "$QUANTIZE" --allow-requantize "$M" "$SQ8" Q8_0 > /dev/null 2>&1 || { echo "spec: llama-quantize failed" >&2; exit 1; }
SF16=build/models/spec-smollm2-f16.gguf
[ -f "$SF16" ] || "$QUANTIZE" --allow-requantize "$M" "$SF16" F16 > /dev/null 2>&1 || { echo "spec: llama-quantize failed" >&2; exit 1; }
for t in q8_0 q4_0; do
    f=build/models/bench-tinyllama-1.1b-$t.gguf
    [ -f "$f" ] || build/gen_model --shape tinyllama-1.1b --type $t --vocab synthetic:32000 --seed 1 -o "$f"
done
story="Write a short story about a robot who learns to paint."
# pair NAME TARGET DRAFT KD: decode t/s of both programs with and without the draft (KD drafts
# per step at most), medians
pair() {
    for r in $(seq 1 "$ROUNDS"); do
        build/llm run -m "$2" -p "$story" -n $N --temp 0 --ignore-eos -t "$THREADS" > "$tmp/p0" 2> "$tmp/err"
        sed -n 's/.*decode: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' "$tmp/err" >> "$tmp/$1.o0"
        build/llm run -m "$2" -p "$story" -n $N --temp 0 --ignore-eos -t "$THREADS" -md "$3" --num-speculative-tokens "$4" > "$tmp/p1" 2> "$tmp/err"
        sed -n 's/.*decode: [0-9]* tokens, \([0-9.]*\) tokens\/s.*/\1/p' "$tmp/err" >> "$tmp/$1.o1"
        sed -n 's/^speculation: \([0-9]*\) of \([0-9]*\) drafts kept.*/\1\/\2/p' "$tmp/err" > "$tmp/$1.okept"
        cmp -s "$tmp/p0" "$tmp/p1" && echo yes > "$tmp/$1.same" || echo no > "$tmp/$1.same"
        "$LOOKUP" -m "$2" -p "$story" -n $N --temp 0 --ignore-eos -t "$THREADS" --spec-draft-n-max 0 > "$tmp/peer.out" 2>&1 || true
        sed -n 's/.*decoded *[0-9]* tokens in .* speed: *\([0-9.]*\) t\/s.*/\1/p' "$tmp/peer.out" >> "$tmp/$1.p0"
        "$SPECULATIVE" -m "$2" -md "$3" -p "$story" -n $N --temp 0 --ignore-eos -t "$THREADS" --spec-draft-n-max "$4" > "$tmp/peer.out" 2>&1 || true
        sed -n 's/.*decoded *[0-9]* tokens in .* speed: *\([0-9.]*\) t\/s.*/\1/p' "$tmp/peer.out" >> "$tmp/$1.p1"
        d=$(sed -n 's/.*n_drafted *= *\([0-9]*\).*/\1/p' "$tmp/peer.out"); a=$(sed -n 's/.*n_accept *= *\([0-9]*\).*/\1/p' "$tmp/peer.out")
        echo "$a/$d" > "$tmp/$1.pkept"
        echo "round $r $1: llm.c $(tail -n 1 "$tmp/$1.o0") -> $(tail -n 1 "$tmp/$1.o1") t/s, llama.cpp $(tail -n 1 "$tmp/$1.p0") -> $(tail -n 1 "$tmp/$1.p1") t/s"
    done
}
pairs="smollm2-f16-by-q4_1-k$K smollm2-f16-by-q4_1-k8 smollm2-q8_0-by-q4_1-k$K tinyllama-q8_0-by-q4_0-k$K"
[ "$K" = 8 ] && pairs="smollm2-f16-by-q4_1-k8 smollm2-q8_0-by-q4_1-k$K tinyllama-q8_0-by-q4_0-k$K"
pair smollm2-f16-by-q4_1-k$K "$SF16" "$M" "$K"
[ "$K" = 8 ] || pair smollm2-f16-by-q4_1-k8 "$SF16" "$M" 8
pair smollm2-q8_0-by-q4_1-k$K "$SQ8" "$M" "$K"
pair tinyllama-q8_0-by-q4_0-k$K build/models/bench-tinyllama-1.1b-q8_0.gguf build/models/bench-tinyllama-1.1b-q4_0.gguf "$K"
echo
echo "draft models (K: drafts per step at most), batch 1, greedy, $N tokens after a 12-token prompt, $THREADS threads; medians of $ROUNDS runs"
echo
echo "| target, draft, K | llm.c t/s | with the draft | speed-up | kept | same text | llama.cpp t/s | llama-speculative | speed-up | kept |"
echo "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"
for p in $pairs; do
    o0=$(median < "$tmp/$p.o0"); o1=$(median < "$tmp/$p.o1"); p0=$(median < "$tmp/$p.p0"); p1=$(median < "$tmp/$p.p1")
    awk -v t="$p" -v o0="$o0" -v o1="$o1" -v p0="$p0" -v p1="$p1" -v ok="$(cat "$tmp/$p.okept" 2>/dev/null)" -v pk="$(cat "$tmp/$p.pkept")" \
        -v same="$(cat "$tmp/$p.same")" 'BEGIN { printf "| %s | %.1f | %.1f | %.2fx | %s | %s | %.1f | %.1f | %.2fx | %s |\n", t, o0, o1, o1 / o0, ok == "" ? "0/0" : ok, same, p0, p1, (p0 > 0 ? p1 / p0 : 0), pk }'
done

echo
# serve NAME MODEL FLAGS...: output t/s of llm bench with 1, 8 and 64 requests at once, drafts off and on
serve() {
    name=$1; model=$2; shift 2
    for b in 1 8 64; do
        for r in $(seq 1 "$ROUNDS"); do
            build/llm bench -m "$model" --num-prompts $b --input-len 128 --output-len 128 -t "$THREADS" --json 2>/dev/null |
                sed -n 's/.*"output_tps":\([0-9.]*\).*/\1/p' >> "$tmp/$name.b$b.0"
            build/llm bench -m "$model" --num-prompts $b --input-len 128 --output-len 128 -t "$THREADS" --json "$@" \
                --num-speculative-tokens $K 2>/dev/null > "$tmp/b.json"
            sed -n 's/.*"output_tps":\([0-9.]*\).*/\1/p' "$tmp/b.json" >> "$tmp/$name.b$b.1"
            sed -n 's/.*"acceptance":\([0-9.]*\).*/\1/p' "$tmp/b.json" > "$tmp/$name.b$b.acc"
        done
        a=$(median < "$tmp/$name.b$b.0"); s=$(median < "$tmp/$name.b$b.1"); acc=$(cat "$tmp/$name.b$b.acc")
        awk -v n="$name" -v b="$b" -v a="$a" -v s="$s" -v acc="${acc:-0}" \
            'BEGIN { printf "| %s | %d | %.1f | %.1f | %.2fx | %.0f%% |\n", n, b, a, s, s / a, 100 * acc }' >> "$tmp/serve.md"
    done
}
serve "n-gram, $(basename "$M")" "$M" --speculative-ngram
serve "SmolLM2 F16 drafted by its Q4_1" "$SF16" --speculative-model "$M"
echo
echo "many requests at once (random prompts, 128 + 128 tokens, K = $K), output t/s; medians of $ROUNDS runs"
echo
echo "| drafts | requests at once | output t/s, drafts off | on | ratio | drafts kept |"
echo "|---|---:|---:|---:|---:|---:|"
cat "$tmp/serve.md"
