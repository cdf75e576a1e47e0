#!/bin/sh
# llm serve (the OpenAI-compatible HTTP server) on SmolLM2-135M-Instruct against PyPI's official
# openai client, curl and raw sockets: tests/test_server.py says what it checks. The client lives
# in the Python virtual environment tests/fixtures.sh makes ($LLM_PYTHON, set by make test).
# Usage: tests/test_server.sh LLM_BINARY MODELS_DIR (the real models: $LLM_REAL_MODELS)
llm=$1
m=${LLM_REAL_MODELS:-}/SmolLM2-135M-Instruct.Q4_1.gguf
fail() { echo "FAIL test_server: $*"; echo "test_server: 0 passed, 1 failed"; exit 1; }
[ -n "${LLM_REAL_MODELS:-}" ] || fail "LLM_REAL_MODELS is not set: it names the folder of the real models tests/fixtures.sh fetches (make test sets it)"
[ -f "$m" ] || fail "$m is missing (make fixtures)"
[ -n "${LLM_PYTHON:-}" ] && [ -x "$LLM_PYTHON" ] ||
    fail "LLM_PYTHON ('${LLM_PYTHON:-}') is not a Python with the openai client (make fixtures makes one; make test sets it)"
command -v curl >/dev/null 2>&1 || fail "curl is missing (Debian: curl): the SSE framing is checked with it"
exec "$LLM_PYTHON" tests/test_server.py "$llm" "$m"
