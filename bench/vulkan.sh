#!/bin/sh
# The Vulkan backend's speed on a GPU: decode (tg128) and prefill (pp512) for a model shape and
# weight types, with the device's copy bandwidth (llm bench measures it) and decode's share of
# it, then the serving benchmark (64 requests of 128 + 128 tokens) for the first type.
#
#   sh bench/vulkan.sh                      llama-2-7b at f16, q4_0 and q4_k (random weights)
#   SHAPE=tiny TYPES=q4_0 REPS=2 sh bench/vulkan.sh     a quick run (e.g. on lavapipe)
#
# PEAK_TFLOPS (the device's dense f32 peak, from its data sheet) adds prefill's share of it;
# the GEMM uses f32 multiply-adds (no matrix units). Results: build/bench/vulkan-*.json and a
# Markdown table on stdout. Needs make VULKAN=1 (libvulkan-dev, glslang-tools) and a driver.
set -eu
SHAPE=${SHAPE:-llama-2-7b}
TYPES=${TYPES:-"f16 q4_0 q4_k"}
REPS=${REPS:-5}
DEVICE=${DEVICE:-0}
PROMPTS=${PROMPTS:-64}
make -s VULKAN=1 build/vulkan/llm build/gen_model
mkdir -p build/models build/bench
LLM=build/vulkan/llm
for t in $TYPES; do
    m=build/models/bench-$SHAPE-$t.gguf
    [ -f "$m" ] || build/gen_model --shape "$SHAPE" --type "$t" --vocab synthetic:32000 --seed 1 -o "$m"
done
$LLM info --devices
echo
echo "| $SHAPE | decode tg128 | copy bandwidth | decode roofline | prefill pp512 | prefill TFLOP/s |"
echo "|---|---:|---:|---:|---:|---:|"
for t in $TYPES; do
    m=build/models/bench-$SHAPE-$t.gguf
    j=$($LLM bench -m "$m" --backend vulkan --device "$DEVICE" -p 512 -n 128 -r "$REPS" --json)
    echo "$j" > build/bench/vulkan-$SHAPE-$t.json
    echo "$j" | awk -v t="$t" -v peak="${PEAK_TFLOPS:-0}" -f bench/gpu_row.awk
done
t=$(echo $TYPES | cut -d' ' -f1)
echo
echo "serving, $SHAPE $t, $PROMPTS requests of 128 + 128 tokens:"
$LLM bench -m build/models/bench-$SHAPE-$t.gguf --backend vulkan --device "$DEVICE" \
    --num-prompts "$PROMPTS" --input-len 128 --output-len 128
