#!/bin/sh
# Runs test programs and every tests/test_*.sh script (given the llm binary and the models
# folder) and adds up their "name: N passed, N failed" lines.
# Usage: tests/run.sh BUILD_DIR [PROGRAM...]   the programs (default: every $BUILD_DIR/tests/test_*)
# A program or script fails when it exits non-zero, prints no such line, or ran no check at all
# ("0 passed, 0 failed": everything it would have checked was missing or skipped).
dir=$1
shift
[ $# -gt 0 ] || set -- "$dir"/tests/test_*
passed=0; failed=0; broken=""
for t in "$@" tests/test_*.sh; do
    [ -f "$t" ] || continue
    start=$(date +%s)
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
    echo "$line ($(( $(date +%s) - start )) s)"
    p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
    f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
    passed=$((passed + p)); failed=$((failed + f))
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $(basename "$t"): ran no check"
        failed=$((failed + 1)); broken="$broken $(basename "$t")"
    elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        failed=$((failed + 1)); broken="$broken $(basename "$t")"
    fi
done
[ -z "$broken" ] || echo "crashed, failed with no failed check counted, or ran no check:$broken"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
