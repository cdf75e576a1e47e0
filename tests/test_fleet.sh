#!/bin/sh
# Three llm serve replicas behind HAProxy (docs/deploy/haproxy.cfg, Debian's haproxy) on
# 127.0.0.1, driven by PyPI's official openai client: tests/test_fleet.py says what it checks.
# Usage: tests/test_fleet.sh LLM_BINARY MODELS_DIR (the real models: $LLM_REAL_MODELS)
llm=$1
m=${LLM_REAL_MODELS:-}/SmolLM2-135M-Instruct.Q4_1.gguf
fail() { echo "FAIL test_fleet: $*"; echo "test_fleet: 0 passed, 1 failed"; exit 1; }
[ -n "${LLM_REAL_MODELS:-}" ] || fail "LLM_REAL_MODELS is not set: it names the folder of the real models tests/fixtures.sh fetches (make test sets it)"
[ -f "$m" ] || fail "$m is missing (make fixtures)"
[ -n "${LLM_PYTHON:-}" ] && [ -x "$LLM_PYTHON" ] ||
    fail "LLM_PYTHON ('${LLM_PYTHON:-}') is not a Python with the openai client (make fixtures makes one; make test sets it)"
command -v haproxy >/dev/null 2>&1 || fail "haproxy is missing (Debian: haproxy): the replicas' load balancer"
exec "$LLM_PYTHON" tests/test_fleet.py "$llm" "$m" docs/deploy/haproxy.cfg
