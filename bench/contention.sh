#!/bin/sh
# Decode speed on a busy machine: llm.c against llama.cpp's native llama-bench (tg: one token at a
# time after a BOS, batch 1) on the same file, in the same run, for THREADS thread counts, with
# no added load and with one core kept busy by another process (a shell loop, started and
# stopped here). Today's llm.c (BASELINE, a binary built from the git ref BASELINE_REF) runs
# alongside, at 1 thread and the default count.
#
#   sh bench/contention.sh             the real SmolLM2-135M-Instruct (../shared/peer/setup.sh
#                                      --native --model fetches it as Q4_1, which llm.c does not
#                                      read: llama-quantize turns it into Q4_0 once, and both
#                                      engines run that file)
#   MODEL=file.gguf sh bench/contention.sh
#   REPORT_ONLY=1 sh bench/contention.sh   the table and checks of the last run again
#
# Every round runs every configuration once, alternating engines and thread counts, so that a
# noisy neighbour hurts all alike; the table shows medians over ROUNDS rounds (each run is itself
# the median of REPS repetitions of N tokens). A run that has not finished after TIMEOUT seconds
# is stopped and counts as slower than N * (REPS + 1) / TIMEOUT tokens/s (shown as "<x").
#
# Targets, checked at the end: with one core busy, llm.c at the default thread count decodes at
# least as fast as llama.cpp at its default; no thread count is slower than -t 1 by more than 10%
# (with load and without); without load, llm.c at the default count is within 3% of BASELINE.
# The machine's own load (other programs) is printed with each section: it adds to both.
set -eu
THREADS=${THREADS:-"1 2 4 8"}
ROUNDS=${ROUNDS:-5}
REPS=${REPS:-3}
N=${N:-64}
TIMEOUT=${TIMEOUT:-20}
DEFAULT_T=$(nproc)   # what llm.c and llama-bench use without -t here: the cores this process may use
PEER=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}
LLAMA_BIN=${LLAMA_BIN:-$PEER/llama.cpp/build/bin}
LLAMA_BENCH=${LLAMA_BENCH:-$LLAMA_BIN/llama-bench}
MODEL=${MODEL:-}
BASELINE_REF=${BASELINE_REF:-main}
BASELINE=${BASELINE:-}
out=build/bench/contention
mkdir -p "$out"

if [ ! -x "$LLAMA_BENCH" ]; then
    echo "contention: llama-bench not found at $LLAMA_BENCH (run ../shared/peer/setup.sh --native)" >&2
    exit 1
fi
[ -x ./llm ] || { echo "contention: ./llm not found (run make)" >&2; exit 1; }
if [ -z "$MODEL" ]; then
    src=$PEER/models/SmolLM2-135M-Instruct.Q4_1.gguf
    [ -f "$src" ] || { echo "contention: $src not found (run ../shared/peer/setup.sh --native --model)" >&2; exit 1; }
    MODEL=build/bench/SmolLM2-135M-Instruct.Q4_0.gguf
    if [ ! -f "$MODEL" ]; then
        LD_LIBRARY_PATH=$LLAMA_BIN "$LLAMA_BIN/llama-quantize" --allow-requantize "$src" "$MODEL" Q4_0 >/dev/null 2>&1 ||
            { echo "contention: llama-quantize could not convert $src" >&2; exit 1; }
    fi
fi
if [ -z "$BASELINE" ]; then   # today's program, built from BASELINE_REF in its own folder
    BASELINE=build/baseline/src/llm
    if [ ! -x "$BASELINE" ] || [ "$(cat build/baseline/ref 2>/dev/null)" != "$(git rev-parse "$BASELINE_REF")" ]; then
        rm -rf build/baseline/src && mkdir -p build/baseline/src
        git archive "$BASELINE_REF" | tar -x -C build/baseline/src
        make -C build/baseline/src -j2 llm >/dev/null
        git rev-parse "$BASELINE_REF" > build/baseline/ref
    fi
fi

median() { sort -g | awk '{ a[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
bound=$(awk -v n="$N" -v r="$REPS" -v s="$TIMEOUT" 'BEGIN { printf "%.2f", n * (r + 1) / s }')

# One run; appends tokens/s (or 0 after a timeout) to $out/ENGINE-LOAD-T.
run_llm() {   # binary name load threads
    v=$(timeout "$TIMEOUT" "$1" bench -m "$MODEL" -p 0 -n "$N" -r "$REPS" -t "$4" --json 2>/dev/null |
        sed -n 's/.*"tg_tps":\([0-9.]*\).*/\1/p') || true
    echo "${v:-0}" >> "$out/$2-$3-$4"
}
run_llama() {   # load threads
    v=$(timeout "$TIMEOUT" "$LLAMA_BENCH" -m "$MODEL" -p 0 -n "$N" -r "$REPS" -t "$2" -o csv 2>/dev/null |
        awk 'NR == 1 { n = split($0, h, ","); for (i = 1; i <= n; i++) if (h[i] == "avg_ts") c = i; next }
             c { split($0, f, "\",\""); v = f[c]; gsub(/"/, "", v); print v }') || true
    echo "${v:-0}" >> "$out/llama-$1-$2"
}

spinner=
stop_spinner() { if [ -n "$spinner" ]; then kill "$spinner" 2>/dev/null || true; wait "$spinner" 2>/dev/null || true; spinner=; fi; }
trap stop_spinner EXIT INT TERM

[ "${REPORT_ONLY:-0}" = 1 ] && ROUNDS=$(wc -l < "$out/llm-none-1") || { rm -f "$out"/*; }
[ "${REPORT_ONLY:-0}" = 1 ] || for r in $(seq "$ROUNDS"); do
    for load in none busy; do
        if [ $load = busy ]; then sh -c 'while :; do :; done' & spinner=$!; fi
        echo "$r $load $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)" >> "$out/loadavg"
        for t in $THREADS; do
            run_llm ./llm llm $load "$t"
            run_llama $load "$t"
            case " 1 $DEFAULT_T " in *" $t "*) run_llm "$BASELINE" base $load "$t" ;; esac
        done
        stop_spinner
        echo "round $r, $load: llm.c $(for t in $THREADS; do printf '%s ' "$(tail -n 1 "$out/llm-$load-$t")"; done)" \
             "llama.cpp $(for t in $THREADS; do printf '%s ' "$(tail -n 1 "$out/llama-$load-$t")"; done)" >&2
    done
done

cell() {   # file -> median, "<bound" when the median run timed out
    m=$(median < "$1")
    if [ "$m" = 0 ]; then echo "<$bound"; else printf '%.1f\n' "$m"; fi
}
echo
echo "Decode (tg$N, batch 1), tokens/s: $MODEL; medians of $ROUNDS rounds x $REPS repetitions;"
echo "$(nproc) cores here (default thread count $DEFAULT_T); 'busy': one more process spinning on a core."
echo "Load average at the start of each section: $(awk '{ printf "%s %s: %s; ", $1, $2, $3 }' "$out/loadavg")"
echo
echo "| threads | llm.c | llama.cpp | llm.c / llama.cpp | llm.c vs -t 1 | llm.c busy | llama.cpp busy | llm.c / llama.cpp busy | llm.c busy vs -t 1 | today's llm.c | today's busy |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for t in $THREADS; do
    ln=$(cell "$out/llm-none-$t"); cn=$(cell "$out/llama-none-$t")
    lb=$(cell "$out/llm-busy-$t"); cb=$(cell "$out/llama-busy-$t")
    l1n=$(median < "$out/llm-none-1"); l1b=$(median < "$out/llm-busy-1")
    bn=-; bb=-
    [ -f "$out/base-none-$t" ] && bn=$(cell "$out/base-none-$t") && bb=$(cell "$out/base-busy-$t")
    awk -v t="$t" -v ln="$ln" -v cn="$cn" -v lb="$lb" -v cb="$cb" -v l1n="$l1n" -v l1b="$l1b" -v bn="$bn" -v bb="$bb" \
        -v d="$DEFAULT_T" 'function r(a, b) { return (a + 0 > 0 && b + 0 > 0 && a !~ /</ && b !~ /</) ? sprintf("%.2fx", a / b) : (b ~ /</ && a + 0 > 0 ? sprintf(">%.2fx", a / substr(b, 2)) : "-") }
        BEGIN { printf "| %s%s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", t, t == d ? " (default)" : "",
                       ln, cn, r(ln, cn), r(ln, l1n), lb, cb, r(lb, cb), r(lb, l1b), bn, bb }'
done

echo
fail=0
check() {   # description, awk condition on a and b
    if awk -v a="$2" -v b="$3" "BEGIN { exit !($4) }"; then echo "ok    $1"; else echo "MISS  $1"; fail=1; fi
}
lb=$(median < "$out/llm-busy-$DEFAULT_T"); cb=$(median < "$out/llama-busy-$DEFAULT_T")
check "busy core: llm.c -t $DEFAULT_T ($(cell "$out/llm-busy-$DEFAULT_T")) >= llama.cpp -t $DEFAULT_T ($(cell "$out/llama-busy-$DEFAULT_T"))" "$lb" "$cb" 'a >= b'
for load in none busy; do
    one=$(median < "$out/llm-$load-1")
    for t in $THREADS; do
        [ "$t" = 1 ] && continue
        v=$(median < "$out/llm-$load-$t")
        check "$load: llm.c -t $t ($(cell "$out/llm-$load-$t")) >= 0.9 x -t 1 ($(cell "$out/llm-$load-1"))" "$v" "$one" 'a >= 0.9 * b'
    done
done
ln=$(median < "$out/llm-none-$DEFAULT_T"); bn=$(median < "$out/base-none-$DEFAULT_T")
if [ "$bn" = 0 ]; then   # today's pool collapsed: the machine was busy even without the added load
    echo "n/a   no load: today's llm.c -t $DEFAULT_T timed out (<$bound): other programs kept a core busy, so this run cannot check the 3% target"
else
    check "no load: llm.c -t $DEFAULT_T ($(cell "$out/llm-none-$DEFAULT_T")) >= 0.97 x today's ($(cell "$out/base-none-$DEFAULT_T"))" "$ln" "$bn" 'a >= 0.97 * b'
fi
exit $fail
