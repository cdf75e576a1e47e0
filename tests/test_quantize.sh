#!/bin/sh
# llm quantize: the files it writes against llama-quantize's (tests/golden/quantize_mix.txt, made
# by tests/make_quantize_goldens.sh): for every file type, the same metadata, tensor order, types
# and offsets (the header's bytes), the same bytes for the tensors of exact types (the whole file
# when all are), and for the others a squared error at most 2% above llama-quantize's; a Hugging
# Face directory quantized to a file runs as the directory quantized at load does; bad input gets a
# clear error and leaves no file.
# Usage: tests/test_quantize.sh LLM MODELS_DIR   (--keys: the golden keys, one a line)
KEYS="nano-k8/q4_0 nano-k8/q4_1 nano-k8/q5_0 nano-k8/q5_1 nano-k8/q8_0 nano-k8/iq4_nl nano-k8/iq4_xs
nano-k8/q2_K nano-k8/q3_K_S nano-k8/q3_K_M nano-k8/q3_K_L nano-k8/q4_K_S nano-k8/q4_K_M nano-k8/q5_K_S
nano-k8/q5_K_M nano-k8/q6_K nano-k8/f16 nano-k8/bf16 nano-k8/f32 nano-k8/pure-q4_K nano-k8/pure-q6_K
tiny-576/q4_0 tiny-576/q8_0 tiny-576/q4_K_M tiny-576/q3_K_M tiny-576/iq4_xs tiny-gpt-oss/mxfp4_moe
tiny-qwen3moe/q4_K_M"
[ "$1" = --keys ] && { echo "$KEYS"; exit 0; }
# Under sanitizers (make test SAN=1 sets LLM_TEST_SAN=1) a subset: 6 of the file types (4 of them
# whole files the same as llama-quantize's, one K-quant mix) and 3 of the 5 calibrated checkpoints,
# 1 of the 2 calibrated GGUF files; make test runs them all.
METHODS="gptq --group-size 64|gptq --act-order|gptq --bits 8 --group-size 32|awq --group-size 64|rtn --format hf --group-size 64"
GGUF_METHODS="gptq awq"
if [ "${LLM_TEST_SAN:-}" = 1 ]; then
    KEYS="nano-k8/q8_0 nano-k8/f16 nano-k8/bf16 nano-k8/f32 nano-k8/q4_K_M tiny-576/q8_0"
    METHODS="gptq --group-size 64|awq --group-size 64|rtn --format hf --group-size 64"
    GGUF_METHODS="gptq"
    echo "SKIP test_quantize: under sanitizers 6 of 28 file types and 4 of 7 calibrated quantizations (make test runs all)"
fi
llm=${1:-build/llm}
py=${LLM_PYTHON:-python3}
hf=${2:-build/models}/hf   # the tiny models as Hugging Face directories (make models)
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llm-quantize.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# every golden file type
set --
for key in $KEYS; do
    shape=${key%%/*} t=${key#*/} pure=
    case "$t" in pure-*) pure=--pure t=${t#pure-} ;; esac
    [ -f "$tmp/$shape.gguf" ] || build/gen_model --shape "$shape" --type f16 --vocab synthetic:300 --seed 1 -o "$tmp/$shape.gguf" 2>/dev/null ||
        bad "gen_model $shape"
    out="$tmp/$shape-$t$pure.gguf"
    if "$llm" quantize $pure "$tmp/$shape.gguf" "$out" "$t" 2>"$tmp/err"; then ok; else bad "llm quantize $key: $(cat "$tmp/err")"; fi
    set -- "$@" "$tmp/$shape.gguf" "$out" "$key"
done
"$py" tests/quantize_mix.py check tests/golden/quantize_mix.txt "$@" > "$tmp/check" 2>&1
grep '^FAIL\|Error\|error' "$tmp/check" | head -20
pass=$((pass + $(grep -c '^ok ' "$tmp/check")))
fail=$((fail + $(grep -c '^FAIL ' "$tmp/check")))
grep -q '^ok ' "$tmp/check" || bad "tests/quantize_mix.py ran no check: $(tail -3 "$tmp/check")"
# the plain types' files are llama-quantize's, byte for byte (the golden's "file" lines)
[ "$(grep -c '^ok [^ ]* file same' "$tmp/check")" -ge 4 ] && ok || bad "fewer than 4 whole files the same as llama-quantize's"

# a Hugging Face directory: llm quantize --pure to q8_0 runs as the directory quantized at load
d=$hf/tiny-qwen3-f32
if [ -d "$d" ]; then
    "$llm" quantize --pure "$d" "$tmp/hf.gguf" q8_0 2>"$tmp/err" && ok || bad "llm quantize of $d: $(cat "$tmp/err")"
    a=$("$llm" run -m "$tmp/hf.gguf" -p "Once upon a time" -n 12 --temp 0 --json --logprobs 2 2>/dev/null)
    b=$("$llm" run -m "$d" --quantize q8_0 -p "Once upon a time" -n 12 --temp 0 --json --logprobs 2 2>/dev/null)
    a=$(echo "$a" | sed 's/"prompt_tps":[^,]*,//; s/"decode_tps":[^,]*,//; s/"seed":[0-9]*//')
    b=$(echo "$b" | sed 's/"prompt_tps":[^,]*,//; s/"decode_tps":[^,]*,//; s/"seed":[0-9]*//')
    [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "the quantized directory's file runs differently: $a / $b"
else
    bad "$d missing (make fixtures)"
fi

# bad input: a clear message, exit status 1, no file left
src=$tmp/nano-k8.gguf
expect_fail() {   # WHAT PATTERN ARGS...
    what=$1 pat=$2
    shift 2
    rm -f "$tmp/out.gguf" "$tmp/out.gguf.part"
    "$llm" quantize "$@" >"$tmp/out" 2>&1
    rc=$?
    if [ $rc -ne 1 ] || ! grep -q "$pat" "$tmp/out" || [ -e "$tmp/out.gguf" ] || [ -e "$tmp/out.gguf.part" ]; then
        bad "$what: rc $rc, $(head -c 300 "$tmp/out")"
    else
        ok
    fi
}
expect_fail "unknown type" "'q9_9' is not a file type" "$src" "$tmp/out.gguf" q9_9
expect_fail "missing input" "cannot open" "$tmp/none.gguf" "$tmp/out.gguf" q4_0
expect_fail "output is input" "is the input" "$src" "$src" q4_0
expect_fail "unknown flag" "unknown flag" --bogus "$src" "$tmp/out.gguf"
expect_fail "two types" "two types" --type q4_0 "$src" "$tmp/out.gguf" q8_0
"$llm" quantize "$src" "$tmp/q4.gguf" q4_0 2>/dev/null
expect_fail "requantize" "needs --allow-requantize" "$tmp/q4.gguf" "$tmp/out.gguf" q8_0
printf 'GGUF\003\000\000\000junk' > "$tmp/corrupt.gguf"
expect_fail "corrupt input" "gguf" "$tmp/corrupt.gguf" "$tmp/out.gguf" q4_0
expect_fail "unwritable output" "cannot create" "$src" "$tmp/no/such/dir/out.gguf" q4_0
# an output that is the input or lies inside it (through symbolic links too, existing or not):
# refused before anything is written, the input left as it was
d=$hf/tiny-qwen3-f32
if [ -d "$d" ]; then
    cp -R "$d" "$tmp/in"
    ln -s "$tmp/in" "$tmp/in-link"
    ln -s "$tmp/in/model.safetensors" "$tmp/out-link.gguf"
    printf 'the calibration text\n' > "$tmp/calib-in.txt"
    expect_fail "output is a file of the input" "is inside the input" "$tmp/in" "$tmp/in/model.safetensors" q8_0
    expect_fail "output new in the input" "is inside the input" "$tmp/in" "$tmp/in/new.gguf" q8_0
    expect_fail "output in a new folder in the input" "is inside the input" "$tmp/in" "$tmp/in/sub/new.gguf" q8_0
    expect_fail "output through a link to the input" "is inside the input" "$tmp/in" "$tmp/in-link/model.safetensors" q8_0
    expect_fail "input through a link" "is inside the input" "$tmp/in-link" "$tmp/in/model.safetensors" q8_0
    expect_fail "output a link into the input" "is inside the input" "$tmp/in" "$tmp/out-link.gguf" q8_0
    expect_fail "output is the input's directory" "is the input" --format hf "$tmp/in" "$tmp/in-link"
    cp "$src" "$tmp/m.gguf.part"
    expect_fail "output's .part is the input" "is the input" "$tmp/m.gguf.part" "$tmp/m.gguf" q8_0
    cmp -s "$src" "$tmp/m.gguf.part" && [ ! -e "$tmp/m.gguf" ] && ok || bad "the input named as the output's .part changed"
    expect_fail "output is the calibration text" "is the calibration text" --method gptq --calib "$tmp/calib-in.txt" \
        --format gguf "$tmp/in" "$tmp/calib-in.txt" q8_0
    diff -r "$d" "$tmp/in" >/dev/null && [ "$(ls "$tmp/in" | wc -l)" = "$(ls "$d" | wc -l)" ] && ok ||
        bad "the input directory changed: $(diff -r "$d" "$tmp/in" 2>&1 | head -c 300)"
    [ -L "$tmp/out-link.gguf" ] && [ "$(cat "$tmp/calib-in.txt")" = "the calibration text" ] && ok ||
        bad "the link or the calibration text changed"
else
    bad "$d is missing (make models makes it): the output checks against a directory did not run"
fi
"$llm" quantize --allow-requantize "$tmp/q4.gguf" "$tmp/rq.gguf" q8_0 2>/dev/null && "$llm" run -m "$tmp/rq.gguf" -p hi -n 2 --temp 0 >/dev/null 2>&1 &&
    ok || bad "--allow-requantize"
"$llm" quantize --help | grep -q "allow-requantize" && ok || bad "llm quantize --help"
# the AWQ directory to a GGUF file (requantized): it runs
if [ -d "$hf/tiny-qwen3-awq" ]; then
    expect_fail "AWQ without --allow-requantize" "needs --allow-requantize" "$hf/tiny-qwen3-awq" "$tmp/out.gguf" q8_0
    "$llm" quantize --allow-requantize "$hf/tiny-qwen3-awq" "$tmp/awq.gguf" q8_0 2>/dev/null &&
        "$llm" run -m "$tmp/awq.gguf" -p hi -n 2 --temp 0 >/dev/null 2>&1 && ok || bad "AWQ directory to GGUF"
fi
# calibrated quantization (tests/test_quantize.c checks the algorithms): checkpoints of a Hugging
# Face directory that the engine loads and that agree with their numpy dequantization
# (tests/hf/awq_gptq.py, the formats' documented packing): the first token's top-5 log-probabilities
# alike within 0.15 (the engine rounds the activations of int4 matrices to 8 bits)
calib=$tmp/calib.txt
for i in $(seq 40); do echo "The quick brown fox $i jumps over the lazy dog; a stitch in time saves nine, said $i."; done > "$calib"
d=$hf/tiny-qwen3-f32
if [ -d "$d" ]; then
    # ... and whose next-token distributions stay near the model's (mean KL divergence over the
    # calibration text: a packing error gives about 4), GPTQ's and AWQ's nearer than round-to-nearest's
    "$llm" perplexity -m "$d" -f "$calib" -c 64 --kl-divergence-base "$tmp/base.kld" >/dev/null 2>&1 || bad "the base's log-probabilities"
    IFS='|'
    for m in $METHODS; do
        IFS=' '
        set -- $m
        o=$tmp/ck-$1-$#
        if "$llm" quantize --method $m --calib "$calib" --samples 8 --seq-len 32 "$d" "$o" 2>"$tmp/err"; then ok; else bad "quantize --method $m: $(cat "$tmp/err")"; continue; fi
        [ -f "$o/tokenizer.json" ] && grep -q '"quant_method": "'"$( [ "$1" = awq ] && echo awq || echo gptq)"'"' "$o/config.json" && ok ||
            bad "$m: config.json or tokenizer.json"
        kl=$("$llm" perplexity -m "$o" --kl-divergence-base "$tmp/base.kld" --kl-divergence 2>&1 | awk '/^Mean +KLD:/ { print $3 }')
        eval "kl_$1_$#=\$kl"
        case "$m" in *"--bits 8"*) lim=0.02 ;; *) lim=1.0 ;; esac
        [ -n "$kl" ] && awk -v k="$kl" -v l="$lim" 'BEGIN { exit !(k < l) }' && ok || bad "--method $m: mean KL divergence ${kl:-none}, not below $lim"
        "$py" tests/hf/awq_gptq.py dequant "$o" "$o-ref" >/dev/null 2>"$tmp/err" || { bad "awq_gptq.py dequant of --method $m: $(tail -2 "$tmp/err")"; continue; }
        a=$("$llm" run -m "$o" -p "Once upon a time" -n 1 --temp 0 --json --logprobs 5 2>/dev/null)
        b=$("$llm" run -m "$o-ref" -p "Once upon a time" -n 1 --temp 0 --json --logprobs 5 2>/dev/null)
        "$py" - "$a" "$b" <<'PY' && ok || bad "--method $m: the checkpoint and its numpy dequantization disagree: $a / $b"
import json, sys
a, b = (json.loads(x)["logprobs"][0] for x in sys.argv[1:3])
ta, tb = {e["id"]: e["logprob"] for e in a}, {e["id"]: e["logprob"] for e in b}
sys.exit(not (a[0]["id"] == b[0]["id"] and all(abs(ta[i] - tb[i]) < 0.15 for i in ta if i in tb) and len(set(ta) & set(tb)) >= 4))
PY
    done
    unset IFS
    echo "mean KL divergence, groups of 64: gptq ${kl_gptq_3:-} awq ${kl_awq_3:-} rtn ${kl_rtn_5:-}; act-order (g128) ${kl_gptq_2:-}; 8-bit ${kl_gptq_5:-}"
    for m in gptq_3 awq_3; do
        eval "k=\${kl_$m:-}"
        awk -v k="$k" -v r="${kl_rtn_5:-}" 'BEGIN { exit !(k != "" && r != "" && k < r) }' && ok ||
            bad "${m%_*} (mean KL ${k:-none}) is not nearer the model than round-to-nearest (${kl_rtn_5:-none}), groups of 64"
    done
    # a GGUF file of the calibrated weights: llama-quantize's mix, header and all, other values
    g=$hf/tiny-qwen3-f32.gguf
    "$llm" quantize "$g" "$tmp/rtn.gguf" q4_K_M 2>/dev/null
    for m in $GGUF_METHODS; do
        if "$llm" quantize --method $m --format gguf --calib "$calib" --samples 8 --seq-len 32 "$g" "$tmp/$m.gguf" q4_K_M 2>"$tmp/err"; then
            h=$("$py" -c 'import sys; from gguf import GGUFReader; print(GGUFReader(sys.argv[1]).data_offset)' "$tmp/rtn.gguf")
            [ "$(head -c "$h" "$tmp/$m.gguf" | cksum)" = "$(head -c "$h" "$tmp/rtn.gguf" | cksum)" ] && ok || bad "$m gguf: header differs from RTN's"
            cmp -s "$tmp/$m.gguf" "$tmp/rtn.gguf" && bad "$m gguf: the same bytes as RTN's" || ok
            "$llm" run -m "$tmp/$m.gguf" -p hi -n 2 --temp 0 >/dev/null 2>&1 && ok || bad "$m gguf does not run"
        else
            bad "quantize --method $m --format gguf: $(cat "$tmp/err")"
        fi
    done
    # bad calibrated requests
    expect_fail "unknown method" "not a method" --method bogus --calib "$calib" "$d" "$tmp/out.gguf"
    expect_fail "no calibration text" "needs a calibration text" --method gptq "$d" "$tmp/out.gguf"
    expect_fail "missing calibration text" "cannot open" --method gptq --calib "$tmp/none.txt" "$d" "$tmp/out.gguf"
    expect_fail "short calibration text" "less than one window" --method gptq --calib "$calib" --seq-len 5000 "$d" "$tmp/out.gguf"
    expect_fail "checkpoint from GGUF" "is not one" --method gptq --calib "$calib" "$g" "$tmp/out.gguf"
    expect_fail "AWQ at 8 bits" "AWQ is 4-bit" --method awq --bits 8 --calib "$calib" "$d" "$tmp/out.gguf"
    expect_fail "group size" "group size 48" --method gptq --group-size 48 --calib "$calib" "$d" "$tmp/out.gguf"
    expect_fail "act-order with AWQ" "act-order" --method awq --act-order --calib "$calib" "$d" "$tmp/out.gguf"
    expect_fail "quantized input" "quantized already" --method gptq --calib "$calib" "$tmp/ck-gptq-3" "$tmp/out.gguf"
    : > "$tmp/afile"
    expect_fail "output is a file" "a file is in the way" --method gptq --calib "$calib" --samples 2 --seq-len 32 "$d" "$tmp/afile"
    expect_fail "output not empty" "is not empty" --method gptq --calib "$calib" --samples 2 --seq-len 32 "$d" "$tmp/ck-gptq-3"
    expect_fail "a type for a checkpoint" "a file type is for GGUF output" --method gptq --calib "$calib" "$d" "$tmp/out.gguf" q4_0
    expect_fail "group size 0" "group-size 0" --method gptq --group-size 0 --calib "$calib" "$d" "$tmp/out.gguf"
    expect_fail "AWQ, a group a row" "no whole-row group" --method awq --group-size -1 --calib "$calib" "$d" "$tmp/out.gguf"
    # a failed checkpoint leaves nothing (nor OUT.part); --format hf alone is round-to-nearest's checkpoint
    "$llm" quantize --method gptq --calib "$calib" --seq-len 5000 "$d" "$tmp/gone" >/dev/null 2>&1
    [ ! -e "$tmp/gone" ] && [ ! -e "$tmp/gone.part" ] && ok || bad "a failed checkpoint left $tmp/gone or $tmp/gone.part"
    "$llm" quantize --format hf "$d" "$tmp/plain" 2>/dev/null && grep -q '"quant_method": "gptq"' "$tmp/plain/config.json" &&
        [ ! -e "$tmp/plain.part" ] && ok || bad "--format hf without a method"
fi
echo "test_quantize: $pass passed, $fail failed"
[ $fail -eq 0 ]
