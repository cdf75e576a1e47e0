#!/bin/sh
# Models by name, against a local stand-in for Hugging Face (tests/hf_server.py): llm pull
# REPO:QUANT (the repository's file list from the model API, the quantization as a word of the file
# name, split models whole), llm list, llm rm, and -m NAME / hf://REPO:QUANT on the commands.
# Usage: tests/test_models.sh LLM_BINARY MODELS_DIR
llm=$1
models=$2
case "$llm" in /*) ;; *) llm=$(pwd)/$llm ;; esac   # (some checks run in another folder)
pass=0; fail=0
tmp=${TMPDIR:-/tmp}/llm-models-test.$$
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL test_models: $*"; }
finish() { echo "test_models: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
# expect_fail NAME WORD CMD...: exit status 1 (not a crash) and WORD on stderr (in $err after)
expect_fail() {
    name=$1; word=$2; shift 2
    err=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$rc" -ne 1 ]; then bad "$name: exit status $rc (want 1): $err"; return; fi
    case "$err" in *"$word"*) ok ;; *) bad "$name: message '$err' lacks '$word'" ;; esac
}
# has NAME TEXT WORD...: each WORD is in TEXT
has() {
    name=$1; text=$2; shift 2
    for w in "$@"; do
        case "$text" in *"$w"*) ;; *) bad "$name: '$w' is not in: $text"; return ;; esac
    done
    ok
}

command -v python3 >/dev/null 2>&1 || { bad "python3 is needed for the test server"; finish; }
for f in tiny-q4_0 tiny-q4_1 tiny-q4_k_m tiny-q8_0; do
    [ -f "$models/$f.gguf" ] || { bad "$models/$f.gguf is missing (make models)"; finish; }
done
# the repositories: ROOT/NAME holds repository OWNER/NAME's files (tests/hf_server.py)
r=$tmp/root
mkdir -p "$r/quants" "$r/twins" "$r/split/Q8_0" "$r/plain8" "$r/solo" "$r/several" "$r/nogguf" "$r/broken" \
    "$tmp/cache" "$tmp/wd"
cp "$models/tiny-q4_k_m.gguf" "$r/quants/tiny-Q4_K_M.gguf"
cp "$models/tiny-q8_0.gguf" "$r/quants/tiny-Q8_0.gguf"
for f in tiny-IQ4_K_M tiny-Q4_K_M_L mmproj-tiny-Q4_K_M tiny-Q4_K_M-imatrix; do echo "not this one" > "$r/quants/$f.gguf"; done
echo "# a model card" > "$r/quants/README.md"
cp "$models/tiny-q4_0.gguf" "$r/twins/a-Q4_0.gguf"
cp "$models/tiny-q4_1.gguf" "$r/twins/b-Q4_0.gguf"
cp "$models/tiny-q8_0.gguf" "$r/split/Q8_0/big-Q8_0-00001-of-00003.gguf"
python3 -c 'import sys; sys.stdout.buffer.write(bytes((i * 7 + i // 251) % 256 for i in range(300000)))' \
    > "$r/split/Q8_0/big-Q8_0-00002-of-00003.gguf"
head -c 1234 "$r/split/Q8_0/big-Q8_0-00002-of-00003.gguf" > "$r/split/Q8_0/big-Q8_0-00003-of-00003.gguf"
echo "not this one" > "$r/split/small-Q4_0.gguf"
cp "$models/tiny-q8_0.gguf" "$r/plain8/x-Q8_0.gguf"
echo "not this one" > "$r/plain8/x-F16.gguf"
cp "$models/tiny-q4_0.gguf" "$r/solo/tiny.gguf"
echo x > "$r/several/a.gguf"; echo x > "$r/several/b.gguf"
echo x > "$r/nogguf/README.md"
cp "$models/tiny-q4_0.gguf" "$r/broken/part-00001-of-00002.gguf"
python3 tests/hf_server.py --root "$r" --port-file "$tmp/port" --log "$tmp/log" &
server=$!
for _ in $(seq 100); do [ -f "$tmp/port" ] && break; sleep 0.1; done
[ -f "$tmp/port" ] || { bad "the test server did not start"; finish; }
export LLM_HF_ENDPOINT="http://127.0.0.1:$(cat "$tmp/port")/"
export XDG_CACHE_HOME="$tmp/cache"
hf=$tmp/cache/llm.c/hf
: > "$tmp/log"
# files REPO: the files of REPO requested (not the model API), in order
files() { grep "^/$1/resolve/main/" "$tmp/log" | sed "s|^/$1/resolve/main/||; s| .*||" | tr '\n' ' '; }
api() { grep -c "^/api/models/$1 " "$tmp/log"; }

# an empty cache (no folder yet): a line saying how to pull, exit 0
out=$("$llm" list 2>&1); rc=$?
[ "$rc" = 0 ] && has "list of an empty cache" "$out" "no models in the cache" "llm pull REPO:QUANT"
out=$("$llm" list --json 2>&1) && [ "$out" = "[]" ] && ok || bad "list --json of an empty cache: '$out'"
expect_fail "list with a bad flag" "unknown argument" "$llm" list --frob

# REPO:QUANT: the file whose name has QUANT as a word (not IQ4_K_M, Q4_K_M_L, a projector or an
# importance matrix), any case; the model API asked, that file alone downloaded
out=$("$llm" pull plain/quants:Q4_K_M 2>"$tmp/err") || bad "pull plain/quants:Q4_K_M: $(cat "$tmp/err")"
[ "$out" = "$hf/plain/quants/tiny-Q4_K_M.gguf" ] && cmp -s "$out" "$r/quants/tiny-Q4_K_M.gguf" && ok ||
    bad "pull :Q4_K_M printed '$out': $(cat "$tmp/err")"
[ "$(api plain/quants)" = 1 ] && [ "$(files plain/quants)" = "tiny-Q4_K_M.gguf " ] && ok ||
    bad "pull :Q4_K_M: api requests $(api plain/quants), files '$(files plain/quants)'"
out=$("$llm" pull plain/quants:q8_0 2>"$tmp/err") && [ "$out" = "$hf/plain/quants/tiny-Q8_0.gguf" ] &&
    cmp -s "$out" "$r/quants/tiny-Q8_0.gguf" && ok || bad "pull :q8_0 printed '$out': $(cat "$tmp/err")"
# REPO alone: Q4_K_M first (in the cache already: nothing downloaded), else Q8_0, else the only model
out=$("$llm" pull plain/quants 2>"$tmp/err") && [ "$out" = "$hf/plain/quants/tiny-Q4_K_M.gguf" ] &&
    [ "$(files plain/quants)" = "tiny-Q4_K_M.gguf tiny-Q8_0.gguf " ] && ok ||
    bad "pull plain/quants (default) printed '$out', files '$(files plain/quants)': $(cat "$tmp/err")"
out=$("$llm" pull plain/plain8 2>"$tmp/err") && [ "$out" = "$hf/plain/plain8/x-Q8_0.gguf" ] && ok ||
    bad "pull plain/plain8 (default Q8_0) printed '$out': $(cat "$tmp/err")"
out=$("$llm" pull hf://plain/solo 2>"$tmp/err") && [ "$out" = "$hf/plain/solo/tiny.gguf" ] && ok ||
    bad "pull hf://plain/solo (the only model) printed '$out': $(cat "$tmp/err")"
# no match, several, none by default: exit 1 listing the models; nothing downloaded
expect_fail "no file has the quant" "no GGUF model of plain/quants has 'Q3_K_S'" "$llm" pull plain/quants:Q3_K_S
has "no match lists the models" "$err" "Q4_K_M     tiny-Q4_K_M.gguf" "Q8_0       tiny-Q8_0.gguf" "tiny-IQ4_K_M.gguf"
case "$err" in *mmproj* | *imatrix*) bad "the list of models has a projector or an importance matrix: $err" ;; *) ok ;; esac
expect_fail "a quant inside a word" "has 'Q4_K' in its name" "$llm" pull plain/quants:Q4_K
expect_fail "two files have the quant" "2 GGUF models of plain/twins match 'Q4_0'" "$llm" pull plain/twins:Q4_0
has "ambiguous quant lists them" "$err" "a-Q4_0.gguf" "b-Q4_0.gguf"
expect_fail "no default model" "none of them Q4_K_M or Q8_0" "$llm" pull plain/several
has "no default lists the models" "$err" "a.gguf" "b.gguf"
[ ! -e "$hf/plain/twins" ] && [ ! -e "$hf/plain/several" ] && ok || bad "a refused pull downloaded: $(ls -R "$hf/plain")"
expect_fail "a repository without GGUF files" "has no GGUF model file" "$llm" pull plain/nogguf
expect_fail "a split model with a part missing" "lists only some of the 2 parts" "$llm" pull plain/broken
expect_fail "no such repository" "no such repository" "$llm" pull plain/gone:Q4_0
expect_fail "a gated repository" "access refused (HTTP 403" "$llm" pull gated/quants:Q4_K_M
expect_fail "an answer that is not JSON" "not a model's description" "$llm" pull nojson/quants:Q4_K_M
expect_fail "a bad quant" "REPO:QUANT's QUANT" "$llm" pull "plain/quants:Q4/K"
expect_fail "an empty quant" "REPO:QUANT's QUANT" "$llm" pull plain/quants:
expect_fail "a bad repository" "not a Hugging Face repository name" "$llm" pull "../x:Q4_0"
expect_fail "no network" "cannot reach" env LLM_HF_ENDPOINT=http://127.0.0.1:1 "$llm" pull plain/quants:Q4_0

# a split model: every part, byte for byte; the path printed is the first part's
out=$("$llm" pull plain/split:Q8_0 2>"$tmp/err") || bad "pull plain/split:Q8_0: $(cat "$tmp/err")"
[ "$out" = "$hf/plain/split/Q8_0/big-Q8_0-00001-of-00003.gguf" ] && ok || bad "pull of a split model printed '$out'"
for i in 1 2 3; do
    f=Q8_0/big-Q8_0-0000$i-of-00003.gguf
    cmp -s "$r/split/$f" "$hf/plain/split/$f" && ok || bad "split model: part $i differs or is missing"
done
[ ! -e "$hf/plain/split/small-Q4_0.gguf" ] && ok || bad "split model: another file was downloaded"

# -m hf://REPO:QUANT: a model the cache holds is used without asking the server; else pulled
n=$(wc -l < "$tmp/log")
out=$("$llm" info -m hf://plain/quants:Q8_0 2>"$tmp/err") || bad "info -m hf://plain/quants:Q8_0: $(cat "$tmp/err")"
has "-m hf://REPO:QUANT in the cache" "$out" "$hf/plain/quants/tiny-Q8_0.gguf"
[ "$(wc -l < "$tmp/log")" = "$n" ] && ok || bad "-m hf://REPO:QUANT of a cached model asked the server: $(tail -n 2 "$tmp/log")"
out=$("$llm" info -m hf://plain/twins:b-Q4_0 2>"$tmp/err") || bad "info -m hf://plain/twins:b-Q4_0: $(cat "$tmp/err")"
has "-m hf://REPO:QUANT pulled" "$out" "$hf/plain/twins/b-Q4_0.gguf"
[ "$(files plain/twins)" = "b-Q4_0.gguf " ] && ok || bad "-m hf://plain/twins:b-Q4_0 downloaded '$(files plain/twins)'"

# llm list: name, size, architecture, type, path; a split model once (its size the parts'); a file
# that is no GGUF listed as such; an incomplete split model marked; a .part is no model
mkdir -p "$hf/local/junk" "$hf/local/inc"
echo "not a model" > "$hf/local/junk/junk.gguf"
cp "$models/tiny-q4_0.gguf" "$hf/local/inc/inc-00001-of-00002.gguf"
echo "half a download" > "$hf/local/junk/coming.gguf.part"
out=$("$llm" list 2>"$tmp/err") || bad "list: $(cat "$tmp/err")"
line() { printf '%s\n' "$out" | grep "^$1 "; }
has "list: the header" "$(printf '%s\n' "$out" | head -n 1)" NAME SIZE ARCH TYPE PATH
has "list: a Q4_K_M model" "$(line plain/quants/tiny-Q4_K_M)" "2.5 MB" llama Q4_K_M "$hf/plain/quants/tiny-Q4_K_M.gguf"
has "list: a Q8_0 model" "$(line plain/quants/tiny-Q8_0)" "3.9 MB" llama Q8_0 "$hf/plain/quants/tiny-Q8_0.gguf"
has "list: a split model" "$(line plain/split/Q8_0/big-Q8_0)" "4.2 MB" llama Q8_0 \
    "$hf/plain/split/Q8_0/big-Q8_0-00001-of-00003.gguf" "the first of 3 parts"
has "list: not a GGUF file" "$(line local/junk/junk)" "not GGUF" "$hf/local/junk/junk.gguf"
has "list: an incomplete split model" "$(line local/inc/inc)" "incomplete: 1 of 2 parts"
has "list: a download in progress" "$out" "1 download not finished"
[ "$(printf '%s\n' "$out" | grep -c coming)" = 0 ] && [ "$(printf '%s\n' "$out" | grep -c 'big-Q8_0')" = 1 ] && ok ||
    bad "list: a .part or a part of a split model listed as a model: $out"
"$llm" list --json > "$tmp/list.json" 2>"$tmp/err" || bad "list --json: $(cat "$tmp/err")"
python3 - "$tmp/list.json" "$hf" <<'EOF_PY' && ok || bad "list --json: $(cat "$tmp/list.json")"
import json, sys
m = {x["name"]: x for x in json.load(open(sys.argv[1]))}
hf = sys.argv[2]
a = m["plain/quants/tiny-Q4_K_M"]
assert (a["architecture"], a["type"], a["gguf"], a["parts"], a["complete"]) == ("llama", "Q4_K_M", True, 1, True), a
assert a["path"] == hf + "/plain/quants/tiny-Q4_K_M.gguf" and a["size"] > 2000000, a
s = m["plain/split/Q8_0/big-Q8_0"]
assert (s["parts"], s["complete"], s["type"], s["size"]) == (3, True, "Q8_0", 3932736 + 300000 + 1234), s
j = m["local/junk/junk"]
assert (j["gguf"], j["architecture"], j["type"]) == (False, None, None), j
assert m["local/inc/inc"]["complete"] is False
assert not any("coming" in k for k in m), m
EOF_PY

# -m NAME: a piece of one model's name, in any case; the whole name; the first part of a split
# model; several or none: exit 1 saying which
out=$("$llm" info -m q4_k_m 2>"$tmp/err") && has "-m a piece of a name" "$out" "$hf/plain/quants/tiny-Q4_K_M.gguf" ||
    bad "info -m q4_k_m: $(cat "$tmp/err")"
out=$("$llm" info -m plain/quants/tiny-Q8_0 2>"$tmp/err") && has "-m a whole name" "$out" "tiny-Q8_0.gguf" ||
    bad "info -m plain/quants/tiny-Q8_0: $(cat "$tmp/err")"
out=$("$llm" info -m big 2>"$tmp/err") && has "-m a split model" "$out" "big-Q8_0-00001-of-00003.gguf" ||
    bad "info -m big: $(cat "$tmp/err")"
expect_fail "-m a piece of several names" "names 2 models of the cache" "$llm" run -m tiny-q -p hi -n 1
has "-m ambiguous lists them" "$err" "plain/quants/tiny-Q4_K_M" "plain/quants/tiny-Q8_0"
expect_fail "-m an unknown name" "neither a file nor a model in the cache" "$llm" run -m no-such-model -p hi -n 1
has "-m unknown says how" "$err" "llm list" "llm pull"
expect_fail "-m an incomplete split model" "split into 2 parts, and 1 of them" "$llm" run -m local/inc -p hi -n 1
expect_fail "--speculative-model by name" "names 2 models" "$llm" run -m plain/solo/tiny --speculative-model tiny-q -p hi
# an existing file is a file, even when a model's name holds its name
cp "$models/tiny-q4_1.gguf" "$tmp/wd/q8_0"
out=$(cd "$tmp/wd" && "$llm" info -m q8_0 2>&1) && has "-m an existing file" "$out" "file:          q8_0 " ||
    bad "info -m q8_0 (a file in the folder): $out"
# llm quantize's IN by name
"$llm" quantize --allow-requantize tiny-q8 "$tmp/wd/requant.gguf" q4_0 >/dev/null 2>"$tmp/err" && [ -s "$tmp/wd/requant.gguf" ] &&
    ok || bad "quantize tiny-q8 (by name): $(cat "$tmp/err")"
# a part of a split model that does not load (a GGUF file of one key, no tensor): the message says
# that llm reads one file; not for a file that is no GGUF
python3 -c 'import struct, sys
s = lambda t: struct.pack("<Q", len(t)) + t
sys.stdout.buffer.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + s(b"general.architecture") + struct.pack("<I", 8) + s(b"llama"))' \
    > "$tmp/wd/m-00001-of-00002.gguf"
expect_fail "-m a split model's first part" "llama-gguf-split --merge" "$llm" run -m "$tmp/wd/m-00001-of-00002.gguf" -p hi
echo "junk" > "$tmp/wd/j-00001-of-00002.gguf"
expect_fail "-m a junk file named as a part" "not a GGUF file" "$llm" run -m "$tmp/wd/j-00001-of-00002.gguf" -p hi
case "$err" in *gguf-split*) bad "a file that is no GGUF got the note on split models: $err" ;; *) ok ;; esac

# run -m a piece of the name, in a cache of its own: the tokens of the file itself
"$llm" pull plain/solo >/dev/null 2>&1
want=$("$llm" run -m "$models/tiny-q4_0.gguf" --tokens 1,300 -n 4 --temp 0 --json -t 1 2>/dev/null | sed 's/"prompt_tps.*//')
mkdir -p "$tmp/c2"
XDG_CACHE_HOME=$tmp/c2 "$llm" pull plain/solo:tiny >/dev/null 2>"$tmp/err" || bad "pull into a new cache: $(cat "$tmp/err")"
got=$(cd "$tmp/wd" && XDG_CACHE_HOME=$tmp/c2 "$llm" run -m tin --tokens 1,300 -n 4 --temp 0 --json -t 1 2>"$tmp/err" |
      sed 's/"prompt_tps.*//')
[ -n "$want" ] && [ "$got" = "$want" ] && ok || bad "run -m tin: '$got' vs '$want': $(cat "$tmp/err")"
XDG_CACHE_HOME=$tmp/c2 "$llm" run -m tin -p hi -n 2 -t 1 >/dev/null 2>"$tmp/err" && ok || bad "run -m tin -p hi: $(cat "$tmp/err")"
# the cache's last model removed: every folder in it goes, the cache's own stays
XDG_CACHE_HOME=$tmp/c2 "$llm" rm tin >/dev/null 2>"$tmp/err" || bad "rm tin: $(cat "$tmp/err")"
[ -d "$tmp/c2/llm.c/hf" ] && [ -z "$(ls -A "$tmp/c2/llm.c/hf")" ] && ok || bad "rm of the last model: $(find "$tmp/c2" | tr '\n' ' ')"

# llm rm: several named, or none: nothing goes; a model goes whole, with the folders it leaves
# empty, never the cache's folder; nothing outside the cache, not even through a link in it
expect_fail "rm a piece of several names" "names 2 models" "$llm" rm tiny-q
[ -f "$hf/plain/quants/tiny-Q4_K_M.gguf" ] && [ -f "$hf/plain/quants/tiny-Q8_0.gguf" ] && ok || bad "an ambiguous rm removed"
expect_fail "rm an unknown name" "no model in the cache" "$llm" rm no-such-model
expect_fail "rm without a name" "usage: llm rm NAME" "$llm" rm
expect_fail "rm, one name of two unknown" "no model in the cache" "$llm" rm plain/solo/tiny no-such-model
[ -f "$hf/plain/solo/tiny.gguf" ] && ok || bad "rm with an unknown name removed the known one"
mkdir -p "$tmp/outside"
cp "$models/tiny-q4_0.gguf" "$tmp/outside/victim.gguf"
ln -s "$tmp/outside" "$hf/link"
out=$("$llm" list 2>&1)
case "$out" in *victim*) bad "list follows a link to a folder out of the cache: $out" ;; *) ok ;; esac
expect_fail "rm a file out of the cache" "no model in the cache" "$llm" rm "$tmp/outside/victim.gguf"
expect_fail "rm through a link" "no model in the cache" "$llm" rm victim
[ -f "$tmp/outside/victim.gguf" ] && ok || bad "rm removed a file out of the cache"
out=$("$llm" rm big 2>"$tmp/err") || bad "rm big: $(cat "$tmp/err")"
has "rm says what it removed" "$out" "removed $hf/plain/split/Q8_0/big-Q8_0-00001-of-00003.gguf" \
    "big-Q8_0-00003-of-00003.gguf" "removed the empty folder $hf/plain/split"
[ ! -e "$hf/plain/split" ] && [ -d "$hf/plain/quants" ] && ok || bad "rm big left $(find "$hf/plain/split" 2>&1 | tr '\n' ' ')"
"$llm" rm plain/quants/tiny-Q8_0 >/dev/null 2>"$tmp/err" && [ ! -e "$hf/plain/quants/tiny-Q8_0.gguf" ] &&
    [ -f "$hf/plain/quants/tiny-Q4_K_M.gguf" ] && ok || bad "rm plain/quants/tiny-Q8_0: $(cat "$tmp/err")"
"$llm" rm "$hf/local/junk/junk.gguf" >/dev/null 2>"$tmp/err" && [ ! -e "$hf/local/junk/junk.gguf" ] &&
    [ -f "$hf/local/junk/coming.gguf.part" ] && ok || bad "rm by the path in the cache: $(cat "$tmp/err")"
"$llm" rm q4_k_m plain8 plain/solo/tiny twins local/inc >/dev/null 2>"$tmp/err" || bad "rm of the rest: $(cat "$tmp/err")"
out=$("$llm" list 2>&1)
has "list after rm" "$out" "no models in the cache" "1 download not finished"
[ -d "$hf" ] && [ ! -e "$hf/plain" ] && [ ! -e "$hf/local/inc" ] && [ -d "$hf/local/junk" ] && ok ||
    bad "rm of the rest left: $(find "$hf" | tr '\n' ' ')"
finish
