#!/bin/sh
# Structured output on SmolLM2-135M-Instruct: every JSON Schema of tests/schemas/ through llm serve
# (greedy and sampled, batched), the official openai client's json_schema and parse(), llm run and
# llm generate with grammars and schemas, each output checked with the jsonschema package:
# tests/test_structured.py says what it checks. The packages live in the Python virtual
# environment tests/fixtures.sh makes ($LLM_PYTHON, set by make test).
# Usage: tests/test_structured.sh LLM_BINARY MODELS_DIR (the real models: $LLM_REAL_MODELS)
llm=$1
m=${LLM_REAL_MODELS:-}/SmolLM2-135M-Instruct.Q4_1.gguf
fail() { echo "FAIL test_structured: $*"; echo "test_structured: 0 passed, 1 failed"; exit 1; }
[ -n "${LLM_REAL_MODELS:-}" ] || fail "LLM_REAL_MODELS is not set: it names the folder of the real models tests/fixtures.sh fetches (make test sets it)"
[ -f "$m" ] || fail "$m is missing (make fixtures)"
[ -n "${LLM_PYTHON:-}" ] && [ -x "$LLM_PYTHON" ] ||
    fail "LLM_PYTHON ('${LLM_PYTHON:-}') is not a Python with the openai client (make fixtures makes one; make test sets it)"
"$LLM_PYTHON" -c "import jsonschema, openai, pydantic" 2>/dev/null ||
    fail "$LLM_PYTHON has no jsonschema, openai or pydantic: make fixtures installs them"
exec "$LLM_PYTHON" tests/test_structured.py "$llm" "$m"
