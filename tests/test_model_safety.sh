#!/bin/sh
# Model files that are damaged or change, through the program: --no-mmap gives the mapped run's
# output byte for byte; a file cut short is refused with a message naming it; a model whose
# activations overflow (an infinite weight scale) is reported once, with exit status 1 (run,
# bench) or an error line (generate), never computed on silently.
# Usage: tests/test_model_safety.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
pass=0; fail=0
tmp=${TMPDIR:-/tmp}/llm-safety-test.$$
mkdir -p "$tmp"
trap 'rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_model_safety: $*"; }
# expect_fail NAME WORD CMD...: exit status 1 (not a crash) and WORD on stderr, once
expect_fail() {
    name=$1; word=$2; shift 2
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne 1 ]; then bad "$name: exit status $rc (want 1): $err"; return; fi
    n=$(printf '%s\n' "$err" | grep -c "$word")
    [ "$n" = 1 ] && ok || bad "$name: '$word' $n times in '$err'"
}

# --no-mmap: the same tokens, text and log-probabilities (the JSON less the speeds)
for m in tiny-q4_0 tiny-q6_k tiny-qwen2-chat; do
    a=$("$llm" run -m "$models/$m.gguf" -p "Once upon a time" -n 16 --temp 0 --seed 1 --ignore-eos --json --logprobs 3 -t 2 2>/dev/null |
        sed 's/"prompt_tps":[^,]*,"decode_tps":[^,]*,//')
    b=$("$llm" run -m "$models/$m.gguf" -p "Once upon a time" -n 16 --temp 0 --seed 1 --ignore-eos --json --logprobs 3 -t 2 --no-mmap 2>/dev/null |
        sed 's/"prompt_tps":[^,]*,"decode_tps":[^,]*,//')
    [ -n "$a" ] && [ "$a" = "$b" ] && ok || bad "$m: --no-mmap gives '$b', mapped '$a'"
done

# copies of the q8_0 model: cut in the middle of its tensors; the first block scale of
# blk.0.ffn_down.weight set to fp16 infinity
python3 - "$models/tiny-q8_0.gguf" "$tmp" <<'PY' && ok || bad "could not make the edited model files"
import struct, sys
d, out = bytearray(open(sys.argv[1], "rb").read()), sys.argv[2]
open(out + "/cut.gguf", "wb").write(d[: len(d) * 3 // 4])
o = 24
def skip_str(o):
    return o + 8 + struct.unpack_from("<Q", d, o)[0]
def skip_val(t, o):
    if t == 8: return skip_str(o)
    if t == 9:
        et, n = struct.unpack_from("<IQ", d, o); o += 12
        for _ in range(n): o = skip_val(et, o)
        return o
    return o + {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}[t]
n_tensors, n_kv = struct.unpack_from("<QQ", d, 8)
for _ in range(n_kv):
    o = skip_str(o)
    o = skip_val(struct.unpack_from("<I", d, o)[0], o + 4)
where = None
for _ in range(n_tensors):
    n = struct.unpack_from("<Q", d, o)[0]; name = d[o + 8:o + 8 + n]; o += 8 + n
    nd = struct.unpack_from("<I", d, o)[0]; o += 4 + 8 * nd
    t, off = struct.unpack_from("<IQ", d, o); o += 12
    if name == b"blk.0.ffn_down.weight": assert t == 8; where = off
assert where is not None
data = (o + 31) // 32 * 32   # the generator's alignment
struct.pack_into("<H", d, data + where, 0x7c00)
open(out + "/inf.gguf", "wb").write(d)
PY
expect_fail "run, a file cut short" "truncated file" "$llm" run -m "$tmp/cut.gguf" -p hi -t 2
expect_fail "run --no-mmap, a file cut short" "truncated file" "$llm" run -m "$tmp/cut.gguf" -p hi -t 2 --no-mmap
expect_fail "run, an infinite weight" "not finite" "$llm" run -m "$tmp/inf.gguf" -p "Once upon a time" -n 8 -t 2
expect_fail "bench, an infinite weight" "not finite" "$llm" bench -m "$tmp/inf.gguf" -p 8 -n 4 -r 1 -t 2
expect_fail "serving bench, an infinite weight" "not finite" "$llm" bench -m "$tmp/inf.gguf" --num-prompts 2 --input-len 8 \
    --output-len 2 -t 2
out=$(printf '%s\n' '{"prompt":"hi","max_tokens":4}' '{"tokens":[1,2,3]}' | "$llm" generate -m "$tmp/inf.gguf" --requests - -t 2)
n=$(printf '%s\n' "$out" | grep -c '"tokens":\[\],"text":"","finish_reason":"error",.*"error":"request [01]: the model computed logits that are not finite')
[ "$n" = 2 ] && ok || bad "generate, an infinite weight: $out"

echo "test_model_safety: $pass passed, $fail failed"
[ "$fail" = 0 ]
