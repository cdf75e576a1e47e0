#!/bin/sh
# tests/fixtures.sh removes nothing it did not make: its cache is not llm pull's (the user's
# downloads, ${XDG_CACHE_HOME:-~/.cache}/llm.c/hf), a folder in the place of hf/ or venv/ that it
# did not make (no stamp, no mark) stops it and is left as it is, and its own hf/ is replaced by
# a rename that neither nests in nor mixes with what is there. Runs the script's last step of hf/
# (install-hf) and its venv/ part against temporary caches: no download, no conversion (a python
# that refuses pip and venv makes sure).
# Usage: tests/test_fixtures.sh [LLM_BINARY MODELS_DIR]   (neither is used)
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_fixtures: $*"; }
finish() { echo "test_fixtures: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llm-fixtures-test.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
command -v python3 >/dev/null 2>&1 || { bad "python3 is needed (tests/fixtures.sh renames with it)"; finish; }

# python3 for the script, but never pip or venv: nothing is fetched or installed
cat > "$tmp/python" <<'EOF'
#!/bin/sh
case "$1 $2" in "-m pip" | "-m venv") echo "test_fixtures: no $2 in this test" >&2; exit 1 ;; esac
exec python3 "$@"
EOF
chmod +x "$tmp/python"
export PYTHON="$tmp/python"
export XDG_CACHE_HOME="$tmp/xdg"
unset LLM_FIXTURES
hex=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
# fixture DIR WORD: a folder as hf() makes it (its stamp) holding the file "what" with WORD
fixture() { mkdir -p "$1" && echo "$hex $hex pkgs==1" > "$1/stamp" && echo "$2" > "$1/what"; }
# fx ARGS...: tests/fixtures.sh ARGS, its messages in $tmp/err; its exit status
fx() { sh tests/fixtures.sh "$@" > "$tmp/err" 2>&1; }

# the default cache is llm.c-tests, beside llm pull's llm.c/hf and its user's downloads, which
# stay as they are
pulled=$XDG_CACHE_HOME/llm.c/hf/alice/model/model.gguf
mkdir -p "${pulled%/*}" && echo "a download" > "$pulled"
cache=$XDG_CACHE_HOME/llm.c-tests
fixture "$cache/new.1" one
fx install-hf "$cache/new.1" && ok || bad "install-hf into the default cache: $(cat "$tmp/err")"
[ "$(cat "$cache/hf/what" 2>/dev/null)" = one ] && ok || bad "the fixtures are not in $cache/hf: $(cat "$tmp/err")"
[ "$(cat "$pulled")" = "a download" ] && [ "$(ls "$XDG_CACHE_HOME/llm.c")" = hf ] &&
    [ "$(ls "$XDG_CACHE_HOME/llm.c/hf")" = alice ] && ok ||
    bad "llm pull's cache changed: $(find "$XDG_CACHE_HOME/llm.c" | tr '\n' ' ')"

# its own hf/ replaced: the new content alone, nothing nested, nothing else left in the cache
fixture "$cache/new.2" two
fx install-hf "$cache/new.2" && ok || bad "install-hf over the script's own hf/: $(cat "$tmp/err")"
[ "$(cat "$cache/hf/what" 2>/dev/null)" = two ] && [ "$(ls "$cache/hf" | tr '\n' ' ')" = "stamp what " ] && ok ||
    bad "the replaced hf/ holds: $(ls "$cache/hf" | tr '\n' ' ')"
[ "$(ls "$cache")" = hf ] && ok || bad "left in the cache: $(ls "$cache" | tr '\n' ' ')"

# a folder without a stamp where hf/ goes (llm pull's downloads, when the caches were one):
# refused with a message, left as it is, the new fixtures not moved into it
export LLM_FIXTURES="$tmp/shared"
mkdir -p "$LLM_FIXTURES/hf/bob/model" && echo "bob's download" > "$LLM_FIXTURES/hf/bob/model/model.gguf"
fixture "$LLM_FIXTURES/new.3" three
fx install-hf "$LLM_FIXTURES/new.3"; rc=$?
[ "$rc" = 1 ] && grep -q "was not made by this script" "$tmp/err" && ok ||
    bad "install-hf over a folder without a stamp: exit status $rc, $(cat "$tmp/err")"
[ "$(cat "$LLM_FIXTURES/hf/bob/model/model.gguf")" = "bob's download" ] && [ "$(ls "$LLM_FIXTURES/hf")" = bob ] && ok ||
    bad "the folder without a stamp changed: $(find "$LLM_FIXTURES/hf" | tr '\n' ' ')"
[ -f "$LLM_FIXTURES/new.3/what" ] && ok || bad "the new fixtures went elsewhere: $(find "$LLM_FIXTURES" | tr '\n' ' ')"
# an empty one too (rename(2) would replace it)
export LLM_FIXTURES="$tmp/empty"
mkdir -p "$LLM_FIXTURES/hf"
fixture "$LLM_FIXTURES/new.4" four
fx install-hf "$LLM_FIXTURES/new.4"; rc=$?
[ "$rc" = 1 ] && [ -d "$LLM_FIXTURES/hf" ] && [ -z "$(ls "$LLM_FIXTURES/hf")" ] && [ -f "$LLM_FIXTURES/new.4/what" ] && ok ||
    bad "install-hf over an empty folder without a stamp: exit status $rc, $(cat "$tmp/err")"

# a venv/ the script did not make (no mark), without the packages: refused, left as it is
export LLM_FIXTURES="$tmp/venv"
mkdir -p "$LLM_FIXTURES/venv" && echo "someone's" > "$LLM_FIXTURES/venv/file"
fx venv; rc=$?
[ "$rc" = 1 ] && grep -q "was not made by this script" "$tmp/err" && ok ||
    bad "venv over a folder without the mark: exit status $rc, $(cat "$tmp/err")"
[ "$(cat "$LLM_FIXTURES/venv/file" 2>/dev/null)" = "someone's" ] && [ "$(ls "$LLM_FIXTURES/venv")" = file ] && ok ||
    bad "the venv without the mark changed: $(find "$LLM_FIXTURES" | tr '\n' ' ')"

# make's default is the same cache
if command -v make >/dev/null 2>&1; then
    out=$(unset LLM_FIXTURES MAKEFLAGS MFLAGS; make -s -n fixtures 2>&1)
    case "$out" in *"LLM_FIXTURES=\"$XDG_CACHE_HOME/llm.c-tests\""*) ok ;; *) bad "make's LLM_FIXTURES: $out" ;; esac
fi
finish
