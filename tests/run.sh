#!/bin/sh
# Runs test programs and test scripts (given the llm binary and the models folder) and adds up
# their "name: N passed, N failed" lines.
# Usage: tests/run.sh BUILD_DIR [TEST...]   TEST: a program or a tests/test_*.sh script (default:
#        every $BUILD_DIR/tests/test_* program and every tests/test_*.sh script; programs alone:
#        those and every script)
# LLM_TEST_JOBS tests run at a time (default: the number of processors): each lane takes the next
# test not yet taken, the longest ones first (the order of the last run's times, kept in
# BUILD_DIR/test-times; without them the known long ones first). A test's lines are printed when
# it ends.
# A test fails when it exits non-zero, prints no such line, or ran no check at all ("0 passed, 0
# failed": everything it would have checked was missing or skipped).
dir=$1
shift
[ $# -gt 0 ] || set -- "$dir"/tests/test_*
scripts=tests/test_*.sh
for t in "$@"; do case "$t" in *.sh) scripts="" ;; esac; done
jobs=${LLM_TEST_JOBS:-$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)}
case "$jobs" in '' | *[!0-9]* | 0) jobs=1 ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llm-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM

# the tests, the longest first: by the last run's seconds, else the ones known to be long
times=$dir/test-times
for t in "$@" $scripts; do
    [ -f "$t" ] || continue
    case "$t" in *.sh) ;; *) [ -x "$t" ] || continue ;; esac
    n=$(basename "$t")
    s=$(awk -v n="$n" '$1 == n { print $2 }' "$times" 2>/dev/null | tail -n 1)
    if [ -z "$s" ]; then
        case "$n" in
            test_server.sh | test_fleet.sh | test_structured.sh | test_perplexity.sh | test_numerics.sh | test_vulkan | test_golden | test_serving) s=1000 ;;
            *) s=0 ;;
        esac
    fi
    echo "$s $t"
done | sort -s -k1,1nr | cut -d' ' -f2- > "$tmp/list"

# one test: its FAIL/SKIP lines and its summary (or why it has none) printed at once; its counts,
# seconds and whether it broke into $tmp/res.NAME
run_one() {
    t=$1; n=$(basename "$t")
    start=$(date +%s)
    case "$t" in
        *.sh) out=$(sh "$t" "$dir/llm" "${LLM_TEST_MODELS:-build/models}" 2>&1); rc=$? ;;
        *) out=$(LLM_TEST_BUILD="$dir" "$t" 2>&1); rc=$? ;;
    esac
    secs=$(( $(date +%s) - start ))
    line=$(printf '%s\n' "$out" | grep -E '^[a-z_0-9]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    report=$(printf '%s\n' "$out" | grep -E '^(FAIL|SKIP)' | head -n 40)
    if [ -z "$line" ]; then
        report="$report
$(printf '%s\n' "$out" | tail -n 20)
$n: crashed or did not report (exit $rc)"
        echo "0 1 1 $secs" > "$tmp/res.$n"
    else
        p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')
        f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed$/\1/')
        brk=0
        if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
            report="$report
FAIL $n: ran no check"
            f=1; brk=1
        elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
            report="$report
$n: exit status $rc"
            f=1; brk=1
        fi
        report="$report
$line ($secs s)"
        echo "$p $f $brk $secs" > "$tmp/res.$n"
    fi
    printf '%s\n' "$report" | sed '/^$/d'
}

# a lane: every test of the list it is first to claim (mkdir is atomic)
lane() {
    while read -r t; do
        mkdir "$tmp/claim.$(basename "$t")" 2>/dev/null || continue
        run_one "$t"
    done < "$tmp/list"
}
i=0
while [ "$i" -lt "$jobs" ]; do lane & i=$((i + 1)); done
wait

passed=0; failed=0; broken=""
: > "$tmp/times"
while read -r t; do
    n=$(basename "$t")
    if [ ! -f "$tmp/res.$n" ]; then
        echo "$n: did not run"; failed=$((failed + 1)); broken="$broken $n"; continue
    fi
    read -r p f brk secs < "$tmp/res.$n"
    passed=$((passed + p)); failed=$((failed + f))
    [ "$brk" -eq 0 ] || broken="$broken $n"
    echo "$n $secs" >> "$tmp/times"
done < "$tmp/list"
# this run's times, and the last ones of tests it did not run
awk 'NR == FNR { seen[$1] = 1; print; next } !($1 in seen)' "$tmp/times" "$times" > "$tmp/times.all" 2>/dev/null
cp "$tmp/times.all" "$times" 2>/dev/null
[ -z "$broken" ] || echo "crashed, failed with no failed check counted, or ran no check:$broken"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
