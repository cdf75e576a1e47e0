#!/bin/sh
# Runs every test program in $1/tests and every tests/test_*.sh script (given the llm binary and
# the models folder) and adds up their "name: N passed, N failed" lines.
dir=$1
passed=0; failed=0; broken=""
for t in "$dir"/tests/test_* tests/test_*.sh; do
    [ -f "$t" ] || continue
    case "$t" in
        *.sh) out=$(sh "$t" "$dir/llm" "${LLM_TEST_MODELS:-build/models}" 2>&1); rc=$? ;;
        *) [ -x "$t" ] || continue; out=$(LLM_TEST_BUILD="$dir" "$t" 2>&1); rc=$? ;;
    esac
    line=$(printf '%s\n' "$out" | grep -E '^[a-z_0-9]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    printf '%s\n' "$out" | grep -E '^(FAIL|SKIP)' | head -n 40
    if [ -z "$line" ]; then
        printf '%s\n' "$out" | tail -n 20
        echo "$(basename "$t"): crashed or did not report (exit $rc)"
        failed=$((failed + 1)); broken="$broken $(basename "$t")"
        continue
    fi
    echo "$line"
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then failed=$((failed + 1)); broken="$broken $(basename "$t")"; fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
