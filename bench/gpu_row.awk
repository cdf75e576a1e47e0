# One row of the GPU benchmarks' table (bench/vulkan.sh, bench/cuda.sh) from llm bench's JSON
# (-v t=TYPE, -v peak=TFLOP/s of the device or 0): decode and prefill speed, the copy bandwidth,
# decode's share of it (weight bytes a token x tokens/s), prefill's TFLOP/s and share of peak.
{
    match($0, /"pp_tps":[0-9.]+/); pp = substr($0, RSTART + 9, RLENGTH - 9)
    match($0, /"tg_tps":[0-9.]+/); tg = substr($0, RSTART + 9, RLENGTH - 9)
    match($0, /"bytes_per_token":[0-9]+/); bpt = substr($0, RSTART + 18, RLENGTH - 18)
    match($0, /"copy_gbps":[0-9.]+/); bw = substr($0, RSTART + 12, RLENGTH - 12)
    bpw = 4; if (t == "f16" || t == "bf16") bpw = 2; if (t == "q8_0") bpw = 1.0625
    if (t == "q4_0" || t == "q4_k") bpw = 0.5625
    tf = 2 * bpt / bpw * pp / 1e12   # 2 flops per weight per token
    roof = 0; if (bw > 0) roof = 100 * bpt * tg / 1e9 / bw
    share = ""; if (peak > 0) share = sprintf(" (%.0f%% of %s)", 100 * tf / peak, peak)
    printf "| %s | %.1f t/s | %.0f GB/s | %.0f%% | %.1f t/s | %.2f%s |\n", t, tg, bw, roof, pp, tf, share
}
