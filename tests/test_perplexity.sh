#!/bin/sh
# llm perplexity against llama.cpp's llama-perplexity: the perplexity of test models on the GPL 3
# text of every Debian machine (base-files' /usr/share/common-licenses/GPL-3) equals the figure
# llama-perplexity printed (tests/golden/perplexity.txt, made by tests/make_perplexity_goldens.sh)
# within 0.2%; the KL divergence of a q8_0 model against the f32 model of the same weights (base
# file written by llm) agrees with llama-perplexity's; and bad input ends in a clear message.
# Usage: tests/test_perplexity.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
text=/usr/share/common-licenses/GPL-3
golden=tests/golden/perplexity.txt
pass=0; fail=0
tmp=${TMPDIR:-/tmp}/llm-ppl-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_perplexity: $*"; }
# close A B REL: |A - B| <= REL x |B|
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b; exit !(a != "" && d <= r * m) }'; }
# expect_fail NAME WORD CMD...: exit status 1 (not a crash) and WORD on stderr, no sanitizer report
# (AddressSanitizer's exit status is 1 too: a leak at the exit shows only in its report)
expect_fail() {
    name=$1; word=$2; shift 2
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne 1 ]; then bad "$name: exit status $rc (want 1): $err"; return; fi
    case "$err" in *Sanitizer*) bad "$name: $(printf '%s\n' "$err" | head -n 20)"; return ;; esac
    case "$err" in *"$word"*) ok ;; *) bad "$name: message '$err' lacks '$word'" ;; esac
}

if [ ! -f "$text" ]; then
    bad "$text is missing (Debian's base-files has it): the perplexity tests need that text"
    echo "test_perplexity: $pass passed, $fail failed"
    exit 1
fi

# every golden: the final estimate and its error within 0.2% of llama-perplexity's (f32 weights,
# whose matrix products round nothing: 0.001%, which also tells the error's sqrt(var / (n - 1))
# from sqrt(var / n)); the progress line has one running estimate per chunk, the last equal to
# the final one
grep '^ppl ' "$golden" > "$tmp/ppl.txt"
[ -s "$tmp/ppl.txt" ] || bad "no perplexity goldens in $golden"
# (under sanitizers, where each token costs ten times as much, 2 of them: make test runs all)
if [ "${LLM_TEST_SAN:-}" = 1 ]; then
    grep -E '^ppl (tiny-f32|tiny-q6_k) ' "$tmp/ppl.txt" > "$tmp/ppl2.txt" && mv "$tmp/ppl2.txt" "$tmp/ppl.txt"
    echo "SKIP test_perplexity: under sanitizers 2 of the $(grep -c '^ppl ' "$golden") perplexity goldens (make test runs all)"
fi
while read -r _ name ctx chunks want want_err; do
    ch=""; [ "$chunks" -gt 0 ] && ch="--chunks $chunks"
    # shellcheck disable=SC2086
    out=$("$llm" perplexity -m "$models/$name.gguf" -f "$text" -c "$ctx" $ch -t 2 --kv-cache-dtype f32 2>"$tmp/err")
    got=$(echo "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\1/p')
    got_err=$(echo "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\2/p')
    tol=0.002; case $name in *-f32) tol=0.00001 ;; esac
    if close "$got" "$want" $tol && close "$got_err" "$want_err" $tol; then ok
    else bad "$name -c $ctx: PPL $got +/- $got_err, llama-perplexity $want +/- $want_err: $(cat "$tmp/err")"; fi
    progress=$(echo "$out" | grep '^\[1\]')
    n=$(echo "$progress" | tr ',' '\n' | grep -c '^\[[0-9]*\][0-9.]*$')
    last=$(echo "$progress" | tr ',' '\n' | grep . | tail -n 1 | sed 's/^\[[0-9]*\]//')
    want_n=$chunks
    [ "$chunks" -gt 0 ] || want_n=$(sed -n 's/.*perplexity over \([0-9]*\) chunks.*/\1/p' "$tmp/err")
    [ "$n" = "$want_n" ] && [ "$last" = "$got" ] && ok ||
        bad "$name: progress '$progress': $n estimates (want $want_n), the last '$last' (final $got)"
done < "$tmp/ppl.txt"

# the real models of $LLM_REAL_MODELS (tests/fixtures.sh): 2 chunks of 512 tokens (14 take minutes
# under AddressSanitizer; the 14-chunk figures are in the golden's comments). Their quantized
# products round activations to 8 bits, and these models amplify a flipped rounding (see
# test_golden): llama-perplexity against itself with an f16 KV cache instead of f32 moves by
# 0.28% (SmolLM2) and 0.14% (Gemma 3) on these 2 chunks, 0.29% (Gemma 3) on 14; llm moved by
# 0.10% and 0.41% (0.08% and 0.24% on 14). Both models' weights dequantized to F32 agree within
# 0.002%, and against those llm's quantized runs have a smaller KL divergence than llama.cpp's
# (bench/perplexity_real.sh, README). The goldens come from a machine with AVX-512; on one with
# AVX2 only, llama-perplexity itself gives 17.7551 for SmolLM2 (0.30% above its golden) and llm
# 17.7425 (0.23%; its AVX2 kernels sum in another order). Bounds: SmolLM2 0.4%, Gemma 3 0.6%; the
# error estimate 1%.
# Under sanitizers (make test SAN=1 sets LLM_TEST_SAN=1) they are not run: minutes there, and the
# same forward passes are test_golden's under sanitizers too.
if [ "${LLM_TEST_SAN:-}" = 1 ]; then
    echo "SKIP test_perplexity: the real models' perplexity under sanitizers (make test runs it)"
elif [ -z "${LLM_REAL_MODELS:-}" ]; then
    bad "LLM_REAL_MODELS is not set: it names the folder of the real models tests/fixtures.sh fetches (make test sets it)"
else
    grep '^real ' "$golden" > "$tmp/real.txt"
    [ "$(wc -l < "$tmp/real.txt")" -ge 2 ] || bad "fewer than 2 real-model goldens in $golden"
    while read -r _ name ctx chunks want want_err tol; do
        m=$LLM_REAL_MODELS/$name.gguf
        [ -f "$m" ] || { bad "$m is missing (make fixtures)"; continue; }
        out=$("$llm" perplexity -m "$m" -f "$text" -c "$ctx" --chunks "$chunks" -t 2 --kv-cache-dtype f32 2>"$tmp/err")
        got=$(echo "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\1/p')
        got_err=$(echo "$out" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\2/p')
        if close "$got" "$want" "$tol" && close "$got_err" "$want_err" 0.01; then ok
        else bad "$name -c $ctx --chunks $chunks: PPL $got +/- $got_err, llama-perplexity $want +/- $want_err (bound $tol): $(cat "$tmp/err")"; fi
        echo "  $name: PPL $got +/- $got_err, llama-perplexity $want +/- $want_err"
    done < "$tmp/real.txt"
fi

# the batch size does not change the figures (beyond float rounding: steps of 32 tokens or more
# multiply Q5_K/Q6_K weights as unpacked tiles, smaller ones with the plain kernels)
m=$models/tiny-q4_k_m.gguf
a=$("$llm" perplexity -m "$m" -f "$text" -c 128 --chunks 3 -t 2 2>/dev/null | tail -n 1)
b=$("$llm" perplexity -m "$m" -f "$text" -c 128 --chunks 3 -t 2 -b 7 2>/dev/null | tail -n 1)
ppl() { echo "$1" | sed -n 's/^Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\)$/\'"$2"'/p'; }
case "$a" in "Final estimate: PPL = "*)
    if close "$(ppl "$b" 1)" "$(ppl "$a" 1)" 1e-6 && close "$(ppl "$b" 2)" "$(ppl "$a" 2)" 1e-6; then ok
    else bad "-b 7 gave '$b', the default batch '$a'"; fi ;;
    *) bad "no final estimate: '$a'" ;; esac

# KL divergence: llm writes the f32 model's base file, then compares the q8_0 model with it;
# the figures against llama-perplexity's (its own base file). The q8_0 model's own distribution
# differs from llama.cpp's by the rounding of its matrix products, so its figures get small
# tolerances: PPL 0.2%, mean KLD 2%, same top token 1.5 points (a random model has near ties)
set -- $(grep '^kld ' "$golden")
if [ $# -ne 9 ]; then bad "no KL divergence golden in $golden"; else
    base=$tmp/base.bin
    "$llm" perplexity -m "$models/$2.gguf" -f "$text" -c "$4" --chunks "$5" -t 2 --kv-cache-dtype f32 \
        --kl-divergence-base "$base" > "$tmp/base.out" 2>&1 || bad "--kl-divergence-base: $(cat "$tmp/base.out")"
    # the file's size: header, tokens, then (c - 1 - c/2) records of 2 x ceil(4096 / 2) + 4 uint16 per chunk
    size=$(wc -c < "$base" | tr -d ' ')
    want_size=$((20 + $5 * $4 * 4 + $5 * ($4 - 1 - $4 / 2) * 4100 * 2))
    [ "$size" = "$want_size" ] && ok || bad "base file of $size bytes, want $want_size"
    out=$("$llm" perplexity -m "$models/$3.gguf" --kl-divergence-base "$base" --kl-divergence -t 2 --kv-cache-dtype f32 2>"$tmp/err")
    q=$(echo "$out" | awk '/^Mean PPL\(Q\) / { print $4 }')
    pb=$(echo "$out" | awk '/^Mean PPL\(base\) / { print $4 }')
    kl=$(echo "$out" | awk '/^Mean    KLD:/ { print $3 }')
    top=$(echo "$out" | awk '/^Same top p:/ { print $4 }')
    close "$q" "$6" 0.002 && ok || bad "KLD: PPL(Q) $q, llama-perplexity $6"
    close "$pb" "$7" 0.002 && ok || bad "KLD: PPL(base) $pb, llama-perplexity $7"
    close "$kl" "$8" 0.02 && ok || bad "KLD: mean KLD $kl, llama-perplexity $8"
    awk -v a="$top" -v b="$9" 'BEGIN { exit !(a != "" && a - b <= 1.5 && b - a <= 1.5) }' && ok ||
        bad "KLD: same top p $top%, llama-perplexity $9%"
    n=$(echo "$out" | grep -c '^ *[0-9]*    .*±.*%$')
    [ "$n" = "$5" ] && ok || bad "KLD: $n chunk lines (want $5): $out $(cat "$tmp/err")"
    # the base model against its own file: no divergence beyond the file's 16-bit rounding
    out=$("$llm" perplexity -m "$models/$2.gguf" --kl-divergence-base "$base" --kl-divergence -t 2 --kv-cache-dtype f32 2>&1)
    kl=$(echo "$out" | awk '/^Mean    KLD:/ { print $3 }')
    top=$(echo "$out" | awk '/^Same top p:/ { print $4 }')
    awk -v k="$kl" -v t="$top" 'BEGIN { exit !(k != "" && k + 0 < 1e-5 && t + 0 == 100) }' && ok ||
        bad "the base model against its own base file: mean KLD $kl, same top $top%"

    # a base file for another vocabulary, another context; not a base file; cut short
    expect_fail "base of another vocabulary" "vocabulary of 4096 tokens" \
        "$llm" perplexity -m "$models/tiny-pre-smollm.gguf" --kl-divergence-base "$base" --kl-divergence
    expect_fail "base of another context" "context of $4 tokens" \
        "$llm" perplexity -m "$models/$3.gguf" --kl-divergence-base "$base" --kl-divergence -c 256
    expect_fail "not a base file" "not a base file" \
        "$llm" perplexity -m "$models/$3.gguf" --kl-divergence-base "$text" --kl-divergence
    head -c 100000 "$base" > "$tmp/short.bin"
    printf '_logits_\200\000\000\000\377\377\377\177\377\377\377\177' > "$tmp/huge.bin"   # n_vocab, chunks 2^31 - 1
    expect_fail "base file of a huge header" "is cut short" \
        "$llm" perplexity -m "$models/$3.gguf" --kl-divergence-base "$tmp/huge.bin" --kl-divergence
    expect_fail "base file cut short" "is cut short" \
        "$llm" perplexity -m "$models/$3.gguf" --kl-divergence-base "$tmp/short.bin" --kl-divergence
fi

# bad input: a text too short for llama-perplexity's 2 x n_ctx tokens (the count is given), no
# text, a missing file, --kl-divergence without its base file
head -c 200 "$text" > "$tmp/short.txt"
expect_fail "text too short" "needs at least 256" "$llm" perplexity -m "$models/tiny-f32.gguf" -f "$tmp/short.txt" -c 128
expect_fail "no text" "-f FILE" "$llm" perplexity -m "$models/tiny-f32.gguf"
expect_fail "missing file" "$tmp/none.txt" "$llm" perplexity -m "$models/tiny-f32.gguf" -f "$tmp/none.txt"
# a text without end: refused at 1 GiB, whose buffer is freed on the way out (LeakSanitizer under SAN=1)
expect_fail "endless text" "holds more than 1 GiB" "$llm" perplexity -m "$models/tiny-f32.gguf" -f /dev/zero
expect_fail "kl without base" "--kl-divergence-base" "$llm" perplexity -m "$models/tiny-f32.gguf" --kl-divergence
expect_fail "missing base" "$tmp/none.bin" "$llm" perplexity -m "$models/tiny-f32.gguf" --kl-divergence-base "$tmp/none.bin" --kl-divergence
expect_fail "-b elsewhere" "max-num-batched-tokens" "$llm" run -m "$models/tiny-f32.gguf" -p hi -b 8

echo "test_perplexity: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
