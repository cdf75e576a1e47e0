#!/bin/sh
# llm's arithmetic against exact arithmetic, and against llama.cpp's distance from it: for every
# case of tests/numerics_cases.sh (the real SmolLM2 in 12 types, with f16 and q8_0 KV caches too,
# the real Gemma 3 270M Q4_K_M, and random-weight models of every type; the SmolLM2 files made for
# it take about 1.5 GB in $TMPDIR while it runs), llm perplexity writes its log-probabilities on 4 chunks of
# 128 tokens of the GPL 3 text (--kl-divergence-base), and tests/numerics.py evaluates the same
# tokens in float64 with numpy from the file's weights as PyPI's gguf package dequantizes them
# (nothing of the engine's): mean KL divergence from the reference, the share of positions with
# the reference's top token, and the mean error of that token's log-probability. Bounds, against
# tests/golden/numerics.txt (tests/make_numerics_goldens.sh: llm's figures when it was made, and
# llama-perplexity's on the same files, cache type and chunks):
#   KL <= 1.25 x llm's golden + 2e-6 and <= 1.25 x llama.cpp's + 2e-6 (when the goldens were made,
#   the two engines' KL were within 0.95-1.12 x of each other on every quantized case, llm's lower
#   with F16 weights); top-1 agreement at most 3 points (7 of 252 positions) under llm's golden; the top token's log-probability error
#   <= 1.25 x llm's golden + 2e-4. F32 weights with an f32 cache: KL within 1e-5 of zero (the
#   files' 16-bit steps) and the top token's log-probability within 1e-4.
# Every speed change keeps these: a kernel that rounds activations more coarsely, or sums in less
# precision, moves KL by far more than 25% (an 8-bit activation rounding with truncation instead
# of rounding to nearest about triples it).
# Usage: tests/test_numerics.sh LLM_BINARY MODELS_DIR (needs $LLM_PYTHON with numpy and gguf, and
# $LLM_REAL_MODELS: make test sets both)
llm=$1
models=$2
py=${LLM_PYTHON:-python3}
golden=tests/golden/numerics.txt
pass=0; fail=0
tmp=${TMPDIR:-/tmp}/llm-numerics-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_numerics: $*"; }
. tests/numerics_cases.sh

if ! "$py" -c 'import numpy, gguf' 2>/dev/null; then
    bad "$py lacks numpy or gguf (tests/fixtures.sh installs them in its venv; make test sets LLM_PYTHON)"
    echo "test_numerics: $pass passed, $fail failed"
    exit 1
fi
if [ ! -f "$NUMERICS_TEXT" ]; then
    bad "$NUMERICS_TEXT is missing (Debian's base-files has it)"
    echo "test_numerics: $pass passed, $fail failed"
    exit 1
fi
[ "$(grep -c '^num ' "$golden")" -eq "$(numerics_cases | wc -l)" ] || bad "$golden has not one line per case"

numerics_cases > "$tmp/cases"
# (under sanitizers, where each token costs ten times as much, 4 of them: make test runs all)
if [ "${LLM_TEST_SAN:-}" = 1 ]; then
    grep -E '^(smollm2-q4_1|tiny-f32|tiny-q8_0|tiny-q4_k) ' "$tmp/cases" > "$tmp/cases2" && mv "$tmp/cases2" "$tmp/cases"
    echo "SKIP test_numerics: under sanitizers 4 of the $(numerics_cases | wc -l) cases (make test runs all)"
fi
field() { sed -n "s/.*\"$2\": \([-0-9.e]*\).*/\1/p" "$1"; }
while read -r name src kv; do
    set -- $(grep "^num $name " "$golden")
    [ $# -eq 8 ] || { bad "$name: no line in $golden"; continue; }
    g_kl=$3 g_top1=$4 g_dtop1=$5 p_kl=$6 p_top1=$7 p_dtop1=$8
    m=$(numerics_model "$src" "$llm" "$models" "$tmp" 2>"$tmp/err") || { bad "$name: $(cat "$tmp/err")"; continue; }
    [ -f "$m" ] || { bad "$name: $m is missing (make models, make fixtures)"; continue; }
    if ! "$llm" perplexity -m "$m" -f "$NUMERICS_TEXT" -c "$NUMERICS_CTX" --chunks "$NUMERICS_CHUNKS" -t 2 \
            --kv-cache-dtype "$kv" --kl-divergence-base "$tmp/l.kld" > "$tmp/out" 2>&1; then
        bad "$name: llm perplexity: $(tail -n 5 "$tmp/out")"; continue
    fi
    if ! "$py" tests/numerics.py "$m" "$tmp/l.kld" > "$tmp/r" 2>"$tmp/err"; then
        bad "$name: tests/numerics.py: $(tail -n 5 "$tmp/err")"; continue
    fi
    kl=$(field "$tmp/r" kl) top1=$(field "$tmp/r" top1) dtop1=$(field "$tmp/r" dtop1)
    awk -v n="$name" -v kl="$kl" -v pk="$p_kl" -v t="$top1" -v pt="$p_top1" -v d="$dtop1" -v pd="$p_dtop1" 'BEGIN {
        printf "  %-20s KL %.3g (llama.cpp %.3g), top-1 %.1f%% (%.1f%%), top-1 log p error %.3g (%.3g)\n",
               n, kl, pk, 100 * t, 100 * pt, d, pd }'
    awk -v kl="$kl" -v g="$g_kl" -v p="$p_kl" 'BEGIN { exit !(kl != "" && kl <= 1.25 * g + 2e-6 && kl <= 1.25 * p + 2e-6) }' && ok ||
        bad "$name: mean KL divergence from float64 $kl (bounds: 1.25 x llm's golden $g_kl and x llama.cpp's $p_kl)"
    awk -v t="$top1" -v g="$g_top1" 'BEGIN { exit !(t != "" && t >= g - 0.03) }' && ok ||
        bad "$name: the reference's top token at $top1 of the positions (golden $g_top1, llama.cpp $p_top1)"
    awk -v d="$dtop1" -v g="$g_dtop1" 'BEGIN { exit !(d != "" && d <= 1.25 * g + 2e-4) }' && ok ||
        bad "$name: the top token's log-probability off by $dtop1 on average (golden $g_dtop1, llama.cpp $p_dtop1)"
    case "$name" in *-f32)
        awk -v kl="$kl" -v d="$dtop1" 'BEGIN { exit !(kl <= 1e-5 && kl >= -1e-5 && d <= 1e-4) }' && ok ||
            bad "$name: F32 weights with an f32 cache: KL $kl, top-1 log p error $dtop1 (want |KL| <= 1e-5, <= 1e-4)" ;;
    esac
done < "$tmp/cases"
echo "test_numerics: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
