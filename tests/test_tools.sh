#!/bin/sh
# Tool calling through llm serve on SmolLM2-135M-Instruct (ChatML: the generic Hermes format)
# with PyPI's official openai client: tests/test_tools.py says what it checks. The client lives in
# the Python virtual environment tests/fixtures.sh makes ($LLM_PYTHON, set by make test).
# Usage: tests/test_tools.sh LLM_BINARY MODELS_DIR (the real models: $LLM_REAL_MODELS; the test models,
# tiny-harmony-vocab for gpt-oss's harmony format: MODELS_DIR)
llm=$1
m=${LLM_REAL_MODELS:-}/SmolLM2-135M-Instruct.Q4_1.gguf
fail() { echo "FAIL test_tools_server: $*"; echo "test_tools_server: 0 passed, 1 failed"; exit 1; }
[ -n "${LLM_REAL_MODELS:-}" ] || fail "LLM_REAL_MODELS is not set: it names the folder of the real models tests/fixtures.sh fetches (make test sets it)"
[ -f "$m" ] || fail "$m is missing (make fixtures)"
[ -n "${LLM_PYTHON:-}" ] && [ -x "$LLM_PYTHON" ] ||
    fail "LLM_PYTHON ('${LLM_PYTHON:-}') is not a Python with the openai client (make fixtures makes one; make test sets it)"
h=${2:-build/models}/tiny-harmony-vocab.gguf
[ -f "$h" ] || fail "$h is missing (make models)"
exec "$LLM_PYTHON" tests/test_tools.py "$llm" "$m" "$h"
