#!/bin/sh
# Fetches the test fixtures that are not in the repository into a cache outside it:
#   vocab/ggml-vocab-{llama-spm,llama-bpe,qwen2,gpt-2,phi-3}.gguf and their .inp/.out
#   llama.cpp's vocabulary-only GGUF files (Llama 2 SentencePiece, Llama 3, Qwen2, GPT-2, Phi-3) with its
#   tokenizer test vectors, taken from vendor/llama.cpp/models/ of PyPI's llama-cpp-python 0.3.36
#   source package (downloaded with pip, kept beside them so a damaged file is restored offline).
# Every file is checked against tests/fixtures.sha256. Prints nothing when all is in place;
# otherwise says what it fetches, and fails (exit 1) with what to download and where to put it
# when it cannot (offline, no pip, a sum that does not match).
# Usage (from the repository root): sh tests/fixtures.sh
#   LLM_FIXTURES  the cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/llm.c); tests read the
#                 vocabularies from $LLM_FIXTURES/vocab (LLM_VOCAB_DIR)
#   PYTHON        the Python that runs pip (default python3)
set -u
cache=${LLM_FIXTURES:-${XDG_CACHE_HOME:-$HOME/.cache}/llm.c}
sums=tests/fixtures.sha256
pkg=llama-cpp-python
version=0.3.36
archive=llama_cpp_python-$version.tar.gz
url=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/$archive
members=llama_cpp_python-$version/vendor/llama.cpp/models

[ -f "$sums" ] || { echo "tests/fixtures.sh: run it from the repository root ($sums not found)" >&2; exit 1; }

sha256() {
    if command -v sha256sum >/dev/null 2>&1; then sha256sum < "$1"; else shasum -a 256 < "$1"; fi | cut -d' ' -f1
}
want_sum() { grep -v '^#' "$sums" | awk -v p="$1" '$2 == p { print $1 }'; }
# ok PATH: the cached file PATH (relative to the cache) exists and has its recorded sum
ok() { [ -f "$cache/$1" ] && [ "$(sha256 "$cache/$1")" = "$(want_sum "$1")" ]; }

fail() {
    echo "tests/fixtures.sh: $*" >&2
    cat >&2 <<EOF
The tests need llama.cpp's vocabulary files from PyPI's $pkg $version source package.
Download it (pip download --no-deps --no-binary $pkg $pkg==$version, or
  $url
sha256 $(want_sum "$archive")) and put it at
  $cache/$archive
then run make test again (LLM_FIXTURES=DIR, for make or this script, chooses another cache).
EOF
    exit 1
}

files=$(grep -v '^#' "$sums" | awk '$2 ~ /^vocab\// { print $2 }')
missing=""
for f in $files; do
    ok "$f" && continue
    [ -f "$cache/$f" ] && echo "tests/fixtures.sh: $cache/$f does not have its sha256 ($sums): extracting it again"
    missing="$missing $f"
done
[ -z "$missing" ] && exit 0

mkdir -p "$cache/vocab" || fail "cannot create $cache/vocab"
tmp=$(mktemp -d "$cache/tmp.XXXXXX") || fail "cannot create a folder in $cache"
trap 'rm -rf "$tmp"' EXIT INT TERM

if [ ! -f "$cache/$archive" ]; then
    echo "tests/fixtures.sh: downloading $pkg $version from PyPI into $cache (76 MB, once)"
    py=${PYTHON:-python3}
    # pip download fetches the archive without installing anything (also where the system
    # Python is externally managed, PEP 668); it reads the package's metadata with its build
    # backend, which it installs into a temporary folder.
    "$py" -m pip download --no-deps --no-binary "$pkg" --disable-pip-version-check -d "$tmp" "$pkg==$version" \
        > "$tmp/pip.log" 2>&1 || { tail -n 5 "$tmp/pip.log" >&2; fail "pip download failed (offline? no pip for $py?)"; }
    [ -f "$tmp/$archive" ] || fail "pip download did not write $archive"
    got=$(sha256 "$tmp/$archive")
    [ "$got" = "$(want_sum "$archive")" ] || fail "the downloaded $archive has sha256 $got, not the one in $sums"
    mv "$tmp/$archive" "$cache/$archive" || fail "cannot write $cache/$archive"
fi
ok "$archive" || fail "$cache/$archive does not have the sha256 of $sums (delete it to download it again)"

names=""
for f in $missing; do names="$names $members/${f#vocab/}"; done
# shellcheck disable=SC2086   # names: member paths without spaces
tar -xzf "$cache/$archive" -C "$tmp" $names || fail "cannot extract$names from $cache/$archive"
for f in $missing; do
    got=$(sha256 "$tmp/$members/${f#vocab/}")
    [ "$got" = "$(want_sum "$f")" ] || fail "${f#vocab/} in $archive has sha256 $got, not the one in $sums"
    mv "$tmp/$members/${f#vocab/}" "$cache/$f" || fail "cannot write $cache/$f"
done
