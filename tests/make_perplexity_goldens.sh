#!/bin/sh
# Makes tests/golden/perplexity.txt with llama.cpp's llama-perplexity (the peer's native tools,
# ../shared/peer/setup.sh --native: $LLM_PEER_DIR/llama.cpp/build/bin, default ~/.cache/llm-peer)
# for tests/test_perplexity.sh: the perplexity of test models on the GPL 3 text every Debian
# machine has (base-files' /usr/share/common-licenses/GPL-3), and the KL divergence of a q8_0
# model against the f32 model of the same weights. llama-perplexity runs with its KV cache in f32
# and flash attention off, as llm perplexity --kv-cache-dtype f32 computes attention. Run from
# the repository root after `make models`.
set -e
bin=${LLM_PEER_DIR:-$HOME/.cache/llm-peer}/llama.cpp/build/bin
text=/usr/share/common-licenses/GPL-3
out=tests/golden/perplexity.txt
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
peer() { "$bin/llama-perplexity" -t 2 -ctk f32 -ctv f32 -fa off "$@"; }
{
    echo "# llama-perplexity's figures on $text, made by tests/make_perplexity_goldens.sh:"
    echo "#   llama-perplexity -m build/models/MODEL.gguf -f $text -c CTX [--chunks K] -t 2 -ctk f32 -ctv f32 -fa off"
    echo "# ppl MODEL CTX CHUNKS(0: all) PPL ERR"
    for spec in "tiny-f32 128 8" "tiny-q4_k_m 128 8" "tiny-q6_k 512 4" "tiny-qwen2-q8_0 128 8" \
                "tiny-llama3-f16 128 8" "tiny-pre-smollm 256 0"; do
        set -- $spec
        ch=""; [ "$3" -gt 0 ] && ch="--chunks $3"
        # shellcheck disable=SC2086
        r=$(peer -f "$text" -m "build/models/$1.gguf" -c "$2" $ch 2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p')
        [ -n "$r" ] || { echo "llama-perplexity gave no estimate for $1" >&2; exit 1; }
        echo "ppl $1 $2 $3 $r"
    done
    # the real models tests/fixtures.sh fetches: 2 chunks (tested) and 14 (for the record)
    real=${LLM_REAL_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c-tests/models}
    echo "# real models (\$LLM_REAL_MODELS/MODEL.gguf), the same command with -c 512 --chunks K;"
    echo "# real MODEL CTX CHUNKS PPL ERR TOLERANCE (tests/test_perplexity.sh says why)"
    for spec in "SmolLM2-135M-Instruct.Q4_1 0.004" "gemma-3-270m-q4_k_m 0.006"; do
        set -- $spec
        for k in 2 14; do
            r=$(peer -f "$text" -m "$real/$1.gguf" -c 512 --chunks $k 2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\) +\/- \([0-9.]*\).*/\1 \2/p')
            [ -n "$r" ] || { echo "llama-perplexity gave no estimate for $1" >&2; exit 1; }
            if [ $k = 2 ]; then echo "real $1 512 $k $r $2"; else echo "#   $1 -c 512 --chunks $k: PPL $r"; fi
        done
    done
    echo "# KL divergence: the base is BASE's --kl-divergence-base file, then"
    echo "#   llama-perplexity -m build/models/MODEL.gguf --kl-divergence-base BASE.bin --kl-divergence -t 2 -ctk f32 -ctv f32 -fa off"
    echo "# kld BASE MODEL CTX CHUNKS PPL(Q) PPL(base) MEAN_KLD SAME_TOP_%"
    peer -f "$text" -m build/models/tiny-f32.gguf -c 128 --chunks 8 --kl-divergence-base "$tmp/base.bin" > /dev/null 2>&1
    # the figures are on standard output (the log on standard error would mix into its lines)
    r=$(peer -m build/models/tiny-q8_0.gguf --kl-divergence-base "$tmp/base.bin" --kl-divergence 2>/dev/null | awk '
        /^Mean PPL\(Q\) /    { q = $4 }
        /^Mean PPL\(base\) / { b = $4 }
        /^Mean    KLD:/      { k = $3 }
        /^Same top p:/       { s = $4 }
        END { print q, b, k, s }')
    case $r in *[0-9]*" "*[0-9]*" "*[0-9]*" "*[0-9]*) ;; *) echo "llama-perplexity --kl-divergence gave no summary" >&2; exit 1;; esac
    echo "kld tiny-f32 tiny-q8_0 128 8 $r"
} > "$out"
cat "$out"
