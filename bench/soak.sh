#!/bin/sh
# A soak of llm serve on the ASan + UBSan build: N mixed requests (streamed and whole, n > 1,
# logprobs, stop strings, clients that go away, clients without the key, bad requests) from
# CLIENTS threads, then the server's books checked: resident memory after the warm-up and at the
# end, no KV block left, every admitted sequence ended, no sanitizer report (bench/soak.py says
# what it sends and checks). The client is Python's standard library alone.
# Usage: sh bench/soak.sh   (N=10000 CLIENTS=16 SEED=1 LLM=build/san/llm MODEL=build/models/tiny-q8_0.gguf)
# It builds LLM (make SAN=1) and the test models (make models) when they are missing.
# ASan's quarantine of freed memory is 32 MiB here (its default, 256 MiB, fills only after some
# thousands of requests and would read as growth); ASAN_OPTIONS overrides it.
set -eu
N=${N:-10000}
CLIENTS=${CLIENTS:-16}
SEED=${SEED:-1}
LLM=${LLM:-build/san/llm}
MODEL=${MODEL:-build/models/tiny-q8_0.gguf}
PYTHON=${PYTHON:-python3}
if [ ! -x "$LLM" ]; then
    [ "$LLM" = build/san/llm ] || { echo "soak: $LLM not found" >&2; exit 1; }
    make SAN=1 build/san/llm
fi
[ -f "$MODEL" ] || make models
ASAN_OPTIONS=${ASAN_OPTIONS:-quarantine_size_mb=32} \
    exec "$PYTHON" bench/soak.py "$LLM" "$MODEL" --requests "$N" --clients "$CLIENTS" --seed "$SEED"
