#!/bin/sh
# The CUDA backend on an NVIDIA GPU, in one run: builds with CUDA=1 (unless build/cuda is there
# already), runs test_cuda (every kernel against the CPU backend, whole models, graphs, the real
# models' goldens), then measures on a model shape with random weights made here by the generator:
# decode (tg128) at batch 1 and its share of the copy bandwidth (llm bench measures it with a copy
# kernel in the same run), prefill of a 2048-token prompt (pp2048) and its TFLOP/s, and serving
# throughput at 64 and 256 concurrent requests of 128 + 128 tokens. With LLAMA_BENCH (a
# llama-bench built with -DGGML_CUDA=ON, e.g. by LLAMA_SRC=<llama.cpp source> below) the same
# files on llama.cpp in the same run: its tg128 / pp2048 and our ratios.
#
#   sh bench/cuda.sh                                  llama-2-7b at f16, q8_0, q4_0, q4_k
#   SHAPE=tiny TYPES=q4_0 REPS=2 TEST=0 PP=256 sh bench/cuda.sh    a quick run
#   LLAMA_SRC=path/to/llama.cpp sh bench/cuda.sh      also builds llama.cpp's CUDA llama-bench
#                                                     (in the background, from the start)
#
# On a GPU machine without the network or a CUDA toolkit: build here (make CUDA=1 build/cuda/llm
# build/cuda/tests/test_cuda build/gen_model; the CUDA runtime is linked in, the driver is all it
# needs there), copy the fixtures' vocabularies (tests/fixtures.sh's cache, vocab/) to
# build/vocab, and take build/cuda, build/gen_model and build/vocab along.
#
# Each type's prefill also by the own GEMM and by cuBLAS's (LLM_CUDA_CUBLAS=0 / 1).
# PEAK_TFLOPS (the device's dense f16 tensor-core peak from its data sheet; H200 SXM: 989) adds
# prefill's share of it. Results: build/bench/cuda-*.json and Markdown tables on stdout.
set -eu
SHAPE=${SHAPE:-llama-2-7b}
TYPES=${TYPES:-"f16 q8_0 q4_0 q4_k"}
REPS=${REPS:-3}
DEVICE=${DEVICE:-0}
TEST=${TEST:-1}
PP=${PP:-2048}
mkdir -p build/models build/bench
J=$(nproc 2>/dev/null || echo 4)
if [ -n "${LLAMA_SRC:-}" ] && [ -z "${LLAMA_BENCH:-}" ]; then   # llama.cpp's CUDA build, beside ours
    ( cmake -S "$LLAMA_SRC" -B build/llama-cuda -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF \
          -DCMAKE_BUILD_TYPE=Release >build/bench/llama-cuda-build.log 2>&1 &&
      cmake --build build/llama-cuda -j "$J" --target llama-bench >>build/bench/llama-cuda-build.log 2>&1 ) &
    llama_pid=$!
    LLAMA_BENCH=build/llama-cuda/bin/llama-bench
fi
LLM=${LLM:-build/cuda/llm}   # (LLM=build/cuda-emu/llm: the script itself tried on the CPU emulator)
[ -x "$LLM" ] || make -s -j "$J" CUDA=1 build/cuda/llm
[ -x build/gen_model ] || make -s -j "$J" build/gen_model
$LLM info --devices
if [ "$TEST" = 1 ]; then
    [ -x build/cuda/tests/test_cuda ] || make -s -j "$J" CUDA=1 build/cuda/tests/test_cuda
    # the test models (a machine without the network: the vocabularies in build/vocab, copied from
    # the fixtures' cache; models that cannot be made, the Hugging Face directories without Python's
    # packages, are tests that SKIP)
    [ -d build/models ] || LLM_VOCAB_DIR=${LLM_VOCAB_DIR:-build/vocab} sh tests/make_models.sh build/gen_model build/models ||
        echo "(some test models could not be made: their tests print SKIP)"
    build/cuda/tests/test_cuda > build/bench/test_cuda.log 2>&1 || true
    grep -E '^(FAIL|SKIP)' build/bench/test_cuda.log | head -40 || true
    tail -n 1 build/bench/test_cuda.log
fi
for t in $TYPES; do
    m=build/models/bench-$SHAPE-$t.gguf
    [ -f "$m" ] || build/gen_model --shape "$SHAPE" --type "$t" --vocab synthetic:32000 --seed 1 -o "$m"
done
field() { echo "$1" | sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p"; }
echo
echo "| $SHAPE | decode tg128 | copy bandwidth | share of it | prefill pp$PP | TFLOP/s |"
echo "|---|---:|---:|---:|---:|---:|"
for t in $TYPES; do
    m=build/models/bench-$SHAPE-$t.gguf
    j=$($LLM bench -m "$m" --backend cuda --device "$DEVICE" -p "$PP" -n 128 -r "$REPS" --json)
    echo "$j" > "build/bench/cuda-$SHAPE-$t.json"
    echo "$j" | awk -v t="$t" -v peak="${PEAK_TFLOPS:-0}" -f bench/gpu_row.awk
done
# prefill by the own GEMM and by cuBLAS's (the engine times both at load and keeps the faster per
# weight type: its choice is in the device's name)
for t in $TYPES; do
    m=build/models/bench-$SHAPE-$t.gguf
    echo
    echo "$t: $(sed -n 's/.*"device":"\([^"]*\)".*/\1/p' "build/bench/cuda-$SHAPE-$t.json")"
    for b in 0 1; do
        j=$(LLM_CUDA_CUBLAS=$b $LLM bench -m "$m" --backend cuda --device "$DEVICE" -p "$PP" -n 0 -r "$REPS" --json)
        echo "  pp$PP with LLM_CUDA_CUBLAS=$b: $(field "$j" pp_tps) t/s"
    done
done
echo
echo "| $SHAPE serving, 128 + 128 tokens | 64 requests | 256 requests |"
echo "|---|---:|---:|"
for t in $TYPES; do
    m=build/models/bench-$SHAPE-$t.gguf
    row="| $t"
    for n in 64 256; do
        j=$($LLM bench -m "$m" --backend cuda --device "$DEVICE" --num-prompts "$n" --input-len 128 --output-len 128 \
            --max-num-seqs "$n" --json)
        echo "$j" > "build/bench/cuda-serve-$SHAPE-$t-$n.json"
        row="$row | $(field "$j" output_tps) t/s"
    done
    echo "$row |"
done
if [ -n "${LLAMA_BENCH:-}" ]; then
    [ -n "${llama_pid:-}" ] && { wait "$llama_pid" || { tail -n 20 build/bench/llama-cuda-build.log; exit 1; }; }
    echo
    echo "| $SHAPE, llama.cpp CUDA (llama-bench -fa 1) | tg128 | pp$PP | ours / llama.cpp: tg | pp |"
    echo "|---|---:|---:|---:|---:|"
    for t in $TYPES; do
        m=build/models/bench-$SHAPE-$t.gguf
        out=$("$LLAMA_BENCH" -m "$m" -p "$PP" -n 128 -r "$REPS" -ngl 99 -fa 1 -o csv 2>/dev/null)
        col() {   # the avg_ts of the row with n_prompt $1 and n_gen $2 (columns found by the header's names)
            echo "$out" | awk -F, -v p="$1" -v g="$2" 'NR == 1 { gsub(/"/, ""); for (i = 1; i <= NF; i++) c[$i] = i; next }
                { gsub(/"/, ""); if ($c["n_prompt"] == p && $c["n_gen"] == g) print $c["avg_ts"] }' | tail -n 1
        }
        pp=$(col "$PP" 0)
        tg=$(col 0 128)
        ours=$(cat "build/bench/cuda-$SHAPE-$t.json")
        echo "| $t | ${tg:-?} t/s | ${pp:-?} t/s | $(awk -v a="$(field "$ours" tg_tps)" -v b="${tg:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b }') | $(awk -v a="$(field "$ours" pp_tps)" -v b="${pp:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b }') |"
    done
fi
