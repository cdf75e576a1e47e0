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
tiny-576/q4_0 tiny-576/q8_0 tiny-576/q4_K_M tiny-576/q3_K_M tiny-576/iq4_xs"
[ "$1" = --keys ] && { echo "$KEYS"; exit 0; }
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
"$llm" quantize --allow-requantize "$tmp/q4.gguf" "$tmp/rq.gguf" q8_0 2>/dev/null && "$llm" run -m "$tmp/rq.gguf" -p hi -n 2 --temp 0 >/dev/null 2>&1 &&
    ok || bad "--allow-requantize"
"$llm" quantize --help | grep -q "allow-requantize" && ok || bad "llm quantize --help"
# the AWQ directory to a GGUF file (requantized): it runs
if [ -d "$hf/tiny-qwen3-awq" ]; then
    expect_fail "AWQ without --allow-requantize" "needs --allow-requantize" "$hf/tiny-qwen3-awq" "$tmp/out.gguf" q8_0
    "$llm" quantize --allow-requantize "$hf/tiny-qwen3-awq" "$tmp/awq.gguf" q8_0 2>/dev/null &&
        "$llm" run -m "$tmp/awq.gguf" -p hi -n 2 --temp 0 >/dev/null 2>&1 && ok || bad "AWQ directory to GGUF"
fi
echo "test_quantize: $pass passed, $fail failed"
[ $fail -eq 0 ]
