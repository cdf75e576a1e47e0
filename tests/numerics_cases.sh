# The cases of tests/test_numerics.sh and tests/make_numerics_goldens.sh (sourced by both):
#   NAME SOURCE KV
# SOURCE: tiny:FILE (a random-weight test model of build/models), real:FILE (a real model of the
# fixtures, $LLM_REAL_MODELS), smollm2:TYPE (the real SmolLM2-135M-Instruct's weights dequantized to
# F32 by llm quantize, then quantized to TYPE: real weights in every type); KV: the cache's type.
numerics_cases() {
    cat <<'CASES'
smollm2-f32         smollm2:f32     f32
smollm2-f16         smollm2:f16     f32
smollm2-bf16        smollm2:bf16    f32
smollm2-q8_0        smollm2:q8_0    f32
smollm2-q4_1        real:SmolLM2-135M-Instruct.Q4_1 f32
smollm2-q4_1-kvf16  real:SmolLM2-135M-Instruct.Q4_1 f16
smollm2-q4_1-kvq8   real:SmolLM2-135M-Instruct.Q4_1 q8_0
smollm2-f16-kvq8    smollm2:f16     q8_0
smollm2-q4_0        smollm2:q4_0    f32
smollm2-q5_0        smollm2:q5_0    f32
smollm2-q4_k_m      smollm2:q4_k_m  f32
smollm2-q5_k_m      smollm2:q5_k_m  f32
smollm2-q6_k        smollm2:q6_k    f32
smollm2-q3_k_m      smollm2:q3_k_m  f32
smollm2-iq4_xs      smollm2:iq4_xs  f32
gemma3-q4_k_m       real:gemma-3-270m-q4_k_m f32
tiny-f32            tiny:tiny-f32   f32
tiny-f16            tiny:tiny-f16   f32
tiny-bf16           tiny:tiny-bf16  f32
tiny-q8_0           tiny:tiny-q8_0  f32
tiny-q4_0           tiny:tiny-q4_0  f32
tiny-q4_1           tiny:tiny-q4_1  f32
tiny-q5_0           tiny:tiny-q5_0  f32
tiny-q5_1           tiny:tiny-q5_1  f32
tiny-iq4_nl         tiny:tiny-iq4_nl f32
tiny-q2_k           tiny:tiny-q2_k  f32
tiny-q3_k           tiny:tiny-q3_k  f32
tiny-q4_k           tiny:tiny-q4_k  f32
tiny-q5_k           tiny:tiny-q5_k  f32
tiny-q6_k           tiny:tiny-q6_k  f32
tiny-iq4_xs         tiny:tiny-iq4_xs f32
tiny-qwen2-q4_k     tiny:tiny-qwen2-q4_k f32
CASES
}

# numerics_model SOURCE LLM MODELS_DIR TMP: prints the model file of SOURCE (making the SmolLM2
# files in TMP once), or returns 1 with a message on stderr
numerics_model() {
    case "$1" in
        tiny:*) echo "$3/${1#tiny:}.gguf" ;;
        real:*) echo "${LLM_REAL_MODELS:?LLM_REAL_MODELS names the real models' folder}/${1#real:}.gguf" ;;
        smollm2:*)
            f32=$4/smollm2-f32.gguf out=$4/smollm2-${1#smollm2:}.gguf
            if [ ! -f "$f32" ]; then
                "$2" quantize --allow-requantize "${LLM_REAL_MODELS:?}/SmolLM2-135M-Instruct.Q4_1.gguf" "$f32" f32 \
                    >"$4/quantize.log" 2>&1 || { cat "$4/quantize.log" >&2; return 1; }
            fi
            if [ ! -f "$out" ]; then
                "$2" quantize "$f32" "$out" "${1#smollm2:}" >"$4/quantize.log" 2>&1 ||
                    { cat "$4/quantize.log" >&2; return 1; }
            fi
            echo "$out" ;;
        *) echo "numerics: unknown source $1" >&2; return 1 ;;
    esac
}

# The text, the chunk size and the chunks every case is scored on (252 positions).
NUMERICS_TEXT=/usr/share/common-licenses/GPL-3
NUMERICS_CTX=128
NUMERICS_CHUNKS=4
