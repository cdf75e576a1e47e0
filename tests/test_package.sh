#!/bin/sh
# The split between the engine and the program, and the library: the program's sources (cli/)
# use llm.h alone, llm.c holds no program, llm.c's object defines and the shared library exports
# exactly the LLM_API functions of llm.h (the latter under its soname), and the README's example
# program (examples/hello.c, built against the library) generates the text `llm run` generates.
# Usage: tests/test_package.sh LLM_BINARY MODELS_DIR (the library and examples/hello are looked
# for next to LLM_BINARY)
llm=$1
models=$2
dir=$(dirname "$llm")
m=$models/tiny-q4_0.gguf
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_package: $*"; }

# the program: no engine internals, no include of anything of the project but llm.h and cli.h
[ -n "$(ls cli/*.c 2>/dev/null)" ] && ok || bad "no program sources in cli/"
hits=$(grep -n -e 'llm__' -e 'LLM__' cli/*.c cli/*.h)
[ -z "$hits" ] && ok || bad "engine internals in cli/: $hits"
hits=$(grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' cli/*.c cli/*.h | grep -v -e '"llm\.h"' -e '"cli\.h"')
[ -z "$hits" ] && ok || bad "cli/ includes more than llm.h and cli.h: $hits"
# the engine: no program
hits=$(grep -n -e 'LLM_MAIN' -e '^[a-z].*[[:space:]*]main[[:space:]]*(' llm.c)
[ -z "$hits" ] && ok || bad "llm.c holds a program: $hits"

# the engine's object and the shared library: the LLM_API functions of llm.h and nothing else
# (everything else in llm.c is static)
api=$(grep '^LLM_API' llm.h | sed 's/(.*//; s/.*[ *]//' | sort)
# same_as_api NAME SYMBOLS: SYMBOLS (one a line) are exactly llm.h's LLM_API functions
same_as_api() {
    if [ -n "$api" ] && [ "$api" = "$2" ]; then ok; return; fi
    printf '%s\n' "$api" > "${TMPDIR:-/tmp}/llm-api.$$"
    bad "$1 differ from llm.h's LLM_API functions: $(printf '%s\n' "$2" | diff "${TMPDIR:-/tmp}/llm-api.$$" - |
        grep '^[<>]' | tr '\n' ' ')"
    rm -f "${TMPDIR:-/tmp}/llm-api.$$"
}
# llm.c, the amalgamation: its object (an AMALG=1 build's, else compiled here without optimisation)
obj=$dir/pic/llm.o
if [ ! -f "$obj" ]; then
    obj=${TMPDIR:-/tmp}/llm-package.$$.o
    ${CC:-cc} -std=c11 -O0 -c -o "$obj" llm.c || bad "llm.c does not compile alone"
fi
if [ -f "$obj" ]; then
    same_as_api "the global symbols of llm.c's object" "$(nm -g --defined-only "$obj" | awk '{ print $3 }' | sort)"
else
    bad "no object of llm.c"
fi
[ "$obj" = "$dir/pic/llm.o" ] || rm -f "$obj"
so=$dir/libllm.so.$(awk '$2 == "LLM_VERSION_MAJOR" { print $3 }' llm.h)
if [ -f "$so" ]; then
    same_as_api "the symbols $so exports" "$(nm -D --defined-only "$so" | awk '{ print $3 }' | sort)"
    soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    [ "$soname" = "$(basename "$so")" ] && ok || bad "soname '$soname' of $so"
    # llm_has_backend: llm info --devices lists Vulkan devices exactly when the build calls Vulkan
    first=$("$llm" info --devices | head -n 1)
    if nm -D --undefined-only "$so" | grep -q ' vkCreateInstance$'; then
        [ "$first" = "Vulkan devices:" ] && ok || bad "a Vulkan build's info --devices: '$first'"
    else
        case "$first" in "this build has no GPU backend"*) ok ;; *) bad "a CPU build's info --devices: '$first'" ;; esac
    fi
else
    bad "no shared library $so (make lib)"
fi

# examples/hello.c: greedy, 32 tokens, the prompt and the text as llm run makes them
if [ -x "$dir/examples/hello" ]; then
    out=$("$dir/examples/hello" "$m" "hello world" 2>&1); rc=$?
    want="hello world$("$llm" run -m "$m" -p "hello world" -n 32 --temp 0 2>/dev/null)"
    [ "$rc" = 0 ] && [ "$out" != "hello world" ] && [ "$out" = "$want" ] && ok ||
        bad "hello: exit $rc, '$out', llm run: '$want'"
    err=$("$dir/examples/hello" "$models/nonexistent.gguf" 2>&1); rc=$?
    [ "$rc" = 1 ] && case "$err" in *nonexistent.gguf*) true ;; *) false ;; esac && ok ||
        bad "hello on a missing model: exit $rc, '$err'"
else
    bad "no $dir/examples/hello"
fi

# a build without libedit says so once, naming the package; one with it says nothing (make -n: the
# commands a build would run, none run), in a plain build whatever the make that runs the tests was given
# (make VULKAN=1 test-vulkan puts its build under BUILD/vulkan)
plain="VULKAN= CUDA= CUDA_EMU= AMALG= SAN="
n=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -n --no-print-directory $plain EDITLINE= \
    BUILD=build/editline-check build/editline-check/llm 2>&1 |
    grep -c 'libedit-dev')
[ "$n" = 1 ] && ok || bad "a build without libedit does not name libedit-dev once (make -n: $n lines)"
n=$(env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -n --no-print-directory $plain EDITLINE=1 \
    BUILD=build/editline-check build/editline-check/llm 2>&1 |
    grep -c 'libedit-dev')
[ "$n" = 0 ] && ok || bad "a build with libedit speaks of libedit-dev"

echo "test_package: $pass passed, $fail failed"
[ "$fail" = 0 ]
